-- The queued-run claim: see `CLAIM_QUEUED_SQL` in `store/runs/claim.rs`.
WITH picked AS (
    SELECT runs.id, runs.claim_order, (jobs.parallel AND jobs.max_concurrency IS NULL) AS lock_free,
           jobs.kind = 'shell' AS process, runs.trigger_id, runs.job_id,
           runs.replica IS NOT NULL AS service, jobs.namespace, jobs.namespace_capped AS capped,
           runs.trigger_cap IS NOT NULL AS trigger_capped, jobs.pool, jobs.pool_slots,
           jobs.rate AS job_rate
    FROM runs CROSS JOIN LATERAL (
        -- The job of each run walked to, looked up as the walk goes (OFFSET 0 keeps
        -- the planner from turning this into a join it may start from the jobs' side).
        SELECT jobs.parallel, jobs.max_concurrency, jobs.kind, jobs.paused, jobs.selector, jobs.overlap,
               jobs.namespace, jobs.namespace_capped, jobs.pool, jobs.pool_slots, jobs.rate
        FROM jobs WHERE jobs.id = runs.job_id OFFSET 0) AS jobs
    WHERE runs.state = 'queued' AND runs.available_at <= now() AND NOT jobs.paused
      AND ($3 OR (jobs.parallel AND jobs.max_concurrency IS NULL))
      -- An executor dedicated to namespaces takes only theirs.
      AND ($5::text[] IS NULL OR jobs.namespace = ANY ($5::text[]))
      -- A capped trigger's runs are passed over while its count, as of this snapshot, is
      -- full (the count the claim locks below is the one that bounds them).
      AND (runs.trigger_cap IS NULL OR (SELECT capped.running < capped.max_concurrency
                                        FROM triggers AS capped
                                        WHERE capped.id = runs.trigger_id) IS NOT FALSE)
      -- Likewise a pool's runs while, as of this snapshot, the run would not fit or the
      -- pool's rate allows no start.
      AND (jobs.pool IS NULL OR (SELECT shared.used + jobs.pool_slots <= shared.slots
                                        AND (shared.rate IS NULL
                                             OR probactr_rate_room(shared.rate, shared.rate_starts) > 0)
                                 FROM pools AS shared
                                 WHERE shared.namespace = jobs.namespace AND shared.name = jobs.pool)
                                IS NOT FALSE)
      -- And a job's runs while its rate allows no start.
      AND (jobs.rate IS NULL OR (SELECT probactr_rate_room(jobs.rate, recent.starts) > 0
                                 FROM job_rate_windows AS recent WHERE recent.job_id = runs.job_id)
                                IS NOT FALSE)
      -- A process declared dead, or cordoned, gets nothing, even if it has not noticed yet.
      AND EXISTS (SELECT 1 FROM executors
                  WHERE executors.id = $1 AND executors.state = 'alive' AND NOT executors.cordoned)
      AND (jobs.selector = '{}'::jsonb
           OR jobs.selector <@ (SELECT labels FROM executors WHERE executors.id = $1))
      -- A broadcast's run only where it is pinned; a shard's there until the reaper
      -- unpins it (its executor gone or cordoned).
      AND (runs.pinned_to IS NULL OR runs.pinned_to = $1)
      -- A service's instances go to distinct executors while others can take them:
      -- an executor holding one takes another only after it waited 10 s.
      AND (runs.replica IS NULL OR runs.available_at < now() - interval '10 seconds'
           OR NOT EXISTS (SELECT 1 FROM runs_live AS mine
                          WHERE mine.executor_id = $1 AND mine.job_id = runs.job_id
                            AND mine.replica IS NOT NULL AND mine.state IN ('claimed', 'running')))
      -- A non-parallel job's runs wait unclaimed while it is active, unless its overlap
      -- policy decides on them now (skip, replace), or they are `buffer_one` runs behind
      -- one already waiting (taken to be skipped).
      AND (jobs.parallel OR jobs.overlap IN ('skip', 'replace') OR NOT EXISTS (
           SELECT 1 FROM runs AS active
           WHERE active.job_id = runs.job_id AND active.state IN ('claimed', 'running'))
           OR (jobs.overlap = 'buffer_one' AND EXISTS (
               SELECT 1 FROM runs_live AS ahead
               WHERE ahead.job_id = runs.job_id AND ahead.state = 'queued' AND ahead.id < runs.id)))
    ORDER BY runs.claim_order, runs.id
    LIMIT $2
    FOR UPDATE OF runs SKIP LOCKED),
-- The namespaces with a quota whose runs were picked, locked in name order (claimers
-- never wait for each other in a cycle). `FOR UPDATE` returns the latest committed count
-- after waiting for a concurrent claimer, not the statement snapshot's: the room is
-- exact. Nothing is read when no picked run is capped.
quota AS MATERIALIZED (
    SELECT namespaces.name, namespaces.max_running - namespaces.running AS room
    FROM (SELECT DISTINCT namespace FROM picked WHERE capped) AS wanted
    JOIN namespaces ON namespaces.name = wanted.namespace
    ORDER BY namespaces.name
    FOR UPDATE OF namespaces),
-- The same for the capped triggers whose runs were picked, locked in id order after the
-- namespaces (reading `quota` first keeps every claimer's lock order the same).
trigger_quota AS MATERIALIZED (
    SELECT triggers.id, triggers.max_concurrency - triggers.running AS room
    FROM (SELECT DISTINCT trigger_id FROM picked WHERE trigger_capped) AS wanted
    JOIN triggers ON triggers.id = wanted.trigger_id
    CROSS JOIN (SELECT count(*) FROM quota) AS namespaces_first
    ORDER BY triggers.id
    FOR UPDATE OF triggers),
-- The same for the pools of the picked runs, locked after the triggers, in id order,
-- with the starts their rates allow (NULL: no rate).
pool_quota AS MATERIALIZED (
    SELECT pools.id, pools.namespace, pools.name, pools.slots - pools.used AS room,
           CASE WHEN pools.rate IS NOT NULL THEN probactr_rate_room(pools.rate, pools.rate_starts) END AS rate_room
    FROM (SELECT DISTINCT namespace, pool FROM picked WHERE pool IS NOT NULL) AS wanted
    JOIN pools ON pools.namespace = wanted.namespace AND pools.name = wanted.pool
    CROSS JOIN (SELECT count(*) FROM trigger_quota) AS triggers_first
    ORDER BY pools.id
    FOR UPDATE OF pools),
-- The recent starts of the jobs with a rate whose runs were picked, locked last, in job
-- id order; nothing is read when no picked run's job has a rate.
job_rate_quota AS MATERIALIZED (
    SELECT recent.job_id, wanted.job_rate, probactr_rate_room(wanted.job_rate, recent.starts) AS room
    FROM (SELECT DISTINCT job_id, job_rate FROM picked WHERE job_rate IS NOT NULL) AS wanted
    JOIN job_rate_windows AS recent ON recent.job_id = wanted.job_id
    CROSS JOIN (SELECT count(*) FROM pool_quota) AS pools_first
    ORDER BY recent.job_id
    FOR UPDATE OF recent),
-- The ranks a claim needs of every run picked: its place among them (past the free
-- slots only prefetchable runs are taken) and among the shell runs (free processes).
-- One window, one sort.
ranked_all AS (
    SELECT picked.*,
           row_number() OVER in_order AS position,
           count(*) FILTER (WHERE process) OVER in_order AS nth
    FROM picked
    WINDOW in_order AS (ORDER BY claim_order, id)),
-- The ranks only runs bound by a feature need (a service's instances, a quota, a trigger
-- cap, a pool, a rate), ranked among the picked runs of the same kind alone: a claim of
-- runs that use none sorts nothing here. Each window's partitions used are whole in this
-- subset (a job's runs share its rate, a capped namespace's runs are all capped, ...).
featured AS (
    SELECT id,
           row_number() OVER (PARTITION BY namespace, pool ORDER BY claim_order, id) AS nth_of_pool,
           sum(pool_slots) OVER (PARTITION BY namespace, pool ORDER BY claim_order, id) AS pool_weight,
           row_number() OVER (PARTITION BY namespace, capped ORDER BY claim_order, id) AS nth_of_namespace,
           row_number() OVER (PARTITION BY job_id, service ORDER BY claim_order, id) AS nth_of_job,
           row_number() OVER (PARTITION BY trigger_id, trigger_capped ORDER BY claim_order, id) AS nth_of_trigger
    FROM picked
    WHERE service OR capped OR trigger_capped OR pool IS NOT NULL OR job_rate IS NOT NULL),
taken AS (
    SELECT id, lock_free, namespace, capped, trigger_id, trigger_capped, pool_id, pool_slots FROM (
        SELECT ranked_all.id, lock_free, process, service, namespace, capped, trigger_id, trigger_capped,
               pool, pool_slots, job_id, job_rate, position, nth,
               featured.nth_of_pool, featured.pool_weight, featured.nth_of_namespace,
               featured.nth_of_job, featured.nth_of_trigger,
               CASE WHEN pool IS NOT NULL THEN
                   (SELECT pool_quota.id FROM pool_quota
                    WHERE pool_quota.namespace = ranked_all.namespace AND pool_quota.name = ranked_all.pool) END AS pool_id,
               CASE WHEN pool IS NOT NULL THEN
                   (SELECT pool_quota.room FROM pool_quota
                    WHERE pool_quota.namespace = ranked_all.namespace AND pool_quota.name = ranked_all.pool) END AS pool_room,
               CASE WHEN pool IS NOT NULL THEN
                   (SELECT pool_quota.rate_room FROM pool_quota
                    WHERE pool_quota.namespace = ranked_all.namespace AND pool_quota.name = ranked_all.pool) END AS pool_rate_room
        FROM ranked_all LEFT JOIN featured ON featured.id = ranked_all.id) AS ranked
    WHERE (NOT process OR nth <= $4) AND (NOT service OR nth_of_job = 1)
      -- Past the first $6 runs (the executor's free slots), only runs it may hold until a
      -- slot frees (prefetched): in-process, lock-free, bound by no quota, cap or rate.
      AND (position <= $6 OR (lock_free AND NOT process AND NOT service AND NOT capped
                              AND NOT trigger_capped AND pool IS NULL AND job_rate IS NULL))
      -- A capped trigger's runs within its room (a cap removed meanwhile: no bound).
      AND (NOT trigger_capped OR nth_of_trigger <= coalesce(
           (SELECT trigger_quota.room FROM trigger_quota WHERE trigger_quota.id = ranked.trigger_id),
           nth_of_trigger))
      -- A pool's runs while the weight of those before them and theirs fits in its room
      -- (a pool that no longer exists: no bound).
      AND (pool IS NULL OR pool_weight <= coalesce(pool_room, pool_weight))
      -- A rated pool's or job's first runs, as many as their rates allow now (no rate
      -- any more, or a pool that no longer exists: no bound).
      AND (pool IS NULL OR nth_of_pool <= coalesce(pool_rate_room, nth_of_pool))
      AND (job_rate IS NULL OR nth_of_job <= coalesce(
           (SELECT job_rate_quota.room FROM job_rate_quota WHERE job_rate_quota.job_id = ranked.job_id),
           nth_of_job))
      -- A capped namespace's runs within its room (a quota removed meanwhile: no bound).
      AND (NOT capped OR nth_of_namespace <= coalesce(
           (SELECT quota.room FROM quota WHERE quota.name = ranked.namespace), nth_of_namespace))),
claimed AS (
    -- The picked rows are locked and queued; the live partition is named so that
    -- only its id index can find them, whatever its statistics say.
    UPDATE runs_live AS runs SET executor_id = $1, claimed_at = now(),
                    state = CASE WHEN taken.lock_free THEN 'running' ELSE 'claimed' END,
                    started_at = CASE WHEN taken.lock_free THEN now() END,
                    heartbeat_at = CASE WHEN taken.lock_free THEN now() END,
                    quota_namespace = CASE WHEN taken.capped THEN taken.namespace END,
                    quota_trigger = CASE WHEN taken.trigger_capped THEN taken.trigger_id END,
                    quota_pool = taken.pool_id,
                    quota_pool_slots = CASE WHEN taken.pool_id IS NOT NULL THEN taken.pool_slots END
    FROM taken WHERE runs.id = taken.id
    RETURNING runs.*),
-- What the capped runs taken hold of their namespaces' quotas (the rows `quota` locked).
counted AS (
    UPDATE namespaces SET running = namespaces.running + held.runs
    FROM (SELECT quota_namespace, count(*) AS runs FROM claimed
          WHERE quota_namespace IS NOT NULL GROUP BY quota_namespace) AS held
    WHERE namespaces.name = held.quota_namespace),
-- And of their triggers' caps (the rows `trigger_quota` locked).
counted_by_trigger AS (
    UPDATE triggers SET running = triggers.running + held.runs
    FROM (SELECT quota_trigger, count(*) AS runs FROM claimed
          WHERE quota_trigger IS NOT NULL GROUP BY quota_trigger) AS held
    WHERE triggers.id = held.quota_trigger),
-- And of their pools' slots and rates' starts (the rows `pool_quota` locked).
counted_by_pool AS (
    UPDATE pools SET used = pools.used + held.slots,
                     rate_starts = CASE WHEN pools.rate IS NULL THEN pools.rate_starts
                                        ELSE probactr_rate_stamp(pools.rate, pools.rate_starts, held.runs) END
    FROM (SELECT quota_pool, sum(quota_pool_slots) AS slots, count(*) AS runs FROM claimed
          WHERE quota_pool IS NOT NULL GROUP BY quota_pool) AS held
    WHERE pools.id = held.quota_pool),
-- And of their jobs' rates (the rows `job_rate_quota` locked; the claimed runs are not
-- even read when it is empty).
stamped_by_job AS (
    UPDATE job_rate_windows AS recent
    SET starts = probactr_rate_stamp(job_rate_quota.job_rate, recent.starts, held.runs)
    FROM (SELECT job_id, count(*) AS runs FROM claimed
          WHERE EXISTS (SELECT FROM job_rate_quota)
            AND job_id IN (SELECT job_rate_quota.job_id FROM job_rate_quota)
          GROUP BY job_id) AS held
    JOIN job_rate_quota ON job_rate_quota.job_id = held.job_id
    WHERE recent.job_id = held.job_id)
SELECT claimed.*, jobs.version AS job_version,
       (claimed.quota_namespace IS NOT NULL OR claimed.quota_trigger IS NOT NULL
        OR claimed.quota_pool IS NOT NULL) AS holds_quota
FROM claimed JOIN jobs ON jobs.id = claimed.job_id
ORDER BY claimed.claim_order, claimed.id
