//! Variable expansion in server string fields: `${VAR}`, `${VAR:-default}`, `${env:VAR}`, `$$`.

/// A fault in one string; the caller adds the file and JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ExpandError {
    /// `reference` is the name as written (`${GITHUB_TOKEN}` or `${env:GITHUB_TOKEN}`).
    Unset {
        reference: String,
        fix: String,
    },
    Input {
        reference: String,
    },
    Unsupported {
        reference: String,
    },
    BadName {
        reference: String,
    },
    Unterminated,
}

impl ExpandError {
    pub(crate) fn message(&self) -> String {
        match self {
            Self::Unset { reference, fix } => {
                format!("{reference} is not set; export it or use {fix}")
            }
            Self::Input { reference } => format!(
                "{reference}: input variables are not supported; use ${{VAR}} and export VAR instead"
            ),
            Self::Unsupported { reference } => format!(
                "{reference} is not supported; use ${{VAR}}, ${{VAR:-default}} or ${{env:VAR}}"
            ),
            Self::BadName { reference } => format!(
                "{reference} is not a valid variable reference; names use letters, digits and `_` \
                 (write `$$` for a literal `$`)"
            ),
            Self::Unterminated => {
                "unterminated `${`; close it with `}` or write `$$` for a literal `$`".to_string()
            }
        }
    }
}

/// What to do with `${VAR}` when VAR is unset and there is no default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unset {
    Fail,
    /// Disabled servers are often disabled precisely because their secrets are not
    /// around, so their unset references are left as written instead of failing.
    KeepAsWritten,
}

impl Unset {
    /// The rule for a server entry: fail, unless the server is disabled.
    pub(crate) fn for_server(disabled: bool) -> Unset {
        if disabled {
            Unset::KeepAsWritten
        } else {
            Unset::Fail
        }
    }
}

/// Expands `text`, appending every (name, value) taken from `env` to `injected`
/// (deduplicated; empty values are skipped since there is nothing to redact).
pub(crate) fn expand(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    unset: Unset,
    injected: &mut Vec<(String, String)>,
) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    expand_into(text, env, unset, injected, &mut out)?;
    Ok(out)
}

fn expand_into(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    unset: Unset,
    injected: &mut Vec<(String, String)>,
    out: &mut String,
) -> Result<(), ExpandError> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut literal_start = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        match bytes.get(i + 1) {
            Some(b'$') => {
                out.push_str(&text[literal_start..i]);
                out.push('$');
                i += 2;
                literal_start = i;
            }
            Some(b'{') => {
                out.push_str(&text[literal_start..i]);
                let end = closing_brace(bytes, i + 2).ok_or(ExpandError::Unterminated)?;
                reference(&text[i + 2..end], &text[i..=end], env, unset, injected, out)?;
                i = end + 1;
                literal_start = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[literal_start..]);
    Ok(())
}

/// Index of the `}` closing a reference whose body starts at `from`; nested `${…}`
/// (in defaults) and `$$` are skipped so `${A:-${B}}` and `${A:-$$}` work.
fn closing_brace(bytes: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut j = from;
    while j < bytes.len() {
        match (bytes[j], bytes.get(j + 1)) {
            (b'$', Some(b'$')) => j += 2,
            (b'$', Some(b'{')) => {
                depth += 1;
                j += 2;
            }
            (b'}', _) if depth == 0 => return Some(j),
            (b'}', _) => {
                depth -= 1;
                j += 1;
            }
            _ => j += 1,
        }
    }
    None
}

