//! Script names and the metadata a script declares in its leading `# @key: value` comments.
//!
//! A name is a bare file name in the scripts folder: `weather` or `weather.star`. Anything
//! that looks like a path is refused here, before the path is even built, so a name can never
//! reach outside the folder (containment is checked again by [`crate::builtins::paths`]).

use std::collections::BTreeMap;

/// The extension every script file has.
pub const EXT: &str = ".star";

/// Longest accepted name, so names stay readable in listings and messages.
const MAX_NAME: usize = 128;

/// `weather` or `weather.star` → `weather.star`; paths, `..`, hidden files and odd
/// characters are refused with a message that says what a name looks like.
pub fn file_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("name is required".into());
    }
    let stem = name.strip_suffix(EXT).unwrap_or(name);
    let ok = !stem.is_empty()
        && name.len() <= MAX_NAME
        && !stem.starts_with('.')
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !ok {
        return Err(format!(
            "invalid script name '{name}': give the name of a script in the scripts folder, \
             like weather or weather.star (letters, digits, '_', '-', '.'; no paths)"
        ));
    }
    Ok(format!("{stem}{EXT}"))
}

/// `weather.star` → `weather`.
pub fn bare(file: &str) -> &str {
    file.strip_suffix(EXT).unwrap_or(file)
}

/// What a script says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Every `# @key: value` of the leading comment block (a later key wins).
    pub fields: BTreeMap<String, String>,
    /// The secrets named on the first `# @secrets: A, B` line anywhere in the file.
    pub required_secrets: Vec<String>,
}

impl Metadata {
    pub fn description(&self) -> String {
        self.fields.get("description").cloned().unwrap_or_default()
    }
}

/// `@key: value` inside one comment line, if it is one.
fn tag(line: &str) -> Option<(&str, &str)> {
    let body = line
        .trim()
        .strip_prefix('#')?
        .trim_start_matches('#')
        .trim();
    let (key, value) = body.strip_prefix('@')?.split_once(':')?;
    let key = key.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return None;
    }
    Some((key, value.trim()))
}

/// Reads the leading comment block (blank lines inside it are allowed; the first line of
/// code ends it) and the first `@secrets` line anywhere.
pub fn parse(source: &str) -> Metadata {
    let mut fields = BTreeMap::new();
    for line in source.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if !t.starts_with('#') {
            break;
        }
        if let Some((k, v)) = tag(t) {
            fields.insert(k.to_string(), v.to_string());
        }
    }
    let required_secrets = source
        .lines()
        .filter_map(tag)
        .find(|(k, _)| *k == "secrets")
        .map(|(_, v)| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Metadata {
        fields,
        required_secrets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_names_only() {
        assert_eq!(file_name("weather").unwrap(), "weather.star");
        assert_eq!(file_name("weather.star").unwrap(), "weather.star");
        assert_eq!(file_name(" my-script_2 ").unwrap(), "my-script_2.star");
        assert_eq!(file_name("v1.2").unwrap(), "v1.2.star");
        assert_eq!(file_name(""), Err("name is required".into()));
        for bad in [
            "../x",
            "..",
            ".star",
            "a/b",
            "/etc/passwd",
            "a\\b",
            ".hidden",
            "x y",
            "x\0",
            "~root",
        ] {
            let e = file_name(bad).unwrap_err();
            assert!(e.starts_with("invalid script name"), "{bad}: {e}");
        }
        assert!(file_name(&"a".repeat(200)).is_err());
        assert_eq!(bare("weather.star"), "weather");
    }

    #[test]
    fn metadata_comes_from_the_leading_comments() {
        let src = "#!/usr/bin/env starlark\n# @description: Weather for a city\n#\n# @author:  me \n\n# @secrets: API_KEY, OTHER ,\n# not a tag: x\n\nx = 1\n# @late: ignored\n";
        let m = parse(src);
        assert_eq!(m.description(), "Weather for a city");
        assert_eq!(m.fields.get("author").map(String::as_str), Some("me"));
        assert_eq!(m.fields.get("late"), None);
        assert_eq!(m.required_secrets, vec!["API_KEY", "OTHER"]);
        // `@secrets` counts anywhere in the file; only the first line is read.
        let m = parse("x = 1\n# @secrets: A\n# @secrets: B\n");
        assert_eq!(m.required_secrets, vec!["A"]);
        assert!(m.fields.is_empty());
        assert_eq!(parse("").description(), "");
    }
}
