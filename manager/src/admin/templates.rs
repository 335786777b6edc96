//! The admin's templates, compiled into the binary, rendered by minijinja with HTML
//! auto-escaping (every template name ends in `.html`, which switches it on): a job
//! named `<script>` shows as text. Besides the built-in filters there are `dt` (an RFC 3339
//! time as `YYYY-MM-DD HH:MM:SS UTC`; `static/app.js` rewrites it in the viewer's zone)
//! and `truncate`.

use chrono::DateTime;
use minijinja::Environment;

/// Every template, by name.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("../../templates/base.html")),
    ("macros.html", include_str!("../../templates/macros.html")),
    ("login.html", include_str!("../../templates/login.html")),
    ("dashboard.html", include_str!("../../templates/dashboard.html")),
    ("jobs.html", include_str!("../../templates/jobs.html")),
    ("job.html", include_str!("../../templates/job.html")),
    ("job_form.html", include_str!("../../templates/job_form.html")),
    (
        "trigger_form.html",
        include_str!("../../templates/trigger_form.html"),
    ),
    ("runs.html", include_str!("../../templates/runs.html")),
    ("workflows.html", include_str!("../../templates/workflows.html")),
    ("workflow.html", include_str!("../../templates/workflow.html")),
    (
        "workflow_form.html",
        include_str!("../../templates/workflow_form.html"),
    ),
    (
        "workflow_trigger_form.html",
        include_str!("../../templates/workflow_trigger_form.html"),
    ),
    ("run.html", include_str!("../../templates/run.html")),
    ("executors.html", include_str!("../../templates/executors.html")),
    ("audit.html", include_str!("../../templates/audit.html")),
    ("pools.html", include_str!("../../templates/pools.html")),
    ("secrets.html", include_str!("../../templates/secrets.html")),
    ("namespaces.html", include_str!("../../templates/namespaces.html")),
    ("alerts.html", include_str!("../../templates/alerts.html")),
    (
        "notifications.html",
        include_str!("../../templates/notifications.html"),
    ),
    ("ledger.html", include_str!("../../templates/ledger.html")),
    (
        "definitions.html",
        include_str!("../../templates/definitions.html"),
    ),
    ("run_rows.html", include_str!("../../templates/run_rows.html")),
    ("users.html", include_str!("../../templates/users.html")),
    ("account.html", include_str!("../../templates/account.html")),
];

/// The environment with every template and the `dt` filter.
pub fn environment() -> anyhow::Result<Environment<'static>> {
    let mut env = Environment::new();
    for (name, source) in TEMPLATES {
        env.add_template(name, source)?;
    }
    env.add_filter("dt", format_time);
    env.add_filter("truncate", truncate);
    Ok(env)
}

/// `2026-11-21T10:30:00.123Z` → `2026-11-21 10:30:00 UTC`; other text is left alone.
fn format_time(value: String) -> String {
    match DateTime::parse_from_rfc3339(&value) {
        Ok(at) => at.naive_utc().format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        Err(_) => value,
    }
}

/// The first `max` characters of `value`, with an ellipsis when cut.
fn truncate(value: String, max: usize) -> String {
    if value.chars().count() <= max {
        value
    } else {
        let mut cut: String = value.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_compiles() {
        assert!(environment().is_ok());
        assert_eq!(
            format_time("2026-11-21T10:30:00.5+00:00".into()),
            "2026-11-21 10:30:00 UTC"
        );
        assert_eq!(format_time("never".into()), "never");
        assert_eq!(truncate("abcdef".into(), 4), "abc…");
        assert_eq!(truncate("abc".into(), 4), "abc");
    }
}
