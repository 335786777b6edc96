//! `run_output`: the chunks of output runs print, written while they run (by the
//! executor's output writer), read from an offset (by the API and the run page), and
//! purged past the retention once their run is gone (by the monitor).

use std::time::Duration;

use serde::Serialize;
use sqlx::PgExecutor;

use super::{rows_written, StoreError};

/// A chunk to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChunk {
    /// The run.
    pub run_id: i64,
    /// Where the chunk starts in the run's output, in bytes.
    pub byte_offset: i64,
    /// How many bytes of output it covers.
    pub byte_count: i32,
    /// `stdout` or `stderr`.
    pub stream: &'static str,
    /// The bytes as text.
    pub content: String,
}

/// A range of a run's output to delete: the middle of an output past its bound, which
/// the tail has moved beyond. Chunks lying wholly in `[from, to)` go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The run.
    pub run_id: i64,
    /// First byte cut.
    pub from: i64,
    /// First byte kept after the cut.
    pub to: i64,
}

/// A stored chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chunk {
    /// Where it starts in the run's output, in bytes.
    pub byte_offset: i64,
    /// How many bytes of output it covers.
    pub byte_count: i32,
    /// `stdout` or `stderr`.
    pub stream: String,
    /// The text.
    pub content: String,
}

/// Stores `chunks` and deletes the `cuts`, in one statement. A chunk already stored (a
/// retried write whose first answer was lost) is left as it is.
pub async fn append(db: impl PgExecutor<'_>, chunks: &[NewChunk], cuts: &[Cut]) -> Result<(), StoreError> {
    if chunks.is_empty() && cuts.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "WITH cut AS (
             DELETE FROM run_output
             USING unnest($6::bigint[], $7::bigint[], $8::bigint[]) AS cut (run_id, cut_from, cut_to)
             WHERE run_output.run_id = cut.run_id
               AND run_output.byte_offset >= cut.cut_from
               AND run_output.byte_offset + run_output.byte_count <= cut.cut_to
         )
         INSERT INTO run_output (run_id, byte_offset, byte_count, stream, content)
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $5::text[])
         ON CONFLICT (run_id, byte_offset) DO NOTHING",
        &chunks.iter().map(|c| c.run_id).collect::<Vec<_>>(),
        &chunks.iter().map(|c| c.byte_offset).collect::<Vec<_>>(),
        &chunks.iter().map(|c| c.byte_count).collect::<Vec<_>>(),
        &chunks.iter().map(|c| c.stream.to_owned()).collect::<Vec<_>>(),
        &chunks.iter().map(|c| c.content.clone()).collect::<Vec<_>>(),
        &cuts.iter().map(|c| c.run_id).collect::<Vec<_>>(),
        &cuts.iter().map(|c| c.from).collect::<Vec<_>>(),
        &cuts.iter().map(|c| c.to).collect::<Vec<_>>(),
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Up to `limit` chunks of a run's output that end after `offset`, in order.
pub async fn read(
    db: impl PgExecutor<'_>,
    run_id: i64,
    offset: i64,
    limit: i64,
) -> Result<Vec<Chunk>, StoreError> {
    Ok(sqlx::query_as!(
        Chunk,
        "SELECT byte_offset, byte_count, stream, content FROM run_output
         WHERE run_id = $1 AND byte_offset + byte_count > $2
         ORDER BY byte_offset LIMIT $3",
        run_id,
        offset,
        limit
    )
    .fetch_all(db)
    .await?)
}

/// Deletes up to `batch` chunks written before the retention whose run is gone (dropped
/// with its day of history, pruned, or deleted with its job); returns how many.
pub async fn purge(db: impl PgExecutor<'_>, retention: Duration, batch: i64) -> Result<u64, StoreError> {
    let statement = sqlx::query!(
        "DELETE FROM run_output WHERE (run_id, byte_offset) IN (
             SELECT old.run_id, old.byte_offset FROM run_output AS old
             WHERE old.written_at < now() - make_interval(secs => $1)
               AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = old.run_id)
             ORDER BY old.written_at
             LIMIT $2)",
        retention.as_secs_f64(),
        batch
    );
    rows_written(db, statement).await
}
