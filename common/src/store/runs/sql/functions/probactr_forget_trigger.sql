-- probactr_forget_trigger: current body (first defined in 2026112801000001_history_without_foreign_keys.sql
-- as probactr_forget_trigger_in_history; the live runs since 2026121201000001_runs_live_without_job_and_trigger_keys.sql).
--
-- No run table keeps a foreign key to `triggers` (see probactr_erase_job_runs): what
-- ON DELETE SET NULL did, this does. A run of a deleted trigger, live or ended, stays
-- with no trigger.
CREATE OR REPLACE FUNCTION probactr_forget_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs_live SET trigger_id = NULL WHERE trigger_id IN (SELECT id FROM deleted_triggers);
    UPDATE runs_done SET trigger_id = NULL WHERE trigger_id IN (SELECT id FROM deleted_triggers);
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER triggers_forget
    AFTER DELETE ON triggers
    REFERENCING OLD TABLE AS deleted_triggers
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_forget_trigger();
