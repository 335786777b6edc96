//! Live output: what shell jobs print, written to `run_output` while they run, so that a
//! run can be followed from the API, the admin and the client as it goes.
//!
//! A job's collectors hand what they read to one writer task through an [`OutputTap`].
//! The writer assigns each piece its place in the run's output (bytes in the order they
//! were read, stdout and stderr together), keeps what the bound allows, and writes what
//! is new every [`FLUSH_EVERY`], or sooner when [`FLUSH_SIZE`] bytes wait, every run's
//! chunks in one statement ([`run_output::append`]). A run that prints nothing costs no
//! statement; a builtin or HTTP run never opens a tap at all.
//!
//! # The bound
//!
//! A run keeps at most `PROBACTR_OUTPUT_LIMIT` bytes: the first half (the head: how it
//! started, what it was given) and the last half (the tail: how it ended). Once the head
//! is full, the tail moves on: pieces that fall out of it are dropped before they are
//! written, or deleted from `run_output` in the next statement when they already were.
//! What was cut shows as a gap between the head's end and the tail's first offset, which
//! readers turn into a marker saying how many bytes.
//!
//! # Before the end is recorded
//!
//! An attempt closes its tap before it records the run's end, and the writer answers once
//! the run's last chunks are stored: a reader who sees the run ended has seen all of its
//! output. While PostgreSQL does not answer, the close gives up after [`CLOSE_WAIT`] (the
//! end must still be recorded) and the writer keeps trying in the background.
//!
//! # The archive
//!
//! With an output archive (`PROBACTR_OUTPUT_ARCHIVE`), every piece is also appended, whole
//! and masked, to the run's spool file ([`crate::archive`]), completed at the close and
//! uploaded after the run's end. Without one, nothing more is done.
//!
//! # Secrets
//!
//! The collectors mask the run's secret values (and their encoded forms) as they read,
//! holding back the end of a read that could start a value until the next read
//! ([`probactr_common::masking::MaskStream`]): what reaches the tap is masked before it is
//! cut into chunks, or into a head and a tail, so no cut can split a value out of sight.
//! Each chunk is masked once more here, which costs little and guards a tap fed another way.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::archive::{Spool, SpoolFile};
use probactr_common::masking::Masker;
use probactr_common::store::run_output::{self, Cut, NewChunk};
use sqlx::PgPool;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// How long new output may wait before it is written.
pub const FLUSH_EVERY: Duration = Duration::from_millis(250);

/// How many waiting bytes make the writer write at once.
pub const FLUSH_SIZE: u64 = 256 * 1024;

/// How long an attempt waits for its output to be stored before recording its end.
pub const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How long after a failed write the writer tries again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Messages waiting for the writer before collectors wait for it.
const QUEUE: usize = 1024;

/// Which of a program's outputs a piece came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// Its name in `run_output.stream`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

enum Message {
    Open {
        run_id: i64,
        secrets: Vec<String>,
    },
    Bytes {
        run_id: i64,
        stream: Stream,
        bytes: Vec<u8>,
    },
    Close {
        run_id: i64,
        stored: oneshot::Sender<()>,
    },
}

/// The handle attempts open and close their runs' output through.
#[derive(Debug, Clone)]
pub struct OutputWriter {
    sender: mpsc::Sender<Message>,
}

/// Where a job's collectors send what they read.
#[derive(Debug, Clone)]
pub struct OutputTap {
    run_id: i64,
    sender: mpsc::Sender<Message>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Open { run_id, .. } => write!(f, "Open({run_id})"),
            Message::Bytes { run_id, bytes, .. } => write!(f, "Bytes({run_id}, {})", bytes.len()),
            Message::Close { run_id, .. } => write!(f, "Close({run_id})"),
        }
    }
}

impl OutputTap {
    /// Hands `bytes` the job wrote on `stream` to the writer (waiting while its queue is
    /// full, which slows a program that prints faster than PostgreSQL stores).
    pub async fn write(&self, stream: Stream, bytes: &[u8]) {
        let message = Message::Bytes {
            run_id: self.run_id,
            stream,
            bytes: bytes.to_vec(),
        };
        let _ = self.sender.send(message).await;
    }
}

impl OutputWriter {
    /// Starts the writer task on `pool`, keeping `limit` bytes per run, and each run's
    /// full output in the `spool` when there is an archive.
    pub fn start(pool: PgPool, limit: u64, spool: Option<Spool>) -> OutputWriter {
        let (sender, inbox) = mpsc::channel(QUEUE);
        tokio::spawn(write_loop(pool, limit, spool, inbox));
        OutputWriter { sender }
    }

