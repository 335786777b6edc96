-- Runs split by life stage, so that a run costs the same whatever the backlog and history.
--
-- `runs` becomes a table partitioned by state:
--   * `runs_live`: queued, claimed and running runs. It holds only the backlog and the
--     work in flight, so the claim's index and heap stay small, and aggressive
--     autovacuum settings (plus the monitor's frequent VACUUM) keep its dead index
--     entries from piling up at the head of the queue.
--   * `runs_done`: ended runs, append-only in practice, partitioned by day of
--     `scheduled_at` (`runs_done_YYYYMMDD`, created ahead by
--     `probactr_maintain_run_partitions`, with a default partition for instants outside
--     them). Retention drops whole days instead of deleting row by row.
-- A run that ends moves from `runs_live` to `runs_done` in the statement that ends it:
-- deleted from the one, inserted with its end into `runs` (so into the other), keeping its
-- id (see `store::runs::end_runs_ctes`: an explicit move, because a concurrent statement
-- that meets a row PostgreSQL moved by an UPDATE fails instead of skipping it). Every
-- query that reads runs keeps naming `runs`.
--
-- What partitioning changes:
--   * `id` is unique by its identity sequence; no index can make it unique across
--     partitions, so it has a plain index, and the retry chain's `first_run_id` is no
--     longer a foreign key (deleting a job still deletes every attempt through `job_id`).
--   * Invariant 1 (one first attempt per trigger instant) is one unique index per
--     partition: `runs_trigger_instant` on live runs, `runs_done_trigger_instant` on
--     each day of ended runs (it includes the partition key). The firing insert also
--     checks ended runs of the instant before inserting a live one.
--   * A state outside the list routes to `runs_invalid`, an always-empty default
--     partition, so that it is refused by `runs_state_valid` by name.

LOCK TABLE runs IN ACCESS EXCLUSIVE MODE;

CREATE TABLE runs_partitioned (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY,
    job_id              BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    trigger_id          BIGINT REFERENCES triggers (id) ON DELETE SET NULL,
    scheduled_at        TIMESTAMPTZ NOT NULL,
    attempt             INTEGER NOT NULL DEFAULT 1,
    -- The first attempt of this chain (NULL on the first attempt itself).
    first_run_id        BIGINT,
    state               TEXT NOT NULL DEFAULT 'queued',
    reason              TEXT,
    exclusive           BOOLEAN NOT NULL DEFAULT FALSE,
    executor_id         UUID REFERENCES executors (id) ON DELETE SET NULL,
    lock_token          TEXT,
    fence               BIGINT,
    queued_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    available_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    claimed_at          TIMESTAMPTZ,
    started_at          TIMESTAMPTZ,
    finished_at         TIMESTAMPTZ,
    heartbeat_at        TIMESTAMPTZ,
    cancel_requested_at TIMESTAMPTZ,
    exit_code           INTEGER,
    http_status         INTEGER,
    error               TEXT,
    output              TEXT,
    output_truncated    BOOLEAN NOT NULL DEFAULT FALSE,
    CONSTRAINT runs_state_valid CHECK (state IN (
        'queued', 'claimed', 'running',
        'succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'missed', 'abandoned')),
    CONSTRAINT runs_attempt_positive CHECK (attempt >= 1),
    CONSTRAINT runs_attempt_chain CHECK ((attempt = 1) = (first_run_id IS NULL)),
    CONSTRAINT runs_owned_when_active CHECK (state NOT IN ('claimed', 'running') OR executor_id IS NOT NULL),
    CONSTRAINT runs_finished_when_terminal CHECK (
        state IN ('queued', 'claimed', 'running') OR finished_at IS NOT NULL),
    CONSTRAINT runs_http_status_range CHECK (http_status IS NULL OR http_status BETWEEN 100 AND 599)
) PARTITION BY LIST (state);

CREATE TABLE runs_live PARTITION OF runs_partitioned
    FOR VALUES IN ('queued', 'claimed', 'running')
    WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
          autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 1000,
          autovacuum_analyze_scale_factor = 0.05, autovacuum_vacuum_cost_delay = 0,
          fillfactor = 80);

CREATE TABLE runs_done PARTITION OF runs_partitioned
    FOR VALUES IN ('succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'missed', 'abandoned')
    PARTITION BY RANGE (scheduled_at);

CREATE TABLE runs_done_default PARTITION OF runs_done DEFAULT;

CREATE TABLE runs_invalid PARTITION OF runs_partitioned DEFAULT;

-- Creates the daily partitions of ended runs from `first_day` to `last_day` that do not
-- exist yet. A day whose ended runs already sit in the default partition is left there
-- (PostgreSQL refuses the new partition); retention deletes them row by row.
CREATE FUNCTION probactr_create_run_partitions(first_day DATE, last_day DATE)
RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
    day DATE := first_day;
    created INTEGER := 0;
    name TEXT;
BEGIN
    WHILE day <= last_day LOOP
        name := 'runs_done_' || to_char(day, 'YYYYMMDD');
        IF to_regclass(name) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE TABLE %I PARTITION OF runs_done FOR VALUES FROM (%L) TO (%L)',
                               name, day::timestamp AT TIME ZONE 'UTC',
                               (day + 1)::timestamp AT TIME ZONE 'UTC');
                created := created + 1;
            EXCEPTION WHEN check_violation OR duplicate_table THEN
                -- Rows of that day in the default partition, or another monitor made it.
                NULL;
            END;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN created;
END $$;

-- Housekeeping of ended runs' partitions: creates the days from yesterday to
-- `days_ahead` days ahead, and drops whole days older than `retention` (by
-- `scheduled_at`, with a day of margin) whose runs were all queued before the retention
-- cutoff and whose first attempts have no retry still live. Returns the rows dropped.
CREATE FUNCTION probactr_maintain_run_partitions(retention INTERVAL, days_ahead INTEGER)
RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    part RECORD;
    cutoff TIMESTAMPTZ := now() - retention;
    upper_bound TIMESTAMPTZ;
    blocked BOOLEAN;
    rows_dropped BIGINT := 0;
    part_rows BIGINT;
BEGIN
    PERFORM probactr_create_run_partitions((now() AT TIME ZONE 'UTC')::date - 1,
                                           (now() AT TIME ZONE 'UTC')::date + days_ahead);
    FOR part IN
        SELECT child.relname
        FROM pg_inherits
        JOIN pg_class child ON child.oid = pg_inherits.inhrelid
        WHERE pg_inherits.inhparent = 'runs_done'::regclass
          AND child.relname ~ '^runs_done_[0-9]{8}$'
        ORDER BY child.relname
    LOOP
        upper_bound := (to_date(substr(part.relname, 11), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC';
        CONTINUE WHEN upper_bound >= cutoff - interval '1 day';
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE queued_at >= $1)
                            OR EXISTS (SELECT 1 FROM runs_live JOIN %I AS done ON done.id = runs_live.first_run_id)',
                       part.relname, part.relname)
            INTO blocked USING cutoff;
        CONTINUE WHEN blocked;
        EXECUTE format('SELECT count(*) FROM %I', part.relname) INTO part_rows;
        EXECUTE format('DROP TABLE IF EXISTS %I', part.relname);
        rows_dropped := rows_dropped + part_rows;
    END LOOP;
    RETURN rows_dropped;
END $$;

-- Days of the existing history (at most the last 60) and the week ahead get their
-- partitions before the copy, so that the history lands in them rather than in the
-- default partition.
SELECT probactr_create_run_partitions(
    greatest((coalesce((SELECT min(scheduled_at) FROM runs WHERE state NOT IN ('queued', 'claimed', 'running')),
                       now()) AT TIME ZONE 'UTC')::date,
             (now() AT TIME ZONE 'UTC')::date - 60),
    (now() AT TIME ZONE 'UTC')::date + 7);

INSERT INTO runs_partitioned (
    id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state, reason, exclusive,
    executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at,
    finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output,
    output_truncated)
OVERRIDING SYSTEM VALUE
SELECT id, job_id, trigger_id, scheduled_at, attempt, first_run_id, state, reason, exclusive,
       executor_id, lock_token, fence, queued_at, available_at, claimed_at, started_at,
       finished_at, heartbeat_at, cancel_requested_at, exit_code, http_status, error, output,
       output_truncated
FROM runs;

SELECT setval(pg_get_serial_sequence('runs_partitioned', 'id'),
              greatest((SELECT max(id) FROM runs), 1), (SELECT max(id) IS NOT NULL FROM runs));

DROP TABLE runs;
ALTER TABLE runs_partitioned RENAME TO runs;
ALTER SEQUENCE runs_partitioned_id_seq RENAME TO runs_id_seq;
ALTER TABLE runs RENAME CONSTRAINT runs_partitioned_job_id_fkey TO runs_job_id_fkey;
ALTER TABLE runs RENAME CONSTRAINT runs_partitioned_trigger_id_fkey TO runs_trigger_id_fkey;
ALTER TABLE runs RENAME CONSTRAINT runs_partitioned_executor_id_fkey TO runs_executor_id_fkey;

-- Every partition: lookups by id, a job's runs newest first (job statistics read state
-- and queue time from it), retention and time filters.
CREATE INDEX runs_id ON runs (id);
CREATE INDEX runs_job_newest ON runs (job_id, id DESC) INCLUDE (state, queued_at);
CREATE INDEX runs_queued_at ON runs (queued_at);

-- Live runs.
-- Invariant 1 while the first attempt is live; and a retry is queued once per attempt.
CREATE UNIQUE INDEX runs_trigger_instant ON runs_live (trigger_id, scheduled_at) WHERE attempt = 1;
CREATE UNIQUE INDEX runs_chain_attempt ON runs_live (first_run_id, attempt) WHERE first_run_id IS NOT NULL;
-- Invariant 3, enforced by PostgreSQL itself: one running attempt of a non-parallel job.
CREATE UNIQUE INDEX runs_one_running_exclusive ON runs_live (job_id) WHERE state = 'running' AND exclusive;
-- The queued-run claim: `WHERE state = 'queued' AND available_at <= now() ORDER BY available_at, id`.
CREATE INDEX runs_queued ON runs_live (available_at, id) WHERE state = 'queued';
CREATE INDEX runs_active_by_job ON runs_live (job_id) WHERE state IN ('claimed', 'running');
CREATE INDEX runs_active_by_executor ON runs_live (executor_id) WHERE state IN ('claimed', 'running');

-- Ended runs.
-- Invariant 1 once the first attempt ended (per day: the index includes scheduled_at).
CREATE UNIQUE INDEX runs_done_trigger_instant ON runs_done (trigger_id, scheduled_at) WHERE attempt = 1;
-- A chain's attempts (retention keeps first attempts whose retry is live).
CREATE INDEX runs_done_chain ON runs_done (first_run_id) WHERE first_run_id IS NOT NULL;
-- The dashboard's recent failures, newest first.
CREATE INDEX runs_failed_newest ON runs_done (id DESC) WHERE state IN ('failed', 'timed_out', 'abandoned');

-- The triggers of the former table, unchanged.
CREATE TRIGGER runs_queued_notify
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_runs();

CREATE TRIGGER runs_stats_inserted
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_inserted();

CREATE TRIGGER runs_stats_updated
    AFTER UPDATE ON runs
    REFERENCING OLD TABLE AS previous_runs NEW TABLE AS updated_runs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_updated();

ANALYZE runs;

-- Statistics for the live partition as it is when it matters: a backlog of queued runs
-- and many claimed and running ones, of many jobs and executors. A table never analyzed
-- is planned from default guesses, and those pick a partial index that holds every run
-- in flight (or read the whole backlog and sort it, for the claim) where one lookup by id
-- or one ordered walk of `runs_queued` would do: costs that grow with the backlog. The
-- monitor re-analyzes the partition every few seconds from then on.
-- (The sample rows, jobs and executors are made for the purpose and gone when the
-- migration commits.)
DO $$
DECLARE
    first_job BIGINT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM runs_live) THEN
        INSERT INTO jobs (name, kind, parallel)
        SELECT 'probactr-statistics-sample-' || g, 'noop', true FROM generate_series(1, 100) AS g;
        SELECT min(id) INTO first_job FROM jobs WHERE name LIKE 'probactr-statistics-sample-%';
        INSERT INTO executors (id, host, pid, version)
        SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, 'sample', 0, 'sample'
        FROM generate_series(1, 20) AS g;
        INSERT INTO runs (job_id, scheduled_at, available_at, state, executor_id, claimed_at, started_at)
        SELECT first_job + g % 100, now(), now() - make_interval(secs => g),
               CASE WHEN g % 10 < 4 THEN 'queued' WHEN g % 10 < 7 THEN 'claimed' ELSE 'running' END,
               CASE WHEN g % 10 < 4 THEN NULL
                    ELSE ('00000000-0000-4000-8000-' || lpad((1 + g % 20)::text, 12, '0'))::uuid END,
               CASE WHEN g % 10 < 4 THEN NULL ELSE now() END,
               CASE WHEN g % 10 < 7 THEN NULL ELSE now() END
        FROM generate_series(1, 2000) AS g;
        ANALYZE runs_live;
        DELETE FROM runs_live;
        DELETE FROM executors WHERE host = 'sample' AND version = 'sample';
        DELETE FROM jobs WHERE name LIKE 'probactr-statistics-sample-%';
    END IF;
END $$;
