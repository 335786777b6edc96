-- probactr_job_stats_inserted: current body (first defined in 20261121000004_job_stats.sql).
--
-- Counts runs inserted already ended (recorded as skipped or missed without being
-- queued). Statement-level over the transition table: one upsert per job per statement,
-- not one per run.
CREATE OR REPLACE FUNCTION probactr_job_stats_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    job_ids BIGINT[]; run_ids BIGINT[]; states TEXT[]; started TIMESTAMPTZ[]; finished TIMESTAMPTZ[];
BEGIN
    SELECT array_agg(job_id), array_agg(id), array_agg(state), array_agg(started_at), array_agg(finished_at)
    INTO job_ids, run_ids, states, started, finished
    FROM inserted_runs WHERE state NOT IN ('queued', 'claimed', 'running');
    IF job_ids IS NOT NULL THEN
        PERFORM probactr_job_stats_add(job_ids, run_ids, states, started, finished);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_stats_inserted
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_inserted();
