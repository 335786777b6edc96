-- Backfills: instants of a trigger that have no run, queued on request a few at a time.
-- The manager records what to queue; monitors queue the next instants while fewer than
-- `max_concurrency` of the backfill's runs are live. Each instant becomes at most one run
-- (invariant 1: the unique index of a trigger's instants), so running a backfill twice
-- queues nothing the second time.
CREATE TABLE backfills (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger_id       BIGINT NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    job_id           BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    -- The instants to run, in order; the first `queued` of them are queued.
    instants         TIMESTAMPTZ[] NOT NULL,
    queued           INTEGER NOT NULL DEFAULT 0,
    max_concurrency  INTEGER NOT NULL,
    requested_by     TEXT NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at      TIMESTAMPTZ,
    CONSTRAINT backfills_instants_some CHECK (cardinality(instants) >= 1),
    CONSTRAINT backfills_queued_range CHECK (queued BETWEEN 0 AND cardinality(instants)),
    CONSTRAINT backfills_max_concurrency_positive CHECK (max_concurrency >= 1)
);

CREATE INDEX backfills_unfinished ON backfills (id) WHERE finished_at IS NULL;
CREATE INDEX backfills_trigger ON backfills (trigger_id, id DESC);
