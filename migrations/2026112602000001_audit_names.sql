-- The audit log names the object it speaks of, as it was named then (a job, user or
-- channel by its name; a trigger or run by its job's name), so entries stay readable
-- after the object is renamed or deleted; and it is filtered by who acted.
ALTER TABLE audit_log ADD COLUMN object_name TEXT;

UPDATE audit_log SET object_name = COALESCE(
    after ->> 'name', before ->> 'name', after ->> 'username', before ->> 'username',
    (SELECT jobs.name FROM jobs
      WHERE jsonb_typeof(COALESCE(audit_log.after, audit_log.before) -> 'job_id') = 'number'
        AND jobs.id = (COALESCE(audit_log.after, audit_log.before) ->> 'job_id')::bigint));

CREATE INDEX audit_log_actor ON audit_log (actor, id DESC);
CREATE INDEX audit_log_object_name ON audit_log (object_name, id DESC);
