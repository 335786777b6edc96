//! Masking secret values in what runs and deliveries leave behind (output, errors, step
//! outputs, delivery errors), without gaps.
//!
//! A value is looked for as it is, percent-encoded (as a URL carries it), and in base64
//! (standard and URL-safe alphabets, at each of the three alignments a value can have
//! inside a longer base64 text, such as `user:password` in a Basic authorization).
//!
//! Output arrives in pieces: a pipe read, a body chunk. A value split across two pieces
//! is still one value, so [`MaskStream`] holds back the end of a piece while it could be
//! the start of a value, and masks once the rest has come. Output that is masked this way
//! before it is cut (into stored chunks, or into a head and a tail) cannot leave half a
//! value on either side of a cut.

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;

use crate::secrets::MASK;

/// The shortest derived form (encoded, not the value itself) that is looked for: shorter
/// ones would mask ordinary text by chance.
const MIN_DERIVED: usize = 8;

/// The forms of a set of secret values, longest first.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Masker {
    needles: Vec<Vec<u8>>,
    /// Which bytes start a needle, to skip the rest fast.
    starts: Vec<bool>,
    longest: usize,
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values: this may end up in a log.
        write!(f, "Masker({} forms)", self.needles.len())
    }
}

impl Masker {
    /// A masker for `values` (empty ones are ignored).
    pub fn new<S: AsRef<str>>(values: &[S]) -> Masker {
        let mut needles: Vec<Vec<u8>> = Vec::new();
        for value in values.iter().map(AsRef::as_ref).filter(|value| !value.is_empty()) {
            needles.push(value.as_bytes().to_vec());
            let encoded = crate::template::percent_encoded(value);
            if encoded != value {
                needles.push(encoded.into_bytes());
            }
            needles.extend(base64_forms(value.as_bytes()));
        }
        needles.sort_by_key(|needle| std::cmp::Reverse(needle.len()));
        needles.dedup();
        let mut starts = vec![false; 256];
        for needle in &needles {
            starts[usize::from(needle[0])] = true;
        }
        let longest = needles.first().map_or(0, Vec::len);
        Masker {
            needles,
            starts,
            longest,
        }
    }

    /// Whether there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every form of every value replaced by [`MASK`].
    pub fn mask(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_owned();
        }
        let (mut masked, rest) = self.scan(text.as_bytes(), true);
        masked.extend_from_slice(rest);
        // Masking replaces whole (valid) values by ASCII: the text stays valid UTF-8.
        String::from_utf8(masked).unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
    }

    /// The needle matching at the start of `bytes`, if any (longest first).
    fn match_at(&self, bytes: &[u8]) -> Option<usize> {
        self.needles
            .iter()
            .find(|needle| bytes.starts_with(needle))
            .map(Vec::len)
    }

    /// Whether `bytes` (shorter than the longest needle) could be the start of a needle.
    fn could_start(&self, bytes: &[u8]) -> bool {
        self.needles
            .iter()
            .any(|needle| needle.len() > bytes.len() && needle.starts_with(bytes))
    }

    /// Masks `bytes`; unless `at_end`, stops where the rest could still become a value,
    /// returning (masked, held back).
    fn scan<'a>(&self, bytes: &'a [u8], at_end: bool) -> (Vec<u8>, &'a [u8]) {
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if !self.starts[usize::from(bytes[i])] {
                out.push(bytes[i]);
                i += 1;
                continue;
            }
            if let Some(len) = self.match_at(&bytes[i..]) {
                out.extend_from_slice(MASK.as_bytes());
                i += len;
                continue;
            }
            if !at_end && bytes.len() - i < self.longest && self.could_start(&bytes[i..]) {
                return (out, &bytes[i..]);
            }
            out.push(bytes[i]);
            i += 1;
        }
        (out, &[])
    }
}

/// The base64 forms of `value` that do not depend on what surrounds it: for each
/// alignment (0, 1 or 2 bytes before it), the characters made of its bits only.
fn base64_forms(value: &[u8]) -> Vec<Vec<u8>> {
    let mut forms = Vec::new();
    for before in 0..3usize {
        let mut padded = vec![0u8; before];
        padded.extend_from_slice(value);
        let first = (8 * before).div_ceil(6);
        let end = (8 * (before + value.len())) / 6;
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&padded);
            if let Some(core) = encoded.as_bytes().get(first..end) {
                if core.len() >= MIN_DERIVED {
                    forms.push(core.to_vec());
                }
            }
        }
    }
    forms
}

/// Masks a stream of bytes that arrives in pieces: what [`MaskStream::push`] returns is
/// safe to show; the end of a piece that could start a value waits for the next one.
#[derive(Debug, Clone)]
pub struct MaskStream {
    masker: Masker,
    held: Vec<u8>,
}

impl MaskStream {
    /// A stream masked with `masker`.
    pub fn new(masker: Masker) -> MaskStream {
        MaskStream {
            masker,
            held: Vec::new(),
        }
    }

    /// The masked bytes that can be shown once `bytes` arrived.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        if self.masker.is_empty() {
            return bytes.to_vec();
        }
        self.held.extend_from_slice(bytes);
        let held = std::mem::take(&mut self.held);
        let (out, rest) = self.masker.scan(&held, false);
        self.held = rest.to_vec();
        out
    }

    /// What was held back, masked: the stream ended.
    pub fn finish(&mut self) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        let (mut out, rest) = self.masker.scan(&held, true);
        out.extend_from_slice(rest);
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    #[test]
    fn values_and_their_encoded_forms_are_masked() {
        let masker = Masker::new(&["hunter2/s3cret", "T0K", ""]);
        assert_eq!(masker.mask("a T0K b"), "a *** b");
        assert_eq!(masker.mask("url ?p=hunter2%2Fs3cret&x"), "url ?p=***&x");
        let basic = STANDARD.encode("admin:hunter2/s3cret");
        let masked = masker.mask(&format!("Authorization: Basic {basic}"));
        assert!(
            masked.contains(MASK) && !masked.contains(&basic[8..20]),
            "{masked}"
        );
        assert!(masker.mask(&STANDARD.encode("hunter2/s3cret")).starts_with(MASK));
        assert!(!format!("{masker:?}").contains("hunter"));
    }

    #[test]
    fn a_value_split_between_pieces_is_masked() {
        let mut stream = MaskStream::new(Masker::new(&["hunter2"]));
        let mut out = stream.push(b"the password is hun");
        out.extend(stream.push(b"ter2 and hu"));
        out.extend(stream.push(b"nt"));
        out.extend(stream.finish());
        assert_eq!(String::from_utf8(out).unwrap(), "the password is *** and hunt");
        let mut plain = MaskStream::new(Masker::default());
        assert_eq!(plain.push(b"abc"), b"abc");
    }
}
