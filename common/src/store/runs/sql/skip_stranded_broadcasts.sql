-- Skips the queued runs of broadcasts pinned to an executor that left (dead, stopped,
-- draining) before they started: a broadcast runs where executors were at its instant,
-- and the executors still there have runs of their own.
-- Ending a run moves it: deleted from the live runs (`gone`) and inserted, changed, as
-- an ended run (`ended`), which the statements after read like rows of `runs`.
WITH gone AS (
     DELETE FROM runs_live AS runs USING jobs
     WHERE runs.pinned_to IS NOT NULL AND runs.state = 'queued'
       AND jobs.id = runs.job_id AND jobs.route = 'broadcast'
       AND NOT EXISTS (SELECT 1 FROM executors
                       WHERE executors.id = runs.pinned_to AND executors.state = 'alive'
                         AND NOT executors.drain_requested)
     RETURNING runs.*),
ended AS (
     INSERT INTO runs (id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state, reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica)
     OVERRIDING SYSTEM VALUE
     SELECT gone.id, gone.job_id, gone.trigger_id, gone.scheduled_at, gone.attempt, gone.first_run_id, 'skipped', 'broadcast: its executor ' || gone.pinned_to || ' left before the run started', gone.exclusive, gone.executor_id, gone.lock_token, gone.fence, gone.queued_at, gone.available_at, gone.claimed_at, gone.started_at, now(), gone.heartbeat_at, gone.cancel_requested_at, gone.exit_code, gone.http_status, gone.error, gone.output, gone.output_truncated, gone.shard, gone.shard_total, gone.pinned_to, gone.replica
     FROM gone
     RETURNING *)
SELECT id FROM ended
