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
    /// A run's archived output is larger than one read returns.
    #[error(
        "output archive: run {run_id}'s output is larger than {limit} bytes, the most one request reads"
    )]
    TooLarge {
        /// The run.
        run_id: i64,
        /// The most bytes one read returns ([`MAX_READ_BYTES`]).
        limit: u64,
    },
    /// An archived object is not the gzip of a text.
    #[error("output archive: run {run_id}'s object does not decompress: {source}")]
    Corrupt {
        /// The run.
        run_id: i64,
        /// Why.
        source: std::io::Error,
    },
}

/// The most bytes of output one read of the archive returns (and of compressed object it
/// fetches): a larger output is refused whole rather than held in a manager's memory.
pub const MAX_READ_BYTES: u64 = 64 * 1024 * 1024;

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

    /// A run's full output as text; None when it was not archived. An output larger than
    /// [`MAX_READ_BYTES`] (compressed or not) is refused ([`ArchiveError::TooLarge`]).
    pub async fn read(&self, run_id: i64) -> Result<Option<String>, ArchiveError> {
        let found = match self.store.get(&self.key(run_id)).await {
            Ok(found) => found,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        if found.meta.size > MAX_READ_BYTES {
            return Err(ArchiveError::TooLarge {
                run_id,
                limit: MAX_READ_BYTES,
            });
        }
        let gzipped = found.bytes().await?;
        decompress_capped(run_id, &gzipped, MAX_READ_BYTES).map(Some)
    }

    /// Deletes a run's output; an object already gone is not an error.
    pub async fn delete(&self, run_id: i64) -> Result<(), ArchiveError> {
        match self.store.delete(&self.key(run_id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }
}

/// The text of a gzipped output, refused when it is longer than `limit` bytes (it is
/// decompressed no further than that).
fn decompress_capped(run_id: i64, gzipped: &[u8], limit: u64) -> Result<String, ArchiveError> {
    let mut text = String::new();
    GzDecoder::new(gzipped)
        .take(limit.saturating_add(1))
        .read_to_string(&mut text)
        .map_err(|source| ArchiveError::Corrupt { run_id, source })?;
    if text.len() as u64 > limit {
        return Err(ArchiveError::TooLarge { run_id, limit });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use flate2::write::GzEncoder;
    use flate2::Compression;

    use super::{decompress_capped, ArchiveError};

    fn gzip(text: &str) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(text.as_bytes()).expect("compress");
        encoder.finish().expect("compress")
    }

    #[test]
    fn an_output_within_the_limit_is_read_whole() {
        let text = decompress_capped(1, &gzip("0123456789"), 10).expect("within the limit");
        assert_eq!(text, "0123456789");
    }

    #[test]
    fn an_output_past_the_limit_is_refused_without_reading_it_all() {
        // A megabyte of zeros compresses to about a kilobyte: the limit is on what it
        // decompresses to.
        let zeros = "0".repeat(1024 * 1024);
        let err = decompress_capped(7, &gzip(&zeros), 1000).expect_err("past the limit");
        assert!(
            matches!(
                err,
                ArchiveError::TooLarge {
                    run_id: 7,
                    limit: 1000
                }
            ),
            "{err}"
        );
    }
}
