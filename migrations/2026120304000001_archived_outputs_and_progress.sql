-- The output archive (PROBACTR_OUTPUT_ARCHIVE): the runs whose full output an executor
-- stored there. Monitors delete the objects of runs gone past the retention, then these
-- rows. No foreign key: runs move between partitions and are dropped a day at a time.
CREATE TABLE archived_outputs (
    run_id BIGINT PRIMARY KEY,
    archived_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
COMMENT ON TABLE archived_outputs IS 'Runs whose full output is in the output archive';

-- Progress reported by a running shell job (the file PROBACTR_PROGRESS_FILE names): the
-- latest report only, written by the executor when it changes. Runs that report nothing
-- have no row.
CREATE TABLE run_progress (
    run_id BIGINT PRIMARY KEY,
    percent REAL,
    message TEXT NOT NULL DEFAULT '',
    reported_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
COMMENT ON TABLE run_progress IS 'The latest progress a running job reported';
