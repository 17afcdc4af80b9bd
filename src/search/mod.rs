//! Tool search: ranked retrieval over tool definitions. Each tool becomes a [`Doc`] once (its
//! name, title, description, parameters and server, split into words, stemmed, synonyms
//! folded, each field weighted); an [`Index`] over a catalogue's docs answers a query with
//! BM25 over an inverted index, then reorders what matched by how close each tool's meaning
//! is to the query's ([`meaning`]: words alone miss "make a folder" = "create a directory").
//! A leaf: it knows text, not MCP sessions.
//!
//! The scoring is our own rather than the `bm25` crate's `Scorer`: that one gathers every
//! candidate into a hash set and scans each candidate's terms per query term, which measured
//! 5–8 ms a search at 10,000 tools; postings summed into one score per doc take well under
//! a millisecond.

mod meaning;
mod terms;
mod vocabulary;

use meaning::Meaning;
use terms::{query_terms, terms};

use crate::FastMap;
use serde_json::Value;

/// How much a word counts in each field: a tool's name says what it does most directly, its
/// server's name what it does it to; parameter descriptions are long and say the least.
const NAME: f32 = 3.0;
const TITLE: f32 = 2.0;
const SERVER: f32 = 1.5;
const DESCRIPTION: f32 = 1.0;
const PARAMETER: f32 = 1.0;
const PARAMETER_DESCRIPTION: f32 = 0.4;
/// The server's own description of itself (its `instructions`): a little of its topic for
/// every tool, not counted in the tool's length (long instructions must not bury its tools).
const HINT: f32 = 0.2;
/// BM25's term-frequency saturation and length normalisation (the usual values).
const K1: f32 = 1.2;
const B: f32 = 0.75;
/// How much meaning counts against words: a tool's score is its BM25 score over the best
/// one's (so 1 at most) plus this times the cosine of its meaning and the query's. Chosen
/// from 0.3, 0.5 and 0.8 on the benchmark's main and fresh task sets (0.5 and 0.8 tied);
/// never on the held-out set.
const MEANING: f32 = 0.5;
/// How many of the words' best matches meaning reorders.
const RERANKED: usize = 100;

/// The parts of a tool that search reads.
#[derive(Debug, Default)]
pub struct Fields<'a> {
    /// The server's own name for the tool.
    pub name: &'a str,
    pub title: &'a str,
    pub description: &'a str,
    /// Each parameter's name and description.
    pub parameters: Vec<(&'a str, &'a str)>,
    pub server: &'a str,
    pub hint: &'a str,
}

/// One tool as search sees it: its terms with field-weighted counts.
#[derive(Debug, Default, Clone)]
pub struct Doc {
    terms: Vec<(u32, f32)>,
    length: f32,
    /// What its name, title and description say, as a vector.
    meaning: Option<Meaning>,
}

/// A term's number: its hash (a collision between two of a catalogue's few thousand terms
/// would only blur two words, never break a search).
fn term_id(term: &str) -> u32 {
    use std::hash::Hasher;
    // Keyless, so a term has one number in every index of the process.
    let mut h = std::hash::DefaultHasher::new();
    h.write(term.as_bytes());
    let h = h.finish();
    (h ^ (h >> 32)) as u32
}

impl Doc {
    pub fn new(f: &Fields) -> Doc {
        let mut doc = Doc::default();
        doc.add(f.name, NAME, true);
        doc.add(f.title, TITLE, true);
        doc.add(f.server, SERVER, true);
        doc.add(f.description, DESCRIPTION, true);
        for (name, description) in &f.parameters {
            doc.add(name, PARAMETER, true);
            doc.add(description, PARAMETER_DESCRIPTION, true);
        }
        doc.add(f.hint, HINT, false);
        let name = terms::words(f.name).join(" ");
        let said: Vec<&str> = [name.as_str(), f.title, f.description]
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect();
        doc.meaning = Meaning::of(&said.join(". "));
        doc
    }

    /// A tool definition (`name`, `title`, `description`, `inputSchema.properties`) of
    /// server `server`, whose instructions are `hint`. `name` is the server's own name for
    /// the tool (the definition may carry the hub's).
    pub fn of_tool(name: &str, definition: &str, server: &str, hint: &str) -> Doc {
        let tool: Value = serde_json::from_str(definition).unwrap_or(Value::Null);
        fn text(v: Option<&Value>) -> &str {
            v.and_then(Value::as_str).unwrap_or("")
        }
        let title = text(tool.get("title")).to_string();
        let description = text(tool.get("description")).to_string();
        let parameters: Vec<(String, String)> = tool
            .pointer("/inputSchema/properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(k, v)| (k.clone(), text(v.get("description")).to_string()))
                    .collect()
            })
            .unwrap_or_default();
        Doc::new(&Fields {
            name,
            title: &title,
            description: &description,
            parameters: parameters
                .iter()
                .map(|(k, d)| (k.as_str(), d.as_str()))
                .collect(),
            server,
            hint,
        })
    }

    fn add(&mut self, text: &str, weight: f32, counts: bool) {
        for term in terms(text) {
            let id = term_id(&term);
            match self.terms.iter_mut().find(|(t, _)| *t == id) {
                Some((_, tf)) => *tf += weight,
                None => self.terms.push((id, weight)),
            }
            if counts {
                self.length += weight;
            }
        }
    }
}

