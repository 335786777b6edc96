//! What the fault suite needs beyond `executor/tests/support`: private PostgreSQL and
//! Redis servers it may kill ([`services`]), a TCP proxy it can stall ([`proxy`]),
//! processes with logs and machine pauses ([`cluster`]), replicated servers to fail over
//! ([`failover`]), and the workload whose jobs
//! record their own effects plus the invariant check over them ([`workload`]).
#![allow(dead_code)]

pub mod chaos;
pub mod cluster;
pub mod failover;
pub mod proxy;
pub mod services;
pub mod workload;
