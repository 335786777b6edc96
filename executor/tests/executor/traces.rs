//! Traces: a run fired, claimed and run by a real executor exporting over OTLP/HTTP to a
//! receiver started here, with the job's own span (sent by the job, with curl) nested
//! under the attempt through the `TRACEPARENT` it was handed; a workflow run as one trace
//! with a span per step.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use probactr_common::model::{JobKind, RunState};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::workflows::{self, Step};
use probactr_common::store::{runs, TEST_MIGRATOR};
use probactr_testkit as support;
use prost::Message;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use support::receiver::Receiver;
use support::{eventually, executor, fast_env, unique_prefix};

/// A span as the receiver got it: (trace id, span id, parent span id), in hex.
type Ids = (String, String, String);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The spans of every request, by name: protobuf from the executor, JSON from the job.
fn spans(receiver: &Receiver) -> HashMap<String, Vec<Ids>> {
    let mut spans: HashMap<String, Vec<Ids>> = HashMap::new();
    for request in receiver.received() {
        assert_eq!(request.path, "/v1/traces");
        if request.header("content-type") == Some("application/json") {
            let body = request.json();
            for span in body["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .unwrap()
            {
                let id = |key: &str| span[key].as_str().unwrap_or_default().to_owned();
                let ids = (id("traceId"), id("spanId"), id("parentSpanId"));
                spans.entry(id("name")).or_default().push(ids);
            }
            continue;
        }
        let decoded = ExportTraceServiceRequest::decode(request.body.as_slice()).expect("OTLP protobuf");
        for span in decoded
            .resource_spans
            .iter()
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| &scope.spans)
        {
            let ids = (hex(&span.trace_id), hex(&span.span_id), hex(&span.parent_span_id));
            spans.entry(span.name.clone()).or_default().push(ids);
        }
    }
    spans
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_run_is_one_trace_and_the_job_joins_it(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let url = support::database_url(&options);
    let pool = pool_options.connect_with(options).await.unwrap();
    let receiver = Receiver::start().await;
    let endpoint = receiver.url.trim_end_matches("/hook").to_owned();
    let mut env = fast_env(&url, &unique_prefix("traces"));
    env.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint.clone());
    env.insert("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/protobuf".into());
    // The job's own span, a child of the span named in its TRACEPARENT.
    let script = r#"set -e
trace=$(echo "$TRACEPARENT" | cut -d- -f2)
parent=$(echo "$TRACEPARENT" | cut -d- -f3)
span='{"traceId":"'$trace'","spanId":"00f067aa0ba902b7","parentSpanId":"'$parent'","name":"job work","kind":1,"startTimeUnixNano":"1","endTimeUnixNano":"2"}'
curl -sf -X POST -H 'content-type: application/json' \
  -d '{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":['"$span"']}]}]}' \
  "$ENDPOINT/v1/traces"
echo "$TRACEPARENT""#;
    // Not parallel: the run needs the job's lock, so firing queues it and a claim takes it.
    let job = jobs::insert(
        &pool,
        &NewJob::new(
            "traced",
            JobKind::Shell,
            json!({ "program": "sh", "args": ["-c", script], "env": { "ENDPOINT": endpoint } }),
        ),
    )
    .await
    .unwrap();
    let at = Utc::now() + TimeDelta::seconds(1);
    triggers::create(&pool, job.id, &NewTrigger::once(at), Utc::now())
        .await
        .unwrap();
    let mut executor = executor("executor", &env);
    let run = eventually(Duration::from_secs(20), "the run ended", || async {
        let ended: Option<i64> =
            sqlx::query_scalar("SELECT id FROM runs WHERE job_id = $1 AND finished_at IS NOT NULL")
                .bind(job.id)
                .fetch_optional(&pool)
                .await
                .unwrap();
        runs::get(&pool, ended?).await.unwrap()
    })
    .await;
    assert_eq!(run.state, RunState::Succeeded, "output: {:?}", run.output);
    // A clean exit exports what is left.
    executor.signal(support::SIGTERM);
    assert!(executor.wait_exit(Duration::from_secs(20)).await.success());

    let spans = spans(&receiver);
    let one = |name: &str| -> Ids {
        let found = spans
            .get(name)
            .unwrap_or_else(|| panic!("no {name:?} span in {spans:?}"));
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        found[0].clone()
    };
    let fire = one("fire");
    let trace = fire.0.clone();
    for name in ["queue wait", "claim", "attempt"] {
        let (trace_id, _, parent) = one(name);
        assert_eq!(trace_id, trace, "{name} is in the run's trace");
        assert_eq!(parent, fire.1, "{name} is under the fire");
    }
    let attempt = one("attempt");
    for name in ["lock", "record"] {
        let (trace_id, _, parent) = one(name);
        assert_eq!(
            (trace_id, parent),
            (trace.clone(), attempt.1.clone()),
            "{name} is under the attempt"
        );
    }
    let job_span = one("job work");
    assert_eq!(
        (job_span.0, job_span.2),
        (trace.clone(), attempt.1.clone()),
        "the job's span is under the attempt"
    );
    let output = run.output.unwrap_or_default();
    assert!(
        output.contains(&format!("00-{trace}-{}-01", attempt.1)),
        "TRACEPARENT: {output}"
    );
}

