-- The wrk benchmark's data (see run.sh): 300 jobs with a trigger each and 100,000 ended
-- runs over the last week, 40% of them of one chatty job.

INSERT INTO jobs (name, description, kind, spec)
SELECT format('job-%s', lpad(i::text, 4, '0')), format('benchmark job number %s', i), 'noop', '{}'::jsonb
FROM generate_series(1, 300) AS i;

INSERT INTO triggers (job_id, kind, interval_secs, next_fire_at)
SELECT id, 'interval', 60 + id, now() + make_interval(secs => id * 7)
FROM jobs;

INSERT INTO runs (job_id, trigger_id, scheduled_at, state, queued_at, available_at, started_at, finished_at,
                  exit_code, error, output)
SELECT j.job_id, t.id, r.at, r.state, r.at, r.at, r.at, r.at + interval '2 seconds',
       CASE WHEN r.state = 'succeeded' THEN 0 WHEN r.state = 'failed' THEN 1 END,
       CASE WHEN r.state = 'failed' THEN 'exited with code 1' END,
       CASE WHEN r.state IN ('succeeded', 'failed') THEN repeat('some output line\n', 20) END
FROM (
    SELECT n,
           now() - make_interval(secs => (100000 - n) * 6.048) AS at,
           CASE WHEN random() < 0.02 THEN 'failed' WHEN random() < 0.03 THEN 'skipped' ELSE 'succeeded' END AS state
    FROM generate_series(1, 100000) AS n
) AS r
CROSS JOIN LATERAL (
    SELECT CASE WHEN random() < 0.4 THEN 1 ELSE 2 + floor(random() * 299)::int + (r.n * 0) END AS job_id -- r.n: per row
) AS j
JOIN triggers t ON t.job_id = j.job_id
ORDER BY r.n;
VACUUM ANALYZE jobs, triggers, runs;
SELECT count(*) AS runs, count(DISTINCT job_id) AS jobs,
       count(*) FILTER (WHERE queued_at > now() - interval '1 hour') AS last_hour
FROM runs;
