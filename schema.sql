-- The schema of a probactr database: every migration applied and the database functions
-- installed (what start-up does). Written by scripts/schema-dump; scripts/test fails when
-- it differs. Do not edit: change a migration or a function file and run the script.

--
-- Name: probactr_alert_executor_lost(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_alert_executor_lost() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM alert_rules WHERE enabled) THEN
        RETURN NULL;
    END IF;
    INSERT INTO alert_events (event, executor_id, detail)
    VALUES ('executor_lost', NEW.id,
            jsonb_build_object('host', NEW.host, 'pid', NEW.pid,
                               'last_heartbeat_at', NEW.last_heartbeat_at));
    RETURN NULL;
END $$;

--
-- Name: probactr_alert_misfires(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_alert_misfires() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM alert_rules WHERE enabled) THEN
        RETURN NULL;
    END IF;
    INSERT INTO alert_events (event, job_id, trigger_id, detail)
    SELECT 'fire_missed', missed.job_id, missed.trigger_id,
           jsonb_build_object('instants', missed.instants, 'first_instant', missed.first_instant,
                              'last_instant', missed.last_instant, 'policy', missed.policy,
                              'reason', missed.reason)
    FROM inserted AS missed
    WHERE missed.reason <> 'paused' AND missed.reason NOT LIKE 'calendar %'
      AND missed.reason NOT LIKE 'maintenance%';
    RETURN NULL;
END $$;

--
-- Name: probactr_alert_run_ends(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_alert_run_ends() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM alert_rules WHERE enabled)
       OR NOT EXISTS (SELECT 1 FROM inserted WHERE state IN ('failed', 'timed_out', 'abandoned', 'missed')) THEN
        RETURN NULL;
    END IF;
    INSERT INTO alert_events (event, job_id, trigger_id, run_id, executor_id, detail)
    SELECT kinds.event, ended.job_id, ended.trigger_id, ended.id, ended.executor_id,
           jsonb_build_object('state', ended.state, 'attempt', ended.attempt,
                              'max_attempts', jobs.retry_max_attempts, 'error', ended.error,
                              'reason', ended.reason, 'exit_code', ended.exit_code,
                              'http_status', ended.http_status,
                              'scheduled_at', ended.scheduled_at, 'finished_at', ended.finished_at)
    FROM inserted AS ended
    JOIN jobs ON jobs.id = ended.job_id
    CROSS JOIN LATERAL (
        SELECT ended.state = 'abandoned' AND ended.reason = 'executor lost'
               AND jobs.on_executor_lost = 'rerun'
               AND (SELECT count(*) FROM runs AS earlier
                    WHERE (earlier.first_run_id = coalesce(ended.first_run_id, ended.id)
                           OR earlier.id = coalesce(ended.first_run_id, ended.id))
                      AND earlier.state = 'abandoned' AND earlier.id <> ended.id) < jobs.max_takeovers
               AS taken_over) AS takeover
    CROSS JOIN LATERAL (VALUES
        (CASE WHEN ended.state IN ('failed', 'timed_out', 'abandoned')
                   AND NOT takeover.taken_over
                   AND NOT EXISTS (SELECT 1 FROM probactr_next_attempt(
                       ended.id, ended.first_run_id, ended.attempt, ended.state, ended.exit_code,
                       ended.http_status, NULL, ended.job_id, false)) THEN 'run_failed' END),
        (CASE ended.state WHEN 'timed_out' THEN 'run_timed_out'
                          WHEN 'abandoned' THEN 'run_abandoned'
                          WHEN 'missed' THEN 'fire_missed' END)) AS kinds (event)
    WHERE ended.state IN ('failed', 'timed_out', 'abandoned', 'missed')
      AND kinds.event IS NOT NULL;
    RETURN NULL;
END $$;

