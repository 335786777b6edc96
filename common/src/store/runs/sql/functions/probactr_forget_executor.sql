-- probactr_forget_executor: current body (first defined in 2026120801000001_runs_live_without_executor_key.sql).
--
-- No run table keeps a foreign key to `executors` (the history since
-- 2026112801000001_history_without_foreign_keys.sql, the live runs since the claim
-- stopped paying its check per run): this does what the keys did. A run in the history
-- keeps its row with no executor (ON DELETE SET NULL). Among the live runs only active
-- ones carry an executor, and an active run must have one: deleting an executor that
-- still owns one is refused, as it was under the key (housekeeping deletes only
-- executors owning none).
CREATE OR REPLACE FUNCTION probactr_forget_executor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM runs_live JOIN deleted_executors ON deleted_executors.id = runs_live.executor_id
               WHERE runs_live.state IN ('claimed', 'running')) THEN
        RAISE EXCEPTION 'an executor still owning live runs cannot be deleted'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    UPDATE runs_done SET executor_id = NULL WHERE executor_id IN (SELECT id FROM deleted_executors);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER executors_forget
    AFTER DELETE ON executors
    REFERENCING OLD TABLE AS deleted_executors
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_forget_executor();
