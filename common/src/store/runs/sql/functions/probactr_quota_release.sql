-- probactr_quota_release: current body (first defined with migration 2026120102000001;
-- triggers' caps and pools since 2026120201000001).
--
-- A run counted against a bound — its namespace's `max_running` (`quota_namespace`), its
-- trigger's `max_concurrency` (`quota_trigger`), its job's pool (`quota_pool`, holding
-- `quota_pool_slots`), all set by the claim — gives its place back when it leaves claimed/running by any path: ended (finished, ended before
-- starting, reaped, abandoned, cancelled: each moves it out of the live partition),
-- deleted with its job, or put back in the queue (unclaimed, taken over from a dead
-- executor). The WHEN clauses test columns of the row only, so runs counted by no bound
-- cost nothing more. The counters are updated in the order the claim locks them
-- (namespaces, triggers, pools).
CREATE OR REPLACE FUNCTION probactr_quota_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.quota_namespace IS NOT NULL THEN
        UPDATE namespaces SET running = running - 1 WHERE name = OLD.quota_namespace;
    END IF;
    IF OLD.quota_trigger IS NOT NULL THEN
        UPDATE triggers SET running = running - 1 WHERE id = OLD.quota_trigger;
    END IF;
    IF OLD.quota_pool IS NOT NULL THEN
        UPDATE pools SET used = used - OLD.quota_pool_slots WHERE id = OLD.quota_pool;
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_live_quota_left
    AFTER DELETE ON runs_live
    FOR EACH ROW WHEN ((OLD.quota_namespace IS NOT NULL OR OLD.quota_trigger IS NOT NULL
                        OR OLD.quota_pool IS NOT NULL)
                       AND OLD.state IN ('claimed', 'running'))
    EXECUTE FUNCTION probactr_quota_release();

CREATE OR REPLACE TRIGGER runs_live_quota_requeued
    AFTER UPDATE OF state ON runs_live
    FOR EACH ROW WHEN ((OLD.quota_namespace IS NOT NULL OR OLD.quota_trigger IS NOT NULL
                        OR OLD.quota_pool IS NOT NULL)
                       AND OLD.state IN ('claimed', 'running') AND NEW.state = 'queued')
    EXECUTE FUNCTION probactr_quota_release();
