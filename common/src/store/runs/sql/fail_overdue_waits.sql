-- Ends `failed` the waiting runs (see `runs/upstream.rs`) whose job waited for has not
-- succeeded by their deadline. The failure raises `run_failed` like any other
-- (`probactr_alert_run_ends`); it queues no retry: the next instant waits again.
-- Ending a run moves it: deleted from the live runs (`gone`) and inserted, changed, as
-- an ended run.
WITH overdue AS (
     DELETE FROM run_waits WHERE deadline <= now()
     RETURNING run_id, reason),
-- The overdue runs' ids and reasons, gathered once: joined to the queued runs, `overdue`
-- may be read again for each of them.
waited AS MATERIALIZED (
     SELECT array_agg(run_id) AS ids, jsonb_object_agg(run_id, reason) AS reasons FROM overdue),
gone AS (
     DELETE FROM runs_live AS runs
     WHERE runs.id = ANY ((SELECT ids FROM waited)::bigint[]) AND runs.state = 'queued'
     RETURNING runs.*, (SELECT reasons ->> runs.id::text FROM waited) AS wait_reason),
ended AS (
     INSERT INTO runs (id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state, reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica)
     OVERRIDING SYSTEM VALUE
     SELECT gone.id, gone.job_id, gone.trigger_id, gone.scheduled_at, gone.attempt, gone.first_run_id, 'failed',
            gone.wait_reason || ': not succeeded in time', gone.exclusive, gone.executor_id, gone.lock_token, gone.fence,
            gone.queued_at, gone.available_at, gone.claimed_at, gone.started_at, now(), gone.heartbeat_at,
            gone.cancel_requested_at, gone.exit_code, gone.http_status, gone.error, gone.output, gone.output_truncated,
            gone.shard, gone.shard_total, gone.pinned_to, gone.replica
     FROM gone
     RETURNING id)
SELECT id AS "id!" FROM ended
