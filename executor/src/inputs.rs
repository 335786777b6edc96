//! What a run is given and what it hands on: its parameters, the run that queued it, its
//! workflow step's upstream outputs (as `PROBACTR_*` variables and `{{ params.KEY }}` /
//! `{{ steps.NAME.output.KEY }}` references, filled after the secrets just before the
//! run, each value encoded for where it lands: see [`probactr_common::template`]), and the
//! JSON object a shell job writes to `PROBACTR_OUTPUT_FILE`, stored before
//! its end is recorded so that the workflow advancing with that end reads it.

use std::path::{Path, PathBuf};

use probactr_common::jobspec::JobSpec;
use probactr_common::masking::Masker;
use probactr_common::model::{Job, Run};
use probactr_common::params_schema::ParamsSchema;
use probactr_common::secrets::Keyring;
use probactr_common::store::run_inputs::{self, Inputs};
use probactr_common::template;
use serde_json::Value;
use sqlx::PgPool;

/// The largest output file read; a larger one is ignored (with a warning).
pub const OUTPUT_LIMIT: u64 = 64 * 1024;

/// A spec with its inputs filled in, and the variables that carry them.
pub struct Prepared {
    /// The spec to run.
    pub spec: JobSpec,
    /// (name suffix, value) pairs, `PARAMS` for `PROBACTR_PARAMS`.
    pub env: Vec<(String, String)>,
    /// Where a shell job may write its output (not created: the job writes it).
    pub output_file: Option<PathBuf>,
    /// The values of its secret parameters, in the clear (to mask).
    pub secret_values: Vec<String>,
}

/// Reads the run's inputs and fills them into `spec`: the job's declared defaults under
/// the given parameters, its secret parameters opened (`keys`).
pub async fn prepare(
    pool: &PgPool,
    run: &Run,
    job: &Job,
    keys: Option<&Keyring>,
    spec: JobSpec,
) -> Result<Prepared, String> {
    if matches!(spec, JobSpec::Noop | JobSpec::Sleep { .. }) {
        // Built-ins read no input and write no output: no round trip on the hot path.
        return Ok(Prepared {
            spec,
            env: Vec::new(),
            output_file: None,
            secret_values: Vec::new(),
        });
    }
    let chain_id = run.first_run_id.unwrap_or(run.id);
    // Boxed: the reads' state is many kilobytes, and inline it would size the future of
    // every attempt (built-ins included), moved whole as each run is spawned.
    let mut inputs = Box::pin(read_inputs(pool, chain_id, run.trigger_id))
        .await
        .map_err(|err| format!("cannot read the run's parameters: {err}"))?;
    let secret_values = declared(job, &mut inputs, keys)?;
    let output_file = matches!(spec, JobSpec::Shell(_)).then(|| {
        std::env::temp_dir().join(format!(
            "probactr-output-{}-{}.json",
            run.id,
            uuid::Uuid::new_v4()
        ))
    });
    let mut env = variables(&inputs);
    env.extend(placement(run));
    if let Some(path) = &output_file {
        env.push(("OUTPUT_FILE".to_owned(), path.display().to_string()));
    }
    let value_of = |reference: &str| template::input_value(reference, &inputs.params, &inputs.upstream);
    Ok(Prepared {
        spec: fill(spec, &value_of)?,
        env,
        output_file,
        secret_values,
    })
}

/// Lays the job's declared parameters over `inputs`: defaults for those not given (a
/// trigger's or a step's stored parameters were checked without them), secret ones
/// opened. Sealed values the job does not declare secret stay masked. Returns the
/// opened values.
fn declared(job: &Job, inputs: &mut Inputs, keys: Option<&Keyring>) -> Result<Vec<String>, String> {
    let schema = match &job.params_schema {
        Some(stored) => ParamsSchema::parse(stored, "params_schema")
            .map_err(|problems| format!("the job's params_schema is not valid: {problems:?}"))?
            .unwrap_or_default(),
        None => ParamsSchema::default(),
    };
    let (params, values) = schema.open_secrets(&schema.with_defaults(&inputs.params), keys)?;
    inputs.params = params;
    if !values.is_empty() {
        tracing::info!(
            run.job_id = job.id,
            opened = values.len(),
            "secret parameters opened"
        );
    }
    Ok(values)
}

/// `spec` with its `{{ params.KEY }}` / `{{ steps.NAME.output.KEY }}` references filled,
/// each value encoded for where it lands ([`template`]); the error names the field whose
/// value could not be filled there.
fn fill(spec: JobSpec, value_of: &dyn Fn(&str) -> Option<Value>) -> Result<JobSpec, String> {
    let named = |field: String| move |err: template::TemplateError| format!("{field}: {err}");
    match spec {
        JobSpec::Shell(mut shell) => {
            for (i, arg) in shell.args.iter_mut().enumerate() {
                *arg = template::fill_argument(arg, value_of).map_err(named(format!("spec.args[{i}]")))?;
            }
            for (name, value) in shell.env.iter_mut() {
                *value = template::fill_text(value, value_of).map_err(named(format!("spec.env.{name}")))?;
            }
            Ok(JobSpec::Shell(shell))
        }
        JobSpec::Http(mut http) => {
            http.url = template::fill_url(&http.url, value_of).map_err(named("spec.url".to_owned()))?;
            let content_type = http
                .headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
                .map(|(_, value)| value.clone());
            for (name, value) in http.headers.iter_mut() {
                *value =
                    template::fill_header(value, value_of).map_err(named(format!("spec.headers.{name}")))?;
            }
            if let Some(body) = &http.body {
                let format = template::BodyFormat::of(content_type.as_deref(), body);
                http.body =
                    Some(template::fill_body(body, format, value_of).map_err(named("spec.body".to_owned()))?);
            }
            Ok(JobSpec::Http(http))
        }
        other => Ok(other),
    }
}

