//! Checkpoints of shell jobs, so that a long job whose executor dies resumes instead of
//! starting over.
//!
//! A shell job finds `PROBACTR_CHECKPOINT_FILE` in its environment: a file in a private
//! directory of its own, holding the last checkpoint its instant's earlier attempts saved
//! (empty when there is none). Whatever the job writes there is saved under the run's
//! fence every `PROBACTR_HEARTBEAT_INTERVAL` and once more after the job ended, before
//! its end is recorded ([`checkpoints::save`]); a stale owner saves nothing. A file
//! that did not change since the last save (or restore) costs no statement, so a job
//! that never writes one costs nothing. A job writes its checkpoint whole: write a file
//! next to it and rename it over it, so a save never sees half of one.
//!
//! At most [`MAX_CHECKPOINT_BYTES`]: a bigger file is not saved (and logged), the last
//! saved checkpoint stays. The file lives in a directory of the attempt's own, owned by
//! the account the job runs as ([`crate::workdir`]), removed when the attempt ends.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use probactr_common::backoff::Backoff;
use probactr_common::fence::Write;
use probactr_common::model::Run;
use probactr_common::store::checkpoints::{self, MAX_CHECKPOINT_BYTES};
use sqlx::PgPool;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use crate::job::account::Account;
use crate::workdir::RunDir;

/// How many times the save after the job's end is tried before giving up on it.
const FINAL_SAVE_TRIES: u32 = 5;

/// The checkpoint file of one attempt, and what the chain's saved checkpoint holds.
pub struct Checkpointer {
    file: CheckpointFile,
    pool: PgPool,
    run_id: i64,
    executor_id: Uuid,
    fence: Option<i64>,
    state: Mutex<Saved>,
}

/// What this attempt knows of the stored checkpoint.
struct Saved {
    /// The contents stored (or restored), to notice changes without a statement.
    data: Vec<u8>,
    /// The run is no longer ours: nothing more is saved.
    fenced: bool,
    /// The size of an oversized file already reported, to log it once.
    oversized: Option<u64>,
}

impl Checkpointer {
    /// Prepares the checkpoint file of a started attempt, holding the last checkpoint of
    /// its chain when it is not the first attempt. None (logged) when the file cannot be
    /// made: the job then runs without checkpoints.
    pub async fn prepare(
        pool: &PgPool,
        run: &Run,
        executor_id: Uuid,
        fence: Option<i64>,
        account: Option<&Account>,
    ) -> Option<Checkpointer> {
        let restored = match run.first_run_id {
            Some(chain_id) => load(pool, chain_id).await,
            None => Vec::new(),
        };
        match CheckpointFile::create(run, account, &restored) {
            Ok(file) => Some(Checkpointer {
                file,
                pool: pool.clone(),
                run_id: run.id,
                executor_id,
                fence,
                state: Mutex::new(Saved {
                    data: restored,
                    fenced: false,
                    oversized: None,
                }),
            }),
            Err(err) => {
                tracing::warn!(error = %err, "cannot create the checkpoint file; the job runs without one");
                None
            }
        }
    }

    /// The file the job writes.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Saves the file when it changed since the last save. Returns false when a save was
    /// due and failed (PostgreSQL did not answer), to be tried again.
    async fn save_if_changed(&self) -> bool {
        let mut saved = self.state.lock().await;
        if saved.fenced {
            return true;
        }
        let data = match self.file.read().await {
            Ok(data) => data,
            Err(ReadError::Oversized(bytes)) => {
                if saved.oversized != Some(bytes) {
                    tracing::warn!(
                        run.id = self.run_id,
                        bytes,
                        limit = MAX_CHECKPOINT_BYTES,
                        "checkpoint file too large; not saved (the last saved checkpoint stays)"
                    );
                    saved.oversized = Some(bytes);
                }
                return true;
            }
            Err(ReadError::Io(err)) => {
                tracing::warn!(run.id = self.run_id, error = %err, "cannot read the checkpoint file");
                return true;
            }
        };
        if data == saved.data {
            return true;
        }
        match checkpoints::save(&self.pool, self.run_id, self.executor_id, self.fence, &data).await {
            Ok(Write::Stored) => {
                tracing::info!(
                    run.id = self.run_id,
                    fence = self.fence,
                    bytes = data.len(),
                    "checkpoint saved"
                );
                saved.data = data;
                true
            }
            Ok(Write::Fenced) => {
                tracing::warn!(
                    run.id = self.run_id,
                    fence = self.fence,
                    "checkpoint not saved: the run is no longer this attempt's (reaped or fenced off)"
                );
                saved.fenced = true;
                true
            }
            Err(err) => {
                tracing::warn!(run.id = self.run_id, error = %err, "cannot save the checkpoint yet");
                false
            }
        }
    }