--
-- Name: probactr_check_run_keys(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_check_run_keys() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    triggers_held BOOLEAN := coalesce(current_setting('probactr.triggers_held', true), '') = 'on';
    job_ids BIGINT[];
    trigger_ids BIGINT[];
BEGIN
    SELECT array_agg(DISTINCT job_id) FILTER (WHERE trigger_id IS NULL OR NOT triggers_held),
           array_agg(DISTINCT trigger_id) FILTER (WHERE trigger_id IS NOT NULL AND NOT triggers_held)
    INTO job_ids, trigger_ids
    FROM inserted WHERE state IN ('queued', 'claimed', 'running');
    IF job_ids IS NOT NULL
       AND (SELECT count(*) FROM (SELECT FROM jobs WHERE id = ANY (job_ids) FOR KEY SHARE) AS held)
           < cardinality(job_ids) THEN
        RAISE EXCEPTION 'a live run names a job that does not exist'
            USING ERRCODE = 'foreign_key_violation', TABLE = 'runs_live', COLUMN = 'job_id',
                  CONSTRAINT = 'runs_live_job_exists';
    END IF;
    IF trigger_ids IS NOT NULL
       AND (SELECT count(*) FROM (SELECT FROM triggers WHERE id = ANY (trigger_ids) FOR KEY SHARE) AS held)
           < cardinality(trigger_ids) THEN
        RAISE EXCEPTION 'a live run names a trigger that does not exist'
            USING ERRCODE = 'foreign_key_violation', TABLE = 'runs_live', COLUMN = 'trigger_id',
                  CONSTRAINT = 'runs_live_trigger_exists';
    END IF;
    RETURN NULL;
END $$;

--
-- Name: probactr_claim_order(timestamp with time zone, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_claim_order(available_at timestamp with time zone, priority integer) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
    SELECT available_at - make_interval(secs => priority * 60)
$$;

--
-- Name: probactr_create_run_partitions(date, date); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_create_run_partitions(first_day date, last_day date) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: probactr_erase_job_runs(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_erase_job_runs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM runs_live WHERE job_id IN (SELECT id FROM erased_jobs);
    DELETE FROM runs_done WHERE job_id IN (SELECT id FROM erased_jobs);
    RETURN NULL;
END $$;

--
-- Name: probactr_forget_executor(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_forget_executor() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM runs_live JOIN deleted_executors ON deleted_executors.id = runs_live.executor_id
               WHERE runs_live.state IN ('claimed', 'running')) THEN
        RAISE EXCEPTION 'an executor still owning live runs cannot be deleted'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    UPDATE runs_done SET executor_id = NULL WHERE executor_id IN (SELECT id FROM deleted_executors);
    RETURN NULL;
END $$;

--
-- Name: probactr_forget_trigger(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_forget_trigger() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE runs_live SET trigger_id = NULL WHERE trigger_id IN (SELECT id FROM deleted_triggers);
    UPDATE runs_done SET trigger_id = NULL WHERE trigger_id IN (SELECT id FROM deleted_triggers);
    RETURN NULL;
END $$;

--
-- Name: probactr_job_rate_window(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_job_rate_window() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO job_rate_windows (job_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

--
-- Name: probactr_job_stats_count(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_job_stats_count() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    -- An update's runs that were live before it; none for an insert, whose every ended
    -- row is new.
    were_live BIGINT[];
BEGIN
    -- Most statements on runs (firings, claims, starts, returns to the queue) end
    -- nothing: they pay one pass over their rows, not the upsert.
    IF NOT EXISTS (SELECT 1 FROM changed_runs WHERE state NOT IN ('queued', 'claimed', 'running')) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        SELECT array_agg(id) INTO were_live FROM previous_runs WHERE state IN ('queued', 'claimed', 'running');
        IF were_live IS NULL THEN
            RETURN NULL;
        END IF;
    END IF;
    INSERT INTO job_stat_shards AS stats (job_id, shard, runs, successes, failures, cancelled, not_run,
                                          last_run_id, last_run_at, last_state, last_duration_ms,
                                          last_success_at, last_failure_at)
    SELECT job_id, (pg_backend_pid() % 8)::smallint,
           count(*),
           count(*) FILTER (WHERE state = 'succeeded'),
           count(*) FILTER (WHERE state IN ('failed', 'timed_out', 'abandoned')),
           count(*) FILTER (WHERE state = 'cancelled'),
           count(*) FILTER (WHERE state IN ('skipped', 'missed')),
           max(id) FILTER (WHERE latest),
           max(finished_at) FILTER (WHERE latest),
           max(state) FILTER (WHERE latest),
           max((EXTRACT(EPOCH FROM finished_at - started_at) * 1000)::bigint) FILTER (WHERE latest),
           max(finished_at) FILTER (WHERE state = 'succeeded'),
           max(finished_at) FILTER (WHERE state IN ('failed', 'timed_out', 'abandoned'))
    FROM (SELECT job_id, id, state, started_at, finished_at,
                 -- The job's latest end in this statement: one sort for every job.
                 row_number() OVER (PARTITION BY job_id ORDER BY finished_at DESC, id DESC) = 1 AS latest
          FROM changed_runs
          WHERE state NOT IN ('queued', 'claimed', 'running')
            AND (were_live IS NULL OR id IN (SELECT unnest(were_live)))) AS ended
    GROUP BY job_id
    ORDER BY job_id
    ON CONFLICT (job_id, shard) DO UPDATE SET
        runs = stats.runs + excluded.runs,
        successes = stats.successes + excluded.successes,
        failures = stats.failures + excluded.failures,
        cancelled = stats.cancelled + excluded.cancelled,
        not_run = stats.not_run + excluded.not_run,
        last_run_id = CASE WHEN stats.last_run_at IS NULL
                             OR (excluded.last_run_at, excluded.last_run_id) > (stats.last_run_at, stats.last_run_id)
                           THEN excluded.last_run_id ELSE stats.last_run_id END,
        last_state = CASE WHEN stats.last_run_at IS NULL
                            OR (excluded.last_run_at, excluded.last_run_id) > (stats.last_run_at, stats.last_run_id)
                          THEN excluded.last_state ELSE stats.last_state END,
        last_duration_ms = CASE WHEN stats.last_run_at IS NULL
                                  OR (excluded.last_run_at, excluded.last_run_id) > (stats.last_run_at, stats.last_run_id)
                                THEN excluded.last_duration_ms ELSE stats.last_duration_ms END,
        last_run_at = CASE WHEN stats.last_run_at IS NULL
                             OR (excluded.last_run_at, excluded.last_run_id) > (stats.last_run_at, stats.last_run_id)
                           THEN excluded.last_run_at ELSE stats.last_run_at END,
        last_success_at = greatest(stats.last_success_at, excluded.last_success_at),
        last_failure_at = greatest(stats.last_failure_at, excluded.last_failure_at);
    RETURN NULL;
END $$;

--
-- Name: probactr_job_stats_created(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_job_stats_created() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO job_stat_shards (job_id) SELECT id FROM created_jobs ORDER BY id ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

--
-- Name: probactr_maintain_run_partitions(interval, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_maintain_run_partitions(retention interval, days_ahead integer) RETURNS bigint
    LANGUAGE plpgsql
    AS $_$
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
END $_$;

--
-- Name: probactr_namespace_capped(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_namespace_capped() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    counted INTEGER;
BEGIN
    IF TG_TABLE_NAME = 'jobs' THEN
        NEW.namespace_capped := EXISTS (SELECT 1 FROM namespaces
                                        WHERE name = NEW.namespace AND max_running IS NOT NULL);
        RETURN NEW;
    END IF;
    IF (OLD.max_running IS NULL) <> (NEW.max_running IS NULL) THEN
        UPDATE jobs SET namespace_capped = (NEW.max_running IS NOT NULL)
        WHERE namespace = NEW.name AND namespace_capped <> (NEW.max_running IS NOT NULL);
    END IF;
    IF OLD.max_running IS NULL AND NEW.max_running IS NOT NULL THEN
        WITH marked AS (
            UPDATE runs_live SET quota_namespace = NEW.name
            WHERE state IN ('claimed', 'running') AND quota_namespace IS NULL
              AND job_id IN (SELECT id FROM jobs WHERE namespace = NEW.name)
            RETURNING 1)
        SELECT count(*) INTO counted FROM marked;
        NEW.running := NEW.running + counted;
    END IF;
    RETURN NEW;
END $$;

--
-- Name: probactr_next_attempt(bigint, bigint, integer, text, integer, integer, integer, bigint, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_next_attempt(ended_id bigint, ended_chain bigint, ended_attempt integer, ended_state text, ended_exit_code integer, ended_http_status integer, ended_replica integer, ended_job bigint, executor_lost boolean) RETURNS TABLE(available_at timestamp with time zone, reason text)
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN plan.takeover THEN now()
                ELSE now() + make_interval(secs =>
                    least(CASE WHEN jobs.retry_backoff = 'fixed' THEN jobs.retry_backoff_secs
                               ELSE jobs.retry_backoff_secs * power(2, least(ended_attempt - 1, 60)) END,
                          coalesce(jobs.retry_max_secs, 'Infinity'::float8))
                    * CASE WHEN jobs.retry_jitter = 'full' THEN random() ELSE 1 END) END,
           CASE WHEN plan.takeover
                THEN 'takeover ' || (plan.takeovers + 1) || ' of ' || jobs.max_takeovers || ': run '
                     || ended_id || ' lost its executor'
                ELSE 'retry of run ' || ended_id || ' (' || ended_state || ')' END
    FROM jobs
    CROSS JOIN LATERAL (
        SELECT executor_lost AND jobs.on_executor_lost = 'rerun'
                   AND prior.takeovers < jobs.max_takeovers AS takeover,
               prior.takeovers
        FROM (SELECT CASE WHEN executor_lost AND jobs.on_executor_lost = 'rerun'
                          THEN (SELECT count(*) FROM runs AS earlier
                                WHERE (earlier.first_run_id = coalesce(ended_chain, ended_id)
                                       OR earlier.id = coalesce(ended_chain, ended_id))
                                  AND earlier.state = 'abandoned')
                          ELSE 0 END AS takeovers) AS prior) AS plan
    WHERE jobs.id = ended_job
      AND ended_replica IS NULL
      AND (plan.takeover
           OR (ended_state IN ('failed', 'timed_out', 'abandoned') AND ended_attempt < jobs.retry_max_attempts
               AND (jobs.retry_on IS NULL OR ended_state = 'abandoned'
                    OR (ended_state = 'timed_out' AND jobs.retry_on @> '{"timeouts": true}')
                    OR coalesce(jobs.retry_on -> 'exit_codes' @> to_jsonb(ended_exit_code), false)
                    OR coalesce(jobs.retry_on -> 'http_statuses' @> to_jsonb(ended_http_status), false))))
$$;

--
-- Name: probactr_notify_access(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_notify_access() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('probactr_access', '');
    RETURN NULL;
END $$;

--
-- Name: probactr_notify_runs(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_notify_runs() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted WHERE state = 'queued' AND available_at <= now()) THEN
        PERFORM pg_notify('probactr_runs', '');
    END IF;
    RETURN NULL;
END $$;

--
-- Name: probactr_notify_triggers(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_notify_triggers() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF coalesce(current_setting('probactr.quiet', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('probactr_triggers', '');
    RETURN NULL;
END $$;

--
-- Name: probactr_queue_run(bigint, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_queue_run(job bigint, why text) RETURNS bigint
    LANGUAGE sql
    AS $$
    INSERT INTO runs (job_id, scheduled_at, reason) VALUES (job, now(), why) RETURNING id
$$;

--
-- Name: probactr_quota_release(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_quota_release() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF OLD.quota_namespace IS NOT NULL THEN
        UPDATE namespaces SET running = running - 1 WHERE name = OLD.quota_namespace;
    END IF;
    IF OLD.quota_trigger IS NOT NULL THEN
        UPDATE triggers SET running = running - 1 WHERE id = OLD.quota_trigger;
    END IF;
    IF OLD.quota_pool IS NOT NULL THEN
        UPDATE pools SET used = used - OLD.quota_pool_slots WHERE id = OLD.quota_pool;
    END IF;
    RETURN NULL;
END $$;

--
-- Name: probactr_rate_room(jsonb, timestamp with time zone[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_rate_room(rate jsonb, starts timestamp with time zone[]) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
    SELECT greatest(0, (rate ->> 'limit')::int - (
        SELECT count(*)::int FROM unnest(starts) AS started
        WHERE started > now() - make_interval(secs => (rate ->> 'per_secs')::int)))
$$;

--
-- Name: probactr_rate_stamp(jsonb, timestamp with time zone[], bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_rate_stamp(rate jsonb, starts timestamp with time zone[], taken bigint) RETURNS timestamp with time zone[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    kept TIMESTAMPTZ[];
BEGIN
    SELECT coalesce(array_agg(started ORDER BY started), '{}') INTO kept
    FROM (SELECT started FROM (SELECT unnest(starts) AS started
                               UNION ALL SELECT now() FROM generate_series(1, taken)) AS every_start
          ORDER BY started DESC LIMIT (rate ->> 'limit')::int) AS latest;
    IF probactr_rate_room(rate, kept) = 0 THEN
        PERFORM pg_notify('probactr_runs_at', ceil(extract(epoch FROM kept[1]
            + make_interval(secs => (rate ->> 'per_secs')::int)) * 1000)::bigint::text);
    END IF;
    RETURN kept;
END $$;

--
-- Name: probactr_route_live_run(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_route_live_run() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.priority := coalesce((SELECT priority FROM jobs WHERE id = NEW.job_id), 0);
        IF NEW.trigger_id IS NOT NULL THEN
            NEW.trigger_cap := (SELECT max_concurrency FROM triggers WHERE id = NEW.trigger_id);
        END IF;
    END IF;
    NEW.claim_order := probactr_claim_order(NEW.available_at, NEW.priority);
    RETURN NEW;
END $$;

--
-- Name: probactr_run_params(bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_run_params(chain_id bigint, trigger bigint) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce((SELECT params FROM triggers WHERE id = trigger), '{}'::jsonb)
           || coalesce((SELECT params FROM run_inputs WHERE run_id = chain_id), '{}'::jsonb)
$$;

--
-- Name: probactr_run_partition_blocked_query(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_run_partition_blocked_query(part text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $_$
    SELECT format('SELECT EXISTS (SELECT 1 FROM %I WHERE queued_at >= $1)
                       OR EXISTS (SELECT 1 FROM runs_live JOIN %I AS done ON done.id = runs_live.first_run_id)',
                  part, part)
$_$;

--
-- Name: probactr_run_targets(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_run_targets(job bigint) RETURNS TABLE(shard integer, shard_total integer, pinned_to uuid)
    LANGUAGE sql STABLE
    AS $$
    WITH target AS (SELECT route, shards, selector FROM jobs WHERE id = job),
    live AS (
        SELECT executors.id, (row_number() OVER (ORDER BY executors.id) - 1)::int AS nth,
               (count(*) OVER ())::int AS total
        FROM executors, target
        WHERE executors.role = 'executor' AND executors.state = 'alive'
          AND NOT executors.cordoned AND NOT executors.drain_requested
          AND target.selector <@ executors.labels)
    SELECT NULL::int, NULL::int, NULL::uuid FROM target WHERE target.route = 'any'
    UNION ALL
    SELECT live.nth, live.total, live.id FROM target, live WHERE target.route = 'broadcast'
    UNION ALL
    SELECT 0, 1, NULL::uuid FROM target
    WHERE target.route = 'broadcast' AND NOT EXISTS (SELECT 1 FROM live)
    UNION ALL
    SELECT slot, target.shards, (SELECT live.id FROM live WHERE live.nth = slot % live.total)
    FROM target, generate_series(0, target.shards - 1) AS slot
    WHERE target.route = 'shard'
$$;

--
-- Name: probactr_runs_advance(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_runs_advance() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    ended RECORD;
    child RECORD;
    queued BIGINT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM inserted WHERE state NOT IN ('queued', 'claimed', 'running')) THEN
        RETURN NULL;
    END IF;
    IF (SELECT 1 FROM jobs WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}'
        ORDER BY id LIMIT 1) IS NOT NULL
       AND EXISTS (SELECT 1 FROM inserted AS last
                   WHERE last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
                     AND last.job_id IN (SELECT id FROM jobs
                                         WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}')) THEN
        FOR child IN
            WITH parents AS MATERIALIZED (
                SELECT last.* FROM inserted AS last
                WHERE last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
                  AND last.job_id IN (SELECT id FROM jobs
                                      WHERE on_success <> '{}' OR on_failure <> '{}' OR on_finish <> '{}'))
            SELECT last.id AS parent_id, children.job_id,
                   probactr_run_params(coalesce(last.first_run_id, last.id), last.trigger_id) AS params
            FROM parents AS last
            JOIN jobs ON jobs.id = last.job_id
            CROSS JOIN LATERAL (
                SELECT DISTINCT listed.job_id
                FROM unnest(CASE WHEN last.state = 'succeeded' THEN jobs.on_success ELSE '{}' END
                            || CASE WHEN last.state IN ('failed', 'timed_out', 'abandoned') THEN jobs.on_failure ELSE '{}' END
                            || CASE WHEN last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
                                    THEN jobs.on_finish ELSE '{}' END) AS listed (job_id)
                JOIN jobs AS present ON present.id = listed.job_id) AS children
            WHERE last.state IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'cancelled')
              AND (jobs.on_success <> '{}' OR jobs.on_failure <> '{}' OR jobs.on_finish <> '{}')
              AND NOT EXISTS (SELECT 1 FROM runs AS later
                              WHERE later.first_run_id = coalesce(last.first_run_id, last.id)
                                AND later.attempt > last.attempt)
            ORDER BY last.id, children.job_id
        LOOP
            queued := probactr_queue_run(child.job_id, 'child of run ' || child.parent_id);
            INSERT INTO run_inputs (run_id, params, parent_run_id)
            VALUES (queued, child.params, child.parent_id);
        END LOOP;
    END IF;
    IF (SELECT 1 FROM workflow_run_steps WHERE state = 'running' ORDER BY run_id LIMIT 1) IS NULL THEN
        RETURN NULL;
    END IF;
    FOR ended IN
        SELECT inputs.workflow_run_id, inputs.step_name, inputs.run_id AS chain_id,
               last.id AS attempt_id, last.state
        FROM inserted AS last
        JOIN run_inputs AS inputs ON inputs.run_id = coalesce(last.first_run_id, last.id)
        WHERE last.state NOT IN ('queued', 'claimed', 'running')
          AND inputs.workflow_run_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM runs AS later
                          WHERE later.first_run_id = coalesce(last.first_run_id, last.id)
                            AND later.attempt > last.attempt)
        ORDER BY inputs.workflow_run_id, inputs.step_name
    LOOP
        -- The workflow run's lock first, then the step: a concurrent end of another step
        -- waits here and then sees this one's end.
        PERFORM 1 FROM workflow_runs WHERE id = ended.workflow_run_id FOR UPDATE;
        UPDATE workflow_run_steps
        SET state = CASE ended.state WHEN 'succeeded' THEN 'succeeded'
                                     WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END,
            output = (SELECT output FROM run_outputs WHERE run_id = ended.attempt_id),
            finished_at = now()
        WHERE workflow_run_id = ended.workflow_run_id AND name = ended.step_name
          AND run_id = ended.chain_id AND state = 'running';
        IF FOUND THEN
            PERFORM probactr_workflow_advance(ended.workflow_run_id);
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

--
-- Name: probactr_trigger_capped(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_trigger_capped() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    counted INTEGER;
BEGIN
    UPDATE runs_live SET trigger_cap = NEW.max_concurrency
    WHERE trigger_id = NEW.id AND state = 'queued';
    IF OLD.max_concurrency IS NULL AND NEW.max_concurrency IS NOT NULL THEN
        WITH marked AS (
            UPDATE runs_live SET quota_trigger = NEW.id
            WHERE trigger_id = NEW.id AND state IN ('claimed', 'running') AND quota_trigger IS NULL
            RETURNING 1)
        SELECT count(*) INTO counted FROM marked;
        NEW.running := NEW.running + counted;
    END IF;
    RETURN NEW;
END $$;

--
-- Name: probactr_workflow_advance(bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_workflow_advance(target bigint) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    changed BOOLEAN := TRUE;
    step RECORD;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM workflow_runs WHERE id = target AND state = 'running') THEN
        RETURN;
    END IF;
    WHILE changed LOOP
        changed := FALSE;
        FOR step IN
            SELECT s.name, s.run_when,
                   count(u.name) AS upstream,
                   count(u.name) FILTER (WHERE u.state IN ('pending', 'running')) AS waiting,
                   count(u.name) FILTER (WHERE u.state = 'succeeded') AS succeeded,
                   count(u.name) FILTER (WHERE u.state IN ('failed', 'cancelled')) AS failed
            FROM workflow_run_steps AS s
            LEFT JOIN workflow_run_steps AS u
                   ON u.workflow_run_id = s.workflow_run_id AND u.name = ANY (s.depends_on)
            WHERE s.workflow_run_id = target AND s.state = 'pending'
            GROUP BY s.name, s.run_when, s.position
            ORDER BY s.position
        LOOP
            CONTINUE WHEN step.waiting > 0;
            IF (step.run_when = 'all_success' AND step.succeeded = step.upstream)
               OR step.run_when = 'all_done'
               OR (step.run_when = 'any_failed' AND step.failed > 0) THEN
                PERFORM probactr_workflow_start_step(target, step.name);
            ELSE
                UPDATE workflow_run_steps SET state = 'skipped', finished_at = now()
                WHERE workflow_run_id = target AND name = step.name;
            END IF;
            changed := TRUE;
        END LOOP;
    END LOOP;
    UPDATE workflow_runs
    SET state = CASE WHEN EXISTS (SELECT 1 FROM workflow_run_steps
                                  WHERE workflow_run_id = target AND state IN ('failed', 'cancelled'))
                     THEN 'failed' ELSE 'succeeded' END,
        finished_at = now()
    WHERE id = target AND state = 'running'
      AND NOT EXISTS (SELECT 1 FROM workflow_run_steps
                      WHERE workflow_run_id = target AND state IN ('pending', 'running'));
END $$;

--
-- Name: probactr_workflow_start_step(bigint, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.probactr_workflow_start_step(target bigint, step text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
DECLARE
    queued BIGINT;
    step_job BIGINT;
    given JSONB;
BEGIN
    SELECT s.job_id, w.params || s.params INTO step_job, given
    FROM workflow_run_steps AS s JOIN workflow_runs AS w ON w.id = s.workflow_run_id
    WHERE s.workflow_run_id = target AND s.name = step;
    queued := probactr_queue_run(step_job, 'workflow run ' || target || ', step ' || step);
    INSERT INTO run_inputs (run_id, params, workflow_run_id, step_name)
    VALUES (queued, given, target, step);
    UPDATE workflow_run_steps
    SET state = 'running', run_id = queued, run_ids = run_ids || queued, output = NULL,
        started_at = now(), finished_at = NULL
    WHERE workflow_run_id = target AND name = step;
    RETURN queued;
END $$;

--
-- Name: alert_channels; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alert_channels (
    id bigint NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    config jsonb NOT NULL,
    secret_key_id text,
    secret_nonce bytea,
    secret_sealed bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    secret_bound boolean DEFAULT false NOT NULL,
    url_key_id text,
    url_nonce bytea,
    url_sealed bytea,
    url_bound boolean DEFAULT false NOT NULL,
    namespace text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT alert_channels_config_object CHECK ((jsonb_typeof(config) = 'object'::text)),
    CONSTRAINT alert_channels_kind_valid CHECK ((kind = ANY (ARRAY['webhook'::text, 'email'::text, 'slack'::text]))),
    CONSTRAINT alert_channels_name_length CHECK (((char_length(name) >= 1) AND (char_length(name) <= 200))),
    CONSTRAINT alert_channels_secret_whole CHECK ((((secret_key_id IS NULL) = (secret_nonce IS NULL)) AND ((secret_nonce IS NULL) = (secret_sealed IS NULL)))),
    CONSTRAINT alert_channels_url_whole CHECK ((((url_key_id IS NULL) = (url_nonce IS NULL)) AND ((url_nonce IS NULL) = (url_sealed IS NULL))))
);

--
-- Name: alert_channels_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.alert_channels ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.alert_channels_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: alert_conditions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alert_conditions (
    rule_id bigint NOT NULL,
    event text NOT NULL,
    job_id bigint DEFAULT 0 NOT NULL,
    run_id bigint DEFAULT 0 NOT NULL,
    raised_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: alert_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alert_events (
    id bigint NOT NULL,
    event text NOT NULL,
    rule_id bigint,
    job_id bigint,
    trigger_id bigint,
    run_id bigint,
    executor_id uuid,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    occurred_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: alert_events_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.alert_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.alert_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: alert_rule_channels; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alert_rule_channels (
    rule_id bigint NOT NULL,
    channel_id bigint NOT NULL
);

--
-- Name: alert_rules; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alert_rules (
    id bigint NOT NULL,
    name text NOT NULL,
    events text[] NOT NULL,
    job_id bigint,
    threshold integer,
    duration_secs integer,
    throttle_secs integer DEFAULT 300 NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    namespace text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT alert_rules_duration_positive CHECK (((duration_secs IS NULL) OR (duration_secs >= 1))),
    CONSTRAINT alert_rules_events_valid CHECK (((cardinality(events) >= 1) AND (events <@ ARRAY['run_failed'::text, 'run_timed_out'::text, 'run_abandoned'::text, 'fire_missed'::text, 'consecutive_failures'::text, 'run_too_long'::text, 'no_success_within'::text, 'executor_lost'::text, 'no_executor'::text, 'recovered'::text, 'capacity_shortfall'::text]))),
    CONSTRAINT alert_rules_name_length CHECK (((char_length(name) >= 1) AND (char_length(name) <= 200))),
    CONSTRAINT alert_rules_threshold_positive CHECK (((threshold IS NULL) OR (threshold >= 1))),
    CONSTRAINT alert_rules_throttle_nonnegative CHECK ((throttle_secs >= 0))
);

--
-- Name: alert_rules_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.alert_rules ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.alert_rules_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: alert_windows; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alert_windows (
    rule_id bigint NOT NULL,
    job_id bigint NOT NULL,
    event text NOT NULL,
    opened_at timestamp with time zone NOT NULL,
    closes_at timestamp with time zone NOT NULL,
    suppressed integer DEFAULT 0 NOT NULL,
    last_event jsonb
);

--
-- Name: api_tokens; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_tokens (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    token_hash text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    origin text DEFAULT 'personal'::text NOT NULL,
    namespaces text[],
    role text,
    CONSTRAINT api_tokens_origin_valid CHECK ((origin = ANY (ARRAY['login'::text, 'personal'::text]))),
    CONSTRAINT api_tokens_role_valid CHECK (((role IS NULL) OR (role = ANY (ARRAY['viewer'::text, 'operator'::text, 'admin'::text]))))
);

--
-- Name: api_tokens_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.api_tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.api_tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: archived_outputs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.archived_outputs (
    run_id bigint NOT NULL,
    archived_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: TABLE archived_outputs; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.archived_outputs IS 'Runs whose full output is in the output archive';

--
-- Name: audit_log; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_log (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    actor_id bigint,
    actor text NOT NULL,
    action text NOT NULL,
    object_type text NOT NULL,
    object_id bigint,
    before jsonb,
    after jsonb,
    object_name text,
    namespace text
);

--
-- Name: audit_log_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.audit_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: backfills; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.backfills (
    id bigint NOT NULL,
    trigger_id bigint NOT NULL,
    job_id bigint NOT NULL,
    instants timestamp with time zone[] NOT NULL,
    queued integer DEFAULT 0 NOT NULL,
    max_concurrency integer NOT NULL,
    requested_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT backfills_instants_some CHECK ((cardinality(instants) >= 1)),
    CONSTRAINT backfills_max_concurrency_positive CHECK ((max_concurrency >= 1)),
    CONSTRAINT backfills_queued_range CHECK (((queued >= 0) AND (queued <= cardinality(instants))))
);

--
-- Name: backfills_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.backfills ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.backfills_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: calendars; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.calendars (
    id bigint NOT NULL,
    namespace text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    days jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT calendars_days_object CHECK ((jsonb_typeof(days) = 'object'::text)),
    CONSTRAINT calendars_name_valid CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text)),
    CONSTRAINT calendars_timezone_nonempty CHECK (((char_length(timezone) >= 1) AND (char_length(timezone) <= 64)))
);

--
-- Name: calendars_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.calendars ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.calendars_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: executors; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.executors (
    id uuid NOT NULL,
    role text DEFAULT 'executor'::text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    version text NOT NULL,
    capacity integer DEFAULT 0 NOT NULL,
    state text DEFAULT 'alive'::text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    last_heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    declared_dead_at timestamp with time zone,
    reaped_by uuid,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    cordoned boolean DEFAULT false NOT NULL,
    drain_requested boolean DEFAULT false NOT NULL,
    CONSTRAINT executors_capacity_nonnegative CHECK ((capacity >= 0)),
    CONSTRAINT executors_labels_object CHECK ((jsonb_typeof(labels) = 'object'::text)),
    CONSTRAINT executors_role_valid CHECK ((role = ANY (ARRAY['executor'::text, 'monitor'::text]))),
    CONSTRAINT executors_state_valid CHECK ((state = ANY (ARRAY['alive'::text, 'draining'::text, 'dead'::text, 'stopped'::text])))
);

--
-- Name: idempotency_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.idempotency_keys (
    owner text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    status integer,
    content_type text,
    body bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT idempotency_keys_key_length CHECK (((length(key) >= 1) AND (length(key) <= 255)))
);

--
-- Name: job_rate_windows; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_rate_windows (
    job_id bigint NOT NULL,
    starts timestamp with time zone[] DEFAULT '{}'::timestamp with time zone[] NOT NULL
);

--
-- Name: job_stat_shards; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_stat_shards (
    job_id bigint NOT NULL,
    runs bigint DEFAULT 0 NOT NULL,
    successes bigint DEFAULT 0 NOT NULL,
    failures bigint DEFAULT 0 NOT NULL,
    cancelled bigint DEFAULT 0 NOT NULL,
    not_run bigint DEFAULT 0 NOT NULL,
    last_run_id bigint,
    last_run_at timestamp with time zone,
    last_state text,
    last_duration_ms bigint,
    last_success_at timestamp with time zone,
    last_failure_at timestamp with time zone,
    shard smallint DEFAULT 0 NOT NULL,
    CONSTRAINT job_stat_shards_shard_range CHECK (((shard >= 0) AND (shard <= 7)))
);

--
-- Name: job_stats; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.job_stats AS
 SELECT job_stat_shards.job_id,
    (sum(job_stat_shards.runs))::bigint AS runs,
    (sum(job_stat_shards.successes))::bigint AS successes,
    (sum(job_stat_shards.failures))::bigint AS failures,
    (sum(job_stat_shards.cancelled))::bigint AS cancelled,
    (sum(job_stat_shards.not_run))::bigint AS not_run,
    (array_agg(job_stat_shards.last_run_id ORDER BY job_stat_shards.last_run_at DESC NULLS LAST, job_stat_shards.last_run_id DESC NULLS LAST))[1] AS last_run_id,
    max(job_stat_shards.last_run_at) AS last_run_at,
    (array_agg(job_stat_shards.last_state ORDER BY job_stat_shards.last_run_at DESC NULLS LAST, job_stat_shards.last_run_id DESC NULLS LAST))[1] AS last_state,
    (array_agg(job_stat_shards.last_duration_ms ORDER BY job_stat_shards.last_run_at DESC NULLS LAST, job_stat_shards.last_run_id DESC NULLS LAST))[1] AS last_duration_ms,
    max(job_stat_shards.last_success_at) AS last_success_at,
    max(job_stat_shards.last_failure_at) AS last_failure_at
   FROM public.job_stat_shards
  GROUP BY job_stat_shards.job_id;

--
-- Name: jobs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.jobs (
    id bigint NOT NULL,
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    kind text NOT NULL,
    spec jsonb DEFAULT '{}'::jsonb NOT NULL,
    parallel boolean DEFAULT false NOT NULL,
    max_concurrency integer,
    overlap text DEFAULT 'skip'::text NOT NULL,
    timeout_secs integer DEFAULT 3600 NOT NULL,
    retry_max_attempts integer DEFAULT 1 NOT NULL,
    retry_backoff_secs integer DEFAULT 10 NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    fence bigint DEFAULT 0 NOT NULL,
    version bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    managed_by text,
    on_executor_lost text DEFAULT 'rerun'::text NOT NULL,
    max_takeovers integer DEFAULT 3 NOT NULL,
    stop_grace_secs integer DEFAULT 10 NOT NULL,
    selector jsonb DEFAULT '{}'::jsonb NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    on_success bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    on_failure bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    on_finish bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    route text DEFAULT 'any'::text NOT NULL,
    shards integer DEFAULT 1 NOT NULL,
    mode text DEFAULT 'batch'::text NOT NULL,
    replicas integer DEFAULT 1 NOT NULL,
    deleted_at timestamp with time zone,
    params_schema jsonb,
    namespace text DEFAULT 'default'::text NOT NULL,
    namespace_capped boolean DEFAULT false NOT NULL,
    pool text,
    pool_slots integer DEFAULT 1 NOT NULL,
    retry_backoff text DEFAULT 'exponential'::text NOT NULL,
    retry_max_secs integer,
    retry_jitter text DEFAULT 'none'::text NOT NULL,
    retry_on jsonb,
    rate jsonb,
    CONSTRAINT jobs_fence_nonnegative CHECK ((fence >= 0)),
    CONSTRAINT jobs_kind_valid CHECK ((kind = ANY (ARRAY['shell'::text, 'http'::text, 'noop'::text, 'sleep'::text]))),
    CONSTRAINT jobs_managed_by_length CHECK (((managed_by IS NULL) OR ((char_length(managed_by) >= 1) AND (char_length(managed_by) <= 100)))),
    CONSTRAINT jobs_max_concurrency_positive CHECK (((max_concurrency IS NULL) OR (max_concurrency >= 1))),
    CONSTRAINT jobs_max_takeovers_range CHECK (((max_takeovers >= 0) AND (max_takeovers <= 100))),
    CONSTRAINT jobs_mode_valid CHECK ((mode = ANY (ARRAY['batch'::text, 'service'::text]))),
    CONSTRAINT jobs_name_length CHECK (((char_length(name) >= 1) AND (char_length(name) <= 200))),
    CONSTRAINT jobs_on_executor_lost_valid CHECK ((on_executor_lost = ANY (ARRAY['rerun'::text, 'fail'::text]))),
    CONSTRAINT jobs_overlap_valid CHECK ((overlap = ANY (ARRAY['skip'::text, 'queue'::text, 'replace'::text, 'buffer_one'::text]))),
    CONSTRAINT jobs_pool_slots_positive CHECK ((pool_slots >= 1)),
    CONSTRAINT jobs_priority_range CHECK (((priority >= '-100'::integer) AND (priority <= 100))),
    CONSTRAINT jobs_rate_valid CHECK (((rate IS NULL) OR ((jsonb_typeof((rate -> 'limit'::text)) = 'number'::text) AND (jsonb_typeof((rate -> 'per_secs'::text)) = 'number'::text) AND (((rate ->> 'limit'::text))::numeric >= (1)::numeric) AND (((rate ->> 'per_secs'::text))::numeric >= (1)::numeric) AND (((rate - 'limit'::text) - 'per_secs'::text) = '{}'::jsonb)))),
    CONSTRAINT jobs_replicas_range CHECK (((replicas >= 1) AND (replicas <= 100))),
    CONSTRAINT jobs_retry_attempts_positive CHECK (((retry_max_attempts >= 1) AND (retry_max_attempts <= 100))),
    CONSTRAINT jobs_retry_backoff_nonnegative CHECK ((retry_backoff_secs >= 0)),
    CONSTRAINT jobs_retry_backoff_valid CHECK ((retry_backoff = ANY (ARRAY['fixed'::text, 'exponential'::text]))),
    CONSTRAINT jobs_retry_jitter_valid CHECK ((retry_jitter = ANY (ARRAY['full'::text, 'none'::text]))),
    CONSTRAINT jobs_retry_max_secs_valid CHECK ((retry_max_secs >= retry_backoff_secs)),
    CONSTRAINT jobs_retry_on_object CHECK ((jsonb_typeof(retry_on) = 'object'::text)),
    CONSTRAINT jobs_route_valid CHECK ((route = ANY (ARRAY['any'::text, 'broadcast'::text, 'shard'::text]))),
    CONSTRAINT jobs_selector_object CHECK ((jsonb_typeof(selector) = 'object'::text)),
    CONSTRAINT jobs_shards_range CHECK (((shards >= 1) AND (shards <= 1000))),
    CONSTRAINT jobs_spec_object CHECK ((jsonb_typeof(spec) = 'object'::text)),
    CONSTRAINT jobs_stop_grace_secs_range CHECK (((stop_grace_secs >= 0) AND (stop_grace_secs <= 3600))),
    CONSTRAINT jobs_timeout_positive CHECK ((timeout_secs > 0)),
    CONSTRAINT jobs_version_positive CHECK ((version >= 1))
);

--
-- Name: jobs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.jobs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: login_failures; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.login_failures (
    id bigint NOT NULL,
    username text NOT NULL,
    address text NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: login_failures_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.login_failures ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.login_failures_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: maintenance_windows; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.maintenance_windows (
    id bigint NOT NULL,
    starts_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone,
    scope jsonb NOT NULL,
    policy text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    stop_running boolean DEFAULT false NOT NULL,
    created_by text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT maintenance_windows_defer_ends CHECK (((policy <> 'defer'::text) OR (ends_at IS NOT NULL))),
    CONSTRAINT maintenance_windows_ordered CHECK (((ends_at IS NULL) OR (ends_at > starts_at))),
    CONSTRAINT maintenance_windows_policy_valid CHECK ((policy = ANY (ARRAY['skip'::text, 'defer'::text]))),
    CONSTRAINT maintenance_windows_reason_length CHECK ((char_length(reason) <= 1000)),
    CONSTRAINT maintenance_windows_scope_object CHECK ((jsonb_typeof(scope) = 'object'::text))
);

--
-- Name: maintenance_windows_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.maintenance_windows ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.maintenance_windows_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: misfires; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.misfires (
    id bigint NOT NULL,
    trigger_id bigint NOT NULL,
    job_id bigint NOT NULL,
    first_instant timestamp with time zone NOT NULL,
    last_instant timestamp with time zone NOT NULL,
    instants bigint NOT NULL,
    policy text NOT NULL,
    reason text NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT misfires_instants_positive CHECK ((instants >= 1)),
    CONSTRAINT misfires_policy_valid CHECK ((policy = ANY (ARRAY['fire_once'::text, 'skip'::text, 'fire_all'::text]))),
    CONSTRAINT misfires_range_ordered CHECK ((last_instant >= first_instant))
);

--
-- Name: misfires_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.misfires ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.misfires_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: namespaces; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.namespaces (
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    max_running integer,
    max_jobs integer,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    running integer DEFAULT 0 NOT NULL,
    CONSTRAINT namespaces_description_length CHECK ((char_length(description) <= 1000)),
    CONSTRAINT namespaces_max_jobs_nonnegative CHECK (((max_jobs IS NULL) OR (max_jobs >= 0))),
    CONSTRAINT namespaces_max_running_positive CHECK (((max_running IS NULL) OR (max_running >= 1))),
    CONSTRAINT namespaces_name_valid CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text))
);

--
-- Name: notifications; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.notifications (
    id bigint NOT NULL,
    delivery_id uuid DEFAULT gen_random_uuid() NOT NULL,
    rule_id bigint,
    channel_id bigint,
    event text NOT NULL,
    job_id bigint,
    run_id bigint,
    suppressed integer DEFAULT 0 NOT NULL,
    payload jsonb NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT notifications_sent_when_sent CHECK (((state = 'sent'::text) = (sent_at IS NOT NULL))),
    CONSTRAINT notifications_state_valid CHECK ((state = ANY (ARRAY['pending'::text, 'sent'::text, 'failed'::text])))
);

--
-- Name: notification_log; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.notification_log AS
 SELECT n.id,
    n.delivery_id,
    n.rule_id,
    alert_rules.name AS rule_name,
    n.channel_id,
    alert_channels.name AS channel_name,
    n.event,
    n.job_id,
    jobs.name AS job_name,
    n.run_id,
    n.suppressed,
    n.state,
    n.attempts,
    n.next_attempt_at,
    n.last_error,
    n.created_at,
    n.sent_at,
    n.payload
   FROM (((public.notifications n
     LEFT JOIN public.alert_rules ON ((alert_rules.id = n.rule_id)))
     LEFT JOIN public.alert_channels ON ((alert_channels.id = n.channel_id)))
     LEFT JOIN public.jobs ON ((jobs.id = n.job_id)));

--
-- Name: notifications_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.notifications ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.notifications_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: oidc_logins; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.oidc_logins (
    binding_hash text NOT NULL,
    state text NOT NULL,
    nonce text NOT NULL,
    pkce_verifier text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: pools; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pools (
    id bigint NOT NULL,
    namespace text DEFAULT 'default'::text NOT NULL,
    name text NOT NULL,
    slots integer NOT NULL,
    used integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    rate jsonb,
    rate_starts timestamp with time zone[] DEFAULT '{}'::timestamp with time zone[] NOT NULL,
    CONSTRAINT pools_name_valid CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text)),
    CONSTRAINT pools_rate_valid CHECK (((rate IS NULL) OR ((jsonb_typeof((rate -> 'limit'::text)) = 'number'::text) AND (jsonb_typeof((rate -> 'per_secs'::text)) = 'number'::text) AND (((rate ->> 'limit'::text))::numeric >= (1)::numeric) AND (((rate ->> 'per_secs'::text))::numeric >= (1)::numeric) AND (((rate - 'limit'::text) - 'per_secs'::text) = '{}'::jsonb)))),
    CONSTRAINT pools_slots_positive CHECK ((slots >= 1))
);

--
-- Name: pools_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.pools ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.pools_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: run_checkpoints; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_checkpoints (
    chain_id bigint NOT NULL,
    run_id bigint NOT NULL,
    job_id bigint NOT NULL,
    fence bigint,
    data bytea NOT NULL,
    saved_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT run_checkpoints_size CHECK ((octet_length(data) <= 65536))
);

--
-- Name: run_inputs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_inputs (
    run_id bigint NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    parent_run_id bigint,
    workflow_run_id bigint,
    step_name text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    rerun_of bigint,
    CONSTRAINT run_inputs_params_object CHECK ((jsonb_typeof(params) = 'object'::text))
);

--
-- Name: COLUMN run_inputs.rerun_of; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.run_inputs.rerun_of IS 'The run this one re-runs (same parameters), if any';

--
-- Name: run_output; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_output (
    run_id bigint NOT NULL,
    byte_offset bigint NOT NULL,
    byte_count integer NOT NULL,
    stream text NOT NULL,
    content text NOT NULL,
    written_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT run_output_span_valid CHECK (((byte_offset >= 0) AND (byte_count > 0))),
    CONSTRAINT run_output_stream_valid CHECK ((stream = ANY (ARRAY['stdout'::text, 'stderr'::text])))
);

--
-- Name: run_outputs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_outputs (
    run_id bigint NOT NULL,
    output jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT run_outputs_object CHECK ((jsonb_typeof(output) = 'object'::text))
);

--
-- Name: run_progress; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_progress (
    run_id bigint NOT NULL,
    percent real,
    message text DEFAULT ''::text NOT NULL,
    reported_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: TABLE run_progress; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON TABLE public.run_progress IS 'The latest progress a running job reported';

--
-- Name: run_waits; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_waits (
    run_id bigint NOT NULL,
    upstream_job_id bigint NOT NULL,
    day_start timestamp with time zone NOT NULL,
    day_end timestamp with time zone NOT NULL,
    deadline timestamp with time zone NOT NULL,
    reason text NOT NULL
);

--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    trigger_id bigint,
    scheduled_at timestamp with time zone NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    first_run_id bigint,
    state text DEFAULT 'queued'::text NOT NULL,
    reason text,
    exclusive boolean DEFAULT false NOT NULL,
    executor_id uuid,
    lock_token text,
    fence bigint,
    queued_at timestamp with time zone DEFAULT now() NOT NULL,
    available_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    exit_code integer,
    http_status integer,
    error text,
    output text,
    output_truncated boolean DEFAULT false NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    trigger_cap integer,
    claim_order timestamp with time zone,
    shard integer,
    shard_total integer,
    pinned_to uuid,
    replica integer,
    quota_namespace text,
    quota_trigger bigint,
    quota_pool bigint,
    quota_pool_slots integer,
    CONSTRAINT runs_attempt_chain CHECK (((attempt = 1) = (first_run_id IS NULL))),
    CONSTRAINT runs_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT runs_finished_when_terminal CHECK (((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text])) OR (finished_at IS NOT NULL))),
    CONSTRAINT runs_http_status_range CHECK (((http_status IS NULL) OR ((http_status >= 100) AND (http_status <= 599)))),
    CONSTRAINT runs_owned_when_active CHECK (((state <> ALL (ARRAY['claimed'::text, 'running'::text])) OR (executor_id IS NOT NULL))),
    CONSTRAINT runs_state_valid CHECK ((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'skipped'::text, 'missed'::text, 'abandoned'::text])))
)
PARTITION BY LIST (state);

--
-- Name: runs_done; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs_done (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    trigger_id bigint,
    scheduled_at timestamp with time zone NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    first_run_id bigint,
    state text DEFAULT 'queued'::text NOT NULL,
    reason text,
    exclusive boolean DEFAULT false NOT NULL,
    executor_id uuid,
    lock_token text,
    fence bigint,
    queued_at timestamp with time zone DEFAULT now() NOT NULL,
    available_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    exit_code integer,
    http_status integer,
    error text,
    output text,
    output_truncated boolean DEFAULT false NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    trigger_cap integer,
    claim_order timestamp with time zone,
    shard integer,
    shard_total integer,
    pinned_to uuid,
    replica integer,
    quota_namespace text,
    quota_trigger bigint,
    quota_pool bigint,
    quota_pool_slots integer,
    CONSTRAINT runs_attempt_chain CHECK (((attempt = 1) = (first_run_id IS NULL))),
    CONSTRAINT runs_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT runs_finished_when_terminal CHECK (((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text])) OR (finished_at IS NOT NULL))),
    CONSTRAINT runs_http_status_range CHECK (((http_status IS NULL) OR ((http_status >= 100) AND (http_status <= 599)))),
    CONSTRAINT runs_owned_when_active CHECK (((state <> ALL (ARRAY['claimed'::text, 'running'::text])) OR (executor_id IS NOT NULL))),
    CONSTRAINT runs_state_valid CHECK ((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'skipped'::text, 'missed'::text, 'abandoned'::text])))
)
PARTITION BY RANGE (scheduled_at);

--
-- Name: runs_done_default; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs_done_default (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    trigger_id bigint,
    scheduled_at timestamp with time zone NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    first_run_id bigint,
    state text DEFAULT 'queued'::text NOT NULL,
    reason text,
    exclusive boolean DEFAULT false NOT NULL,
    executor_id uuid,
    lock_token text,
    fence bigint,
    queued_at timestamp with time zone DEFAULT now() NOT NULL,
    available_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    exit_code integer,
    http_status integer,
    error text,
    output text,
    output_truncated boolean DEFAULT false NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    trigger_cap integer,
    claim_order timestamp with time zone,
    shard integer,
    shard_total integer,
    pinned_to uuid,
    replica integer,
    quota_namespace text,
    quota_trigger bigint,
    quota_pool bigint,
    quota_pool_slots integer,
    CONSTRAINT runs_attempt_chain CHECK (((attempt = 1) = (first_run_id IS NULL))),
    CONSTRAINT runs_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT runs_finished_when_terminal CHECK (((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text])) OR (finished_at IS NOT NULL))),
    CONSTRAINT runs_http_status_range CHECK (((http_status IS NULL) OR ((http_status >= 100) AND (http_status <= 599)))),
    CONSTRAINT runs_owned_when_active CHECK (((state <> ALL (ARRAY['claimed'::text, 'running'::text])) OR (executor_id IS NOT NULL))),
    CONSTRAINT runs_state_valid CHECK ((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'skipped'::text, 'missed'::text, 'abandoned'::text])))
);

--
-- Name: runs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: runs_invalid; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs_invalid (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    trigger_id bigint,
    scheduled_at timestamp with time zone NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    first_run_id bigint,
    state text DEFAULT 'queued'::text NOT NULL,
    reason text,
    exclusive boolean DEFAULT false NOT NULL,
    executor_id uuid,
    lock_token text,
    fence bigint,
    queued_at timestamp with time zone DEFAULT now() NOT NULL,
    available_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    exit_code integer,
    http_status integer,
    error text,
    output text,
    output_truncated boolean DEFAULT false NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    trigger_cap integer,
    claim_order timestamp with time zone,
    shard integer,
    shard_total integer,
    pinned_to uuid,
    replica integer,
    quota_namespace text,
    quota_trigger bigint,
    quota_pool bigint,
    quota_pool_slots integer,
    CONSTRAINT runs_attempt_chain CHECK (((attempt = 1) = (first_run_id IS NULL))),
    CONSTRAINT runs_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT runs_finished_when_terminal CHECK (((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text])) OR (finished_at IS NOT NULL))),
    CONSTRAINT runs_http_status_range CHECK (((http_status IS NULL) OR ((http_status >= 100) AND (http_status <= 599)))),
    CONSTRAINT runs_owned_when_active CHECK (((state <> ALL (ARRAY['claimed'::text, 'running'::text])) OR (executor_id IS NOT NULL))),
    CONSTRAINT runs_state_valid CHECK ((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'skipped'::text, 'missed'::text, 'abandoned'::text])))
);

--
-- Name: runs_live; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs_live (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    trigger_id bigint,
    scheduled_at timestamp with time zone NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    first_run_id bigint,
    state text DEFAULT 'queued'::text NOT NULL,
    reason text,
    exclusive boolean DEFAULT false NOT NULL,
    executor_id uuid,
    lock_token text,
    fence bigint,
    queued_at timestamp with time zone DEFAULT now() NOT NULL,
    available_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_at timestamp with time zone,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    exit_code integer,
    http_status integer,
    error text,
    output text,
    output_truncated boolean DEFAULT false NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    trigger_cap integer,
    claim_order timestamp with time zone,
    shard integer,
    shard_total integer,
    pinned_to uuid,
    replica integer,
    quota_namespace text,
    quota_trigger bigint,
    quota_pool bigint,
    quota_pool_slots integer,
    CONSTRAINT runs_attempt_chain CHECK (((attempt = 1) = (first_run_id IS NULL))),
    CONSTRAINT runs_attempt_positive CHECK ((attempt >= 1)),
    CONSTRAINT runs_finished_when_terminal CHECK (((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text])) OR (finished_at IS NOT NULL))),
    CONSTRAINT runs_http_status_range CHECK (((http_status IS NULL) OR ((http_status >= 100) AND (http_status <= 599)))),
    CONSTRAINT runs_owned_when_active CHECK (((state <> ALL (ARRAY['claimed'::text, 'running'::text])) OR (executor_id IS NOT NULL))),
    CONSTRAINT runs_state_valid CHECK ((state = ANY (ARRAY['queued'::text, 'claimed'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'timed_out'::text, 'cancelled'::text, 'skipped'::text, 'missed'::text, 'abandoned'::text])))
)
WITH (autovacuum_vacuum_scale_factor='0', autovacuum_vacuum_threshold='1000', autovacuum_vacuum_insert_scale_factor='0', autovacuum_vacuum_insert_threshold='1000', autovacuum_analyze_scale_factor='0.05', autovacuum_vacuum_cost_delay='0', fillfactor='80');

--
-- Name: secrets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.secrets (
    name text NOT NULL,
    key_id text NOT NULL,
    nonce bytea NOT NULL,
    ciphertext bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_by text NOT NULL,
    bound boolean DEFAULT false NOT NULL,
    namespace text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT secrets_name_valid CHECK ((name ~ '^[A-Za-z0-9_.-]{1,100}$'::text))
);

--
-- Name: sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sessions (
    id_hash text NOT NULL,
    user_id bigint NOT NULL,
    csrf_token text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL
);

--
-- Name: trigger_webhooks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.trigger_webhooks (
    trigger_id bigint NOT NULL,
    token_digest text NOT NULL,
    signature_header text,
    signature_prefix text DEFAULT ''::text NOT NULL,
    signature_algorithm text,
    secret_key_id text,
    secret_nonce bytea,
    secret_sealed bytea,
    params_from jsonb DEFAULT '{}'::jsonb NOT NULL,
    dedup_header text,
    rate_per_minute integer DEFAULT 60 NOT NULL,
    token_rotated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT trigger_webhooks_algorithm_valid CHECK ((signature_algorithm = 'hmac-sha256'::text)),
    CONSTRAINT trigger_webhooks_params_from_object CHECK ((jsonb_typeof(params_from) = 'object'::text)),
    CONSTRAINT trigger_webhooks_rate_positive CHECK (((rate_per_minute >= 1) AND (rate_per_minute <= 100000))),
    CONSTRAINT trigger_webhooks_signature_whole CHECK ((((signature_header IS NULL) = (signature_algorithm IS NULL)) AND ((signature_header IS NULL) = (secret_sealed IS NULL)) AND ((secret_key_id IS NULL) = (secret_nonce IS NULL)) AND ((secret_nonce IS NULL) = (secret_sealed IS NULL))))
);

--
-- Name: triggers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.triggers (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    kind text NOT NULL,
    cron text,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    interval_secs bigint,
    at timestamp with time zone,
    start_at timestamp with time zone,
    end_at timestamp with time zone,
    misfire text DEFAULT 'fire_once'::text NOT NULL,
    misfire_threshold_secs integer DEFAULT 60 NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    next_fire_at timestamp with time zone,
    last_fired_at timestamp with time zone,
    version bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    max_concurrency integer,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    running integer DEFAULT 0 NOT NULL,
    calendar_id bigint,
    calendar_mode text,
    jitter_secs integer,
    max_fires bigint,
    fires bigint DEFAULT 0 NOT NULL,
    after_job_id bigint,
    after_within_secs integer,
    CONSTRAINT triggers_after_whole CHECK (((after_job_id IS NULL) OR (after_within_secs IS NOT NULL))),
    CONSTRAINT triggers_after_within_positive CHECK (((after_within_secs IS NULL) OR (after_within_secs >= 1))),
    CONSTRAINT triggers_calendar_mode_valid CHECK ((((calendar_id IS NULL) AND (calendar_mode IS NULL)) OR ((calendar_id IS NOT NULL) AND (calendar_mode = ANY (ARRAY['exclude'::text, 'only'::text]))))),
    CONSTRAINT triggers_interval_positive CHECK (((interval_secs IS NULL) OR (interval_secs > 0))),
    CONSTRAINT triggers_jitter_secs_range CHECK (((jitter_secs IS NULL) OR ((jitter_secs >= 1) AND (jitter_secs <= 86400)))),
    CONSTRAINT triggers_kind_fields CHECK ((((kind = 'cron'::text) AND (cron IS NOT NULL) AND (interval_secs IS NULL) AND (at IS NULL)) OR ((kind = 'interval'::text) AND (interval_secs IS NOT NULL) AND (cron IS NULL) AND (at IS NULL)) OR ((kind = 'once'::text) AND (at IS NOT NULL) AND (cron IS NULL) AND (interval_secs IS NULL)) OR ((kind = 'webhook'::text) AND (cron IS NULL) AND (interval_secs IS NULL) AND (at IS NULL)))),
    CONSTRAINT triggers_kind_valid CHECK ((kind = ANY (ARRAY['cron'::text, 'interval'::text, 'once'::text, 'webhook'::text]))),
    CONSTRAINT triggers_max_concurrency_positive CHECK (((max_concurrency IS NULL) OR (max_concurrency >= 1))),
    CONSTRAINT triggers_max_fires_positive CHECK (((max_fires IS NULL) OR (max_fires >= 1))),
    CONSTRAINT triggers_misfire_threshold_positive CHECK ((misfire_threshold_secs > 0)),
    CONSTRAINT triggers_misfire_valid CHECK ((misfire = ANY (ARRAY['fire_once'::text, 'skip'::text, 'fire_all'::text]))),
    CONSTRAINT triggers_params_object CHECK ((jsonb_typeof(params) = 'object'::text)),
    CONSTRAINT triggers_timezone_nonempty CHECK (((char_length(timezone) >= 1) AND (char_length(timezone) <= 64))),
    CONSTRAINT triggers_version_positive CHECK ((version >= 1)),
    CONSTRAINT triggers_webhook_unscheduled CHECK (((kind <> 'webhook'::text) OR (next_fire_at IS NULL))),
    CONSTRAINT triggers_window_ordered CHECK (((start_at IS NULL) OR (end_at IS NULL) OR (end_at > start_at)))
);

--
-- Name: triggers_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.triggers ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.triggers_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: user_roles; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.user_roles (
    user_id bigint NOT NULL,
    namespace text NOT NULL,
    role text NOT NULL,
    CONSTRAINT user_roles_role_valid CHECK ((role = ANY (ARRAY['viewer'::text, 'operator'::text, 'admin'::text])))
);

--
-- Name: users; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.users (
    id bigint NOT NULL,
    username text NOT NULL,
    password_hash text NOT NULL,
    role text NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    password_changed_at timestamp with time zone DEFAULT now() NOT NULL,
    cluster_admin boolean DEFAULT false NOT NULL,
    oidc_issuer text,
    oidc_subject text,
    time_zone text,
    CONSTRAINT users_oidc_identity_whole CHECK (((oidc_issuer IS NULL) = (oidc_subject IS NULL))),
    CONSTRAINT users_role_valid CHECK ((role = ANY (ARRAY['admin'::text, 'operator'::text, 'viewer'::text]))),
    CONSTRAINT users_username_length CHECK (((char_length(username) >= 1) AND (char_length(username) <= 100)))
);

--
-- Name: users_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.users ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: versions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.versions (
    kind text NOT NULL,
    object_id bigint NOT NULL,
    version bigint NOT NULL,
    definition jsonb NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    restored_from bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    job_id bigint GENERATED ALWAYS AS (
CASE
    WHEN (kind = 'job'::text) THEN object_id
    ELSE NULL::bigint
END) STORED,
    workflow_id bigint GENERATED ALWAYS AS (
CASE
    WHEN (kind = 'workflow'::text) THEN object_id
    ELSE NULL::bigint
END) STORED,
    trigger_id bigint GENERATED ALWAYS AS (
CASE
    WHEN (kind = 'trigger'::text) THEN object_id
    ELSE NULL::bigint
END) STORED,
    CONSTRAINT versions_kind_check CHECK ((kind = ANY (ARRAY['job'::text, 'workflow'::text, 'trigger'::text])))
);

--
-- Name: webhook_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.webhook_deliveries (
    id bigint NOT NULL,
    trigger_id bigint NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    delivery_id text,
    outcome text NOT NULL,
    status integer NOT NULL,
    reason text,
    run_id bigint,
    CONSTRAINT webhook_deliveries_outcome_valid CHECK ((outcome = ANY (ARRAY['accepted'::text, 'duplicate'::text, 'refused'::text])))
);

--
-- Name: webhook_deliveries_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.webhook_deliveries ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.webhook_deliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: workflow_run_steps; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workflow_run_steps (
    workflow_run_id bigint NOT NULL,
    name text NOT NULL,
    "position" integer NOT NULL,
    job_id bigint NOT NULL,
    depends_on text[] NOT NULL,
    run_when text NOT NULL,
    params jsonb NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    run_id bigint,
    run_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    output jsonb,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    CONSTRAINT workflow_run_steps_state_valid CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'succeeded'::text, 'failed'::text, 'skipped'::text, 'cancelled'::text])))
);

--
-- Name: workflow_runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workflow_runs (
    id bigint NOT NULL,
    workflow_id bigint NOT NULL,
    state text DEFAULT 'running'::text NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    trigger_id bigint,
    scheduled_at timestamp with time zone,
    CONSTRAINT workflow_runs_finished CHECK (((state = 'running'::text) = (finished_at IS NULL))),
    CONSTRAINT workflow_runs_state_valid CHECK ((state = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'cancelled'::text])))
);

--
-- Name: workflow_runs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.workflow_runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.workflow_runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: workflow_steps; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workflow_steps (
    workflow_id bigint NOT NULL,
    name text NOT NULL,
    "position" integer NOT NULL,
    job_id bigint NOT NULL,
    depends_on text[] DEFAULT '{}'::text[] NOT NULL,
    run_when text DEFAULT 'all_success'::text NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT workflow_steps_params_object CHECK ((jsonb_typeof(params) = 'object'::text)),
    CONSTRAINT workflow_steps_when_valid CHECK ((run_when = ANY (ARRAY['all_success'::text, 'all_done'::text, 'any_failed'::text])))
);

--
-- Name: workflow_triggers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workflow_triggers (
    id bigint NOT NULL,
    workflow_id bigint NOT NULL,
    kind text NOT NULL,
    cron text,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    interval_secs bigint,
    at timestamp with time zone,
    start_at timestamp with time zone,
    end_at timestamp with time zone,
    misfire text DEFAULT 'fire_once'::text NOT NULL,
    misfire_threshold_secs integer DEFAULT 60 NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    next_fire_at timestamp with time zone,
    last_fired_at timestamp with time zone,
    version bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT workflow_triggers_kind_valid CHECK ((kind = ANY (ARRAY['cron'::text, 'interval'::text, 'once'::text]))),
    CONSTRAINT workflow_triggers_misfire_valid CHECK ((misfire = ANY (ARRAY['fire_once'::text, 'skip'::text, 'fire_all'::text]))),
    CONSTRAINT workflow_triggers_params_object CHECK ((jsonb_typeof(params) = 'object'::text))
);

--
-- Name: workflow_triggers_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.workflow_triggers ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.workflow_triggers_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: workflows; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.workflows (
    id bigint NOT NULL,
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    version bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    params_schema jsonb,
    namespace text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT workflows_name_length CHECK (((char_length(name) >= 1) AND (char_length(name) <= 200)))
);

--
-- Name: workflows_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.workflows ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.workflows_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: runs_done; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs ATTACH PARTITION public.runs_done FOR VALUES IN ('succeeded', 'failed', 'timed_out', 'cancelled', 'skipped', 'missed', 'abandoned');

--
-- Name: runs_done_default; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs_done ATTACH PARTITION public.runs_done_default DEFAULT;

--
-- Name: runs_invalid; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs ATTACH PARTITION public.runs_invalid DEFAULT;

--
-- Name: runs_live; Type: TABLE ATTACH; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs ATTACH PARTITION public.runs_live FOR VALUES IN ('queued', 'claimed', 'running');

--
-- Name: alert_channels alert_channels_name_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_channels
    ADD CONSTRAINT alert_channels_name_unique UNIQUE (namespace, name);

--
-- Name: alert_channels alert_channels_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_channels
    ADD CONSTRAINT alert_channels_pkey PRIMARY KEY (id);

--
-- Name: alert_conditions alert_conditions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_conditions
    ADD CONSTRAINT alert_conditions_pkey PRIMARY KEY (rule_id, event, job_id, run_id);

--
-- Name: alert_events alert_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_events
    ADD CONSTRAINT alert_events_pkey PRIMARY KEY (id);

--
-- Name: alert_rule_channels alert_rule_channels_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_rule_channels
    ADD CONSTRAINT alert_rule_channels_pkey PRIMARY KEY (rule_id, channel_id);

--
-- Name: alert_rules alert_rules_name_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_name_unique UNIQUE (namespace, name);

--
-- Name: alert_rules alert_rules_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_pkey PRIMARY KEY (id);

--
-- Name: alert_windows alert_windows_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_windows
    ADD CONSTRAINT alert_windows_pkey PRIMARY KEY (rule_id, job_id, event);

--
-- Name: api_tokens api_tokens_hash_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_hash_unique UNIQUE (token_hash);

--
-- Name: api_tokens api_tokens_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);

--
-- Name: archived_outputs archived_outputs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.archived_outputs
    ADD CONSTRAINT archived_outputs_pkey PRIMARY KEY (run_id);

--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);

