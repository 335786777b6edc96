//! The manager's own queries: what the shared store does not need (lists with filters
//! and counts, version-checked updates, deletes, users, sessions, tokens, audit log).
//!
//! As in `probactr_common::store`, every query is a named function with its SQL written
//! out; filters are added with `QueryBuilder::push_bind`, never by pasting user text.

pub mod audit;
pub mod cluster;
pub mod jobs;
pub mod runs;
pub mod sessions;
pub mod triggers;
pub mod users;
