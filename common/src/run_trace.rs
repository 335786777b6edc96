//! The trace of a run, derived rather than stored.
//!
//! A run's fire, queue wait, claim, attempts (every retry and takeover) and ends happen
//! in different processes, with no context handed between them but the run's row. So its
//! trace id and the id of its root span are a hash of the cluster (its Redis prefix and
//! database name, shared by every process of it) and the run's chain (`first_run_id`, or
//! the run's own id for a first attempt): any process can open spans of the run's trace
//! from the row alone, and nothing is stored per run. A workflow run is one trace the
//! same way, derived from its id: each step has a span under the workflow run's root,
//! and the step's runs (queue wait, claim, attempts) are spans under it. Whether the trace is sampled is a
//! function of its id too (`OTEL_TRACES_SAMPLER` `traceidratio` and
//! `parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG`; `always_off`; every trace
//! otherwise), so every process decides alike.
//!
//! Everything here answers `None` when the process exports no traces
//! ([`telemetry::tracing_on`](crate::telemetry::tracing_on)): one atomic load per call.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use sha2::{Digest, Sha256};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::model::Run;
use crate::telemetry;

struct Cluster {
    seed: Vec<u8>,
    /// Traces whose id falls under this bound (of 2^63) are sampled.
    sampled_below: u64,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

thread_local! {
    /// The ids the next span built on this thread gets (a root span whose ids are
    /// derived); `None`: random ids.
    static FIXED_IDS: Cell<Option<(TraceId, SpanId)>> = const { Cell::new(None) };
}

/// The provider's id generator: random ids, but the derived ones for a run's root span.
#[derive(Debug, Default)]
pub(crate) struct DerivedIds(RandomIdGenerator);

impl IdGenerator for DerivedIds {
    fn new_trace_id(&self) -> TraceId {
        FIXED_IDS
            .with(Cell::get)
            .map_or_else(|| self.0.new_trace_id(), |(trace, _)| trace)
    }

    fn new_span_id(&self) -> SpanId {
        FIXED_IDS
            .with(Cell::get)
            .map_or_else(|| self.0.new_span_id(), |(_, span)| span)
    }
}

/// Set once by [`telemetry::init`] when traces are exported.
pub(crate) fn set_cluster_seed(redis_prefix: &str, database_url: &str) {
    // The database's name, not its address: processes may reach it by different hosts.
    let database = database_url
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .split('?')
        .next()
        .unwrap_or_default();
    let mut seed = b"probactr-run-trace\0".to_vec();
    seed.extend_from_slice(redis_prefix.as_bytes());
    seed.push(0);
    seed.extend_from_slice(database.as_bytes());
    seed.push(0);
    let sampler = std::env::var("OTEL_TRACES_SAMPLER").unwrap_or_default();
    let ratio = match sampler.as_str() {
        "always_off" | "parentbased_always_off" => 0.0,
        "traceidratio" | "parentbased_traceidratio" => std::env::var("OTEL_TRACES_SAMPLER_ARG")
            .ok()
            .and_then(|arg| arg.trim().parse::<f64>().ok())
            .map_or(1.0, |ratio| ratio.clamp(0.0, 1.0)),
        _ => 1.0,
    };
    let _first = CLUSTER.set(Cluster {
        seed,
        sampled_below: sampled_below(ratio),
    });
}

/// The bound the OpenTelemetry `TraceIdRatioBased` sampler compares a trace id's low 63
/// bits with (so an SDK sampling by ratio decides as this module does).
fn sampled_below(ratio: f64) -> u64 {
    if ratio >= 1.0 {
        u64::MAX
    } else {
        (ratio * (1u64 << 63) as f64) as u64
    }
}

/// The trace of one run chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTrace {
    /// The trace's id.
    pub trace_id: TraceId,
    /// The id of its root span (the fire, or the first span of a run fired otherwise).
    pub root: SpanId,
    /// Whether the trace is sampled.
    pub sampled: bool,
}

