-- Calendars, maintenance windows, and two trigger settings (jitter_secs, max_fires).
--
-- A calendar is a namespace's named set of days in a time zone; a trigger that names one
-- fires only outside those days (`exclude`) or only on them (`only`). The days are kept
-- as given (dates, ranges, weekdays) in `days`; the schedule code reads them.
CREATE TABLE calendars (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace  TEXT NOT NULL DEFAULT 'default' REFERENCES namespaces (name),
    name       TEXT NOT NULL,
    timezone   TEXT NOT NULL DEFAULT 'UTC',
    -- {"dates": ["2026-12-25"], "ranges": [{"from": …, "to": …}], "weekdays": ["sat"]}
    days       JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT calendars_name_valid CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    CONSTRAINT calendars_timezone_nonempty CHECK (char_length(timezone) BETWEEN 1 AND 64),
    CONSTRAINT calendars_days_object CHECK (jsonb_typeof(days) = 'object'),
    CONSTRAINT calendars_name_unique UNIQUE (namespace, name)
);

-- A calendar in use cannot be deleted (the API answers 409 naming the triggers).
ALTER TABLE triggers ADD COLUMN calendar_id BIGINT REFERENCES calendars (id);
ALTER TABLE triggers ADD COLUMN calendar_mode TEXT;
ALTER TABLE triggers ADD CONSTRAINT triggers_calendar_mode_valid CHECK (
    (calendar_id IS NULL AND calendar_mode IS NULL)
    OR (calendar_id IS NOT NULL AND calendar_mode IN ('exclude', 'only')));
CREATE INDEX triggers_calendar ON triggers (calendar_id) WHERE calendar_id IS NOT NULL;

-- A random delay of up to `jitter_secs` for each instant's run (fixed per instant), and
-- the number of instants after which the trigger ends (`fires` counts them).
ALTER TABLE triggers ADD COLUMN jitter_secs INTEGER;
ALTER TABLE triggers ADD COLUMN max_fires BIGINT;
ALTER TABLE triggers ADD COLUMN fires BIGINT NOT NULL DEFAULT 0;
ALTER TABLE triggers ADD CONSTRAINT triggers_jitter_secs_range
    CHECK (jitter_secs IS NULL OR jitter_secs BETWEEN 1 AND 86400);
ALTER TABLE triggers ADD CONSTRAINT triggers_max_fires_positive
    CHECK (max_fires IS NULL OR max_fires >= 1);

-- Maintenance windows: `[starts_at, ends_at)` (ends_at NULL: until ended, as a cluster
-- pause is) over every job, some jobs by name, or jobs whose labels match a selector.
-- `skip` records the covered instants as skipped; `defer` fires each affected trigger
-- once when the window ends.
CREATE TABLE maintenance_windows (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    starts_at    TIMESTAMPTZ NOT NULL,
    ends_at      TIMESTAMPTZ,
    -- {"all": true} | {"jobs": ["name", …]} | {"selector": {"label": "value"}}
    scope        JSONB NOT NULL,
    policy       TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    stop_running BOOLEAN NOT NULL DEFAULT false,
    created_by   TEXT NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT maintenance_windows_policy_valid CHECK (policy IN ('skip', 'defer')),
    CONSTRAINT maintenance_windows_ordered CHECK (ends_at IS NULL OR ends_at > starts_at),
    CONSTRAINT maintenance_windows_defer_ends CHECK (policy <> 'defer' OR ends_at IS NOT NULL),
    CONSTRAINT maintenance_windows_scope_object CHECK (jsonb_typeof(scope) = 'object'),
    CONSTRAINT maintenance_windows_reason_length CHECK (char_length(reason) <= 1000)
);
CREATE INDEX maintenance_windows_open ON maintenance_windows (starts_at) WHERE ends_at IS NULL;
