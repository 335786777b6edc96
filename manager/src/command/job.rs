//! Creating a job ([`JobDraft`]) and editing one ([`JobPatch`]).

use probactr_common::jobspec::JobSpec;
use probactr_common::labels;
use probactr_common::model::{Job, JobKind, JobMode, OnExecutorLost, Overlap, Rate, Route};
use probactr_common::params_schema::ParamsSchema;
use probactr_common::store::jobs::{JobChildren, NewJob};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

use super::retry::RetryDraft;
use super::shapes::{JobRef, ParamDeclaration, SpecBody};
use super::{lenient_input, Checks, INT4_MAX};
use crate::error::{ApiError, FieldErrors};
use crate::input::{Given, Input};

/// The longest name accepted.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest description accepted.
pub const MAX_DESCRIPTION_CHARS: usize = 10_000;
/// The most takeovers a job may allow.
pub const MAX_TAKEOVERS: i64 = 100;
/// The longest grace between SIGTERM and SIGKILL, in seconds (an hour).
pub const MAX_STOP_GRACE_SECS: i64 = 3600;
/// The lowest and highest job priority (each point is a minute of queueing: see the
/// claim's order in migration `2026112503000001`).
pub const MIN_PRIORITY: i64 = -100;
/// See [`MIN_PRIORITY`].
pub const MAX_PRIORITY: i64 = 100;
/// The most runs one instant of a `shard` route makes.
pub const MAX_SHARDS: i64 = 1000;
/// The most instances a service keeps running.
pub const MAX_REPLICAS: i64 = 100;
/// The longest a run may be given (24 days): a longer timeout is a typo (a 99999999 s
/// timeout is three years), and a run that long is stuck, not working.
pub const MAX_TIMEOUT_SECS: i64 = 24 * 24 * 3600;

