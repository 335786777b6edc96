//! Creating a trigger ([`TriggerDraft`]) and editing one ([`TriggerPatch`]).

use chrono::{DateTime, Utc};
use probactr_common::calendar::CalendarMode;
use probactr_common::model::{Misfire, Trigger, TriggerKind};
use probactr_common::schedule::{self, CronSpec, TriggerSchedule};
use probactr_common::store::triggers::{Extras, NewTrigger};
use probactr_common::{params_schema, secrets};
use serde_json::Value;
use utoipa::openapi::{RefOr, Schema};

use super::webhook::WebhookDraft;
use super::{lenient_input, Checks, INT4_MAX};
use crate::error::{ApiError, FieldErrors};
use crate::input::{Given, Input};

// Also the OpenAPI schema of the trigger bodies: its docs are the API's documentation.
/// A trigger's definition as given: every field optional (absent means the default on a
/// create and unchanged on an edit; `kind` and its own field are required on a create).
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct TriggerDraft {
    /// `cron`, `interval`, `once` or `webhook`; send the kind's own field too. Required on
    /// create.
    #[schema(value_type = Option<TriggerKind>)]
    pub kind: Given<TriggerKind>,
    /// For `cron`: six fields with seconds (`0 */5 * * * *`) or five without; `H`,
    /// `H(a-b)`, `H/n` take values fixed by the job's id (the workflow's for a workflow
    /// trigger), so triggers written `H H * * *` spread over the day.
    #[schema(value_type = Option<String>)]
    pub cron: Given<String>,
    /// For `cron`: an IANA time zone. Default UTC.
    #[schema(value_type = Option<String>)]
    pub timezone: Given<String>,
    /// For `interval`: seconds between instants.
    #[schema(value_type = Option<i64>)]
    pub interval_secs: Given<i64>,
    /// For `once`: the instant, RFC 3339.
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub at: Given<DateTime<Utc>>,
    /// No instant before this one (null clears it).
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub start_at: Given<DateTime<Utc>>,
    /// No instant after this one (null clears it).
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub end_at: Given<DateTime<Utc>>,
    /// What to do with instants missed while nothing could fire them. Default fire_once.
    #[schema(value_type = Option<Misfire>)]
    pub misfire: Given<Misfire>,
    /// How late an instant may fire before it counts as missed.
    #[schema(value_type = Option<i32>)]
    pub misfire_threshold_secs: Given<i64>,
    /// Paused? Paused triggers do not fire.
    #[schema(value_type = Option<bool>)]
    pub paused: Given<bool>,
    /// Runs of this trigger claimed or running at once (null, the default: only the job's
    /// bound applies).
    #[schema(value_type = Option<i32>)]
    pub max_concurrency: Given<i64>,
    /// Parameters of its runs (an object): defaults that a run's own parameters override.
    #[schema(value_type = Option<Object>)]
    pub params: Option<Value>,
    /// The webhook settings (kind webhook only).
    #[serde(flatten)]
    pub webhook: WebhookDraft,
    /// Calendar, jitter, number of fires and the job waited for.
    #[serde(flatten)]
    pub extras: ExtrasDraft,
    /// Problems met while reading, by field.
    #[schema(ignore)]
    pub problems: FieldErrors,
}

/// An edit of a trigger (`PATCH /api/v1/triggers/{id}`): the fields to change and the
/// `version` that was read.
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct TriggerPatch {
    /// The trigger's `version` as read; a stale one answers 409 and changes nothing.
    #[schema(value_type = i64)]
    pub version: Given<i64>,
    /// The fields to change.
    #[serde(flatten)]
    pub draft: TriggerDraft,
}

/// A schedule preview (`POST /api/v1/schedule/preview`): a trigger definition and how
/// many instants to show from when. A trigger's body previews as it is: `misfire` and
/// `paused` are accepted and ignored.
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct PreviewRequest {
    /// How many instants (1–100). Default 5.
    #[schema(value_type = Option<i64>)]
    pub count: Given<i64>,
    /// List instants from this one on (the definition is anchored there, like a trigger
    /// created then). Default now. Here `after` is this instant, not a trigger's job to
    /// wait for: a preview shows instants only.
    #[schema(value_type = Option<DateTime<Utc>>)]
    pub after: Given<DateTime<Utc>>,
    /// The job the trigger is for: required for a cron with `H`, whose values its id
    /// fixes (a trigger's `H` is seeded by its job's id, or its workflow's).
    #[schema(value_type = Option<i64>)]
    pub job_id: Given<i64>,
    /// The workflow the trigger is for, instead of `job_id`.
    #[schema(value_type = Option<i64>)]
    pub workflow_id: Given<i64>,
    /// The definition to preview (`cron`, `interval` or `once`).
    #[serde(flatten)]
    #[schema(value_type = PreviewedTrigger)]
    pub draft: TriggerDraft,
}

