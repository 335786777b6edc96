-- probactr_job_stats_created: current body (first defined in 20261121000004_job_stats.sql, last in 20261124000002_job_stats_shards.sql).
--
-- A new job gets its shard 0, so that it has a `job_stats` row before its first run, and
-- counting never inserts one on the executors' path (an insert would check the foreign
-- key, locking the job's row against its deletion; an update of the existing row does
-- not).
CREATE OR REPLACE FUNCTION probactr_job_stats_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_stat_shards (job_id) SELECT id FROM created_jobs ORDER BY id ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER jobs_stats_row
    AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS created_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_job_stats_created();