// Also the OpenAPI schema of the job bodies: its docs are the API's documentation.
/// A job's definition as given: every field optional (absent means the default on a
/// create and unchanged on an edit; `name` and `kind` are required on a create).
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct JobDraft {
    /// Unique within its namespace, at most 200 characters; required on create.
    #[schema(value_type = Option<String>)]
    pub name: Given<String>,
    /// Its namespace: where a new job goes (default `default`); an edit may only repeat
    /// the job's own.
    #[schema(value_type = Option<String>)]
    pub namespace: Given<String>,
    /// What the job does, required on create; `shell` and `http` jobs are created by
    /// admins only. A new kind on an edit needs its `spec` too.
    #[schema(value_type = Option<JobKind>)]
    pub kind: Given<JobKind>,
    /// Free text.
    #[schema(value_type = Option<String>)]
    pub description: Given<String>,
    /// The kind's definition (`noop` takes none), as given; checked against the kind.
    #[schema(value_type = Option<SpecBody>)]
    pub spec: Option<Value>,
    /// May attempts overlap? Default false.
    #[schema(value_type = Option<bool>)]
    pub parallel: Given<bool>,
    /// Bound on overlapping attempts of a parallel job; null for none.
    #[schema(value_type = Option<i32>)]
    pub max_concurrency: Given<i64>,
    /// When a non-parallel job is busy: `skip` the new run, `queue` it, `replace` the
    /// running attempt (stopped with SIGTERM, `stop_grace_secs`, SIGKILL; then the new one
    /// starts), or `buffer_one` (one run waits behind the running one; later ones are
    /// skipped). Default skip.
    #[schema(value_type = Option<Overlap>)]
    pub overlap: Given<Overlap>,
    /// Seconds an attempt may run. Default 3600.
    #[schema(value_type = Option<i32>)]
    pub timeout_secs: Given<i64>,
    /// Retry policy.
    #[schema(value_type = Option<RetryDraft>)]
    pub retry: RetryDraft,
    /// Paused? Default false. Paused jobs are neither fired nor claimed.
    #[schema(value_type = Option<bool>)]
    pub paused: Given<bool>,
    /// Who manages the definition: `probactr apply` sets it; null for people.
    #[schema(value_type = Option<String>)]
    pub managed_by: Given<String>,
    /// A run whose executor died: `rerun` it at once on another executor (a takeover,
    /// even without retries; default) or leave it to the retry policy (`fail`).
    #[schema(value_type = Option<OnExecutorLost>)]
    pub on_executor_lost: Given<OnExecutorLost>,
    /// Takeovers of one run at most (0–100, default 3).
    #[schema(value_type = Option<i32>)]
    pub max_takeovers: Given<i64>,
    /// When an executor must stop a run (cancel, timeout, lost lock, drain deadline), the
    /// seconds between SIGTERM to its process group and SIGKILL (0–3600, default 10).
    #[schema(value_type = Option<i32>)]
    pub stop_grace_secs: Given<i64>,
    /// Labels an executor must all carry to claim the job's runs (`{"gpu": "1"}`; `{}`,
    /// the default: any executor).
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub selector: Option<Value>,
    /// When slots are scarce, higher goes first (-100 to 100, default 0; each point counts
    /// as a minute of waiting, so lower priorities are not starved).
    #[schema(value_type = Option<i32>)]
    pub priority: Given<i64>,
    /// Where the runs of one instant go: `any` (default: one run), `broadcast` (one run
    /// per live executor that may take it, each pinned to it) or `shard` (`shards` runs,
    /// spread over the live executors). Each fanned-out run sees `PROBACTR_SHARD_INDEX` and
    /// `PROBACTR_SHARD_TOTAL`.
    #[schema(value_type = Option<Route>)]
    pub route: Given<Route>,
    /// Runs per instant of a `shard` route (1–1000, default 1).
    #[schema(value_type = Option<i32>)]
    pub shards: Given<i64>,
    /// `batch` (default: runs when triggered or run now) or `service`: `replicas`
    /// instances kept running on distinct executors where possible, restarted with backoff
    /// when they end or their executor dies (`PROBACTR_REPLICA_INDEX` tells each its slot).
    #[schema(value_type = Option<JobMode>)]
    pub mode: Given<JobMode>,
    /// Instances of a service (1–100, default 1).
    #[schema(value_type = Option<i32>)]
    pub replicas: Given<i64>,
    /// Declared run parameters, by name (letters, digits, `_`, `-`): run now, trigger and
    /// workflow step parameters are checked against them (a 422 names `params.NAME`),
    /// undeclared ones refused, defaults filled in. Null: parameters are free.
    #[schema(value_type = Option<BTreeMap<String, ParamDeclaration>>)]
    pub params_schema: Option<Value>,
    /// A pool of the job's namespace (`/api/v1/pools`) whose slots its runs hold: runs
    /// wait queued while it is full. Null: none.
    #[schema(value_type = Option<String>)]
    pub pool: Given<String>,
    /// The slots of `pool` each run holds (1 to the pool's slots, default 1).
    #[schema(value_type = Option<i32>)]
    pub pool_slots: Given<i64>,
    /// At most `limit` of its runs start in any window of `per_secs` seconds, across
    /// the cluster (limit 1 to 10000, per_secs 1 to 604800); runs past it wait queued.
    /// Null: no bound.
    #[schema(value_type = Option<Rate>)]
    pub rate: Option<Value>,
    /// Child jobs, as given (lists of job ids or names).
    #[serde(flatten)]
    pub children: ChildDraft,
    /// Problems met while reading, by field.
    #[schema(ignore)]
    pub problems: FieldErrors,
}

/// An edit of a job (`PATCH /api/v1/jobs/{id}`): the fields to change and the `version`
/// that was read.
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct JobPatch {
    /// The job's `version` as read; a stale one answers 409 and changes nothing.
    #[schema(value_type = i64)]
    pub version: Given<i64>,
    /// The fields to change.
    #[serde(flatten)]
    pub draft: JobDraft,
}

impl JobDraft {
    /// Reads an API body (`POST /api/v1/jobs`).
    pub fn from_json(body: Value) -> JobDraft {
        let (mut input, problems) = lenient_input(body);
        let mut draft = JobDraft::read(&mut input);
        draft.problems = problems;
        draft.problems.extend(input.into_errors());
        draft
    }

