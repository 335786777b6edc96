//! Alerting's tables: channels and rules (what operators configure), the outbox of events
//! and its throttle windows and raised conditions (what monitors turn into messages), and
//! the delivery log (`notifications`).
//!
//! Events caused by a state change are written by triggers of migration
//! `20261124000005_alerts.sql` in the transaction of the change; the rest of the pipeline
//! is here, one statement per function, and run by monitors (`probactr_monitor::alerts`).

pub mod channels;
pub mod conditions;
pub mod notifications;
pub mod outbox;
pub mod rules;

/// Channel notified when a notification is queued for delivery (a test message, a new
/// alert): monitors wake up instead of waiting for their next tick.
pub const NOTIFICATIONS_CHANNEL: &str = "probactr_notifications";
