//! Namespaces, roles per namespace, scoped tokens, and isolation: whatever is in a
//! namespace where the caller has no role is never shown, counted or reachable.

use super::*;

/// Creates namespace `name` as the cluster admin `admin`.
async fn namespace(app: &TestApp, admin: &str, name: &str) {
    let made = app.post("/api/v1/namespaces", admin, json!({"name": name})).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn cluster_admins_manage_namespaces_quotas_and_roles(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let olga = app.user("olga", Role::Operator).await;

    // Bad names and values are named; only cluster admins create.
    assert_field(
        &app.post("/api/v1/namespaces", &admin, json!({"name": "Pay Ments"}))
            .await,
        "name",
    );
    assert_field(
        &app.post(
            "/api/v1/namespaces",
            &admin,
            json!({"name": "pay", "max_running": 0}),
        )
        .await,
        "max_running",
    );
    assert_eq!(
        app.post("/api/v1/namespaces", &olga, json!({"name": "pay"}))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    namespace(&app, &admin, "payments").await;
    let quota = app
        .patch(
            "/api/v1/namespaces/payments",
            &admin,
            json!({"max_jobs": 1, "description": "team pay"}),
        )
        .await;
    assert_eq!(quota.status, StatusCode::OK, "{}", quota.text);
    assert_eq!(quota.body["max_jobs"], 1);
    assert_field(
        &app.patch("/api/v1/namespaces/payments", &admin, json!({"name": "other"}))
            .await,
        "name",
    );

    // max_jobs refuses the job past it.
    let first = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "one", "kind": "noop", "namespace": "payments"}),
        )
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    assert_eq!(first.body["namespace"], "payments");
    let second = app
        .post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "two", "kind": "noop", "namespace": "payments"}),
        )
        .await;
    assert_eq!(second.status, StatusCode::CONFLICT, "{}", second.text);
    let none = app
        .patch("/api/v1/namespaces/payments", &admin, json!({"max_jobs": null}))
        .await;
    assert_eq!(none.body["max_jobs"], Value::Null, "{}", none.text);
    // A namespace that does not exist is a field error for whoever sees every namespace.
    assert_field(
        &app.post(
            "/api/v1/jobs",
            &admin,
            json!({"name": "x", "kind": "noop", "namespace": "nope"}),
        )
        .await,
        "namespace",
    );
    // Moving a job is refused.
    let id = first.body["id"].as_i64().unwrap();
    assert_field(
        &app.patch(
            &format!("/api/v1/jobs/{id}"),
            &admin,
            json!({"version": first.body["version"], "namespace": "default"}),
        )
        .await,
        "namespace",
    );

    // A namespace holding objects is not deleted, and says what is left.
    let refused = app
        .call(Method::DELETE, "/api/v1/namespaces/payments", Some(&admin), None)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert!(
        refused.text.contains("namespace payments still holds 1 job"),
        "{}",
        refused.text
    );

    // Roles: unknown namespaces are named; the last cluster admin stays one.
    let olga_id = store::users::by_name(app.pool(), "olga")
        .await
        .unwrap()
        .unwrap()
        .id;
    let uri = format!("/api/v1/users/{olga_id}/roles");
    let bad = app
        .call(
            Method::PUT,
            &uri,
            Some(&admin),
            Some(json!({"cluster_admin": false, "namespaces": {"nope": "viewer"}})),
        )
        .await;
    assert_field(&bad, "namespaces.nope");
    let set = app
        .call(
            Method::PUT,
            &uri,
            Some(&admin),
            Some(json!({"cluster_admin": false, "namespaces": {"payments": "operator"}})),
        )
        .await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    let read = app.get(&uri, &admin).await;
    assert_eq!(
        read.body,
        json!({"cluster_admin": false, "namespaces": {"payments": "operator"}})
    );
    assert_eq!(app.get(&uri, &olga).await.status, StatusCode::FORBIDDEN);
    let me = app.get("/api/v1/me", &olga).await;
    assert_eq!(
        me.body["namespaces"],
        json!({"payments": "operator"}),
        "{}",
        me.text
    );
    // Olga now lists payments only, and no longer sees default's objects.
    let listed = app.get("/api/v1/namespaces", &olga).await;
    assert_eq!(listed.body["total"], 1, "{}", listed.text);
    let admin_id = app.get("/api/v1/me", &admin).await.body["id"].as_i64().unwrap();
    let last = app
        .call(
            Method::PUT,
            &format!("/api/v1/users/{admin_id}/roles"),
            Some(&admin),
            Some(json!({"cluster_admin": false, "namespaces": {"default": "admin"}})),
        )
        .await;
    assert_eq!(last.status, StatusCode::CONFLICT, "{}", last.text);

    // Every change was audited, with its namespace.
    let audit = app.get("/api/v1/audit?namespace=payments", &admin).await;
    assert!(audit.body["total"].as_i64().unwrap() >= 1, "{}", audit.text);
    assert!(audit.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|entry| entry["namespace"] == "payments"));
    let namespace_changes = app.get("/api/v1/audit?action=namespace", &admin).await;
    assert_eq!(namespace_changes.body["total"], 3, "{}", namespace_changes.text);
}

