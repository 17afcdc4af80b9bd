//! Showing the user the authorization URL: always printed to stderr (SSH sessions, no
//! browser), and opened with the desktop's opener unless `OPENPACT_OAUTH_BROWSER` says
//! otherwise: `none` = print only; any other value = a command that gets the URL as its last
//! argument (e.g. `curl -s -L -o /dev/null` drives a server that redirects at once).

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

/// The variable that picks how the URL is opened.
pub const BROWSER_VAR: &str = "OPENPACT_OAUTH_BROWSER";

/// How the authorization URL reaches the user.
#[derive(Clone)]
pub enum Opener {
    /// The desktop's default browser (`open`), plus the printed URL.
    Desktop,
    /// Only the printed URL.
    PrintOnly,
    /// This program and arguments, with the URL appended.
    Command(Vec<String>),
    /// Handed to the caller (e.g. to ask the downstream client to open it), plus printed.
    Notify(Arc<dyn Fn(&str) + Send + Sync>),
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Opener::Desktop => f.write_str("Desktop"),
            Opener::PrintOnly => f.write_str("PrintOnly"),
            Opener::Command(words) => f.debug_tuple("Command").field(words).finish(),
            Opener::Notify(_) => f.write_str("Notify"),
        }
    }
}

impl Opener {
    /// From `OPENPACT_OAUTH_BROWSER`.
    pub fn from_env() -> Opener {
        Self::parse(std::env::var(BROWSER_VAR).ok().as_deref())
    }

    fn parse(value: Option<&str>) -> Opener {
        match value.map(str::trim) {
            None | Some("") => Opener::Desktop,
            Some(v) if v.eq_ignore_ascii_case("none") => Opener::PrintOnly,
            Some(v) => Opener::Command(v.split_whitespace().map(String::from).collect()),
        }
    }

    /// Prints the URL to stderr, then opens it; never blocks on the browser.
    pub fn show(&self, server: &str, url: &str) {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "openpact: to log in to '{server}', open this URL in a browser:\n\n    {url}\n"
        );
        let _ = err.flush();
        drop(err);
        match self {
            Opener::PrintOnly => {}
            Opener::Desktop => {
                if let Err(e) = open::that_detached(url) {
                    tracing::debug!("could not start a browser ({e}); open the URL printed above");
                }
            }
            Opener::Command(words) => run(words, url),
            Opener::Notify(notify) => notify(url),
        }
    }
}

fn run(words: &[String], url: &str) {
    let Some((program, args)) = words.split_first() else {
        return;
    };
    let spawned = Command::new(program)
        .args(args)
        .arg(url)
        // Its output must never reach our stdout (the MCP protocol in `serve`).
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn();
    match spawned {
        Ok(mut child) => {
            // Reap it whenever it ends, without waiting here.
            let _ = std::thread::Builder::new()
                .name("openpact-browser".into())
                .spawn(move || {
                    let _ = child.wait();
                });
        }
        Err(e) => {
            tracing::warn!("{BROWSER_VAR}: cannot run `{program}`: {e}; open the URL printed above")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opener_choice() {
        assert!(matches!(Opener::parse(None), Opener::Desktop));
        assert!(matches!(Opener::parse(Some(" ")), Opener::Desktop));
        assert!(matches!(Opener::parse(Some("None")), Opener::PrintOnly));
        assert!(matches!(
            Opener::parse(Some("curl -s  -L")),
            Opener::Command(w) if w == ["curl", "-s", "-L"]
        ));
    }
}