--
-- Name: backfills backfills_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.backfills
    ADD CONSTRAINT backfills_pkey PRIMARY KEY (id);

--
-- Name: calendars calendars_name_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.calendars
    ADD CONSTRAINT calendars_name_unique UNIQUE (namespace, name);

--
-- Name: calendars calendars_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.calendars
    ADD CONSTRAINT calendars_pkey PRIMARY KEY (id);

--
-- Name: executors executors_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.executors
    ADD CONSTRAINT executors_pkey PRIMARY KEY (id);

--
-- Name: idempotency_keys idempotency_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (owner, key);

--
-- Name: job_rate_windows job_rate_windows_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_rate_windows
    ADD CONSTRAINT job_rate_windows_pkey PRIMARY KEY (job_id);

--
-- Name: job_stat_shards job_stat_shards_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_stat_shards
    ADD CONSTRAINT job_stat_shards_pkey PRIMARY KEY (job_id, shard);

--
-- Name: jobs jobs_name_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_name_unique UNIQUE (namespace, name);

--
-- Name: jobs jobs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

--
-- Name: login_failures login_failures_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.login_failures
    ADD CONSTRAINT login_failures_pkey PRIMARY KEY (id);

--
-- Name: maintenance_windows maintenance_windows_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.maintenance_windows
    ADD CONSTRAINT maintenance_windows_pkey PRIMARY KEY (id);

