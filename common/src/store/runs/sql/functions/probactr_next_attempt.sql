-- probactr_next_attempt: the one next-attempt policy (retry, backoff, takeover) of every
-- way a run ends: recorded by its executor (`finish_many.sql`), or abandoned
-- (`abandon.sql`) after a stop its executor did not carry out or with its lost executor.
--
-- Given an ended attempt (its id, chain, attempt number, state, exit code, HTTP status,
-- service slot and job) and
-- whether it ended because its executor was lost, returns when its next attempt may start
-- and why it exists, or no row when the chain ends here:
-- - a takeover, at once, when the executor was lost and the job reruns such runs and has
--   takeovers left (earlier abandoned attempts of the chain count; the ending attempt is
--   not visible to the statement ending it);
-- - else a retry, when the state is retryable, the job's `retry_on` (if any) names the
--   failure (an exit code, an HTTP status, a timeout; a run abandoned by its executor is
--   not the job's answer and is always retryable) and the job allows more attempts, after
--   its backoff: `retry_backoff_secs` (fixed) or that doubling per attempt (exponential),
--   at most `retry_max_secs`, and with full jitter a random part of it;
-- - never for a service's instance (the monitors' service pass restarts it).
--
-- SQL, STABLE and not STRICT so that the planner inlines it into the statement that calls
-- it: the policy is written once at no cost per run. (`random()` is volatile, but it is
-- only read for the one row being retried; inlined, it is evaluated once per row.) A job
-- without `retry_on` pays one NULL test.
CREATE OR REPLACE FUNCTION probactr_next_attempt(
    ended_id BIGINT, ended_chain BIGINT, ended_attempt INTEGER, ended_state TEXT,
    ended_exit_code INTEGER, ended_http_status INTEGER,
    ended_replica INTEGER, ended_job BIGINT, executor_lost BOOLEAN)
RETURNS TABLE (available_at TIMESTAMPTZ, reason TEXT)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN plan.takeover THEN now()
                ELSE now() + make_interval(secs =>
                    least(CASE WHEN jobs.retry_backoff = 'fixed' THEN jobs.retry_backoff_secs
                               ELSE jobs.retry_backoff_secs * power(2, least(ended_attempt - 1, 60)) END,
                          coalesce(jobs.retry_max_secs, 'Infinity'::float8))
                    * CASE WHEN jobs.retry_jitter = 'full' THEN random() ELSE 1 END) END,
           CASE WHEN plan.takeover
                THEN 'takeover ' || (plan.takeovers + 1) || ' of ' || jobs.max_takeovers || ': run '
                     || ended_id || ' lost its executor'
                ELSE 'retry of run ' || ended_id || ' (' || ended_state || ')' END
    FROM jobs
    CROSS JOIN LATERAL (
        SELECT executor_lost AND jobs.on_executor_lost = 'rerun'
                   AND prior.takeovers < jobs.max_takeovers AS takeover,
               prior.takeovers
        FROM (SELECT CASE WHEN executor_lost AND jobs.on_executor_lost = 'rerun'
                          THEN (SELECT count(*) FROM runs AS earlier
                                WHERE (earlier.first_run_id = coalesce(ended_chain, ended_id)
                                       OR earlier.id = coalesce(ended_chain, ended_id))
                                  AND earlier.state = 'abandoned')
                          ELSE 0 END AS takeovers) AS prior) AS plan
    WHERE jobs.id = ended_job
      AND ended_replica IS NULL
      AND (plan.takeover
           OR (ended_state IN ('failed', 'timed_out', 'abandoned') AND ended_attempt < jobs.retry_max_attempts
               AND (jobs.retry_on IS NULL OR ended_state = 'abandoned'
                    OR (ended_state = 'timed_out' AND jobs.retry_on @> '{"timeouts": true}')
                    OR coalesce(jobs.retry_on -> 'exit_codes' @> to_jsonb(ended_exit_code), false)
                    OR coalesce(jobs.retry_on -> 'http_statuses' @> to_jsonb(ended_http_status), false))))
$$;
