-- probactr_alert_run_ends: current body (first defined in 20261124000005_alerts.sql, last in 20261124000010_takeover.sql).
--
-- An attempt abandoned because its executor died is not the chain's last while a
-- takeover is left, nor is a failure the retry policy retries (`probactr_next_attempt`,
-- the one place that decides: attempts left and `retry_on`): `run_failed` waits for the
-- attempt that is.
--
-- The events' statement costs about 0.06 ms even when it inserts nothing: statements
-- that ended no run badly (successes, queued runs) return before it.
CREATE OR REPLACE FUNCTION probactr_alert_run_ends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM alert_rules WHERE enabled)
       OR NOT EXISTS (SELECT 1 FROM inserted WHERE state IN ('failed', 'timed_out', 'abandoned', 'missed')) THEN
        RETURN NULL;
    END IF;
    INSERT INTO alert_events (event, job_id, trigger_id, run_id, executor_id, detail)
    SELECT kinds.event, ended.job_id, ended.trigger_id, ended.id, ended.executor_id,
           jsonb_build_object('state', ended.state, 'attempt', ended.attempt,
                              'max_attempts', jobs.retry_max_attempts, 'error', ended.error,
                              'reason', ended.reason, 'exit_code', ended.exit_code,
                              'http_status', ended.http_status,
                              'scheduled_at', ended.scheduled_at, 'finished_at', ended.finished_at)
    FROM inserted AS ended
    JOIN jobs ON jobs.id = ended.job_id
    CROSS JOIN LATERAL (
        SELECT ended.state = 'abandoned' AND ended.reason = 'executor lost'
               AND jobs.on_executor_lost = 'rerun'
               AND (SELECT count(*) FROM runs AS earlier
                    WHERE (earlier.first_run_id = coalesce(ended.first_run_id, ended.id)
                           OR earlier.id = coalesce(ended.first_run_id, ended.id))
                      AND earlier.state = 'abandoned' AND earlier.id <> ended.id) < jobs.max_takeovers
               AS taken_over) AS takeover
    CROSS JOIN LATERAL (VALUES
        (CASE WHEN ended.state IN ('failed', 'timed_out', 'abandoned')
                   AND NOT takeover.taken_over
                   AND NOT EXISTS (SELECT 1 FROM probactr_next_attempt(
                       ended.id, ended.first_run_id, ended.attempt, ended.state, ended.exit_code,
                       ended.http_status, NULL, ended.job_id, false)) THEN 'run_failed' END),
        (CASE ended.state WHEN 'timed_out' THEN 'run_timed_out'
                          WHEN 'abandoned' THEN 'run_abandoned'
                          WHEN 'missed' THEN 'fire_missed' END)) AS kinds (event)
    WHERE ended.state IN ('failed', 'timed_out', 'abandoned', 'missed')
      AND kinds.event IS NOT NULL;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_alert_events
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_alert_run_ends();
