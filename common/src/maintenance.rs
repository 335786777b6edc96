//! Maintenance windows: spans of time in which some or all jobs' instants do not run.
//!
//! A window covers `[starts_at, ends_at)` (an open end: until it is ended, as a cluster
//! pause is) and a scope: every job, jobs by name, or jobs matching a selector (their
//! namespace, their executor selector).
//! Its policy says what becomes of the instants it covers:
//!
//! - `skip`: each is recorded as skipped, with a reason naming the window's;
//! - `defer`: each is recorded as skipped (deferred), and the trigger fires once when
//!   the window ends (its next instant is moved to the window's end).
//!
//! The firing applies windows to due instants ([`Coverage::of`]); the forecast marks the
//! instants they cover.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The prefix of every reason a maintenance window gives for skipping an instant.
pub const MAINTENANCE_REASON_PREFIX: &str = "maintenance";

/// Which jobs a window covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum Scope {
    /// Every job: `{"all": true}`.
    All {
        /// Always true.
        all: bool,
    },
    /// Jobs by name: `{"jobs": ["nightly-report"]}`.
    Jobs {
        /// Their names (in any namespace).
        jobs: Vec<String>,
    },
    /// Jobs matching every pair: `{"selector": {"zone": "eu"}}`. The key `namespace`
    /// matches the job's namespace; any other pair must be in the job's own executor
    /// selector (the jobs that run on the executors so labelled).
    Selector {
        /// Key → value.
        selector: BTreeMap<String, String>,
    },
}

/// What a window does with the instants it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Record them skipped.
    Skip,
    /// Record them skipped and fire once when the window ends.
    Defer,
}

impl Policy {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Skip => "skip",
            Policy::Defer => "defer",
        }
    }
}

/// A maintenance window.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Window {
    /// Its id.
    pub id: i64,
    /// When it is open, over which jobs, and what it does to them.
    #[serde(flatten)]
    pub plan: WindowPlan,
    /// Who created it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
}

/// What a window is, as it is opened: its span, its jobs and its policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WindowPlan {
    /// Its start (inclusive).
    pub from: DateTime<Utc>,
    /// Its end (exclusive); None: until ended.
    pub until: Option<DateTime<Utc>>,
    /// The jobs it covers.
    pub scope: Scope,
    /// skip or defer.
    pub policy: Policy,
    /// Why, shown in the reason of each instant it covers.
    pub reason: String,
    /// Whether the runs running in its scope when it was opened were stopped.
    pub stop_running: bool,
}

/// What a window needs to know of a job.
#[derive(Debug, Clone, Copy)]
pub struct JobFacts<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its executor selector (label → value).
    pub selector: &'a serde_json::Value,
}

/// [`JobFacts`], owned (as read from the store).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedJobFacts {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its executor selector.
    pub selector: serde_json::Value,
}

impl OwnedJobFacts {
    /// Borrowed.
    pub fn facts(&self) -> JobFacts<'_> {
        JobFacts {
            name: &self.name,
            namespace: &self.namespace,
            selector: &self.selector,
        }
    }
}

impl Window {
    /// Whether the window is open at `instant`.
    pub fn covers(&self, instant: DateTime<Utc>) -> bool {
        self.plan.from <= instant && self.plan.until.is_none_or(|until| instant < until)
    }

    /// Whether the window applies to the job (None: the job is not known, which only
    /// an `all` window covers).
    pub fn applies_to(&self, job: Option<JobFacts<'_>>) -> bool {
        match (&self.plan.scope, job) {
            (Scope::All { .. }, _) => true,
            (_, None) => false,
            (Scope::Jobs { jobs }, Some(job)) => jobs.iter().any(|name| name == job.name),
            (Scope::Selector { selector }, Some(job)) => selector.iter().all(|(key, value)| {
                if key == "namespace" {
                    job.namespace == value
                } else {
                    job.selector.get(key).and_then(|v| v.as_str()) == Some(value)
                }
            }),
        }
    }

