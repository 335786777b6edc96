-- probactr_run_targets: current body (first defined in 2026112601000001_routes_and_services.sql).
--
-- Where the runs of one instant of `job` go: one row per run to queue (its shard, the
-- count of the instant's runs and the executor it is pinned to). `any`: one row, no
-- shard. `broadcast`: one per executor that is alive, takes work and carries the job's
-- selector, or one unpinned run when none does (it waits for one rather than being lost).
-- `shard`: `shards` rows, pinned round-robin over those executors (unpinned when none).
CREATE OR REPLACE FUNCTION probactr_run_targets(job BIGINT)
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
