//! What a text means, as a vector: static token embeddings shipped in the binary
//! (`wordllama/tokens.bin`, made by `wordllama/convert.py` from WordLlama's `l2_supercat`
//! model, MIT) pooled over the text's tokens. Two texts about the same thing in different
//! words ("make a new folder", "Create a new directory") point the same way, which word
//! matching alone cannot see. Nothing is downloaded: the 3.8 MB of tokens, merges and int8
//! weights are part of the program.

use crate::FastMap;
use std::sync::LazyLock;

static DATA: &[u8] = include_bytes!("wordllama/tokens.bin");

/// Longer words are left out of a text's meaning (bytes).
const LONGEST_WORD: usize = 64;

/// A text's meaning: the mean of its tokens' vectors, unit length.
#[derive(Debug, Clone, PartialEq)]
pub struct Meaning(Box<[f32]>);

impl Meaning {
    /// `text`'s meaning, or `None` when no token of it is known (or the model could not be
    /// read, which a test rules out for the shipped file).
    pub fn of(text: &str) -> Option<Meaning> {
        MODEL.as_ref()?.embed(text)
    }

    /// How alike two meanings are: the cosine, from -1 to 1.
    pub fn similarity(&self, other: &Meaning) -> f32 {
        self.0.iter().zip(other.0.iter()).map(|(a, b)| a * b).sum()
    }
}

