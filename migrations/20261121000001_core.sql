-- probactr core schema: jobs, triggers, runs, misfires, executors.
--
-- Deletion policy (deliberate):
--   * deleting a job deletes its triggers and its run history (ON DELETE CASCADE);
--     the manager's audit log keeps the record that the job existed and who deleted it.
--   * deleting a trigger keeps the runs it produced; their trigger_id becomes NULL.
--   * executors are never deleted while runs point at them; runs keep executor_id
--     (ON DELETE SET NULL) when old executor rows are pruned.
--
-- Run states (see common::model::RunState for the state machine):
--   queued -> claimed -> running -> succeeded | failed | timed_out | cancelled | abandoned
--   queued -> skipped | missed | cancelled ; claimed -> queued | skipped

CREATE TABLE jobs (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                TEXT NOT NULL,
    description         TEXT NOT NULL DEFAULT '',
    kind                TEXT NOT NULL,
    spec                JSONB NOT NULL DEFAULT '{}'::jsonb,
    parallel            BOOLEAN NOT NULL DEFAULT FALSE,
    -- NULL means "no limit" for a parallel job; a non-parallel job ignores it.
    max_concurrency     INTEGER,
    overlap             TEXT NOT NULL DEFAULT 'skip',
    timeout_secs        INTEGER NOT NULL DEFAULT 3600,
    retry_max_attempts  INTEGER NOT NULL DEFAULT 1,
    retry_backoff_secs  INTEGER NOT NULL DEFAULT 10,
    paused              BOOLEAN NOT NULL DEFAULT FALSE,
    -- Last fencing token handed out for this job (see common::lock::fence).
    fence               BIGINT NOT NULL DEFAULT 0,
    version             BIGINT NOT NULL DEFAULT 1,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT jobs_name_unique UNIQUE (name),
    CONSTRAINT jobs_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT jobs_kind_valid CHECK (kind IN ('shell', 'http', 'noop', 'sleep')),
    CONSTRAINT jobs_spec_object CHECK (jsonb_typeof(spec) = 'object'),
    CONSTRAINT jobs_max_concurrency_positive CHECK (max_concurrency IS NULL OR max_concurrency >= 1),
    CONSTRAINT jobs_overlap_valid CHECK (overlap IN ('skip', 'queue')),
    CONSTRAINT jobs_timeout_positive CHECK (timeout_secs > 0),
    CONSTRAINT jobs_retry_attempts_positive CHECK (retry_max_attempts BETWEEN 1 AND 100),
    CONSTRAINT jobs_retry_backoff_nonnegative CHECK (retry_backoff_secs >= 0),
    CONSTRAINT jobs_fence_nonnegative CHECK (fence >= 0),
    CONSTRAINT jobs_version_positive CHECK (version >= 1)
);

CREATE TABLE triggers (
    id                      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id                  BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    kind                    TEXT NOT NULL,
    cron                    TEXT,
    timezone                TEXT NOT NULL DEFAULT 'UTC',
    interval_secs           BIGINT,
    at                      TIMESTAMPTZ,
    start_at                TIMESTAMPTZ,
    end_at                  TIMESTAMPTZ,
    misfire                 TEXT NOT NULL DEFAULT 'fire_once',
    -- An instant later than this when it is fired counts as misfired.
    misfire_threshold_secs  INTEGER NOT NULL DEFAULT 60,
    paused                  BOOLEAN NOT NULL DEFAULT FALSE,
    -- NULL once the trigger has no instant left (a fired one-shot, a closed window).
    next_fire_at            TIMESTAMPTZ,
    last_fired_at           TIMESTAMPTZ,
    version                 BIGINT NOT NULL DEFAULT 1,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT triggers_kind_valid CHECK (kind IN ('cron', 'interval', 'once')),
    CONSTRAINT triggers_kind_fields CHECK (
        (kind = 'cron' AND cron IS NOT NULL AND interval_secs IS NULL AND at IS NULL)
        OR (kind = 'interval' AND interval_secs IS NOT NULL AND cron IS NULL AND at IS NULL)
        OR (kind = 'once' AND at IS NOT NULL AND cron IS NULL AND interval_secs IS NULL)
    ),
    CONSTRAINT triggers_interval_positive CHECK (interval_secs IS NULL OR interval_secs > 0),
    CONSTRAINT triggers_window_ordered CHECK (start_at IS NULL OR end_at IS NULL OR end_at > start_at),
    CONSTRAINT triggers_misfire_valid CHECK (misfire IN ('fire_once', 'skip', 'fire_all')),
    CONSTRAINT triggers_misfire_threshold_positive CHECK (misfire_threshold_secs > 0),
    CONSTRAINT triggers_timezone_nonempty CHECK (char_length(timezone) BETWEEN 1 AND 64),
    CONSTRAINT triggers_version_positive CHECK (version >= 1)
);