/// A search over a catalogue's docs, numbered in the order they were given.
pub struct Index {
    /// Term → (doc, its BM25 term weight), docs ascending.
    postings: FastMap<u32, Vec<(u32, f32)>>,
    docs: usize,
    meanings: Vec<Option<Meaning>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Index({} docs, {} terms)",
            self.docs,
            self.postings.len()
        )
    }
}

impl Index {
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a Doc>) -> Index {
        let docs: Vec<&Doc> = docs.into_iter().collect();
        let avgdl = if docs.is_empty() {
            1.0
        } else {
            (docs.iter().map(|d| d.length).sum::<f32>() / docs.len() as f32).max(1.0)
        };
        let mut postings: FastMap<u32, Vec<(u32, f32)>> = FastMap::default();
        for (i, doc) in docs.iter().enumerate() {
            let norm = K1 * (1.0 - B + B * doc.length / avgdl);
            for &(term, tf) in &doc.terms {
                let weight = tf * (K1 + 1.0) / (tf + norm);
                postings.entry(term).or_default().push((i as u32, weight));
            }
        }
        Index {
            postings,
            docs: docs.len(),
            meanings: docs.iter().map(|d| d.meaning.clone()).collect(),
        }
    }

    /// How rare a term held by `df` of the docs is (BM25's idf, never negative).
    fn idf(&self, df: usize) -> f32 {
        let n = self.docs as f32;
        let df = df as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// The most needs one query may name (`a; b; c`).
    pub const MAX_NEEDS: usize = 8;

    /// Like [`Index::search`], for a query that may name several needs separated by `;`
    /// ("list the issues; the comments on an issue"): each is searched on its own, and their
    /// matches taken in turns (each need's best first), so that one need's many matches do
    /// not crowd out another's. At most `limit` matches, or two per need when that is more
    /// (up to `cap`).
    pub fn search_needs(
        &self,
        query: &str,
        limit: usize,
        cap: usize,
        keep: impl Fn(usize) -> bool,
    ) -> Vec<Hit> {
        let needs: Vec<&str> = query
            .split(';')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .take(Self::MAX_NEEDS)
            .collect();
        if needs.len() < 2 {
            return self.search(query, limit, keep);
        }
        let total = limit.max(2 * needs.len()).min(cap.max(limit));
        let per = total.div_ceil(needs.len());
        let found: Vec<Vec<Hit>> = needs.iter().map(|n| self.search(n, per, &keep)).collect();
        let mut out: Vec<Hit> = Vec::with_capacity(total);
        for rank in 0..per {
            for hits in &found {
                if let Some(h) = hits.get(rank)
                    && out.len() < total
                    && !out.iter().any(|o| o.doc == h.doc)
                {
                    out.push(*h);
                }
            }
        }
        out
    }

    /// The docs that match `query`, best first (ties in catalogue order), those `keep`
    /// refuses left out, at most `limit`.
    pub fn search(&self, query: &str, limit: usize, keep: impl Fn(usize) -> bool) -> Vec<Hit> {
        // One slot per doc, and the docs touched: at 10,000 tools a common word's postings
        // are thousands long, and adding into a plain array beats a map.
        let mut scores = vec![0f32; self.docs];
        let mut touched: Vec<u32> = Vec::new();
        for (term, boost) in query_terms(query) {
            let Some(list) = self.postings.get(&term_id(&term)) else {
                continue;
            };
            let idf = self.idf(list.len()) * boost;
            for &(doc, weight) in list {
                let slot = &mut scores[doc as usize];
                if *slot == 0.0 {
                    touched.push(doc);
                }
                *slot += idf * weight;
            }
        }
        let mut hits: Vec<Hit> = touched
            .into_iter()
            .map(|doc| Hit {
                doc: doc as usize,
                score: scores[doc as usize],
            })
            .filter(|h| keep(h.doc))
            .collect();
        let by_rank = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
        let keep_best = |hits: &mut Vec<Hit>, n: usize| {
            if hits.len() > n && n > 0 {
                hits.select_nth_unstable_by(n - 1, by_rank);
                hits.truncate(n);
            }
        };
        // Meaning reorders what the words found, never adds to it: alone it would answer any
        // query, "zebra" too, with whatever happens to be closest. Only the words' best
        // RERANKED are reordered: at 10,000 tools a common word matches thousands, and a
        // tool the words rank that low is rarely what was meant.
        if let Some(query) = Meaning::of(query) {
            keep_best(&mut hits, RERANKED.max(limit));
            let best = hits
                .iter()
                .map(|h| h.score)
                .fold(f32::MIN_POSITIVE, f32::max);
            for hit in &mut hits {
                let close = self.meanings[hit.doc]
                    .as_ref()
                    .map_or(0.0, |m| m.similarity(&query));
                hit.score = hit.score / best + MEANING * close;
            }
        }
        keep_best(&mut hits, limit);
        hits.sort_by(by_rank);
        hits.truncate(limit);
        hits
    }
}