--
-- Name: misfires misfires_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.misfires
    ADD CONSTRAINT misfires_pkey PRIMARY KEY (id);

--
-- Name: namespaces namespaces_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.namespaces
    ADD CONSTRAINT namespaces_pkey PRIMARY KEY (name);

--
-- Name: notifications notifications_delivery_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notifications
    ADD CONSTRAINT notifications_delivery_unique UNIQUE (delivery_id);

--
-- Name: notifications notifications_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notifications
    ADD CONSTRAINT notifications_pkey PRIMARY KEY (id);

--
-- Name: oidc_logins oidc_logins_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.oidc_logins
    ADD CONSTRAINT oidc_logins_pkey PRIMARY KEY (binding_hash);

--
-- Name: pools pools_name_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_name_unique UNIQUE (namespace, name);

--
-- Name: pools pools_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_pkey PRIMARY KEY (id);

--
-- Name: run_checkpoints run_checkpoints_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_checkpoints
    ADD CONSTRAINT run_checkpoints_pkey PRIMARY KEY (chain_id);

--
-- Name: run_inputs run_inputs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_inputs
    ADD CONSTRAINT run_inputs_pkey PRIMARY KEY (run_id);

--
-- Name: run_output run_output_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_output
    ADD CONSTRAINT run_output_pkey PRIMARY KEY (run_id, byte_offset);

