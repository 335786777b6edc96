//! Definitions as code in the manager: the jobs and triggers `who` may see and change, as
//! a [`Registry`] for [`probactr_definitions`] (the admin's YAML download and
//! upload, `POST /api/v1/definitions/apply`, `probactr apply`). Every change goes through
//! the same services, checks and audit as the API.
//!
//! Applying is all or nothing, in one transaction that holds the apply lock (so two
//! applies never interleave): the whole apply is first run against [`Checking`], a
//! registry that reads the server but only validates what would be written (every job,
//! trigger, channel, rule and workflow body through the same command checks as the API),
//! going on past each problem so that one answer names them all (a dry run, the admin's
//! Preview and an apply refused alike), then for real through [`InTransaction`], whose writes (with their audit rows) are
//! committed only when every one succeeded. A file with a bad object is refused (422,
//! naming file, line and field); a write the database refuses (a name taken meanwhile, a
//! constraint) rolls everything back (422, or 409 for an object changed meanwhile). A
//! transaction aborted for concurrency is run again whole, like every manager
//! transaction, and answers 503 only when every attempt was aborted.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Mutex;

use axum::http::StatusCode;
use chrono::Utc;
use probactr_common::store;
use probactr_common::store::jobs::JobFilter;
use probactr_common::store::retry::{retry_transient, Transient};
use probactr_common::store::Page;
use probactr_definitions::{DefinitionError, Refusal, Registry, Report, Source};
use serde_json::{json, Value};
use sqlx::{PgConnection, Postgres, Transaction};

use super::jobs::JobView;
use super::Handles;
use super::{alerts, triggers, workflows};
use crate::auth::Principal;
use crate::command::alert::{self, ChannelCommand};
use crate::command::workflow::WorkflowDraft;
use crate::command::{JobDraft, JobPatch, TriggerDraft, TriggerPatch};
use crate::error::{ApiError, FieldErrors};

/// The definitions of one namespace as `who` sees and changes them.
pub struct Definitions<'a> {
    handles: &'a Handles,
    who: &'a Principal,
    namespace: String,
    /// Whether the caller named the namespace (else files may name theirs).
    named: bool,
}

