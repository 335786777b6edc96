//! `/api/v1/jobs/{id}/versions`: what changed in a job, and restoring an earlier version.

use probactr_common::store::versions::Version as JobVersion;

use super::versions::{get_version, list_versions, restore_version};
use crate::error::ErrorBody;
use crate::service::job_versions;
use crate::service::jobs::JobView;
use crate::service::Paged;

list_versions! {
    /// The kept versions of a job, newest first: who made each, how, when, and the whole
    /// definition (secret values masked).
    job_versions -> JobVersion { path: "/jobs/{id}/versions", operation_id: "list_job_versions", tag: "jobs",
        id: "The job", missing: "No such job" }
}

get_version! {
    /// One version of a job.
    job_versions -> JobVersion { path: "/jobs/{id}/versions/{version}", operation_id: "get_job_version",
        tag: "jobs", id: "The job", missing: "No such job or version", what: ("job", "job version") }
}

restore_version! {
    /// Make an earlier version the job's definition again (as a new version; its triggers and
    /// child jobs stay as they are).
    job_versions -> JobView { path: "/jobs/{id}/versions/{version}/restore", operation_id: "restore_job_version",
        tag: "jobs", id: "The job", ok: "The job as restored", missing: "No such job or version",
        refused: (status = CONFLICT, description = "Another job took its name meanwhile, or the version cannot be read back", body = ErrorBody),
        what: ("job", "job version") }
}
