//! Where runs go: cordon and drain, labels and selectors, priorities, trigger caps.

use probactr_common::labels::parse_labels;
use probactr_common::store::processes::Routing;

use super::*;

/// A registered, alive executor carrying `labels` (`zone=a,gpu=1`).
async fn labelled_executor(pool: &PgPool, labels: &str) -> Uuid {
    let mut who = Registration::this_process(ProcessRole::Executor, 4);
    who.labels = parse_labels(labels).expect("labels");
    processes::register(pool, &who).await.expect("register executor");
    who.id
}

fn ids(runs: &[Run]) -> Vec<i64> {
    runs.iter().map(|r| r.id).collect()
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_cordoned_executor_claims_nothing_until_uncordoned(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "work", |_| {}).await;
    let queued = runs::queue_now(&pool, job.id).await.expect("queue");

    let cordoned = processes::route(&pool, ex, Routing::Cordon)
        .await
        .expect("cordon")
        .expect("a live executor");
    assert!(cordoned.cordoned && !cordoned.drain_requested);
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::Alive,
        "a cordon is not a drain"
    );

    processes::route(&pool, ex, Routing::Uncordon)
        .await
        .expect("uncordon")
        .expect("a live executor");
    assert_eq!(
        ids(&runs::claim_queued(&pool, ex, 10).await.expect("claim")),
        vec![queued.id]
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_drain_cordons_and_comes_with_the_next_heartbeat(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "work", |_| {}).await;
    runs::queue_now(&pool, job.id).await.expect("queue");

    let draining = processes::route(&pool, ex, Routing::Drain)
        .await
        .expect("drain")
        .expect("a live executor");
    assert!(draining.cordoned && draining.drain_requested);
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::DrainRequested
    );
    let still = processes::route(&pool, ex, Routing::Uncordon)
        .await
        .expect("uncordon")
        .expect("a live executor");
    assert!(
        still.cordoned && still.drain_requested,
        "uncordoning a draining executor leaves it draining"
    );

    // Only live executors are routed.
    processes::set_state(&pool, ex, ProcessState::Stopped)
        .await
        .expect("stop");
    assert!(processes::route(&pool, ex, Routing::Cordon)
        .await
        .expect("cordon")
        .is_none());
    assert!(processes::route(&pool, Uuid::new_v4(), Routing::Cordon)
        .await
        .expect("cordon")
        .is_none());
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_selector_is_claimed_only_by_executors_carrying_all_its_labels(pool: PgPool) {
    let plain = labelled_executor(&pool, "").await;
    let cpu = labelled_executor(&pool, "zone=a,gpu=0").await;
    let gpu = labelled_executor(&pool, "zone=b,gpu=1").await;
    let job = make_job(&pool, "train", |j| {
        j.selector = serde_json::json!({"gpu": "1", "zone": "b"})
    })
    .await;
    let anywhere = make_job(&pool, "anywhere", |_| {}).await;
    let run = runs::queue_now(&pool, job.id).await.expect("queue");

    assert!(runs::claim_queued(&pool, plain, 10)
        .await
        .expect("claim")
        .is_empty());
    assert!(runs::claim_queued(&pool, cpu, 10)
        .await
        .expect("claim")
        .is_empty());
    assert!(
        processes::any_may_claim(&pool, &job.selector).await.expect("any"),
        "the gpu executor may"
    );
    assert_eq!(
        ids(&runs::claim_queued(&pool, gpu, 10).await.expect("claim")),
        vec![run.id]
    );

    // A job without a selector goes anywhere.
    let free = runs::queue_now(&pool, anywhere.id).await.expect("queue");
    assert_eq!(
        ids(&runs::claim_queued(&pool, plain, 10).await.expect("claim")),
        vec![free.id]
    );

    // Once the only matching executor is cordoned, nothing may claim the job's runs.
    processes::route(&pool, gpu, Routing::Cordon)
        .await
        .expect("cordon");
    assert!(!processes::any_may_claim(&pool, &job.selector).await.expect("any"));
    assert!(processes::any_may_claim(&pool, &serde_json::json!({}))
        .await
        .expect("any"));
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn higher_priority_goes_first_and_waiting_long_enough_overtakes_it(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let low = make_job(&pool, "low", |_| {}).await;
    let high = make_job(&pool, "high", |j| j.priority = 10).await;
    let age = |id: i64, minutes: i32| {
        let pool = pool.clone();
        async move {
            sqlx::query("UPDATE runs SET available_at = now() - make_interval(mins => $2) WHERE id = $1")
                .bind(id)
                .bind(minutes)
                .execute(&pool)
                .await
                .expect("age");
        }
    };
    // Queued two minutes before the high-priority run: it still goes second.
    let older_low = runs::queue_now(&pool, low.id).await.expect("queue");
    age(older_low.id, 2).await;
    let fresh_high = runs::queue_now(&pool, high.id).await.expect("queue");
    assert_eq!(
        ids(&runs::claim_queued(&pool, ex, 1).await.expect("claim")),
        vec![fresh_high.id]
    );
    assert_eq!(
        ids(&runs::claim_queued(&pool, ex, 1).await.expect("claim")),
        vec![older_low.id]
    );

    // Queued longer than ten minutes (ten points of priority) before it: it goes first.
    let starving_low = runs::queue_now(&pool, low.id).await.expect("queue");
    age(starving_low.id, 11).await;
    let another_high = runs::queue_now(&pool, high.id).await.expect("queue");
    assert_eq!(
        ids(&runs::claim_queued(&pool, ex, 1).await.expect("claim")),
        vec![starving_low.id]
    );
    assert_eq!(
        ids(&runs::claim_queued(&pool, ex, 1).await.expect("claim")),
        vec![another_high.id]
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_trigger_cap_bounds_its_runs_in_flight(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "fanout", |j| j.parallel = true).await;
    let capped = NewTrigger {
        max_concurrency: Some(2),
        ..NewTrigger::interval(3600)
    };
    let trigger = triggers::create(&pool, job.id, &capped, Utc::now())
        .await
        .expect("trigger");
    assert_eq!(trigger.max_concurrency, Some(2));
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at)
         SELECT $1, $2, now() - make_interval(secs => g) FROM generate_series(1, 5) AS g",
    )
    .bind(job.id)
    .bind(trigger.id)
    .execute(&pool)
    .await
    .expect("queue five instants");
    let by_hand = runs::queue_now(&pool, job.id).await.expect("queue");

    let first = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    assert_eq!(
        first.len(),
        3,
        "two of the trigger's and the run by hand: {first:?}"
    );
    assert!(ids(&first).contains(&by_hand.id));
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());

    // One ends: one more may go.
    let of_trigger: Vec<&Run> = first.iter().filter(|r| r.trigger_id.is_some()).collect();
    assert_eq!(
        of_trigger[0].state,
        RunState::Running,
        "a lock-free job starts at the claim"
    );
    runs::finish(&pool, of_trigger[0].id, ex, None, &ended(RunState::Succeeded))
        .await
        .expect("finish");
    assert_eq!(runs::claim_queued(&pool, ex, 10).await.expect("claim").len(), 1);
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
}

