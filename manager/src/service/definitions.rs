//! Definitions as code in the manager: the jobs and triggers `who` may see and change, as
//! a [`Registry`] for [`probactr_common::definitions`] (the admin's YAML download and
//! upload). Every change goes through the same services, checks and audit as the API.

use probactr_common::definitions::{self, Refusal, Registry, Report};
use probactr_common::store::jobs::JobFilter;
use probactr_common::store::Page;
use serde_json::Value;

use super::{alerts, jobs, triggers, workflows};
use crate::auth::Principal;
use crate::command::alert::{self, ChannelCommand};
use crate::command::{JobDraft, JobPatch, TriggerDraft};
use crate::error::ApiError;
use crate::state::AppState;

/// The cluster's definitions as `who` sees and changes them.
pub struct Definitions<'a> {
    state: &'a AppState,
    who: &'a Principal,
}

impl<'a> Definitions<'a> {
    /// The registry of `who`.
    pub fn of(state: &'a AppState, who: &'a Principal) -> Definitions<'a> {
        Definitions { state, who }
    }

    /// Every job with its triggers, as YAML.
    pub async fn export_yaml(&self) -> Result<String, ApiError> {
        let document = definitions::export(self, None)
            .await
            .map_err(|err| ApiError::Conflict(err.to_string()))?;
        Ok(definitions::yaml(&document))
    }

    /// Applies uploaded YAML (`dry_run`: only says what would change).
    pub async fn apply_yaml(&self, text: &str, dry_run: bool, prune: bool) -> Result<Report, String> {
        self.who
            .require_operator("apply definitions")
            .map_err(|err| err.to_string())?;
        let sources = definitions::read_text("upload", text).map_err(|err| err.to_string())?;
        definitions::apply(self, &sources, dry_run, prune)
            .await
            .map_err(|err| err.to_string())
    }
}

fn refusal(err: ApiError) -> Refusal {
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
        let listed = jobs::list(self.state, self.who, &JobFilter::default(), page)
            .await
            .map_err(refusal)?;
        Ok(listed.items.into_iter().map(json).collect())
    }

    async fn triggers(&self, job_id: i64) -> Result<Vec<Value>, Refusal> {
        let listed = triggers::list_for_job(self.state, job_id)
            .await
            .map_err(refusal)?;
        let listed = triggers::with_params(self.state, listed).await.map_err(refusal)?;
        Ok(listed.into_iter().map(json).collect())
    }

    async fn create_job(&self, body: Value) -> Result<i64, Refusal> {
        let made = jobs::create(self.state, self.who, JobDraft::from_json(body))
            .await
            .map_err(refusal)?;
        Ok(made.id)
    }

    async fn update_job(&self, id: i64, body: Value) -> Result<(), Refusal> {
        jobs::update(self.state, self.who, id, JobPatch::from_json(body))
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn delete_job(&self, id: i64) -> Result<(), Refusal> {
        jobs::delete(self.state, self.who, id, false)
            .await
            .map_err(refusal)
    }

    async fn create_trigger(&self, job_id: i64, body: Value) -> Result<(), Refusal> {
        triggers::create(self.state, self.who, job_id, TriggerDraft::from_json(body))
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn delete_trigger(&self, id: i64) -> Result<(), Refusal> {
        triggers::delete(self.state, self.who, id)
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn channels(&self) -> Result<Option<Vec<Value>>, Refusal> {
        match alerts::list_channels(self.state, self.who).await {
            Ok(channels) => Ok(Some(channels.into_iter().map(json).collect())),
            Err(ApiError::Forbidden(_)) => Ok(None),
            Err(err) => Err(refusal(err)),
        }
    }

    async fn put_channel(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        let command = ChannelCommand::read(body).map_err(refusal)?;
        match id {
            None => alerts::create_channel(self.state, self.who, command).await,
            Some(id) => alerts::update_channel(self.state, self.who, id, command).await,
        }
        .map_err(refusal)?;
        Ok(())
    }

    async fn rules(&self) -> Result<Vec<Value>, Refusal> {
        let rules = alerts::list_rules(self.state, self.who).await.map_err(refusal)?;
        Ok(rules.into_iter().map(json).collect())
    }

    async fn put_rule(&self, id: Option<i64>, body: Value) -> Result<(), Refusal> {
        let fields = alert::read_rule(body).map_err(refusal)?;
        alerts::save_rule(self.state, self.who, id, fields)
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn workflows(&self) -> Result<Vec<Value>, Refusal> {
        let listed = workflows::list(self.state).await.map_err(refusal)?;
        Ok(listed.into_iter().map(json).collect())
    }

    async fn put_workflow(&self, id: Option<i64>, body: Value) -> Result<i64, Refusal> {
        let saved = match id {
            None => workflows::create(self.state, self.who, body).await,
            Some(id) => workflows::replace(self.state, self.who, id, body).await,
        }
        .map_err(refusal)?;
        Ok(saved.workflow.id)
    }

    async fn workflow_triggers(&self, workflow_id: i64) -> Result<Vec<Value>, Refusal> {
        let listed = workflows::triggers(self.state, workflow_id)
            .await
            .map_err(refusal)?;
        Ok(listed.into_iter().map(json).collect())
    }

    async fn create_workflow_trigger(&self, workflow_id: i64, body: Value) -> Result<(), Refusal> {
        workflows::create_trigger(self.state, self.who, workflow_id, TriggerDraft::from_json(body))
            .await
            .map_err(refusal)?;
        Ok(())
    }

    async fn delete_workflow_trigger(&self, workflow_id: i64, id: i64) -> Result<(), Refusal> {
        workflows::delete_trigger(self.state, self.who, workflow_id, id)
            .await
            .map_err(refusal)
    }
}
