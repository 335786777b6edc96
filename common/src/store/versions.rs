//! What job and workflow versions share: a kept version as listed, and how it came to be
//! ([`super::job_versions`], [`super::workflow_versions`]).

use chrono::{DateTime, Utc};
use serde::Serialize;

/// A version as listed: who made it, how, when, and the whole definition it had.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Version {
    /// The version number of the job or workflow.
    pub version: i64,
    /// Who made it (`unknown` for the version an object had before versions were kept).
    pub actor: String,
    /// `create`, `update`, `restore` or `before`.
    pub action: String,
    /// The version a restore brought back.
    pub restored_from: Option<i64>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// The definition (secret values sealed; callers mask them before showing it).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub definition: serde_json::Value,
}

/// How a version came to be.
#[derive(Debug, Clone, Copy)]
pub struct Made<'a> {
    /// Who.
    pub actor: &'a str,
    /// `create`, `update`, `restore` or `before`.
    pub action: &'a str,
    /// The version a restore brought back.
    pub restored_from: Option<i64>,
}
