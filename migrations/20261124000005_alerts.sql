-- Alerts: channels (where messages go), rules (which events, for which jobs, to which
-- channels, how often), the outbox of events, the throttle windows, the conditions raised
-- once per occurrence, and the delivery log.
--
-- Events that are a state change (a run ending, an executor declared dead, instants
-- missed) are written to the outbox by the triggers below, in the transaction of the
-- change itself: a crash cannot separate the change from its event. The triggers write
-- nothing while no rule is enabled, so a cluster without alerts pays one cheap check per
-- statement. Monitors turn events into notifications (common::store::alerts) and deliver
-- them (monitor::alerts).

CREATE TABLE alert_channels (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            TEXT NOT NULL,
    kind            TEXT NOT NULL,
    -- The public part of the configuration: `url` (webhook, slack) or `to` (email).
    config          JSONB NOT NULL,
    -- The webhook's signing secret, sealed like job secrets (write-only).
    secret_key_id   TEXT,
    secret_nonce    BYTEA,
    secret_sealed   BYTEA,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT alert_channels_name_unique UNIQUE (name),
    CONSTRAINT alert_channels_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT alert_channels_kind_valid CHECK (kind IN ('webhook', 'email', 'slack')),
    CONSTRAINT alert_channels_config_object CHECK (jsonb_typeof(config) = 'object'),
    CONSTRAINT alert_channels_secret_whole CHECK (
        (secret_key_id IS NULL) = (secret_nonce IS NULL) AND (secret_nonce IS NULL) = (secret_sealed IS NULL))
);

CREATE TABLE alert_rules (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            TEXT NOT NULL,
    events          TEXT[] NOT NULL,
    -- NULL: every job.
    job_id          BIGINT REFERENCES jobs (id) ON DELETE CASCADE,
    threshold       INTEGER,
    duration_secs   INTEGER,
    throttle_secs   INTEGER NOT NULL DEFAULT 300,
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT alert_rules_name_unique UNIQUE (name),
    CONSTRAINT alert_rules_name_length CHECK (char_length(name) BETWEEN 1 AND 200),
    CONSTRAINT alert_rules_events_valid CHECK (cardinality(events) >= 1 AND events <@ ARRAY[
        'run_failed', 'run_timed_out', 'run_abandoned', 'fire_missed', 'consecutive_failures',
        'run_too_long', 'no_success_within', 'executor_lost', 'no_executor', 'recovered']),
    CONSTRAINT alert_rules_threshold_positive CHECK (threshold IS NULL OR threshold >= 1),
    CONSTRAINT alert_rules_duration_positive CHECK (duration_secs IS NULL OR duration_secs >= 1),
    CONSTRAINT alert_rules_throttle_nonnegative CHECK (throttle_secs >= 0)
);

-- A channel in use by a rule cannot be deleted (the API says which rules use it).
CREATE TABLE alert_rule_channels (
    rule_id     BIGINT NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    channel_id  BIGINT NOT NULL REFERENCES alert_channels (id) ON DELETE RESTRICT,
    PRIMARY KEY (rule_id, channel_id)
);
CREATE INDEX alert_rule_channels_channel ON alert_rule_channels (channel_id);

