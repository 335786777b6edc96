-- The history of runs carries no foreign keys, and partition maintenance locks only the
-- history: no deadlock between maintenance and writers, by construction.
--
-- Before: `runs` had foreign keys to `jobs`, `triggers` and `executors`, cloned onto
-- every partition. Creating or dropping a day partition of ended runs
-- (`probactr_maintain_run_partitions`) had to lock the referenced tables to add or remove
-- the constraint's triggers, while deleting a job or a trigger locked those tables first
-- and then, through the foreign key's action, the runs: two orders, and a deadlock
-- whenever both met (issue 28).
--
-- Now:
--   * `runs_live` keeps the three foreign keys as its own constraints (it is never created
--     nor dropped by maintenance, so no DDL clones them): a live run cannot point at a
--     deleted job, and deleting a job still cancels its live work by cascade.
--   * `runs_done` (the history) has none. What the foreign keys' actions did to it is done
--     by statement-level triggers on the referenced tables: deleting a job erases its
--     ended runs, deleting a trigger or an executor sets the history's `trigger_id` or
--     `executor_id` to NULL, exactly as before. Ending a run no longer pays a foreign-key
--     check per row, and a job deletion erases its history in one statement.
--   * Maintenance serializes on an advisory lock, decides what to create and drop from
--     the catalog, and only when there is something to do locks `runs_done` and its
--     partitions (parent first, as every statement on runs does) before any DDL. It never
--     locks another table than runs, so it cannot be part of a cycle with writers.
--
-- A history row can now name a job deleted in the same instant its run was recorded as
-- ended (a run recorded ended directly, never live): readers join `jobs`, so it is not
-- shown, and retention drops it.

ALTER TABLE runs DROP CONSTRAINT runs_job_id_fkey;
ALTER TABLE runs DROP CONSTRAINT runs_trigger_id_fkey;
ALTER TABLE runs DROP CONSTRAINT runs_executor_id_fkey;

ALTER TABLE runs_live
    ADD CONSTRAINT runs_live_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
    ADD CONSTRAINT runs_live_trigger_id_fkey FOREIGN KEY (trigger_id) REFERENCES triggers (id) ON DELETE SET NULL,
    ADD CONSTRAINT runs_live_executor_id_fkey FOREIGN KEY (executor_id) REFERENCES executors (id) ON DELETE SET NULL;

-- Rows of ended runs whose job, trigger or executor no longer exists (none when the
-- foreign keys held; cleared so that the triggers below start from a consistent history).
DELETE FROM runs_done WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = runs_done.job_id);

CREATE FUNCTION probactr_erase_job_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM runs_done WHERE job_id IN (SELECT id FROM erased_jobs);
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_erase_history
    AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS erased_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_erase_job_history();

CREATE FUNCTION probactr_forget_trigger_in_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs_done SET trigger_id = NULL WHERE trigger_id IN (SELECT id FROM deleted_triggers);
    RETURN NULL;
END $$;

CREATE TRIGGER triggers_forget_in_history
    AFTER DELETE ON triggers
    REFERENCING OLD TABLE AS deleted_triggers
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_forget_trigger_in_history();

CREATE FUNCTION probactr_forget_executor_in_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs_done SET executor_id = NULL WHERE executor_id IN (SELECT id FROM deleted_executors);
    RETURN NULL;
END $$;

CREATE TRIGGER executors_forget_in_history
    AFTER DELETE ON executors
    REFERENCING OLD TABLE AS deleted_executors
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_forget_executor_in_history();

-- The query telling whether a day of ended runs must be kept past the retention: a run
-- queued after the cutoff ($1), or a first attempt whose retry is still live.
CREATE FUNCTION probactr_run_partition_blocked_query(part TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT format('SELECT EXISTS (SELECT 1 FROM %I WHERE queued_at >= $1)
                       OR EXISTS (SELECT 1 FROM runs_live JOIN %I AS done ON done.id = runs_live.first_run_id)',
                  part, part)
$$;

-- Same work as before (days from yesterday to `days_ahead` ahead; whole days past the
-- retention whose runs were all queued before the cutoff and have no live retry), in one
-- lock order. Returns the rows dropped.
CREATE OR REPLACE FUNCTION probactr_maintain_run_partitions(retention INTERVAL, days_ahead INTEGER)
RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    first_day DATE := (now() AT TIME ZONE 'UTC')::date - 1;
    last_day DATE := (now() AT TIME ZONE 'UTC')::date + days_ahead;
    cutoff TIMESTAMPTZ := now() - retention;
    part RECORD;
    upper_bound TIMESTAMPTZ;
    candidates TEXT[] := '{}';
    missing BOOLEAN;
    blocked BOOLEAN;
    rows_dropped BIGINT := 0;
    part_rows BIGINT;
    name TEXT;
BEGIN
    -- One maintainer at a time; another monitor doing it now does it for everyone.
    IF NOT pg_try_advisory_xact_lock(hashtext('probactr_maintain_run_partitions')) THEN
        RETURN 0;
    END IF;
    -- What there is to do, from the catalog alone (no lock on runs yet).
    SELECT EXISTS (SELECT 1 FROM generate_series(first_day, last_day, interval '1 day') AS day
                   WHERE to_regclass('runs_done_' || to_char(day, 'YYYYMMDD')) IS NULL)
        INTO missing;
    FOR part IN
        SELECT child.relname
        FROM pg_inherits
        JOIN pg_class child ON child.oid = pg_inherits.inhrelid
        WHERE pg_inherits.inhparent = 'runs_done'::regclass
          AND child.relname ~ '^runs_done_[0-9]{8}$'
        ORDER BY child.relname
    LOOP
        upper_bound := (to_date(substr(part.relname, 11), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC';
        CONTINUE WHEN upper_bound >= cutoff - interval '1 day';
        -- Reading a day under a share lock conflicts with no writer; checked again below
        -- under the exclusive lock, so that a day kept now costs no exclusive lock on
        -- every pass.
        EXECUTE probactr_run_partition_blocked_query(part.relname) INTO blocked USING cutoff;
        CONTINUE WHEN blocked;
        candidates := candidates || part.relname::text;
    END LOOP;
    IF NOT missing AND cardinality(candidates) = 0 THEN
        RETURN 0;
    END IF;
    -- The history and its partitions, parent first, before any DDL: the order of every
    -- statement on runs. Waiting long here would hold every writer of the history queued
    -- behind this lock: give up instead, the next pass tries again.
    PERFORM set_config('lock_timeout', '5s', true);
    LOCK TABLE runs_done IN ACCESS EXCLUSIVE MODE;
    PERFORM probactr_create_run_partitions(first_day, last_day);
    FOREACH name IN ARRAY candidates LOOP
        EXECUTE probactr_run_partition_blocked_query(name) INTO blocked USING cutoff;
        CONTINUE WHEN blocked;
        EXECUTE format('SELECT count(*) FROM %I', name) INTO part_rows;
        EXECUTE format('DROP TABLE IF EXISTS %I', name);
        rows_dropped := rows_dropped + part_rows;
    END LOOP;
    RETURN rows_dropped;
END $$;