/// The schema of the trigger a preview reads: a trigger's fields but the job waited for,
/// since a preview's `after` is the instant it lists from.
pub struct PreviewedTrigger;

impl utoipa::PartialSchema for PreviewedTrigger {
    fn schema() -> RefOr<Schema> {
        let mut trigger = <TriggerDraft as utoipa::PartialSchema>::schema();
        let RefOr::T(Schema::AllOf(parts)) = &mut trigger else {
            return trigger;
        };
        let extras = format!(
            "#/components/schemas/{}",
            <ExtrasDraft as utoipa::ToSchema>::name()
        );
        for part in &mut parts.items {
            if matches!(part, RefOr::Ref(reference) if reference.ref_location == extras) {
                *part = extras_without_after();
            }
        }
        trigger
    }
}

impl utoipa::ToSchema for PreviewedTrigger {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        <TriggerDraft as utoipa::ToSchema>::schemas(schemas);
    }
}

/// [`ExtrasDraft`]'s schema without its `after`.
fn extras_without_after() -> RefOr<Schema> {
    let mut extras = <ExtrasDraft as utoipa::PartialSchema>::schema();
    if let RefOr::T(Schema::Object(object)) = &mut extras {
        object.properties.remove("after");
        object.required.retain(|name| name != "after");
    }
    extras
}

impl PreviewRequest {
    /// Reads an API body (`POST /api/v1/schedule/preview`).
    pub fn from_json(body: Value) -> PreviewRequest {
        let (mut input, problems) = lenient_input(body);
        let count = input.int("count", i64::MIN, i64::MAX);
        let after = input.time("after");
        let job_id = input.int("job_id", 1, i64::MAX);
        let workflow_id = input.int("workflow_id", 1, i64::MAX);
        let mut draft = TriggerDraft::read(&mut input);
        draft.problems = problems;
        draft.problems.extend(input.into_errors());
        PreviewRequest {
            count,
            after,
            job_id,
            workflow_id,
            draft,
        }
    }

    /// The count (`default` when not given, at most `max`), the start, and the
    /// definition anchored there; else every bad field.
    pub fn definition(self, default: i64, max: i64) -> Result<(i64, DateTime<Utc>, Definition), ApiError> {
        let mut checks = Checks::after_reading(&self.draft.problems);
        let count = checks
            .not_null("count", self.count)
            .map_or(Some(default), |c| checks.within("count", c, 1, max));
        let after = checks.not_null("after", self.after).unwrap_or_else(Utc::now);
        let owner = checks
            .not_null("job_id", self.job_id)
            .or_else(|| checks.not_null("workflow_id", self.workflow_id));
        if owner.is_none() && self.draft.has_hashed_cron() {
            checks.error(
                "job_id",
                "required to preview a cron with H: the job's (or workflow_id's) id fixes its values",
            );
        }
        let definition = self.draft.apply(None, after, owner, &mut checks);
        checks.verdict(
            count
                .zip(definition)
                .map(|(count, definition)| (count, after, definition)),
        )
    }
}

/// A valid trigger definition and the schedule it describes.
#[derive(Debug, Clone)]
pub struct Definition {
    /// What the store writes.
    pub trigger: NewTrigger,
    /// Its instants.
    pub schedule: TriggerSchedule,
    /// Its runs' default parameters, when given (None: unchanged).
    pub params: Option<Value>,
    /// The webhook settings as given (a webhook trigger's; empty for the other kinds).
    pub webhook: WebhookDraft,
    /// Calendar, jitter and number of fires as given, checked.
    pub extras: ExtrasDraft,
}

/// A trigger's calendar, jitter and number of fires as given (absent: the default on a
/// create, unchanged on an edit; null: none).
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct ExtrasDraft {
    /// The name of a calendar of the job's namespace (`/api/v1/calendars`) whose days the
    /// trigger skips or keeps to (null: none).
    #[schema(value_type = Option<String>)]
    pub calendar: Given<String>,
    /// `exclude` (the default: no instant on the calendar's days) or `only` (instants on
    /// its days only); needs a calendar.
    #[schema(value_type = Option<CalendarMode>)]
    pub calendar_mode: Given<CalendarMode>,
    /// Up to how many seconds each instant's run is delayed (1 to 86400; null: none).
    #[schema(value_type = Option<i32>)]
    pub jitter_secs: Given<i64>,
    /// The instants after which the trigger ends (null: no end).
    #[schema(value_type = Option<i64>)]
    pub max_fires: Given<i64>,
    /// The job each instant's run waits for, and for how long (null: none).
    #[schema(value_type = Option<AfterDraft>)]
    pub after: Given<AfterDraft>,
}

