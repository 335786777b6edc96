//! `/api/v1/workflows/{id}/versions`: what changed in a workflow, and restoring an
//! earlier version.

use probactr_common::store::versions::Version as WorkflowVersion;

use super::versions::{get_version, list_versions, restore_version};
use crate::error::ErrorBody;
use crate::service::workflow_versions;
use crate::service::workflows::WorkflowView;
use crate::service::Paged;

list_versions! {
    /// The kept versions of a workflow, newest first: who made each, how, when, and the whole
    /// definition (name, description, steps, declared parameters; secret values masked).
    workflow_versions -> WorkflowVersion { path: "/workflows/{id}/versions",
        operation_id: "list_workflow_versions", tag: "workflows", id: "The workflow", missing: "No such workflow" }
}

get_version! {
    /// One version of a workflow.
    workflow_versions -> WorkflowVersion { path: "/workflows/{id}/versions/{version}",
        operation_id: "get_workflow_version", tag: "workflows", id: "The workflow",
        missing: "No such workflow or version", what: ("workflow", "workflow version") }
}

restore_version! {
    /// Make an earlier version the workflow's definition again (as a new version; its pause,
    /// triggers and runs stay as they are). Checked as an edit is.
    workflow_versions -> WorkflowView { path: "/workflows/{id}/versions/{version}/restore",
        operation_id: "restore_workflow_version", tag: "workflows", id: "The workflow",
        ok: "The workflow as restored", missing: "No such workflow or version",
        refused: (status = UNPROCESSABLE_ENTITY, description = "The version no longer passes the checks of an edit (a job it names is gone), each field named", body = ErrorBody),
        what: ("workflow", "workflow version") }
}
