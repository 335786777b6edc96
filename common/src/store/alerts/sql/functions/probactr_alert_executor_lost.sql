-- probactr_alert_executor_lost: current body (first defined in 20261124000005_alerts.sql).
--
-- Executors declared dead by a monitor.
CREATE OR REPLACE FUNCTION probactr_alert_executor_lost() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE TRIGGER executors_alert_lost
    AFTER UPDATE OF state ON executors
    FOR EACH ROW
    WHEN (OLD.state IN ('alive', 'draining') AND NEW.state = 'dead' AND NEW.role = 'executor')
    EXECUTE FUNCTION probactr_alert_executor_lost();