    fn read(input: &mut Input) -> JobDraft {
        let mut draft = JobDraft {
            name: input.text("name"),
            namespace: input.text("namespace"),
            kind: input.choice("kind"),
            description: input.text("description"),
            spec: input.raw("spec"),
            parallel: input.boolean("parallel"),
            max_concurrency: input.int("max_concurrency", i64::MIN, i64::MAX),
            overlap: input.choice("overlap"),
            timeout_secs: input.int("timeout_secs", i64::MIN, i64::MAX),
            paused: input.boolean("paused"),
            managed_by: input.text("managed_by"),
            on_executor_lost: input.choice("on_executor_lost"),
            max_takeovers: input.int("max_takeovers", i64::MIN, i64::MAX),
            stop_grace_secs: input.int("stop_grace_secs", i64::MIN, i64::MAX),
            selector: input.raw("selector"),
            priority: input.int("priority", i64::MIN, i64::MAX),
            route: input.choice("route"),
            shards: input.int("shards", i64::MIN, i64::MAX),
            mode: input.choice("mode"),
            replicas: input.int("replicas", i64::MIN, i64::MAX),
            params_schema: input.raw("params_schema"),
            pool: input.text("pool"),
            pool_slots: input.int("pool_slots", i64::MIN, i64::MAX),
            rate: input.raw("rate"),
            children: ChildDraft {
                on_success: input.raw("on_success"),
                on_failure: input.raw("on_failure"),
                on_finish: input.raw("on_finish"),
            },
            ..JobDraft::default()
        };
        match input.object("retry") {
            Some(Some(mut retry)) => {
                draft.retry = RetryDraft::read(&mut retry);
                input.absorb(retry);
            }
            Some(None) => input.error("retry", "must not be null"),
            None => {}
        }
        draft
    }

    /// The kind the draft asks for, when it names a valid one (for the role check, which
    /// comes before validation so a forbidden request learns nothing more).
    pub fn requested_kind(&self) -> Option<JobKind> {
        self.kind.flatten()
    }

    /// The definition to store: the draft laid over `base` (an edit) or the defaults (a
    /// create, where `name` and `kind` are required); else every bad field.
    pub fn definition(self, base: Option<&Job>) -> Result<NewJob, ApiError> {
        let mut checks = Checks::after_reading(&self.problems);
        let job = self.apply(base, &mut checks);
        checks.verdict(job)
    }

