//! The output archive (`PROBACTR_OUTPUT_ARCHIVE=s3://BUCKET/PREFIX`): every run's full
//! output, gzip-compressed, one object per run, in S3-compatible storage. Executors write
//! it at a run's end (through their spool, so an unreachable archive delays the upload,
//! never the run), managers read it back for the full output, monitors delete it with
//! the run's history. The endpoint, region and credentials come from the standard
//! `AWS_*` variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`, …).

use std::io::Read;
use std::sync::Arc;

use flate2::read::GzDecoder;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use crate::config::ArchiveLocation;

/// What went wrong talking to the archive.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The storage refused or could not be reached.
    #[error("output archive: {0}")]
    Storage(#[from] object_store::Error),
    /// An archived object is not the gzip of a text.
    #[error("output archive: run {run_id}'s object does not decompress: {source}")]
    Corrupt {
        /// The run.
        run_id: i64,
        /// Why.
        source: std::io::Error,
    },
}

/// The archive's client: where each run's output object lives.
#[derive(Debug, Clone)]
pub struct OutputArchive {
    store: Arc<AmazonS3>,
    prefix: String,
}

impl OutputArchive {
    /// The client of `location`, with the endpoint, region and credentials of its `AWS_*`
    /// variables. It does not connect yet: an unreachable archive is found at its use.
    pub fn new(location: &ArchiveLocation) -> Result<OutputArchive, ArchiveError> {
        let mut builder = AmazonS3Builder::new();
        for (name, value) in &location.aws {
            // Every name of the list is one the builder knows.
            if let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(key, value);
            }
        }
        let store = builder.with_bucket_name(&location.bucket).build()?;
        Ok(OutputArchive {
            store: Arc::new(store),
            prefix: location.prefix.clone(),
        })
    }

    /// The object of a run's output: `PREFIX/runs/RUN_ID.log.gz`.
    pub fn key(&self, run_id: i64) -> Path {
        if self.prefix.is_empty() {
            Path::from(format!("runs/{run_id}.log.gz"))
        } else {
            Path::from(format!("{}/runs/{run_id}.log.gz", self.prefix))
        }
    }

    /// Stores a run's compressed output (again, when it already is: the same bytes).
    pub async fn put(&self, run_id: i64, gzipped: Vec<u8>) -> Result<(), ArchiveError> {
        self.store
            .put(&self.key(run_id), PutPayload::from(gzipped))
            .await?;
        Ok(())
    }

    /// A run's full output as text; None when it was not archived.
    pub async fn read(&self, run_id: i64) -> Result<Option<String>, ArchiveError> {
        let gzipped = match self.store.get(&self.key(run_id)).await {
            Ok(found) => found.bytes().await?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        let mut text = String::new();
        GzDecoder::new(&gzipped[..])
            .read_to_string(&mut text)
            .map_err(|source| ArchiveError::Corrupt { run_id, source })?;
        Ok(Some(text))
    }

    /// Deletes a run's output; an object already gone is not an error.
    pub async fn delete(&self, run_id: i64) -> Result<(), ArchiveError> {
        match self.store.delete(&self.key(run_id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }
}