/// A workflow run is one trace: its root span, a span per step under it, and each step's
/// queue wait, claim and attempt under its step.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_workflow_run_is_one_trace_with_a_span_per_step(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let url = support::database_url(&options);
    let pool = pool_options.connect_with(options).await.unwrap();
    let receiver = Receiver::start().await;
    let mut env = fast_env(&url, &unique_prefix("workflow-traces"));
    env.insert(
        "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
        receiver.url.trim_end_matches("/hook").to_owned(),
    );
    env.insert("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/protobuf".into());
    let job = jobs::insert(
        &pool,
        &NewJob::new("step job", JobKind::Shell, json!({"program": "true"})),
    )
    .await
    .unwrap();
    let step = |name: &str, depends_on: &[&str]| Step {
        name: name.to_owned(),
        job_id: job.id,
        depends_on: depends_on.iter().map(|s| s.to_string()).collect(),
        when: "all_success".to_owned(),
        params: json!({}),
    };
    let mut tx = pool.begin().await.unwrap();
    let workflow = workflows::create(
        &mut tx,
        "etl",
        "",
        &[step("extract", &[]), step("load", &["extract"])],
    )
    .await
    .unwrap();
    let at = Utc::now() + TimeDelta::seconds(1);
    workflows::create_trigger(&mut *tx, workflow.id, &NewTrigger::once(at), &json!({}), Some(at))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut executor = executor("executor", &env);
    eventually(Duration::from_secs(30), "the workflow run succeeded", || async {
        let states: Vec<String> =
            sqlx::query_scalar("SELECT state FROM workflow_runs WHERE workflow_id = $1")
                .bind(workflow.id)
                .fetch_all(&pool)
                .await
                .unwrap();
        (states == ["succeeded"]).then_some(())
    })
    .await;
    executor.signal(support::SIGTERM);
    assert!(executor.wait_exit(Duration::from_secs(20)).await.success());

    let spans = spans(&receiver);
    let named = |name: &str| spans.get(name).cloned().unwrap_or_default();
    let root = named("workflow run");
    assert_eq!(root.len(), 1, "{spans:?}");
    let (trace, root_id, _) = root[0].clone();
    let steps = named("step");
    assert_eq!(steps.len(), 2, "a span per step: {spans:?}");
    for (trace_id, _, parent) in &steps {
        assert_eq!(
            (trace_id, parent),
            (&trace, &root_id),
            "a step is under the workflow run"
        );
    }
    let step_ids: Vec<&String> = steps.iter().map(|(_, id, _)| id).collect();
    for name in ["queue wait", "claim", "attempt"] {
        let found = named(name);
        assert_eq!(found.len(), 2, "{name}: {found:?}");
        let mut parents: Vec<&String> = found
            .iter()
            .map(|(trace_id, _, parent)| {
                assert_eq!(trace_id, &trace, "{name} is in the workflow run's trace");
                parent
            })
            .collect();
        parents.sort();
        let mut expected = step_ids.clone();
        expected.sort();
        assert_eq!(parents, expected, "each step's {name} is under its step");
    }
}
