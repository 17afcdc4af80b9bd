//! From text to search terms: identifiers split into words (`create_directory`, `get-sum`,
//! `listPullRequests`), common words dropped, English stemming, and the vocabulary's
//! equivalents folded into one term.

use super::vocabulary::{EQUIVALENTS, RELATED};
use crate::FastMap;
use rust_stemmers::{Algorithm, Stemmer};
use std::sync::LazyLock;

/// Words too common to tell tools apart, or that only frame a request ("please can you…").
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "for",
    "from",
    "has",
    "have",
    "he",
    "her",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "just",
    "let",
    "lets",
    "me",
    "my",
    "of",
    "on",
    "or",
    "our",
    "please",
    "she",
    "should",
    "so",
    "some",
    "than",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "to",
    "us",
    "was",
    "we",
    "were",
    "what",
    "whats",
    "when",
    "which",
    "will",
    "with",
    "would",
    "you",
    "your",
    "i'd",
    "want",
    "need",
    "like",
    "using",
    "use",
    "via",
    "one",
    "given",
    "specified",
    "provided",
    "optional",
    "whether",
    "returns",
    "return",
    "e",
    "g",
    "eg",
    "etc",
];

struct Vocabulary {
    stemmer: Stemmer,
    stop: std::collections::HashSet<&'static str>,
    /// Stem → the stem standing for its group.
    canonical: FastMap<String, String>,
    /// Stem → the canonical stems a query also looks for.
    related: FastMap<String, Vec<String>>,
}

static VOCABULARY: LazyLock<Vocabulary> = LazyLock::new(|| {
    let stemmer = Stemmer::create(Algorithm::English);
    let stem = |w: &str| stemmer.stem(w).into_owned();
    let mut canonical = FastMap::default();
    for group in EQUIVALENTS {
        let head = stem(group[0]);
        for word in *group {
            canonical.insert(stem(word), head.clone());
        }
    }
    let fold = |s: String| canonical.get(&s).cloned().unwrap_or(s);
    let mut related: FastMap<String, Vec<String>> = FastMap::default();
    for (word, terms) in RELATED {
        let entry = related.entry(stem(word)).or_default();
        for t in *terms {
            let t = fold(stem(t));
            if !entry.contains(&t) {
                entry.push(t);
            }
        }
    }
    Vocabulary {
        stemmer,
        stop: STOP_WORDS.iter().copied().collect(),
        canonical,
        related,
    }
});

/// The words of `text`, lower case: split at anything not a letter or digit, at a lower to
/// upper case step (`listIssues`) and between letters and digits (`v2`). Digits alone are
/// dropped: an issue number in a request says nothing about which tool to use.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in text.split(|c: char| !c.is_alphanumeric() && c != '\'') {
        let chunk = chunk.trim_matches('\'');
        let mut word = String::new();
        let mut prev: Option<char> = None;
        for c in chunk.chars() {
            let boundary = prev.is_some_and(|p| {
                (p.is_lowercase() && c.is_uppercase())
                    || (p.is_alphabetic() && c.is_numeric())
                    || (p.is_numeric() && c.is_alphabetic())
            });
            if boundary {
                push_word(&mut out, std::mem::take(&mut word));
            }
            word.extend(c.to_lowercase());
            prev = Some(c);
        }
        push_word(&mut out, word);
    }
    out
}

fn push_word(out: &mut Vec<String>, word: String) {
    let word = word.replace('\'', "");
    if !word.is_empty() && !word.chars().all(|c| c.is_numeric()) {
        out.push(word);
    }
}

/// The terms of a document's text: its words, common ones dropped, stemmed and folded.
pub fn terms(text: &str) -> Vec<String> {
    let v = &*VOCABULARY;
    words(text)
        .into_iter()
        .filter(|w| !v.stop.contains(w.as_str()))
        .map(|w| fold(v, &w))
        .collect()
}

/// The terms of a query: those of [`terms`], each followed by its related terms, every term
/// once.
pub fn query_terms(query: &str) -> Vec<String> {
    let v = &*VOCABULARY;
    let mut out: Vec<String> = Vec::new();
    let mut add = |t: &String| {
        if !out.contains(t) {
            out.push(t.clone());
        }
    };
    // A file name (`notes.txt`, `src/main.rs`) in a request is about a file, whatever the
    // words in it say.
    if query.split_whitespace().any(looks_like_file) {
        add(&fold(v, "file"));
    }
    for word in words(query) {
        if v.stop.contains(word.as_str()) {
            continue;
        }
        let stem = v.stemmer.stem(&word).into_owned();
        let term = v.canonical.get(&stem).cloned().unwrap_or(stem.clone());
        add(&term);
        for key in [&stem, &term] {
            for related in v.related.get(key).into_iter().flatten() {
                add(related);
            }
        }
    }
    out
}

/// `notes.txt`, `./a/b.json`: a dot followed by a short extension of letters (and digits).
fn looks_like_file(token: &str) -> bool {
    let token = token.trim_end_matches(['?', '!', ',', ';', ':', ')', '"', '\'']);
    let Some((stem, ext)) = token.rsplit_once('.') else {
        return false;
    };
    !stem.is_empty()
        && (1..=5).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic())
        && !stem.contains("://")
        && !TOP_LEVEL_DOMAINS.contains(&ext.to_ascii_lowercase().as_str())
}

/// What ends a host name far more often than a file name.
const TOP_LEVEL_DOMAINS: &[&str] = &[
    "com", "org", "net", "io", "dev", "ai", "co", "edu", "gov", "app",
];

fn fold(v: &Vocabulary, word: &str) -> String {
    let stem = v.stemmer.stem(word);
    match v.canonical.get(stem.as_ref()) {
        Some(head) => head.clone(),
        None => stem.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(words("create_directory"), ["create", "directory"]);
        assert_eq!(words("get-sum"), ["get", "sum"]);
        assert_eq!(words("listPullRequests"), ["list", "pull", "requests"]);
        assert_eq!(
            words("browser_take_screenshot v2"),
            ["browser", "take", "screenshot", "v"]
        );
        assert_eq!(words("PR 12, what's"), ["pr", "whats"]);
    }

    #[test]
    fn equivalents_fold_on_both_sides() {
        assert_eq!(terms("create_directory"), terms("make folder"));
        assert_eq!(terms("Delete a file"), terms("remove files"));
    }

    #[test]
    fn a_query_looks_for_related_terms_too() {
        let q = query_terms("remember that Alice works at Acme");
        for t in terms("memory entity observation") {
            assert!(q.contains(&t), "{q:?} lacks {t}");
        }
        let q = query_terms("which files did PR 12 change");
        assert!(q.contains(&"pull".to_string()), "{q:?}");
        assert!(query_terms("show me notes.txt").contains(&"file".to_string()));
        assert!(!query_terms("go to example.com").contains(&"file".to_string()));
        assert!(!query_terms("go to example.com/x").contains(&"file".to_string()));
        assert!(!query_terms("the of and").iter().any(|t| t == "the"));
    }
}
