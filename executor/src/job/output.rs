//! A bounded tail of a job's output.
//!
//! A job may print gigabytes; a run row must stay small. What an operator wants after a
//! failure is almost always the *end* of the output (the error, the stack trace, the
//! last progress line), so the buffer keeps the last `limit` bytes and counts what it
//! dropped. When anything was dropped, the stored text starts with a marker saying how
//! much, so nobody mistakes a tail for the whole story.
//!
//! The bytes are decoded as UTF-8 only at the end, leniently: invalid sequences become
//! U+FFFD, and a character cut in half by the truncation point is dropped whole rather
//! than shown as garbage. NUL characters become U+FFFD too, because PostgreSQL `text`
//! cannot store them.

use std::collections::VecDeque;

/// How many bytes of output a run keeps by default: 64 KiB.
pub const DEFAULT_OUTPUT_LIMIT: usize = 64 * 1024;

/// Keeps the last `limit` bytes written to it.
#[derive(Debug, Clone)]
pub struct TailBuffer {
    limit: usize,
    bytes: VecDeque<u8>,
    dropped: u64,
}

impl TailBuffer {
    /// An empty buffer keeping at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        TailBuffer {
            limit,
            bytes: VecDeque::with_capacity(limit.min(8 * 1024)),
            dropped: 0,
        }
    }

    /// Appends `chunk`, dropping the oldest bytes beyond the limit.
    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= self.limit {
            let skip = chunk.len() - self.limit;
            self.dropped += (self.bytes.len() + skip) as u64;
            self.bytes.clear();
            self.bytes.extend(&chunk[skip..]);
            return;
        }
        let overflow = (self.bytes.len() + chunk.len()).saturating_sub(self.limit);
        self.bytes.drain(..overflow);
        self.dropped += overflow as u64;
        self.bytes.extend(chunk);
    }

    /// Bytes written so far, kept or not.
    pub fn total(&self) -> u64 {
        self.dropped + self.bytes.len() as u64
    }

    /// Whether some bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.dropped > 0
    }

    /// The kept text (with the truncation marker when bytes were dropped), and whether
    /// bytes were dropped. An empty output gives `None`.
    pub fn finish(&self) -> (Option<String>, bool) {
        let (front, back) = self.bytes.as_slices();
        let mut kept = Vec::with_capacity(self.bytes.len());
        kept.extend_from_slice(front);
        kept.extend_from_slice(back);
        let mut dropped = self.dropped;
        if dropped > 0 {
            // The cut may have landed inside a character: skip its continuation bytes.
            let partial = kept.iter().take(3).take_while(|b| is_continuation(**b)).count();
            kept.drain(..partial);
            dropped += partial as u64;
        }
        if kept.is_empty() && dropped == 0 {
            return (None, false);
        }
        let text = String::from_utf8_lossy(&kept).replace('\0', "\u{FFFD}");
        if dropped == 0 {
            return (Some(text), false);
        }
        (Some(format!("{}{text}", truncation_marker(dropped))), true)
    }
}

/// The first line of a truncated output.
pub fn truncation_marker(dropped: u64) -> String {
    format!("[… {dropped} bytes truncated …]\n")
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_under_the_limit() {
        let mut buf = TailBuffer::new(10);
        buf.push(b"abc");
        buf.push(b"def");
        assert_eq!(buf.finish(), (Some("abcdef".to_owned()), false));
        assert_eq!(TailBuffer::new(10).finish(), (None, false));
    }

    #[test]
    fn keeps_the_tail_with_a_marker() {
        let mut buf = TailBuffer::new(4);
        buf.push(b"abc");
        buf.push(b"def");
        assert_eq!(buf.total(), 6);
        assert_eq!(
            buf.finish(),
            (Some(format!("{}cdef", truncation_marker(2))), true)
        );
        buf.push(b"0123456789");
        assert_eq!(
            buf.finish(),
            (Some(format!("{}6789", truncation_marker(12))), true)
        );
    }

    #[test]
    fn never_starts_inside_a_character() {
        let mut buf = TailBuffer::new(5);
        buf.push("aé€x".as_bytes()); // a(1) é(2) €(3) x(1): the last 5 bytes cut é
        let (text, truncated) = buf.finish();
        assert!(truncated);
        assert_eq!(text.unwrap(), format!("{}€x", truncation_marker(3)));
    }

    #[test]
    fn invalid_utf8_and_nul_become_replacement_characters() {
        let mut buf = TailBuffer::new(100);
        buf.push(b"a\xffb\0c");
        assert_eq!(buf.finish().0.unwrap(), "a\u{FFFD}b\u{FFFD}c");
    }
}
