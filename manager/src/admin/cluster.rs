//! The dashboard, the cluster page and the audit log page.

use axum::extract::State;
use axum::response::Html;
use minijinja::context;
use probactr_common::model::ProcessRole;
use serde::Serialize;

use super::{render, AdminError, AdminUser, Pager};
use crate::db::{self, jobs::JobFilter};
use crate::error::FieldErrors;
use crate::input::{check, Page, QueryParams};
use crate::state::AppState;

/// One bar of the runs-per-minute chart: the count, and its height in tenths of the peak.
#[derive(Debug, Clone, Serialize)]
struct Bar {
    count: i64,
    level: i64,
}

fn bars(per_minute: &[i64]) -> (Vec<Bar>, i64) {
    let peak = per_minute.iter().copied().max().unwrap_or(0);
    let bars = per_minute
        .iter()
        .map(|&count| Bar {
            count,
            level: if peak == 0 {
                0
            } else {
                (count * 10 + peak - 1) / peak
            },
        })
        .collect();
    (bars, peak)
}

/// `GET /`.
pub async fn dashboard(State(state): State<AppState>, user: AdminUser) -> Result<Html<String>, AdminError> {
    let status = db::cluster::status(&state.pool).await?;
    let (_, jobs_total) =
        db::jobs::list(&state.pool, &JobFilter::default(), Page { limit: 1, offset: 0 }).await?;
    let runs_last_hour: i64 = status.runs_last_hour.values().sum();
    let failures_last_hour: i64 = ["failed", "timed_out", "abandoned"]
        .iter()
        .filter_map(|s| status.runs_last_hour.get(*s))
        .sum();
    let (spark, peak) = bars(&status.runs_per_minute);
    let executors = status.processes.get(ProcessRole::Executor.as_str());
    let executors_alive = executors.and_then(|e| e.get("alive")).copied().unwrap_or(0);
    let executors_dead = executors.and_then(|e| e.get("dead")).copied().unwrap_or(0);
    let ctx = context! {
        status, jobs_total, runs_last_hour, failures_last_hour, spark, peak, executors_alive, executors_dead,
        ..user.layout("dashboard")
    };
    render(&state, "dashboard.html", ctx)
}

/// `GET /executors`: executors and monitors.
pub async fn executors(State(state): State<AppState>, user: AdminUser) -> Result<Html<String>, AdminError> {
    let executors = db::cluster::processes(&state.pool, ProcessRole::Executor).await?;
    let monitors = db::cluster::processes(&state.pool, ProcessRole::Monitor).await?;
    render(
        &state,
        "executors.html",
        context! { executors, monitors, ..user.layout("executors") },
    )
}

/// `GET /audit` (admin).
pub async fn audit(
    State(state): State<AppState>,
    user: AdminUser,
    query: QueryParams,
) -> Result<Html<String>, AdminError> {
    user.0.require(user.0.role.is_admin(), "read the audit log")?;
    let mut errors = FieldErrors::new();
    let page = query.page(&mut errors);
    check(errors)?;
    let (items, total) = db::audit::list(&state.pool, None, page).await?;
    let pager = Pager::new(page, items.len(), total);
    let entries = crate::service::Paged { items, total };
    render(
        &state,
        "audit.html",
        context! { entries, page => pager, page_base => "/audit?", ..user.layout("audit") },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_peak() {
        let (bars, peak) = bars(&[0, 5, 10, 1]);
        assert_eq!(peak, 10);
        assert_eq!(bars.iter().map(|b| b.level).collect::<Vec<_>>(), [0, 5, 10, 1]);
        assert!(super::bars(&[0, 0]).0.iter().all(|b| b.level == 0));
    }
}
