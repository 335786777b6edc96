//! Definitions as code in the manager: the jobs and triggers `who` may see and change, as
//! a [`Registry`] for [`probactr_definitions`] (the admin's YAML download and
//! upload, `POST /api/v1/definitions/apply`, `probactr apply`). Every change goes through
//! the same services, checks and audit as the API.
//!
//! Applying is checked before it changes anything: the whole apply is first run against
//! [`Checking`], a registry that reads the server but only validates what would be
//! written (every job, trigger, channel, rule and workflow body through the same command
//! checks as the API). A file with a bad object is refused (422, naming file, line and
//! field) with nothing changed. Applies are serialized by an advisory lock held for the
//! whole check-then-apply, so two applies never interleave.

use std::collections::BTreeSet;
use std::sync::Mutex;

use chrono::Utc;
use probactr_common::store;
use probactr_common::store::jobs::JobFilter;
use probactr_common::store::Page;
use probactr_definitions::{Refusal, Registry, Report};
use serde_json::{json, Value};

use super::Handles;
use super::{alerts, jobs, triggers, workflows};
use crate::auth::Principal;
use crate::command::alert::{self, ChannelCommand};
use crate::command::workflow::WorkflowDraft;
use crate::command::{JobDraft, JobPatch, TriggerDraft};
use crate::error::{ApiError, FieldErrors};

/// The cluster's definitions as `who` sees and changes them.
pub struct Definitions<'a> {
    handles: &'a Handles,
    who: &'a Principal,
}

