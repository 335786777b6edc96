//! The executor's integration tests, in one test binary: [`cluster`] runs real
//! `probactr-executor` processes against PostgreSQL and Redis, [`jobs`] the job kinds
//! against real processes and a loopback HTTP server, [`keys`] that job code cannot
//! reach the executor's keys, [`routing`] where runs go (labels
//! and selectors, cordon and drain), [`namespaces`] quotas, dedicated executors and
//! secrets per namespace, [`flow`] flow control across jobs (exact trigger caps, pools),
//! [`overlap`] the overlap policies that act on a busy job (replace, buffer_one).
//! [`holds`] what holds instants back (calendars, maintenance windows, jitter, max_fires).
//! [`cgroups`] a cgroup per shell run (`PROBACTR_CGROUP`).
#![allow(clippy::unwrap_used, missing_docs)]

mod cgroups;
mod cluster;
mod flow;
mod holds;
mod jobs;
mod keys;
mod namespaces;
mod overlap;
mod routing;
mod traces;