    fn apply(self, base: Option<&Job>, checks: &mut Checks) -> Option<NewJob> {
        let name = match base {
            Some(_) => checks.not_null("name", self.name),
            None => checks.required("name", self.name),
        };
        let kind = match base {
            Some(job) => checks.not_null("kind", self.kind).or(Some(job.kind)),
            None => checks.required("kind", self.kind),
        };
        let mut job = match (base, kind) {
            (Some(job), Some(kind)) => NewJob {
                kind,
                ..definition_of(job)
            },
            (None, Some(kind)) => NewJob::new("", kind, Value::Null),
            (_, None) => NewJob::new("", JobKind::Noop, Value::Null),
        };
        if let Some(name) = name {
            check_name(checks, &name);
            job.name = name;
        }
        if let (Some(base), Some(namespace)) = (base, checks.not_null("namespace", self.namespace)) {
            if namespace != base.namespace {
                checks.error("namespace", "namespace cannot change");
            }
        }
        if let Some(description) = checks.not_null("description", self.description) {
            job.description = description;
        }
        if job.description.chars().count() > MAX_DESCRIPTION_CHARS {
            checks.error(
                "description",
                format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
            );
        }
        if let Some(spec) = self.spec {
            job.spec = spec;
        }
        if let Some(parallel) = checks.not_null("parallel", self.parallel) {
            job.parallel = parallel;
        }
        if let Some(max) = checks.within_given("max_concurrency", self.max_concurrency, 1, INT4_MAX) {
            job.max_concurrency = max.map(|m| m as i32);
        }
        if let Some(overlap) = checks.not_null("overlap", self.overlap) {
            job.overlap = overlap;
        }
        let timeout = checks.not_null("timeout_secs", self.timeout_secs);
        if let Some(timeout) = timeout.and_then(|t| checks.within("timeout_secs", t, 1, MAX_TIMEOUT_SECS)) {
            job.timeout_secs = timeout as i32;
        }
        self.retry.apply(&mut job, base.is_none(), checks);
        if let Some(paused) = checks.not_null("paused", self.paused) {
            job.paused = paused;
        }
        if let Some(pool) = self.pool {
            match pool.map(|p| p.trim().to_owned()) {
                Some(p) if p.is_empty() || p.chars().count() > 63 => {
                    checks.error("pool", "must be a pool's name (1 to 63 characters), or null")
                }
                other => job.pool = other,
            }
        }
        let slots = checks.not_null("pool_slots", self.pool_slots);
        if let Some(slots) = slots.and_then(|s| checks.within("pool_slots", s, 1, INT4_MAX)) {
            job.pool_slots = slots as i32;
        }
        let mut report = |field: &str, message: String| checks.error(field, message);
        if let Some(rate) = self
            .rate
            .and_then(|rate| super::rate::checked(&rate, &mut report))
        {
            job.rate = rate;
        }
        if let Some(managed_by) = self.managed_by {
            match managed_by.map(|m| m.trim().to_owned()) {
                Some(m) if m.is_empty() || m.chars().count() > 100 => {
                    checks.error("managed_by", "must be 1 to 100 characters, or null")
                }
                other => job.managed_by = other,
            }
        }
        if let Some(policy) = checks.not_null("on_executor_lost", self.on_executor_lost) {
            job.on_executor_lost = policy;
        }
        let takeovers = checks.not_null("max_takeovers", self.max_takeovers);
        if let Some(takeovers) = takeovers.and_then(|t| checks.within("max_takeovers", t, 0, MAX_TAKEOVERS)) {
            job.max_takeovers = takeovers as i32;
        }
        let grace = checks.not_null("stop_grace_secs", self.stop_grace_secs);
        if let Some(grace) = grace.and_then(|g| checks.within("stop_grace_secs", g, 0, MAX_STOP_GRACE_SECS)) {
            job.stop_grace_secs = grace as i32;
        }
        if let Some(selector) = self.selector {
            match checked_selector(&selector) {
                Ok(selector) => job.selector = selector,
                Err(why) => checks.error("selector", why),
            }
        }
        let priority = checks.not_null("priority", self.priority);
        if let Some(priority) =
            priority.and_then(|p| checks.within("priority", p, MIN_PRIORITY, MAX_PRIORITY))
        {
            job.priority = priority as i32;
        }
        let placement = Placement {
            route: self.route,
            shards: self.shards,
            mode: self.mode,
            replicas: self.replicas,
        };
        placement.apply(&mut job, checks);
        if let Some(schema) = self.params_schema {
            match ParamsSchema::parse(&schema, "params_schema") {
                Ok(schema) => job.params_schema = schema.map(|schema| schema.to_json()),
                Err(problems) => problems
                    .into_iter()
                    .for_each(|(field, message)| checks.error(&field, message)),
            }
        }
        if kind.is_some() {
            match JobSpec::parse(job.kind, &job.spec) {
                Ok(spec) => job.spec = spec.to_json(),
                Err(err) => checks.error(&err.field, err.message),
            }
        }
        (!checks.failed()).then_some(job)
    }
}

/// Where a job's runs go and whether it is a service, as given.
struct Placement {
    route: Given<Route>,
    shards: Given<i64>,
    mode: Given<JobMode>,
    replicas: Given<i64>,
}

impl Placement {
    /// Route and mode: a service's instances are long-lived runs of their own, so it
    /// takes neither a fan-out route nor a concurrency bound (its replicas are its bound).
    fn apply(self, job: &mut NewJob, checks: &mut Checks) {
        if let Some(route) = checks.not_null("route", self.route) {
            job.route = route;
        }
        let shards = checks.not_null("shards", self.shards);
        if let Some(shards) = shards.and_then(|s| checks.within("shards", s, 1, MAX_SHARDS)) {
            job.shards = shards as i32;
        }
        if let Some(mode) = checks.not_null("mode", self.mode) {
            job.mode = mode;
        }
        let replicas = checks.not_null("replicas", self.replicas);
        if let Some(replicas) = replicas.and_then(|r| checks.within("replicas", r, 1, MAX_REPLICAS)) {
            job.replicas = replicas as i32;
        }
        if job.mode == JobMode::Service {
            if job.route != Route::Any {
                checks.error(
                    "route",
                    "a service runs its replicas where it can; its route must be \"any\"",
                );
            }
            if job.max_concurrency.is_some() {
                checks.error(
                    "max_concurrency",
                    "a service is bounded by its replicas; leave this empty",
                );
            }
            // Its instances run side by side without a lock: the live runs hold at most
            // one per replica slot.
            job.parallel = true;
        }
    }
}

