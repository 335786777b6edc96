//! `/api/v1/triggers/{id}/versions`: what changed in a trigger, and restoring an earlier
//! version.

use probactr_common::store::versions::Version as TriggerVersion;

use super::versions::{get_version, list_versions, restore_version};
use crate::error::ErrorBody;
use crate::service::trigger_versions;
use crate::service::triggers::TriggerView;
use crate::service::Paged;

list_versions! {
    /// The kept versions of a trigger, newest first: who made each, how, when, and the whole
    /// definition (schedule, parameters, calendar, jitter, fires, `after`; secret values masked).
    trigger_versions -> TriggerVersion { path: "/triggers/{id}/versions", operation_id: "list_trigger_versions",
        tag: "triggers", id: "The trigger", missing: "No such trigger" }
}

get_version! {
    /// One version of a trigger.
    trigger_versions -> TriggerVersion { path: "/triggers/{id}/versions/{version}",
        operation_id: "get_trigger_version", tag: "triggers", id: "The trigger",
        missing: "No such trigger or version", what: ("trigger", "trigger version") }
}

restore_version! {
    /// Make an earlier version the trigger's definition again (as a new version; its pause,
    /// fires so far and webhook token stay as they are). Checked as an edit is.
    trigger_versions -> TriggerView { path: "/triggers/{id}/versions/{version}/restore",
        operation_id: "restore_trigger_version", tag: "triggers", id: "The trigger",
        ok: "The trigger as restored, its next instant recomputed", missing: "No such trigger or version",
        refused: (status = UNPROCESSABLE_ENTITY, description = "The version no longer passes the checks of an edit (its calendar or the job it waits for is gone), each field named; nothing was changed", body = ErrorBody),
        what: ("trigger", "trigger version") }
}
