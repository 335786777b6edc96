//! `GET /api/v1/dashboard`: ended runs per bucket by outcome, the slowest and the most
//! failing jobs, over 1 h, 24 h and 7 d.

use super::*;

/// Inserts an ended run of `job_id` in `state` that ended `ended_secs_ago` seconds ago
/// after running `took_ms` (None: it never started); answers when it ended.
async fn ended_run(
    pool: &PgPool,
    job_id: i64,
    state: &str,
    ended_secs_ago: f64,
    took_ms: Option<i64>,
) -> chrono::DateTime<chrono::Utc> {
    sqlx::query_scalar(
        "INSERT INTO runs (job_id, scheduled_at, state, queued_at, started_at, finished_at)
         SELECT $1, at.t - interval '1 second' - ran.took, $2, at.t - interval '1 second' - ran.took,
                CASE WHEN $4::bigint IS NULL THEN NULL ELSE at.t - ran.took END, at.t
         FROM (SELECT now() - make_interval(secs => $3) AS t) AS at,
              (SELECT make_interval(secs => coalesce($4::bigint, 0)::float8 / 1000) AS took) AS ran
         RETURNING finished_at",
    )
    .bind(job_id)
    .bind(state)
    .bind(ended_secs_ago)
    .bind(took_ms)
    .fetch_one(pool)
    .await
    .unwrap()
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_name"].as_str().unwrap())
        .collect()
}

/// The bucket's (succeeded, failed, not_run) counts.
fn counts(bucket: &Value) -> (i64, i64, i64) {
    let n = |key: &str| bucket[key].as_i64().unwrap();
    (n("succeeded"), n("failed"), n("not_run"))
}

/// The sums of every bucket's counts.
fn totals(body: &Value) -> (i64, i64, i64) {
    body["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(counts)
        .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn dashboard_counts_outcomes_per_bucket_and_ranks_jobs(pool: PgPool) {
    let app = TestApp::new(pool);
    let admin = app.admin().await;
    let viewer = app.user("watcher", Role::Viewer).await;
    let id = |job: Value| job["id"].as_i64().unwrap();
    let slow = id(app.job(&admin, noop("slow")).await);
    let flaky = id(app.job(&admin, noop("flaky")).await);
    let quiet = id(app.job(&admin, noop("quiet")).await);
    let old = id(app.job(&admin, noop("old")).await);
    let db = app.pool();

    // Ten minutes ago: slow's four runs, flaky's one success and three failures, quiet's
    // two runs that did not run.
    let ten_minutes_ago = 600.0;
    let ended = ended_run(db, slow, "succeeded", ten_minutes_ago, Some(1000)).await;
    for took in [2000, 10_000] {
        ended_run(db, slow, "succeeded", ten_minutes_ago, Some(took)).await;
    }
    ended_run(db, slow, "failed", ten_minutes_ago, Some(500)).await;
    ended_run(db, flaky, "succeeded", ten_minutes_ago, Some(100)).await;
    for state in ["failed", "failed", "timed_out"] {
        ended_run(db, flaky, state, ten_minutes_ago, Some(100)).await;
    }
    ended_run(db, quiet, "skipped", ten_minutes_ago, None).await;
    ended_run(db, quiet, "cancelled", ten_minutes_ago, None).await;
    // Older failures, seen only by the longer ranges.
    ended_run(db, old, "failed", 2.0 * 3600.0, Some(50)).await;
    ended_run(db, old, "failed", 3.0 * 86_400.0, Some(50)).await;
    // A run that has not ended is in no bucket.
    let queued = app
        .post(&format!("/api/v1/jobs/{quiet}/run"), &admin, json!({}))
        .await;
    assert_eq!(queued.status, StatusCode::ACCEPTED, "{}", queued.text);

    let hour = app.get("/api/v1/dashboard", &viewer).await;
    assert_eq!(hour.status, StatusCode::OK, "{}", hour.text);
    let body = &hour.body;
    assert_eq!(
        (body["range"].as_str(), body["bucket_secs"].as_i64()),
        (Some("1h"), Some(60))
    );
    let buckets = body["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 60);
    let start = |b: &Value| {
        b["start"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    };
    assert!(buckets
        .windows(2)
        .all(|w| start(&w[1]) - start(&w[0]) == chrono::TimeDelta::minutes(1)));
    let holding = buckets
        .iter()
        .find(|b| start(b) <= ended && ended < start(b) + chrono::TimeDelta::minutes(1))
        .unwrap_or_else(|| panic!("no bucket holds {ended}: {body}"));
    assert_eq!(counts(holding), (4, 4, 2), "{holding}");
    assert_eq!(totals(body), (4, 4, 2), "only that bucket has runs");

    // Slowest by p95: slow's 500, 1000, 2000, 10000 ms give 2000 + 0.85 × 8000.
    assert_eq!(names(&body["slowest"]), ["slow", "flaky"], "{body}");
    let slowest = &body["slowest"][0];
    assert_eq!(
        (
            slowest["runs"].clone(),
            slowest["p95_ms"].clone(),
            slowest["avg_ms"].clone(),
            slowest["max_ms"].clone()
        ),
        (json!(4), json!(8800), json!(3375), json!(10000))
    );
    // Most failing: flaky (3 of 4), then slow (1 of 4); quiet's runs did not run.
    assert_eq!(names(&body["failing"]), ["flaky", "slow"], "{body}");
    let failing = &body["failing"][0];
    assert_eq!(
        (
            failing["failures"].clone(),
            failing["runs"].clone(),
            failing["failure_ratio"].clone()
        ),
        (json!(3), json!(4), json!(0.75))
    );

    let day = app.get("/api/v1/dashboard?range=24h", &viewer).await;
    assert_eq!(day.status, StatusCode::OK, "{}", day.text);
    assert_eq!(
        (
            day.body["bucket_secs"].as_i64(),
            day.body["buckets"].as_array().unwrap().len()
        ),
        (Some(900), 96)
    );
    assert_eq!(totals(&day.body), (4, 5, 2));
    // old failed 1 of 1, slow 1 of 4: the ratio ranks them.
    assert_eq!(names(&day.body["failing"]), ["flaky", "old", "slow"]);

    let week = app.get("/api/v1/dashboard?range=7d", &viewer).await;
    assert_eq!(week.status, StatusCode::OK, "{}", week.text);
    assert_eq!(
        (
            week.body["bucket_secs"].as_i64(),
            week.body["buckets"].as_array().unwrap().len()
        ),
        (Some(7200), 84)
    );
    assert_eq!(totals(&week.body), (4, 6, 2));
    assert_eq!(
        names(&week.body["failing"]),
        ["flaky", "old", "slow"],
        "old: 2 of 2"
    );

    for bad in ["2h", "all", "1H"] {
        let reply = app.get(&format!("/api/v1/dashboard?range={bad}"), &viewer).await;
        assert_eq!(
            reply.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            reply.text
        );
        assert_field(&reply, "range");
        assert!(
            field_errors(&reply)["range"].contains("1h, 24h, 7d"),
            "{}",
            reply.text
        );
    }
    assert_eq!(
        app.call(Method::GET, "/api/v1/dashboard", None, None)
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
}
