-- probactr_job_rate_window: current body (first defined with migration 2026120303000001).
--
-- A job taking a `rate` gets its `job_rate_windows` row, whose starts the claim locks and
-- updates (the claim never inserts one: it only updates rows that exist). Fired only for
-- a job with a rate; the row stays when the rate goes (the claim then reads it no more).
CREATE OR REPLACE FUNCTION probactr_job_rate_window() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_rate_windows (job_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_rate_window
    AFTER INSERT OR UPDATE OF rate ON jobs
    FOR EACH ROW WHEN (NEW.rate IS NOT NULL)
    EXECUTE FUNCTION probactr_job_rate_window();
