-- probactr_create_run_partitions: current body (first defined in 20261124000001_live_runs_and_history.sql).
--
-- Creates the daily partitions of ended runs from `first_day` to `last_day` that do not
-- exist yet. A day whose ended runs already sit in the default partition is left there
-- (PostgreSQL refuses the new partition); retention deletes them row by row.
CREATE OR REPLACE FUNCTION probactr_create_run_partitions(first_day DATE, last_day DATE)
RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
    day DATE := first_day;
    created INTEGER := 0;
    name TEXT;
BEGIN
    WHILE day <= last_day LOOP
        name := 'runs_done_' || to_char(day, 'YYYYMMDD');
        IF to_regclass(name) IS NULL THEN
            BEGIN
                EXECUTE format('CREATE TABLE %I PARTITION OF runs_done FOR VALUES FROM (%L) TO (%L)',
                               name, day::timestamp AT TIME ZONE 'UTC',
                               (day + 1)::timestamp AT TIME ZONE 'UTC');
                created := created + 1;
            EXCEPTION WHEN check_violation OR duplicate_table THEN
                -- Rows of that day in the default partition, or another monitor made it.
                NULL;
            END;
        END IF;
        day := day + 1;
    END LOOP;
    RETURN created;
END $$;
