-- probactr_forget_trigger_in_history: current body (first defined in 2026112801000001_history_without_foreign_keys.sql).
--
-- The history keeps no foreign key to `triggers` (see probactr_erase_job_history): what
-- ON DELETE SET NULL did, this does. A run of a deleted trigger stays in the history
-- with no trigger.
CREATE OR REPLACE FUNCTION probactr_forget_trigger_in_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs_done SET trigger_id = NULL WHERE trigger_id IN (SELECT id FROM deleted_triggers);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER triggers_forget_in_history
    AFTER DELETE ON triggers
    REFERENCING OLD TABLE AS deleted_triggers
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_forget_trigger_in_history();