/// The embedded model, read once, when a search first needs it: until then its 3.8 MB stay
/// on disk, not in the hub's memory (a hub whose views do not search never reads it).
static MODEL: LazyLock<Option<Model>> = LazyLock::new(|| match Model::read(DATA) {
    Ok(model) => {
        tracing::debug!("tool search: the embedded model is read");
        Some(model)
    }
    Err(e) => {
        tracing::warn!("tool search works on words alone: the embedded model is unreadable: {e}");
        None
    }
});

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unreadable(&'static str);

/// Tokens, the BPE merges between them and their int8 vectors.
struct Model {
    /// Token text (a leading space marks a word's start) → token.
    tokens: FastMap<&'static str, u16>,
    /// (left, right) → (the merge's rank, lower first; the merged token).
    merges: FastMap<(u16, u16), (u32, u16)>,
    scales: Vec<f32>,
    weights: &'static [u8],
    dims: usize,
}

/// Reads little-endian fields from the front of a byte slice.
struct Reader(&'static [u8]);

impl Reader {
    fn take(&mut self, n: usize) -> Result<&'static [u8], Unreadable> {
        if self.0.len() < n {
            return Err(Unreadable("the file ends early"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u16(&mut self) -> Result<u16, Unreadable> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, Unreadable> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

impl Model {
    fn read(data: &'static [u8]) -> Result<Model, Unreadable> {
        let mut r = Reader(data);
        if r.take(4)? != b"OPWL" {
            return Err(Unreadable("not a token file"));
        }
        let count = r.u32()? as usize;
        let dims = r.u32()? as usize;
        let merge_count = r.u32()? as usize;
        if count > usize::from(u16::MAX) + 1 || dims == 0 {
            return Err(Unreadable("implausible sizes"));
        }
        let mut tokens = FastMap::default();
        for id in 0..count {
            let len = usize::from(r.take(1)?[0]);
            let text =
                std::str::from_utf8(r.take(len)?).map_err(|_| Unreadable("a token is not text"))?;
            // `count` fits in u16 (checked above).
            tokens.insert(text, id as u16);
        }
        let mut merges = FastMap::default();
        for rank in 0..merge_count {
            let (left, right, merged) = (r.u16()?, r.u16()?, r.u16()?);
            if usize::from(left.max(right).max(merged)) >= count {
                return Err(Unreadable("a merge names a token that does not exist"));
            }
            merges.insert((left, right), (rank as u32, merged));
        }
        let scales = r
            .take(count * 4)?
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let weights = r.take(count * dims)?;
        Ok(Model {
            tokens,
            merges,
            scales,
            weights,
            dims,
        })
    }

    fn embed(&self, text: &str) -> Option<Meaning> {
        let mut sum = vec![0f32; self.dims];
        let mut n = 0usize;
        let mut word = String::new();
        // The model knows ASCII only: anything else separates words.
        for w in text.split(|c: char| !c.is_ascii() || c.is_ascii_whitespace()) {
            // Merging is quadratic in a word's length, and a word this long is a URL, a hash
            // or data, not meaning: a server's 1 MB token must not stall the index.
            if w.is_empty() || w.len() > LONGEST_WORD {
                continue;
            }
            word.clear();
            word.push(' ');
            word.push_str(w);
            for token in self.tokenize(&word) {
                let t = usize::from(token);
                let scale = self.scales[t];
                let row = &self.weights[t * self.dims..(t + 1) * self.dims];
                for (s, &q) in sum.iter_mut().zip(row) {
                    *s += f32::from(q as i8) * scale;
                }
                n += 1;
            }
        }
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n == 0 || norm == 0.0 {
            return None;
        }
        Some(Meaning(sum.iter().map(|x| x / norm).collect()))
    }

    /// A word's tokens by byte-pair encoding: from single characters, merge the adjacent
    /// pair whose merge ranks first until none can be merged (what the model was trained
    /// on). Characters the model lacks are left out.
    fn tokenize(&self, word: &str) -> Vec<u16> {
        let mut parts: Vec<u16> = word
            .char_indices()
            .filter_map(|(i, c)| self.tokens.get(&word[i..i + c.len_utf8()]).copied())
            .collect();
        loop {
            let best = parts
                .windows(2)
                .enumerate()
                .filter_map(|(i, pair)| self.merges.get(&(pair[0], pair[1])).map(|m| (m, i)))
                .min();
            let Some((&(_, merged), i)) = best else {
                return parts;
            };
            parts[i] = merged;
            parts.remove(i + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> &'static Model {
        MODEL.as_ref().expect("the shipped model reads")
    }

    fn text(tokens: &[u16]) -> Vec<&'static str> {
        let by_id: FastMap<u16, &str> = model().tokens.iter().map(|(t, i)| (*i, *t)).collect();
        tokens.iter().map(|t| by_id[t]).collect()
    }

    #[test]
    fn words_become_the_models_tokens() {
        let m = model();
        assert_eq!(m.dims, 128);
        assert_eq!(text(&m.tokenize(" create")), [" create"]);
        assert_eq!(text(&m.tokenize(" assignee")), [" ass", "igne", "e"]);
        assert_eq!(text(&m.tokenize(" Markdown")), [" Mark", "down"]);
        assert!(m.tokenize("").is_empty());
    }

    #[test]
    fn texts_about_the_same_thing_are_alike() {
        let m = |t: &str| Meaning::of(t).expect("known words");
        let folder = m("make a new folder called reports");
        let mkdir = m("create directory. Create a new directory or ensure it exists");
        let weather = m("get forecast. The weather forecast for a city");
        assert!(folder.similarity(&mkdir) > folder.similarity(&weather) + 0.05);
        assert!((folder.similarity(&folder) - 1.0).abs() < 1e-4);
        assert_eq!(Meaning::of("   "), None);
        let start = std::time::Instant::now();
        let blob = "a".repeat(1 << 20);
        assert_eq!(Meaning::of(&blob), None);
        assert_eq!(
            Meaning::of(&format!("{blob} folder")),
            Meaning::of("folder")
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(Meaning::of("日本語"), None);
    }

    #[test]
    fn a_damaged_file_is_refused_not_trusted() {
        assert!(Model::read(b"OPWL").is_err());
        assert!(Model::read(b"XXXX\0\0\0\0\0\0\0\0\0\0\0\0").is_err());
        let cut: &'static [u8] = &DATA[..DATA.len() - 1];
        assert!(Model::read(cut).is_err());
    }
}