--
-- Name: run_outputs run_outputs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_outputs
    ADD CONSTRAINT run_outputs_pkey PRIMARY KEY (run_id);

--
-- Name: run_progress run_progress_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_progress
    ADD CONSTRAINT run_progress_pkey PRIMARY KEY (run_id);

--
-- Name: run_waits run_waits_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_waits
    ADD CONSTRAINT run_waits_pkey PRIMARY KEY (run_id);

--
-- Name: secrets secrets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.secrets
    ADD CONSTRAINT secrets_pkey PRIMARY KEY (namespace, name);

--
-- Name: sessions sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (id_hash);

--
-- Name: trigger_webhooks trigger_webhooks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.trigger_webhooks
    ADD CONSTRAINT trigger_webhooks_pkey PRIMARY KEY (trigger_id);

--
-- Name: trigger_webhooks trigger_webhooks_token_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.trigger_webhooks
    ADD CONSTRAINT trigger_webhooks_token_unique UNIQUE (token_digest);

--
-- Name: triggers triggers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.triggers
    ADD CONSTRAINT triggers_pkey PRIMARY KEY (id);

--
-- Name: user_roles user_roles_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.user_roles
    ADD CONSTRAINT user_roles_pkey PRIMARY KEY (user_id, namespace);

--
-- Name: users users_oidc_identity_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_oidc_identity_unique UNIQUE (oidc_issuer, oidc_subject);

