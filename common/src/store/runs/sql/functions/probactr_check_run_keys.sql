-- probactr_check_run_keys: current body (since 2026121201000001_runs_live_without_job_and_trigger_keys.sql, which drops the keys it replaces).
--
-- The live runs keep no foreign keys (see probactr_erase_job_runs): this does what their
-- checks did, once per inserting statement instead of once per run. A run that enters
-- the live partition must name a job and, if any, a trigger that exist; each is locked
-- KEY SHARE until the transaction ends, as the keys' checks locked them, so that a
-- concurrent delete of either waits for the run to be committed and then takes it along
-- (probactr_erase_job_runs, probactr_forget_trigger). A missing one fails the statement
-- as the key did (SQLSTATE 23503, naming `runs_live_job_exists` or
-- `runs_live_trigger_exists` as its constraint).
--
-- A firing transaction (`probactr.triggers_held` on, set by the due-trigger claim) inserts
-- runs only of the triggers its claim holds FOR UPDATE: they exist, and a delete of one
-- already waits for the commit. Their check is skipped there; it locked every fired
-- trigger a second time, a tenth of what a fire's insert cost PostgreSQL. So are their
-- jobs' checks: a held trigger's job exists (`triggers_job_id_fkey`), and deleting it
-- deletes the trigger (ON DELETE CASCADE), which waits for the firing's commit; the
-- job's erase then takes the fired runs along. Locking the job as well made a job
-- deleted while its trigger fired a deadlock: the delete held the job and waited for
-- the trigger, the firing held the trigger and waited for the job.
--
-- Runs enter the live partition only by an insert: every update that moves a run (a
-- claim given back, a reap) keeps it live, and one that ends it moves it to the history,
-- whose rows are checked by nobody (see probactr_erase_job_runs).
CREATE OR REPLACE FUNCTION probactr_check_run_keys() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    triggers_held BOOLEAN := coalesce(current_setting('probactr.triggers_held', true), '') = 'on';
    job_ids BIGINT[];
    trigger_ids BIGINT[];
BEGIN
    SELECT array_agg(DISTINCT job_id) FILTER (WHERE trigger_id IS NULL OR NOT triggers_held),
           array_agg(DISTINCT trigger_id) FILTER (WHERE trigger_id IS NOT NULL AND NOT triggers_held)
    INTO job_ids, trigger_ids
    FROM inserted WHERE state IN ('queued', 'claimed', 'running');
    IF job_ids IS NOT NULL
       AND (SELECT count(*) FROM (SELECT FROM jobs WHERE id = ANY (job_ids) FOR KEY SHARE) AS held)
           < cardinality(job_ids) THEN
        RAISE EXCEPTION 'a live run names a job that does not exist'
            USING ERRCODE = 'foreign_key_violation', TABLE = 'runs_live', COLUMN = 'job_id',
                  CONSTRAINT = 'runs_live_job_exists';
    END IF;
    IF trigger_ids IS NOT NULL
       AND (SELECT count(*) FROM (SELECT FROM triggers WHERE id = ANY (trigger_ids) FOR KEY SHARE) AS held)
           < cardinality(trigger_ids) THEN
        RAISE EXCEPTION 'a live run names a trigger that does not exist'
            USING ERRCODE = 'foreign_key_violation', TABLE = 'runs_live', COLUMN = 'trigger_id',
                  CONSTRAINT = 'runs_live_trigger_exists';
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_keys_checked
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_check_run_keys();
