-- probactr_maintain_run_partitions: current body (first defined in 20261124000001_live_runs_and_history.sql, last in 2026112801000001_history_without_foreign_keys.sql).
--
-- Housekeeping of ended runs' partitions: creates the days from yesterday to
-- `days_ahead` days ahead, and drops whole days older than `retention` (by
-- `scheduled_at`, with a day of margin) whose runs were all queued before the retention
-- cutoff and whose first attempts have no retry still live. Returns the rows dropped.
--
-- One lock order, so no deadlock with writers by construction: maintainers serialize on
-- an advisory lock, decide what to create and drop from the catalog, and only when there
-- is something to do lock `runs_done` and its partitions (parent first, as every
-- statement on runs does) before any DDL. The history has no foreign keys, so no other
-- table is locked.
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
