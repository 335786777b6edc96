-- Where work runs: executor labels and job selectors, cordon and drain, priorities, and a
-- per-trigger concurrency cap.
--
--   * `executors.labels`: the `PROBACTR_EXECUTOR_LABELS` an executor registered with
--     (`{"zone": "a", "gpu": "1"}`); `cordoned`: it claims no new runs (an operator's
--     cordon, or a drain); `drain_requested`: it should finish or hand over its runs and
--     exit (it learns so at its next heartbeat).
--   * `jobs.selector`: labels an executor must all carry to claim the job's runs (`{}`:
--     any executor); `jobs.priority`: when slots are scarce, higher goes first.
--   * `triggers.max_concurrency`: runs of this trigger claimed or running at once (NULL:
--     no cap besides the job's).
--   * `runs.priority` and `runs.trigger_cap` are copied from the job and the trigger when
--     a run is queued, so that the claim reads them from the run it walks to rather than
--     joining for them; `runs.claim_order` is the claim's sort key: `available_at` moved
--     earlier by one minute per point of priority. A higher priority goes first among
--     runs queued within that many minutes of each other, and a lower one that waited
--     longer than that goes first anyway: aging, so no priority starves another forever.
--     With every priority 0 the order is the old one (`available_at`, then id).

ALTER TABLE executors
    ADD COLUMN labels JSONB NOT NULL DEFAULT '{}'::jsonb
        CONSTRAINT executors_labels_object CHECK (jsonb_typeof(labels) = 'object'),
    ADD COLUMN cordoned BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN drain_requested BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE jobs
    ADD COLUMN selector JSONB NOT NULL DEFAULT '{}'::jsonb
        CONSTRAINT jobs_selector_object CHECK (jsonb_typeof(selector) = 'object'),
    ADD COLUMN priority INTEGER NOT NULL DEFAULT 0
        CONSTRAINT jobs_priority_range CHECK (priority BETWEEN -100 AND 100);

ALTER TABLE triggers
    ADD COLUMN max_concurrency INTEGER
        CONSTRAINT triggers_max_concurrency_positive CHECK (max_concurrency IS NULL OR max_concurrency >= 1);

ALTER TABLE runs
    ADD COLUMN priority INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN trigger_cap INTEGER,
    ADD COLUMN claim_order TIMESTAMPTZ;

-- Seconds of queueing one point of priority is worth (see above).
CREATE FUNCTION probactr_claim_order(available_at TIMESTAMPTZ, priority INTEGER)
RETURNS TIMESTAMPTZ LANGUAGE sql STABLE AS $$
    SELECT available_at - make_interval(secs => priority * 60)
$$;

-- A run entering the live partition takes its job's priority and its trigger's cap; its
-- claim order follows its `available_at` (a retry's backoff, an unclaim's delay).
CREATE FUNCTION probactr_route_live_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.priority := coalesce((SELECT priority FROM jobs WHERE id = NEW.job_id), 0);
        IF NEW.trigger_id IS NOT NULL THEN
            NEW.trigger_cap := (SELECT max_concurrency FROM triggers WHERE id = NEW.trigger_id);
        END IF;
    END IF;
    NEW.claim_order := probactr_claim_order(NEW.available_at, NEW.priority);
    RETURN NEW;
END $$;

CREATE TRIGGER runs_live_route
    BEFORE INSERT OR UPDATE OF available_at ON runs_live
    FOR EACH ROW EXECUTE FUNCTION probactr_route_live_run();

UPDATE runs_live AS runs
SET priority = jobs.priority, claim_order = probactr_claim_order(runs.available_at, jobs.priority)
FROM jobs WHERE jobs.id = runs.job_id;

-- The queued-run claim walks the queue in claim order.
DROP INDEX runs_queued;
CREATE INDEX runs_queued ON runs_live (claim_order, id) WHERE state = 'queued';
-- A capped trigger's runs in flight, counted by the claim.
CREATE INDEX runs_active_by_trigger ON runs_live (trigger_id)
    WHERE state IN ('claimed', 'running') AND trigger_cap IS NOT NULL;