/// The firing routes its runs in its own insert (`runs_live_route` stays out of it): a
/// fired run carries its job's priority, its trigger's cap and the claim order the
/// trigger gives a run queued any other way.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn fired_runs_are_routed_like_runs_queued_any_other_way(pool: PgPool) {
    let job = make_job(&pool, "urgent", |j| {
        j.parallel = true;
        j.priority = 7;
    })
    .await;
    let capped = NewTrigger {
        max_concurrency: Some(3),
        ..NewTrigger::interval(3600)
    };
    let trigger = triggers::create(&pool, job.id, &capped, Utc::now())
        .await
        .expect("trigger");
    let fired_at = [
        Utc::now() - TimeDelta::seconds(5),
        Utc::now() + TimeDelta::seconds(30),
    ];
    // Fired as the firing fires: the priority and the cap the runs take are the ones the
    // due-trigger claim read.
    let mut firing = pool.begin().await.expect("begin");
    let due = triggers::claim_due(&mut firing, 10, std::time::Duration::from_secs(7200))
        .await
        .expect("claim");
    let claimed = due
        .iter()
        .find(|due| due.trigger.id == trigger.id)
        .expect("the trigger is due within two hours");
    let mut fired = runs::FiredRuns::default();
    for at in fired_at {
        fired.push(claimed, at, false);
    }
    let inserted = runs::insert_fired_runs(&mut firing, &fired, Uuid::nil())
        .await
        .expect("fire");
    firing.commit().await.expect("commit the firing");
    assert_eq!(inserted.len(), 2);
    sqlx::query(
        "INSERT INTO runs (job_id, trigger_id, scheduled_at) VALUES ($1, $2, now() - interval '1 hour')",
    )
    .bind(job.id)
    .bind(trigger.id)
    .execute(&pool)
    .await
    .expect("queue by hand");

    let routed: Vec<(DateTime<Utc>, i32, Option<i32>, f64)> = sqlx::query_as(
        "SELECT scheduled_at, priority, trigger_cap,
                extract(epoch FROM available_at - claim_order)::float8
         FROM runs_live WHERE job_id = $1 ORDER BY scheduled_at",
    )
    .bind(job.id)
    .fetch_all(&pool)
    .await
    .expect("routed runs");
    assert_eq!(routed.len(), 3);
    for (scheduled_at, priority, cap, ahead_by) in routed {
        assert_eq!(
            (priority, cap, ahead_by),
            (7, Some(3), 7.0 * 60.0),
            "the run of {scheduled_at}"
        );
    }
}