fn reference(
    inner: &str,
    whole: &str,
    env: &dyn Fn(&str) -> Option<String>,
    unset: Unset,
    injected: &mut Vec<(String, String)>,
    out: &mut String,
) -> Result<(), ExpandError> {
    if inner.starts_with("input:") {
        return Err(ExpandError::Input {
            reference: whole.to_string(),
        });
    }
    let (body, prefix) = match inner.strip_prefix("env:") {
        Some(rest) => (rest, "env:"),
        None => (inner, ""),
    };
    let (name, default) = match body.find(":-") {
        Some(k) => (&body[..k], Some(&body[k + 2..])),
        None => (body, None),
    };
    if !valid_name(name) {
        return Err(if name.contains(':') {
            ExpandError::Unsupported {
                reference: whole.to_string(),
            }
        } else {
            ExpandError::BadName {
                reference: whole.to_string(),
            }
        });
    }
    match (env(name), default) {
        (Some(value), _) if !value.is_empty() => {
            out.push_str(&value);
            if !injected.iter().any(|(n, v)| n == name && *v == value) {
                injected.push((name.to_string(), value));
            }
        }
        (_, Some(default)) => expand_into(default, env, unset, injected, out)?,
        // Like the shell, a set-but-empty variable without a default is just empty.
        (Some(_), None) => {}
        (None, None) => match unset {
            Unset::KeepAsWritten => out.push_str(whole),
            Unset::Fail => {
                return Err(ExpandError::Unset {
                    reference: format!("${{{prefix}{name}}}"),
                    fix: format!("${{{prefix}{name}:-}}"),
                });
            }
        },
    }
    Ok(())
}

/// Whether an `env` value or a header, as a person or another host's config gives it, is a
/// credential that must not be written into the config in clear: by its name (as
/// [`looks_secret`], or holding `KEY`; a header's dashes read as underscores) or by its
/// value's shape (a GitHub, OpenAI-style, Slack, GitLab or Google token, an AWS key id, a
/// bearer, basic or token credential). `add` and `import` both go by it.
/// A `${VAR}` reference is never one.
pub fn secret_entry(name: &str, value: &str) -> bool {
    const SHAPES: &[&str] = &[
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "sk-",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "xapp-",
        "glpat-",
        "AKIA",
        "AIza",
        "Bearer ",
        "bearer ",
        "Basic ",
        "basic ",
        "Token ",
    ];
    if value.is_empty() || (value.starts_with("${") && value.ends_with('}')) {
        return false;
    }
    let name = name.replace('-', "_");
    looks_secret(&name)
        || name.to_ascii_uppercase().contains("KEY")
        || SHAPES.iter().any(|p| value.starts_with(p))
}

/// Whether a variable's name says it holds a credential. Such variables reach a confined
/// server only through its entry's `env` or by exact name in `sandbox.env`, never through a
/// glob or the base set; expanded into a command line, they are warned about.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const INSIDE: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "PRIVATE",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "AUTH",
        "COOKIE",
        "SESSION",
    ];
    const ENDS: &[&str] = &["_KEY", "_PAT", "_PASS", "_PWD", "_DSN", "DATABASE_URL"];
    const STARTS: &[&str] = &[
        "AWS_",
        "AZURE_",
        "GCP_",
        "GCLOUD_",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "VAULT_",
        "KUBECONFIG",
        "SSH_AUTH_SOCK",
        "SSH_AGENT",
        "GPG_AGENT",
        "DBUS_SESSION",
    ];
    INSIDE.iter().any(|w| upper.contains(w))
        || ENDS.iter().any(|w| upper.ends_with(w))
        || STARTS.iter().any(|w| upper.starts_with(w))
}

