-- Checkpoints and the stop point.
--
-- `stop_grace_secs`: when an executor must stop a run (cancel, timeout, lost lock or
-- lease, drain deadline) it sends SIGTERM to the run's process group, waits this long,
-- then sends SIGKILL.
ALTER TABLE jobs
    ADD COLUMN stop_grace_secs INTEGER NOT NULL DEFAULT 10
        CONSTRAINT jobs_stop_grace_secs_range CHECK (stop_grace_secs BETWEEN 0 AND 3600);

-- The last checkpoint a shell job wrote to its `PROBACTR_CHECKPOINT_FILE`, one per chain
-- of attempts of an instant (the first run, its takeovers and its retries), keyed by the
-- chain's first run: the attempt that takes over starts with it. Saved by the executor
-- of the attempt only while that attempt is running under its fence; kept after the
-- chain ends (the run page shows it) until retention deletes it. Runs are partitioned
-- and move between partitions, so the chain is a plain id, not a foreign key.
CREATE TABLE run_checkpoints (
    chain_id BIGINT PRIMARY KEY,
    -- The attempt that saved it.
    run_id   BIGINT NOT NULL,
    job_id   BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    fence    BIGINT,
    data     BYTEA NOT NULL CONSTRAINT run_checkpoints_size CHECK (octet_length(data) <= 65536),
    saved_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX run_checkpoints_saved_at ON run_checkpoints (saved_at);
CREATE INDEX run_checkpoints_job ON run_checkpoints (job_id);
