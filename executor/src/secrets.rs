//! Resolving the secrets a job references (`{{ secrets.NAME }}` in shell arguments and
//! environment values, HTTP URL, header values and body) just before its run, and the
//! values to mask in what the run leaves. Values live in memory only for the run.

use std::collections::HashMap;

use probactr_common::jobspec::JobSpec;
use probactr_common::secrets::{self, Keyring};
use probactr_common::store;
use sqlx::PgPool;

/// A spec with its secrets filled in, and their values (to mask).
pub struct Resolved {
    /// The spec to run.
    pub spec: JobSpec,
    /// The values substituted.
    pub values: Vec<String>,
}

/// Fills in the secrets `spec` (of job `job_id`) references, looked up in the job's own
/// namespace; the error says which secret is missing or why none can be read.
pub async fn resolve(
    pool: &PgPool,
    keys: Option<&Keyring>,
    job_id: i64,
    spec: JobSpec,
) -> Result<Resolved, String> {
    let names = referenced(&spec);
    if names.is_empty() {
        return Ok(Resolved {
            spec,
            values: Vec::new(),
        });
    }
    let keys = keys.ok_or_else(|| {
        format!(
            "the job references secret {} but this executor has no PROBACTR_SECRET_KEY",
            names[0]
        )
    })?;
    let sealed = store::secrets::sealed_for_job(pool, job_id, &names)
        .await
        .map_err(|err| format!("cannot read the job's secrets: {err}"))?;
    let mut values = HashMap::new();
    for secret in sealed {
        // Opened as the secret the job names, in its namespace: a value copied from
        // another row (of another name or namespace) does not open, and the error names
        // the secret.
        let value = keys
            .open(
                &secrets::Owner::secret(&secret.namespace, &secret.name),
                &secret.sealed,
            )
            .map_err(|err| err.to_string())?;
        values.insert(secret.name, value);
    }
    if let Some(missing) = names.iter().find(|name| !values.contains_key(*name)) {
        return Err(format!(
            "the job references secret {missing}, which does not exist"
        ));
    }
    tracing::info!(secrets = ?names, "job secrets resolved");
    let spec = substituted(spec, &|name| values.get(name).cloned());
    Ok(Resolved {
        spec,
        values: values.into_values().collect(),
    })
}

/// The names of the secrets a spec references, each once.
fn referenced(spec: &JobSpec) -> Vec<String> {
    let texts: Vec<&str> = match spec {
        JobSpec::Shell(shell) => shell
            .args
            .iter()
            .chain(shell.env.values())
            .map(String::as_str)
            .collect(),
        JobSpec::Http(http) => std::iter::once(http.url.as_str())
            .chain(http.headers.values().map(String::as_str))
            .chain(http.body.as_deref())
            .collect(),
        JobSpec::Noop | JobSpec::Sleep { .. } => Vec::new(),
    };
    let mut names: Vec<String> = Vec::new();
    for name in texts.into_iter().flat_map(secrets::references) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

fn substituted(spec: JobSpec, value_of: &dyn Fn(&str) -> Option<String>) -> JobSpec {
    map_texts(spec, &|text| secrets::substitute(text, value_of))
}

/// `spec` with `fill` applied to every text a secret may stand in (shell arguments and
/// environment values, HTTP URL, header values and body). Secrets are filled as they
/// are, like the definition admins wrote; run inputs, which others give, are encoded for
/// their place by [`crate::inputs`].
fn map_texts(spec: JobSpec, fill: &dyn Fn(&str) -> String) -> JobSpec {
    match spec {
        JobSpec::Shell(mut shell) => {
            shell.args = shell.args.iter().map(|arg| fill(arg)).collect();
            for value in shell.env.values_mut() {
                *value = fill(value);
            }
            JobSpec::Shell(shell)
        }
        JobSpec::Http(mut http) => {
            http.url = fill(&http.url);
            for value in http.headers.values_mut() {
                *value = fill(value);
            }
            http.body = http.body.as_deref().map(fill);
            JobSpec::Http(http)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use probactr_common::jobspec::ShellSpec;

    use super::*;

    #[test]
    fn secrets_are_found_and_filled_where_jobs_may_use_them() {
        let spec = JobSpec::Shell(ShellSpec {
            program: "{{ secrets.not_here }}".into(),
            args: vec!["--token={{ secrets.token }}".into()],
            env: BTreeMap::from([("DB".into(), "{{ secrets.db }}".into())]),
            cwd: None,
            shell: false,
            run_as: None,
            limits: Default::default(),
        });
        assert_eq!(
            referenced(&spec),
            ["token", "db"],
            "the program itself is not a place for secrets"
        );
        let filled = substituted(spec, &|name| Some(format!("<{name}>")));
        let JobSpec::Shell(shell) = filled else {
            unreachable!()
        };
        assert_eq!(shell.args, ["--token=<token>"]);
        assert_eq!(shell.env["DB"], "<db>");
        assert_eq!(shell.program, "{{ secrets.not_here }}");
    }
}
