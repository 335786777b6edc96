//! Definitions as code: jobs with their triggers written as YAML (`probactr export`, the
//! admin's download), and applied back (`probactr apply`, the admin's upload): create what
//! is missing, update what differs, say what changes object by object, and change nothing
//! when the files and the server already agree. Both the command-line client (through
//! the REST API) and the manager (through its services) drive it, as a [`Registry`].
//!
//! ```yaml
//! jobs:
//!   - name: nightly-export
//!     kind: shell
//!     spec: {program: /opt/export.sh, env: {DB: "{{ secrets.db }}"}}
//!     timeout_secs: 7200
//!     retry: {max_attempts: 3, initial_secs: 60, retry_on: {exit_codes: [75]}}
//!     triggers:
//!       - {kind: cron, cron: "0 0 2 * * *", timezone: Europe/Berlin}
//! ```
//!
//! Secrets stay on the server: a definition names them (`{{ secrets.NAME }}`), never
//! their values.
//!
//! # Layout
//!
//! - `source`: reading files ([`read`], [`read_text`]) and checking their shape;
//!   [`marked`]: YAML with the line of every value.
//! - `export`: the server's objects as one document; `yaml`: that document as YAML.
//! - `apply`: making the server match the files; `compare`: when an object already
//!   matches what a file says.
//! - `fields`: the fields each kind of object carries in a file.
//! - `alerting`, `workflows`: the sections beside `jobs`.

pub mod marked;

mod alerting;
mod apply;
mod compare;
mod export;
mod fields;
mod source;
mod workflows;
mod yaml;

use std::future::Future;

use serde_json::Value;

pub use apply::{apply, check, Report};
pub use export::export;
pub use source::{read, read_text, Source};
pub use yaml::yaml;

/// Where definitions live: the jobs and triggers of one cluster, as the REST API shapes
/// them (`JobView`, `Trigger`).
pub trait Registry {
    /// Every job.
    fn jobs(&self) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// A job's triggers.
    fn triggers(&self, job_id: i64) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// Creates a job from an API body; returns its id.
    fn create_job(&self, body: Value) -> impl Future<Output = Result<i64, Refusal>> + Send;
    /// Edits a job with an API body (`version` included).
    fn update_job(&self, id: i64, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Deletes a job.
    fn delete_job(&self, id: i64) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Creates a trigger of a job from an API body.
    fn create_trigger(&self, job_id: i64, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Edits a trigger with an API body (`version` included).
    fn update_trigger(&self, id: i64, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Deletes a trigger.
    fn delete_trigger(&self, id: i64) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Every alert channel (`Channel`), or None when the caller may not manage them.
    fn channels(&self) -> impl Future<Output = Result<Option<Vec<Value>>, Refusal>> + Send;
    /// Creates (`id` None) or replaces an alert channel from an API body.
    fn put_channel(&self, id: Option<i64>, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Every alert rule (`Rule`).
    fn rules(&self) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// Creates (`id` None) or replaces an alert rule from an API body.
    fn put_rule(&self, id: Option<i64>, body: Value) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Every workflow (`WorkflowView`: its steps name jobs by id).
    fn workflows(&self) -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// Creates (`id` None) or replaces a workflow from an API body; returns its id.
    fn put_workflow(&self, id: Option<i64>, body: Value)
        -> impl Future<Output = Result<i64, Refusal>> + Send;
    /// A workflow's triggers (`WorkflowTrigger`).
    fn workflow_triggers(&self, workflow_id: i64)
        -> impl Future<Output = Result<Vec<Value>, Refusal>> + Send;
    /// Creates a trigger of a workflow from an API body.
    fn create_workflow_trigger(
        &self,
        workflow_id: i64,
        body: Value,
    ) -> impl Future<Output = Result<(), Refusal>> + Send;
    /// Deletes a trigger of a workflow.
    fn delete_workflow_trigger(
        &self,
        workflow_id: i64,
        id: i64,
    ) -> impl Future<Output = Result<(), Refusal>> + Send;
}

/// A registry's refusal: what went wrong and, for bad input, each bad field.
#[derive(Debug, Clone, Default)]
pub struct Refusal {
    /// What went wrong.
    pub message: String,
    /// Each bad field (`timeout_secs`, `retry.max_attempts`) and its problem.
    pub fields: Vec<(String, String)>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        for (field, problem) in &self.fields {
            write!(f, "\n  {field}: {problem}")?;
        }
        Ok(())
    }
}

/// Why definitions could not be read or applied; the message names file, line and field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DefinitionError(pub String);

impl From<Refusal> for DefinitionError {
    fn from(refusal: Refusal) -> Self {
        DefinitionError(refusal.to_string())
    }
}

pub(crate) fn fail<T>(message: impl Into<String>) -> Result<T, DefinitionError> {
    Err(DefinitionError(message.into()))
}

/// What `apply` marks the jobs it manages with (`managed_by`): `--prune` deletes only
/// those, and a job created in the admin becomes one when a file names it (adoption).
pub const MANAGER: &str = "probactr-apply";