    /// The save after the job ended (before its end is recorded), retried a few times.
    pub async fn save_at_exit(&self) {
        let backoff = Backoff::FullJitter {
            base: Duration::from_millis(50),
            cap: Duration::from_secs(1),
        };
        for attempt in 0..FINAL_SAVE_TRIES {
            if self.save_if_changed().await {
                return;
            }
            tokio::time::sleep(backoff.delay(attempt)).await;
        }
        tracing::warn!(run.id = self.run_id, "the last checkpoint could not be saved");
    }
}

/// Saves the checkpoint every `every` until `done` is cancelled (the job ended).
pub fn keep_saving(
    checkpointer: Arc<Checkpointer>,
    every: Duration,
    done: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(
        async move {
            loop {
                tokio::select! {
                    () = done.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
                checkpointer.save_if_changed().await;
            }
        }
        .in_current_span(),
    )
}

/// The chain's checkpoint, retried a few times; empty (logged) when there is none or it
/// cannot be read.
async fn load(pool: &PgPool, chain_id: i64) -> Vec<u8> {
    let backoff = Backoff::FullJitter {
        base: Duration::from_millis(50),
        cap: Duration::from_secs(1),
    };
    for attempt in 0..FINAL_SAVE_TRIES {
        match checkpoints::load(pool, chain_id).await {
            Ok(Some(checkpoint)) => {
                tracing::info!(
                    chain.id = chain_id,
                    saved_by.run_id = checkpoint.run_id,
                    bytes = checkpoint.data.len(),
                    saved_at = %checkpoint.saved_at,
                    "resuming from the last checkpoint"
                );
                return checkpoint.data;
            }
            Ok(None) => return Vec::new(),
            Err(err) => {
                tracing::warn!(chain.id = chain_id, error = %err, attempt, "cannot read the checkpoint yet");
                tokio::time::sleep(backoff.delay(attempt)).await;
            }
        }
    }
    tracing::warn!(
        chain.id = chain_id,
        "cannot read the checkpoint; the job starts without it"
    );
    Vec::new()
}

/// A private directory holding one attempt's checkpoint file; removed when dropped.
struct CheckpointFile {
    /// Removed (with the file) when the attempt's checkpointer is dropped.
    _dir: RunDir,
    path: PathBuf,
}

/// Why the file could not be read.
enum ReadError {
    /// It holds more than [`MAX_CHECKPOINT_BYTES`].
    Oversized(u64),
    Io(io::Error),
}

impl CheckpointFile {
    /// Makes the attempt's checkpoint directory ([`crate::workdir`]) holding the file
    /// `checkpoint` with `contents`, both owned by the account the job runs as.
    fn create(run: &Run, account: Option<&Account>, contents: &[u8]) -> io::Result<CheckpointFile> {
        let dir = RunDir::create("checkpoint", run.id, run.attempt, account)?;
        let path = dir.path().join("checkpoint");
        std::fs::write(&path, contents)?;
        if let Some(account) = account {
            std::os::unix::fs::chown(&path, Some(account.uid), Some(account.gid))?;
        }
        Ok(CheckpointFile { _dir: dir, path })
    }

    /// What the job wrote; empty when it removed the file.
    async fn read(&self) -> Result<Vec<u8>, ReadError> {
        match tokio::fs::metadata(&self.path).await {
            Ok(meta) if meta.len() > MAX_CHECKPOINT_BYTES as u64 => {
                return Err(ReadError::Oversized(meta.len()))
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(ReadError::Io(err)),
        }
        match tokio::fs::read(&self.path).await {
            // It may have grown since: the limit holds for what is read, too.
            Ok(data) if data.len() > MAX_CHECKPOINT_BYTES => Err(ReadError::Oversized(data.len() as u64)),
            Ok(data) => Ok(data),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(err) => Err(ReadError::Io(err)),
        }
    }
}
