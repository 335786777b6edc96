-- Rate limits: a pool or a job takes `rate: {"limit": N, "per_secs": S}`, at most N starts
-- in any window of S seconds across the cluster. A start is the claim that takes the run.
--
-- Held like the pools' slots (migration 2026120201000001): the claim locks the row that
-- keeps the bound's recent starts — the pool's own row, or the job's `job_rate_windows`
-- row — counts those within the last S seconds, takes no more runs than the N less that
-- count, and adds the instant of the runs it took, keeping the N latest. The runs of jobs
-- and pools without a rate read none of this.
ALTER TABLE pools ADD COLUMN rate JSONB;
ALTER TABLE pools ADD COLUMN rate_starts TIMESTAMPTZ[] NOT NULL DEFAULT '{}';
ALTER TABLE pools ADD CONSTRAINT pools_rate_valid CHECK (
    rate IS NULL OR (jsonb_typeof(rate -> 'limit') = 'number' AND jsonb_typeof(rate -> 'per_secs') = 'number'
                     AND (rate ->> 'limit')::numeric >= 1 AND (rate ->> 'per_secs')::numeric >= 1
                     AND rate - 'limit' - 'per_secs' = '{}'::jsonb));

ALTER TABLE jobs ADD COLUMN rate JSONB;
ALTER TABLE jobs ADD CONSTRAINT jobs_rate_valid CHECK (
    rate IS NULL OR (jsonb_typeof(rate -> 'limit') = 'number' AND jsonb_typeof(rate -> 'per_secs') = 'number'
                     AND (rate ->> 'limit')::numeric >= 1 AND (rate ->> 'per_secs')::numeric >= 1
                     AND rate - 'limit' - 'per_secs' = '{}'::jsonb));

-- The recent starts of a job with a rate (made when the job first takes one, by
-- `probactr_job_rate_window`; the claim only updates it, so it never checks the key).
CREATE TABLE job_rate_windows (
    job_id BIGINT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    starts TIMESTAMPTZ[] NOT NULL DEFAULT '{}'
);
