-- probactr_job_stats_count: current body (since 2026121301000001_job_stats_counted_in_one_statement.sql,
-- which drops probactr_job_stats_add, _inserted and _updated, the functions it replaces).
--
-- Adds the runs a statement ended to their jobs' all-time counters. A run is counted
-- once, when it becomes terminal: inserted already ended (a move into the history, a
-- skip or a miss recorded without a queue) or updated from queued/claimed/running into a
-- terminal state. Rewriting an ended run (a cancel request on a finished run) counts
-- nothing; deleting runs subtracts nothing.
--
-- One statement reads the transition table itself: handing the ended rows to a second
-- function as arrays cost a group of ends half as much again (0.15 against 0.10 ms for
-- the recorder's group of 35, most of it the call and the arrays, whatever the group).
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
CREATE OR REPLACE FUNCTION probactr_job_stats_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    -- An update's runs that were live before it; none for an insert, whose every ended
    -- row is new.
    were_live BIGINT[];
BEGIN
    -- Most statements on runs (firings, claims, starts, returns to the queue) end
    -- nothing: they pay one pass over their rows, not the upsert.
    IF NOT EXISTS (SELECT 1 FROM changed_runs WHERE state NOT IN ('queued', 'claimed', 'running')) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        SELECT array_agg(id) INTO were_live FROM previous_runs WHERE state IN ('queued', 'claimed', 'running');
        IF were_live IS NULL THEN
            RETURN NULL;
        END IF;
    END IF;
    INSERT INTO job_stat_shards AS stats (job_id, shard, runs, successes, failures, cancelled, not_run,
                                          last_run_id, last_run_at, last_state, last_duration_ms,
                                          last_success_at, last_failure_at)
    SELECT job_id, (pg_backend_pid() % 8)::smallint,
           count(*),
           count(*) FILTER (WHERE state = 'succeeded'),
           count(*) FILTER (WHERE state IN ('failed', 'timed_out', 'abandoned')),
           count(*) FILTER (WHERE state = 'cancelled'),
           count(*) FILTER (WHERE state IN ('skipped', 'missed')),
           max(id) FILTER (WHERE latest),
           max(finished_at) FILTER (WHERE latest),
           max(state) FILTER (WHERE latest),
           max((EXTRACT(EPOCH FROM finished_at - started_at) * 1000)::bigint) FILTER (WHERE latest),
           max(finished_at) FILTER (WHERE state = 'succeeded'),
           max(finished_at) FILTER (WHERE state IN ('failed', 'timed_out', 'abandoned'))
    FROM (SELECT job_id, id, state, started_at, finished_at,
                 -- The job's latest end in this statement: one sort for every job.
                 row_number() OVER (PARTITION BY job_id ORDER BY finished_at DESC, id DESC) = 1 AS latest
          FROM changed_runs
          WHERE state NOT IN ('queued', 'claimed', 'running')
            AND (were_live IS NULL OR id IN (SELECT unnest(were_live)))) AS ended
    GROUP BY job_id
    ORDER BY job_id
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
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER runs_stats_inserted
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS changed_runs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_count();

CREATE OR REPLACE TRIGGER runs_stats_updated
    AFTER UPDATE ON runs
    REFERENCING OLD TABLE AS previous_runs NEW TABLE AS changed_runs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_count();
