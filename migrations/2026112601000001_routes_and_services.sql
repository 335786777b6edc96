-- Routes (one run per instant, one per live executor, or N shards) and services (N
-- long-lived replicas).
--
--   * `jobs.route`: `any` (one run, any executor), `broadcast` (one run per live matching
--     executor, pinned to it), `shard` (`jobs.shards` runs, each with its index, spread
--     over the live matching executors). `jobs.mode`: `batch` (runs when triggered) or
--     `service` (`jobs.replicas` instances kept running, restarted when they end).
--   * `runs.shard` / `runs.shard_total`: a fanned-out run's index and the count of its
--     instant (`PROBACTR_SHARD_INDEX` / `PROBACTR_SHARD_TOTAL`); `runs.pinned_to`: the
--     executor a run should run on (a broadcast's: only there; a shard's: there while that
--     executor is live and takes work, then anywhere); `runs.replica`: a service
--     instance's slot, 0 to replicas - 1. Retries and takeovers keep all four.
--   * Invariant 1 becomes: an instant produces at most one first attempt per shard.
--   * At most one live run per service slot: never more than `replicas` instances.

ALTER TABLE jobs
    ADD COLUMN route TEXT NOT NULL DEFAULT 'any'
        CONSTRAINT jobs_route_valid CHECK (route IN ('any', 'broadcast', 'shard')),
    ADD COLUMN shards INTEGER NOT NULL DEFAULT 1
        CONSTRAINT jobs_shards_range CHECK (shards BETWEEN 1 AND 1000),
    ADD COLUMN mode TEXT NOT NULL DEFAULT 'batch'
        CONSTRAINT jobs_mode_valid CHECK (mode IN ('batch', 'service')),
    ADD COLUMN replicas INTEGER NOT NULL DEFAULT 1
        CONSTRAINT jobs_replicas_range CHECK (replicas BETWEEN 1 AND 100);

ALTER TABLE runs
    ADD COLUMN shard INTEGER,
    ADD COLUMN shard_total INTEGER,
    ADD COLUMN pinned_to UUID,
    ADD COLUMN replica INTEGER;

DROP INDEX runs_trigger_instant;
CREATE UNIQUE INDEX runs_trigger_instant ON runs_live (trigger_id, scheduled_at, coalesce(shard, -1))
    WHERE attempt = 1;
DROP INDEX runs_done_trigger_instant;
CREATE UNIQUE INDEX runs_done_trigger_instant ON runs_done (trigger_id, scheduled_at, coalesce(shard, -1))
    WHERE attempt = 1;

CREATE UNIQUE INDEX runs_service_replica ON runs_live (job_id, replica) WHERE replica IS NOT NULL;
-- Queued runs waiting for an executor that may be gone (read by every reap pass).
CREATE INDEX runs_pinned ON runs_live (pinned_to) WHERE pinned_to IS NOT NULL AND state = 'queued';
-- A service slot's recent ends (its restart backoff).
CREATE INDEX runs_done_replica ON runs_done (job_id, replica, finished_at) WHERE replica IS NOT NULL;

-- Where the runs of one instant of `job` go: one row per run to queue (its shard, the
-- count of the instant's runs and the executor it is pinned to). `any`: one row, no
-- shard. `broadcast`: one per executor that is alive, takes work and carries the job's
-- selector, or one unpinned run when none does (it waits for one rather than being lost).
-- `shard`: `shards` rows, pinned round-robin over those executors (unpinned when none).
CREATE FUNCTION probactr_run_targets(job BIGINT)
RETURNS TABLE (shard INTEGER, shard_total INTEGER, pinned_to UUID)
LANGUAGE sql STABLE AS $$
    WITH target AS (SELECT route, shards, selector FROM jobs WHERE id = job),
    live AS (
        SELECT executors.id, (row_number() OVER (ORDER BY executors.id) - 1)::int AS nth,
               (count(*) OVER ())::int AS total
        FROM executors, target
        WHERE executors.role = 'executor' AND executors.state = 'alive'
          AND NOT executors.cordoned AND NOT executors.drain_requested
          AND target.selector <@ executors.labels)
    SELECT NULL::int, NULL::int, NULL::uuid FROM target WHERE target.route = 'any'
    UNION ALL
    SELECT live.nth, live.total, live.id FROM target, live WHERE target.route = 'broadcast'
    UNION ALL
    SELECT 0, 1, NULL::uuid FROM target
    WHERE target.route = 'broadcast' AND NOT EXISTS (SELECT 1 FROM live)
    UNION ALL
    SELECT slot, target.shards, (SELECT live.id FROM live WHERE live.nth = slot % live.total)
    FROM target, generate_series(0, target.shards - 1) AS slot
    WHERE target.route = 'shard'
$$;
