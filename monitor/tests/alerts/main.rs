//! Alerts end to end, with real executors and monitors, a real webhook receiver and a
//! real SMTP conversation: what each event says, signatures, throttling of a storm,
//! conditions raised once, several monitors sending each message once, a monitor killed
//! mid-delivery, and an unreachable receiver retried and then given up on.
#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use hmac::{Hmac, Mac};
use probactr_common::masked_url;
use probactr_common::model::{AlertEvent, ChannelKind, JobKind, Misfire, NotificationState};
use probactr_common::secrets::{Keyring, Owner, SecretKey};
use probactr_common::store::alerts::channels;
use probactr_common::store::alerts::notifications::{self, Filter, Notification};
use probactr_common::store::alerts::rules::{self, RuleFields};
use probactr_common::store::jobs::{self, NewJob};
use probactr_common::store::triggers::{self, NewTrigger};
use probactr_common::store::{runs, Page, TEST_MIGRATOR};
use probactr_monitor::reconciler::Reconciler;
use probactr_testkit as support;
use serde_json::{json, Value};
use sha2::Sha256;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;
use support::receiver::{Received, Receiver};
use support::smtp::SmtpSink;
use support::{eventually, executor, fast_env, monitor, unique_prefix, TEST_SECRET_KEY};

const SIGNING_SECRET: &str = "s3cret-for-signing";

async fn connect(pool_options: PgPoolOptions, options: PgConnectOptions) -> (PgPool, String) {
    let url = support::database_url(&options);
    (pool_options.connect_with(options).await.unwrap(), url)
}

fn env(url: &str, test: &str) -> HashMap<String, String> {
    let mut env = fast_env(url, &unique_prefix(test));
    env.insert("RUST_LOG".into(), "warn,probactr_monitor=debug".into());
    env
}

/// A channel as the manager stores it: its URL (webhook, slack) and secret sealed, bound
/// to its id, the URL masked in its configuration.
async fn make_channel(
    pool: &PgPool,
    name: &str,
    kind: ChannelKind,
    config: Value,
    url: Option<&str>,
    secret: Option<&str>,
) -> i64 {
    let keys = Keyring::new(SecretKey::parse(TEST_SECRET_KEY).unwrap(), None);
    let id = channels::reserve_id(pool).await.unwrap();
    let secret = secret.map(|s| keys.seal(&Owner::ChannelSecret(id), s));
    let sealed_url = url.map(|u| keys.seal(&Owner::ChannelUrl(id), u));
    let mut config = config;
    if let Some(url) = url {
        config["url"] = json!(masked_url::masked(url));
    }
    let new = channels::NewChannel {
        id,
        namespace: "default",
        name,
        kind,
        config: &config,
        secret: secret.as_ref(),
        url: sealed_url.as_ref(),
    };
    channels::create(pool, &new).await.unwrap().id
}

async fn webhook(pool: &PgPool, receiver: &Receiver, secret: Option<&str>) -> i64 {
    make_channel(
        pool,
        "hook",
        ChannelKind::Webhook,
        json!({}),
        Some(&receiver.url),
        secret,
    )
    .await
}

async fn rule(
    pool: &PgPool,
    events: &[AlertEvent],
    job_id: Option<i64>,
    channel: i64,
    tune: impl FnOnce(&mut RuleFields),
) {
    let mut fields = RuleFields {
        name: format!("rule-{}", uuid::Uuid::new_v4().simple()),
        events: events.to_vec(),
        job_id,
        channel_ids: vec![channel],
        threshold: None,
        duration_secs: None,
        throttle_secs: 0,
        enabled: true,
    };
    tune(&mut fields);
    let mut conn = pool.acquire().await.unwrap();
    rules::create(&mut conn, "default", &fields).await.unwrap();
}

async fn shell_job(pool: &PgPool, name: &str, script: &str, tune: impl FnOnce(&mut NewJob)) -> i64 {
    let mut job = NewJob::new(name, JobKind::Shell, json!({"program": script, "shell": true}));
    job.retry_max_attempts = 1;
    tune(&mut job);
    jobs::insert(pool, &job).await.unwrap().id
}

