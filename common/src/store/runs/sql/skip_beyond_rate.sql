-- Bounds the queue of each job with a rate: its queued first attempts of triggered runs
-- are taken in queue order (available_at, id); a run with more runs ahead of it than the
-- rate starts within its trigger's misfire threshold (`limit` × threshold / `per_secs`,
-- never fewer than `limit`: one window's worth always waits) would start later than the
-- threshold allows however the queue moves, so it is skipped with the reason. A job rated
-- 1 an hour that a trigger feeds every second thus keeps one run waiting, not thousands.
-- Runs held back by a pool's rate are not bounded here (they wait their turn in the pool).
-- Ending a run moves it: deleted from the live runs (`gone`) and inserted, changed, as
-- an ended run.
WITH ranked AS (
     SELECT runs.id,
            row_number() OVER (PARTITION BY runs.job_id ORDER BY runs.available_at, runs.id) - 1 AS ahead,
            greatest((jobs.rate ->> 'limit')::numeric,
                     floor((jobs.rate ->> 'limit')::numeric * triggers.misfire_threshold_secs
                           / (jobs.rate ->> 'per_secs')::numeric)) AS room
     FROM jobs
     JOIN runs_live AS runs ON runs.job_id = jobs.id AND runs.state = 'queued' AND runs.attempt = 1
     JOIN triggers ON triggers.id = runs.trigger_id
     WHERE jobs.rate IS NOT NULL),
gone AS (
     -- The runs to skip are ranked once and passed on as an array of ids (an InitPlan):
     -- joined to the queued runs, `ranked` may be computed again for each of them.
     DELETE FROM runs_live AS runs
     WHERE runs.id = ANY (ARRAY(SELECT ranked.id FROM ranked WHERE ranked.ahead >= ranked.room))
       AND runs.state = 'queued'
     RETURNING runs.*),
ended AS (
     INSERT INTO runs (id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state, reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica)
     OVERRIDING SYSTEM VALUE
     SELECT gone.id, gone.job_id, gone.trigger_id, gone.scheduled_at, gone.attempt, gone.first_run_id, 'skipped',
            'rate: more runs wait ahead than the job''s rate starts within the trigger''s misfire threshold',
            gone.exclusive, gone.executor_id, gone.lock_token, gone.fence, gone.queued_at, gone.available_at,
            gone.claimed_at, gone.started_at, now(), gone.heartbeat_at, gone.cancel_requested_at, gone.exit_code,
            gone.http_status, gone.error, gone.output, gone.output_truncated, gone.shard, gone.shard_total,
            gone.pinned_to, gone.replica
     FROM gone
     RETURNING id)
SELECT id AS "id!" FROM ended
