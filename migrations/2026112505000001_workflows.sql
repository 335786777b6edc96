-- Parameters, child jobs and workflows.
--
-- A run's inputs live beside the run rather than in it, keyed by the first attempt of its
-- chain (retries and takeovers share them): its parameters, the run whose end queued it
-- (a child job), the workflow run and step it is. A trigger's `params` are defaults the
-- run's own parameters are merged over (`probactr_run_params`).
--
-- Child jobs and workflows advance in the transaction that ends a run: the trigger
-- `runs_advance` below runs after every statement that inserts into `runs` (an ended run
-- is inserted into the ended runs as it moves), so no crash separates a run's end from
-- what it starts, and a run ends once (every end is guarded by its state), so what it
-- starts is started once. Only the attempt that is last advances anything: a retry or a
-- takeover queued by the same statement means the chain goes on.

CREATE TABLE run_inputs (
    -- The first attempt of the chain.
    run_id          BIGINT PRIMARY KEY,
    params          JSONB NOT NULL DEFAULT '{}'::jsonb,
    parent_run_id   BIGINT,
    workflow_run_id BIGINT,
    step_name       TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT run_inputs_params_object CHECK (jsonb_typeof(params) = 'object')
);
CREATE INDEX run_inputs_created ON run_inputs (created_at);

-- What an attempt wrote to PROBACTR_OUTPUT_FILE (a JSON object), stored by its executor
-- before it records the end.
CREATE TABLE run_outputs (
    -- The attempt.
    run_id      BIGINT PRIMARY KEY,
    output      JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT run_outputs_object CHECK (jsonb_typeof(output) = 'object')
);
CREATE INDEX run_outputs_created ON run_outputs (created_at);

ALTER TABLE triggers
    ADD COLUMN params JSONB NOT NULL DEFAULT '{}'::jsonb
        CONSTRAINT triggers_params_object CHECK (jsonb_typeof(params) = 'object');

-- Child jobs: the jobs queued when a run of this one ends (its last attempt).
ALTER TABLE jobs
    ADD COLUMN on_success BIGINT[] NOT NULL DEFAULT '{}',
    ADD COLUMN on_failure BIGINT[] NOT NULL DEFAULT '{}',
    ADD COLUMN on_finish  BIGINT[] NOT NULL DEFAULT '{}';

CREATE TABLE workflows (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    paused      BOOLEAN NOT NULL DEFAULT FALSE,
    version     BIGINT NOT NULL DEFAULT 1,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT workflows_name_unique UNIQUE (name),
    CONSTRAINT workflows_name_length CHECK (char_length(name) BETWEEN 1 AND 200)
);

CREATE TABLE workflow_steps (
    workflow_id BIGINT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    position    INTEGER NOT NULL,
    -- A job in use by a workflow cannot be deleted.
    job_id      BIGINT NOT NULL REFERENCES jobs (id) ON DELETE RESTRICT,
    depends_on  TEXT[] NOT NULL DEFAULT '{}',
    run_when    TEXT NOT NULL DEFAULT 'all_success',
    params      JSONB NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (workflow_id, name),
    CONSTRAINT workflow_steps_when_valid CHECK (run_when IN ('all_success', 'all_done', 'any_failed')),
    CONSTRAINT workflow_steps_params_object CHECK (jsonb_typeof(params) = 'object')
);
CREATE INDEX workflow_steps_job ON workflow_steps (job_id);