impl<'a> Definitions<'a> {
    /// The registry of `who` in `namespace` (`default` when None); a 404 when `who` has
    /// no role there.
    pub fn of(
        handles: &'a Handles,
        who: &'a Principal,
        namespace: Option<&str>,
    ) -> Result<Definitions<'a>, ApiError> {
        let named = namespace.is_some();
        let namespace = namespace.unwrap_or(store::namespaces::DEFAULT).to_owned();
        who.role_for(&namespace, "namespace", &namespace)?;
        Ok(Definitions {
            handles,
            who,
            namespace,
            named,
        })
    }

    /// The namespace files apply to: the one they name at their top (all the same one),
    /// which must be the caller's when the caller named one; else the caller's.
    fn namespace_of(&self, sources: &[Source]) -> Result<String, ApiError> {
        let mut named: Vec<(&str, String)> = sources
            .iter()
            .filter_map(|source| source.namespace().map(|name| (name, source.namespace_at())))
            .collect();
        named.sort();
        named.dedup_by(|a, b| a.0 == b.0);
        match named.as_slice() {
            [] => Ok(self.namespace.clone()),
            [(name, at)] if !self.named || *name == self.namespace => {
                self.who.role_for(name, "namespace", name).map_err(|_| {
                    ApiError::Invalid(FieldErrors::from([(
                        format!("{at}: namespace"),
                        format!("no namespace {name} where you have a role"),
                    )]))
                })?;
                Ok((*name).to_owned())
            }
            [(name, at)] => Err(ApiError::Invalid(FieldErrors::from([(
                format!("{at}: namespace"),
                format!("the file names namespace {name}, the request {}", self.namespace),
            )]))),
            several => Err(ApiError::Invalid(
                several
                    .iter()
                    .map(|(name, at)| {
                        (
                            format!("{at}: namespace"),
                            format!("the files name several namespaces ({name} here): apply one namespace at a time"),
                        )
                    })
                    .collect(),
            )),
        }
    }

    /// Every job with its triggers, as YAML.
    pub async fn export_yaml(&self) -> Result<String, ApiError> {
        // One transaction: every object read as of one moment.
        let session = InTransaction::over(
            self.handles,
            self.who,
            &self.namespace,
            self.handles.pool.begin().await?,
        );
        let mut document = probactr_definitions::export(&session, None)
            .await
            .map_err(|err| session.failed(err))?;
        // The file says where its objects go.
        if let Value::Object(map) = &mut document {
            map.insert("namespace".into(), Value::String(self.namespace.clone()));
        }
        Ok(probactr_definitions::yaml(&document))
    }

    /// Applies uploaded YAML (`dry_run`: only says what would change): see [`Self::apply`].
    /// A refusal is its status (422, 409, 503…) and its problems, one a line.
    pub async fn apply_yaml(
        &self,
        text: &str,
        dry_run: bool,
        prune: bool,
    ) -> Result<Report, (StatusCode, String)> {
        self.apply(&[("upload".to_owned(), text.to_owned())], dry_run, prune)
            .await
            .map_err(|err| match err {
                ApiError::Invalid(fields) => (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    fields
                        .into_iter()
                        .map(|(at, problem)| format!("{at}: {problem}"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
                other => {
                    other.log();
                    (other.status_code(), other.to_string())
                }
            })
    }

    /// Applies definition files (name, YAML or JSON text): every file is read and every
    /// object checked first; any problem is a 422 naming each (`file:line: field` →
    /// problem) and nothing changes. Then, unless `dry_run`, the changes are made, all in
    /// one transaction under the apply lock (see the module's documentation). Returns the
    /// changes (made, or that would be made).
    pub async fn apply(
        &self,
        files: &[(String, String)],
        dry_run: bool,
        prune: bool,
    ) -> Result<Report, ApiError> {
        self.who.require_operator(&self.namespace, "apply definitions")?;
        let mut sources = Vec::new();
        let mut problems = FieldErrors::new();
        for (name, text) in files {
            match probactr_definitions::read_text(name, text) {
                Ok(found) => sources.extend(found),
                Err(err) => problems.extend(located_problems(&err.to_string())),
            }
        }
        if !problems.is_empty() {
            return Err(ApiError::Invalid(problems));
        }
        let namespace = self.namespace_of(&sources)?;
        self.who.require_operator(&namespace, "apply definitions")?;
        let this = &Definitions {
            handles: self.handles,
            who: self.who,
            namespace,
            named: true,
        };
        let sources = &sources;
        let report = retry_transient("definitions apply", move || async move {
            this.apply_once(sources, dry_run, prune).await.map_err(Attempt)
        })
        .await
        .map_err(|Attempt(err)| err)?;
        if !dry_run {
            tracing::info!(changes = report.changes.len(), "definitions applied");
        }
        Ok(report)
    }

    /// One attempt of [`Self::apply`]: check, then write, in one transaction.
    async fn apply_once(&self, sources: &[Source], dry_run: bool, prune: bool) -> Result<Report, ApiError> {
        let mut tx = self.handles.pool.begin().await?;
        // Held until the transaction ends: another apply waits here, so what the check
        // below read still holds when the changes are made.
        store::definitions::lock_apply(&mut *tx).await?;
        let session = InTransaction::over(self.handles, self.who, &self.namespace, tx);
        // Every problem of every object is found before the answer names them all.
        let checked = probactr_definitions::check(&Checking::over(&session), sources, prune).await;
        let report = checked.map_err(|err| session.failed(err))?;
        if dry_run {
            // Dropped, the transaction rolls back (it wrote nothing).
            return Ok(report);
        }
        let applied = probactr_definitions::apply(&session, sources, false, prune)
            .await
            .map_err(|err| session.failed(err))?;
        session.into_transaction().commit().await?;
        Ok(applied)
    }
}

/// An attempt's failure, as the retry loop sees it: run again when the database aborted
/// it for concurrency.
struct Attempt(ApiError);

impl Transient for Attempt {
    fn is_transient(&self) -> bool {
        matches!(self.0, ApiError::Busy)
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Problems as `FILE:LINE: field: problem` lines (or `FILE:LINE: problem`), keyed by
/// `FILE:LINE: field` (so that `key: problem` reads as the line did).
fn located_problems(text: &str) -> FieldErrors {
    let mut problems = FieldErrors::new();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let Some((at, rest)) = line.split_once(": ") else {
            problems.insert("definitions".to_owned(), line.to_owned());
            continue;
        };
        match rest.split_once(": ") {
            Some((field, problem)) if !field.contains(' ') => {
                problems.insert(format!("{at}: {field}"), problem.to_owned());
            }
            _ => {
                problems.insert(at.to_owned(), rest.to_owned());
            }
        }
    }
    problems
}

/// Ids [`Checking`] gives the jobs and workflows it "creates" (no real id comes near).
const FAKE_IDS: i64 = 1 << 60;

/// A registry that reads the server as `who` sees it and validates what would be
/// written without writing it: jobs it "creates" get ids from [`FAKE_IDS`] on and are
/// listed from then on, so that the rest of the files (child lists, workflows, rules)
/// can name them; so are the channels it "creates", for the rules naming them.
pub struct Checking<'a> {
    inner: &'a InTransaction<'a>,
    created: Mutex<Vec<(i64, String)>>,
    created_channels: Mutex<Vec<(i64, String)>>,
}

impl<'a> Checking<'a> {
    fn over(inner: &'a InTransaction<'a>) -> Checking<'a> {
        Checking {
            inner,
            created: Mutex::new(Vec::new()),
            created_channels: Mutex::new(Vec::new()),
        }
    }

    fn created(&self) -> Vec<(i64, String)> {
        self.created.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The pool check the real write makes (the pool exists in the namespace and holds
    /// the job's weight), so that a dry run refuses what the apply would.
    async fn pool_checked(&self, job: &mut store::jobs::NewJob) -> Result<(), Refusal> {
        job.namespace = self.inner.namespace.to_owned();
        let mut tx = self.inner.tx.lock().await;
        match super::jobs::check_pool(&mut tx, job).await {
            Err(err @ ApiError::Invalid(_)) => Err(refusal(err)),
            Err(err) => Err(self.inner.refused(err)),
            Ok(()) => Ok(()),
        }
    }
}

/// A bad body's refusal, as the API would answer it.
fn checked<T>(result: Result<T, ApiError>) -> Result<T, Refusal> {
    result.map_err(refusal)
}

impl Registry for Checking<'_> {
    async fn jobs(&self) -> Result<Vec<Value>, Refusal> {
        let mut jobs = self.inner.jobs().await?;
        for (id, name) in self.created() {
            jobs.push(
                json!({"id": id, "name": name, "managed_by": probactr_definitions::MANAGER, "version": 1}),
            );
        }
        Ok(jobs)
    }

    async fn triggers(&self, job_id: i64) -> Result<Vec<Value>, Refusal> {
        if job_id >= FAKE_IDS {
            return Ok(Vec::new());
        }
        self.inner.triggers(job_id).await
    }

    async fn create_job(&self, body: Value) -> Result<i64, Refusal> {
        let ns = self.inner.namespace;
        checked(self.inner.who.require_operator(ns, "create jobs"))?;
        let name = body["name"].as_str().unwrap_or_default().to_owned();
        let draft = JobDraft::from_json(in_namespace(body, ns));
        if let Some(kind) = draft.requested_kind() {
            checked(self.inner.who.require_job_kind(ns, kind))?;
        }
        let job = draft.definition(None);
        // Listed even when refused, so that the check goes on with its triggers and the
        // objects naming it, and names their own problems rather than its absence.
        let id = {
            let mut created = self
                .created
                .lock()
                .map_err(|_| refusal(ApiError::Internal(anyhow::anyhow!("poisoned"))))?;
            let id = FAKE_IDS + created.len() as i64;
            created.push((id, name));
            id
        };
        let mut job = checked(job)?;
        checked(self.inner.who.require_job_kind(ns, job.kind))?;
        self.pool_checked(&mut job).await?;
        Ok(id)
    }

    async fn update_job(&self, id: i64, body: Value) -> Result<(), Refusal> {
        if id >= FAKE_IDS {
            return Ok(());
        }
        let ns = self.inner.namespace;
        checked(self.inner.who.require_operator(ns, "edit jobs"))?;
        let current = {
            let mut tx = self.inner.tx.lock().await;
            store::jobs::get(&mut **tx, id)
                .await
                .map_err(|err| self.inner.refused(err.into()))?
        }
        .ok_or_else(|| refusal(ApiError::not_found("job", id)))?;
        if current.namespace != ns {
            return Err(refusal(ApiError::not_found("job", id)));
        }
        checked(self.inner.who.require_job_kind(ns, current.kind))?;
        let (_, mut job) = checked(JobPatch::from_json(body).definition(&current))?;
        checked(self.inner.who.require_job_kind(ns, job.kind))?;
        self.pool_checked(&mut job).await?;
        Ok(())
    }

    async fn delete_job(&self, _id: i64) -> Result<(), Refusal> {
        checked(
            self.inner
                .who
                .require_operator(self.inner.namespace, "delete jobs"),
        )
    }

    async fn create_trigger(&self, job_id: i64, body: Value) -> Result<(), Refusal> {
        checked(
            self.inner
                .who
                .require_operator(self.inner.namespace, "create triggers"),
        )?;
        checked(TriggerDraft::from_json(body).definition(None, Utc::now(), job_id))?;
        Ok(())
    }

    async fn update_trigger(&self, id: i64, body: Value) -> Result<(), Refusal> {
        checked(
            self.inner
                .who
                .require_operator(self.inner.namespace, "edit triggers"),
        )?;
        let before = {
            let mut tx = self.inner.tx.lock().await;
            store::triggers::get(&mut **tx, id).await
        };
        let before = self
            .inner
            .done(before.map_err(ApiError::from))?
            .ok_or_else(|| refusal(ApiError::not_found("trigger", id)))?;
        checked(TriggerPatch::from_json(body).definition(&before))?;
        Ok(())
    }

    async fn delete_trigger(&self, _id: i64) -> Result<(), Refusal> {
        checked(
            self.inner
                .who
                .require_operator(self.inner.namespace, "delete triggers"),
        )
    }

    async fn channels(&self) -> Result<Option<Vec<Value>>, Refusal> {
        let mut channels = self.inner.channels().await?;
        if let Some(channels) = &mut channels {
            let created = self
                .created_channels
                .lock()
                .map(|c| c.clone())
                .unwrap_or_default();
            for (id, name) in created {
                channels.push(json!({"id": id, "name": name}));
            }
        }
        Ok(channels)
    }

    async fn put_channel(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        checked(
            self.inner
                .who
                .require_admin(self.inner.namespace, "manage alert channels"),
        )?;
        let name = body["name"].as_str().unwrap_or_default().to_owned();
        checked(ChannelCommand::read(body))?;
        if id.is_none() {
            let mut created = self
                .created_channels
                .lock()
                .map_err(|_| refusal(ApiError::Internal(anyhow::anyhow!("poisoned"))))?;
            let fake = FAKE_IDS + created.len() as i64;
            created.push((fake, name));
        }
        Ok(())
    }

    async fn rules(&self) -> Result<Vec<Value>, Refusal> {
        self.inner.rules().await
    }

    async fn put_rule(&self, _id: Option<i64>, body: Value) -> Result<(), Refusal> {
        checked(alert::read_rule(body))?;
        Ok(())
    }

    async fn workflows(&self) -> Result<Vec<Value>, Refusal> {
        self.inner.workflows().await
    }

    async fn put_workflow(&self, id: Option<i64>, body: Value) -> Result<i64, Refusal> {
        checked(
            self.inner
                .who
                .require_operator(self.inner.namespace, "edit workflows"),
        )?;
        let mut known: BTreeSet<i64> = self
            .inner
            .jobs()
            .await?
            .iter()
            .filter_map(|job| job["id"].as_i64())
            .collect();
        known.extend(self.created().into_iter().map(|(id, _)| id));
        checked(WorkflowDraft::from_json(body).validate(&known))?;
        Ok(id.unwrap_or(FAKE_IDS))
    }

    async fn workflow_triggers(&self, workflow_id: i64) -> Result<Vec<Value>, Refusal> {
        if workflow_id >= FAKE_IDS {
            return Ok(Vec::new());
        }
        self.inner.workflow_triggers(workflow_id).await
    }

    async fn create_workflow_trigger(&self, workflow_id: i64, body: Value) -> Result<(), Refusal> {
        checked(TriggerDraft::from_json(body).definition(None, Utc::now(), workflow_id))?;
        Ok(())
    }

    async fn delete_workflow_trigger(&self, _workflow_id: i64, _id: i64) -> Result<(), Refusal> {
        Ok(())
    }
}

/// A create body with `namespace` set (the files' objects go to the apply's namespace).
fn in_namespace(mut body: Value, namespace: &str) -> Value {
    if let Some(map) = body.as_object_mut() {
        map.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
    }
    body
}

fn refusal(err: ApiError) -> Refusal {
    refusal_of(&err.normalized())
}

/// What the definitions crate is told of `err` (it locates the message in the files).
fn refusal_of(err: &ApiError) -> Refusal {
    let message = match err {
        // The cause is logged, not shown.
        ApiError::Internal(_) => {
            "could not be written, so nothing was changed (the manager's log says why)".to_owned()
        }
        other => other.to_string(),
    };
    Refusal {
        message,
        fields: err.fields().into_iter().collect(),
    }
}

fn json<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The registry of `who` over one transaction: every read and write of an apply (or an
/// export) goes through it, so that later objects see the earlier ones and nothing is
/// kept unless the caller commits ([`Self::into_transaction`]).
pub struct InTransaction<'a> {
    handles: &'a Handles,
    who: &'a Principal,
    /// The namespace read and written: every object listed is of it, and every object
    /// made goes to it.
    namespace: &'a str,
    tx: tokio::sync::Mutex<Transaction<'static, Postgres>>,
    /// The first error a call met, whole: the definitions crate keeps only its text, and
    /// the answer depends on its kind (aborted for concurrency, changed meanwhile…).
    failure: Mutex<Option<ApiError>>,
}

impl<'a> InTransaction<'a> {
    fn over(
        handles: &'a Handles,
        who: &'a Principal,
        namespace: &'a str,
        tx: Transaction<'static, Postgres>,
    ) -> InTransaction<'a> {
        InTransaction {
            handles,
            who,
            namespace,
            tx: tokio::sync::Mutex::new(tx),
            failure: Mutex::new(None),
        }
    }

    /// The transaction, to commit.
    fn into_transaction(self) -> Transaction<'static, Postgres> {
        self.tx.into_inner()
    }

    /// `err` as a refusal, kept whole when it is the first.
    fn refused(&self, err: ApiError) -> Refusal {
        let err = err.normalized();
        let refusal = refusal_of(&err);
        if let Ok(mut failure) = self.failure.lock() {
            failure.get_or_insert(err);
        }
        refusal
    }

    /// The answer to an apply (or export) that failed with `err`: the database's abort
    /// for concurrency or unavailability as such (503, run again), an object changed
    /// meanwhile as a 409, anything else as a 422 naming where in the files it happened.
    fn failed(&self, err: DefinitionError) -> ApiError {
        let first = self.failure.lock().ok().and_then(|mut failure| failure.take());
        match first {
            Some(ApiError::Busy) => ApiError::Busy,
            Some(unavailable @ ApiError::Unavailable(_)) => unavailable,
            Some(ApiError::Conflict(_) | ApiError::Stale(_) | ApiError::PreconditionFailed(_)) => {
                ApiError::Conflict(err.0)
            }
            Some(ApiError::Internal(cause)) => {
                tracing::error!(error = ?cause, "applying definitions failed; nothing was changed");
                ApiError::Invalid(located_problems(&err.0))
            }
            _ => ApiError::Invalid(located_problems(&err.0)),
        }
    }

    /// A call's outcome, a failure [`Self::refused`].
    fn done<T>(&self, outcome: Result<T, ApiError>) -> Result<T, Refusal> {
        outcome.map_err(|err| self.refused(err))
    }
}