/// What namespace `bravo` holds, made by the cluster admin: names containing `bravo` so
/// that any leak shows.
struct Bravo {
    job: i64,
    trigger: i64,
    run: i64,
    workflow: i64,
    workflow_run: i64,
    workflow_trigger: i64,
    channel: i64,
    rule: i64,
}

async fn fill_bravo(app: &TestApp, admin: &str) -> Bravo {
    let job = app
        .job(
            admin,
            json!({"name": "bravo-job", "kind": "noop", "namespace": "bravo"}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let trigger = app
        .post(
            &format!("/api/v1/jobs/{job}/triggers"),
            admin,
            json!({"kind": "interval", "interval_secs": 3600}),
        )
        .await;
    assert_eq!(trigger.status, StatusCode::CREATED, "{}", trigger.text);
    let run = app
        .post(&format!("/api/v1/jobs/{job}/run"), admin, json!({}))
        .await;
    assert_eq!(run.status, StatusCode::ACCEPTED, "{}", run.text);
    let workflow = app
        .post(
            "/api/v1/workflows",
            admin,
            json!({"name": "bravo-flow", "namespace": "bravo", "steps": [{"name": "first", "job_id": job}]}),
        )
        .await;
    assert_eq!(workflow.status, StatusCode::CREATED, "{}", workflow.text);
    let workflow_id = workflow.body["id"].as_i64().unwrap();
    let workflow_run = app
        .post(&format!("/api/v1/workflows/{workflow_id}/run"), admin, json!({}))
        .await;
    assert_eq!(workflow_run.status, StatusCode::ACCEPTED, "{}", workflow_run.text);
    let workflow_trigger = app
        .post(
            &format!("/api/v1/workflows/{workflow_id}/triggers"),
            admin,
            json!({"kind": "interval", "interval_secs": 3600}),
        )
        .await;
    assert_eq!(
        workflow_trigger.status,
        StatusCode::CREATED,
        "{}",
        workflow_trigger.text
    );
    let channel = app
        .post(
            "/api/v1/channels",
            admin,
            json!({"name": "bravo-mail", "kind": "email", "namespace": "bravo",
                   "config": {"to": ["ops@bravo.example"]}}),
        )
        .await;
    assert_eq!(channel.status, StatusCode::CREATED, "{}", channel.text);
    assert_eq!(channel.body["namespace"], "bravo", "{}", channel.text);
    let channel = channel.body["id"].as_i64().unwrap();
    let rule = app
        .post(
            "/api/v1/alert-rules",
            admin,
            json!({"name": "bravo-failures", "namespace": "bravo", "events": ["run_failed"],
                   "job_id": job, "channel_ids": [channel]}),
        )
        .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{}", rule.text);
    assert_eq!(rule.body["namespace"], "bravo", "{}", rule.text);
    Bravo {
        channel,
        rule: rule.body["id"].as_i64().unwrap(),
        job,
        trigger: trigger.body["id"].as_i64().unwrap(),
        run: run.body["run_id"].as_i64().unwrap(),
        workflow: workflow_id,
        workflow_run: workflow_run.body["workflow_run_id"].as_i64().unwrap(),
        workflow_trigger: workflow_trigger.body["id"].as_i64().unwrap(),
    }
}

/// A route of the OpenAPI document with its parameters filled with bravo's objects.
fn filled(path: &str, bravo: &Bravo) -> String {
    let id = if path.starts_with("/api/v1/jobs/") {
        bravo.job.to_string()
    } else if path.starts_with("/api/v1/triggers/") {
        bravo.trigger.to_string()
    } else if path.starts_with("/api/v1/runs/") {
        bravo.run.to_string()
    } else if path.starts_with("/api/v1/workflows/") {
        bravo.workflow.to_string()
    } else if path.starts_with("/api/v1/workflow-runs/") {
        bravo.workflow_run.to_string()
    } else if path.starts_with("/api/v1/channels/") {
        bravo.channel.to_string()
    } else if path.starts_with("/api/v1/alert-rules/") {
        bravo.rule.to_string()
    } else if path.starts_with("/api/v1/executors/") {
        "00000000-0000-0000-0000-000000000001".to_owned()
    } else {
        "1".to_owned()
    };
    path.replace("{id}", &id)
        .replace("{version}", "1")
        .replace("{trigger_id}", &bravo.workflow_trigger.to_string())
        .replace(
            "{name}",
            if path.starts_with("/api/v1/namespaces/") {
                "bravo"
            } else {
                "first"
            },
        )
}

/// Routes whose objects live in namespaces: a bravo id there must answer 404.
const NAMESPACED: &[&str] = &[
    "/api/v1/jobs/",
    "/api/v1/triggers/",
    "/api/v1/runs/",
    "/api/v1/workflows/",
    "/api/v1/workflow-runs/",
    "/api/v1/namespaces/",
];

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_role_in_one_namespace_reveals_nothing_of_another(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    namespace(&app, &admin, "alpha").await;
    namespace(&app, &admin, "bravo").await;
    let bravo = fill_bravo(&app, &admin).await;
    let alice = app.user_in("alice", &[("alpha", Role::Admin)]).await;
    app.job(
        &alice,
        json!({"name": "alpha-job", "kind": "noop", "namespace": "alpha"}),
    )
    .await;

    // Every route of the document, as alice, with bravo's ids where a route takes one.
    let document = app.get("/api/v1/openapi.json", &admin).await.body;
    let paths = document["paths"].as_object().expect("paths").clone();
    let mut probed = 0;
    for (path, operations) in &paths {
        if !path.starts_with("/api/v1/") || path.starts_with("/api/v1/auth/") {
            continue;
        }
        for method in operations.as_object().unwrap().keys() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let takes_id = path.contains('{');
            if !takes_id && method != Method::GET {
                continue;
            }
            let uri = filled(path, &bravo);
            let body = (method != Method::GET && method != Method::DELETE).then(|| json!({}));
            let reply = app.call(method.clone(), &uri, Some(&alice), body).await;
            probed += 1;
            assert!(
                !reply.text.contains("bravo-"),
                "{method} {uri} shows bravo's objects: {}",
                reply.text
            );
            if takes_id && NAMESPACED.iter().any(|prefix| path.starts_with(prefix)) {
                assert_eq!(
                    reply.status,
                    StatusCode::NOT_FOUND,
                    "{method} {uri} must answer 404: {}",
                    reply.text
                );
            }
        }
    }
    assert!(probed > 60, "only {probed} routes probed");
    // Alice's probes changed nothing of bravo's alerts, and named they are unknown to her.
    for (path, id) in [("channels", bravo.channel), ("alert-rules", bravo.rule)] {
        let uri = format!("/api/v1/{path}/{id}");
        assert_eq!(app.get(&uri, &admin).await.status, StatusCode::OK, "{uri}");
        assert_eq!(app.get(&uri, &alice).await.status, StatusCode::NOT_FOUND, "{uri}");
    }
    // Alice makes alert rules and channels in her own namespace, and cannot move them.
    let mine = app
        .post(
            "/api/v1/channels",
            &alice,
            json!({"name": "alpha-mail", "kind": "email", "namespace": "alpha",
                   "config": {"to": ["ops@alpha.example"]}}),
        )
        .await;
    assert_eq!(mine.status, StatusCode::CREATED, "{}", mine.text);
    let moved = app
        .call(
            Method::PUT,
            &format!("/api/v1/channels/{}", mine.body["id"]),
            Some(&alice),
            Some(
                json!({"name": "alpha-mail", "kind": "email", "namespace": "default",
                        "config": {"to": ["ops@alpha.example"]}}),
            ),
        )
        .await;
    assert_field(&moved, "namespace");
    let rule = app
        .post(
            "/api/v1/alert-rules",
            &alice,
            json!({"name": "alpha-failures", "namespace": "alpha", "events": ["run_failed"],
                   "channel_ids": [mine.body["id"]]}),
        )
        .await;
    assert_eq!(rule.status, StatusCode::CREATED, "{}", rule.text);
    // Bravo's channel is unknown to a rule of alpha.
    let borrowed = app
        .post(
            "/api/v1/alert-rules",
            &alice,
            json!({"name": "borrowing", "namespace": "alpha", "events": ["run_failed"],
                   "channel_ids": [bravo.channel]}),
        )
        .await;
    assert_eq!(
        borrowed.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        borrowed.text
    );
    let channels = app.get("/api/v1/channels", &alice).await;
    assert_eq!(channels.body["total"], 1, "{}", channels.text);

    // The lists show alpha's objects, and counts only those.
    let jobs = app.get("/api/v1/jobs", &alice).await;
    assert_eq!(jobs.body["total"], 1, "{}", jobs.text);
    assert_eq!(
        app.get("/api/v1/jobs?namespace=bravo", &alice).await.body["total"],
        0
    );
    assert_eq!(app.get("/api/v1/runs", &alice).await.body["total"], 0);
    // A filter naming bravo's job finds nothing either.
    let by_job = app
        .get(&format!("/api/v1/runs?job_id={}", bravo.job), &alice)
        .await;
    assert_eq!(by_job.body["total"], 0, "{}", by_job.text);

    // Creating in bravo is a 404 for alice, as for a namespace that does not exist.
    let elsewhere = app
        .post(
            "/api/v1/jobs",
            &alice,
            json!({"name": "x", "kind": "noop", "namespace": "bravo"}),
        )
        .await;
    assert_eq!(elsewhere.status, StatusCode::NOT_FOUND, "{}", elsewhere.text);
    // A workflow naming bravo's job does not find it.
    let flow = app
        .post(
            "/api/v1/workflows",
            &alice,
            json!({"name": "f", "namespace": "alpha", "steps": [{"name": "s", "job_id": bravo.job}]}),
        )
        .await;
    assert_eq!(flow.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", flow.text);

    // The admin's pages alike.
    let browser = app.browser("alice").await;
    for page in [
        "/",
        "/jobs",
        "/runs",
        "/workflows",
        "/audit",
        "/alerts",
        "/executors",
    ] {
        let reply = app.page(page, &browser.cookie).await;
        assert!(
            !reply.text.contains("bravo-job"),
            "{page} shows bravo: {}",
            reply.text
        );
        assert!(!reply.text.contains("bravo-flow"), "{page} shows bravo");
    }
    for page in [
        format!("/jobs/{}", bravo.job),
        format!("/runs/{}", bravo.run),
        format!("/workflows/{}", bravo.workflow),
        format!("/runs/{}/output.txt", bravo.run),
    ] {
        let reply = app.page(&page, &browser.cookie).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{page}: {}", reply.text);
    }
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn scoped_tokens_stay_in_their_scope(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    namespace(&app, &admin, "alpha").await;
    namespace(&app, &admin, "bravo").await;
    let ci_job = app
        .job(
            &admin,
            json!({"name": "deploy", "kind": "noop", "namespace": "alpha"}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let other = app
        .job(
            &admin,
            json!({"name": "bravo-job", "kind": "noop", "namespace": "bravo"}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let carol = app
        .user_in("carol", &[("alpha", Role::Operator), ("bravo", Role::Viewer)])
        .await;

    // Never more than the user's own.
    let greedy = app
        .post(
            "/api/v1/tokens",
            &carol,
            json!({"namespaces": ["alpha"], "role": "admin"}),
        )
        .await;
    assert_eq!(greedy.status, StatusCode::FORBIDDEN, "{}", greedy.text);
    assert_field(
        &app.post(
            "/api/v1/tokens",
            &carol,
            json!({"namespaces": ["nowhere"], "role": "viewer"}),
        )
        .await,
        "namespaces.nowhere",
    );

    // A CI token for alpha runs alpha's jobs and nothing else.
    let made = app
        .post(
            "/api/v1/tokens",
            &carol,
            json!({"name": "ci", "namespaces": ["alpha"], "role": "operator"}),
        )
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    let ci = made.body["token"].as_str().unwrap().to_owned();
    let run = app
        .post(&format!("/api/v1/jobs/{ci_job}/run"), &ci, json!({}))
        .await;
    assert_eq!(run.status, StatusCode::ACCEPTED, "{}", run.text);
    assert_eq!(
        app.get(&format!("/api/v1/jobs/{other}"), &ci).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(app.get("/api/v1/jobs", &ci).await.body["total"], 1);
    assert_eq!(app.get("/api/v1/users", &ci).await.status, StatusCode::FORBIDDEN);
    // Nor may it make a wider token.
    assert_eq!(
        app.post("/api/v1/tokens", &ci, json!({"name": "wider"}))
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let shell = app
        .post(
            "/api/v1/jobs",
            &ci,
            json!({"name": "sh", "kind": "shell", "namespace": "alpha", "spec": {"program": "true"}}),
        )
        .await;
    assert_eq!(shell.status, StatusCode::FORBIDDEN, "{}", shell.text);

    // Lowering the user's role lowers the token at its next request.
    let carol_id = store::users::by_name(app.pool(), "carol")
        .await
        .unwrap()
        .unwrap()
        .id;
    let lowered = app
        .call(
            Method::PUT,
            &format!("/api/v1/users/{carol_id}/roles"),
            Some(&admin),
            Some(json!({"cluster_admin": false, "namespaces": {"alpha": "viewer"}})),
        )
        .await;
    assert_eq!(lowered.status, StatusCode::OK, "{}", lowered.text);
    let refused = app
        .post(&format!("/api/v1/jobs/{ci_job}/run"), &ci, json!({}))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);

    // A cluster admin's scoped token is no cluster admin.
    let scoped = app
        .post(
            "/api/v1/tokens",
            &admin,
            json!({"namespaces": ["alpha"], "role": "admin"}),
        )
        .await;
    let scoped = scoped.body["token"].as_str().unwrap().to_owned();
    assert_eq!(
        app.get("/api/v1/users", &scoped).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        app.get(&format!("/api/v1/jobs/{other}"), &scoped).await.status,
        StatusCode::NOT_FOUND
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_job_names_secrets_of_its_own_namespace_only(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    namespace(&app, &admin, "alpha").await;
    namespace(&app, &admin, "bravo").await;
    sqlx::query(
        "INSERT INTO secrets (namespace, name, key_id, nonce, ciphertext, updated_by)
         VALUES ('bravo', 'api_token', 'k', '\\x00', '\\x00', 'test')",
    )
    .execute(app.pool())
    .await
    .unwrap();
    let body = |namespace: &str| {
        json!({"name": "call", "kind": "shell", "namespace": namespace,
               "spec": {"program": "curl", "args": ["-H", "token: {{ secrets.api_token }}"]}})
    };
    let refused = app.post("/api/v1/jobs", &admin, body("alpha")).await;
    assert_field(&refused, "spec");
    assert!(refused.text.contains("api_token"), "{}", refused.text);
    let made = app.post("/api/v1/jobs", &admin, body("bravo")).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn definitions_apply_and_export_one_namespace(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    namespace(&app, &admin, "alpha").await;
    let file = "namespace: alpha\njobs:\n  - name: nightly\n    kind: noop\n";
    let applied = app
        .post(
            "/api/v1/definitions/apply",
            &admin,
            json!({"files": {"a.yaml": file}}),
        )
        .await;
    assert_eq!(applied.status, StatusCode::OK, "{}", applied.text);
    assert_eq!(
        app.get("/api/v1/jobs?namespace=alpha", &admin).await.body["total"],
        1
    );
    assert_eq!(
        app.get("/api/v1/jobs?namespace=default", &admin).await.body["total"],
        0
    );
    // A file naming another namespace than the request's is refused.
    let crossed = app
        .post(
            "/api/v1/definitions/apply?namespace=default",
            &admin,
            json!({"files": {"a.yaml": file}}),
        )
        .await;
    assert_eq!(
        crossed.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        crossed.text
    );
    // Pruning default leaves alpha alone.
    let pruned = app
        .post(
            "/api/v1/definitions/apply?namespace=default&prune=true",
            &admin,
            json!({"files": {"empty.yaml": "jobs: []\n"}}),
        )
        .await;
    assert_eq!(pruned.status, StatusCode::OK, "{}", pruned.text);
    assert_eq!(
        app.get("/api/v1/jobs?namespace=alpha", &admin).await.body["total"],
        1
    );

    // The admin's download is of the namespace chosen in its header, and says so.
    let b = app.browser("admin").await;
    let chosen = format!("{}; probactr_namespace=alpha", b.cookie);
    let export = app.page("/definitions.yaml", &chosen).await;
    assert_eq!(export.status, StatusCode::OK, "{}", export.text);
    assert!(
        export.text.lines().any(|line| line == "namespace: alpha"),
        "{}",
        export.text
    );
    assert!(export.text.contains("nightly"), "{}", export.text);
    let default = app.page("/definitions.yaml", &b.cookie).await;
    assert!(
        default.text.lines().any(|line| line == "namespace: default"),
        "{}",
        default.text
    );
    assert!(!default.text.contains("nightly"), "{}", default.text);
}
