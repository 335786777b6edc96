-- Triggers of workflows: cron, interval and once schedules like a job's triggers, each
-- instant starting a workflow run with the trigger's parameters.
--
-- They live beside `triggers` rather than in it: a job trigger's firing (claim, routed
-- runs, concurrency caps) is about runs of one job, a workflow trigger's about one
-- workflow run per instant. An executor fires a due workflow trigger under its row lock
-- (FOR UPDATE SKIP LOCKED), starts the runs of its instants and moves `next_fire_at` in
-- the same transaction; `workflow_runs_instant_once` makes a second run of the same
-- trigger and instant impossible whatever happens.

CREATE TABLE workflow_triggers (
    id                      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id             BIGINT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    kind                    TEXT NOT NULL,
    cron                    TEXT,
    timezone                TEXT NOT NULL DEFAULT 'UTC',
    interval_secs           BIGINT,
    at                      TIMESTAMPTZ,
    start_at                TIMESTAMPTZ,
    end_at                  TIMESTAMPTZ,
    misfire                 TEXT NOT NULL DEFAULT 'fire_once',
    misfire_threshold_secs  INTEGER NOT NULL DEFAULT 60,
    paused                  BOOLEAN NOT NULL DEFAULT FALSE,
    -- Parameters of its workflow runs.
    params                  JSONB NOT NULL DEFAULT '{}'::jsonb,
    next_fire_at            TIMESTAMPTZ,
    last_fired_at           TIMESTAMPTZ,
    version                 BIGINT NOT NULL DEFAULT 1,
    created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT workflow_triggers_kind_valid CHECK (kind IN ('cron', 'interval', 'once')),
    CONSTRAINT workflow_triggers_misfire_valid CHECK (misfire IN ('fire_once', 'skip', 'fire_all')),
    CONSTRAINT workflow_triggers_params_object CHECK (jsonb_typeof(params) = 'object')
);
CREATE INDEX workflow_triggers_due ON workflow_triggers (next_fire_at)
    WHERE NOT paused AND next_fire_at IS NOT NULL;
CREATE INDEX workflow_triggers_workflow ON workflow_triggers (workflow_id);

CREATE TRIGGER workflow_triggers_changed
    AFTER INSERT OR UPDATE OF next_fire_at, paused OR DELETE ON workflow_triggers
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_notify_triggers();

-- The trigger and instant a workflow run was started for (null: started by hand).
ALTER TABLE workflow_runs
    ADD COLUMN trigger_id   BIGINT REFERENCES workflow_triggers (id) ON DELETE SET NULL,
    ADD COLUMN scheduled_at TIMESTAMPTZ,
    ADD CONSTRAINT workflow_runs_instant_once UNIQUE (trigger_id, scheduled_at);
