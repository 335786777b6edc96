-- Per-job counters without a hot row: each job's counters are split over up to eight
-- rows (`job_stat_shards`), one per group of database sessions, and `job_stats` is a view
-- summing them, with the same columns as the table it replaces.
--
-- Before, every statement that ended runs of a job updated the job's one `job_stats`
-- row and held its lock until commit, so two executors finishing runs of the same job
-- took turns, their commits' WAL flushes included. Now a statement adds to the row of its
-- session's shard (`pg_backend_pid() % 8`): executors' connections spread over the
-- shards and rarely meet. Reading a job's counters sums at most eight rows found by the
-- primary key. The counting rules (what counts once, and when) are those of
-- `20261121000004_job_stats.sql`; shards sort by (job_id, shard), so statements still
-- lock rows in job order and never cross.

LOCK TABLE jobs, runs IN SHARE ROW EXCLUSIVE MODE;

ALTER TABLE job_stats RENAME TO job_stat_shards;
ALTER TABLE job_stat_shards ADD COLUMN shard SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE job_stat_shards DROP CONSTRAINT job_stats_pkey;
ALTER TABLE job_stat_shards ADD CONSTRAINT job_stat_shards_pkey PRIMARY KEY (job_id, shard);
ALTER TABLE job_stat_shards ADD CONSTRAINT job_stat_shards_shard_range CHECK (shard BETWEEN 0 AND 7);

-- The latest end of a job is the latest over its shards, by (last_run_at, last_run_id).
CREATE VIEW job_stats AS
SELECT job_id,
       sum(runs)::bigint AS runs,
       sum(successes)::bigint AS successes,
       sum(failures)::bigint AS failures,
       sum(cancelled)::bigint AS cancelled,
       sum(not_run)::bigint AS not_run,
       (array_agg(last_run_id ORDER BY last_run_at DESC NULLS LAST, last_run_id DESC NULLS LAST))[1] AS last_run_id,
       max(last_run_at) AS last_run_at,
       (array_agg(last_state ORDER BY last_run_at DESC NULLS LAST, last_run_id DESC NULLS LAST))[1] AS last_state,
       (array_agg(last_duration_ms ORDER BY last_run_at DESC NULLS LAST, last_run_id DESC NULLS LAST))[1] AS last_duration_ms,
       max(last_success_at) AS last_success_at,
       max(last_failure_at) AS last_failure_at
FROM job_stat_shards
GROUP BY job_id;

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

-- A new job gets its shard 0, so that it has a `job_stats` row before its first run.
CREATE OR REPLACE FUNCTION probactr_job_stats_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_stat_shards (job_id) SELECT id FROM created_jobs ORDER BY id ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
