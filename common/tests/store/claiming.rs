//! Claiming queued runs.

use super::*;

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn claim_takes_oldest_available_runs_of_unpaused_jobs(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "live", |_| {}).await;
    let paused = make_job(&pool, "paused", |j| j.paused = true).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(runs::queue_now(&pool, job.id).await.expect("queue").id);
    }
    // Age by available_at, deliberately not in id order: oldest are ids[3], ids[1], ids[4].
    for (id, minutes) in [(ids[0], 1), (ids[1], 4), (ids[2], 2), (ids[3], 5), (ids[4], 3)] {
        sqlx::query("UPDATE runs SET available_at = now() - make_interval(mins => $2) WHERE id = $1")
            .bind(id)
            .bind(minutes)
            .execute(&pool)
            .await
            .expect("age");
    }
    let of_paused = runs::queue_now(&pool, paused.id).await.expect("queue paused");
    sqlx::query("UPDATE runs SET available_at = now() - interval '1 day' WHERE id = $1")
        .bind(of_paused.id)
        .execute(&pool)
        .await
        .expect("age");
    let future = runs::queue_now(&pool, job.id).await.expect("queue future");
    sqlx::query("UPDATE runs SET available_at = now() + interval '1 hour' WHERE id = $1")
        .bind(future.id)
        .execute(&pool)
        .await
        .expect("postpone");

    let first = runs::claim_queued(&pool, ex, 3).await.expect("claim");
    let first_ids: BTreeSet<i64> = first.iter().map(|r| r.id).collect();
    assert_eq!(
        first_ids,
        BTreeSet::from([ids[3], ids[1], ids[4]]),
        "the three oldest by available_at"
    );
    for r in &first {
        assert_eq!((r.state, r.executor_id), (RunState::Claimed, Some(ex)));
        assert!(r.claimed_at.is_some());
    }
    let rest = runs::claim_queued(&pool, ex, 10).await.expect("claim rest");
    let rest_ids: BTreeSet<i64> = rest.iter().map(|r| r.id).collect();
    assert_eq!(
        rest_ids,
        BTreeSet::from([ids[2], ids[0]]),
        "never the paused job's, never the postponed"
    );
    assert!(runs::claim_queued(&pool, ex, 10).await.expect("claim").is_empty());
    assert_eq!(run(&pool, of_paused.id).await.state, RunState::Queued);
    assert_eq!(run(&pool, future.id).await.state, RunState::Queued);

    // Resuming the job makes its run claimable.
    jobs::set_paused(&pool, paused.id, false).await.expect("resume");
    let resumed = runs::claim_queued(&pool, ex, 10).await.expect("claim");
    assert_eq!(
        resumed.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![of_paused.id]
    );
}

/// The executor starts claimed runs in the order `claim_queued` returns them, so for two
/// queued runs of one job the older must come first.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn claim_returns_runs_oldest_first(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    runs::queue_many_now(&pool, job.id, 20).await.expect("queue");
    // Older by available_at the higher the id, so id order and age order disagree.
    sqlx::query("UPDATE runs SET available_at = now() - make_interval(secs => id)")
        .execute(&pool)
        .await
        .expect("age");
    let claimed = runs::claim_queued(&pool, ex, 20).await.expect("claim");
    let order: Vec<i64> = claimed.iter().map(|r| r.id).collect();
    let mut oldest_first = order.clone();
    oldest_first.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(
        order, oldest_first,
        "claimed runs in the order they were returned"
    );
}

#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn concurrent_claimers_never_share_a_run(pool: PgPool) {
    let a = make_executor(&pool).await;
    let b = make_executor(&pool).await;
    let job = make_job(&pool, "j", |_| {}).await;
    assert_eq!(runs::queue_many_now(&pool, job.id, 10).await.expect("queue"), 10);

    // A claims inside an open transaction (its rows stay locked); B, on another
    // connection, skips them instead of waiting, and takes the rest.
    let mut tx_a = pool.begin().await.expect("begin");
    let claimed_a = runs::claim_queued(&mut *tx_a, a, 4).await.expect("claim A");
    assert_eq!(claimed_a.len(), 4);
    let claimed_b = tokio::time::timeout(Duration::from_secs(5), runs::claim_queued(&pool, b, 100))
        .await
        .expect("B does not wait for A's locks")
        .expect("claim B");
    assert_eq!(claimed_b.len(), 6);
    tx_a.commit().await.expect("commit A");
    let set_a: BTreeSet<i64> = claimed_a.iter().map(|r| r.id).collect();
    let set_b: BTreeSet<i64> = claimed_b.iter().map(|r| r.id).collect();
    assert!(set_a.is_disjoint(&set_b), "A {set_a:?} and B {set_b:?} overlap");
    let (mine_a, mine_b): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE executor_id = $1), count(*) FILTER (WHERE executor_id = $2)
         FROM runs WHERE state = 'claimed'",
    )
    .bind(a)
    .bind(b)
    .fetch_one(&pool)
    .await
    .expect("owners");
    assert_eq!((mine_a, mine_b), (4, 6));

    // Truly concurrent claimers over a larger queue: every run claimed exactly once.
    let more = make_job(&pool, "more", |_| {}).await;
    runs::queue_many_now(&pool, more.id, 200).await.expect("queue");
    let mut sets = Vec::new();
    for _ in 0..4 {
        let (x, y) = tokio::join!(runs::claim_queued(&pool, a, 30), runs::claim_queued(&pool, b, 30));
        sets.push(x.expect("claim x"));
        sets.push(y.expect("claim y"));
    }
    let all: Vec<i64> = sets.iter().flatten().map(|r| r.id).collect();
    let unique: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), unique.len(), "a run was returned to two claimers");
    assert_eq!(all.len(), 200);
}