    /// The reason recorded on the instants it covers.
    pub fn reason_text(&self) -> String {
        let what = match self.plan.policy {
            Policy::Skip => MAINTENANCE_REASON_PREFIX.to_owned(),
            Policy::Defer => format!("{MAINTENANCE_REASON_PREFIX} (deferred to its end)"),
        };
        if self.plan.reason.is_empty() {
            format!("{what}: window {}", self.id)
        } else {
            format!("{what}: {}", self.plan.reason)
        }
    }

    /// Whether the window needs to know a job's name, namespace or selector.
    pub fn needs_job_facts(&self) -> bool {
        !matches!(self.plan.scope, Scope::All { .. })
    }
}

/// The first window among `windows` that covers `instant` for the job, if any.
pub fn covering<'w>(
    windows: &'w [Window],
    instant: DateTime<Utc>,
    job: Option<JobFacts<'_>>,
) -> Option<&'w Window> {
    windows
        .iter()
        .find(|window| window.covers(instant) && window.applies_to(job))
}

/// Why an instant of a trigger does not run.
#[derive(Debug, Clone, Copy)]
pub enum Held<'a> {
    /// A maintenance window covers it.
    Maintenance(&'a Window),
    /// The trigger's calendar excludes it.
    Calendar(&'a crate::calendar::CalendarRule),
}

impl Held<'_> {
    /// The reason recorded on it (the ledger shows the instant skipped with it).
    pub fn reason(&self) -> String {
        match self {
            Held::Maintenance(window) => window.reason_text(),
            Held::Calendar(rule) => rule.reason(),
        }
    }

    /// Where a deferring window moves the trigger's next firing: its end.
    pub fn deferred_to(&self) -> Option<DateTime<Utc>> {
        match self {
            Held::Maintenance(window) if window.plan.policy == Policy::Defer => window.plan.until,
            _ => None,
        }
    }
}

/// Whether `instant` of a trigger runs: a window covering it (for its job) holds it back
/// first, then the trigger's calendar rule, if it has one.
pub fn held<'a>(
    instant: DateTime<Utc>,
    job: Option<JobFacts<'_>>,
    windows: &'a [Window],
    calendar: Option<&'a crate::calendar::CalendarRule>,
) -> Option<Held<'a>> {
    if let Some(window) = covering(windows, instant, job) {
        return Some(Held::Maintenance(window));
    }
    calendar.filter(|rule| rule.excludes(instant)).map(Held::Calendar)
}

/// Whether a recorded reason says an instant was skipped on purpose (a pause, a
/// calendar, a maintenance window) rather than missed: no alert, not counted missed.
pub fn is_deliberate(reason: &str) -> bool {
    reason == crate::ledger::PAUSED_REASON
        || reason.starts_with(crate::calendar::CALENDAR_REASON_PREFIX)
        || reason.starts_with(MAINTENANCE_REASON_PREFIX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn window(scope: serde_json::Value, until: Option<i64>) -> Window {
        Window {
            id: 1,
            plan: WindowPlan {
                from: at(100),
                until: until.map(at),
                scope: serde_json::from_value(scope).unwrap(),
                policy: Policy::Skip,
                reason: "db upgrade".into(),
                stop_running: false,
            },
            created_by: "admin".into(),
            created_at: at(0),
        }
    }

    #[test]
    fn a_window_covers_its_span_and_scope() {
        let selector = json!({"team": "billing"});
        let job = Some(JobFacts {
            name: "report",
            namespace: "finance",
            selector: &selector,
        });
        let all = window(json!({"all": true}), Some(200));
        assert!(!all.covers(at(99)) && all.covers(at(100)) && all.covers(at(199)) && !all.covers(at(200)));
        assert!(all.applies_to(None));
        assert!(window(json!({"jobs": ["report"]}), None).applies_to(job));
        assert!(!window(json!({"jobs": ["other"]}), None).applies_to(job));
        assert!(window(json!({"selector": {"team": "billing"}}), None).applies_to(job));
        assert!(!window(json!({"selector": {"team": "ops"}}), None).applies_to(job));
        assert!(window(json!({"selector": {"namespace": "finance"}}), None).applies_to(job));
        assert!(!window(json!({"selector": {"namespace": "hr"}}), None).applies_to(job));
        let open = window(json!({"all": true}), None);
        assert!(open.covers(at(1_000_000)));
        assert_eq!(open.reason_text(), "maintenance: db upgrade");
    }
}
