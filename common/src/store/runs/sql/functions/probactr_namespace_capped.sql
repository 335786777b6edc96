-- probactr_namespace_capped: current body (first defined with migration 2026120102000001).
--
-- Keeps `jobs.namespace_capped` (whether the job's namespace has a `max_running`) true to
-- the namespaces: a job takes it from its namespace when created or moved; a namespace
-- gaining or losing its quota sets it on all of its jobs. A namespace gaining a quota also
-- counts the runs of its jobs already claimed or running, so that the quota holds from
-- then on (they give their places back as they end, like the runs the claim counts).
CREATE OR REPLACE FUNCTION probactr_namespace_capped() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE TRIGGER jobs_namespace_capped
    BEFORE INSERT OR UPDATE OF namespace ON jobs
    FOR EACH ROW EXECUTE FUNCTION probactr_namespace_capped();

CREATE OR REPLACE TRIGGER namespaces_capped
    BEFORE UPDATE OF max_running ON namespaces
    FOR EACH ROW WHEN (OLD.max_running IS DISTINCT FROM NEW.max_running)
    EXECUTE FUNCTION probactr_namespace_capped();
