-- probactr_next_attempt: the one next-attempt policy (retry, backoff, takeover) of every
-- way a run ends: recorded by its executor (`finish_many.sql`), abandoned after a stop its
-- executor did not carry out (`abandon_stuck.sql`), or abandoned with its lost executor
-- (`abandon_orphans.sql`).
--
-- Given an ended attempt (its id, chain, attempt number, state, service slot and job) and
-- whether it ended because its executor was lost, returns when its next attempt may start
-- and why it exists, or no row when the chain ends here:
-- - a takeover, at once, when the executor was lost and the job reruns such runs and has
--   takeovers left (earlier abandoned attempts of the chain count; the ending attempt is
--   not visible to the statement ending it);
-- - else a retry, when the state is retryable and the job allows more attempts, after a
--   backoff doubling per attempt;
-- - never for a service's instance (the monitors' service pass restarts it).
--
-- SQL, STABLE and not STRICT so that the planner inlines it into the statement that calls
-- it: the policy is written once at no cost per run.
CREATE OR REPLACE FUNCTION probactr_next_attempt(
    ended_id BIGINT, ended_chain BIGINT, ended_attempt INTEGER, ended_state TEXT,
    ended_replica INTEGER, ended_job BIGINT, executor_lost BOOLEAN)
RETURNS TABLE (available_at TIMESTAMPTZ, reason TEXT)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN plan.takeover THEN now()
                ELSE now() + make_interval(secs => jobs.retry_backoff_secs * power(2, ended_attempt - 1)) END,
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
           OR (ended_state IN ('failed', 'timed_out', 'abandoned') AND ended_attempt < jobs.retry_max_attempts))
$$;
