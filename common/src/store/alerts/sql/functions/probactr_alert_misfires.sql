-- probactr_alert_misfires: current body (first defined in 20261124000005_alerts.sql, last in 2026112602000002_paused_instants.sql).
--
-- Instants that passed while a trigger or its job was paused are recorded as misfires
-- with the reason 'paused' when it is resumed (the ledger shows them skipped). Pausing
-- is deliberate: they raise no `fire_missed` alert; nor do the instants a calendar or a
-- maintenance window skips (reasons 'calendar …', 'maintenance…': see
-- `maintenance::is_deliberate` in the common crate).
CREATE OR REPLACE FUNCTION probactr_alert_misfires() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE TRIGGER misfires_alert_events
    AFTER INSERT ON misfires
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION probactr_alert_misfires();