/// `after` as given: `{"job": NAME, "within_secs": N}`.
#[derive(Debug, Clone, PartialEq, Eq, utoipa::ToSchema)]
pub struct AfterDraft {
    /// The name of a job of the trigger's namespace.
    pub job: String,
    /// The most seconds a run waits, from its instant.
    pub within_secs: i32,
}

/// Extras resolved over the stored ones: the calendar by name with its mode, the
/// jitter in seconds, `max_fires`, and the job waited for by name with its seconds.
pub type ResolvedExtras = (
    Option<(String, CalendarMode)>,
    Option<i32>,
    Option<i64>,
    Option<AfterDraft>,
);

/// The most seconds of jitter (a day).
pub const MAX_JITTER_SECS: i64 = 86_400;

impl ExtrasDraft {
    fn read(input: &mut Input) -> ExtrasDraft {
        ExtrasDraft {
            calendar: input.text("calendar"),
            calendar_mode: input.choice("calendar_mode"),
            jitter_secs: input.int("jitter_secs", i64::MIN, i64::MAX),
            max_fires: input.int("max_fires", i64::MIN, i64::MAX),
            after: read_after(input),
        }
    }

    fn check(self, checks: &mut Checks) -> ExtrasDraft {
        let jitter_secs = checks.within_given("jitter_secs", self.jitter_secs, 1, MAX_JITTER_SECS);
        let max_fires = checks.within_given("max_fires", self.max_fires, 1, i64::MAX);
        if matches!(self.calendar_mode, Some(None)) {
            checks.error("calendar_mode", "must not be null: exclude or only");
        }
        ExtrasDraft {
            calendar: self.calendar,
            calendar_mode: self.calendar_mode,
            jitter_secs,
            max_fires,
            after: self.after,
        }
    }

    /// The extras over `base` (the stored ones of an edit, the defaults of a create):
    /// the calendar by name with its mode, the jitter and `max_fires`; else the field at
    /// fault (a mode without a calendar).
    pub fn over(&self, base: &Extras) -> Result<ResolvedExtras, ApiError> {
        let calendar = match &self.calendar {
            Some(name) => name.clone(),
            None => base.calendar.clone(),
        };
        let mode = self.calendar_mode.flatten().or(base.calendar_mode);
        let calendar = match (calendar, mode) {
            (Some(name), mode) => Some((name, mode.unwrap_or(CalendarMode::Exclude))),
            (None, Some(_)) if self.calendar_mode.is_some() => {
                return Err(ApiError::field(
                    "calendar_mode",
                    "needs a calendar (give calendar: NAME)",
                ))
            }
            (None, _) => None,
        };
        let jitter = match self.jitter_secs {
            Some(given) => given.map(|secs| secs as i32),
            None => base.jitter_secs,
        };
        let max_fires = match self.max_fires {
            Some(given) => given,
            None => base.max_fires,
        };
        let after = match &self.after {
            Some(given) => given.clone(),
            None => base.after.as_ref().map(|after| AfterDraft {
                job: after.job.clone(),
                within_secs: after.within_secs,
            }),
        };
        Ok((calendar, jitter, max_fires, after))
    }

    /// Whether anything was given.
    pub fn given(&self) -> bool {
        self.calendar.is_some()
            || self.calendar_mode.is_some()
            || self.jitter_secs.is_some()
            || self.max_fires.is_some()
            || self.after.is_some()
    }
}

/// Reads `after` (null: none), naming `after.job` or `after.within_secs` when bad.
fn read_after(input: &mut Input) -> Given<AfterDraft> {
    let Some(mut nested) = input.object("after")? else {
        return Some(None);
    };
    let job = nested.required_text("job").filter(|name| {
        let blank = name.trim().is_empty();
        if blank {
            nested.error("job", "must name a job");
        }
        !blank
    });
    let within = nested.int("within_secs", 1, INT4_MAX);
    let within = nested.required("within_secs", within);
    let after = job.zip(within).map(|(job, within)| AfterDraft {
        job,
        within_secs: within as i32,
    });
    let failed = nested.has_errors();
    input.absorb(nested);
    if failed {
        return None;
    }
    after.map(Some)
}