impl RunTrace {
    /// The trace of `run`'s chain; `None` when traces are not exported.
    pub fn of(run: &Run) -> Option<RunTrace> {
        RunTrace::of_chain(run.first_run_id.unwrap_or(run.id))
    }

    /// The trace of the chain whose first run is `chain_id`; `None` when traces are not
    /// exported.
    pub fn of_chain(chain_id: i64) -> Option<RunTrace> {
        if !telemetry::tracing_on() {
            return None;
        }
        let cluster = CLUSTER.get()?;
        Some(derive(cluster, chain_id))
    }

    /// The trace of workflow run `workflow_run_id`; its root span is the workflow run's.
    pub fn of_workflow_run(workflow_run_id: i64) -> Option<RunTrace> {
        if !telemetry::tracing_on() {
            return None;
        }
        let cluster = CLUSTER.get()?;
        Some(derive_from(
            cluster,
            &[b"workflow run".as_slice(), &workflow_run_id.to_be_bytes()],
        ))
    }

    /// The trace of the runs of step `step` of workflow run `workflow_run_id`: the
    /// workflow run's trace, whose root for these runs is the step's span (a child of the
    /// workflow run's root, see [`RunTrace::step_span`]).
    pub fn of_step(workflow_run_id: i64, step: &str) -> Option<RunTrace> {
        let workflow = RunTrace::of_workflow_run(workflow_run_id)?;
        let cluster = CLUSTER.get()?;
        let step_ids = derive_from(
            cluster,
            &[
                b"workflow step".as_slice(),
                &workflow_run_id.to_be_bytes(),
                step.as_bytes(),
            ],
        );
        Some(RunTrace {
            root: step_ids.root,
            ..workflow
        })
    }

    /// Exports the root span of workflow run `workflow_run_id` of workflow `workflow_id`,
    /// started at `at` (the instant the steps' spans hang from; a workflow run ends in the
    /// database, where no span is written).
    pub fn workflow_run_started(workflow_id: i64, workflow_run_id: i64, at: SystemTime) {
        if let Some(trace) = RunTrace::of_workflow_run(workflow_run_id) {
            let attributes = vec![
                KeyValue::new("workflow.id", workflow_id),
                KeyValue::new("workflow_run.id", workflow_run_id),
            ];
            trace.root_span(
                "workflow run",
                Timed {
                    start: at,
                    end: at,
                    attributes,
                },
            );
        }
    }

    /// Exports the step's own span (this trace being [`RunTrace::of_step`]), under the
    /// root of its workflow run `workflow_run_id`.
    pub fn step_span(&self, workflow_run_id: i64, span: Timed) {
        let Some(workflow) = RunTrace::of_workflow_run(workflow_run_id) else {
            return;
        };
        export("step", span, &workflow.parent(), Some((self.trace_id, self.root)));
    }

    /// A context whose (remote) parent is the run's root span: spans opened in it belong
    /// to the run's trace.
    pub fn parent(&self) -> Context {
        let flags = if self.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        let parent = SpanContext::new(self.trace_id, self.root, flags, true, TraceState::default());
        Context::new().with_remote_span_context(parent)
    }

    /// Exports the root span (the fire).
    pub fn root_span(&self, name: &'static str, span: Timed) {
        export(name, span, &Context::new(), Some((self.trace_id, self.root)));
    }

    /// Exports a span under the root (the queue wait, the claim).
    pub fn child_span(&self, name: &'static str, span: Timed) {
        export(name, span, &self.parent(), None);
    }

    /// Makes `span` (a `tracing` span not yet entered) a child of the run's root span.
    pub fn adopt(&self, span: &tracing::Span) {
        let _ = span.set_parent(self.parent());
    }
}

/// A span written after the fact: its times and attributes.
#[derive(Debug, Clone)]
pub struct Timed {
    /// When it began.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// Its attributes.
    pub attributes: Vec<KeyValue>,
}

