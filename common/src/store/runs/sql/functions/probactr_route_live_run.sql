-- probactr_route_live_run: current body (first defined in 2026112503000001_routing.sql).
--
-- A run entering the live partition takes its job's priority and its trigger's cap; its
-- claim order follows its `available_at` (a retry's backoff, an unclaim's delay).
-- An insert that routes its runs itself (the firing's, where this call per row was the
-- largest part of the statement) gives them a claim order, and the trigger stays out.
CREATE OR REPLACE FUNCTION probactr_route_live_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.priority := coalesce((SELECT priority FROM jobs WHERE id = NEW.job_id), 0);
        IF NEW.trigger_id IS NOT NULL THEN
            NEW.trigger_cap := (SELECT max_concurrency FROM triggers WHERE id = NEW.trigger_id);
        END IF;
    END IF;
    NEW.claim_order := probactr_claim_order(NEW.available_at, NEW.priority);
    RETURN NEW;
END $$;

CREATE OR REPLACE TRIGGER runs_live_route
    BEFORE INSERT ON runs_live
    FOR EACH ROW WHEN (NEW.claim_order IS NULL) EXECUTE FUNCTION probactr_route_live_run();

CREATE OR REPLACE TRIGGER runs_live_reorder
    BEFORE UPDATE OF available_at ON runs_live
    FOR EACH ROW EXECUTE FUNCTION probactr_route_live_run();
