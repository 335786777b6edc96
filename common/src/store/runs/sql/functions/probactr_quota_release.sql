-- probactr_quota_release: current body (first defined with migration 2026120102000001).
--
-- A run counted against its namespace's `max_running` (`quota_namespace` set by the claim)
-- gives its place back when it leaves claimed/running by any path: ended (finished,
-- ended before starting, reaped, abandoned, cancelled: each moves it out of the live
-- partition), deleted with its job, or put back in the queue (unclaimed, taken over from
-- a dead executor). The WHEN clauses test columns of the row only, so runs of namespaces
-- without a quota cost nothing more.
CREATE OR REPLACE FUNCTION probactr_quota_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE namespaces SET running = running - 1 WHERE name = OLD.quota_namespace;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_live_quota_left
    AFTER DELETE ON runs_live
    FOR EACH ROW WHEN (OLD.quota_namespace IS NOT NULL AND OLD.state IN ('claimed', 'running'))
    EXECUTE FUNCTION probactr_quota_release();

CREATE OR REPLACE TRIGGER runs_live_quota_requeued
    AFTER UPDATE OF state ON runs_live
    FOR EACH ROW WHEN (OLD.quota_namespace IS NOT NULL AND OLD.state IN ('claimed', 'running')
                       AND NEW.state = 'queued')
    EXECUTE FUNCTION probactr_quota_release();