impl Registry for InTransaction<'_> {
    async fn jobs(&self) -> Result<Vec<Value>, Refusal> {
        let page = Page {
            limit: Page::MAX_LIMIT,
            offset: 0,
        };
        let mut tx = self.tx.lock().await;
        let filter = JobFilter {
            namespaces: Some(vec![self.namespace.to_owned()]),
            ..JobFilter::default()
        };
        let listed = store::jobs::page_with_stats(&mut **tx, &filter, page).await;
        let rows = self.done(listed.map_err(ApiError::from))?;
        Ok(rows
            .into_iter()
            .map(|row| json(JobView::from(row).visible_to(self.who)))
            .collect())
    }

    async fn triggers(&self, job_id: i64) -> Result<Vec<Value>, Refusal> {
        let mut tx = self.tx.lock().await;
        let conn: &mut PgConnection = &mut tx;
        let listed = async {
            super::jobs::visible(&mut *conn, self.who, job_id, false).await?;
            let listed = store::triggers::list_for_job(&mut *conn, job_id).await?;
            triggers::with_params_from(&mut *conn, listed).await
        }
        .await;
        Ok(self.done(listed)?.into_iter().map(json).collect())
    }

    async fn create_job(&self, body: Value) -> Result<i64, Refusal> {
        let mut tx = self.tx.lock().await;
        let body = in_namespace(body, self.namespace);
        let made = super::jobs::create_in(&mut tx, self.who, JobDraft::from_json(body)).await;
        self.done(made.map(|job| job.id))
    }

    async fn update_job(&self, id: i64, body: Value) -> Result<(), Refusal> {
        let mut tx = self.tx.lock().await;
        let made = super::jobs::update_in(&mut tx, self.who, id, JobPatch::from_json(body)).await;
        self.done(made.map(drop))
    }

    async fn delete_job(&self, id: i64) -> Result<(), Refusal> {
        let mut tx = self.tx.lock().await;
        let deleted = super::jobs::delete_in(&mut tx, self.who, id, false).await;
        self.done(deleted)
    }

    async fn create_trigger(&self, job_id: i64, body: Value) -> Result<(), Refusal> {
        let mut tx = self.tx.lock().await;
        let made = triggers::create_in(
            &mut tx,
            self.handles.secret_keys.as_deref(),
            self.who,
            job_id,
            TriggerDraft::from_json(body),
        )
        .await;
        self.done(made.map(drop))
    }

    async fn update_trigger(&self, id: i64, body: Value) -> Result<(), Refusal> {
        let mut tx = self.tx.lock().await;
        let edited = triggers::update_in(
            &mut tx,
            self.handles.secret_keys.as_deref(),
            self.who,
            id,
            TriggerPatch::from_json(body),
        )
        .await;
        self.done(edited.map(drop))
    }

    async fn delete_trigger(&self, id: i64) -> Result<(), Refusal> {
        let mut tx = self.tx.lock().await;
        let deleted = triggers::delete_in(&mut tx, self.who, id).await;
        self.done(deleted.map(drop))
    }

    async fn channels(&self) -> Result<Option<Vec<Value>>, Refusal> {
        if !self
            .who
            .access
            .role_in(self.namespace)
            .is_some_and(|role| role.is_admin())
        {
            return Ok(None);
        }
        let mut tx = self.tx.lock().await;
        let listed = async {
            let mut channels = store::alerts::channels::list(&mut **tx).await?;
            channels.retain(|channel| channel.namespace == self.namespace);
            Ok::<_, store::StoreError>(channels)
        }
        .await;
        let channels = self.done(listed.map_err(ApiError::from))?;
        Ok(Some(channels.into_iter().map(json).collect()))
    }

    async fn put_channel(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        let command = ChannelCommand::read(in_namespace(body, self.namespace)).map_err(refusal)?;
        let mut tx = self.tx.lock().await;
        let saved = match id {
            None => alerts::create_channel_in(&mut tx, self.handles, self.who, command).await,
            Some(id) => alerts::update_channel_in(&mut tx, self.handles, self.who, id, command).await,
        };
        self.done(saved.map(drop))
    }

    async fn rules(&self) -> Result<Vec<Value>, Refusal> {
        let mut tx = self.tx.lock().await;
        let listed = async {
            let mut rules = store::alerts::rules::list(&mut **tx).await?;
            rules.retain(|rule| rule.namespace == self.namespace);
            Ok::<_, store::StoreError>(rules)
        }
        .await;
        let rules = self.done(listed.map_err(ApiError::from))?;
        Ok(rules.into_iter().map(json).collect())
    }

    async fn put_rule(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        let command = alert::read_rule(in_namespace(body, self.namespace)).map_err(refusal)?;
        let mut tx = self.tx.lock().await;
        let saved = alerts::save_rule_in(&mut tx, self.who, id, command).await;
        self.done(saved.map(drop))
    }

    async fn workflows(&self) -> Result<Vec<Value>, Refusal> {
        let mut tx = self.tx.lock().await;
        let listed =
            workflows::list_in(&mut tx, Some(std::slice::from_ref(&self.namespace.to_owned()))).await;
        Ok(self.done(listed)?.into_iter().map(json).collect())
    }

    async fn put_workflow(&self, id: Option<i64>, body: Value) -> Result<i64, Refusal> {
        let mut tx = self.tx.lock().await;
        let saved = match id {
            None => {
                let body = in_namespace(body, self.namespace);
                workflows::create_in(&mut tx, self.handles.secret_keys.as_deref(), self.who, body).await
            }
            Some(id) => {
                workflows::replace_in(
                    &mut tx,
                    self.handles.secret_keys.as_deref(),
                    self.who,
                    id,
                    body,
                    None,
                )
                .await
            }
        };
        self.done(saved.map(|workflow| workflow.id))
    }

    async fn workflow_triggers(&self, workflow_id: i64) -> Result<Vec<Value>, Refusal> {
        let mut tx = self.tx.lock().await;
        let listed = workflows::triggers_in(&mut tx, self.who, workflow_id).await;
        Ok(self.done(listed)?.into_iter().map(json).collect())
    }

    async fn create_workflow_trigger(&self, workflow_id: i64, body: Value) -> Result<(), Refusal> {
        let mut tx = self.tx.lock().await;
        let made = workflows::create_trigger_in(
            &mut tx,
            self.handles.secret_keys.as_deref(),
            self.who,
            workflow_id,
            TriggerDraft::from_json(body),
        )
        .await;
        self.done(made.map(drop))
    }

    async fn delete_workflow_trigger(&self, workflow_id: i64, id: i64) -> Result<(), Refusal> {
        let mut tx = self.tx.lock().await;
        let deleted = workflows::delete_trigger_in(&mut tx, self.who, workflow_id, id).await;
        self.done(deleted)
    }
}
