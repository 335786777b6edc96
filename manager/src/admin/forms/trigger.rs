//! The trigger form, read into a [`TriggerDraft`] or [`TriggerPatch`].

use probactr_common::model::TriggerKind;

use super::FormData;
use crate::command::trigger::ExtrasDraft;
use crate::command::{TriggerDraft, TriggerPatch};
use crate::error::FieldErrors;

/// The command of a trigger form: only the chosen kind's own field is given (the others
/// as null).
pub fn trigger_draft(form: &FormData) -> TriggerDraft {
    let mut problems = FieldErrors::new();
    let kind_text = form.filled("kind").unwrap_or("");
    let kind = match form.filled("kind") {
        None => Some(None),
        Some(_) => form.choice::<TriggerKind>("kind", &mut problems),
    };
    let own = |name: &str| kind_text == name;
    let mut draft = TriggerDraft {
        kind,
        cron: Some(form.filled("cron").filter(|_| own("cron")).map(str::to_owned)),
        timezone: Some(Some(form.filled("timezone").unwrap_or("UTC").to_owned())),
        interval_secs: if own("interval") {
            form.whole_or_null("interval_secs", &mut problems)
        } else {
            Some(None)
        },
        at: if own("once") {
            form.time("at", &mut problems)
        } else {
            Some(None)
        },
        start_at: form.time("start_at", &mut problems),
        end_at: form.time("end_at", &mut problems),
        misfire: form
            .filled("misfire")
            .and_then(|_| form.choice("misfire", &mut problems)),
        misfire_threshold_secs: form.whole_if_filled("misfire_threshold_secs", &mut problems),
        paused: Some(Some(form.checked("paused"))),
        max_concurrency: form.whole_or_null("max_concurrency", &mut problems),
        params: form.json_object("params", &mut problems),
        // The webhook settings are given through the API or definitions.
        webhook: Default::default(),
        extras: ExtrasDraft {
            calendar: Some(form.filled("calendar").map(str::to_owned)),
            // Without a calendar the mode is not given (a cleared calendar takes it along).
            calendar_mode: match form.filled("calendar") {
                Some(_) => form.choice("calendar_mode", &mut problems),
                None => None,
            },
            jitter_secs: form.whole_or_null("jitter_secs", &mut problems),
            max_fires: form.whole_or_null("max_fires", &mut problems),
            // `after` is given through the API or definitions; the form leaves it alone.
            after: None,
        },
        problems: FieldErrors::new(),
    };
    draft.problems = problems;
    draft
}

/// The command of an edited trigger's form: its fields and the `version` it was read at.
pub fn trigger_patch(form: &FormData) -> TriggerPatch {
    let mut draft = trigger_draft(form);
    let version = form.whole_or_null("version", &mut draft.problems);
    TriggerPatch { version, draft }
}

#[cfg(test)]
mod tests {
    use super::super::normalize_time;
    use super::super::tests::form;
    use super::*;

    #[test]
    fn trigger_form_gives_only_its_kinds_field() {
        let draft = trigger_draft(&form(&[
            ("kind", "interval"),
            ("cron", "* * * * *"),
            ("interval_secs", "60"),
            ("at", "2026-01-01T10:00"),
        ]));
        assert!(draft.problems.is_empty());
        assert_eq!(draft.cron, Some(None));
        assert_eq!(draft.interval_secs, Some(Some(60)));
        assert_eq!(draft.at, Some(None));
        let once = trigger_draft(&form(&[("kind", "once"), ("at", "2026-01-01T10:00")]));
        assert_eq!(
            once.at.flatten().map(|at| at.to_rfc3339()).as_deref(),
            Some("2026-01-01T10:00:00+00:00")
        );
        assert_eq!(normalize_time("2026-01-01T10:00"), "2026-01-01T10:00:00+00:00");
        assert_eq!(normalize_time("garbage"), "garbage");
    }
}
