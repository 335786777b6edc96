//! Names that are not settings: the `PROBACTR_*` names scripts, jobs and the client read,
//! and, for any other, the setting a misspelt name probably meant.

use super::VARS;

/// `PROBACTR_*` names the scripts read (`scripts/up`, `scripts/test`), not the processes.
pub const SCRIPT_VARS: &[&str] = &["PROBACTR_STATE", "PROBACTR_PG_BINDIR"];

/// `PROBACTR_*` names executors give the jobs they run (a run's identity, its checkpoint
/// file, its inputs and output file), not settings.
pub const JOB_VARS: &[&str] = &[
    "PROBACTR_RUN_ID",
    "PROBACTR_JOB_ID",
    "PROBACTR_TRIGGER_ID",
    "PROBACTR_SCHEDULED_AT",
    "PROBACTR_ATTEMPT",
    "PROBACTR_FENCE",
    "PROBACTR_CHECKPOINT_FILE",
    "PROBACTR_PROGRESS_FILE",
    "PROBACTR_PARAMS",
    // `PROBACTR_PARAM_<KEY>`, one per top-level parameter.
    "PROBACTR_PARAM",
    "PROBACTR_PARENT_RUN_ID",
    "PROBACTR_WORKFLOW_RUN_ID",
    "PROBACTR_STEP",
    "PROBACTR_UPSTREAM",
    "PROBACTR_OUTPUT_FILE",
    "PROBACTR_SHARD_INDEX",
    "PROBACTR_SHARD_TOTAL",
    "PROBACTR_REPLICA_INDEX",
];

/// `PROBACTR_*` names the command-line client (`probactr`) reads.
pub const CLIENT_VARS: &[&str] = &["PROBACTR_URL", "PROBACTR_TOKEN", "PROBACTR_NAMESPACE"];

/// Whether `name` is a `PROBACTR_*` name probactr knows without it being a setting of
/// its processes (the scripts', the jobs', the client's).
pub fn is_known_elsewhere(name: &str) -> bool {
    SCRIPT_VARS.contains(&name) || JOB_VARS.contains(&name) || CLIENT_VARS.contains(&name)
}

/// A `PROBACTR_*` variable that nothing reads, with the known name it is closest to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVariable {
    /// As set.
    pub name: String,
    /// The known name it most likely misspells.
    pub suggestion: Option<&'static str>,
}

impl std::fmt::Display for UnknownVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown {}", self.name)?;
        match self.suggestion {
            Some(known) => write!(f, ", did you mean {known}?"),
            None => write!(f, " (it is ignored)"),
        }
    }
}

/// The `PROBACTR_*` names among `names` that no probactr process or script reads: a
/// misspelt setting is otherwise silently replaced by its default.
pub fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<UnknownVariable> {
    let known = || {
        VARS.iter()
            .map(|var| var.name)
            .chain(SCRIPT_VARS.iter().copied())
            .chain(JOB_VARS.iter().copied())
            .chain(CLIENT_VARS.iter().copied())
    };
    let mut unknown: Vec<UnknownVariable> = names
        .into_iter()
        .filter(|name| name.starts_with("PROBACTR_") && !known().any(|k| k == *name))
        .map(|name| UnknownVariable {
            name: name.to_owned(),
            suggestion: known()
                .map(|k| (edit_distance(name, k), k))
                .filter(|(distance, _)| *distance <= 3)
                .min()
                .map(|(_, k)| k),
        })
        .collect();
    unknown.sort_by(|a, b| a.name.cmp(&b.name));
    unknown
}

/// The Levenshtein distance between two names.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}