-- The outbox: events not yet turned into notifications. Rows are deleted as monitors
-- process them. `rule_id` is set for conditions a monitor evaluated for one rule.
CREATE TABLE alert_events (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event           TEXT NOT NULL,
    rule_id         BIGINT REFERENCES alert_rules (id) ON DELETE CASCADE,
    job_id          BIGINT,
    trigger_id      BIGINT,
    run_id          BIGINT,
    executor_id     UUID,
    detail          JSONB NOT NULL DEFAULT '{}'::jsonb,
    occurred_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Throttling: per rule, job (0: no job) and event, the window whose first event was sent
-- and how many more arrived in it, to be folded into one follow-up when it closes.
CREATE TABLE alert_windows (
    rule_id         BIGINT NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    job_id          BIGINT NOT NULL,
    event           TEXT NOT NULL,
    opened_at       TIMESTAMPTZ NOT NULL,
    closes_at       TIMESTAMPTZ NOT NULL,
    suppressed      INTEGER NOT NULL DEFAULT 0,
    -- The last folded event, which the follow-up describes.
    last_event      JSONB,
    PRIMARY KEY (rule_id, job_id, event)
);
CREATE INDEX alert_windows_follow_up ON alert_windows (closes_at) WHERE suppressed > 0;

-- Conditions raised once per occurrence, so a monitor evaluating them every few seconds
-- alerts once: a run too long (run_id), a job without success (job_id), no executor
-- (neither), consecutive failures (job_id), and the failing state of a job that
-- `recovered` ends (event 'failing', job_id). 0 stands for "none" in the key.
CREATE TABLE alert_conditions (
    rule_id     BIGINT NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    event       TEXT NOT NULL,
    job_id      BIGINT NOT NULL DEFAULT 0,
    run_id      BIGINT NOT NULL DEFAULT 0,
    raised_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (rule_id, event, job_id, run_id)
);

-- The delivery log: one row per message to one channel.
CREATE TABLE notifications (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Sent as X-Probactr-Delivery; the same on every attempt, so receivers deduplicate.
    delivery_id     UUID NOT NULL DEFAULT gen_random_uuid(),
    rule_id         BIGINT REFERENCES alert_rules (id) ON DELETE SET NULL,
    channel_id      BIGINT REFERENCES alert_channels (id) ON DELETE CASCADE,
    event           TEXT NOT NULL,
    job_id          BIGINT,
    run_id          BIGINT,
    -- Events this message stands for beyond its own (a follow-up's folded events).
    suppressed      INTEGER NOT NULL DEFAULT 0,
    payload         JSONB NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending',
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_error      TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at         TIMESTAMPTZ,
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT notifications_delivery_unique UNIQUE (delivery_id),
    CONSTRAINT notifications_state_valid CHECK (state IN ('pending', 'sent', 'failed')),
    CONSTRAINT notifications_sent_when_sent CHECK ((state = 'sent') = (sent_at IS NOT NULL))
);
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notifications_newest ON notifications (id DESC);
CREATE INDEX notifications_job ON notifications (job_id, id DESC);
CREATE INDEX notifications_created ON notifications (created_at);

-- Run ends: `run_failed` when the chain has no attempt left, `run_timed_out` and
-- `run_abandoned` on every such attempt, `fire_missed` for instants expired unrun.
CREATE FUNCTION probactr_alert_run_ends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM alert_rules WHERE enabled) THEN
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
    CROSS JOIN LATERAL (VALUES
        (CASE WHEN ended.state IN ('failed', 'timed_out', 'abandoned')
                   AND ended.attempt >= jobs.retry_max_attempts THEN 'run_failed' END),
        (CASE ended.state WHEN 'timed_out' THEN 'run_timed_out'
                          WHEN 'abandoned' THEN 'run_abandoned'
                          WHEN 'missed' THEN 'fire_missed' END)) AS kinds (event)
    WHERE ended.state IN ('failed', 'timed_out', 'abandoned', 'missed')
      AND kinds.event IS NOT NULL;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_alert_events
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_alert_run_ends();

-- Instants a trigger skipped (misfire policy, an outage longer than its threshold).
CREATE FUNCTION probactr_alert_misfires() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM alert_rules WHERE enabled) THEN
        RETURN NULL;
    END IF;
    INSERT INTO alert_events (event, job_id, trigger_id, detail)
    SELECT 'fire_missed', missed.job_id, missed.trigger_id,
           jsonb_build_object('instants', missed.instants, 'first_instant', missed.first_instant,
                              'last_instant', missed.last_instant, 'policy', missed.policy,
                              'reason', missed.reason)
    FROM inserted AS missed;
    RETURN NULL;
END $$;

CREATE TRIGGER misfires_alert_events
    AFTER INSERT ON misfires
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_alert_misfires();

-- Executors declared dead by a monitor.
CREATE FUNCTION probactr_alert_executor_lost() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM alert_rules WHERE enabled) THEN
        RETURN NULL;
    END IF;
    INSERT INTO alert_events (event, executor_id, detail)
    VALUES ('executor_lost', NEW.id,
            jsonb_build_object('host', NEW.host, 'pid', NEW.pid,
                               'last_heartbeat_at', NEW.last_heartbeat_at));
    RETURN NULL;
END $$;

CREATE TRIGGER executors_alert_lost
    AFTER UPDATE OF state ON executors
    FOR EACH ROW
    WHEN (OLD.state IN ('alive', 'draining') AND NEW.state = 'dead' AND NEW.role = 'executor')
    EXECUTE FUNCTION probactr_alert_executor_lost();

-- The delivery log as people read it: each notification with the names of its rule,
-- channel and job (those that still exist).
CREATE VIEW notification_log AS
SELECT n.id, n.delivery_id, n.rule_id, alert_rules.name AS rule_name, n.channel_id,
       alert_channels.name AS channel_name, n.event, n.job_id, jobs.name AS job_name, n.run_id,
       n.suppressed, n.state, n.attempts, n.next_attempt_at, n.last_error, n.created_at,
       n.sent_at, n.payload
FROM notifications AS n
LEFT JOIN alert_rules ON alert_rules.id = n.rule_id
LEFT JOIN alert_channels ON alert_channels.id = n.channel_id
LEFT JOIN jobs ON jobs.id = n.job_id;
