//! The nested JSON shapes that commands take as given and hand to their parsers (a
//! job's `spec`, a declared parameter, a job named by id or name, a workflow step),
//! described for the OpenAPI document.
//!
//! These types are never built: each is the one description of its shape as sent, read
//! by `jobspec::JobSpec::parse`, `params_schema::ParamsSchema::parse`, the child lists'
//! check or the workflow's step reading. The OpenAPI test posts every field they document and fails if the service
//! calls one unknown.

use std::collections::BTreeMap;

use utoipa::ToSchema;

/// A job's definition; which one depends on the job's `kind`.
#[derive(Debug, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // a schema only: the service reads specs with `jobspec::JobSpec::parse`
pub enum SpecBody {
    /// `kind: shell`.
    Shell(ShellSpecBody),
    /// `kind: http`.
    Http(HttpSpecBody),
    /// `kind: sleep`.
    Sleep(SleepSpecBody),
}

/// `kind: shell`: a program run without an implicit shell.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // a schema only
pub struct ShellSpecBody {
    /// The program (looked up in `PATH` when it has no `/`), or the script when `shell`.
    pub program: String,
    /// Arguments, passed as they are.
    pub args: Option<Vec<String>>,
    /// Variables added to the executor's environment (not `PROBACTR_*`).
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory.
    pub cwd: Option<String>,
    /// Run `sh -c program sh args…` instead (args become `$1`, `$2`, …).
    pub shell: Option<bool>,
}

/// `kind: http`: one request whose status decides the outcome.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // a schema only
pub struct HttpSpecBody {
    /// GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS. Default GET.
    pub method: Option<String>,
    /// An absolute http or https URL.
    pub url: String,
    /// Request headers (not `X-Probactr-*`).
    pub headers: Option<BTreeMap<String, String>>,
    /// Request body.
    pub body: Option<String>,
    /// Statuses that count as success; default any 2xx.
    pub expect_status: Option<Vec<u16>>,
    /// Which redirects are followed: `same-origin` (default; a redirect elsewhere is the
    /// answer), `any` (across origins without the job's headers and body) or `none`.
    pub follow_redirects: Option<String>,
}

/// `kind: sleep`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // a schema only
pub struct SleepSpecBody {
    /// Milliseconds, at most one day.
    pub millis: u64,
}

/// One declared run parameter (see `params_schema`).
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // a schema only: read by `params_schema::ParamsSchema::parse`
pub struct ParamDeclaration {
    /// `string`, `integer`, `number`, `boolean` or `enum`.
    #[schema(rename = "type")]
    pub kind: String,
    /// The values an `enum` takes (texts; required for an enum, refused otherwise).
    pub values: Option<Vec<String>>,
    /// A pattern a `string` must match whole (ASCII classes: `[0-9]`, `(?-u:\\w)`).
    pub pattern: Option<String>,
    /// The least number, or a string's fewest characters.
    pub min: Option<f64>,
    /// The greatest number, or a string's most characters.
    pub max: Option<f64>,
    /// Must every run be given it? (takes no `default`)
    pub required: Option<bool>,
    /// The value of a run given none; checked like a given value.
    #[schema(value_type = Option<Object>)]
    pub default: Option<serde_json::Value>,
    /// A `string` stored sealed, shown as `***` and masked in the run's output; the job
    /// gets it in the clear. Takes no `default`.
    pub secret: Option<bool>,
}

/// A job named by its id or its name.
#[derive(Debug, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // a schema only
pub enum JobRef {
    /// Its id.
    Id(i64),
    /// Its name.
    Name(String),
}

/// One step of a workflow as sent (stored and answered as `Step`, every field filled).
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // a schema only: steps are read field by field into `Step`
pub struct WorkflowStepBody {
    /// 1 to 100 letters, digits, `_` or `-`; unique within the workflow.
    pub name: String,
    /// The job it runs.
    pub job_id: i64,
    /// The steps that must be done before it starts.
    pub depends_on: Option<Vec<String>>,
    /// `all_success` (the default: every upstream step succeeded), `all_done` (they all
    /// ended, whatever their end) or `any_failed` (one failed); otherwise it is skipped.
    pub when: Option<String>,
    /// Parameters of its runs, over the workflow run's; checked against its job's
    /// `params_schema` (none required here: the workflow run's may give them).
    #[schema(value_type = Option<Object>)]
    pub params: Option<serde_json::Value>,
}
