-- Abandons running runs that will not end by themselves, and queues their takeovers or
-- retries. $1 picks which:
-- - NULL: the runs of dead (or stopped) executors, "executor lost" (a takeover when the
--   job's policy asks for one);
-- - seconds: the runs whose stop was requested more than $1 plus their job's stop grace
--   (SIGTERM to SIGKILL) ago and whose living executor did not stop them (a retry at most).
-- Ending a run moves it: deleted from the live runs (`gone`) and inserted, changed, as
-- an ended run (`ended`), which the statements after read like rows of `runs`. A run a
-- peer monitor moved meanwhile is no longer there to delete, so each is ended once.
--
-- `picked` is computed once (MATERIALIZED): inlined, the planner may join it back to
-- every running run and compute it again for each, which squares the running runs (a
-- second of PostgreSQL time at every reap with a few thousand running; 15 s with 3,000).
-- The lost executors and the runs to end are passed on as arrays of ids, so that no plan
-- joins a set back to the running runs row by row: a reap reads the running runs at
-- most once per step, whatever the statistics say of how many are running.
WITH picked AS MATERIALIZED (
     SELECT runs.id, true AS executor_lost, NULL::integer AS stop_grace_secs
     FROM runs_live AS runs
     WHERE $1::float8 IS NULL AND runs.state = 'running'
       AND runs.executor_id = ANY (ARRAY(SELECT id FROM executors WHERE state IN ('dead', 'stopped')))
     UNION ALL
     SELECT runs.id, false, jobs.stop_grace_secs
     FROM runs_live AS runs JOIN jobs ON jobs.id = runs.job_id
     WHERE $1::float8 IS NOT NULL AND runs.state = 'running'
       AND runs.cancel_requested_at < now() - make_interval(secs => $1::float8 + jobs.stop_grace_secs)),
gone AS (
     -- No join back to `picked`: the runs are found by their ids (an index probe each),
     -- the job's stop grace by a probe of its row, and whether the executor was lost is
     -- the statement's own mode.
     DELETE FROM runs_live AS runs
     WHERE runs.id = ANY (ARRAY(SELECT id FROM picked)) AND runs.state = 'running'
       AND ($1::float8 IS NULL
            OR runs.cancel_requested_at < now() - make_interval(secs => $1::float8
                   + (SELECT jobs.stop_grace_secs FROM jobs WHERE jobs.id = runs.job_id)))
     RETURNING runs.*, $1::float8 IS NULL AS executor_lost),
ended AS (
     INSERT INTO runs (id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state, reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica)
     OVERRIDING SYSTEM VALUE
     SELECT gone.id, gone.job_id, gone.trigger_id, gone.scheduled_at, gone.attempt, gone.first_run_id, 'abandoned', CASE WHEN gone.executor_lost THEN 'executor lost' ELSE coalesce(gone.reason, 'stopped') || '; abandoned: its executor did not stop it' END, gone.exclusive, gone.executor_id, gone.lock_token, gone.fence, gone.queued_at, gone.available_at, gone.claimed_at, gone.started_at, now(), gone.heartbeat_at, gone.cancel_requested_at, gone.exit_code, gone.http_status, gone.error, gone.output, gone.output_truncated, gone.shard, gone.shard_total, gone.pinned_to, gone.replica
     FROM gone
     RETURNING *),
retry AS (
     -- The takeover or retry the job's policy asks for (probactr_next_attempt), if any.
     -- ON CONFLICT on the chain's unique (first_run_id, attempt) makes a second re-queue of
     -- the same attempt a no-op.
     INSERT INTO runs (job_id, trigger_id, scheduled_at, attempt, first_run_id, available_at, reason,
                       shard, shard_total, pinned_to)
     SELECT ended.job_id, ended.trigger_id, ended.scheduled_at, ended.attempt + 1,
            coalesce(ended.first_run_id, ended.id), next.available_at, next.reason,
            ended.shard, ended.shard_total, ended.pinned_to
     FROM ended
     CROSS JOIN LATERAL probactr_next_attempt(ended.id, ended.first_run_id, ended.attempt, ended.state,
                                              ended.exit_code, ended.http_status,
                                              ended.replica, ended.job_id, $1::float8 IS NULL) AS next
     ON CONFLICT DO NOTHING
     RETURNING id, first_run_id),
-- The retries by chain, one object read once: each ended run finds its retry by key, not
-- by a join of two sets the planner may take for a row each.
retried AS MATERIALIZED (SELECT jsonb_object_agg(first_run_id, id) AS by_chain FROM retry)
SELECT ended.id, ended.job_id, ended.executor_id, ended.exclusive, ended.lock_token,
       (retried.by_chain ->> coalesce(ended.first_run_id, ended.id)::text)::bigint AS retry_run_id
FROM ended CROSS JOIN retried