impl TriggerDraft {
    /// Reads an API body (`POST /api/v1/jobs/{id}/triggers`).
    pub fn from_json(body: Value) -> TriggerDraft {
        let (mut input, problems) = lenient_input(body);
        let mut draft = TriggerDraft::read(&mut input);
        draft.problems = problems;
        draft.problems.extend(input.into_errors());
        draft
    }

    fn read(input: &mut Input) -> TriggerDraft {
        TriggerDraft {
            kind: input.choice("kind"),
            cron: input.text("cron"),
            timezone: input.text("timezone"),
            interval_secs: input.int("interval_secs", i64::MIN, i64::MAX),
            at: input.time("at"),
            start_at: input.time("start_at"),
            end_at: input.time("end_at"),
            misfire: input.choice("misfire"),
            misfire_threshold_secs: input.int("misfire_threshold_secs", i64::MIN, i64::MAX),
            paused: input.boolean("paused"),
            max_concurrency: input.int("max_concurrency", i64::MIN, i64::MAX),
            params: input.raw("params"),
            webhook: WebhookDraft::read(input),
            extras: ExtrasDraft::read(input),
            problems: FieldErrors::new(),
        }
    }

    /// Whether the draft's cron holds an `H` item.
    fn has_hashed_cron(&self) -> bool {
        let cron = self.cron.as_ref().and_then(Option::as_deref);
        cron.is_some_and(|text| matches!(schedule::resolved_cron(text, 0), Ok(Some(_))))
    }

    /// Whether the draft touches what decides the instants (an edit of one of these
    /// recomputes the next instant).
    pub fn changes_schedule(&self) -> bool {
        self.kind.is_some()
            || self.cron.is_some()
            || self.timezone.is_some()
            || self.interval_secs.is_some()
            || self.at.is_some()
            || self.start_at.is_some()
            || self.end_at.is_some()
    }

    /// The definition to store: the draft laid over `base` (an edit) or the defaults (a
    /// create, where `kind` is required), with its schedule anchored at `anchor` and its
    /// `H` items resolved for the job (or workflow) `owner`; else every bad field.
    pub fn definition(
        self,
        base: Option<&Trigger>,
        anchor: DateTime<Utc>,
        owner: i64,
    ) -> Result<Definition, ApiError> {
        let mut checks = Checks::after_reading(&self.problems);
        let definition = self.apply(base, anchor, Some(owner), &mut checks);
        checks.verdict(definition)
    }

    fn apply(
        self,
        base: Option<&Trigger>,
        anchor: DateTime<Utc>,
        owner: Option<i64>,
        checks: &mut Checks,
    ) -> Option<Definition> {
        let kind = match base {
            Some(trigger) => checks.not_null("kind", self.kind).or(Some(trigger.timing.kind)),
            None => checks.required("kind", self.kind),
        };
        let mut trigger = base.map_or_else(|| NewTrigger::once(Utc::now()), definition_of);
        let webhook_before = base.map(|t| t.timing.kind == TriggerKind::Webhook);
        if let (Some(before), Some(kind)) = (webhook_before, kind) {
            if before != (kind == TriggerKind::Webhook) {
                checks.error(
                    "kind",
                    "a trigger cannot become or stop being a webhook: create a new trigger instead",
                );
            }
        }
        if kind != Some(TriggerKind::Webhook) {
            self.webhook.reject_all(checks);
        }
        if let Some(kind) = kind {
            // A change of kind drops the previous kind's own field unless it is given.
            if base.is_none() || trigger.timing.kind != kind {
                trigger.timing.cron = None;
                trigger.timing.interval_secs = None;
                trigger.timing.at = None;
            }
            trigger.timing.kind = kind;
        }
        if let Some(cron) = self.cron {
            trigger.timing.cron = cron;
        }
        if let Some(timezone) = checks.not_null("timezone", self.timezone) {
            trigger.timing.timezone = timezone;
        }
        if let Some(interval) = checks.within_given("interval_secs", self.interval_secs, 1, INT4_MAX) {
            trigger.timing.interval_secs = interval;
        }
        if let Some(at) = self.at {
            trigger.timing.at = at;
        }
        if let Some(start_at) = self.start_at {
            trigger.timing.start_at = start_at;
        }
        if let Some(end_at) = self.end_at {
            trigger.timing.end_at = end_at;
        }
        if let Some(misfire) = checks.not_null("misfire", self.misfire) {
            trigger.timing.misfire = misfire;
        }
        let threshold = checks.not_null("misfire_threshold_secs", self.misfire_threshold_secs);
        if let Some(threshold) =
            threshold.and_then(|t| checks.within("misfire_threshold_secs", t, 1, INT4_MAX))
        {
            trigger.timing.misfire_threshold_secs = threshold as i32;
        }
        if let Some(max) = checks.within_given("max_concurrency", self.max_concurrency, 1, INT4_MAX) {
            trigger.max_concurrency = max.map(|m| m as i32);
        }
        if let Some(paused) = checks.not_null("paused", self.paused) {
            trigger.paused = paused;
        }
        let params = match self.params {
            Some(Value::Null) => Some(Value::Object(Default::default())),
            Some(params) if !params.is_object() => {
                checks.error("params", "must be a JSON object, such as {\"region\": \"eu\"}");
                None
            }
            given => given,
        };
        let extras = self.extras.check(checks);
        if kind.is_none() || checks.failed() {
            return None;
        }
        // Without an owner (a preview that names none) an H is refused, as said above.
        let schedule = trigger
            .schedule(anchor, owner.map(schedule::hash_seed))
            .map_err(|err| {
                cron_behind_bad_zone(&trigger, &err.field, checks);
                checks.error(&err.field, err.message)
            })
            .ok()?;
        Some(Definition {
            trigger,
            schedule,
            params,
            webhook: self.webhook,
            extras,
        })
    }
}

