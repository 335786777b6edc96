//! Processes: registration, heartbeats, declaring dead exactly once.

use super::*;

/// A registration stored while its answer was lost is retried with the same id: the
/// retry succeeds (it used to hit the primary key on every attempt, and the process never
/// started), and the process has one row, alive; a row declared dead meanwhile stays dead,
/// and the next heartbeat says so.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_registration_retried_after_a_lost_answer_succeeds_once(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let mut who = Registration::this_process(ProcessRole::Executor, 4);
    who.id = ex;
    processes::register(&pool, &who)
        .await
        .expect("the retry succeeds");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM executors WHERE id = $1 AND state = 'alive'")
        .bind(ex)
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(rows, 1);

    sqlx::query("UPDATE executors SET state = 'dead' WHERE id = $1")
        .bind(ex)
        .execute(&pool)
        .await
        .expect("declare dead");
    processes::register(&pool, &who).await.expect("register");
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::DeclaredDead
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_silent_executor_is_declared_dead_by_exactly_one_monitor(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let live = make_executor(&pool).await;
    let row = processes::get(&pool, ex).await.expect("get").expect("registered");
    assert_eq!(
        (row.role, row.state, row.host.as_str()),
        (ProcessRole::Executor, ProcessState::Alive, "test-host")
    );
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::Alive
    );
    assert!(
        processes::declare_dead(&pool, Uuid::new_v4(), Duration::from_secs(60))
            .await
            .expect("declare")
            .is_empty()
    );

    sqlx::query("UPDATE executors SET last_heartbeat_at = now() - interval '1 minute' WHERE id = $1")
        .bind(ex)
        .execute(&pool)
        .await
        .expect("silence");
    let (m1, m2) = (Uuid::new_v4(), Uuid::new_v4());
    let (r1, r2) = tokio::join!(
        processes::declare_dead(&pool, m1, Duration::from_millis(100)),
        processes::declare_dead(&pool, m2, Duration::from_millis(100)),
    );
    let (r1, r2) = (r1.expect("monitor 1"), r2.expect("monitor 2"));
    let mut declared: Vec<Uuid> = r1.iter().chain(r2.iter()).copied().collect();
    declared.sort();
    // `live` heartbeated at registration, but 100 ms may have passed: only count `ex`.
    assert_eq!(
        declared.iter().filter(|id| **id == ex).count(),
        1,
        "declared by exactly one: {r1:?} {r2:?}"
    );
    let row = processes::get(&pool, ex).await.expect("get").expect("row");
    assert_eq!(row.state, ProcessState::Dead);
    assert!(row.declared_dead_at.is_some());
    let winner = if r1.contains(&ex) { m1 } else { m2 };
    assert_eq!(
        row.reaped_by,
        Some(winner),
        "reaped_by names the monitor that declared it"
    );

    // The dead process learns it at its next heartbeat, and cannot revive itself.
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::DeclaredDead
    );
    assert!(!processes::set_state(&pool, ex, ProcessState::Alive)
        .await
        .expect("set state"));
    assert_eq!(
        processes::get(&pool, ex).await.expect("get").expect("row").state,
        ProcessState::Dead
    );
    let _ = live;
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn declaring_dead_is_conditional_under_a_staged_race(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let live = make_executor(&pool).await;
    sqlx::query("UPDATE executors SET last_heartbeat_at = now() - interval '1 minute' WHERE id = $1")
        .bind(ex)
        .execute(&pool)
        .await
        .expect("silence");

    // Monitor 1 declares inside an open transaction; monitor 2 blocks on the row and, once
    // monitor 1 commits, re-checks the condition and declares nothing.
    let mut tx = pool.begin().await.expect("begin");
    let first = processes::declare_dead(&mut *tx, Uuid::new_v4(), Duration::from_secs(15))
        .await
        .expect("monitor 1");
    assert_eq!(first, vec![ex]);
    let (second, ()) = tokio::join!(
        processes::declare_dead(&pool, Uuid::new_v4(), Duration::from_secs(15)),
        async {
            wait_until_blocked(&pool).await;
            tx.commit().await.expect("commit monitor 1");
        }
    );
    assert_eq!(second.expect("monitor 2"), Vec::<Uuid>::new());

    // A process that heartbeats in time is never declared; a draining one can be.
    assert_eq!(
        processes::heartbeat(&pool, live).await.expect("heartbeat"),
        Heartbeat::Alive
    );
    assert!(processes::set_state(&pool, live, ProcessState::Draining)
        .await
        .expect("drain"));
    assert_eq!(
        processes::heartbeat(&pool, live).await.expect("heartbeat"),
        Heartbeat::Alive,
        "draining still beats"
    );
    assert!(
        processes::declare_dead(&pool, Uuid::new_v4(), Duration::from_secs(15))
            .await
            .expect("declare")
            .is_empty()
    );
    assert_eq!(
        processes::heartbeat(&pool, ex).await.expect("heartbeat"),
        Heartbeat::DeclaredDead
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn retention_purges_stopped_and_dead_processes_and_keeps_the_rest(pool: PgPool) {
    let (stopped_long_ago, dead_long_ago, stopped_lately, silent_but_alive) = (
        make_executor(&pool).await,
        make_executor(&pool).await,
        make_executor(&pool).await,
        make_executor(&pool).await,
    );
    for (id, state) in [
        (stopped_long_ago, ProcessState::Stopped),
        (dead_long_ago, ProcessState::Dead),
        (stopped_lately, ProcessState::Stopped),
    ] {
        assert!(processes::set_state(&pool, id, state).await.expect("set state"));
    }
    for id in [stopped_long_ago, dead_long_ago, silent_but_alive] {
        sqlx::query("UPDATE executors SET last_heartbeat_at = now() - interval '2 days' WHERE id = $1")
            .bind(id)
            .execute(&pool)
            .await
            .expect("age the row");
    }
    let pruned = housekeeping::prune_records(&pool, Duration::from_secs(86_400))
        .await
        .expect("prune");
    assert_eq!(pruned, 2, "the stopped and the dead process past the retention");
    for (id, kept) in [
        (stopped_long_ago, false),
        (dead_long_ago, false),
        (stopped_lately, true),
        (silent_but_alive, true),
    ] {
        assert_eq!(
            processes::get(&pool, id).await.expect("get").is_some(),
            kept,
            "{id}: kept {kept}"
        );
    }
}
