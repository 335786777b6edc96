-- Marks missed the queued first attempts of triggered runs that waited in the queue
-- longer than their trigger's misfire threshold since they could be claimed (but for
-- runs of jobs with a rate).
-- Ending a run moves it: deleted from the live runs (`gone`) and inserted, changed, as
-- an ended run (`ended`), which the statements after read like rows of `runs`.
WITH gone AS (
     DELETE FROM runs_live AS runs USING triggers
     WHERE triggers.id = runs.trigger_id AND runs.state = 'queued' AND runs.attempt = 1
       AND runs.queued_at < now() - make_interval(secs => triggers.misfire_threshold_secs)
       -- Counted from when it could first be claimed: a run delayed by its trigger's
       -- jitter, or put back to wait for the attempt it replaces, is not late for it.
       AND runs.available_at < now() - make_interval(secs => triggers.misfire_threshold_secs)
       -- A run held back by a rate (its job's or its pool's) waits its turn: none is
       -- lost for it.
       AND NOT EXISTS (SELECT 1 FROM jobs
                       WHERE jobs.id = runs.job_id
                         AND (jobs.rate IS NOT NULL
                              OR EXISTS (SELECT 1 FROM pools
                                         WHERE pools.namespace = jobs.namespace AND pools.name = jobs.pool
                                           AND pools.rate IS NOT NULL)))
     RETURNING runs.*),
ended AS (
     INSERT INTO runs (id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state, reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica)
     OVERRIDING SYSTEM VALUE
     SELECT gone.id, gone.job_id, gone.trigger_id, gone.scheduled_at, gone.attempt, gone.first_run_id, 'missed', 'waited in the queue longer than the trigger''s misfire threshold', gone.exclusive, gone.executor_id, gone.lock_token, gone.fence, gone.queued_at, gone.available_at, gone.claimed_at, gone.started_at, now(), gone.heartbeat_at, gone.cancel_requested_at, gone.exit_code, gone.http_status, gone.error, gone.output, gone.output_truncated, gone.shard, gone.shard_total, gone.pinned_to, gone.replica
     FROM gone
     RETURNING *)
SELECT id FROM ended
