//! The operations of the manager, shared by the REST API and the web admin.
//!
//! Each operation checks the caller's role, validates its command ([`crate::command`]:
//! every bad field named at once, and bad input changes nothing), makes its change and the audit row in one transaction, and
//! answers with an [`crate::error::ApiError`] the two front ends render their own way.

pub mod alerts;
pub mod cluster;
pub mod dashboard;
pub mod definitions;
pub mod jobs;
pub mod ledger;
pub mod resume;
pub mod runs;
pub mod secrets;
pub mod triggers;
pub mod users;
pub mod workflows;

use serde::Serialize;

/// A page of a list: the items and how many match in all.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Paged<T> {
    /// This page's items.
    pub items: Vec<T>,
    /// Items matching the filters, on every page.
    pub total: i64,
}

/// A value as audit-log JSON (a value that cannot be serialized is recorded as null).
pub(crate) fn snapshot<T: Serialize>(value: &T) -> Option<serde_json::Value> {
    serde_json::to_value(value).ok()
}
