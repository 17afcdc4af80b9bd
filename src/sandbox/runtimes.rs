//! Runtimes that do not follow the egress proxy, found before they fail silently: a Node
//! older than the versions that honour `NODE_USE_ENV_PROXY`, and a download an install
//! script tried during a first `npx -y` that the proxy refused.

use crate::config::sandbox::Grant;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Programs that run `node` (themselves or through `#!/usr/bin/env node`).
const NODE_RUNNERS: &[&str] = &[
    "node", "nodejs", "npx", "npm", "pnpm", "pnpx", "yarn", "corepack",
];

/// How long `node --version` may take before the check gives up (saying nothing).
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether Node `major.minor` tunnels `fetch` and `http(s).request` through `HTTP(S)_PROXY`
/// when `NODE_USE_ENV_PROXY=1`: from 24.5, and 22.21 on the 22 line (Node's changelogs:
/// v22.21.0 and v24.5.0 "http,https: add built-in proxy support", nodejs/node#58980).
pub fn honours_env_proxy(major: u32, minor: u32) -> bool {
    match major {
        22 => minor >= 21,
        24 => minor >= 5,
        m => m >= 25,
    }
}

/// The warning for a server behind the egress proxy whose program runs a Node that ignores
/// it, found on `path` (the server's `PATH`) when the program is not `node` itself.
pub fn node_warning(program: &Path, path: Option<&str>) -> Option<String> {
    let node = node_of(program, path)?;
    let version = version_of(&node)?;
    let (major, minor) = parse_version(&version)?;
    if honours_env_proxy(major, minor) {
        return None;
    }
    Some(format!(
        "Node {version} ({}) ignores proxy settings: allowed hosts are unreachable for it (npm's own downloads still work); use Node ≥ 22.21 / 24.5, or give this server \"network\": true",
        node.display()
    ))
}

/// `v20.19.1` → (20, 19).
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The `node` a program runs: itself, or the first on `path` for a Node package runner or
/// a script whose first line names node.
fn node_of(program: &Path, path: Option<&str>) -> Option<PathBuf> {
    let name = program.file_name()?.to_str()?;
    if name == "node" || name == "nodejs" {
        return Some(program.to_path_buf());
    }
    if !NODE_RUNNERS.contains(&name) && !shebang_names_node(program) {
        return None;
    }
    which::which_in("node", path, "/").ok()
}

fn shebang_names_node(program: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 128];
    let Ok(n) = std::fs::File::open(program).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    let first = head[..n].split(|b| *b == b'\n').next().unwrap_or_default();
    first.starts_with(b"#!") && String::from_utf8_lossy(first).contains("node")
}

/// `node --version`, run once per executable and remembered.
fn version_of(node: &Path) -> Option<String> {
    static SEEN: OnceLock<Mutex<HashMap<PathBuf, Option<String>>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some(known) = seen.lock().ok()?.get(node) {
        return known.clone();
    }
    let version = run_version(node);
    seen.lock()
        .ok()?
        .insert(node.to_path_buf(), version.clone());
    version
}

fn run_version(node: &Path) -> Option<String> {
    let mut child = std::process::Command::new(node)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + VERSION_TIMEOUT;
    while child.try_wait().ok()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    parse_version(&text).map(|_| text.trim().to_string())
}

/// The skip variables of packages whose install scripts download a browser or a binary
/// (each package's documented variable).
const SKIP_DOWNLOAD: &[&str] = &[
    "PUPPETEER_SKIP_DOWNLOAD=1",
    "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1",
];

