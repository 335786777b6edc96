-- probactr_notify_triggers: current body (first defined in 20261121000001_core.sql).
--
-- Wakes sleeping executors when a trigger (or a workflow's trigger) changes, so that they
-- recompute their next firing (probactr_notify_runs does the same for queued runs). One
-- notification per statement: PostgreSQL folds identical payloads of a transaction into one.
-- An executor advancing next_fire_at as it fires sets `probactr.quiet` for its transaction:
-- its peers need no wake-up for instants it just handled.
CREATE OR REPLACE FUNCTION probactr_notify_triggers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('probactr.quiet', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('probactr_triggers', '');
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER triggers_changed
    AFTER INSERT OR UPDATE OF next_fire_at, paused OR DELETE ON triggers
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_triggers();

CREATE OR REPLACE TRIGGER workflow_triggers_changed
    AFTER INSERT OR UPDATE OF next_fire_at, paused OR DELETE ON workflow_triggers
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_triggers();