fn events_of(received: &[Received]) -> Vec<String> {
    received
        .iter()
        .map(|r| r.json()["event"].as_str().unwrap_or("").to_owned())
        .collect()
}

async fn log(pool: &PgPool) -> Vec<Notification> {
    notifications::list(
        pool,
        &Filter::default(),
        Page {
            limit: 500,
            offset: 0,
        },
    )
    .await
    .unwrap()
}

fn signature_of(body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SIGNING_SECRET.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// Sixty failures within a 10 s throttle: one message at once, then one follow-up that
/// counts the 59 folded; every message is signed over its raw body and has its own
/// delivery id; the log says each was sent.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_storm_of_failures_sends_one_message_and_one_follow_up(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let receiver = Receiver::start().await;
    let channel = webhook(&pool, &receiver, Some(SIGNING_SECRET)).await;
    let job = shell_job(&pool, "storm", "exit 3", |job| job.parallel = true).await;
    rule(&pool, &[AlertEvent::RunFailed], Some(job), channel, |r| {
        r.throttle_secs = 10
    })
    .await;
    let env = env(&url, "storm");
    let _executor = executor("executor", &env);
    let _monitor = monitor("monitor", &env);
    for _ in 0..60 {
        runs::queue_now(&pool, job).await.unwrap();
    }
    eventually(Duration::from_secs(30), "60 runs failed", || async {
        let failed: i64 = sqlx::query_scalar("SELECT count(*) FROM runs WHERE state = 'failed'")
            .fetch_one(&pool)
            .await
            .unwrap();
        (failed == 60).then_some(())
    })
    .await;
    let received = eventually(
        Duration::from_secs(20),
        "a first message and a follow-up",
        || async {
            let received = receiver.received();
            (received.len() >= 2).then_some(received)
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let received = {
        let again = receiver.received();
        assert_eq!(
            again.len(),
            received.len(),
            "more than two messages: {:?}",
            events_of(&again)
        );
        again
    };
    assert_eq!(received.len(), 2, "one message and one follow-up");
    let (first, follow_up) = (received[0].json(), received[1].json());
    assert_eq!(first["event"], "run_failed");
    assert_eq!(first["follow_up"], false);
    assert_eq!(first["job"]["name"], "storm");
    assert_eq!(first["run"]["state"], "failed");
    assert!(first["links"]["run"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:8080/runs/"));
    assert_eq!(follow_up["follow_up"], true);
    assert_eq!(follow_up["counts"]["suppressed"], 59, "{follow_up}");
    let mut ids = HashSet::new();
    for message in &received {
        assert_eq!(
            message.header("x-probactr-signature"),
            Some(signature_of(&message.body).as_str())
        );
        let delivery = message.header("x-probactr-delivery").unwrap().to_owned();
        assert_eq!(message.json()["delivery"], Value::String(delivery.clone()));
        assert!(ids.insert(delivery), "a delivery id was reused");
    }
    let log = log(&pool).await;
    assert_eq!(log.len(), 2);
    assert!(log
        .iter()
        .all(|n| n.state == NotificationState::Sent && n.attempts == 1));
    assert_eq!(log.iter().map(|n| n.suppressed).sum::<i32>(), 59);
}

/// The events of runs, each with its content: a failure with no attempt left, a timeout,
/// failures in a row, then the success that recovers the job.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn run_events_failures_in_a_row_and_recovery(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = connect(pool_options, options).await;
    let receiver = Receiver::start().await;
    let channel = webhook(&pool, &receiver, None).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("ok");
    let script = format!("echo trying; test -e {}", flag.display());
    let job = shell_job(&pool, "flaky", &script, |_| {}).await;
    let slow = shell_job(&pool, "slow", "sleep 10", |job| job.timeout_secs = 1).await;
    rule(
        &pool,
        &[
            AlertEvent::RunFailed,
            AlertEvent::ConsecutiveFailures,
            AlertEvent::Recovered,
            AlertEvent::RunTimedOut,
        ],
        None,
        channel,
        |r| r.threshold = Some(2),
    )
    .await;
    let env = env(&url, "events");
    let _executor = executor("executor", &env);
    let _monitor = monitor("monitor", &env);
    for _ in 0..2 {
        let run = runs::queue_now(&pool, job).await.unwrap();
        eventually(Duration::from_secs(15), "the run ended", || async {
            let run = runs::get(&pool, run.id).await.unwrap().unwrap();
            run.state.is_terminal().then_some(())
        })
        .await;
    }
    runs::queue_now(&pool, slow).await.unwrap();
    eventually(
        Duration::from_secs(20),
        "failures, failures in a row and the timeout",
        || async {
            let events = events_of(&receiver.received());
            let count = |name: &str| events.iter().filter(|e| *e == name).count();
            (count("run_failed") == 3 && count("consecutive_failures") == 1 && count("run_timed_out") == 1)
                .then_some(())
        },
    )
    .await;
    std::fs::write(&flag, "").unwrap();
    runs::queue_now(&pool, job).await.unwrap();
    let received = eventually(Duration::from_secs(20), "recovered", || async {
        let received = receiver.received();
        events_of(&received)
            .contains(&"recovered".to_owned())
            .then_some(received)
    })
    .await;
    let by_event = |name: &str| -> Vec<Value> {
        received
            .iter()
            .map(Received::json)
            .filter(|m| m["event"] == name)
            .collect()
    };
    let in_a_row = &by_event("consecutive_failures")[0];
    assert_eq!(in_a_row["detail"]["failures"], 2);
    assert_eq!(in_a_row["job"]["name"], "flaky");
    let timed_out = &by_event("run_timed_out")[0];
    assert_eq!(timed_out["job"]["name"], "slow");
    assert_eq!(timed_out["run"]["state"], "timed_out");
    let failed_flaky: Vec<Value> = by_event("run_failed")
        .into_iter()
        .filter(|m| m["job"]["name"] == "flaky")
        .collect();
    assert_eq!(failed_flaky.len(), 2);
    assert!(
        failed_flaky[0]["summary"]
            .as_str()
            .unwrap()
            .contains("flaky failed"),
        "{}",
        failed_flaky[0]
    );
    assert_eq!(by_event("recovered").len(), 1, "recovered once for the one rule");
    assert_eq!(by_event("recovered")[0]["job"]["name"], "flaky");
}

/// Conditions a monitor evaluates on its loop are raised once per occurrence however
/// often it looks: a run running too long, a job without success, no executor alive
/// while triggers are due, an executor lost, and the instants a trigger skipped.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn conditions_are_raised_once_per_occurrence(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = connect(pool_options, options).await;
    let receiver = Receiver::start().await;
    let channel = webhook(&pool, &receiver, None).await;
    let long = shell_job(&pool, "long", "sleep 30", |_| {}).await;
    rule(
        &pool,
        &[AlertEvent::RunTooLong, AlertEvent::NoSuccessWithin],
        Some(long),
        channel,
        |r| r.duration_secs = Some(1),
    )
    .await;
    rule(
        &pool,
        &[
            AlertEvent::ExecutorLost,
            AlertEvent::NoExecutor,
            AlertEvent::RunAbandoned,
            AlertEvent::FireMissed,
            AlertEvent::CapacityShortfall,
        ],
        None,
        channel,
        |_| {},
    )
    .await;
    let now = probactr_common::store::db_now(&pool).await.unwrap();
    let trigger = triggers::create(&pool, long, &NewTrigger::interval(3600), now)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE triggers SET next_fire_at = now() - interval '1 second',
                             created_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(trigger.id)
    .execute(&pool)
    .await
    .unwrap();
    // A trigger an hour behind, whose policy skips what it missed.
    let hourly = jobs::insert(&pool, &NewJob::new("minutely", JobKind::Noop, json!({})))
        .await
        .unwrap()
        .id;
    let mut every_minute = NewTrigger::interval(60);
    every_minute.timing.misfire = Misfire::Skip;
    let behind = triggers::create(&pool, hourly, &every_minute, now).await.unwrap();
    sqlx::query(
        "UPDATE triggers SET next_fire_at = now() - interval '1 hour',
                             created_at = now() - interval '1 hour' WHERE id = $1",
    )
    .bind(behind.id)
    .execute(&pool)
    .await
    .unwrap();
    let env = env(&url, "conditions");
    let _monitor = monitor("monitor", &env);
    // No executor is alive: every instant of the coming hour is over capacity.
    eventually(
        Duration::from_secs(15),
        "no executor, and a capacity shortfall ahead",
        || async {
            let events = events_of(&receiver.received());
            (events.contains(&"no_executor".to_owned()) && events.contains(&"capacity_shortfall".to_owned()))
                .then_some(())
        },
    )
    .await;
    let mut executor = executor("executor", &env);
    eventually(
        Duration::from_secs(20),
        "the run too long and the job without success",
        || async {
            let events = events_of(&receiver.received());
            (events.contains(&"run_too_long".to_owned())
                && events.contains(&"no_success_within".to_owned())
                && events.contains(&"fire_missed".to_owned()))
            .then_some(())
        },
    )
    .await;
    executor.signal(support::SIGKILL);
    let _ = executor.wait_exit(Duration::from_secs(5)).await;
    eventually(
        Duration::from_secs(20),
        "the executor lost and its run abandoned",
        || async {
            let events = events_of(&receiver.received());
            (events.contains(&"executor_lost".to_owned()) && events.contains(&"run_abandoned".to_owned()))
                .then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let events = events_of(&receiver.received());
    for event in [
        "run_too_long",
        "no_success_within",
        "executor_lost",
        "run_abandoned",
        "fire_missed",
    ] {
        assert_eq!(
            events.iter().filter(|e| *e == event).count(),
            1,
            "{event} once: {events:?}"
        );
    }
    let lost = receiver
        .received()
        .iter()
        .map(Received::json)
        .find(|m| m["event"] == "executor_lost")
        .unwrap();
    assert!(lost["summary"].as_str().unwrap().contains("was lost"), "{lost}");
    let missed = receiver
        .received()
        .iter()
        .map(Received::json)
        .find(|m| m["event"] == "fire_missed")
        .unwrap();
    assert_eq!(missed["job"]["name"], "minutely");
    assert!(missed["detail"]["instants"].as_i64().unwrap() >= 1, "{missed}");
    assert_eq!(missed["detail"]["policy"], "skip");
    assert!(missed["summary"].as_str().unwrap().contains("missed"), "{missed}");
}

/// Three monitors share the outbox and the deliveries: every notification reaches the
/// receiver once. Then a monitor is killed while the receiver holds its delivery: another
/// monitor sends it again under the same delivery id, and it is logged sent once.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn monitors_never_double_send_and_a_killed_one_loses_nothing(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let receiver = Receiver::start().await;
    let channel = webhook(&pool, &receiver, None).await;
    let job = shell_job(&pool, "failing", "exit 1", |job| job.parallel = true).await;
    rule(&pool, &[AlertEvent::RunFailed], None, channel, |_| {}).await;
    let env = env(&url, "monitors");
    let _executor = executor("executor", &env);
    let monitors: Vec<_> = (0..3).map(|i| monitor(&format!("monitor-{i}"), &env)).collect();
    for _ in 0..30 {
        runs::queue_now(&pool, job).await.unwrap();
    }
    eventually(Duration::from_secs(30), "30 notifications sent", || async {
        let log = log(&pool).await;
        (log.len() == 30 && log.iter().all(|n| n.state == NotificationState::Sent)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let received = receiver.received();
    let ids: HashSet<String> = received
        .iter()
        .map(|r| r.header("x-probactr-delivery").unwrap().to_owned())
        .collect();
    assert_eq!(received.len(), 30, "each notification sent once");
    assert_eq!(ids.len(), 30);
    drop(monitors);

    receiver.hold_next(1, Duration::from_secs(8));
    let mut first = monitor("holder", &env);
    runs::queue_now(&pool, job).await.unwrap();
    let held = eventually(Duration::from_secs(15), "the held delivery arrived", || async {
        let received = receiver.received();
        (received.len() == 31).then(|| received[30].header("x-probactr-delivery").unwrap().to_owned())
    })
    .await;
    first.signal(support::SIGKILL);
    let _ = first.wait_exit(Duration::from_secs(5)).await;
    let _second = monitor("rescuer", &env);
    eventually(
        Duration::from_secs(20),
        "sent again by another monitor",
        || async {
            let received = receiver.received();
            (received.len() == 32).then_some(())
        },
    )
    .await;
    let received = receiver.received();
    assert_eq!(
        received[31].header("x-probactr-delivery"),
        Some(held.as_str()),
        "same delivery id"
    );
    let log = log(&pool).await;
    assert_eq!(log.len(), 31);
    eventually(Duration::from_secs(10), "logged sent", || async {
        let log = self::log(&pool).await;
        log.iter()
            .all(|n| n.state == NotificationState::Sent)
            .then_some(())
    })
    .await;
}

/// A receiver that cannot be reached is retried with backoff until
/// PROBACTR_ALERT_RETRY_FOR, then marked failed with the error; one that answers 500
/// too, its error page (which echoes the URL's token) stored masked; and a webhook aimed at the cloud metadata service is refused by the guard HTTP
/// jobs have.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn an_unreachable_receiver_is_retried_then_marked_failed(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let channel = make_channel(
        &pool,
        "nowhere",
        ChannelKind::Webhook,
        json!({}),
        Some(&dead_url),
        None,
    )
    .await;
    let refusing = Receiver::start().await;
    refusing.answer_with(500);
    // A URL that is a credential, like a Slack one: a long token in its path and query.
    let token = "T0KEN0f7h3ReceiverXyZ42";
    let refusing_url = format!("{}/{token}?sig={token}", refusing.url);
    // As an earlier release stored it: the URL in the clear, not yet sealed by a
    // manager's start; monitors still send to it.
    let id = channels::reserve_id(&pool).await.unwrap();
    let legacy = channels::NewChannel {
        id,
        namespace: "default",
        name: "refusing",
        kind: ChannelKind::Webhook,
        config: &json!({"url": refusing_url}),
        secret: None,
        url: None,
    };
    let refusing_channel = channels::create(&pool, &legacy).await.unwrap().id;
    let metadata = make_channel(
        &pool,
        "metadata",
        ChannelKind::Webhook,
        json!({}),
        Some("http://169.254.169.254/latest/meta-data"),
        None,
    )
    .await;
    let job = shell_job(&pool, "failing", "exit 1", |_| {}).await;
    rule(&pool, &[AlertEvent::RunFailed], None, channel, |r| {
        r.channel_ids.extend([refusing_channel, metadata])
    })
    .await;
    let mut env = env(&url, "unreachable");
    env.insert("PROBACTR_ALERT_RETRY_FOR".into(), "4s".into());
    let _executor = executor("executor", &env);
    let _monitor = monitor("monitor", &env);
    runs::queue_now(&pool, job).await.unwrap();
    let log = eventually(Duration::from_secs(30), "both given up on", || async {
        let log = log(&pool).await;
        (log.len() == 3 && log.iter().all(|n| n.state == NotificationState::Failed)).then_some(log)
    })
    .await;
    for notification in &log {
        assert!(notification.attempts >= 2, "retried: {notification:?}");
        let error = notification.last_error.as_deref().unwrap();
        match notification.channel_name.as_deref() {
            Some("refusing") => {
                assert!(error.contains("500") && error.contains("no hook at"), "{error}");
                assert!(
                    !error.contains(token),
                    "the error page's token is masked: {error}"
                );
            }
            Some("metadata") => assert!(error.contains("refused to connect to 169.254.169.254"), "{error}"),
            _ => assert!(error.contains("connect") || error.contains("refused"), "{error}"),
        }
    }
    assert!(
        refusing.received().len() >= 2,
        "the refusing receiver saw the retries"
    );
}

/// Mail goes through a real SMTP conversation, with a plain-text and an HTML part.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn email_is_sent_through_smtp_with_text_and_html(
    pool_options: PgPoolOptions,
    options: PgConnectOptions,
) {
    let (pool, url) = connect(pool_options, options).await;
    let sink = SmtpSink::start().await;
    let channel = make_channel(
        &pool,
        "ops mail",
        ChannelKind::Email,
        json!({"to": ["ops@example.com", "oncall@example.com"]}),
        None,
        None,
    )
    .await;
    let job = shell_job(&pool, "nightly <export>", "echo 'disk full' >&2; exit 2", |_| {}).await;
    rule(&pool, &[AlertEvent::RunFailed], None, channel, |_| {}).await;
    let mut env = env(&url, "email");
    env.insert("PROBACTR_SMTP_URL".into(), sink.url());
    env.insert("PROBACTR_SMTP_FROM".into(), "probactr@example.com".into());
    env.insert(
        "PROBACTR_PUBLIC_URL".into(),
        "https://scheduler.example.com/".into(),
    );
    let _executor = executor("executor", &env);
    let _monitor = monitor("monitor", &env);
    runs::queue_now(&pool, job).await.unwrap();
    let mail = eventually(Duration::from_secs(20), "a mail", || async {
        sink.mails().into_iter().next()
    })
    .await;
    assert_eq!(mail.from, "probactr@example.com");
    assert_eq!(
        mail.to,
        vec!["ops@example.com".to_owned(), "oncall@example.com".to_owned()]
    );
    assert!(
        mail.data
            .contains("Subject: [probactr] job nightly <export> failed"),
        "{}",
        mail.data
    );
    assert!(mail.data.contains("multipart/alternative"), "{}", mail.data);
    assert!(mail.data.contains("text/plain"), "{}", mail.data);
    assert!(mail.data.contains("text/html"), "{}", mail.data);
    assert!(
        mail.data.contains("nightly &lt;export&gt;"),
        "HTML escapes: {}",
        mail.data
    );
    assert!(
        mail.data.contains("https://scheduler.example.com/runs/"),
        "{}",
        mail.data
    );
    // The sink has the mail before the monitor hears the server's answer and records it.
    eventually(Duration::from_secs(10), "the mail logged as sent", || async {
        let log = log(&pool).await;
        (log.len() == 1 && log[0].state == NotificationState::Sent).then_some(())
    })
    .await;
}

/// The reconciler finds instants that were due, were fired past (the trigger moved on)
/// and have neither a run nor a misfire: it records each stretch once as missed, which
/// raises `fire_missed`, and finds nothing the second time. Instants with a run between
/// two gaps split them into two stretches; instants that come due after a pass are
/// looked at by the next one.
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn the_reconciler_records_each_gap_once(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, _url) = connect(pool_options, options).await;
    let receiver = Receiver::start().await;
    let channel = webhook(&pool, &receiver, None).await;
    rule(&pool, &[AlertEvent::FireMissed], None, channel, |_| {}).await;
    let job = jobs::insert(&pool, &NewJob::new("lost", JobKind::Noop, json!({})))
        .await
        .unwrap()
        .id;
    let now = probactr_common::store::db_now(&pool).await.unwrap();
    let trigger = triggers::create(&pool, job, &NewTrigger::interval(1), now)
        .await
        .unwrap();
    // Twenty instants went by and the trigger moved past the first ten of them, but
    // nothing was recorded, except a run for three instants in the middle.
    sqlx::query(
        "UPDATE triggers SET created_at = now() - interval '20 seconds', updated_at = now() - interval '20 seconds',
                next_fire_at = now() - interval '10 seconds' WHERE id = $1",
    )
    .bind(trigger.id)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE jobs SET updated_at = now() - interval '1 minute'")
        .execute(&pool)
        .await
        .unwrap();
    let stored = triggers::get(&pool, trigger.id).await.unwrap().unwrap();
    // The ledger of the instants fired.
    let fired_ledger = || async {
        probactr_common::ledger::read(
            &pool,
            &stored,
            false,
            stored.created_at,
            stored.next_fire_at.unwrap(),
            100,
        )
        .await
        .unwrap()
    };
    let fired = fired_ledger().await;
    assert!(fired.entries.len() >= 9, "{} instants fired", fired.entries.len());
    for entry in &fired.entries[3..6] {
        sqlx::query(
            "INSERT INTO runs (job_id, trigger_id, scheduled_at, state, finished_at) VALUES ($1, $2, $3, 'succeeded', now())",
        )
        .bind(job)
        .bind(trigger.id)
        .bind(entry.instant)
        .execute(&pool)
        .await
        .unwrap();
    }
    let mut reconciler = Reconciler::default();
    let recorded = reconciler.reconcile_once(&pool).await.unwrap();
    assert_eq!(
        recorded,
        fired.entries.len() as i64 - 3,
        "every instant without a run"
    );
    assert_eq!(reconciler.reconcile_once(&pool).await.unwrap(), 0, "once");
    assert_eq!(
        Reconciler::default().reconcile_once(&pool).await.unwrap(),
        0,
        "once, by a reconciler that starts again"
    );
    let ledger = fired_ledger().await;
    for (index, entry) in ledger.entries.iter().enumerate() {
        let expected = if (3..6).contains(&index) {
            probactr_common::ledger::Outcome::Ran
        } else {
            probactr_common::ledger::Outcome::Missed
        };
        assert_eq!(entry.outcome, expected, "{index}: {entry:?}");
    }
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM alert_events WHERE event = 'fire_missed'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(events, 2, "two stretches, two events");
    // The trigger moves on past the rest: the same reconciler finds them.
    sqlx::query("UPDATE triggers SET next_fire_at = now() WHERE id = $1")
        .bind(trigger.id)
        .execute(&pool)
        .await
        .unwrap();
    let later = reconciler.reconcile_once(&pool).await.unwrap();
    assert!((9..=11).contains(&later), "recorded {later} later");
}

/// A rule belongs to a namespace: it hears only of its namespace's jobs, and notifies
/// only its namespace's channels (one of another namespace named by the rule gets
/// nothing).
#[sqlx::test(migrator = "TEST_MIGRATOR")]
async fn a_rule_watches_only_its_namespace(pool_options: PgPoolOptions, options: PgConnectOptions) {
    let (pool, url) = connect(pool_options, options).await;
    for name in ["a", "b"] {
        sqlx::query("INSERT INTO namespaces (name) VALUES ($1)")
            .bind(name)
            .execute(&pool)
            .await
            .unwrap();
    }
    let of_a = Receiver::start().await;
    let of_b = Receiver::start().await;
    let channel_a = webhook(&pool, &of_a, None).await;
    let channel_b = make_channel(
        &pool,
        "hook-b",
        ChannelKind::Webhook,
        json!({}),
        Some(&of_b.url),
        None,
    )
    .await;
    let fields = RuleFields {
        name: "failures".into(),
        events: vec![AlertEvent::RunFailed],
        job_id: None,
        channel_ids: vec![channel_a, channel_b],
        threshold: None,
        duration_secs: None,
        throttle_secs: 0,
        enabled: true,
    };
    let rule = rules::create(&mut pool.acquire().await.unwrap(), "default", &fields)
        .await
        .unwrap();
    let moves = [
        ("UPDATE alert_rules SET namespace = 'a' WHERE id = $1", rule.id),
        (
            "UPDATE alert_channels SET namespace = 'a' WHERE id = $1",
            channel_a,
        ),
        (
            "UPDATE alert_channels SET namespace = 'b' WHERE id = $1",
            channel_b,
        ),
    ];
    for (statement, id) in moves {
        sqlx::query(statement).bind(id).execute(&pool).await.unwrap();
    }
    let mut failing = Vec::new();
    for (name, namespace) in [("fails-in-b", "b"), ("fails-in-a", "a")] {
        let job = shell_job(&pool, name, "exit 3", |_| {}).await;
        sqlx::query("UPDATE jobs SET namespace = $2 WHERE id = $1")
            .bind(job)
            .bind(namespace)
            .execute(&pool)
            .await
            .unwrap();
        failing.push(job);
    }
    let env = env(&url, "namespaces");
    let _executor = executor("executor", &env);
    let _monitor = monitor("monitor", &env);
    // b's failure first: the outbox is processed in order, so once a's message arrived,
    // b's event was handled too.
    for job in failing {
        let run = runs::queue_now(&pool, job).await.unwrap();
        eventually(Duration::from_secs(15), "the run failed", || async {
            let run = runs::get(&pool, run.id).await.unwrap().unwrap();
            run.state.is_terminal().then_some(())
        })
        .await;
    }
    let received = eventually(Duration::from_secs(20), "a's failure notified", || async {
        let received = of_a.received();
        (!received.is_empty()).then_some(received)
    })
    .await;
    let jobs: Vec<Value> = received.iter().map(|m| m.json()["job"]["name"].clone()).collect();
    assert_eq!(jobs, vec![json!("fails-in-a")], "only a's job: {jobs:?}");
    assert!(
        of_b.received().is_empty(),
        "b's channel is not the rule's to notify"
    );
}