/// Exports one span in `parent`; `ids` fixes its trace and span ids (a root span).
fn export(name: &'static str, timed: Timed, parent: &Context, ids: Option<(TraceId, SpanId)>) {
    let Some(tracer) = telemetry::tracer() else {
        return;
    };
    let builder = tracer
        .span_builder(name)
        .with_start_time(timed.start)
        .with_attributes(timed.attributes);
    // The SDK takes a span's ids from its generator: hand it these for the call.
    FIXED_IDS.with(|fixed| fixed.set(ids));
    let mut span = tracer.build_with_context(builder, parent);
    FIXED_IDS.with(|fixed| fixed.set(None));
    span.end_with_timestamp(timed.end);
}

fn derive(cluster: &Cluster, chain_id: i64) -> RunTrace {
    derive_from(cluster, &[&chain_id.to_be_bytes()])
}

/// The ids derived from `parts` (a run chain's id alone; a domain and ids otherwise, so
/// that no workflow run or step can share a run chain's ids).
fn derive_from(cluster: &Cluster, parts: &[&[u8]]) -> RunTrace {
    let mut hasher = Sha256::new().chain_update(&cluster.seed);
    for part in parts {
        hasher.update(part);
        if parts.len() > 1 {
            hasher.update([0]);
        }
    }
    let digest = hasher.finalize();
    let mut trace = [0u8; 16];
    trace.copy_from_slice(&digest[..16]);
    let mut root = [0u8; 8];
    root.copy_from_slice(&digest[16..24]);
    // All-zero ids are invalid; a hash gives one with probability 2^-64, made valid here.
    root[7] |= u8::from(root == [0; 8]);
    trace[15] |= u8::from(trace == [0; 16]);
    let low = u64::from_be_bytes(trace[8..].try_into().unwrap_or_default()) >> 1;
    RunTrace {
        trace_id: TraceId::from_bytes(trace),
        root: SpanId::from_bytes(root),
        sampled: low < cluster.sampled_below,
    }
}

/// The W3C `traceparent` (and `tracestate`, when not empty) of the current `tracing`
/// span, for job code to join the trace; `None` when traces are not exported.
pub fn current_traceparent() -> Option<(String, Option<String>)> {
    if !telemetry::tracing_on() {
        return None;
    }
    let context = tracing::Span::current().context();
    let span = context.span();
    let span = span.span_context();
    if !span.is_valid() {
        return None;
    }
    let parent = format!(
        "00-{}-{}-{:02x}",
        span.trace_id(),
        span.span_id(),
        span.trace_flags().to_u8()
    );
    let state = span.trace_state().header();
    Some((parent, (!state.is_empty()).then_some(state)))
}

/// The trace and span ids of `span`, for its log lines; `None` when traces are not
/// exported.
pub fn ids_of(span: &tracing::Span) -> Option<(String, String)> {
    if !telemetry::tracing_on() {
        return None;
    }
    let context = span.context();
    let span = context.span();
    let span = span.span_context();
    span.is_valid()
        .then(|| (span.trace_id().to_string(), span.span_id().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(prefix: &str) -> Cluster {
        Cluster {
            seed: prefix.as_bytes().to_vec(),
            sampled_below: sampled_below(1.0),
        }
    }

    #[test]
    fn a_chain_has_one_trace_per_cluster() {
        let a = cluster("a:");
        assert_eq!(derive(&a, 7), derive(&a, 7));
        assert_ne!(derive(&a, 7).trace_id, derive(&a, 8).trace_id);
        assert_ne!(derive(&a, 7).trace_id, derive(&cluster("b:"), 7).trace_id);
        assert!(derive(&a, 7).sampled);
        let none = Cluster {
            sampled_below: sampled_below(0.0),
            ..a
        };
        assert!(!derive(&none, 7).sampled);
    }
}
