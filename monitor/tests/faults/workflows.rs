//! Workflows on real executors and a monitor: a diamond A → (B, C) → D of shell jobs.
//! B and C run in parallel, D starts only after both ended and gets A's output, every
//! step gets the workflow run's parameters; C failing skips D and fails the workflow
//! run, and retrying C once it is fixed runs D once; an executor killed with SIGKILL in
//! the middle of B leaves D run exactly once.

use super::*;

use probactr_common::store::workflows::{self, RunStep, Step};
use serde_json::Value;

/// The diamond's jobs and workflow; C fails while `fix` does not exist.
async fn diamond(pool: &PgPool, b_sleeps: &str, fix: &std::path::Path) -> i64 {
    let shell = |name: &str, script: &str| {
        NewJob::new(
            name,
            JobKind::Shell,
            json!({"program": "sh", "args": ["-c", script]}),
        )
    };
    let a = shell(
        "extract",
        r#"echo "A greeting=$PROBACTR_PARAM_GREETING"; printf '{"token": "tok-%s"}' "$PROBACTR_RUN_ID" > "$PROBACTR_OUTPUT_FILE""#,
    );
    let b = shell(
        "transform-b",
        &format!(r#"echo "B greeting=$PROBACTR_PARAM_GREETING"; sleep {b_sleeps}"#),
    );
    let c = shell(
        "transform-c",
        r#"echo "C greeting=$PROBACTR_PARAM_GREETING"; sleep 2; test -e "$PROBACTR_PARAM_FIX""#,
    );
    let d = NewJob::new(
        "load",
        JobKind::Shell,
        json!({"program": "sh", "args": ["-c", r#"echo "D greeting=$PROBACTR_PARAM_GREETING token=$1 upstream=$PROBACTR_UPSTREAM""#,
                                         "sh", "{{ steps.A.output.token }}"]}),
    );
    let mut ids = Vec::new();
    for job in [a, b, c, d] {
        ids.push(jobs::insert(pool, &job).await.unwrap().id);
    }
    let step = |name: &str, job_id: i64, depends_on: &[&str], params: Value| Step {
        name: name.to_owned(),
        job_id,
        depends_on: depends_on.iter().map(|s| (*s).to_owned()).collect(),
        when: "all_success".to_owned(),
        params,
    };
    let steps = [
        step("A", ids[0], &[], json!({})),
        step("B", ids[1], &["A"], json!({})),
        step("C", ids[2], &["A"], json!({"fix": fix.display().to_string()})),
        step("D", ids[3], &["B", "C"], json!({})),
    ];
    let mut tx = pool.begin().await.unwrap();
    let workflow = workflows::create(&mut tx, "diamond", "", &steps).await.unwrap();
    let run = workflows::start_run(&mut tx, workflow.id, &json!({"greeting": "hello"}))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    run
}

/// Waits until the workflow run has ended; returns its state and steps by name.
async fn workflow_ended(pool: &PgPool, id: i64, within: Duration) -> (String, HashMap<String, RunStep>) {
    eventually(within, "the workflow run ended", || async {
        let run = workflows::get_run(pool, id).await.unwrap().unwrap();
        (run.state != "running").then_some(())
    })
    .await;
    let run = workflows::get_run(pool, id).await.unwrap().unwrap();
    let steps = workflows::run_steps(pool, id)
        .await
        .unwrap()
        .into_iter()
        .map(|step| (step.name.clone(), step))
        .collect();
    (run.state, steps)
}

/// The last attempt of a step's current run.
async fn last_attempt(pool: &PgPool, step: &RunStep) -> Run {
    let chain = step.run_id.expect("the step ran");
    let last: i64 = sqlx::query_scalar("SELECT max(id) FROM runs WHERE id = $1 OR first_run_id = $1")
        .bind(chain)
        .fetch_one(pool)
        .await
        .unwrap();
    get_run(pool, last).await
}

async fn runs_of_job(pool: &PgPool, job_id: i64) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM runs WHERE job_id = $1")
        .bind(job_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_diamond_fans_out_fans_in_skips_and_resumes_after_a_retry(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixed");
    let env = fast_env(&url, &unique_prefix("workflow-diamond"));
    let workflow_run = diamond(&pool, "2", &fix).await;
    let _executor = executor("executor", &env);

    let (state, steps) = workflow_ended(&pool, workflow_run, Duration::from_secs(60)).await;
    assert_eq!(state, "failed", "{steps:?}");
    assert_eq!(steps["A"].state, "succeeded");
    assert_eq!(steps["B"].state, "succeeded");
    assert_eq!(steps["C"].state, "failed");
    assert_eq!(steps["D"].state, "skipped");
    assert_eq!(steps["D"].run_id, None, "a skipped step never runs");
    let token = steps["A"].output.as_ref().expect("A's output")["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let b = last_attempt(&pool, &steps["B"]).await;
    let c = last_attempt(&pool, &steps["C"]).await;
    let (b_started, b_ended) = (b.started_at.unwrap(), b.finished_at.unwrap());
    let (c_started, c_ended) = (c.started_at.unwrap(), c.finished_at.unwrap());
    assert!(
        b_started < c_ended && c_started < b_ended,
        "B ({b_started}–{b_ended}) and C ({c_started}–{c_ended}) overlap"
    );
    let a = last_attempt(&pool, &steps["A"]).await;
    assert!(
        a.finished_at.unwrap() <= b_started.min(c_started),
        "B and C wait for A"
    );
    for run in [&a, &b, &c] {
        assert!(
            run.output
                .as_deref()
                .unwrap_or_default()
                .contains("greeting=hello"),
            "params reach every step: {run:?}"
        );
    }

    std::fs::write(&fix, "").unwrap();
    let mut tx = pool.begin().await.unwrap();
    let retried = workflows::retry_step(&mut tx, workflow_run, "C").await.unwrap();
    tx.commit().await.unwrap();
    assert!(matches!(retried, workflows::Retry::Queued { .. }), "{retried:?}");
    let (state, steps) = workflow_ended(&pool, workflow_run, Duration::from_secs(60)).await;
    assert_eq!(state, "succeeded", "{steps:?}");
    assert_eq!(steps["C"].run_ids.len(), 2, "C ran twice: {:?}", steps["C"]);
    assert_eq!(steps["D"].state, "succeeded");
    assert_eq!(runs_of_job(&pool, steps["D"].job_id).await, 1, "D ran once");
    let d = last_attempt(&pool, &steps["D"]).await;
    let printed = d.output.unwrap_or_default();
    assert!(printed.contains("greeting=hello"), "{printed}");
    assert!(
        printed.contains(&format!("token={token}")),
        "A's output reaches D: {printed}"
    );
    assert!(
        printed.contains(&format!("\"token\":\"{token}\"")),
        "and its upstream: {printed}"
    );
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn an_executor_killed_mid_step_leaves_the_next_step_run_once(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let dir = tempfile::tempdir().unwrap();
    let fix = dir.path().join("fixed");
    std::fs::write(&fix, "").unwrap();
    let env = fast_env(&url, &unique_prefix("workflow-kill"));
    let workflow_run = diamond(&pool, "6", &fix).await;
    let executors: Vec<_> = (0..2).map(|i| executor(&format!("executor-{i}"), &env)).collect();
    let _monitor = monitor("monitor", &env);

    let b_run = eventually(Duration::from_secs(30), "B runs", || async {
        let steps = workflows::run_steps(&pool, workflow_run).await.unwrap();
        steps.into_iter().find(|s| s.name == "B").and_then(|s| s.run_id)
    })
    .await;
    let pid = eventually(Duration::from_secs(30), "B's first attempt runs", || async {
        executor_pid_of_run(&pool, b_run).await
    })
    .await;
    let victim = executors
        .iter()
        .position(|e| e.pid() == pid)
        .expect("one of ours");
    executors[victim].signal(support::SIGKILL);

    let (state, steps) = workflow_ended(&pool, workflow_run, Duration::from_secs(90)).await;
    assert_eq!(state, "succeeded", "{steps:?}");
    assert_eq!(
        get_run(&pool, b_run).await.state,
        RunState::Abandoned,
        "B's first attempt died with its executor"
    );
    assert_eq!(
        steps["B"].run_ids,
        vec![b_run],
        "B was taken over, not started again"
    );
    for name in ["A", "B", "C", "D"] {
        assert_eq!(steps[name].state, "succeeded", "{name}: {:?}", steps[name]);
    }
    assert_eq!(
        runs_of_job(&pool, steps["D"].job_id).await,
        1,
        "D ran exactly once"
    );
    assert_eq!(steps["D"].run_ids.len(), 1);
}

/// The runs of a job, oldest first.
async fn runs_of(pool: &PgPool, job_id: i64) -> Vec<Run> {
    sqlx::query_as("SELECT * FROM runs WHERE job_id = $1 ORDER BY id")
        .bind(job_id)
        .fetch_all(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn child_jobs_run_once_after_their_parent_with_its_params(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let env = fast_env(&url, &unique_prefix("child-jobs"));
    let shell = |name: &str, script: &str| {
        NewJob::new(
            name,
            JobKind::Shell,
            json!({"program": "sh", "args": ["-c", script]}),
        )
    };
    let report = r#"echo "parent=$PROBACTR_PARENT_RUN_ID region=$PROBACTR_PARAM_REGION""#;
    let on_success = jobs::insert(&pool, &shell("after-success", report))
        .await
        .unwrap();
    let on_failure = jobs::insert(&pool, &shell("after-failure", report))
        .await
        .unwrap();
    let parent = jobs::insert(&pool, &shell("parent", r#"test "$PROBACTR_PARAM_OUTCOME" = ok"#))
        .await
        .unwrap();
    let children = jobs::JobChildren {
        on_success: vec![on_success.id],
        on_failure: vec![on_failure.id],
        on_finish: vec![],
    };
    assert!(jobs::set_children(&pool, parent.id, &children).await.unwrap());
    let _executor = executor("executor", &env);

    let mut parents = Vec::new();
    for outcome in ["ok", "broken"] {
        let run = runs::queue_now(&pool, parent.id).await.unwrap();
        probactr_common::store::run_inputs::set_params(
            &pool,
            run.id,
            &json!({"outcome": outcome, "region": "eu"}),
        )
        .await
        .unwrap();
        parents.push(run.id);
        let child = if outcome == "ok" { &on_success } else { &on_failure };
        eventually(Duration::from_secs(30), "the child ran", || async {
            runs_of(&pool, child.id)
                .await
                .iter()
                .any(|run| run.state.is_terminal())
                .then_some(())
        })
        .await;
    }
    // Time for a doubled child to show up.
    tokio::time::sleep(Duration::from_secs(2)).await;

    assert_eq!(get_run(&pool, parents[0]).await.state, RunState::Succeeded);
    assert_eq!(get_run(&pool, parents[1]).await.state, RunState::Failed);
    for (child, parent_run) in [(&on_success, parents[0]), (&on_failure, parents[1])] {
        let runs = runs_of(&pool, child.id).await;
        assert_eq!(runs.len(), 1, "{} ran once: {runs:?}", child.name);
        assert_eq!(runs[0].state, RunState::Succeeded);
        let printed = runs[0].output.clone().unwrap_or_default();
        assert!(
            printed.contains(&format!("parent={parent_run} region=eu")),
            "the child sees its parent run and the parent's params: {printed}"
        );
    }
}

#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_workflow_trigger_starts_one_workflow_run_per_instant(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = pool_and_url(pool_options, options).await;
    let env = fast_env(&url, &unique_prefix("workflow-trigger"));
    let job = jobs::insert(
        &pool,
        &NewJob::new(
            "report",
            JobKind::Shell,
            json!({"program": "sh", "args": ["-c", r#"echo "region=$PROBACTR_PARAM_REGION""#]}),
        ),
    )
    .await
    .unwrap();
    let step = Step {
        name: "report".to_owned(),
        job_id: job.id,
        depends_on: vec![],
        when: "all_success".to_owned(),
        params: json!({}),
    };
    let mut tx = pool.begin().await.unwrap();
    let workflow = workflows::create(&mut tx, "every-two-seconds", "", &[step])
        .await
        .unwrap();
    // Created in this transaction, the trigger's instants count from its now().
    let now = probactr_common::store::db_now(&mut *tx).await.unwrap();
    let every_two = NewTrigger::interval(2);
    let first = every_two
        .schedule(now, Some(probactr_common::schedule::hash_seed(workflow.id)))
        .unwrap()
        .first_at_or_after(now + TimeDelta::seconds(1));
    let trigger =
        workflows::create_trigger(&mut *tx, workflow.id, &every_two, &json!({"region": "eu"}), first)
            .await
            .unwrap();
    tx.commit().await.unwrap();
    // Two executors fire at once: each instant still starts one workflow run.
    let _executors: Vec<_> = (0..2).map(|i| executor(&format!("executor-{i}"), &env)).collect();

    let instants = || async {
        sqlx::query_scalar::<_, DateTime<Utc>>(
            "SELECT scheduled_at FROM workflow_runs WHERE trigger_id = $1 ORDER BY scheduled_at",
        )
        .bind(trigger.id)
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    eventually(Duration::from_secs(30), "four instants fired", || async {
        (instants().await.len() >= 4).then_some(())
    })
    .await;
    let fired = instants().await;
    for pair in fired.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            TimeDelta::seconds(2),
            "one run per instant, none lost: {fired:?}"
        );
    }
    let runs = workflows::runs_of(&pool, workflow.id, 100).await.unwrap();
    assert_eq!(runs.len(), fired.len(), "no run started by hand");
    let first = runs.last().unwrap();
    let (state, steps) = workflow_ended(&pool, first.id, Duration::from_secs(30)).await;
    assert_eq!(state, "succeeded", "{steps:?}");
    let run = last_attempt(&pool, &steps["report"]).await;
    assert!(
        run.output.as_deref().unwrap_or_default().contains("region=eu"),
        "the trigger's params reach the step: {run:?}"
    );
}