CREATE TABLE workflow_runs (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id BIGINT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    state       TEXT NOT NULL DEFAULT 'running',
    params      JSONB NOT NULL DEFAULT '{}'::jsonb,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    CONSTRAINT workflow_runs_state_valid CHECK (state IN ('running', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT workflow_runs_finished CHECK ((state = 'running') = (finished_at IS NULL))
);
CREATE INDEX workflow_runs_newest ON workflow_runs (workflow_id, id DESC);

-- A workflow run's steps, copied from the workflow when it starts (a later edit does not
-- change a run under way).
CREATE TABLE workflow_run_steps (
    workflow_run_id BIGINT NOT NULL REFERENCES workflow_runs (id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    position        INTEGER NOT NULL,
    job_id          BIGINT NOT NULL,
    depends_on      TEXT[] NOT NULL,
    run_when        TEXT NOT NULL,
    params          JSONB NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending',
    -- The first attempt of the step's current run, and of every run it had (retries by hand).
    run_id          BIGINT,
    run_ids         BIGINT[] NOT NULL DEFAULT '{}',
    output          JSONB,
    started_at      TIMESTAMPTZ,
    finished_at     TIMESTAMPTZ,
    PRIMARY KEY (workflow_run_id, name),
    CONSTRAINT workflow_run_steps_state_valid CHECK (
        state IN ('pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled'))
);

-- The parameters a run sees: its trigger's defaults under its own.
CREATE FUNCTION probactr_run_params(chain_id BIGINT, trigger BIGINT) RETURNS JSONB
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT params FROM triggers WHERE id = trigger), '{}'::jsonb)
           || coalesce((SELECT params FROM run_inputs WHERE run_id = chain_id), '{}'::jsonb)
$$;

-- Queues the run of a step and marks it running; returns the run.
CREATE FUNCTION probactr_workflow_start_step(target BIGINT, step TEXT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    queued BIGINT;
    step_job BIGINT;
    given JSONB;
BEGIN
    SELECT s.job_id, w.params || s.params INTO step_job, given
    FROM workflow_run_steps AS s JOIN workflow_runs AS w ON w.id = s.workflow_run_id
    WHERE s.workflow_run_id = target AND s.name = step;
    INSERT INTO runs (job_id, scheduled_at, reason)
    VALUES (step_job, now(), 'workflow run ' || target || ', step ' || step)
    RETURNING id INTO queued;
    INSERT INTO run_inputs (run_id, params, workflow_run_id, step_name)
    VALUES (queued, given, target, step);
    UPDATE workflow_run_steps
    SET state = 'running', run_id = queued, run_ids = run_ids || queued, output = NULL,
        started_at = now(), finished_at = NULL
    WHERE workflow_run_id = target AND name = step;
    RETURN queued;
END $$;

-- Starts every pending step whose upstream steps are all done and whose `when` holds,
-- skips those whose `when` cannot hold any more (and so, in turn, the steps that need
-- them), and ends the workflow run once no step is pending or running. The caller holds
-- the workflow run's row lock, so two steps ending at once advance it one after the other.
CREATE FUNCTION probactr_workflow_advance(target BIGINT) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    changed BOOLEAN := TRUE;
    step RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM workflow_runs WHERE id = target AND state = 'running') THEN
        RETURN;
    END IF;
    WHILE changed LOOP
        changed := FALSE;
        FOR step IN
            SELECT s.name, s.run_when,
                   count(u.name) AS upstream,
                   count(u.name) FILTER (WHERE u.state IN ('pending', 'running')) AS waiting,
                   count(u.name) FILTER (WHERE u.state = 'succeeded') AS succeeded,
                   count(u.name) FILTER (WHERE u.state IN ('failed', 'cancelled')) AS failed
            FROM workflow_run_steps AS s
            LEFT JOIN workflow_run_steps AS u
                   ON u.workflow_run_id = s.workflow_run_id AND u.name = ANY (s.depends_on)
            WHERE s.workflow_run_id = target AND s.state = 'pending'
            GROUP BY s.name, s.run_when, s.position
            ORDER BY s.position
        LOOP
            CONTINUE WHEN step.waiting > 0;
            IF (step.run_when = 'all_success' AND step.succeeded = step.upstream)
               OR step.run_when = 'all_done'
               OR (step.run_when = 'any_failed' AND step.failed > 0) THEN
                PERFORM probactr_workflow_start_step(target, step.name);
            ELSE
                UPDATE workflow_run_steps SET state = 'skipped', finished_at = now()
                WHERE workflow_run_id = target AND name = step.name;
            END IF;
            changed := TRUE;
        END LOOP;
    END LOOP;
    UPDATE workflow_runs
    SET state = CASE WHEN EXISTS (SELECT 1 FROM workflow_run_steps
                                  WHERE workflow_run_id = target AND state IN ('failed', 'cancelled'))
                     THEN 'failed' ELSE 'succeeded' END,
        finished_at = now()
    WHERE id = target AND state = 'running'
      AND NOT EXISTS (SELECT 1 FROM workflow_run_steps
                      WHERE workflow_run_id = target AND state IN ('pending', 'running'));
