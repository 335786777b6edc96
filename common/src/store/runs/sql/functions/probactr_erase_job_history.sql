-- probactr_erase_job_history: current body (first defined in 2026112801000001_history_without_foreign_keys.sql).
--
-- The history (`runs_done`) carries no foreign keys, so that creating and dropping its
-- day partitions locks no other table (see probactr_maintain_run_partitions). What the
-- foreign key's ON DELETE CASCADE did is done here: deleting jobs erases their ended
-- runs, in one statement per deleting statement. (`runs_live` keeps its foreign key: a
-- job's live runs go by cascade.)
CREATE OR REPLACE FUNCTION probactr_erase_job_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM runs_done WHERE job_id IN (SELECT id FROM erased_jobs);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_erase_history
    AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS erased_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_erase_job_history();
