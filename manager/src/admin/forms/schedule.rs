//! The job form's schedule section: the job's first trigger (cron with its zone, or an
//! interval), read into the same [`TriggerDraft`] the trigger form gives, and the
//! service's `trigger.*` errors placed on the section's fields.

use std::collections::HashMap;

use super::{trigger_draft, FormData};
use crate::command::TriggerDraft;
use crate::error::FieldErrors;

/// The section's fields, by the trigger field each stands for.
const FIELDS: [(&str, &str); 4] = [
    ("kind", "schedule.kind"),
    ("cron", "schedule.cron"),
    ("timezone", "schedule.timezone"),
    ("interval_secs", "schedule.interval_secs"),
];

/// The kinds the section offers: `none` makes no trigger.
pub const SCHEDULE_KINDS: [&str; 3] = ["none", "cron", "interval"];

/// The trigger the section asks for; None when it asks for none.
pub fn schedule_draft(form: &FormData) -> Option<TriggerDraft> {
    let kind = form.filled("schedule.kind").unwrap_or("none");
    if kind == "none" {
        return None;
    }
    let fields: HashMap<String, String> = FIELDS
        .iter()
        .filter_map(|(trigger, field)| Some((trigger.to_string(), form.get(field)?.to_owned())))
        .collect();
    Some(trigger_draft(&FormData(fields)))
}

/// Errors with the service's `trigger.FIELD` names under the section's fields; a
/// trigger field the section does not show is told on its kind.
pub fn schedule_errors(errors: FieldErrors) -> FieldErrors {
    let mut placed = FieldErrors::new();
    for (field, message) in errors {
        let Some(trigger_field) = field.strip_prefix("trigger.") else {
            placed.insert(field, message);
            continue;
        };
        // `cron.minute`: the cron's error, its part named in the message.
        let (name, message) = match trigger_field.split_once('.') {
            Some((name, part)) => (name, format!("{part}: {message}")),
            None => (trigger_field, message),
        };
        let own = FIELDS
            .iter()
            .find(|(trigger, _)| *trigger == name)
            .map(|(_, field)| (*field).to_owned());
        match own {
            Some(field) => {
                placed.insert(field, message);
            }
            None => {
                placed.insert("schedule.kind".to_owned(), format!("{name}: {message}"));
            }
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::super::tests::form;
    use super::*;

    #[test]
    fn the_section_gives_a_trigger_of_its_kind_or_none() {
        assert!(schedule_draft(&form(&[("schedule.cron", "* * * * *")])).is_none());
        assert!(schedule_draft(&form(&[("schedule.kind", "none")])).is_none());
        let cron = schedule_draft(&form(&[
            ("schedule.kind", "cron"),
            ("schedule.cron", "0 30 2 * * *"),
            ("schedule.timezone", "Europe/Paris"),
            ("schedule.interval_secs", "60"),
        ]))
        .expect("a cron trigger");
        assert_eq!(cron.cron, Some(Some("0 30 2 * * *".to_owned())));
        assert_eq!(cron.timezone, Some(Some("Europe/Paris".to_owned())));
        assert_eq!(cron.interval_secs, Some(None), "only the kind's own field");
        let every = schedule_draft(&form(&[
            ("schedule.kind", "interval"),
            ("schedule.interval_secs", "x"),
        ]))
        .expect("an interval trigger");
        assert!(every.problems.contains_key("interval_secs"));
    }

    #[test]
    fn trigger_errors_land_on_the_section() {
        let errors = FieldErrors::from(
            [
                ("trigger.cron", "bad cron"),
                ("trigger.interval_secs.x", "odd"),
                ("trigger.timezone", "unknown zone"),
                ("trigger.at", "must be given"),
                ("name", "is required"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let placed = schedule_errors(errors);
        assert_eq!(placed["schedule.cron"], "bad cron");
        assert_eq!(placed["schedule.interval_secs"], "x: odd");
        assert_eq!(placed["schedule.timezone"], "unknown zone");
        assert_eq!(placed["schedule.kind"], "at: must be given");
        assert_eq!(placed["name"], "is required");
    }
}
