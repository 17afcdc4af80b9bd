//! End-to-end tests of config parsing: text in, `Config` or every problem out.
//! This file holds the fixture and helpers the topics share.

mod builtins;
mod commands;
mod expand;
mod files;
mod hub;
mod policy;
mod remote;
mod servers;

use super::*;
use std::collections::HashMap;

/// An environment of just these variables (the unit tests of `expand` and `paths` use it
/// too).
pub(super) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

#[cfg(unix)]
fn executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A temp dir holding `bin/tool` (executable) and `mcp.json`, with an env whose PATH is `bin`.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        #[cfg(unix)]
        executable(&dir.path().join("bin/tool"));
        Self { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("mcp.json")
    }

    fn bin(&self) -> String {
        self.dir.path().join("bin").to_str().unwrap().to_string()
    }

    fn parse(&self, text: &str, extra: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let bin = self.bin();
        let mut pairs = vec![("PATH", bin.as_str()), ("HOME", "/home/u")];
        pairs.extend_from_slice(extra);
        parse(text, &self.file(), &env_of(&pairs)).and_then(Config::strict)
    }

    /// As the commands other than `config check` load it: ignored keys are warnings.
    fn loose(&self, text: &str, extra: &[(&str, &str)]) -> Config {
        let bin = self.bin();
        let mut pairs = vec![("PATH", bin.as_str()), ("HOME", "/home/u")];
        pairs.extend_from_slice(extra);
        match parse(text, &self.file(), &env_of(&pairs)) {
            Ok(c) => c,
            Err(e) => panic!("expected a usable config, got:\n{e}"),
        }
    }

    fn ok(&self, text: &str, extra: &[(&str, &str)]) -> Config {
        match self.parse(text, extra) {
            Ok(c) => c,
            Err(e) => panic!("expected a valid config, got:\n{e}"),
        }
    }

    fn err(&self, text: &str, extra: &[(&str, &str)]) -> Vec<String> {
        match self.parse(text, extra) {
            Ok(c) => panic!("expected errors, got {c:#?}"),
            Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// Problems with the temp dir's `mcp.json` path shortened to `mcp.json`.
    fn err_short(&self, text: &str, extra: &[(&str, &str)]) -> Vec<String> {
        let long = self.file().display().to_string();
        self.err(text, extra)
            .into_iter()
            .map(|p| p.replacen(&long, "mcp.json", 1))
            .collect()
    }
}

type Pairs = [(String, String)];

/// (command, program, args, env, cwd, injected) of a stdio server.
fn stdio(server: &ServerConfig) -> (&str, &Path, &[String], &Pairs, Option<&Path>, &Pairs) {
    match &server.transport {
        Transport::Stdio {
            command,
            program,
            args,
            env,
            cwd,
            injected,
        } => (command, program, args, env, cwd.as_deref(), injected),
        other => panic!("expected stdio, got {other:?}"),
    }
}
