//! Progress reported by shell jobs: a job writes `{"percent": 42, "message": "…"}` to the
//! file `PROBACTR_PROGRESS_FILE` names (in its attempt's own directory), whole, as often as
//! it likes; the executor looks at the file's modification time every
//! [`POLL_EVERY`] while the job runs and stores a report that changed
//! ([`run_progress::report`]). A job that never writes the file costs one `stat` a
//! second and no statement; HTTP and builtin jobs have no file.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use probactr_common::masking::Masker;
use probactr_common::store::run_progress;
use serde::Deserialize;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// How often the file's modification time is looked at.
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// The file's name in the attempt's directory.
const FILE_NAME: &str = ".probactr-progress.json";

/// The most of the file read; a larger file is not a report.
const MAX_BYTES: u64 = 16 * 1024;

/// The most characters of a message kept.
const MAX_MESSAGE: usize = 1000;

/// What a job writes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Report {
    /// How far along, 0 to 100.
    #[serde(default)]
    pub percent: Option<f32>,
    /// What it is doing.
    #[serde(default)]
    pub message: String,
}

/// The progress file of an attempt whose directory is `work_dir`.
pub fn file_in(work_dir: &Path) -> PathBuf {
    work_dir.join(FILE_NAME)
}

/// Reads a report; None when the file is not one (absent, too large, not the JSON of a
/// report, a percent outside 0–100).
pub fn read(path: &Path) -> Option<Report> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // The job owns the file: it may make it a link (to a file the job itself may not
    // read, or to /dev/zero), a FIFO or a device. Only a regular file it wrote, opened
    // without following a link or blocking, is read, and never past the bound.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_BYTES).read_to_string(&mut text).ok()?;
    let mut report: Report = serde_json::from_str(&text).ok()?;
    if report
        .percent
        .is_some_and(|percent| !(0.0..=100.0).contains(&percent))
    {
        return None;
    }
    if let Some((cut, _)) = report.message.char_indices().nth(MAX_MESSAGE) {
        report.message.truncate(cut);
    }
    Some(report)
}

/// Watches a run's progress file until `done` is cancelled, storing each new report with
/// the run's secrets masked in its message.
pub async fn watch(pool: PgPool, run_id: i64, path: PathBuf, masker: Masker, done: CancellationToken) {
    let mut seen: Option<SystemTime> = None;
    let mut stored: Option<Report> = None;
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            () = tokio::time::sleep(POLL_EVERY) => {}
        }
        let Ok(modified) = std::fs::symlink_metadata(&path).and_then(|meta| meta.modified()) else {
            continue;
        };
        if seen == Some(modified) {
            continue;
        }
        seen = Some(modified);
        let Some(mut report) = read(&path) else {
            tracing::debug!(run.id = run_id, "the progress file is not a report; ignored");
            continue;
        };
        if !masker.is_empty() {
            report.message = masker.mask(&report.message);
        }
        if stored.as_ref() == Some(&report) {
            continue;
        }
        match run_progress::report(&pool, run_id, report.percent, &report.message).await {
            Ok(()) => stored = Some(report),
            Err(err) => {
                // Tried again at the next change or poll.
                seen = None;
                tracing::warn!(run.id = run_id, error = %err, "cannot store the run's progress yet");
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_reports_and_refuses_what_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_in(dir.path());
        assert_eq!(read(&path), None);
        // A link (to an endless device, or a file of the executor's) is not followed.
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        assert_eq!(read(&path), None);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, r#"{"percent": 42, "message": "rows 420/1000"}"#).unwrap();
        assert_eq!(
            read(&path),
            Some(Report {
                percent: Some(42.0),
                message: "rows 420/1000".to_owned()
            })
        );
        for bad in ["{\"percent\": 142}", "42", "{\"percent\": \"x\"}", "not json"] {
            std::fs::write(&path, bad).unwrap();
            assert_eq!(read(&path), None, "{bad}");
        }
    }
}