/// A bad zone stops the schedule's check before its cron: the cron is read alone (in
/// UTC), so that both are named at once.
fn cron_behind_bad_zone(trigger: &NewTrigger, failed: &str, checks: &mut Checks) {
    let Some(cron) = trigger.timing.cron.as_deref().filter(|_| failed == "timezone") else {
        return;
    };
    if let Err(err) = CronSpec::parse_seeded(cron, "UTC", Some(0)) {
        checks.error(&err.field, err.message);
    }
}

impl TriggerPatch {
    /// Reads an API body (`PATCH /api/v1/triggers/{id}`).
    pub fn from_json(body: Value) -> TriggerPatch {
        let (mut input, problems) = lenient_input(body);
        let version = input.int("version", i64::MIN, i64::MAX);
        let mut draft = TriggerDraft::read(&mut input);
        draft.problems = problems;
        draft.problems.extend(input.into_errors());
        TriggerPatch { version, draft }
    }

    /// The version the editor read and the definition over `base` (its schedule anchored
    /// where the stored one is); else every bad field.
    pub fn definition(self, base: &Trigger) -> Result<(i64, Definition), ApiError> {
        let mut checks = Checks::after_reading(&self.draft.problems);
        let version = checks.required("version", self.version);
        let version = version.and_then(|v| checks.within("version", v, 1, i64::MAX));
        let definition = self
            .draft
            .apply(Some(base), base.created_at, Some(base.job_id), &mut checks);
        checks.verdict(version.zip(definition))
    }
}

/// A stored trigger's definition, the base an edit is laid over.
fn definition_of(t: &Trigger) -> NewTrigger {
    NewTrigger {
        timing: t.timing.clone(),
        paused: t.paused,
        max_concurrency: t.max_concurrency,
    }
}

/// A trigger's `params` checked against its job's or workflow's declared ones
/// (`params_schema`, None: anything goes), their secret values sealed: on a create
/// (`creating`) the runs it fires get nothing else, so an absent list is checked as `{}`;
/// on an edit an absent list is left as stored.
///
/// A secret parameter given as `***` (what the trigger's page shows) keeps its stored
/// sealed value (`stored`: the trigger's parameters before the edit).
pub fn checked_params(
    schema: Option<&Value>,
    params: Option<Value>,
    creating: bool,
    stored: Option<&Value>,
    keys: Option<&probactr_common::secrets::Keyring>,
) -> Result<Option<Value>, ApiError> {
    let params = match (params, creating) {
        (Some(params), _) => params,
        (None, true) if schema.is_some() => Value::Object(Default::default()),
        (None, _) => return Ok(None),
    };
    let mut checked = super::params::checked(schema, &params, super::params::Given::Stored, keys, "params")?;
    if let (Some(checked), Some(given), Some(stored)) = (
        checked.as_object_mut(),
        params.as_object(),
        stored.and_then(Value::as_object),
    ) {
        for (name, value) in given {
            let kept = stored.get(name).filter(|old| params_schema::is_sealed(old));
            if let (Some(kept), true) = (kept, value.as_str() == Some(secrets::MASK)) {
                checked.insert(name.clone(), kept.clone());
            }
        }
    }
    Ok(Some(checked))
}
