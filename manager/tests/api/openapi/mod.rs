//! The generated OpenAPI document against the API it describes: every documented
//! operation is served, every route the issue names is documented, every `$ref`
//! resolves, the answers match their schemas' fields, and every documented request field
//! is one the service reads (a field the document invents would be "unknown field").

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use probactr_manager::auth::Role;
use serde_json::{json, Map, Value};
use sqlx::PgPool;

use super::TestApp;

async fn document(app: &TestApp) -> Value {
    let reply = app.call(Method::GET, "/api/v1/openapi.json", None, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    reply.body
}

/// Every (method, path) of the document.
fn operations(doc: &Value) -> Vec<(Method, String, Value)> {
    let mut found = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            found.push((method, path.clone(), operation.clone()));
        }
    }
    found
}

/// `#/components/schemas/Name` → the schema.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.trim_start_matches("#/components/schemas/");
            let target = &doc["components"]["schemas"][name];
            assert!(target.is_object(), "dangling $ref {reference}");
            resolve(doc, target)
        }
        None => schema,
    }
}

/// The property names of an object schema (through `$ref` and `oneOf` of null/object).
fn properties(doc: &Value, schema: &Value) -> BTreeSet<String> {
    let schema = resolve(doc, schema);
    let mut names: BTreeSet<String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for key in ["oneOf", "allOf", "anyOf"] {
        for part in schema[key].as_array().into_iter().flatten() {
            names.extend(properties(doc, part));
        }
    }
    names
}

fn collect_refs(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                into.push(reference.clone());
            }
            map.values().for_each(|v| collect_refs(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, into)),
        _ => {}
    }
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn the_document_is_complete_and_every_operation_is_served(pool: PgPool) {
    let app = TestApp::new(pool);
    let doc = document(&app).await;
    assert_eq!(doc["openapi"].as_str().map(|v| &v[..3]), Some("3.1"));
    assert_eq!(doc["info"]["version"], probactr_common::VERSION);

    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    for reference in &refs {
        resolve(&doc, &json!({"$ref": reference}));
    }

    let mut operation_ids = BTreeSet::new();
    for (method, path, operation) in operations(&doc) {
        let id = operation["operationId"]
            .as_str()
            .expect("an operationId")
            .to_owned();
        assert!(
            operation_ids.insert(id.clone()),
            "{method} {path}: operationId {id} is taken"
        );
        assert!(operation["summary"].is_string(), "{method} {path} has no summary");
    }

    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(method, path, _)| (method.to_string(), path))
        .collect();
    let named_by_the_issue = [
        ("POST", "/api/v1/auth/token"),
        ("GET", "/api/v1/jobs"),
        ("POST", "/api/v1/jobs"),
        ("GET", "/api/v1/jobs/{id}"),
        ("PATCH", "/api/v1/jobs/{id}"),
        ("DELETE", "/api/v1/jobs/{id}"),
        ("POST", "/api/v1/jobs/{id}/pause"),
        ("POST", "/api/v1/jobs/{id}/resume"),
        ("POST", "/api/v1/jobs/{id}/run"),
        ("GET", "/api/v1/jobs/{id}/triggers"),
        ("POST", "/api/v1/jobs/{id}/triggers"),
        ("GET", "/api/v1/triggers/{id}"),
        ("PATCH", "/api/v1/triggers/{id}"),
        ("DELETE", "/api/v1/triggers/{id}"),
        ("POST", "/api/v1/triggers/{id}/pause"),
        ("POST", "/api/v1/triggers/{id}/resume"),
        ("GET", "/api/v1/runs"),
        ("GET", "/api/v1/runs/{id}"),
        ("POST", "/api/v1/runs/{id}/cancel"),
        ("GET", "/api/v1/runs/{id}/output"),
        ("GET", "/api/v1/runs/{id}/output/stream"),
        ("GET", "/api/v1/executors"),
        ("GET", "/api/v1/monitors"),
        ("GET", "/api/v1/status"),
        ("POST", "/api/v1/schedule/preview"),
        ("GET", "/api/v1/openapi.json"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
    ];
    for (method, path) in named_by_the_issue {
        assert!(
            documented.contains(&(method.to_owned(), path.to_owned())),
            "{method} {path} is not documented"
        );
    }

    for (method, path, operation) in operations(&doc) {
        let uri = path.replace("{id}", "1");
        let reply = app.call(method.clone(), &uri, None, Some(json!({}))).await;
        let fallback = reply.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("route "));
        let unrouted = reply.status == StatusCode::NOT_FOUND && fallback
            || reply.status == StatusCode::METHOD_NOT_ALLOWED;
        assert!(
            !unrouted,
            "{method} {uri} is documented but not routed: {}",
            reply.text
        );
        let open = operation["security"] == json!([{}]);
        if path.starts_with("/api/v1") && !open {
            assert_eq!(
                reply.status,
                StatusCode::UNAUTHORIZED,
                "{method} {uri} needs a token"
            );
        }
    }
    let unknown = app.call(Method::GET, "/api/v1/nothing-here", None, None).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.body["error"]["code"], "not_found");
}