/// The install script that failed in a server's last `npx` install, from npm's newest log in
/// the server's own cache (`npm info run PKG@VER postinstall { code: 1, … }`): npm names it
/// only there, and a failed postinstall (a browser download on a machine, or a Node, that
/// cannot reach it) ends `npx -y` with status 1 and nothing on stderr.
pub fn failed_install_script(npm_cache: &Path, server: &str) -> Option<String> {
    let newest = std::fs::read_dir(npm_cache.join("_logs"))
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .max_by_key(|e| e.file_name())?;
    let log = std::fs::read_to_string(newest.path()).ok()?;
    let failed = log.lines().rev().find_map(|line| {
        let (_, rest) = line.split_once(" info run ")?;
        let (package, rest) = rest.split_once(' ')?;
        let (script, outcome) = rest.split_once(' ')?;
        let code = outcome.strip_prefix("{ code: ")?.split(',').next()?;
        (code != "0").then(|| (package.to_string(), script.to_string(), code.to_string()))
    })?;
    let (package, script, code) = failed;
    let skip: Vec<&str> = SKIP_DOWNLOAD
        .iter()
        .copied()
        .filter(|v| {
            let tool = v.split('_').next().unwrap_or_default().to_ascii_lowercase();
            package.starts_with(&tool)
        })
        .collect();
    let advice = match skip.as_slice() {
        [] => "it usually downloads something the sandbox refused: allow its host, or run the server once with \"sandbox\": false".to_string(),
        vars => format!(
            "it downloads a browser: skip that with {} in the entry's \"env\" (the server then needs a browser of yours), or allow its host",
            vars.join(", ")
        ),
    };
    Some(format!(
        "{package}'s {script} script failed (exit {code}) while npx installed {server}'s packages ({}); {advice}",
        newest.path().display()
    ))
}

/// What a server that ended during its start is told when the egress proxy refused hosts
/// meanwhile (an install script's download, as puppeteer's Chrome on a first `npx -y`).
pub fn refused_during_start(
    server: &str,
    config: Option<&str>,
    hosts: &[(String, u16)],
) -> Option<String> {
    let (host, _) = hosts.first()?;
    let named: Vec<String> = hosts
        .iter()
        .map(|(h, port)| match h.contains(':') {
            true => format!("[{h}]:{port}"),
            false => format!("{h}:{port}"),
        })
        .collect();
    Some(format!(
        "the sandbox refused {} during its start (an install script's download, such as a browser, is the usual cause): skip the download with the package's variable in the entry's \"env\" ({}), or allow the host: `{}`",
        named.join(", "),
        SKIP_DOWNLOAD.join(", "),
        super::refusal::allow_command(config, server, Grant::Net, host),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_install_script_is_read_from_npm_s_newest_log() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("_logs");
        std::fs::create_dir_all(&logs).unwrap();
        std::fs::write(
            logs.join("2026-11-28T21_00_00_000Z-debug-0.log"),
            "1 info run puppeteer@1.0.0 postinstall { code: 1, signal: null }\n",
        )
        .unwrap();
        std::fs::write(
            logs.join("2026-11-28T21_09_59_266Z-debug-0.log"),
            "5544 info run sharp@0.34.5 install { code: 0, signal: null }\n\
             5547 info run puppeteer@24.43.1 postinstall { code: 1, signal: null }\n\
             5558 verbose exit 1\n",
        )
        .unwrap();
        let got = failed_install_script(dir.path(), "desktop").unwrap();
        assert!(
            got.starts_with("puppeteer@24.43.1's postinstall script failed (exit 1)")
                && got.contains("PUPPETEER_SKIP_DOWNLOAD=1")
                && !got.contains("PLAYWRIGHT")
                && got.contains("21_09_59"),
            "{got}"
        );
        // The newest run installed nothing that failed: nothing to say.
        std::fs::write(
            logs.join("2026-11-28T22_00_00_000Z-debug-0.log"),
            "1 verbose exit 0\n",
        )
        .unwrap();
        assert_eq!(failed_install_script(dir.path(), "desktop"), None);
    }

    #[test]
    fn the_node_versions_that_honour_the_proxy() {
        for (v, ok) in [
            ("v20.19.5", false),
            ("v22.20.0", false),
            ("v22.21.0", true),
            ("v23.11.1", false),
            ("v24.4.1", false),
            ("v24.5.0", true),
            ("v25.0.0", true),
        ] {
            let (major, minor) = parse_version(v).unwrap();
            assert_eq!(honours_env_proxy(major, minor), ok, "{v}");
        }
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn a_refused_start_names_the_host_and_both_fixes() {
        let got =
            refused_during_start("pp", None, &[("storage.googleapis.com".into(), 443)]).unwrap();
        assert!(got.contains("storage.googleapis.com:443"), "{got}");
        assert!(got.contains("PUPPETEER_SKIP_DOWNLOAD=1"), "{got}");
        assert!(
            got.contains("`openpact sandbox allow pp net storage.googleapis.com`"),
            "{got}"
        );
        assert_eq!(refused_during_start("pp", None, &[]), None);
    }
}
