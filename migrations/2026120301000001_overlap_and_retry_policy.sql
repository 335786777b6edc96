-- Overlap and retry policy. `overlap` gains `replace` (a new instant stops the running
-- attempt, then starts) and `buffer_one` (at most one run waits behind the running one;
-- later instants are skipped). The retry policy gains its shape: `retry_backoff`
-- (`fixed` or `exponential`, the delay `retry_backoff_secs` doubling per attempt),
-- `retry_max_secs` (the longest delay; NULL: no bound), `retry_jitter` (`full`: a random
-- delay up to the computed one; `none`) and `retry_on` (which failures are retried:
-- `{"exit_codes": [...], "http_statuses": [...], "timeouts": bool}`; NULL: every failure).
-- Existing jobs keep their meaning: exponential, unbounded, no jitter, every failure.
ALTER TABLE jobs DROP CONSTRAINT jobs_overlap_valid;
ALTER TABLE jobs ADD CONSTRAINT jobs_overlap_valid
    CHECK (overlap IN ('skip', 'queue', 'replace', 'buffer_one'));

ALTER TABLE jobs
    ADD COLUMN retry_backoff  TEXT NOT NULL DEFAULT 'exponential',
    ADD COLUMN retry_max_secs INTEGER,
    ADD COLUMN retry_jitter   TEXT NOT NULL DEFAULT 'none',
    ADD COLUMN retry_on       JSONB,
    ADD CONSTRAINT jobs_retry_backoff_valid CHECK (retry_backoff IN ('fixed', 'exponential')),
    ADD CONSTRAINT jobs_retry_jitter_valid CHECK (retry_jitter IN ('full', 'none')),
    ADD CONSTRAINT jobs_retry_max_secs_valid CHECK (retry_max_secs >= retry_backoff_secs),
    ADD CONSTRAINT jobs_retry_on_object CHECK (jsonb_typeof(retry_on) = 'object');

-- The next-attempt policy now reads the ended attempt's exit code and HTTP status
-- (`retry_on`); its new body, with those arguments, is installed after the migrations.
DROP FUNCTION IF EXISTS probactr_next_attempt(BIGINT, BIGINT, INTEGER, TEXT, INTEGER, BIGINT, BOOLEAN);