/// An object with each of `names` set to null.
fn nulls(names: &BTreeSet<String>) -> Value {
    Value::Object(
        names
            .iter()
            .map(|n| (n.clone(), Value::Null))
            .collect::<Map<_, _>>(),
    )
}

fn unknown_fields(reply: &super::Reply) -> Vec<String> {
    reply.body["error"]["fields"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, message)| message.as_str().is_some_and(|m| m.starts_with("unknown field")))
        .map(|(field, _)| field.clone())
        .collect()
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn every_documented_request_field_is_read_by_the_service(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let doc = document(&app).await;
    let job = app.job(&admin, json!({"name": "j", "kind": "noop"})).await;
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{}/triggers", job["id"]),
            &admin,
            json!({"kind": "interval", "interval_secs": 60}),
        )
        .await
        .body;
    app.user("someone", Role::Viewer).await;
    let users = app.get("/api/v1/users", &admin).await.body;
    let someone = users["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "someone")
        .unwrap()["id"]
        .clone();

    let mut checked = 0;
    for (method, path, operation) in operations(&doc) {
        let Some(schema) = operation["requestBody"]["content"]["application/json"].get("schema") else {
            continue;
        };
        let id = match path.split('/').nth(3) {
            Some("jobs") => job["id"].clone(),
            Some("triggers") => trigger["id"].clone(),
            Some("users") => someone.clone(),
            _ => Value::Null,
        };
        let uri = path.replace("{id}", &id.to_string());
        let names = properties(&doc, schema);
        assert!(!names.is_empty(), "{method} {path} documents no fields");
        let reply = app
            .call(method.clone(), &uri, Some(&admin), Some(nulls(&names)))
            .await;
        assert!(
            unknown_fields(&reply).is_empty(),
            "{method} {path} documents fields the service does not know: {}",
            reply.text
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} request bodies documented");

    // The job spec, kind by kind: each variant of the documented spec against its kind.
    let spec = &doc["components"]["schemas"]["SpecBody"];
    for variant in spec["oneOf"].as_array().expect("SpecBody is a oneOf") {
        let reference = variant["$ref"].as_str().expect("a named variant");
        let kind = reference
            .trim_start_matches("#/components/schemas/")
            .trim_end_matches("SpecBody")
            .to_lowercase();
        let fields = properties(&doc, variant);
        let body = json!({"name": format!("spec-{kind}"), "kind": kind, "spec": nulls(&fields)});
        let reply = app.post("/api/v1/jobs", &admin, body).await;
        assert!(
            unknown_fields(&reply).is_empty(),
            "the {kind} spec documents fields the service does not know: {}",
            reply.text
        );
    }
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn answers_carry_the_fields_their_schemas_document(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let doc = document(&app).await;
    let job = app
        .job(
            &admin,
            json!({"name": "shape", "kind": "sleep", "spec": {"millis": 1}}),
        )
        .await;
    let run = app
        .post(&format!("/api/v1/jobs/{}/run", job["id"]), &admin, json!({}))
        .await;
    assert_eq!(run.status, StatusCode::ACCEPTED, "{}", run.text);
    let schema_of = |path: &str, method: &str, status: &str| {
        doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"].clone()
    };
    let answers = [
        (
            format!("/api/v1/jobs/{}", job["id"]),
            schema_of("/api/v1/jobs/{id}", "get", "200"),
        ),
        (
            format!("/api/v1/runs/{}", run.body["run_id"]),
            schema_of("/api/v1/runs/{id}", "get", "200"),
        ),
        (
            format!("/api/v1/runs/{}/output", run.body["run_id"]),
            schema_of("/api/v1/runs/{id}/output", "get", "200"),
        ),
        (
            "/api/v1/status".to_owned(),
            schema_of("/api/v1/status", "get", "200"),
        ),
        ("/api/v1/me".to_owned(), schema_of("/api/v1/me", "get", "200")),
    ];
    for (uri, schema) in answers {
        let reply = app.get(&uri, &admin).await;
        assert_eq!(reply.status, StatusCode::OK, "{uri}: {}", reply.text);
        let documented = properties(&doc, &schema);
        let given: BTreeSet<String> = reply.body.as_object().unwrap().keys().cloned().collect();
        assert_eq!(given, documented, "{uri} answers other fields than documented");
    }
    let missing = app.get("/api/v1/jobs/999999", &admin).await;
    let error_schema = schema_of("/api/v1/jobs/{id}", "get", "404");
    assert_eq!(
        properties(&doc, &error_schema),
        BTreeSet::from(["error".to_owned()])
    );
    let detail = properties(&doc, &doc["components"]["schemas"]["ErrorDetail"]);
    let given: BTreeSet<String> = missing.body["error"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(given, detail);
}