/// A doc that matched, with its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub doc: usize,
    pub score: f32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str, server: &str) -> Doc {
        Doc::new(&Fields {
            name,
            description,
            server,
            ..Fields::default()
        })
    }

    #[test]
    fn the_tool_that_does_it_ranks_first_whatever_the_words() {
        let docs = [
            tool("read_file", "Read the complete contents of a file", "fs"),
            tool(
                "create_directory",
                "Create a new directory or ensure it exists",
                "fs",
            ),
            tool(
                "list_directory",
                "List the files and directories in a path",
                "fs",
            ),
            tool(
                "create_entities",
                "Create entities in the knowledge graph",
                "memory",
            ),
            tool(
                "add_observations",
                "Add observations to existing entities",
                "memory",
            ),
            tool(
                "get_pull_request_files",
                "Get the files changed in a pull request",
                "github",
            ),
        ];
        let index = Index::new(&docs);
        let top = |q: &str| index.search(q, 3, |_| true).first().map(|h| h.doc);
        assert_eq!(top("make a new folder called reports"), Some(1));
        assert_eq!(top("which files did PR 12 change"), Some(5));
        assert_eq!(top("show me what's in notes.txt"), Some(0));
        assert!(matches!(
            top("remember that Alice works at Acme"),
            Some(3 | 4)
        ));
        assert!(index.search("zebra", 3, |_| true).is_empty());
        assert!(
            index
                .search("folder", 3, |d| d != 1)
                .iter()
                .all(|h| h.doc != 1)
        );
    }

    #[test]
    fn several_needs_each_get_their_best_matches_in_turns() {
        let mut docs: Vec<Doc> = (0..6)
            .map(|i| {
                tool(
                    &format!("list_issues_{i}"),
                    "List the issues of a project",
                    "tracker",
                )
            })
            .collect();
        docs.push(tool(
            "list_comments",
            "List the comments on an issue",
            "tracker",
        ));
        docs.push(tool("get_users", "List the users of the workspace", "chat"));
        let index = Index::new(&docs);
        let best = |q: &str| index.search(q, 1, |_| true)[0].doc;
        let needs = index.search_needs("issues of a project; comments; users", 5, 50, |_| true);
        let found: Vec<usize> = needs.iter().map(|h| h.doc).collect();
        // Each need's best first, in the order named; then the next of each: two per need
        // (here only the first need has a second match).
        assert_eq!(
            found[..3],
            [best("issues of a project"), best("comments"), best("users")]
        );
        assert_eq!(found.len(), 4, "{found:?}");
        let mut unique = found.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), found.len(), "no tool twice: {found:?}");
        // Never past the cap; `keep` holds for every need.
        assert!(
            index
                .search_needs("issues; comments; users", 5, 4, |_| true)
                .len()
                <= 5
        );
        assert!(
            index
                .search_needs("issues; comments", 5, 50, |d| d != 6)
                .iter()
                .all(|h| h.doc != 6)
        );
        // No `;`: exactly the plain search.
        let plain = index.search("list issues", 5, |_| true);
        assert_eq!(index.search_needs("list issues", 5, 50, |_| true), plain);
    }

    #[test]
    fn a_definition_is_read_from_its_json() {
        let doc = Doc::of_tool(
            "query",
            r#"{"name":"pg:query","description":"Run a read-only SQL query","inputSchema":{"properties":{"sql":{"type":"string","description":"The SELECT statement"}}}}"#,
            "postgres",
            "",
        );
        let index = Index::new([&doc, &tool("echo", "Echo the message back", "fx")]);
        assert_eq!(
            index.search("select rows from a table", 1, |_| true)[0].doc,
            0
        );
    }
}
