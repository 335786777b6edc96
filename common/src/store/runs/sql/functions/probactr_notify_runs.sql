-- probactr_notify_runs: current body (first defined in 20261121000001_core.sql).
--
-- Only inserts of runs claimable now wake executors: retries waiting out a backoff and
-- runs recorded as already ended do not.
CREATE OR REPLACE FUNCTION probactr_notify_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted WHERE state = 'queued' AND available_at <= now()) THEN
        PERFORM pg_notify('probactr_runs', '');
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_queued_notify
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_runs();
