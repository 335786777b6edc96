-- Records the ends of a group of attempts, each row fenced on its own, and queues the
-- retries their policies ask for. Returns each stored run with its retry, if any.
WITH input AS (
     SELECT * FROM UNNEST($1::bigint[], $2::uuid[], $3::bigint[], $4::text[], $5::text[],
                          $6::int[], $7::int[], $8::text[], $9::text[], $10::bool[],
                          $11::timestamptz[])
         AS input (id, executor_id, fence, state, reason, exit_code, http_status, error,
                   output, output_truncated, started_at)),
-- Ending a run moves it: deleted from the live runs (`gone`) and inserted, changed, as
-- an ended run (`ended`), which the statements after read like rows of `runs`.
-- The runs are found by their ids (`runs.id = ANY`) as well as by the join: the generic
-- plan, made for ten input rows, priced a lookup per row with the fence check of a
-- one-at-a-time job in it, and read every live run instead (hash join) once the
-- partition held a few hundred runs: at 1,000 fires a second, each group of ends read
-- the whole partition, dead rows included.
gone AS (
     DELETE FROM runs_live AS runs USING input
     WHERE runs.id = input.id AND runs.id = ANY ($1::bigint[]) AND runs.state = 'running'
               AND runs.executor_id = input.executor_id
               AND runs.fence IS NOT DISTINCT FROM input.fence
               AND (NOT runs.exclusive OR EXISTS (
                   SELECT 1 FROM jobs WHERE jobs.id = runs.job_id AND jobs.fence = input.fence))
     RETURNING runs.*, input.state AS new_state, input.reason AS new_reason,
               input.exit_code AS new_exit_code, input.http_status AS new_http_status,
               input.error AS new_error, input.output AS new_output,
               input.output_truncated AS new_output_truncated,
               -- A run held after its start was stored (fired ahead, prefetched) started
               -- its job later: the executor says when.
               greatest(runs.started_at, input.started_at) AS new_started_at),
ended AS (
     INSERT INTO runs (id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state, reason, exclusive, executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at, finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output, output_truncated, shard, shard_total, pinned_to, replica)
     OVERRIDING SYSTEM VALUE
     SELECT gone.id, gone.job_id, gone.trigger_id, gone.scheduled_at, gone.attempt, gone.first_run_id, gone.new_state, gone.new_reason, gone.exclusive, gone.executor_id, gone.lock_token, gone.fence, gone.queued_at, gone.available_at, gone.claimed_at, gone.new_started_at, now(), gone.heartbeat_at, gone.cancel_requested_at, gone.new_exit_code, gone.new_http_status, gone.new_error, gone.new_output, gone.new_output_truncated, gone.shard, gone.shard_total, gone.pinned_to, gone.replica
     FROM gone
     RETURNING *),
retry AS (
     -- The next attempt the job's policy asks for (probactr_next_attempt), if any.
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
                                              ended.replica, ended.job_id, false) AS next
     ON CONFLICT DO NOTHING
     RETURNING id, first_run_id),
-- The retries by chain, one object read once: each ended run finds its retry by key, not
-- by a join of two sets the planner may take for a row each (a group of a thousand
-- failures that all retry joined in 0.4-1.0 s).
retried AS MATERIALIZED (SELECT jsonb_object_agg(first_run_id, id) AS by_chain FROM retry)
SELECT ended.id, (retried.by_chain ->> coalesce(ended.first_run_id, ended.id)::text)::bigint AS retry_run_id
FROM ended CROSS JOIN retried