impl JobPatch {
    /// Reads an API body (`PATCH /api/v1/jobs/{id}`).
    pub fn from_json(body: Value) -> JobPatch {
        let (mut input, problems) = lenient_input(body);
        let version = input.int("version", i64::MIN, i64::MAX);
        let mut draft = JobDraft::read(&mut input);
        draft.problems = problems;
        draft.problems.extend(input.into_errors());
        JobPatch { version, draft }
    }

    /// The version the editor read and the definition to store over `base`; else every
    /// bad field.
    pub fn definition(self, base: &Job) -> Result<(i64, NewJob), ApiError> {
        let mut checks = Checks::after_reading(&self.draft.problems);
        let version = checks.required("version", self.version);
        let version = version.and_then(|v| checks.within("version", v, 1, i64::MAX));
        let job = self.draft.apply(Some(base), &mut checks);
        checks.verdict(version.zip(job))
    }
}

/// A stored job's definition, the base an edit is laid over.
pub fn definition_of(job: &Job) -> NewJob {
    NewJob {
        name: job.name.clone(),
        namespace: job.namespace.clone(),
        description: job.description.clone(),
        kind: job.kind,
        spec: job.spec.clone(),
        parallel: job.parallel,
        max_concurrency: job.max_concurrency,
        overlap: job.overlap,
        timeout_secs: job.timeout_secs,
        retry_max_attempts: job.retry_max_attempts,
        retry_backoff_secs: job.retry_backoff_secs,
        retry_backoff: job.retry_backoff,
        retry_max_secs: job.retry_max_secs,
        retry_jitter: job.retry_jitter,
        retry_on: job.retry_on.as_ref().map(|on| on.0.clone()),
        paused: job.paused,
        managed_by: job.managed_by.clone(),
        on_executor_lost: job.on_executor_lost,
        max_takeovers: job.max_takeovers,
        stop_grace_secs: job.stop_grace_secs,
        selector: job.selector.clone(),
        priority: job.priority,
        route: job.route,
        shards: job.shards,
        mode: job.mode,
        replicas: job.replicas,
        params_schema: job.params_schema.clone(),
        pool: job.pool.clone(),
        pool_slots: job.pool_slots,
        rate: job.rate.map(|rate| rate.0),
    }
}

/// A selector as stored: an object of label names to values, each a good label
/// (`{}`: any executor).
fn checked_selector(selector: &Value) -> Result<Value, String> {
    let Some(pairs) = selector.as_object() else {
        return Err("must be an object of label names to values, such as {\"gpu\": \"1\"}".to_owned());
    };
    if pairs.len() > labels::MAX_LABELS {
        return Err(format!("must have at most {} labels", labels::MAX_LABELS));
    }
    for (name, value) in pairs {
        if let Some(problem) = labels::label_problem(name) {
            return Err(format!("label name {name:?} {problem}"));
        }
        let Some(value) = value.as_str() else {
            return Err(format!("the value of {name:?} must be a string"));
        };
        if let Some(problem) = labels::label_problem(value) {
            return Err(format!("the value of {name:?} {problem}"));
        }
    }
    Ok(selector.clone())
}

fn check_name(checks: &mut Checks, name: &str) {
    if name.trim().is_empty() {
        checks.error("name", "must not be empty");
    } else if name.chars().count() > MAX_NAME_CHARS {
        checks.error("name", format!("must be at most {MAX_NAME_CHARS} characters"));
    } else if name.chars().any(char::is_control) {
        checks.error("name", "must not contain control characters");
    }
}

/// The child-job lists as given: each absent (unchanged), or a list of job ids or names.
#[derive(Debug, Clone, Default, utoipa::ToSchema)]
pub struct ChildDraft {
    /// Child jobs queued when a run succeeds, by id or name; each child run gets the
    /// parent run's parameters and `PROBACTR_PARENT_RUN_ID`. A list that would loop back
    /// to the job is refused.
    #[schema(value_type = Option<Vec<JobRef>>)]
    pub on_success: Option<Value>,
    /// Child jobs queued when a run fails, times out or is abandoned.
    #[schema(value_type = Option<Vec<JobRef>>)]
    pub on_failure: Option<Value>,
    /// Child jobs queued whenever a run ends, cancelled included.
    #[schema(value_type = Option<Vec<JobRef>>)]
    pub on_finish: Option<Value>,
}

