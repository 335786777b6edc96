-- probactr_trigger_capped: current body (first defined with migration 2026120201000001).
--
-- Keeps a trigger's cap true to its runs when `max_concurrency` changes: its queued runs
-- take the new cap (`runs.trigger_cap`, what the claim tests; NULL: no bound), and a
-- trigger gaining a cap counts its runs already claimed or running, so that the cap holds
-- from then on (they give their places back as they end, like the runs the claim counts).
CREATE OR REPLACE FUNCTION probactr_trigger_capped() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    counted INTEGER;
BEGIN
    UPDATE runs_live SET trigger_cap = NEW.max_concurrency
    WHERE trigger_id = NEW.id AND state = 'queued';
    IF OLD.max_concurrency IS NULL AND NEW.max_concurrency IS NOT NULL THEN
        WITH marked AS (
            UPDATE runs_live SET quota_trigger = NEW.id
            WHERE trigger_id = NEW.id AND state IN ('claimed', 'running') AND quota_trigger IS NULL
            RETURNING 1)
        SELECT count(*) INTO counted FROM marked;
        NEW.running := NEW.running + counted;
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER triggers_capped
    BEFORE UPDATE OF max_concurrency ON triggers
    FOR EACH ROW WHEN (OLD.max_concurrency IS DISTINCT FROM NEW.max_concurrency)
    EXECUTE FUNCTION probactr_trigger_capped();