END $$;

-- What a run's last attempt starts: the job's children, and the next steps of its
-- workflow run.
CREATE FUNCTION probactr_runs_advance() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ended RECORD;
    child RECORD;
    queued BIGINT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM inserted WHERE state NOT IN ('queued', 'claimed', 'running')) THEN
        RETURN NULL;
    END IF;
    FOR child IN
        SELECT last.id AS parent_id, children.job_id,
               probactr_run_params(coalesce(last.first_run_id, last.id), last.trigger_id) AS params
        FROM inserted AS last
        JOIN jobs ON jobs.id = last.job_id
        CROSS JOIN LATERAL (
            SELECT DISTINCT listed.job_id
            FROM unnest(CASE WHEN last.state = 'succeeded' THEN jobs.on_success ELSE '{}' END
                        || CASE WHEN last.state IN ('failed', 'timed_out', 'abandoned') THEN jobs.on_failure ELSE '{}' END
                        || CASE WHEN last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
                                THEN jobs.on_finish ELSE '{}' END) AS listed (job_id)
            JOIN jobs AS present ON present.id = listed.job_id) AS children
        WHERE last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
          AND (jobs.on_success <> '{}' OR jobs.on_failure <> '{}' OR jobs.on_finish <> '{}')
          AND NOT EXISTS (SELECT 1 FROM runs AS later
                          WHERE later.first_run_id = coalesce(last.first_run_id, last.id)
                            AND later.attempt > last.attempt)
        ORDER BY last.id, children.job_id
    LOOP
        INSERT INTO runs (job_id, scheduled_at, reason)
        VALUES (child.job_id, now(), 'child of run ' || child.parent_id)
        RETURNING id INTO queued;
        INSERT INTO run_inputs (run_id, params, parent_run_id)
        VALUES (queued, child.params, child.parent_id);
    END LOOP;
    FOR ended IN
        SELECT inputs.workflow_run_id, inputs.step_name, inputs.run_id AS chain_id,
               last.id AS attempt_id, last.state
        FROM inserted AS last
        JOIN run_inputs AS inputs ON inputs.run_id = coalesce(last.first_run_id, last.id)
        WHERE last.state NOT IN ('queued', 'claimed', 'running')
          AND inputs.workflow_run_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM runs AS later
                          WHERE later.first_run_id = coalesce(last.first_run_id, last.id)
                            AND later.attempt > last.attempt)
        ORDER BY inputs.workflow_run_id, inputs.step_name
    LOOP
        -- The workflow run's lock first, then the step: a concurrent end of another step
        -- waits here and then sees this one's end.
        PERFORM 1 FROM workflow_runs WHERE id = ended.workflow_run_id FOR UPDATE;
        UPDATE workflow_run_steps
        SET state = CASE ended.state WHEN 'succeeded' THEN 'succeeded'
                                     WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END,
            output = (SELECT output FROM run_outputs WHERE run_id = ended.attempt_id),
            finished_at = now()
        WHERE workflow_run_id = ended.workflow_run_id AND name = ended.step_name
          AND run_id = ended.chain_id AND state = 'running';
        IF FOUND THEN
            PERFORM probactr_workflow_advance(ended.workflow_run_id);
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER runs_advance
    AFTER INSERT ON runs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_runs_advance();