CREATE INDEX triggers_job ON triggers (job_id);
-- The due-trigger claim: `WHERE NOT paused AND next_fire_at <= now() ORDER BY next_fire_at`.
CREATE INDEX triggers_due ON triggers (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;

CREATE TABLE executors (
    id                  UUID PRIMARY KEY,
    role                TEXT NOT NULL DEFAULT 'executor',
    host                TEXT NOT NULL,
    pid                 INTEGER NOT NULL,
    version             TEXT NOT NULL,
    capacity            INTEGER NOT NULL DEFAULT 0,
    state               TEXT NOT NULL DEFAULT 'alive',
    started_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_heartbeat_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    declared_dead_at    TIMESTAMPTZ,
    -- The monitor that declared it dead (one conditional UPDATE, so exactly one).
    reaped_by           UUID,
    CONSTRAINT executors_role_valid CHECK (role IN ('executor', 'monitor')),
    CONSTRAINT executors_state_valid CHECK (state IN ('alive', 'draining', 'dead', 'stopped')),
    CONSTRAINT executors_capacity_nonnegative CHECK (capacity >= 0)
);

-- The reaper's scan: live processes ordered by silence.
CREATE INDEX executors_live_heartbeat ON executors (last_heartbeat_at) WHERE state IN ('alive', 'draining');

CREATE TABLE runs (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id              BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    trigger_id          BIGINT REFERENCES triggers (id) ON DELETE SET NULL,
    scheduled_at        TIMESTAMPTZ NOT NULL,
    attempt             INTEGER NOT NULL DEFAULT 1,
    -- The first attempt of this chain (NULL on the first attempt itself).
    first_run_id        BIGINT REFERENCES runs (id) ON DELETE CASCADE,
    state               TEXT NOT NULL DEFAULT 'queued',
    reason              TEXT,
    -- Copied from the job when the run starts: a running exclusive run holds the job.
    exclusive           BOOLEAN NOT NULL DEFAULT FALSE,
    executor_id         UUID REFERENCES executors (id) ON DELETE SET NULL,
    lock_token          TEXT,
    fence               BIGINT,
    queued_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A queued run is not claimed before this instant (retry backoff, lock contention).
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
);

-- Invariant 1: a trigger's scheduled instant produces at most one run chain. Retries of
-- that instant are further rows of the same chain, one per attempt.
CREATE UNIQUE INDEX runs_trigger_instant ON runs (trigger_id, scheduled_at) WHERE attempt = 1;
CREATE UNIQUE INDEX runs_chain_attempt ON runs (first_run_id, attempt) WHERE first_run_id IS NOT NULL;
-- Invariant 3, enforced by PostgreSQL itself: one running attempt of a non-parallel job.
CREATE UNIQUE INDEX runs_one_running_exclusive ON runs (job_id) WHERE state = 'running' AND exclusive;
-- The queued-run claim: `WHERE state = 'queued' AND available_at <= now() ORDER BY available_at, id`.
CREATE INDEX runs_queued ON runs (available_at, id) WHERE state = 'queued';
-- The queued-run claim skips non-parallel jobs that already have an active attempt.
CREATE INDEX runs_active_by_job ON runs (job_id) WHERE state IN ('claimed', 'running');
-- The reaper and the executor's own bookkeeping: active runs per executor.
CREATE INDEX runs_active_by_executor ON runs (executor_id) WHERE state IN ('claimed', 'running');
-- History pages: a job's runs, newest first; the whole list, newest first; retention.
-- (state and queued_at included: job statistics are read from the index alone)
CREATE INDEX runs_job_newest ON runs (job_id, id DESC) INCLUDE (state, queued_at);
CREATE INDEX runs_queued_at ON runs (queued_at);

-- Instants that were not run, counted rather than written one row each (a trigger that
-- fires every second and was down for a day would otherwise write 86,400 rows).
CREATE TABLE misfires (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger_id      BIGINT NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    job_id          BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    first_instant   TIMESTAMPTZ NOT NULL,
    last_instant    TIMESTAMPTZ NOT NULL,
    instants        BIGINT NOT NULL,
    policy          TEXT NOT NULL,
    reason          TEXT NOT NULL,
    recorded_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT misfires_instants_positive CHECK (instants >= 1),
    CONSTRAINT misfires_range_ordered CHECK (last_instant >= first_instant),
    CONSTRAINT misfires_policy_valid CHECK (policy IN ('fire_once', 'skip', 'fire_all'))
);

CREATE INDEX misfires_trigger ON misfires (trigger_id, recorded_at DESC);

-- Wake sleeping executors when a trigger changes or a run is queued. One notification per
-- statement: PostgreSQL folds identical payloads of a transaction into one.
-- An executor advancing next_fire_at as it fires sets `probactr.quiet` for its transaction:
-- its peers need no wake-up for instants it just handled.
CREATE FUNCTION probactr_notify_triggers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('probactr.quiet', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('probactr_triggers', '');
    RETURN NULL;
END $$;

CREATE TRIGGER triggers_changed
    AFTER INSERT OR UPDATE OF next_fire_at, paused OR DELETE ON triggers
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_triggers();

-- Only inserts of runs claimable now wake executors: retries waiting out a backoff and
-- runs recorded as already ended do not.
CREATE FUNCTION probactr_notify_runs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted WHERE state = 'queued' AND available_at <= now()) THEN
        PERFORM pg_notify('probactr_runs', '');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_queued_notify
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_runs();
