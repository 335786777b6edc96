-- Alert rules may listen for `capacity_shortfall`: the capacity forecast sees, within the
-- rule's `duration_secs` ahead, a bucket whose demand exceeds the live executors'.
ALTER TABLE alert_rules DROP CONSTRAINT alert_rules_events_valid;
ALTER TABLE alert_rules ADD CONSTRAINT alert_rules_events_valid CHECK (cardinality(events) >= 1 AND events <@ ARRAY[
    'run_failed', 'run_timed_out', 'run_abandoned', 'fire_missed', 'consecutive_failures',
    'run_too_long', 'no_success_within', 'executor_lost', 'no_executor', 'recovered',
    'capacity_shortfall']);
