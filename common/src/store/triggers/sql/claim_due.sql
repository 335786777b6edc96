-- The due-trigger claim: see `CLAIM_DUE_SQL` in `store/triggers.rs`.
-- `probactr.triggers_held`: every trigger this transaction fires runs of is one it holds
-- here FOR UPDATE, so the inserts need not lock them again (probactr_check_run_keys).
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
FROM triggers JOIN jobs ON jobs.id = triggers.job_id CROSS JOIN quiet
WHERE NOT triggers.paused AND triggers.next_fire_at <= now() + make_interval(secs => $2)
  AND NOT jobs.paused
ORDER BY triggers.next_fire_at
LIMIT $1
FOR UPDATE OF triggers SKIP LOCKED