/// The variable `text` takes its value from first (`${env:TOKEN:-x}` → `TOKEN`): the one
/// advice tells the user to set.
pub(crate) fn first_variable(text: &str) -> Option<&str> {
    let body = &text[text.find("${")? + 2..];
    let body = body.strip_prefix("env:").unwrap_or(body);
    let end = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    Some(&body[..end]).filter(|name| valid_name(name))
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_entries_by_name_and_by_shape() {
        assert!(secret_entry("GITHUB_TOKEN", "x"));
        assert!(secret_entry("Authorization", "anything"));
        assert!(secret_entry("X-API-Key", "abc"));
        assert!(secret_entry("NOTE", "ghp_0123456789abcdef"));
        assert!(secret_entry("KEYLESS", "sk-proj-abc"));
        assert!(secret_entry("X-Custom", "Bearer abc"));
        assert!(!secret_entry("LOG_LEVEL", "debug"));
        assert!(!secret_entry("GITHUB_TOKEN", "${GITHUB_TOKEN}"));
    }
    use crate::config::tests::env_of;

    fn run(
        text: &str,
        pairs: &[(&str, &str)],
    ) -> Result<(String, Vec<(String, String)>), ExpandError> {
        let env = env_of(pairs);
        let mut injected = Vec::new();
        let out = expand(text, &env, Unset::Fail, &mut injected)?;
        Ok((out, injected))
    }

    #[test]
    fn plain_and_env_forms() {
        let (out, inj) = run("a ${X} b ${env:Y} c", &[("X", "1"), ("Y", "2")]).unwrap();
        assert_eq!(out, "a 1 b 2 c");
        assert_eq!(
            inj,
            vec![("X".into(), "1".into()), ("Y".into(), "2".into())]
        );
    }

    #[test]
    fn defaults_apply_when_unset_or_empty() {
        let (out, inj) = run("${A:-x}|${B:-y}|${env:C:-z}|${D:-}", &[("B", "")]).unwrap();
        assert_eq!(out, "x|y|z|");
        assert!(inj.is_empty(), "defaults are not injected secrets: {inj:?}");
        let (out, _) = run("${A:-x}", &[("A", "set")]).unwrap();
        assert_eq!(out, "set");
    }

    #[test]
    fn set_but_empty_without_default_is_empty() {
        let (out, inj) = run("[${E}]", &[("E", "")]).unwrap();
        assert_eq!(out, "[]");
        assert!(inj.is_empty());
    }

    #[test]
    fn nested_default_is_expanded() {
        let (out, inj) = run("${A:-${B}/x}", &[("B", "b")]).unwrap();
        assert_eq!(out, "b/x");
        assert_eq!(inj, vec![("B".into(), "b".into())]);
    }

    #[test]
    fn dollar_escapes_and_lone_dollars() {
        let (out, _) = run("$$HOME $$${X} a$b $ end$", &[("X", "v")]).unwrap();
        assert_eq!(out, "$HOME $v a$b $ end$");
        let (out, _) = run("${A:-$$}", &[]).unwrap();
        assert_eq!(out, "$");
    }

    #[test]
    fn unset_is_an_error_with_the_fix() {
        let err = run("--token=${GITHUB_TOKEN}", &[]).unwrap_err();
        assert_eq!(
            err.message(),
            "${GITHUB_TOKEN} is not set; export it or use ${GITHUB_TOKEN:-}"
        );
        let err = run("${env:TOK}", &[]).unwrap_err();
        assert_eq!(
            err.message(),
            "${env:TOK} is not set; export it or use ${env:TOK:-}"
        );
    }

    #[test]
    fn unset_kept_as_written_when_lenient() {
        let env = env_of(&[]);
        let mut inj = Vec::new();
        let out = expand("x ${T} y", &env, Unset::KeepAsWritten, &mut inj).unwrap();
        assert_eq!(out, "x ${T} y");
    }

    #[test]
    fn input_unterminated_and_bad_names() {
        assert!(matches!(
            run("${input:key}", &[]),
            Err(ExpandError::Input { .. })
        ));
        assert!(
            run("${input:key}", &[])
                .unwrap_err()
                .message()
                .contains("not supported")
        );
        assert_eq!(run("a ${X", &[("X", "1")]), Err(ExpandError::Unterminated));
        assert_eq!(run("${A:-${B}", &[]), Err(ExpandError::Unterminated));
        assert!(matches!(run("${}", &[]), Err(ExpandError::BadName { .. })));
        assert!(matches!(
            run("${a b}", &[]),
            Err(ExpandError::BadName { .. })
        ));
        assert!(matches!(
            run("${1X}", &[]),
            Err(ExpandError::BadName { .. })
        ));
        assert!(matches!(
            run("${config:x}", &[]),
            Err(ExpandError::Unsupported { .. })
        ));
    }

    #[test]
    fn injected_is_deduplicated() {
        let (_, inj) = run("${X}${X}${env:X}", &[("X", "s")]).unwrap();
        assert_eq!(inj, vec![("X".into(), "s".into())]);
    }

    #[test]
    fn first_variable_names_what_to_set() {
        assert_eq!(first_variable("${TOK}"), Some("TOK"));
        assert_eq!(first_variable("${env:TOK:-}"), Some("TOK"));
        assert_eq!(first_variable("Bearer ${A:-${B}}"), Some("A"));
        assert_eq!(first_variable(""), None);
        assert_eq!(first_variable("${1X}"), None);
    }

    #[test]
    fn non_ascii_text_survives() {
        let (out, _) = run("héllo ${X} wörld $", &[("X", "ü")]).unwrap();
        assert_eq!(out, "héllo ü wörld $");
    }
}