/// Past the free slots (`ClaimLimits::slots`) a claim takes only runs an executor may
/// hold until a slot frees (prefetched); those given back unstarted are queued again as
/// they were, in their place, but for one asked to stop meanwhile.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_claim_past_the_free_slots_takes_only_runs_that_can_wait(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let locked = make_job(&pool, "locked", |_| {}).await;
    let other_locked = make_job(&pool, "other-locked", |_| {}).await;
    let free = make_job(&pool, "free", |j| j.parallel = true).await;
    let mut order = Vec::new();
    for job in [&locked, &free, &free, &other_locked, &free, &free] {
        order.push(runs::queue_now(&pool, job.id).await.expect("queue").id);
    }
    let limits = runs::ClaimLimits {
        slots: 1,
        ..runs::ClaimLimits::runs(5)
    };
    let claimed = runs::claim_within(&pool, ex, &limits).await.expect("claim");
    let ids: Vec<i64> = claimed.iter().map(|claimed| claimed.run.id).collect();
    assert_eq!(
        ids,
        vec![order[0], order[1], order[2], order[4]],
        "the locked run in the free slot, then only lock-free ones: the other locked run stays queued"
    );
    assert_eq!(run(&pool, order[3]).await.state, RunState::Queued);
    assert_eq!(run(&pool, order[2]).await.state, RunState::Running);

    // Held and never started: given back, but for the one asked to stop meanwhile.
    runs::request_cancel(&mut pool.acquire().await.unwrap(), order[1], "asked")
        .await
        .expect("cancel");
    let held = [order[1], order[2], order[4]];
    let given_back = runs::give_back_unstarted(&pool, &held, ex)
        .await
        .expect("give back");
    assert_eq!(
        given_back.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from([order[2], order[4]])
    );
    for id in given_back {
        let back = run(&pool, id).await;
        assert_eq!(
            (back.state, back.executor_id, back.started_at, back.claimed_at),
            (RunState::Queued, None, None, None)
        );
        assert_eq!(back.attempt, 1);
    }
    assert_eq!(run(&pool, order[1]).await.state, RunState::Running);
    assert!(
        runs::give_back_unstarted(&pool, &held, Uuid::new_v4())
            .await
            .expect("not mine")
            .is_empty(),
        "only the claiming executor gives runs back"
    );
    let again = runs::claim_queued(&pool, ex, 10).await.expect("claim again");
    assert_eq!(
        again.iter().map(|run| run.id).collect::<Vec<_>>(),
        vec![order[2], order[3], order[4], order[5]],
        "given back in their place in the queue"
    );
}

/// A cancellation whose statement waits for the row of a claim (queued → running) or of
/// a give-back (running → queued) reads the run in its old state; it must still find the
/// run, not answer that it does not exist.
#[sqlx::test(migrator = "probactr_common::store::TEST_MIGRATOR")]
async fn a_cancel_that_waits_for_a_claim_or_a_give_back_finds_its_run(pool: PgPool) {
    let ex = make_executor(&pool).await;
    let job = make_job(&pool, "raced", |j| j.parallel = true).await;
    let raced = runs::queue_now(&pool, job.id).await.expect("queue").id;

    let mut claim = pool.begin().await.expect("begin");
    let claimed = runs::claim_queued(&mut *claim, ex, 1).await.expect("claim");
    assert_eq!(claimed[0].state, RunState::Running);
    let cancel = spawn_cancel(&pool, raced);
    wait_until_blocked(&pool).await;
    claim.commit().await.expect("commit the claim");
    assert_eq!(
        cancel.await.expect("task").expect("cancel"),
        Some(RunState::Running),
        "flagged for its executor"
    );

    let held = runs::queue_now(&pool, job.id).await.expect("queue").id;
    runs::claim_queued(&pool, ex, 1).await.expect("claim");
    let mut give_back = pool.begin().await.expect("begin");
    runs::give_back_unstarted(&mut *give_back, &[held], ex)
        .await
        .expect("give back");
    let cancel = spawn_cancel(&pool, held);
    wait_until_blocked(&pool).await;
    give_back.commit().await.expect("commit the give-back");
    assert_eq!(
        cancel.await.expect("task").expect("cancel"),
        Some(RunState::Cancelled),
        "queued again, so cancelled at once"
    );
    assert_eq!(run(&pool, held).await.state, RunState::Cancelled);
}

fn spawn_cancel(pool: &PgPool, run_id: i64) -> tokio::task::JoinHandle<Result<Option<RunState>, StoreError>> {
    let pool = pool.clone();
    tokio::spawn(
        async move { runs::request_cancel(&mut pool.acquire().await.unwrap(), run_id, "raced").await },
    )
}
