-- Job versions: the whole definition of a job at each of its versions, who made it and
-- how (created, edited, restored), so an operator can see what changed and restore an
-- earlier version. Written by the manager beside the job's row, in its transaction; a
-- job's versions go with it. Jobs older than this table get the version they had when
-- they are first edited (its author unknown).
CREATE TABLE job_versions (
    job_id      BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    version     BIGINT NOT NULL,
    -- The definition as the manager writes it (secret values sealed, as in the job's row).
    definition  JSONB NOT NULL,
    actor       TEXT NOT NULL,
    -- create, update, restore, or before (the version a job had before versions were kept)
    action      TEXT NOT NULL,
    restored_from BIGINT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, version)
);
