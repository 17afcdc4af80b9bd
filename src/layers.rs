//! The layer rule of `lib.rs`, checked: each module imports only the modules listed above
//! it there. A `crate::NAME` path in code that names a module listed below the file's own
//! fails the test with the file, the line and the name, so an upward import cannot land
//! unnoticed.

use std::path::{Path, PathBuf};

/// The modules in the order of `lib.rs`'s list, lowest layer first.
fn layer_order(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| l.strip_prefix("// - [`"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first segments of the `crate::` paths in `code` (a group `crate::{a::X, b}` gives
/// `a` and `b`), each with its line number.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut line = 1;
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        line += rest[..at].matches('\n').count();
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && !c.is_whitespace() => {
                        start = false;
                        found.push((line, ident(&group[i..]).to_string()));
                    }
                    _ => {}
                }
            }
        } else {
            found.push((line, ident(rest).to_string()));
        }
    }
    found
}

/// Code without `//` comments (doc comments name other layers freely).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every import against the order: (file, line, its layer, the layer it names).
fn violations(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let order = layer_order(&lib);
    let rank = |name: &str| order.iter().position(|m| m == name);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut found = Vec::new();
    for file in files {
        let Ok(rel) = file.strip_prefix(src) else {
            continue;
        };
        let top = rel
            .components()
            .next()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_string()
            })
            .unwrap_or_default();
        let Some(own) = rank(&top) else { continue };
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (line, name) in crate_paths(&without_comments(&text)) {
            if rank(&name).is_some_and(|r| r > own) {
                found.push(format!(
                    "src/{}:{line}: `{top}` imports `{name}`, a layer above it in lib.rs",
                    rel.display()
                ));
            }
        }
    }
    found
}

#[test]
fn no_module_imports_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    assert!(layer_order(&lib).len() > 10, "src/lib.rs lists the layers");
    let found = violations(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The layers are declared inside a macro, where rustfmt does not look: each needs its
/// never-compiled `mod` line too, or `cargo fmt` silently skips its files.
#[test]
fn rustfmt_is_shown_every_layer() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .unwrap_or_default();
    let missing: Vec<String> = layer_order(&lib)
        .into_iter()
        .filter(|name| name != "embed")
        .filter(|name| !lib.contains(&format!("#[cfg(any())]\nmod {name};")))
        .collect();
    assert!(
        missing.is_empty(),
        "add `#[cfg(any())] mod NAME;` to lib.rs for: {missing:?}"
    );
}

#[test]
fn the_check_reads_paths_groups_and_skips_comments() {
    let code =
        "use crate::hub::X;\n// crate::cli in a comment\nlet a = crate::{policy::Y, face};\n";
    let found = crate_paths(&without_comments(code));
    assert_eq!(
        found,
        [
            (1, "hub".to_string()),
            (3, "policy".to_string()),
            (3, "face".to_string())
        ]
    );
}
