//! Settings that may come from a file: `NAME_FILE=/run/secrets/x` instead of `NAME=value`,
//! the Docker and Kubernetes secrets convention, so that a password or key never sits in
//! a process's environment, a compose file or a pod spec.
//!
//! Only the settings that are secrets take a file ([`FILE_SETTINGS`]). A file's content
//! is the value, without its trailing newline (what `echo` and most editors leave).
//! Setting both `NAME` and `NAME_FILE` is an error, not a silent precedence.

use std::collections::HashMap;

use super::ConfigError;

/// The settings that may be given as `NAME_FILE`, each with the name of its file variable.
pub const FILE_SETTINGS: &[(&str, &str)] = &[
    ("DATABASE_URL", "DATABASE_URL_FILE"),
    ("DATABASE_READ_URL", "DATABASE_READ_URL_FILE"),
    ("REDIS_URL", "REDIS_URL_FILE"),
    ("PROBACTR_SECRET_KEY", "PROBACTR_SECRET_KEY_FILE"),
    (
        "PROBACTR_SECRET_KEY_PREVIOUS",
        "PROBACTR_SECRET_KEY_PREVIOUS_FILE",
    ),
    ("PROBACTR_ADMIN_PASSWORD", "PROBACTR_ADMIN_PASSWORD_FILE"),
    ("PROBACTR_SMTP_URL", "PROBACTR_SMTP_URL_FILE"),
    ("PROBACTR_OIDC_CLIENT_SECRET", "PROBACTR_OIDC_CLIENT_SECRET_FILE"),
];

/// The values of the settings given as files, read through `lookup` (the environment).
pub fn read_file_settings(
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<HashMap<&'static str, String>, ConfigError> {
    let mut values = HashMap::new();
    for &(name, file_var) in FILE_SETTINGS {
        let Some(path) = lookup(file_var).filter(|path| !path.trim().is_empty()) else {
            continue;
        };
        if lookup(name).is_some_and(|value| !value.is_empty()) {
            return Err(ConfigError::Inconsistent {
                var: file_var,
                message: format!("is set together with {name}; set one of them"),
            });
        }
        values.insert(name, read_value(file_var, &path)?);
    }
    Ok(values)
}

/// A file's content as a setting's value: UTF-8, without the trailing line break.
fn read_value(file_var: &'static str, path: &str) -> Result<String, ConfigError> {
    let bytes = std::fs::read(path).map_err(|err| ConfigError::Invalid {
        var: file_var,
        value: path.to_owned(),
        expected: format!("a readable file ({err})"),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| ConfigError::Invalid {
        var: file_var,
        value: path.to_owned(),
        expected: "a file holding UTF-8 text".to_owned(),
    })?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup_in(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn a_file_gives_the_value_without_its_line_break() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db");
        std::fs::write(&path, "postgres://u:p@db/x\n").expect("write");
        let lookup = lookup_in(&[("DATABASE_URL_FILE", path.display().to_string())]);
        let values = read_file_settings(&lookup).expect("read");
        assert_eq!(values["DATABASE_URL"], "postgres://u:p@db/x");
    }

    #[test]
    fn both_a_value_and_a_file_is_an_error_naming_the_file_variable() {
        let lookup = lookup_in(&[
            ("REDIS_URL", "redis://x".to_owned()),
            ("REDIS_URL_FILE", "/nonexistent".to_owned()),
        ]);
        let err = read_file_settings(&lookup).expect_err("both set");
        assert!(err.to_string().contains("REDIS_URL_FILE"), "{err}");
    }

    #[test]
    fn an_unreadable_file_is_named() {
        let lookup = lookup_in(&[("PROBACTR_SECRET_KEY_FILE", "/nonexistent/key".to_owned())]);
        let err = read_file_settings(&lookup).expect_err("missing file");
        assert!(err.to_string().contains("PROBACTR_SECRET_KEY_FILE"), "{err}");
    }
}