impl<'a> Definitions<'a> {
    /// The registry of `who`.
    pub fn of(handles: &'a Handles, who: &'a Principal) -> Definitions<'a> {
        Definitions { handles, who }
    }

    /// Every job with its triggers, as YAML.
    pub async fn export_yaml(&self) -> Result<String, ApiError> {
        let document = probactr_definitions::export(self, None)
            .await
            .map_err(|err| ApiError::Conflict(err.to_string()))?;
        Ok(probactr_definitions::yaml(&document))
    }

    /// Applies uploaded YAML (`dry_run`: only says what would change): see [`Self::apply`].
    pub async fn apply_yaml(&self, text: &str, dry_run: bool, prune: bool) -> Result<Report, String> {
        self.apply(&[("upload".to_owned(), text.to_owned())], dry_run, prune)
            .await
            .map_err(|err| match err {
                ApiError::Invalid(fields) => fields
                    .into_iter()
                    .map(|(at, problem)| format!("{at}: {problem}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            })
    }

    /// Applies definition files (name, YAML or JSON text): every file is read and every
    /// object checked first; any problem is a 422 naming each (`file:line: field` →
    /// problem) and nothing changes. Then, unless `dry_run`, the changes are made, under
    /// the apply lock. Returns the changes (made, or that would be made).
    pub async fn apply(
        &self,
        files: &[(String, String)],
        dry_run: bool,
        prune: bool,
    ) -> Result<Report, ApiError> {
        self.who.require_operator("apply definitions")?;
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
        // Held until this function returns (the transaction rolls back when dropped):
        // another apply waits here, so the check below still holds when the changes are made.
        let mut lock = self.handles.pool.begin().await?;
        store::definitions::lock_apply(&mut *lock).await?;
        let checking = Checking::over(self);
        let report = probactr_definitions::apply(&checking, &sources, false, prune)
            .await
            .map_err(|err| ApiError::Invalid(located_problems(&err.0)))?;
        if dry_run {
            return Ok(report);
        }
        let applied = probactr_definitions::apply(self, &sources, false, prune)
            .await
            .map_err(|err| ApiError::Invalid(located_problems(&err.0)))?;
        lock.rollback().await?;
        tracing::info!(changes = applied.changes.len(), "definitions applied");
        Ok(applied)
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
    inner: &'a Definitions<'a>,
    created: Mutex<Vec<(i64, String)>>,
    created_channels: Mutex<Vec<(i64, String)>>,
}

impl<'a> Checking<'a> {
    fn over(inner: &'a Definitions<'a>) -> Checking<'a> {
        Checking {
            inner,
            created: Mutex::new(Vec::new()),
            created_channels: Mutex::new(Vec::new()),
        }
    }

    fn created(&self) -> Vec<(i64, String)> {
        self.created.lock().map(|c| c.clone()).unwrap_or_default()
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
        checked(self.inner.who.require_operator("create jobs"))?;
        let name = body["name"].as_str().unwrap_or_default().to_owned();
        let draft = JobDraft::from_json(body);
        if let Some(kind) = draft.requested_kind() {
            checked(self.inner.who.require_job_kind(kind))?;
        }
        let job = checked(draft.definition(None))?;
        checked(self.inner.who.require_job_kind(job.kind))?;
        let mut created = self
            .created
            .lock()
            .map_err(|_| refusal(ApiError::Internal(anyhow::anyhow!("poisoned"))))?;
        let id = FAKE_IDS + created.len() as i64;
        created.push((id, name));
        Ok(id)
    }

    async fn update_job(&self, id: i64, body: Value) -> Result<(), Refusal> {
        if id >= FAKE_IDS {
            return Ok(());
        }
        checked(self.inner.who.require_operator("edit jobs"))?;
        let current = store::jobs::get(&self.inner.handles.pool, id)
            .await
            .map_err(|err| refusal(err.into()))?
            .ok_or_else(|| refusal(ApiError::not_found("job", id)))?;
        checked(self.inner.who.require_job_kind(current.kind))?;
        let (_, job) = checked(JobPatch::from_json(body).definition(&current))?;
        checked(self.inner.who.require_job_kind(job.kind))?;
        Ok(())
    }

    async fn delete_job(&self, _id: i64) -> Result<(), Refusal> {
        checked(self.inner.who.require_operator("delete jobs"))
    }

    async fn create_trigger(&self, _job_id: i64, body: Value) -> Result<(), Refusal> {
        checked(self.inner.who.require_operator("create triggers"))?;
        checked(TriggerDraft::from_json(body).definition(None, Utc::now()))?;
        Ok(())
    }

    async fn delete_trigger(&self, _id: i64) -> Result<(), Refusal> {
        checked(self.inner.who.require_operator("delete triggers"))
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
                .require(self.inner.who.role.is_admin(), "manage alert channels"),
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
        checked(self.inner.who.require_operator("edit workflows"))?;
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

    async fn create_workflow_trigger(&self, _workflow_id: i64, body: Value) -> Result<(), Refusal> {
        checked(TriggerDraft::from_json(body).definition(None, Utc::now()))?;
        Ok(())
    }

    async fn delete_workflow_trigger(&self, _workflow_id: i64, _id: i64) -> Result<(), Refusal> {
        Ok(())
    }
}

fn refusal(err: ApiError) -> Refusal {
    let err = err.normalized();
    Refusal {
        message: err.to_string(),
        fields: err.fields().into_iter().collect(),
    }
}

fn json<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

impl Registry for Definitions<'_> {
    async fn jobs(&self) -> Result<Vec<Value>, Refusal> {
        let page = Page {
            limit: Page::MAX_LIMIT,
            offset: 0,
        };
        let listed = jobs::list(self.handles, self.who, &JobFilter::default(), page)
            .await
            .map_err(refusal)?;
        Ok(listed.items.into_iter().map(json).collect())
    }

    async fn triggers(&self, job_id: i64) -> Result<Vec<Value>, Refusal> {
        let listed = triggers::list_for_job(self.handles, job_id)
            .await
            .map_err(refusal)?;
        let listed = triggers::with_params(self.handles, listed)
            .await
            .map_err(refusal)?;
        Ok(listed.into_iter().map(json).collect())
    }

    async fn create_job(&self, body: Value) -> Result<i64, Refusal> {
        let made = jobs::create(self.handles, self.who, JobDraft::from_json(body))
            .await
            .map_err(refusal)?;
        Ok(made.id)
    }

    async fn update_job(&self, id: i64, body: Value) -> Result<(), Refusal> {
        jobs::update(self.handles, self.who, id, JobPatch::from_json(body))
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn delete_job(&self, id: i64) -> Result<(), Refusal> {
        jobs::delete(self.handles, self.who, id, false)
            .await
            .map_err(refusal)
    }

    async fn create_trigger(&self, job_id: i64, body: Value) -> Result<(), Refusal> {
        triggers::create(self.handles, self.who, job_id, TriggerDraft::from_json(body))
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn delete_trigger(&self, id: i64) -> Result<(), Refusal> {
        triggers::delete(self.handles, self.who, id)
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn channels(&self) -> Result<Option<Vec<Value>>, Refusal> {
        match alerts::list_channels(self.handles, self.who).await {
            Ok(channels) => Ok(Some(channels.into_iter().map(json).collect())),
            Err(ApiError::Forbidden(_)) => Ok(None),
            Err(err) => Err(refusal(err)),
        }
    }

    async fn put_channel(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        let command = ChannelCommand::read(body).map_err(refusal)?;
        match id {
            None => alerts::create_channel(self.handles, self.who, command).await,
            Some(id) => alerts::update_channel(self.handles, self.who, id, command).await,
        }
        .map_err(refusal)?;
        Ok(())
    }

    async fn rules(&self) -> Result<Vec<Value>, Refusal> {
        let rules = alerts::list_rules(self.handles, self.who)
            .await
            .map_err(refusal)?;
        Ok(rules.into_iter().map(json).collect())
    }

    async fn put_rule(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        let fields = alert::read_rule(body).map_err(refusal)?;
        alerts::save_rule(self.handles, self.who, id, fields)
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn workflows(&self) -> Result<Vec<Value>, Refusal> {
        let listed = workflows::list(self.handles).await.map_err(refusal)?;
        Ok(listed.into_iter().map(json).collect())
    }

    async fn put_workflow(&self, id: Option<i64>, body: Value) -> Result<i64, Refusal> {
        let saved = match id {
            None => workflows::create(self.handles, self.who, body).await,
            Some(id) => workflows::replace(self.handles, self.who, id, body, None).await,
        }
        .map_err(refusal)?;
        Ok(saved.workflow.id)
    }

    async fn workflow_triggers(&self, workflow_id: i64) -> Result<Vec<Value>, Refusal> {
        let listed = workflows::triggers(self.handles, workflow_id)
            .await
            .map_err(refusal)?;
        Ok(listed.into_iter().map(json).collect())
    }

    async fn create_workflow_trigger(&self, workflow_id: i64, body: Value) -> Result<(), Refusal> {
        workflows::create_trigger(self.handles, self.who, workflow_id, TriggerDraft::from_json(body))
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn delete_workflow_trigger(&self, workflow_id: i64, id: i64) -> Result<(), Refusal> {
        workflows::delete_trigger(self.handles, self.who, workflow_id, id)
            .await
            .map_err(refusal)
    }
}