    /// A tap for a run's output, masked with `secrets`.
    pub async fn open(&self, run_id: i64, secrets: Vec<String>) -> OutputTap {
        let _ = self.sender.send(Message::Open { run_id, secrets }).await;
        OutputTap {
            run_id,
            sender: self.sender.clone(),
        }
    }

    /// Ends a run's output; returns once it is stored, or after [`CLOSE_WAIT`].
    pub async fn close(&self, run_id: i64) {
        let (stored, answer) = oneshot::channel();
        if self.sender.send(Message::Close { run_id, stored }).await.is_err() {
            return;
        }
        if tokio::time::timeout(CLOSE_WAIT, answer).await.is_err() {
            tracing::warn!(
                run.id = run_id,
                "the run's output is not stored yet; recording its end anyway"
            );
        }
    }
}

async fn write_loop(pool: PgPool, limit: u64, spool: Option<Spool>, mut inbox: mpsc::Receiver<Message>) {
    let mut runs: HashMap<i64, RunOutput> = HashMap::new();
    let mut waiting: u64 = 0;
    let mut flush_at: Option<Instant> = None;
    loop {
        tokio::select! {
            message = inbox.recv() => {
                let Some(message) = message else { break };
                let soon = Instant::now() + FLUSH_EVERY;
                match message {
                    Message::Open { run_id, secrets } => {
                        let mut run = RunOutput::new(limit, secrets);
                        run.spool = spool.as_ref().and_then(|spool| spool.create(run_id));
                        runs.insert(run_id, run);
                    }
                    Message::Bytes { run_id, stream, bytes } => {
                        let Some(run) = runs.get_mut(&run_id) else { continue };
                        waiting += bytes.len() as u64;
                        run.accept(stream, &bytes);
                        let at = if waiting >= FLUSH_SIZE { Instant::now() } else { soon };
                        flush_at = Some(flush_at.map_or(at, |planned| planned.min(at)));
                    }
                    Message::Close { run_id, stored } => match runs.get_mut(&run_id) {
                        Some(run) => {
                            run.close(stored);
                            if let (Some(spool), Some(file)) = (&spool, run.spool.take()) {
                                spool.complete(file);
                            }
                            flush_at = Some(Instant::now());
                        }
                        None => {
                            let _ = stored.send(());
                        }
                    },
                }
            }
            () = sleep_until(flush_at), if flush_at.is_some() => {
                if flush(&pool, &mut runs).await {
                    waiting = 0;
                    flush_at = None;
                } else {
                    flush_at = Some(Instant::now() + RETRY_AFTER);
                }
            }
        }
    }
    flush(&pool, &mut runs).await;
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Writes every run's new chunks and cuts in one statement; on success, answers the
/// closes and forgets closed runs. False when the write failed (nothing is lost: it is
/// tried again).
async fn flush(pool: &PgPool, runs: &mut HashMap<i64, RunOutput>) -> bool {
    let mut chunks = Vec::new();
    let mut cuts = Vec::new();
    for (run_id, run) in runs.iter() {
        run.unwritten(*run_id, &mut chunks, &mut cuts);
    }
    if let Err(err) = run_output::append(pool, &chunks, &cuts).await {
        tracing::warn!(error = %err, chunks = chunks.len(), "cannot store runs' output yet; retrying");
        return false;
    }
    metrics::counter!("probactr_output_chunks_total").increment(chunks.len() as u64);
    runs.retain(|run_id, run| {
        run.written();
        let closed = run.closed.take();
        if let Some(stored) = closed {
            tracing::debug!(run.id = run_id, bytes = run.next_offset, "run output stored");
            let _ = stored.send(());
            return false;
        }
        true
    });
    true
}

/// A piece of a run's output: written (`bytes` None) or waiting to be.
#[derive(Debug)]
struct Piece {
    offset: u64,
    count: u64,
    stream: Stream,
    bytes: Option<Vec<u8>>,
}

/// One run's output as the writer keeps it.
#[derive(Debug)]
struct RunOutput {
    secrets: Masker,
    /// Bytes placed so far: the offset of the next piece.
    next_offset: u64,
    /// What the head may still take; 0 once it is closed.
    head_left: u64,
    /// Where the head ended (the first byte a cut may remove), once it did.
    head_end: Option<u64>,
    head: Vec<Piece>,
    tail_budget: u64,
    tail: VecDeque<Piece>,
    tail_bytes: u64,
    /// Written pieces fell out of the tail up to here: delete them.
    cut_to: Option<u64>,
    /// Per stream, the start of a character whose other bytes have not come yet.
    partial: [Vec<u8>; 2],
    closed: Option<oneshot::Sender<()>>,
    /// The whole output, for the archive (None without one).
    spool: Option<SpoolFile>,
}

impl RunOutput {
    fn new(limit: u64, secrets: Vec<String>) -> Self {
        let head = limit / 2;
        RunOutput {
            secrets: Masker::new(&secrets),
            next_offset: 0,
            head_left: head,
            head_end: None,
            head: Vec::new(),
            tail_budget: limit - head,
            tail: VecDeque::new(),
            tail_bytes: 0,
            cut_to: None,
            partial: [Vec::new(), Vec::new()],
            closed: None,
            spool: None,
        }
    }

    /// Takes what a collector read, placing the complete characters.
    fn accept(&mut self, stream: Stream, bytes: &[u8]) {
        let partial = &mut self.partial[stream.index()];
        partial.extend_from_slice(bytes);
        let complete = complete_prefix(partial);
        if complete == 0 {
            return;
        }
        let data: Vec<u8> = partial.drain(..complete).collect();
        self.place(stream, data);
    }

    /// Places what is left (a character cut short at the end) and waits for the flush.
    fn close(&mut self, stored: oneshot::Sender<()>) {
        for stream in [Stream::Stdout, Stream::Stderr] {
            let rest = std::mem::take(&mut self.partial[stream.index()]);
            if !rest.is_empty() {
                self.place(stream, rest);
            }
        }
        self.closed = Some(stored);
    }

    fn place(&mut self, stream: Stream, mut data: Vec<u8>) {
        if self.spool.is_some() {
            self.spool_piece(&data);
        }
        let offset = self.next_offset;
        self.next_offset += data.len() as u64;
        if self.head_left == 0 {
            return self.push_tail(offset, stream, data);
        }
        let take = boundary_at_most(&data, self.head_left);
        if take == data.len() {
            self.head_left -= take as u64;
            self.head.push(pending(offset, stream, data));
            return;
        }
        let rest = data.split_off(take);
        if take > 0 {
            self.head.push(pending(offset, stream, data));
        }
        self.head_left = 0;
        self.head_end = Some(offset + take as u64);
        self.push_tail(offset + take as u64, stream, rest);
    }

    /// Appends a piece to the spool file; a run whose file fails is not archived.
    fn spool_piece(&mut self, data: &[u8]) {
        let text = self.text(data);
        let Some(file) = &mut self.spool else { return };
        if let Err(err) = file.write(&text) {
            tracing::warn!(error = %err, "cannot spool a run's output; it will not be archived");
            self.spool = None;
        }
    }

    /// Adds to the tail and drops its oldest bytes beyond the budget.
    fn push_tail(&mut self, offset: u64, stream: Stream, data: Vec<u8>) {
        self.tail_bytes += data.len() as u64;
        self.tail.push_back(pending(offset, stream, data));
        while self.tail_bytes > self.tail_budget {
            let excess = self.tail_bytes - self.tail_budget;
            let Some(front) = self.tail.front_mut() else { break };
            let trim = match &mut front.bytes {
                Some(bytes) if front.count > excess => {
                    let skip = boundary_at_least(bytes, excess as usize);
                    bytes.drain(..skip);
                    skip as u64
                }
                _ => front.count,
            };
            if trim < front.count {
                front.offset += trim;
                front.count -= trim;
                self.tail_bytes -= trim;
                continue;
            }
            if front.bytes.is_none() {
                self.cut_to = Some(front.offset + front.count);
            }
            self.tail_bytes -= front.count;
            self.tail.pop_front();
        }
    }

    /// Adds what is not written yet to a statement's chunks and cuts.
    fn unwritten(&self, run_id: i64, chunks: &mut Vec<NewChunk>, cuts: &mut Vec<Cut>) {
        for piece in self.head.iter().chain(self.tail.iter()) {
            let Some(bytes) = &piece.bytes else { continue };
            if bytes.is_empty() {
                continue;
            }
            chunks.push(NewChunk {
                run_id,
                byte_offset: piece.offset as i64,
                byte_count: piece.count as i32,
                stream: piece.stream.as_str(),
                content: self.text(bytes),
            });
        }
        if let (Some(from), Some(to)) = (self.head_end, self.cut_to) {
            cuts.push(Cut {
                run_id,
                from: from as i64,
                to: to as i64,
            });
        }
    }

    /// Marks everything written.
    fn written(&mut self) {
        self.head.clear();
        for piece in &mut self.tail {
            piece.bytes = None;
        }
        self.cut_to = None;
    }

    fn text(&self, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(bytes).replace('\0', "\u{FFFD}");
        if self.secrets.is_empty() {
            text
        } else {
            self.secrets.mask(&text)
        }
    }
}

fn pending(offset: u64, stream: Stream, data: Vec<u8>) -> Piece {
    Piece {
        offset,
        count: data.len() as u64,
        stream,
        bytes: Some(data),
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// How many leading bytes of `bytes` are whole characters: all but a last character
/// whose remaining bytes have not arrived (invalid bytes count as whole).
fn complete_prefix(bytes: &[u8]) -> usize {
    let len = bytes.len();
    let Some(start) = (len.saturating_sub(4)..len)
        .rev()
        .find(|&i| !is_continuation(bytes[i]))
    else {
        return len;
    };
    let needed = match bytes[start] {
        lead if lead & 0b1110_0000 == 0b1100_0000 => 2,
        lead if lead & 0b1111_0000 == 0b1110_0000 => 3,
        lead if lead & 0b1111_1000 == 0b1111_0000 => 4,
        _ => 1,
    };
    if start + needed > len {
        start
    } else {
        len
    }
}

/// The largest character boundary of `bytes` at most `at`.
fn boundary_at_most(bytes: &[u8], at: u64) -> usize {
    let mut at = usize::try_from(at).unwrap_or(usize::MAX).min(bytes.len());
    while at > 0 && at < bytes.len() && is_continuation(bytes[at]) {
        at -= 1;
    }
    at
}

/// The smallest character boundary of `bytes` at least `at`.
fn boundary_at_least(bytes: &[u8], at: usize) -> usize {
    let mut at = at.min(bytes.len());
    while at < bytes.len() && is_continuation(bytes[at]) {
        at += 1;
    }
    at
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A cut of run 1's stored output.
    fn cut_of_run_1(from: i64, to: i64) -> Cut {
        Cut { run_id: 1, from, to }
    }

    /// Each chunk's offset and text.
    fn texts(chunks: &[NewChunk]) -> Vec<(i64, &str)> {
        chunks
            .iter()
            .map(|c| (c.byte_offset, c.content.as_str()))
            .collect()
    }

    fn stored(run: &RunOutput) -> (Vec<NewChunk>, Vec<Cut>) {
        let (mut chunks, mut cuts) = (Vec::new(), Vec::new());
        run.unwritten(1, &mut chunks, &mut cuts);
        (chunks, cuts)
    }

    #[test]
    fn characters_are_never_split_between_pieces() {
        assert_eq!(complete_prefix(b"abc"), 3);
        assert_eq!(complete_prefix("a€".as_bytes()), 4);
        assert_eq!(complete_prefix(&"a€".as_bytes()[..3]), 1);
        assert_eq!(complete_prefix(b"a\xff"), 2);
        let mut run = RunOutput::new(1024, Vec::new());
        let euro = "€".as_bytes();
        run.accept(Stream::Stdout, &euro[..1]);
        run.accept(Stream::Stderr, b"err\n");
        run.accept(Stream::Stdout, &euro[1..]);
        let (chunks, _) = stored(&run);
        let texts: Vec<(&str, &str)> = chunks.iter().map(|c| (c.stream, c.content.as_str())).collect();
        assert_eq!(texts, [("stderr", "err\n"), ("stdout", "€")]);
        assert_eq!((chunks[1].byte_offset, chunks[1].byte_count), (4, 3));
    }

    #[test]
    fn keeps_the_head_and_the_tail_and_cuts_the_written_middle() {
        let mut run = RunOutput::new(20, Vec::new());
        run.accept(Stream::Stdout, b"0123456789abc");
        let (chunks, cuts) = stored(&run);
        assert_eq!(texts(&chunks), [(0, "0123456789"), (10, "abc")]);
        assert!(cuts.is_empty());
        run.written();
        run.accept(Stream::Stdout, b"defghij");
        run.accept(Stream::Stdout, b"klm");
        let (chunks, cuts) = stored(&run);
        // The written "abc" fell out of the 10-byte tail: it is cut from the table.
        assert_eq!(cuts, [cut_of_run_1(10, 13)]);
        assert_eq!(texts(&chunks), [(13, "defghij"), (20, "klm")]);
        run.written();
        run.accept(Stream::Stdout, b"nopqrstuvwxyz");
        let (chunks, cuts) = stored(&run);
        assert_eq!(cuts, [cut_of_run_1(10, 23)]);
        assert_eq!(texts(&chunks), [(26, "qrstuvwxyz")]);
        assert_eq!(run.next_offset, 36);
    }

    #[test]
    fn chunks_are_masked() {
        let mut run = RunOutput::new(1024, vec!["hunter2".to_owned()]);
        run.accept(Stream::Stdout, b"the password is hunter2\n");
        assert_eq!(
            stored(&run).0[0].content,
            "the password is ********\n".replace("********", probactr_common::secrets::MASK)
        );
    }
}
