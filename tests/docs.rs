//! The documentation's links: every relative link in README.md and `docs/*.md` must lead to a
//! file that exists and, with a `#anchor`, to a heading of that file under GitHub's slug
//! rules — so a section that moves or is renamed cannot leave a dead link behind.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// README.md and every `docs/*.md`, relative to `root`.
pub(crate) fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| PathBuf::from("docs").join(e.file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    found.extend(docs);
    found
}

/// The lines of `text` outside fenced code blocks, with their numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((i + 1, line));
        }
    }
    lines
}

/// `line` without its inline code spans (a `](x)` inside one is not a link).
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join(" ")
}

/// The targets of the links in `text` (`[text](target)` and `[label]: target`), each with
/// its line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in prose_lines(text) {
        let line = without_code(line);
        if let Some(rest) = line.trim_start().strip_prefix('[')
            && let Some((_, target)) = rest.split_once("]: ")
        {
            found.push((n, target.trim().to_string()));
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            // `(path "title")`: the title is not part of the target.
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            found.push((n, target.trim_matches(['<', '>']).to_string()));
            rest = &rest[end..];
        }
    }
    found
}

/// GitHub's anchor for a heading: its text as rendered (code spans, emphasis and link
/// syntax gone), lower-cased, with everything but letters, digits, `-`, `_` and spaces
/// dropped and spaces turned into `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](url)` renders as `text`.
    while let Some(open) = rest.find('[') {
        match rest[open..].find("](") {
            Some(mid) => {
                let close = rest[open + mid..]
                    .find(')')
                    .map_or(rest.len(), |c| open + mid + c);
                text.push_str(&rest[..open]);
                text.push_str(&rest[open + 1..open + mid]);
                rest = &rest[(close + 1).min(rest.len())..];
            }
            None => break,
        }
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of `text`'s headings; a repeated slug gets `-1`, `-2`… as on GitHub.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let n = seen.entry(base.clone()).or_insert(0);
        found.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    found
}

/// `path` with `.` and `..` resolved lexically (the file need not exist).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Every broken relative link of the documents under `root`, as `file:line: target: why`.
fn broken_links(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for doc in documents(root) {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        for (line, target) in links(&text) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.clone()
            } else {
                normal(&doc.parent().unwrap_or(Path::new("")).join(file))
            };
            let at = format!("{}:{line}: {target}", doc.display());
            if !root.join(&path).exists() {
                problems.push(format!("{at}: {} does not exist", path.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if path.extension().is_none_or(|e| e != "md") {
                problems.push(format!("{at}: an anchor into a file that is not Markdown"));
                continue;
            }
            let target_text = std::fs::read_to_string(root.join(&path)).unwrap();
            if !anchors(&target_text).contains(anchor) {
                problems.push(format!(
                    "{at}: {} has no heading with the anchor #{anchor}",
                    path.display()
                ));
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = documents(root);
    assert!(
        docs.len() > 1,
        "no docs/*.md found beside README.md: {docs:?}"
    );
    let problems = broken_links(root);
    assert!(
        problems.is_empty(),
        "{} broken link(s):\n- {}",
        problems.len(),
        problems.join("\n- ")
    );
}

/// The checker itself: a missing file, a missing anchor and a link in code are told apart
/// from good links, and slugs follow GitHub's rules.
#[test]
fn the_link_check_finds_broken_links() {
    assert_eq!(
        slug("One hub for every window: `openpact connect`"),
        "one-hub-for-every-window-openpact-connect"
    );
    assert_eq!(
        slug("Permissions, cache, rate limits, secrets, audit"),
        "permissions-cache-rate-limits-secrets-audit"
    );
    assert_eq!(slug("A call's path"), "a-calls-path");
    assert_eq!(
        slug("See [the sandbox](docs/sandbox.md)"),
        "see-the-sandbox"
    );
    assert_eq!(
        anchors("# A\n## A\n```\n# not a heading\n```\n## B\n"),
        BTreeSet::from(["a".into(), "a-1".into(), "b".into()])
    );
    let sc = crate::support::Scratch::new();
    let root = sc.path();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Top\n\n## Two words\n\nGood: [a](docs/x.md#deep-part), [b](#two-words), \
         [c](https://example.com/missing), `[d](missing.md)`.\n\
         Bad: [e](docs/gone.md), [f](docs/x.md#nowhere), [g](#top-1).\n\
         ```\n[h](missing-too.md)\n```\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/x.md"),
        "# X\n\n## Deep part\n\n[back](../README.md#top), [up](../nothing.md)\n",
    )
    .unwrap();
    let problems = broken_links(root);
    let wanted = [
        "README.md:6: docs/gone.md",
        "README.md:6: docs/x.md#nowhere",
        "README.md:6: #top-1",
        "docs/x.md:5: ../nothing.md",
    ];
    assert_eq!(problems.len(), 4, "{problems:#?}");
    for (problem, want) in problems.iter().zip(wanted) {
        assert!(problem.starts_with(want), "{problem} (wanted {want})");
    }
}
