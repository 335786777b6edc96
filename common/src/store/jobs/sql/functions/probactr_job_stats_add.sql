-- probactr_job_stats_add: current body (first defined in 20261121000004_job_stats.sql, last in 20261124000002_job_stats_shards.sql).
--
-- Adds ended runs, given in columns, to their jobs' all-time counters. A run is counted
-- once, when it becomes terminal (probactr_job_stats_inserted, _updated); deleting runs
-- subtracts nothing.
--
-- No hot row: a job's counters are split over up to eight rows of `job_stat_shards`, one
-- per group of database sessions (`pg_backend_pid() % 8`), and the view `job_stats` sums
-- them. Executors' connections spread over the shards, so two of them ending runs of the
-- same job rarely wait for each other's commit.
--
-- Deadlocks: the rows are upserted in (job_id, shard) order and held until the
-- transaction ends, so two statements ending runs of the same jobs wait for each other
-- but never cross. Every statement ending runs of several jobs runs in a transaction of
-- its own (the claim that carries a group of ends, `runs::finish_and_claim`, ends none
-- itself).
--
-- The latest end only replaces the stored one when it is later: `finished_at` is its
-- transaction's start time, so a transaction that commits later may carry an earlier end.
CREATE OR REPLACE FUNCTION probactr_job_stats_add(job_ids BIGINT[], run_ids BIGINT[], states TEXT[],
                                                  started TIMESTAMPTZ[], finished TIMESTAMPTZ[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH ended AS (
        SELECT * FROM unnest(job_ids, run_ids, states, started, finished)
            AS ended (job_id, id, state, started_at, finished_at)),
    totals AS (
        SELECT job_id,
               count(*) AS runs,
               count(*) FILTER (WHERE state = 'succeeded') AS successes,
               count(*) FILTER (WHERE state IN ('failed', 'timed_out', 'abandoned')) AS failures,
               count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
               count(*) FILTER (WHERE state IN ('skipped', 'missed')) AS not_run,
               max(finished_at) FILTER (WHERE state = 'succeeded') AS last_success_at,
               max(finished_at) FILTER (WHERE state IN ('failed', 'timed_out', 'abandoned')) AS last_failure_at
        FROM ended GROUP BY job_id),
    latest AS (
        SELECT DISTINCT ON (job_id) job_id, id, finished_at, state,
               (EXTRACT(EPOCH FROM finished_at - started_at) * 1000)::bigint AS duration_ms
        FROM ended ORDER BY job_id, finished_at DESC, id DESC)
    INSERT INTO job_stat_shards AS stats (job_id, shard, runs, successes, failures, cancelled, not_run,
                                          last_run_id, last_run_at, last_state, last_duration_ms,
                                          last_success_at, last_failure_at)
    SELECT totals.job_id, (pg_backend_pid() % 8)::smallint, totals.runs, totals.successes,
           totals.failures, totals.cancelled, totals.not_run, latest.id, latest.finished_at,
           latest.state, latest.duration_ms, totals.last_success_at, totals.last_failure_at
    FROM totals JOIN latest USING (job_id)
    ORDER BY totals.job_id
    ON CONFLICT (job_id, shard) DO UPDATE SET
        runs = stats.runs + excluded.runs,
        successes = stats.successes + excluded.successes,
        failures = stats.failures + excluded.failures,
        cancelled = stats.cancelled + excluded.cancelled,
        not_run = stats.not_run + excluded.not_run,
        last_run_id = CASE WHEN stats.last_run_at IS NULL
                             OR (excluded.last_run_at, excluded.last_run_id) > (stats.last_run_at, stats.last_run_id)
                           THEN excluded.last_run_id ELSE stats.last_run_id END,
        last_state = CASE WHEN stats.last_run_at IS NULL
                            OR (excluded.last_run_at, excluded.last_run_id) > (stats.last_run_at, stats.last_run_id)
                          THEN excluded.last_state ELSE stats.last_state END,
        last_duration_ms = CASE WHEN stats.last_run_at IS NULL
                                  OR (excluded.last_run_at, excluded.last_run_id) > (stats.last_run_at, stats.last_run_id)
                                THEN excluded.last_duration_ms ELSE stats.last_duration_ms END,
        last_run_at = CASE WHEN stats.last_run_at IS NULL
                             OR (excluded.last_run_at, excluded.last_run_id) > (stats.last_run_at, stats.last_run_id)
                           THEN excluded.last_run_at ELSE stats.last_run_at END,
        last_success_at = greatest(stats.last_success_at, excluded.last_success_at),
        last_failure_at = greatest(stats.last_failure_at, excluded.last_failure_at);
END $$;