--
-- Name: users users_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

--
-- Name: users users_username_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_username_unique UNIQUE (username);

--
-- Name: versions versions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.versions
    ADD CONSTRAINT versions_pkey PRIMARY KEY (kind, object_id, version);

--
-- Name: webhook_deliveries webhook_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id);

--
-- Name: workflow_run_steps workflow_run_steps_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_run_steps
    ADD CONSTRAINT workflow_run_steps_pkey PRIMARY KEY (workflow_run_id, name);

--
-- Name: workflow_runs workflow_runs_instant_once; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_runs
    ADD CONSTRAINT workflow_runs_instant_once UNIQUE (trigger_id, scheduled_at);

--
-- Name: workflow_runs workflow_runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_runs
    ADD CONSTRAINT workflow_runs_pkey PRIMARY KEY (id);

--
-- Name: workflow_steps workflow_steps_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_steps
    ADD CONSTRAINT workflow_steps_pkey PRIMARY KEY (workflow_id, name);

--
-- Name: workflow_triggers workflow_triggers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_triggers
    ADD CONSTRAINT workflow_triggers_pkey PRIMARY KEY (id);

--
-- Name: workflows workflows_name_unique; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflows
    ADD CONSTRAINT workflows_name_unique UNIQUE (namespace, name);

--
-- Name: workflows workflows_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflows
    ADD CONSTRAINT workflows_pkey PRIMARY KEY (id);

--
-- Name: alert_rule_channels_channel; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX alert_rule_channels_channel ON public.alert_rule_channels USING btree (channel_id);

--
-- Name: alert_windows_follow_up; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX alert_windows_follow_up ON public.alert_windows USING btree (closes_at) WHERE (suppressed > 0);

--
-- Name: api_tokens_user; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX api_tokens_user ON public.api_tokens USING btree (user_id);

--
-- Name: audit_log_actor; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_actor ON public.audit_log USING btree (actor, id DESC);

--
-- Name: audit_log_namespace; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_namespace ON public.audit_log USING btree (namespace, id);

--
-- Name: audit_log_newest; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_newest ON public.audit_log USING btree (id DESC);

--
-- Name: audit_log_object; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_object ON public.audit_log USING btree (object_type, object_id, id DESC);

--
-- Name: audit_log_object_name; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_log_object_name ON public.audit_log USING btree (object_name, id DESC);

--
-- Name: backfills_trigger; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX backfills_trigger ON public.backfills USING btree (trigger_id, id DESC);

--
-- Name: backfills_unfinished; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX backfills_unfinished ON public.backfills USING btree (id) WHERE (finished_at IS NULL);

--
-- Name: executors_live_heartbeat; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX executors_live_heartbeat ON public.executors USING btree (last_heartbeat_at) WHERE (state = ANY (ARRAY['alive'::text, 'draining'::text]));

--
-- Name: idempotency_keys_created_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idempotency_keys_created_at ON public.idempotency_keys USING btree (created_at);

