-- probactr_erase_job_runs: current body (first defined in 2026112801000001_history_without_foreign_keys.sql
-- as probactr_erase_job_history; the live runs since 2026121201000001_runs_live_without_job_and_trigger_keys.sql).
--
-- No run table carries a foreign key to `jobs`: the history (`runs_done`) so that
-- creating and dropping its day partitions locks no other table (see
-- probactr_maintain_run_partitions), the live runs so that an insert pays one check per
-- statement (probactr_check_run_keys) rather than one per run. What the keys' ON DELETE
-- CASCADE did is done here: deleting jobs deletes their live runs and erases their ended
-- ones, in one statement each per deleting statement.
--
-- A run inserted while its job is being deleted cannot be missed: its insert locks the
-- job KEY SHARE until it commits, so the delete of the job's row waits for it, and each
-- statement below, run after that, sees it. A firing's insert locks no job: the delete
-- waits instead for the trigger it cascades to, which the firing holds until it commits
-- (probactr_check_run_keys).
CREATE OR REPLACE FUNCTION probactr_erase_job_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM runs_live WHERE job_id IN (SELECT id FROM erased_jobs);
    DELETE FROM runs_done WHERE job_id IN (SELECT id FROM erased_jobs);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_erase_runs
    AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS erased_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_erase_job_runs();
