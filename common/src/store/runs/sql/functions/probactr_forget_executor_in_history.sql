-- probactr_forget_executor_in_history: current body (first defined in 2026112801000001_history_without_foreign_keys.sql).
--
-- The history keeps no foreign key to `executors` (see probactr_erase_job_history): what
-- ON DELETE SET NULL did, this does. A run of a deleted executor stays in the history
-- with no executor.
CREATE OR REPLACE FUNCTION probactr_forget_executor_in_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs_done SET executor_id = NULL WHERE executor_id IN (SELECT id FROM deleted_executors);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER executors_forget_in_history
    AFTER DELETE ON executors
    REFERENCING OLD TABLE AS deleted_executors
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_forget_executor_in_history();