--
-- Name: jobs_listed; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_listed ON public.jobs USING btree (name) WHERE (deleted_at IS NULL);

--
-- Name: jobs_pool; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_pool ON public.jobs USING btree (namespace, pool) WHERE (pool IS NOT NULL);

--
-- Name: jobs_with_followers; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX jobs_with_followers ON public.jobs USING btree (id) WHERE ((on_success <> '{}'::bigint[]) OR (on_failure <> '{}'::bigint[]) OR (on_finish <> '{}'::bigint[]));

--
-- Name: login_failures_key; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX login_failures_key ON public.login_failures USING btree (username, address, at);

--
-- Name: maintenance_windows_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX maintenance_windows_open ON public.maintenance_windows USING btree (starts_at) WHERE (ends_at IS NULL);

--
-- Name: misfires_trigger; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX misfires_trigger ON public.misfires USING btree (trigger_id, recorded_at DESC);

--
-- Name: notifications_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX notifications_created ON public.notifications USING btree (created_at);

--
-- Name: notifications_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX notifications_due ON public.notifications USING btree (next_attempt_at) WHERE (state = 'pending'::text);

--
-- Name: notifications_job; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX notifications_job ON public.notifications USING btree (job_id, id DESC);

--
-- Name: notifications_newest; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX notifications_newest ON public.notifications USING btree (id DESC);

--
-- Name: oidc_logins_created_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX oidc_logins_created_at ON public.oidc_logins USING btree (created_at);

--
-- Name: run_checkpoints_job; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX run_checkpoints_job ON public.run_checkpoints USING btree (job_id);

--
-- Name: run_checkpoints_saved_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX run_checkpoints_saved_at ON public.run_checkpoints USING btree (saved_at);

--
-- Name: run_inputs_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX run_inputs_created ON public.run_inputs USING btree (created_at);

--
-- Name: run_output_written_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX run_output_written_at ON public.run_output USING btree (written_at);

--
-- Name: run_outputs_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX run_outputs_created ON public.run_outputs USING btree (created_at);

--
-- Name: runs_active_by_executor; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_active_by_executor ON public.runs_live USING btree (executor_id) WHERE (state = ANY (ARRAY['claimed'::text, 'running'::text]));

--
-- Name: runs_active_by_job; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_active_by_job ON public.runs_live USING btree (job_id) WHERE (state = ANY (ARRAY['claimed'::text, 'running'::text]));

--
-- Name: runs_cancel_requested; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_cancel_requested ON public.runs_live USING btree (executor_id) WHERE ((state = 'running'::text) AND (cancel_requested_at IS NOT NULL));

--
-- Name: runs_chain_attempt; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX runs_chain_attempt ON public.runs_live USING btree (first_run_id, attempt) WHERE (first_run_id IS NOT NULL);

--
-- Name: runs_done_chain; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_chain ON ONLY public.runs_done USING btree (first_run_id) WHERE (first_run_id IS NOT NULL);

--
-- Name: runs_done_default_first_run_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_default_first_run_id_idx ON public.runs_done_default USING btree (first_run_id) WHERE (first_run_id IS NOT NULL);

--
-- Name: runs_id; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_id ON ONLY public.runs USING btree (id);

--
-- Name: runs_done_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_id_idx ON ONLY public.runs_done USING btree (id);

--
-- Name: runs_done_default_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_default_id_idx ON public.runs_done_default USING btree (id);

--
-- Name: runs_failed_newest; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_failed_newest ON ONLY public.runs_done USING btree (id DESC) WHERE (state = ANY (ARRAY['failed'::text, 'timed_out'::text, 'abandoned'::text]));

--
-- Name: runs_done_default_id_idx1; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_default_id_idx1 ON public.runs_done_default USING btree (id DESC) WHERE (state = ANY (ARRAY['failed'::text, 'timed_out'::text, 'abandoned'::text]));

--
-- Name: runs_job_newest; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_job_newest ON ONLY public.runs USING btree (job_id, id DESC) INCLUDE (state, queued_at);

--
-- Name: runs_done_job_id_id_state_queued_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_job_id_id_state_queued_at_idx ON ONLY public.runs_done USING btree (job_id, id DESC) INCLUDE (state, queued_at);

--
-- Name: runs_done_default_job_id_id_state_queued_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_default_job_id_id_state_queued_at_idx ON public.runs_done_default USING btree (job_id, id DESC) INCLUDE (state, queued_at);

--
-- Name: runs_done_replica; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_replica ON ONLY public.runs_done USING btree (job_id, replica, finished_at) WHERE (replica IS NOT NULL);

--
-- Name: runs_done_default_job_id_replica_finished_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_default_job_id_replica_finished_at_idx ON public.runs_done_default USING btree (job_id, replica, finished_at) WHERE (replica IS NOT NULL);

--
-- Name: runs_queued_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_queued_at ON ONLY public.runs USING btree (queued_at);

--
-- Name: runs_done_queued_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_queued_at_idx ON ONLY public.runs_done USING btree (queued_at);

--
-- Name: runs_done_default_queued_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_done_default_queued_at_idx ON public.runs_done_default USING btree (queued_at);

--
-- Name: runs_done_trigger_instant; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX runs_done_trigger_instant ON ONLY public.runs_done USING btree (trigger_id, scheduled_at, COALESCE(shard, '-1'::integer)) WHERE (attempt = 1);

--
-- Name: runs_done_default_trigger_id_scheduled_at_coalesce_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX runs_done_default_trigger_id_scheduled_at_coalesce_idx ON public.runs_done_default USING btree (trigger_id, scheduled_at, COALESCE(shard, '-1'::integer)) WHERE (attempt = 1);

--
-- Name: runs_invalid_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_invalid_id_idx ON public.runs_invalid USING btree (id);

--
-- Name: runs_invalid_job_id_id_state_queued_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_invalid_job_id_id_state_queued_at_idx ON public.runs_invalid USING btree (job_id, id DESC) INCLUDE (state, queued_at);

--
-- Name: runs_invalid_queued_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_invalid_queued_at_idx ON public.runs_invalid USING btree (queued_at);

--
-- Name: runs_live_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_live_id_idx ON public.runs_live USING btree (id);

--
-- Name: runs_live_job_id_id_state_queued_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_live_job_id_id_state_queued_at_idx ON public.runs_live USING btree (job_id, id DESC) INCLUDE (state, queued_at);

--
-- Name: runs_live_queued_at_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_live_queued_at_idx ON public.runs_live USING btree (queued_at);

--
-- Name: runs_one_running_exclusive; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX runs_one_running_exclusive ON public.runs_live USING btree (job_id) WHERE ((state = 'running'::text) AND exclusive);

--
-- Name: runs_pinned; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_pinned ON public.runs_live USING btree (pinned_to) WHERE ((pinned_to IS NOT NULL) AND (state = 'queued'::text));

--
-- Name: runs_queued; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_queued ON public.runs_live USING btree (claim_order, id) WHERE (state = 'queued'::text);

--
-- Name: runs_service_replica; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX runs_service_replica ON public.runs_live USING btree (job_id, replica) WHERE (replica IS NOT NULL);

--
-- Name: runs_trigger_instant; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX runs_trigger_instant ON public.runs_live USING btree (trigger_id, scheduled_at, COALESCE(shard, '-1'::integer)) WHERE ((attempt = 1) AND (trigger_id IS NOT NULL));

--
-- Name: sessions_expires; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sessions_expires ON public.sessions USING btree (expires_at);

--
-- Name: sessions_user; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sessions_user ON public.sessions USING btree (user_id);

--
-- Name: triggers_after_job; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX triggers_after_job ON public.triggers USING btree (after_job_id) WHERE (after_job_id IS NOT NULL);

--
-- Name: triggers_calendar; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX triggers_calendar ON public.triggers USING btree (calendar_id) WHERE (calendar_id IS NOT NULL);

--
-- Name: triggers_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX triggers_due ON public.triggers USING btree (next_fire_at) WHERE ((NOT paused) AND (next_fire_at IS NOT NULL));

--
-- Name: triggers_job; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX triggers_job ON public.triggers USING btree (job_id);

--
-- Name: user_roles_namespace; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX user_roles_namespace ON public.user_roles USING btree (namespace);

--
-- Name: versions_job; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX versions_job ON public.versions USING btree (job_id) WHERE (job_id IS NOT NULL);

--
-- Name: versions_trigger; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX versions_trigger ON public.versions USING btree (trigger_id) WHERE (trigger_id IS NOT NULL);

--
-- Name: versions_workflow; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX versions_workflow ON public.versions USING btree (workflow_id) WHERE (workflow_id IS NOT NULL);

--
-- Name: webhook_deliveries_received; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_received ON public.webhook_deliveries USING btree (received_at);

--
-- Name: webhook_deliveries_trigger; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX webhook_deliveries_trigger ON public.webhook_deliveries USING btree (trigger_id, received_at DESC);

--
-- Name: workflow_run_steps_running; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_run_steps_running ON public.workflow_run_steps USING btree (run_id) WHERE (state = 'running'::text);

--
-- Name: workflow_runs_newest; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_runs_newest ON public.workflow_runs USING btree (workflow_id, id DESC);

--
-- Name: workflow_steps_job; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_steps_job ON public.workflow_steps USING btree (job_id);

--
-- Name: workflow_triggers_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_triggers_due ON public.workflow_triggers USING btree (next_fire_at) WHERE ((NOT paused) AND (next_fire_at IS NOT NULL));

--
-- Name: workflow_triggers_workflow; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX workflow_triggers_workflow ON public.workflow_triggers USING btree (workflow_id);

--
-- Name: runs_done_default_first_run_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_done_chain ATTACH PARTITION public.runs_done_default_first_run_id_idx;

--
-- Name: runs_done_default_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_done_id_idx ATTACH PARTITION public.runs_done_default_id_idx;

--
-- Name: runs_done_default_id_idx1; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_failed_newest ATTACH PARTITION public.runs_done_default_id_idx1;

--
-- Name: runs_done_default_job_id_id_state_queued_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_done_job_id_id_state_queued_at_idx ATTACH PARTITION public.runs_done_default_job_id_id_state_queued_at_idx;

--
-- Name: runs_done_default_job_id_replica_finished_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_done_replica ATTACH PARTITION public.runs_done_default_job_id_replica_finished_at_idx;

--
-- Name: runs_done_default_queued_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_done_queued_at_idx ATTACH PARTITION public.runs_done_default_queued_at_idx;

--
-- Name: runs_done_default_trigger_id_scheduled_at_coalesce_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_done_trigger_instant ATTACH PARTITION public.runs_done_default_trigger_id_scheduled_at_coalesce_idx;

--
-- Name: runs_done_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_id ATTACH PARTITION public.runs_done_id_idx;

--
-- Name: runs_done_job_id_id_state_queued_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_job_newest ATTACH PARTITION public.runs_done_job_id_id_state_queued_at_idx;

--
-- Name: runs_done_queued_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_queued_at ATTACH PARTITION public.runs_done_queued_at_idx;

--
-- Name: runs_invalid_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_id ATTACH PARTITION public.runs_invalid_id_idx;

--
-- Name: runs_invalid_job_id_id_state_queued_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_job_newest ATTACH PARTITION public.runs_invalid_job_id_id_state_queued_at_idx;

--
-- Name: runs_invalid_queued_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_queued_at ATTACH PARTITION public.runs_invalid_queued_at_idx;

--
-- Name: runs_live_id_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_id ATTACH PARTITION public.runs_live_id_idx;

--
-- Name: runs_live_job_id_id_state_queued_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_job_newest ATTACH PARTITION public.runs_live_job_id_id_state_queued_at_idx;

--
-- Name: runs_live_queued_at_idx; Type: INDEX ATTACH; Schema: public; Owner: -
--

ALTER INDEX public.runs_queued_at ATTACH PARTITION public.runs_live_queued_at_idx;

--
-- Name: api_tokens api_tokens_access_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER api_tokens_access_changed AFTER DELETE OR UPDATE OF user_id, token_hash, expires_at, revoked_at, namespaces, role OR TRUNCATE ON public.api_tokens FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_notify_access();

--
-- Name: executors executors_alert_lost; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executors_alert_lost AFTER UPDATE OF state ON public.executors FOR EACH ROW WHEN (((old.state = ANY (ARRAY['alive'::text, 'draining'::text])) AND (new.state = 'dead'::text) AND (new.role = 'executor'::text))) EXECUTE FUNCTION public.probactr_alert_executor_lost();

--
-- Name: executors executors_forget; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER executors_forget AFTER DELETE ON public.executors REFERENCING OLD TABLE AS deleted_executors FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_forget_executor();