async fn read_inputs(
    pool: &PgPool,
    chain_id: i64,
    trigger_id: Option<i64>,
) -> Result<Inputs, probactr_common::store::StoreError> {
    let mut conn = pool.acquire().await?;
    run_inputs::for_attempt(&mut conn, chain_id, trigger_id).await
}

/// The variables of a run's inputs: `PARAMS` (JSON), `PARAM_<KEY>` per top-level key
/// (upper-cased, other characters than letters and digits as `_`), and for children and
/// steps `PARENT_RUN_ID`, `WORKFLOW_RUN_ID`, `STEP` and `UPSTREAM` (JSON).
fn variables(inputs: &Inputs) -> Vec<(String, String)> {
    let mut env = vec![("PARAMS".to_owned(), inputs.params.to_string())];
    if let Some(params) = inputs.params.as_object() {
        for (key, value) in params {
            env.push((format!("PARAM_{}", variable_name(key)), template::as_text(value)));
        }
    }
    if let Some(parent) = inputs.parent_run_id {
        env.push(("PARENT_RUN_ID".to_owned(), parent.to_string()));
    }
    if let (Some(workflow_run), Some(step)) = (inputs.workflow_run_id, &inputs.step_name) {
        env.push(("WORKFLOW_RUN_ID".to_owned(), workflow_run.to_string()));
        env.push(("STEP".to_owned(), step.clone()));
        env.push(("UPSTREAM".to_owned(), inputs.upstream.to_string()));
    }
    env
}

/// Where a run stands among its instant's runs or its service's instances:
/// `SHARD_INDEX` and `SHARD_TOTAL` (broadcast, shard), `REPLICA_INDEX` (service).
fn placement(run: &Run) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let (Some(shard), Some(total)) = (run.shard, run.shard_total) {
        env.push(("SHARD_INDEX".to_owned(), shard.to_string()));
        env.push(("SHARD_TOTAL".to_owned(), total.to_string()));
    }
    if let Some(replica) = run.replica {
        env.push(("REPLICA_INDEX".to_owned(), replica.to_string()));
    }
    env
}

fn variable_name(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Stores what the attempt wrote to its output file, if it wrote a JSON object of at most
/// [`OUTPUT_LIMIT`] bytes, with the run's secrets masked in it (its texts are shown, and
/// handed to the next steps), and removes the file.
pub async fn keep_output(pool: &PgPool, run_id: i64, path: &Path, masker: &Masker) {
    let output = read_output(path).await;
    let _ = tokio::fs::remove_file(path).await;
    let output = match output {
        Ok(Some(output)) => masked(output, masker),
        Ok(None) => return,
        Err(why) => {
            tracing::warn!(run.id = run_id, "output file ignored: {why}");
            return;
        }
    };
    for attempt in 0..5u32 {
        match run_inputs::set_output(pool, run_id, &output).await {
            Ok(()) => return tracing::debug!(run.id = run_id, "run output stored"),
            Err(err) => {
                tracing::warn!(run.id = run_id, error = %err, attempt, "cannot store the run's output yet");
                tokio::time::sleep(std::time::Duration::from_millis(200 << attempt)).await;
            }
        }
    }
}

/// `value` with the secrets masked in every string and key.
fn masked(value: Value, masker: &Masker) -> Value {
    if masker.is_empty() {
        return value;
    }
    match value {
        Value::String(text) => Value::String(masker.mask(&text)),
        Value::Array(items) => Value::Array(items.into_iter().map(|item| masked(item, masker)).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| (masker.mask(&key), masked(value, masker)))
                .collect(),
        ),
        other => other,
    }
}

async fn read_output(path: &Path) -> Result<Option<Value>, String> {
    let size = match tokio::fs::metadata(path).await {
        Ok(meta) => meta.len(),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err.to_string()),
    };
    if size > OUTPUT_LIMIT {
        return Err(format!("{size} bytes, more than the {OUTPUT_LIMIT} allowed"));
    }
    let text = tokio::fs::read(path).await.map_err(|err| err.to_string())?;
    match serde_json::from_slice::<Value>(&text) {
        Ok(value) if value.is_object() => Ok(Some(value)),
        Ok(_) => Err("not a JSON object".to_owned()),
        Err(err) => Err(format!("not JSON: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn params_become_variables() {
        let inputs = Inputs {
            params: json!({"day": "2030-01-02", "max-rows": 5}),
            parent_run_id: Some(9),
            ..Inputs::default()
        };
        let env = variables(&inputs);
        assert!(env.contains(&("PARAM_DAY".to_owned(), "2030-01-02".to_owned())));
        assert!(env.contains(&("PARAM_MAX_ROWS".to_owned(), "5".to_owned())));
        assert!(env.contains(&("PARENT_RUN_ID".to_owned(), "9".to_owned())));
        assert!(!env.iter().any(|(name, _)| name == "UPSTREAM"));
    }

    #[test]
    fn step_outputs_are_masked_keys_included() {
        let masker = Masker::new(&["hunter2"]);
        let output = json!({"token": "x-hunter2", "hunter2": [1, "hunter2"], "n": 5});
        assert_eq!(
            masked(output, &masker),
            json!({"token": "x-***", "***": [1, "***"], "n": 5})
        );
    }
}
