//! The output archive's executor side (`PROBACTR_OUTPUT_ARCHIVE`): each shell run's full
//! output, masked as its chunks are, is gzip-compressed into the spool
//! (`PROBACTR_OUTPUT_SPOOL`) while it runs ([`SpoolFile`]), and uploaded after its end by
//! one uploader task ([`Uploader`]).
//!
//! The spool is what makes the archive durable without costing the run anything: a run's
//! end is recorded once its file is complete on disk, whatever the archive's state; an
//! archive that does not answer delays the upload, retried with backoff, and a restart
//! uploads what the spool still holds. Once stored, the run is noted in
//! `archived_outputs` (for retention) and its file removed.
//!
//! Files: `RUN_ID.partial` while the run writes, `RUN_ID.gz` once complete. A partial file
//! left by a process that died is removed after [`STALE_PARTIAL`] (its run was taken over
//! or reaped; the chunks in PostgreSQL keep its head and tail).

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use flate2::write::GzEncoder;
use flate2::Compression;
use probactr_common::archive::{ArchiveError, OutputArchive};
use probactr_common::backoff::Backoff;
use probactr_common::store::archived_outputs;
use sqlx::PgPool;
use tokio::sync::mpsc;

/// How old a partial file must be before it is taken for a dead process's.
const STALE_PARTIAL: Duration = Duration::from_secs(24 * 3600);

/// Where complete outputs wait for the uploader.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
    uploads: mpsc::UnboundedSender<i64>,
}

/// One run's output as it is written to the spool.
pub struct SpoolFile {
    run_id: i64,
    encoder: GzEncoder<BufWriter<File>>,
}

impl std::fmt::Debug for SpoolFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpoolFile({})", self.run_id)
    }
}

impl Spool {
    /// Opens the spool in `dir` (creating it) and starts the uploader, which first takes
    /// what a previous process left.
    pub fn start(dir: PathBuf, archive: OutputArchive, pool: PgPool) -> std::io::Result<Spool> {
        std::fs::create_dir_all(&dir)?;
        let (uploads, inbox) = mpsc::unbounded_channel();
        let left = spooled(&dir);
        if !left.is_empty() {
            tracing::info!(
                runs = left.len(),
                "uploading the output a previous process left in the spool"
            );
        }
        tokio::spawn(upload_loop(pool, archive, dir.clone(), left, inbox));
        Ok(Spool { dir, uploads })
    }

    /// Starts a run's file; None (logged) when it cannot be created: the run goes on,
    /// without its full output archived.
    pub fn create(&self, run_id: i64) -> Option<SpoolFile> {
        match File::create(self.partial(run_id)) {
            Ok(file) => Some(SpoolFile {
                run_id,
                encoder: GzEncoder::new(BufWriter::new(file), Compression::fast()),
            }),
            Err(err) => {
                tracing::warn!(run.id = run_id, error = %err, "cannot spool the run's output; it will not be archived");
                None
            }
        }
    }

    /// Completes a run's file and hands it to the uploader.
    pub fn complete(&self, file: SpoolFile) {
        let run_id = file.run_id;
        let finished = file
            .encoder
            .finish()
            .and_then(|mut writer| writer.flush())
            // No fsync: the file outlives the process in the page cache, which is what a
            // restart needs; a machine's crash loses the runs it was running anyway.
            .and_then(|()| std::fs::rename(self.partial(run_id), complete_path(&self.dir, run_id)));
        match finished {
            Ok(()) => {
                let _ = self.uploads.send(run_id);
            }
            Err(err) => {
                tracing::warn!(run.id = run_id, error = %err, "cannot complete the run's spooled output; it will not be archived");
                let _ = std::fs::remove_file(self.partial(run_id));
            }
        }
    }

    fn partial(&self, run_id: i64) -> PathBuf {
        self.dir.join(format!("{run_id}.partial"))
    }
}

impl SpoolFile {
    /// Appends output (already masked). A write that fails is logged once and the file
    /// dropped at completion.
    pub fn write(&mut self, text: &str) -> std::io::Result<()> {
        self.encoder.write_all(text.as_bytes())
    }
}

fn complete_path(dir: &Path, run_id: i64) -> PathBuf {
    dir.join(format!("{run_id}.gz"))
}

/// The complete files in the spool (oldest runs first); removes stale partial ones.
fn spooled(dir: &Path) -> VecDeque<i64> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return VecDeque::new();
    };
    let mut runs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(stem) = path.file_stem().and_then(|stem| stem.to_str()) else {
            continue;
        };
        let Ok(run_id) = stem.parse::<i64>() else { continue };
        match path.extension().and_then(|ext| ext.to_str()) {
            Some("gz") => runs.push(run_id),
            Some("partial") if is_stale(&entry) => {
                tracing::warn!(
                    run.id = run_id,
                    "removing the spooled output of a run a dead process left unfinished"
                );
                let _ = std::fs::remove_file(&path);
            }
            _ => {}
        }
    }
    runs.sort_unstable();
    runs.into()
}

fn is_stale(entry: &std::fs::DirEntry) -> bool {
    entry
        .metadata()
        .and_then(|meta| meta.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .is_some_and(|age| age > STALE_PARTIAL)
}

/// Uploads spooled runs one after another, retrying the first with backoff while the
/// archive or PostgreSQL does not answer.
async fn upload_loop(
    pool: PgPool,
    archive: OutputArchive,
    dir: PathBuf,
    mut pending: VecDeque<i64>,
    mut inbox: mpsc::UnboundedReceiver<i64>,
) {
    let backoff = Backoff::full_jitter(Duration::from_millis(200), Duration::from_secs(60));
    let mut failures = 0u32;
    loop {
        while let Ok(run_id) = inbox.try_recv() {
            pending.push_back(run_id);
        }
        let Some(&run_id) = pending.front() else {
            match inbox.recv().await {
                Some(run_id) => pending.push_back(run_id),
                None => return,
            }
            continue;
        };
        match upload(&pool, &archive, &dir, run_id).await {
            Ok(()) => {
                pending.pop_front();
                failures = 0;
            }
            Err(err) => {
                failures = failures.saturating_add(1);
                tracing::warn!(run.id = run_id, error = %err, failures, waiting = pending.len(),
                    "cannot archive the run's output yet; retrying");
                tokio::time::sleep(backoff.delay(failures.min(12))).await;
            }
        }
    }
}

/// Why an upload must be tried again.
#[derive(Debug, thiserror::Error)]
enum UploadError {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("cannot note the archived output: {0}")]
    Store(#[from] probactr_common::store::StoreError),
}

/// Stores one run's file, notes it, and removes it. A file gone (another process of the
/// same spool took it) counts as done.
async fn upload(pool: &PgPool, archive: &OutputArchive, dir: &Path, run_id: i64) -> Result<(), UploadError> {
    let path = complete_path(dir, run_id);
    let gzipped = match tokio::fs::read(&path).await {
        Ok(bytes) => bytes,
        Err(err) => {
            tracing::warn!(run.id = run_id, error = %err, "cannot read the spooled output; skipping it");
            return Ok(());
        }
    };
    let bytes = gzipped.len();
    archive.put(run_id, gzipped).await?;
    archived_outputs::record(pool, run_id).await?;
    let _ = tokio::fs::remove_file(&path).await;
    metrics::counter!("probactr_output_archived_total").increment(1);
    tracing::debug!(run.id = run_id, bytes, "run output archived");
    Ok(())
}