/// The jobs child lists may name, looked up before validation.
#[derive(Debug, Clone, Default)]
pub struct KnownJobs {
    /// Every job's id by its name.
    pub by_name: BTreeMap<String, i64>,
    /// The named jobs whose own children lead back to the job being edited.
    pub leading_back: BTreeSet<i64>,
}

impl KnownJobs {
    fn resolve(&self, reference: &Value) -> Result<i64, String> {
        match reference {
            Value::Number(number) => number
                .as_i64()
                .filter(|id| self.by_name.values().any(|known| known == id))
                .ok_or_else(|| format!("job {number} does not exist")),
            Value::String(name) => self
                .by_name
                .get(name)
                .copied()
                .ok_or_else(|| format!("job {name:?} does not exist")),
            _ => Err("must list job ids or names".to_owned()),
        }
    }
}

impl ChildDraft {
    /// The lists that were given, by field name.
    fn given(&self) -> [(&'static str, Option<&Value>); 3] {
        [
            ("on_success", self.on_success.as_ref()),
            ("on_failure", self.on_failure.as_ref()),
            ("on_finish", self.on_finish.as_ref()),
        ]
    }

    /// Whether any list was given.
    pub fn any_given(&self) -> bool {
        self.given().iter().any(|(_, list)| list.is_some())
    }

    /// The job ids the lists name (by id or by name), to look up which lead back.
    pub fn named_ids(&self, known: &KnownJobs) -> Vec<i64> {
        self.given()
            .iter()
            .filter_map(|(_, list)| list.and_then(|list| list.as_array()))
            .flatten()
            .filter_map(|reference| known.resolve(reference).ok())
            .collect()
    }

    /// The lists laid over `base`: every name resolved to an id; unknown jobs, the job
    /// itself (`own_id`) and jobs whose children lead back to it are field errors, since
    /// a loop of child jobs would queue runs for ever.
    pub fn checked(
        &self,
        base: &JobChildren,
        own_id: Option<i64>,
        known: &KnownJobs,
    ) -> Result<JobChildren, FieldErrors> {
        let mut errors = FieldErrors::new();
        let mut children = base.clone();
        for (field, list) in self.given() {
            let Some(list) = list else { continue };
            let ids = match list {
                Value::Null => Ok(Vec::new()),
                Value::Array(references) => references
                    .iter()
                    .map(|reference| {
                        let id = known.resolve(reference)?;
                        if Some(id) == own_id || known.leading_back.contains(&id) {
                            return Err(format!("job {id} would queue this job again: a loop never ends"));
                        }
                        Ok(id)
                    })
                    .collect::<Result<Vec<i64>, String>>(),
                _ => Err("must be a list of job ids or names".to_owned()),
            };
            match ids {
                Ok(mut ids) => {
                    let mut seen = BTreeSet::new();
                    ids.retain(|id| seen.insert(*id));
                    match field {
                        "on_success" => children.on_success = ids,
                        "on_failure" => children.on_failure = ids,
                        _ => children.on_finish = ids,
                    }
                }
                Err(message) => {
                    errors.insert(field.to_owned(), message);
                }
            }
        }
        if errors.is_empty() {
            Ok(children)
        } else {
            Err(errors)
        }
    }
}

/// A definition's verdict joined with its child lists': every bad field of both at once.
pub fn with_children<T>(
    definition: Result<T, ApiError>,
    children: Result<JobChildren, FieldErrors>,
) -> Result<(T, JobChildren), ApiError> {
    match (definition, children) {
        (Ok(definition), Ok(children)) => Ok((definition, children)),
        (Err(ApiError::Invalid(mut errors)), Err(more)) => {
            for (field, message) in more {
                errors.entry(field).or_insert(message);
            }
            Err(ApiError::Invalid(errors))
        }
        (Err(err), _) => Err(err),
        (Ok(_), Err(errors)) => Err(ApiError::Invalid(errors)),
    }
}
