-- probactr_job_stats_updated: current body (first defined in 20261121000004_job_stats.sql).
--
-- Counts runs that this statement moved from queued/claimed/running into a terminal
-- state. Rewriting an ended run (a cancel request on a finished run) counts nothing.
CREATE OR REPLACE FUNCTION probactr_job_stats_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    job_ids BIGINT[]; run_ids BIGINT[]; states TEXT[]; started TIMESTAMPTZ[]; finished TIMESTAMPTZ[];
BEGIN
    -- Most updates of runs (claims, starts, returns to the queue) end nothing: they pay
    -- one pass over their new rows, not the join.
    IF NOT EXISTS (SELECT 1 FROM updated_runs WHERE state NOT IN ('queued', 'claimed', 'running')) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(after.job_id), array_agg(after.id), array_agg(after.state),
           array_agg(after.started_at), array_agg(after.finished_at)
    INTO job_ids, run_ids, states, started, finished
    FROM updated_runs AS after JOIN previous_runs AS before ON before.id = after.id
    WHERE before.state IN ('queued', 'claimed', 'running')
      AND after.state NOT IN ('queued', 'claimed', 'running');
    IF job_ids IS NOT NULL THEN
        PERFORM probactr_job_stats_add(job_ids, run_ids, states, started, finished);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_stats_updated
    AFTER UPDATE ON runs
    REFERENCING OLD TABLE AS previous_runs NEW TABLE AS updated_runs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_updated();
