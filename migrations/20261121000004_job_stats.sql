-- Per-job run statistics kept as all-time counters, so that listing jobs costs the same
-- however long their histories are (it used to count each job's latest runs per request).
--
-- A run is counted once, when it becomes terminal: by the statement that inserts it
-- already ended, or by the UPDATE that moves it from queued/claimed/running to a terminal
-- state. Rewriting an ended run (a cancel request on a finished run) counts nothing, and
-- deleting runs (history retention) subtracts nothing: the counters are all-time (for a
-- job older than this migration: since its oldest run retention had kept).
-- Deleting the job deletes its row.
--
-- The counters are maintained by statement-level triggers over transition tables, one
-- upsert per job per statement: a grouped finish of 500 runs of one job writes one row
-- version, not 500 (row-level triggers would also make the finishes of a job queue behind
-- each other on its row once per run). Statements that end no run (claims, starts) only
-- scan their new rows.
--
-- Cost: concurrent statements ending runs of the same job still take turns on its row,
-- from their trigger to their commit (the commit's WAL flush included). The executors'
-- grouping absorbs it (a waiting recorder writes a bigger group next time); see
-- BENCHMARKS.md for the measured cost on the hot path.
--
-- Deadlocks: a statement locks the rows of the jobs whose runs it ended, in job_id order,
-- and holds them until its transaction ends. Two statements that end runs of the same jobs
-- (the executors' grouped finishes, the monitor's reaping) therefore wait for each other
-- but never cross. Every statement that ends runs of several jobs runs in a transaction of
-- its own; a transaction that ended runs of several jobs in separate statements could
-- still deadlock with another doing the same in the opposite order.

CREATE TABLE job_stats (
    job_id              BIGINT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    -- Ended runs (every attempt counts once): succeeded + failed + cancelled + not run.
    runs                BIGINT NOT NULL DEFAULT 0,
    successes           BIGINT NOT NULL DEFAULT 0,
    -- failed, timed_out, abandoned
    failures            BIGINT NOT NULL DEFAULT 0,
    cancelled           BIGINT NOT NULL DEFAULT 0,
    -- skipped (overlap policy) or missed (its instant passed): never started.
    not_run             BIGINT NOT NULL DEFAULT 0,
    -- The latest ended run, by (finished_at, id). Only an id: the run may have been pruned.
    last_run_id         BIGINT,
    last_run_at         TIMESTAMPTZ,
    last_state          TEXT,
    -- finished_at - started_at of that run; NULL when it never started.
    last_duration_ms    BIGINT,
    last_success_at     TIMESTAMPTZ,
    -- The latest end in failed, timed_out or abandoned.
    last_failure_at     TIMESTAMPTZ
);

-- Adds ended runs, given in columns, to their jobs' counters. The rows are upserted in
-- job_id order (see "Deadlocks" above). The latest end only replaces the stored one when
-- it is later: `finished_at` is its transaction's start time, so a transaction that
-- commits later may carry an earlier end.
CREATE FUNCTION probactr_job_stats_add(job_ids BIGINT[], run_ids BIGINT[], states TEXT[],
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
    INSERT INTO job_stats AS stats (job_id, runs, successes, failures, cancelled, not_run,
                                    last_run_id, last_run_at, last_state, last_duration_ms,
                                    last_success_at, last_failure_at)
    SELECT totals.job_id, totals.runs, totals.successes, totals.failures, totals.cancelled,
           totals.not_run, latest.id, latest.finished_at, latest.state, latest.duration_ms,
           totals.last_success_at, totals.last_failure_at
    FROM totals JOIN latest USING (job_id)
    ORDER BY totals.job_id
    ON CONFLICT (job_id) DO UPDATE SET
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

-- Runs inserted already ended (recorded as skipped or missed without being queued).
CREATE FUNCTION probactr_job_stats_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    job_ids BIGINT[]; run_ids BIGINT[]; states TEXT[]; started TIMESTAMPTZ[]; finished TIMESTAMPTZ[];
BEGIN
    SELECT array_agg(job_id), array_agg(id), array_agg(state), array_agg(started_at), array_agg(finished_at)
    INTO job_ids, run_ids, states, started, finished
    FROM inserted_runs WHERE state NOT IN ('queued', 'claimed', 'running');
    IF job_ids IS NOT NULL THEN
        PERFORM probactr_job_stats_add(job_ids, run_ids, states, started, finished);
    END IF;
    RETURN NULL;
END $$;

-- Runs that this statement moved into a terminal state.
CREATE FUNCTION probactr_job_stats_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    job_ids BIGINT[]; run_ids BIGINT[]; states TEXT[]; started TIMESTAMPTZ[]; finished TIMESTAMPTZ[];
BEGIN
    -- Most updates of runs (claims, starts, returns to the queue) end nothing: they pay
    -- one pass over their new rows, not the join.
    IF NOT EXISTS (SELECT 1 FROM updated_runs WHERE state NOT IN ('queued', 'claimed', 'running')) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(after.job_id), array_agg(after.id), array_agg(after.state),
           array_agg(after.started_at), array_agg(after.finished_at)
    INTO job_ids, run_ids, states, started, finished
    FROM updated_runs AS after JOIN previous_runs AS before ON before.id = after.id
    WHERE before.state IN ('queued', 'claimed', 'running')
      AND after.state NOT IN ('queued', 'claimed', 'running');
    IF job_ids IS NOT NULL THEN
        PERFORM probactr_job_stats_add(job_ids, run_ids, states, started, finished);
    END IF;
    RETURN NULL;
END $$;

-- Every job has its row from the start, so counting never inserts one on the executors'
-- path (an insert would check the foreign key, locking the job's row against its
-- deletion; an update of the existing row does not).
CREATE FUNCTION probactr_job_stats_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_stats (job_id) SELECT id FROM created_jobs ORDER BY id ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

-- Counting starts with the triggers and the backfill below counts what came before: the
-- lock keeps runs from ending in between (it waits for transactions writing runs to end
-- and holds off new writes until this migration commits).
LOCK TABLE jobs, runs IN SHARE ROW EXCLUSIVE MODE;

CREATE TRIGGER jobs_stats_row
    AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS created_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_created();

CREATE TRIGGER runs_stats_inserted
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_inserted();

CREATE TRIGGER runs_stats_updated
    AFTER UPDATE ON runs
    REFERENCING OLD TABLE AS previous_runs NEW TABLE AS updated_runs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_updated();

-- The same counts as probactr_job_stats_add, over every ended run so far (in one pass,
-- not through arrays: a long history would not fit in one).
INSERT INTO job_stats (job_id, runs, successes, failures, cancelled, not_run, last_success_at, last_failure_at)
SELECT job_id,
       count(*),
       count(*) FILTER (WHERE state = 'succeeded'),
       count(*) FILTER (WHERE state IN ('failed', 'timed_out', 'abandoned')),
       count(*) FILTER (WHERE state = 'cancelled'),
       count(*) FILTER (WHERE state IN ('skipped', 'missed')),
       max(finished_at) FILTER (WHERE state = 'succeeded'),
       max(finished_at) FILTER (WHERE state IN ('failed', 'timed_out', 'abandoned'))
FROM runs WHERE state NOT IN ('queued', 'claimed', 'running')
GROUP BY job_id;

UPDATE job_stats SET last_run_id = latest.id, last_run_at = latest.finished_at, last_state = latest.state,
                     last_duration_ms = (EXTRACT(EPOCH FROM latest.finished_at - latest.started_at) * 1000)::bigint
FROM (SELECT DISTINCT ON (job_id) job_id, id, finished_at, started_at, state
      FROM runs WHERE state NOT IN ('queued', 'claimed', 'running')
      ORDER BY job_id, finished_at DESC, id DESC) AS latest
WHERE job_stats.job_id = latest.job_id;

INSERT INTO job_stats (job_id) SELECT id FROM jobs ON CONFLICT DO NOTHING;
