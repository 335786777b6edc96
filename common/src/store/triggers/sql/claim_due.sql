-- The due-trigger claim: see `CLAIM_DUE_SQL` in `store/triggers.rs`.
-- `probactr.triggers_held`: every trigger this transaction fires runs of is one it holds
-- here FOR UPDATE, so the inserts need not lock them again (probactr_check_run_keys).
-- Each trigger's job is looked up by its key (`OFFSET 0` keeps the subquery a lookup per
-- trigger): as a join, a plan made while `jobs` looked small (a session's generic plan,
-- statistics not yet gathered) compared every claimed trigger with every job, which at
-- 1,000 jobs cost 2-4 ms a claim instead of 0.4.
WITH quiet AS (SELECT set_config('probactr.quiet', 'on', true), set_config('probactr.triggers_held', 'on', true))
SELECT triggers.*,
       (jobs.parallel AND jobs.max_concurrency IS NULL AND triggers.max_concurrency IS NULL
        AND jobs.selector = '{}'::jsonb AND jobs.route = 'any' AND jobs.mode = 'batch'
        -- A quota, a pool or a rate is held by the claim only; a dedicated executor starts
        -- only its own.
        AND NOT jobs.namespace_capped AND jobs.pool IS NULL AND jobs.rate IS NULL
        AND ($3::text[] IS NULL OR jobs.namespace = ANY ($3::text[]))) AS lock_free,
       jobs.route <> 'any' AS fan_out, jobs.kind <> 'shell' AS in_process,
       jobs.version AS job_version, jobs.priority AS job_priority, now() AS db_now
FROM triggers
CROSS JOIN LATERAL (
    SELECT parallel, max_concurrency, selector, route, mode, namespace_capped, pool, rate,
           namespace, kind, version, priority
    FROM jobs WHERE jobs.id = triggers.job_id AND NOT jobs.paused OFFSET 0) AS jobs
CROSS JOIN quiet
WHERE NOT triggers.paused AND triggers.next_fire_at <= now() + make_interval(secs => $2)
ORDER BY triggers.next_fire_at
LIMIT $1
FOR UPDATE OF triggers SKIP LOCKED
