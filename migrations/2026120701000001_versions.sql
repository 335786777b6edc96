-- One versions table for every kind of versioned object (job, workflow, trigger): the
-- whole definition at each version, who made it and how. It replaces job_versions and
-- workflow_versions, whose rows move here unchanged, so that the statements keeping and
-- reading versions are written once, parameterised by kind. An object's versions go with
-- it: each kind's id is also a generated column referencing its table, so deleting the
-- object cascades to its versions as the foreign keys of the old tables did.
CREATE TABLE versions (
    kind        TEXT NOT NULL CHECK (kind IN ('job', 'workflow', 'trigger')),
    object_id   BIGINT NOT NULL,
    version     BIGINT NOT NULL,
    -- The definition as the manager writes it (secret values sealed, as in the object's rows).
    definition  JSONB NOT NULL,
    actor       TEXT NOT NULL,
    -- create, update, restore, or before (the version an object had before versions were kept)
    action      TEXT NOT NULL,
    restored_from BIGINT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    job_id      BIGINT GENERATED ALWAYS AS (CASE WHEN kind = 'job' THEN object_id END) STORED
                REFERENCES jobs (id) ON DELETE CASCADE,
    workflow_id BIGINT GENERATED ALWAYS AS (CASE WHEN kind = 'workflow' THEN object_id END) STORED
                REFERENCES workflows (id) ON DELETE CASCADE,
    trigger_id  BIGINT GENERATED ALWAYS AS (CASE WHEN kind = 'trigger' THEN object_id END) STORED
                REFERENCES triggers (id) ON DELETE CASCADE,
    PRIMARY KEY (kind, object_id, version)
);

-- The cascades find an object's versions by these.
CREATE INDEX versions_job ON versions (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX versions_workflow ON versions (workflow_id) WHERE workflow_id IS NOT NULL;
CREATE INDEX versions_trigger ON versions (trigger_id) WHERE trigger_id IS NOT NULL;

INSERT INTO versions (kind, object_id, version, definition, actor, action, restored_from, created_at)
SELECT 'job', job_id, version, definition, actor, action, restored_from, created_at
FROM job_versions;

INSERT INTO versions (kind, object_id, version, definition, actor, action, restored_from, created_at)
SELECT 'workflow', workflow_id, version, definition, actor, action, restored_from, created_at
FROM workflow_versions;

DROP TABLE job_versions;
DROP TABLE workflow_versions;