--
-- Name: jobs jobs_erase_runs; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_erase_runs AFTER DELETE ON public.jobs REFERENCING OLD TABLE AS erased_jobs FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_erase_job_runs();

--
-- Name: jobs jobs_namespace_capped; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_namespace_capped BEFORE INSERT OR UPDATE OF namespace ON public.jobs FOR EACH ROW EXECUTE FUNCTION public.probactr_namespace_capped();

--
-- Name: jobs jobs_rate_window; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_rate_window AFTER INSERT OR UPDATE OF rate ON public.jobs FOR EACH ROW WHEN ((new.rate IS NOT NULL)) EXECUTE FUNCTION public.probactr_job_rate_window();

--
-- Name: jobs jobs_stats_row; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER jobs_stats_row AFTER INSERT ON public.jobs REFERENCING NEW TABLE AS created_jobs FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_job_stats_created();

--
-- Name: misfires misfires_alert_events; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER misfires_alert_events AFTER INSERT ON public.misfires REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_alert_misfires();

--
-- Name: namespaces namespaces_access_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER namespaces_access_changed AFTER INSERT OR DELETE OR UPDATE OF name OR TRUNCATE ON public.namespaces FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_notify_access();

--
-- Name: namespaces namespaces_capped; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER namespaces_capped BEFORE UPDATE OF max_running ON public.namespaces FOR EACH ROW WHEN ((old.max_running IS DISTINCT FROM new.max_running)) EXECUTE FUNCTION public.probactr_namespace_capped();

--
-- Name: runs runs_advance; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_advance AFTER INSERT ON public.runs REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_runs_advance();

--
-- Name: runs runs_alert_events; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_alert_events AFTER INSERT ON public.runs REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_alert_run_ends();

--
-- Name: runs runs_keys_checked; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_keys_checked AFTER INSERT ON public.runs REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_check_run_keys();

--
-- Name: runs_live runs_live_quota_left; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_live_quota_left AFTER DELETE ON public.runs_live FOR EACH ROW WHEN ((((old.quota_namespace IS NOT NULL) OR (old.quota_trigger IS NOT NULL) OR (old.quota_pool IS NOT NULL)) AND (old.state = ANY (ARRAY['claimed'::text, 'running'::text])))) EXECUTE FUNCTION public.probactr_quota_release();

--
-- Name: runs_live runs_live_quota_requeued; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_live_quota_requeued AFTER UPDATE OF state ON public.runs_live FOR EACH ROW WHEN ((((old.quota_namespace IS NOT NULL) OR (old.quota_trigger IS NOT NULL) OR (old.quota_pool IS NOT NULL)) AND (old.state = ANY (ARRAY['claimed'::text, 'running'::text])) AND (new.state = 'queued'::text))) EXECUTE FUNCTION public.probactr_quota_release();

--
-- Name: runs_live runs_live_reorder; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_live_reorder BEFORE UPDATE OF available_at ON public.runs_live FOR EACH ROW EXECUTE FUNCTION public.probactr_route_live_run();

--
-- Name: runs_live runs_live_route; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_live_route BEFORE INSERT ON public.runs_live FOR EACH ROW WHEN ((new.claim_order IS NULL)) EXECUTE FUNCTION public.probactr_route_live_run();

--
-- Name: runs runs_queued_notify; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_queued_notify AFTER INSERT ON public.runs REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_notify_runs();

--
-- Name: runs runs_stats_inserted; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_stats_inserted AFTER INSERT ON public.runs REFERENCING NEW TABLE AS changed_runs FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_job_stats_count();

--
-- Name: runs runs_stats_updated; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER runs_stats_updated AFTER UPDATE ON public.runs REFERENCING OLD TABLE AS previous_runs NEW TABLE AS changed_runs FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_job_stats_count();

--
-- Name: triggers triggers_capped; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER triggers_capped BEFORE UPDATE OF max_concurrency ON public.triggers FOR EACH ROW WHEN ((old.max_concurrency IS DISTINCT FROM new.max_concurrency)) EXECUTE FUNCTION public.probactr_trigger_capped();

--
-- Name: triggers triggers_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER triggers_changed AFTER INSERT OR DELETE OR UPDATE OF next_fire_at, paused ON public.triggers FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_notify_triggers();

--
-- Name: triggers triggers_forget; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER triggers_forget AFTER DELETE ON public.triggers REFERENCING OLD TABLE AS deleted_triggers FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_forget_trigger();

--
-- Name: user_roles user_roles_access_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER user_roles_access_changed AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON public.user_roles FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_notify_access();

--
-- Name: users users_access_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER users_access_changed AFTER DELETE OR UPDATE OF username, disabled, cluster_admin OR TRUNCATE ON public.users FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_notify_access();

--
-- Name: workflow_triggers workflow_triggers_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER workflow_triggers_changed AFTER INSERT OR DELETE OR UPDATE OF next_fire_at, paused ON public.workflow_triggers FOR EACH STATEMENT EXECUTE FUNCTION public.probactr_notify_triggers();

--
-- Name: alert_channels alert_channels_namespace_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_channels
    ADD CONSTRAINT alert_channels_namespace_fkey FOREIGN KEY (namespace) REFERENCES public.namespaces(name);

--
-- Name: alert_conditions alert_conditions_rule_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_conditions
    ADD CONSTRAINT alert_conditions_rule_id_fkey FOREIGN KEY (rule_id) REFERENCES public.alert_rules(id) ON DELETE CASCADE;

--
-- Name: alert_events alert_events_rule_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_events
    ADD CONSTRAINT alert_events_rule_id_fkey FOREIGN KEY (rule_id) REFERENCES public.alert_rules(id) ON DELETE CASCADE;

--
-- Name: alert_rule_channels alert_rule_channels_channel_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_rule_channels
    ADD CONSTRAINT alert_rule_channels_channel_id_fkey FOREIGN KEY (channel_id) REFERENCES public.alert_channels(id) ON DELETE RESTRICT;

--
-- Name: alert_rule_channels alert_rule_channels_rule_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_rule_channels
    ADD CONSTRAINT alert_rule_channels_rule_id_fkey FOREIGN KEY (rule_id) REFERENCES public.alert_rules(id) ON DELETE CASCADE;

--
-- Name: alert_rules alert_rules_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

--
-- Name: alert_rules alert_rules_namespace_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_rules
    ADD CONSTRAINT alert_rules_namespace_fkey FOREIGN KEY (namespace) REFERENCES public.namespaces(name);

--
-- Name: alert_windows alert_windows_rule_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alert_windows
    ADD CONSTRAINT alert_windows_rule_id_fkey FOREIGN KEY (rule_id) REFERENCES public.alert_rules(id) ON DELETE CASCADE;

--
-- Name: api_tokens api_tokens_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

--
-- Name: audit_log audit_log_actor_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES public.users(id) ON DELETE SET NULL;

--
-- Name: backfills backfills_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.backfills
    ADD CONSTRAINT backfills_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

--
-- Name: backfills backfills_trigger_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.backfills
    ADD CONSTRAINT backfills_trigger_id_fkey FOREIGN KEY (trigger_id) REFERENCES public.triggers(id) ON DELETE CASCADE;

--
-- Name: calendars calendars_namespace_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.calendars
    ADD CONSTRAINT calendars_namespace_fkey FOREIGN KEY (namespace) REFERENCES public.namespaces(name);

--
-- Name: job_rate_windows job_rate_windows_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_rate_windows
    ADD CONSTRAINT job_rate_windows_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

--
-- Name: job_stat_shards job_stats_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_stat_shards
    ADD CONSTRAINT job_stats_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

--
-- Name: jobs jobs_namespace_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_namespace_fkey FOREIGN KEY (namespace) REFERENCES public.namespaces(name);

--
-- Name: jobs jobs_pool_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.jobs
    ADD CONSTRAINT jobs_pool_fkey FOREIGN KEY (namespace, pool) REFERENCES public.pools(namespace, name);

--
-- Name: misfires misfires_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.misfires
    ADD CONSTRAINT misfires_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

--
-- Name: misfires misfires_trigger_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.misfires
    ADD CONSTRAINT misfires_trigger_id_fkey FOREIGN KEY (trigger_id) REFERENCES public.triggers(id) ON DELETE CASCADE;

--
-- Name: notifications notifications_channel_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notifications
    ADD CONSTRAINT notifications_channel_id_fkey FOREIGN KEY (channel_id) REFERENCES public.alert_channels(id) ON DELETE CASCADE;

--
-- Name: notifications notifications_rule_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.notifications
    ADD CONSTRAINT notifications_rule_id_fkey FOREIGN KEY (rule_id) REFERENCES public.alert_rules(id) ON DELETE SET NULL;

--
-- Name: pools pools_namespace_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_namespace_fkey FOREIGN KEY (namespace) REFERENCES public.namespaces(name);

--
-- Name: run_checkpoints run_checkpoints_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_checkpoints
    ADD CONSTRAINT run_checkpoints_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

--
-- Name: secrets secrets_namespace_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.secrets
    ADD CONSTRAINT secrets_namespace_fkey FOREIGN KEY (namespace) REFERENCES public.namespaces(name);

--
-- Name: sessions sessions_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

--
-- Name: trigger_webhooks trigger_webhooks_trigger_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.trigger_webhooks
    ADD CONSTRAINT trigger_webhooks_trigger_id_fkey FOREIGN KEY (trigger_id) REFERENCES public.triggers(id) ON DELETE CASCADE;

--
-- Name: triggers triggers_after_job; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.triggers
    ADD CONSTRAINT triggers_after_job FOREIGN KEY (after_job_id) REFERENCES public.jobs(id) ON DELETE SET NULL;

--
-- Name: triggers triggers_calendar_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.triggers
    ADD CONSTRAINT triggers_calendar_id_fkey FOREIGN KEY (calendar_id) REFERENCES public.calendars(id);

--
-- Name: triggers triggers_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.triggers
    ADD CONSTRAINT triggers_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

--
-- Name: user_roles user_roles_namespace_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.user_roles
    ADD CONSTRAINT user_roles_namespace_fkey FOREIGN KEY (namespace) REFERENCES public.namespaces(name) ON DELETE CASCADE;

--
-- Name: user_roles user_roles_user_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.user_roles
    ADD CONSTRAINT user_roles_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

--
-- Name: versions versions_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.versions
    ADD CONSTRAINT versions_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE CASCADE;

--
-- Name: versions versions_trigger_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.versions
    ADD CONSTRAINT versions_trigger_id_fkey FOREIGN KEY (trigger_id) REFERENCES public.triggers(id) ON DELETE CASCADE;

--
-- Name: versions versions_workflow_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.versions
    ADD CONSTRAINT versions_workflow_id_fkey FOREIGN KEY (workflow_id) REFERENCES public.workflows(id) ON DELETE CASCADE;

--
-- Name: webhook_deliveries webhook_deliveries_trigger_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_trigger_id_fkey FOREIGN KEY (trigger_id) REFERENCES public.triggers(id) ON DELETE CASCADE;

--
-- Name: workflow_run_steps workflow_run_steps_workflow_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_run_steps
    ADD CONSTRAINT workflow_run_steps_workflow_run_id_fkey FOREIGN KEY (workflow_run_id) REFERENCES public.workflow_runs(id) ON DELETE CASCADE;

--
-- Name: workflow_runs workflow_runs_trigger_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_runs
    ADD CONSTRAINT workflow_runs_trigger_id_fkey FOREIGN KEY (trigger_id) REFERENCES public.workflow_triggers(id) ON DELETE SET NULL;

--
-- Name: workflow_runs workflow_runs_workflow_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_runs
    ADD CONSTRAINT workflow_runs_workflow_id_fkey FOREIGN KEY (workflow_id) REFERENCES public.workflows(id) ON DELETE CASCADE;

--
-- Name: workflow_steps workflow_steps_job_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_steps
    ADD CONSTRAINT workflow_steps_job_id_fkey FOREIGN KEY (job_id) REFERENCES public.jobs(id) ON DELETE RESTRICT;

--
-- Name: workflow_steps workflow_steps_workflow_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_steps
    ADD CONSTRAINT workflow_steps_workflow_id_fkey FOREIGN KEY (workflow_id) REFERENCES public.workflows(id) ON DELETE CASCADE;

--
-- Name: workflow_triggers workflow_triggers_workflow_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflow_triggers
    ADD CONSTRAINT workflow_triggers_workflow_id_fkey FOREIGN KEY (workflow_id) REFERENCES public.workflows(id) ON DELETE CASCADE;

--
-- Name: workflows workflows_namespace_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.workflows
    ADD CONSTRAINT workflows_namespace_fkey FOREIGN KEY (namespace) REFERENCES public.namespaces(name);
