-- Workflow versions: the whole definition of a workflow (name, description, steps, declared
-- parameters) at each of its versions, who made it and how (created, edited, restored), as
-- job_versions keeps them for jobs. Written by the manager beside the workflow's rows, in
-- its transaction; a workflow's versions go with it. Workflows older than this table get
-- the version they had when they are first edited (its author unknown).
CREATE TABLE workflow_versions (
    workflow_id BIGINT NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    version     BIGINT NOT NULL,
    -- The definition as a create's body (secret step parameters sealed, as in its rows).
    definition  JSONB NOT NULL,
    actor       TEXT NOT NULL,
    -- create, update, restore, or before (the version a workflow had before versions were kept)
    action      TEXT NOT NULL,
    restored_from BIGINT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, version)
);