/// A pool's rate and a job's rate each bound the starts in their window, whatever the
/// slots left; the runs past it stay queued, saying why, and go once the window moves on.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_rate_of_a_pool_or_a_job_bounds_the_starts_in_its_window(pool: PgPool) {
    use probactr_common::model::Rate;
    use probactr_common::store::{pools, rates};

    let ex = make_executor(&pool).await;
    let hourly = |limit| {
        Some(Rate {
            limit,
            per_secs: 3600,
        })
    };
    pools::create(&pool, "default", "partner-api", 100, hourly(2))
        .await
        .expect("pool")
        .expect("a new pool");
    let in_pool = make_job(&pool, "in-pool", |j| {
        j.parallel = true;
        j.pool = Some("partner-api".to_owned());
    })
    .await;
    let rated = make_job(&pool, "rated", |j| {
        j.parallel = true;
        j.rate = hourly(3);
    })
    .await;
    let free = make_job(&pool, "free", |j| j.parallel = true).await;
    for job in [in_pool.id, rated.id, free.id] {
        runs::queue_many_now(&pool, job, 5).await.expect("queue");
    }

    let first = runs::claim_queued(&pool, ex, 20).await.expect("claim");
    let taken = |job: i64, runs: &[Run]| runs.iter().filter(|r| r.job_id == job).count();
    assert_eq!(
        (
            taken(in_pool.id, &first),
            taken(rated.id, &first),
            taken(free.id, &first)
        ),
        (2, 3, 5),
        "the pool's rate, the job's rate, no rate"
    );
    assert!(runs::claim_queued(&pool, ex, 20).await.expect("claim").is_empty());
    let waiting = |job: i64| {
        let pool = pool.clone();
        async move {
            let id: i64 =
                sqlx::query_scalar("SELECT id FROM runs WHERE job_id = $1 AND state = 'queued' LIMIT 1")
                    .bind(job)
                    .fetch_one(&pool)
                    .await
                    .expect("a queued run");
            rates::queued_reason(&pool, id).await.expect("reason")
        }
    };
    assert_eq!(
        waiting(in_pool.id).await.as_deref(),
        Some("rate partner-api 2/3600s")
    );
    assert_eq!(waiting(rated.id).await.as_deref(), Some("rate rated 3/3600s"));

    // An hour later, as far as the windows know: as many again.
    for moved in [
        "UPDATE pools SET rate_starts = array(SELECT s - interval '1 hour' FROM unnest(rate_starts) AS s)",
        "UPDATE job_rate_windows SET starts = array(SELECT s - interval '1 hour' FROM unnest(starts) AS s)",
    ] {
        sqlx::query(moved).execute(&pool).await.expect("move the window");
    }
    let second = runs::claim_queued(&pool, ex, 20).await.expect("claim");
    assert_eq!((taken(in_pool.id, &second), taken(rated.id, &second)), (2, 2));
    assert_eq!(
        waiting(in_pool.id).await.as_deref(),
        Some("rate partner-api 2/3600s")
    );

    // A triggered run waiting for a rate past its trigger's misfire threshold is not
    // marked missed: it waits its turn.
    let trigger = triggers::create(&pool, in_pool.id, &NewTrigger::interval(3600), Utc::now())
        .await
        .expect("trigger");
    sqlx::query(
        "UPDATE runs SET trigger_id = $1, queued_at = now() - interval '1 hour',
                         available_at = now() - interval '1 hour'
         WHERE job_id = $2 AND state = 'queued'",
    )
    .bind(trigger.id)
    .bind(in_pool.id)
    .execute(&pool)
    .await
    .expect("age the waiting run");
    assert!(runs::expire_stale_queued(&pool).await.expect("expire").is_empty());
}
