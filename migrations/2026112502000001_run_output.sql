-- Live output: what a run prints, in chunks written while it runs (the executor flushes
-- them every fraction of a second, several runs' chunks in one statement), so that a run
-- can be followed as it runs and not only read from the tail `runs.output` keeps at its
-- end.
--
-- A chunk covers `byte_count` bytes of the run's output from `byte_offset` (bytes in the
-- order the executor read them, stdout and stderr together); its text is those bytes
-- decoded (invalid UTF-8 and NUL replaced). Output is bounded per run
-- (`PROBACTR_OUTPUT_LIMIT`): the executor keeps the head and the tail and deletes the
-- middle as the tail moves on, so a gap between one chunk's end and the next chunk's
-- offset is output that was cut, and readers say how much.
--
-- There is no foreign key to `runs` (partitioned, its id is not unique-constrained
-- across partitions): the monitor's retention deletes chunks whose run is gone once they
-- are older than the retention (`store::run_output::purge`).
CREATE TABLE run_output (
    run_id      BIGINT NOT NULL,
    byte_offset BIGINT NOT NULL,
    byte_count  INTEGER NOT NULL,
    stream      TEXT NOT NULL,
    content     TEXT NOT NULL,
    written_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, byte_offset),
    CONSTRAINT run_output_stream_valid CHECK (stream IN ('stdout', 'stderr')),
    CONSTRAINT run_output_span_valid CHECK (byte_offset >= 0 AND byte_count > 0)
);

-- Retention walks the oldest chunks first.
CREATE INDEX run_output_written_at ON run_output (written_at);
