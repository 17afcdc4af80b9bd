//! README.md walked as a user, and the docs/ beside it. Every `openpact …` form they show —
//! the rows of the README's "Command line" table, the lines of `sh` blocks and the
//! `openpact …` / `cargo run --release -- …` code spans of prose, in README.md and in every
//! `docs/*.md` — is read from the files themselves, and each must be exercised by a case
//! below ([`COVERAGE`]); a form the docs gain without a case fails the test, naming it.
//!
//! Every case runs twice, each time in a scratch dir of its own (`HOME` and the XDG dirs
//! inside it, so the user's config, state and keyring are never touched):
//!
//! - **example**: the working directory holds `mcp.example.json`, copied verbatim from the
//!   repository, and each case runs with `--config mcp.example.json`. Its `npx -y PKG@VERSION`
//!   servers run from the pinned peers through an `npx` stand-in first on `PATH`, which
//!   serves only the versions installed there and has no network.
//! - **bare**: an empty working directory and no config anywhere.
//!
//! Each run must finish, must not panic, must exit as the README says (`call` exits 1 on an
//! error; `config check` exits 1 on any problem; otherwise 0, and a command that cannot do
//! what it was asked fails with a message), its `--json` output must parse, and where the
//! README prints what a command shows, the example run shows it. Commands that would need a
//! remote server or a browser (`auth login`) are run where they must fail at once, cleanly.
//! All problems are gathered and reported together.

use super::{LIMIT, isolated, openpact};
use crate::support::{self, Hub, Peers, Ran, Scratch, s};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const EXAMPLE: &str = include_str!("../../mcp.example.json");

/// How a run must exit.
#[derive(Clone, Copy, Debug)]
enum Exit {
    Code(i32),
    /// Not 0, not a panic, and a message on stderr (the README documents no code for it).
    Fails,
    /// Anything but a panic: a cross-check below judges the outcome.
    Judged,
}

/// What one run must do in one setup.
#[derive(Clone, Copy)]
struct Outcome<'a> {
    exit: Exit,
    /// Texts the output must contain (stdout on success, stdout and stderr on failure).
    has: &'a [&'a str],
    /// Texts neither stdout nor stderr may contain.
    lacks: &'a [&'a str],
}

const fn ok(has: &'static [&'static str]) -> Option<Outcome<'static>> {
    exits(0, has)
}

const fn exits(code: i32, has: &'static [&'static str]) -> Option<Outcome<'static>> {
    Some(Outcome {
        exit: Exit::Code(code),
        has,
        lacks: &[],
    })
}

const fn fails(has: &'static [&'static str]) -> Option<Outcome<'static>> {
    Some(Outcome {
        exit: Exit::Fails,
        has,
        lacks: &[],
    })
}

const fn judged() -> Option<Outcome<'static>> {
    Some(Outcome {
        exit: Exit::Judged,
        has: &[],
        lacks: &[],
    })
}

const fn ok_lacking(
    has: &'static [&'static str],
    lacks: &'static [&'static str],
) -> Option<Outcome<'static>> {
    Some(Outcome {
        exit: Exit::Code(0),
        has,
        lacks,
    })
}

/// One command as a user types it, with what it must do with the example config and with
/// none. `args` come after `openpact`; the example setup puts `--config mcp.example.json`
/// first unless `args` name a config themselves.
struct Case {
    name: &'static str,
    args: &'static [&'static str],
    stdin: Option<&'static str>,
    example: Option<Outcome<'static>>,
    bare: Option<Outcome<'static>>,
}

const fn case(
    name: &'static str,
    args: &'static [&'static str],
    example: Option<Outcome<'static>>,
    bare: Option<Outcome<'static>>,
) -> Case {
    Case {
        name,
        args,
        stdin: None,
        example,
        bare,
    }
}

const fn piped(
    name: &'static str,
    args: &'static [&'static str],
    stdin: &'static str,
    example: Option<Outcome<'static>>,
    bare: Option<Outcome<'static>>,
) -> Case {
    Case {
        name,
        args,
        stdin: Some(stdin),
        example,
        bare,
    }
}

/// `GITHUB_TOKEN`, which the example lists under `secrets.env`: never shown.
const SECRET: &str = "ghp_readmeWalk0123456789";
const SUM: &str = r#"{"a": 2, "b": 3}"#;
const PARIS: &str = r#"{"city": "Paris"}"#;
/// A script the user writes before reviewing it (the example's `scripts.dir`).
const HELLO: &str = "# @description: Greets the world\ndef main():\n    return 'hello world'\n";

/// The cases run one after another, in this order, in each setup (later ones see what earlier
/// ones left in the state dir). The serve cases ([`SERVE_CASES`]) come after them.
const CASES: &[Case] = &[
    case(
        "tools",
        &["tools"],
        ok(&["everything:get-sum", "fs:read_text_file", "workspace_read"]),
        ok(&["workspace_read"]),
    ),
    case(
        "tools-json",
        &["tools", "--json"],
        ok(&[
            "everything:get-sum",
            "\"qualified\"",
            "\"server\"",
            "\"definition\"",
        ]),
        ok(&["workspace_read"]),
    ),
    case(
        "call-sum",
        &["call", "everything:get-sum", SUM],
        ok(&[]), // the output the README prints after the command
        exits(1, &["everything:get-sum"]),
    ),
    case(
        "call-sum-json",
        &["call", "everything:get-sum", SUM, "--json"],
        ok(&["The sum of 2 and 3 is 5."]),
        exits(1, &["everything:get-sum"]),
    ),
    piped(
        "call-echo-stdin",
        &["call", "everything:echo", "-"],
        "{\"message\": \"hi\"}\n",
        ok(&["Echo: hi"]),
        exits(1, &["everything:echo"]),
    ),
    piped(
        "call-echo-stdin-json",
        &["call", "everything:echo", "-", "--json"],
        "{\"message\": \"hi\"}\n",
        ok(&["Echo: hi"]),
        exits(1, &["everything:echo"]),
    ),
    case(
        "call-bad-arguments",
        &["call", "everything:get-sum", r#"{"a": "two"}"#],
        exits(1, &["get-sum"]),
        exits(1, &["everything:get-sum"]),
    ),
    // The sandbox's base environment leaves GITHUB_TOKEN with the hub (the example's
    // `secrets.env` would redact its value anyway); the server gets its own TMPDIR.
    case(
        "call-get-env",
        &["call", "everything:get-env"],
        ok_lacking(&["\"PATH\"", "\"TMPDIR\""], &[SECRET, "GITHUB_TOKEN"]),
        exits(1, &["everything:get-env"]),
    ),
    case(
        "resources",
        &["resources"],
        ok(&[
            "demo://resource/static/document/features.md",
            "demo://resource/dynamic/text/{resourceId}",
        ]),
        ok(&[]),
    ),
    case(
        "resources-json",
        &["resources", "--json"],
        ok(&["demo://resource/static/document/features.md"]),
        ok(&[]),
    ),
    case(
        "read",
        &["read", "demo://resource/static/document/features.md"],
        ok(&["Everything Server"]),
        exits(1, &["demo://resource/static/document/features.md"]),
    ),
    case(
        "read-json",
        &[
            "read",
            "demo://resource/static/document/features.md",
            "--json",
        ],
        ok(&["\"contents\"", "Everything Server"]),
        exits(1, &["demo://resource/static/document/features.md"]),
    ),
    // "binary summarised, or base64 with --json"
    case(
        "read-blob",
        &["read", "demo://resource/dynamic/blob/1"],
        ok(&["bytes"]),
        exits(1, &["demo://resource/dynamic/blob/1"]),
    ),
    case(
        "read-blob-json",
        &["read", "demo://resource/dynamic/blob/1", "--json"],
        ok(&["\"blob\""]),
        exits(1, &["demo://resource/dynamic/blob/1"]),
    ),
    case(
        "prompts",
        &["prompts"],
        ok(&["everything:args-prompt", "state?"]),
        ok(&[]),
    ),
    case(
        "prompts-json",
        &["prompts", "--json"],
        ok(&["everything:args-prompt"]),
        ok(&[]),
    ),
    case(
        "prompt",
        &["prompt", "everything:args-prompt", PARIS],
        ok(&[]), // the output the README prints after the command
        exits(1, &["everything:args-prompt"]),
    ),
    case(
        "prompt-json",
        &["prompt", "everything:args-prompt", PARIS, "--json"],
        ok(&["What's weather in Paris?"]),
        exits(1, &["everything:args-prompt"]),
    ),
    piped(
        "prompt-stdin",
        &["prompt", "everything:args-prompt", "-"],
        "{\"city\": \"Paris\"}\n",
        ok(&["user: What's weather in Paris?"]),
        exits(1, &["everything:args-prompt"]),
    ),
    case(
        "servers",
        &["servers"],
        ok(&["everything", "fs", "ready", "2025-11-25", "everything-http"]),
        ok(&[]),
    ),
    case(
        "servers-json",
        &["servers", "--json"],
        ok(&["everything", "ready"]),
        ok(&[]),
    ),
    case(
        "servers-start",
        &["servers", "--start"],
        ok(&["everything", "ready"]),
        ok(&[]),
    ),
    case(
        "servers-start-json",
        &["servers", "--json", "--start"],
        ok(&["everything", "ready"]),
        ok(&[]),
    ),
    case(
        "permissions-list-empty",
        &["permissions", "list"],
        ok_lacking(&[], &["fs:create_directory", "fs:move_file"]),
        ok_lacking(&[], &["fs:create_directory", "fs:move_file"]),
    ),
    case(
        "permissions-allow",
        &["permissions", "allow", "fs:create_directory"],
        ok(&["fs:create_directory is now always allowed"]),
        fails(&["fs:create_directory"]),
    ),
    case(
        "permissions-deny",
        &["permissions", "deny", "fs:move_file"],
        ok(&["fs:move_file is now always denied"]),
        fails(&["fs:move_file"]),
    ),
    case(
        "call-after-deny",
        &[
            "call",
            "fs:move_file",
            r#"{"source": "a", "destination": "b"}"#,
        ],
        exits(1, &["you chose to deny it"]),
        exits(1, &["fs:move_file"]),
    ),
    // A decision a config rule overrides is refused, naming the rule (the example allows
    // `everything:*`).
    case(
        "permissions-deny-overridden",
        &["permissions", "deny", "everything:get-env"],
        exits(
            1,
            &["the rule \"everything:*\" in openpact.permissions.allow"],
        ),
        fails(&["everything:get-env"]),
    ),
    case(
        "permissions-list",
        &["permissions", "list"],
        ok(&["fs:create_directory", "allow", "fs:move_file", "deny"]),
        ok(&[]),
    ),
    case(
        "permissions-list-json",
        &["permissions", "list", "--json"],
        ok(&["fs:create_directory"]),
        ok(&[]),
    ),
    case(
        "permissions-forget",
        &["permissions", "forget", "fs:create_directory"],
        ok(&["fs:create_directory"]),
        ok(&["fs:create_directory"]),
    ),
    case(
        "permissions-forget-host",
        &["permissions", "forget", "notion/net/api.notion.com:443"],
        ok(&["notion/net/api.notion.com:443"]),
        ok(&["notion/net/api.notion.com:443"]),
    ),
    case(
        "permissions-list-after-forget",
        &["permissions", "list"],
        ok_lacking(&[], &["fs:create_directory"]),
        ok_lacking(&[], &["fs:create_directory"]),
    ),
    case(
        "audit-tail",
        &["audit", "tail"],
        ok(&["everything:get-sum", "everything:args-prompt"]),
        ok(&[]),
    ),
    case(
        "audit-tail-n",
        &["audit", "tail", "-n", "1"],
        judged(),
        judged(),
    ),
    case(
        "audit-tail-json",
        &["audit", "tail", "-n", "2", "--json"],
        ok(&["\"target\""]),
        ok(&[]),
    ),
    case(
        "cache-stats",
        &["cache", "stats"],
        ok(&["no openpact serve is running"]),
        ok(&["no openpact serve is running"]),
    ),
    case(
        "cache-stats-json",
        &["cache", "stats", "--json"],
        ok(&[]),
        ok(&[]),
    ),
    case("cache-clear", &["cache", "clear"], ok(&[]), ok(&[])),
    case(
        "scripts-list",
        &["scripts", "list"],
        ok(&["hello"]),
        ok(&[]),
    ),
    case(
        "scripts-list-json",
        &["scripts", "list", "--json"],
        ok(&["hello"]),
        ok(&[]),
    ),
    case(
        "scripts-show",
        &["scripts", "show", "hello"],
        ok(&["def main"]),
        fails(&["hello"]),
    ),
    case(
        "scripts-approve",
        &["scripts", "approve", "hello"],
        ok(&["hello", "sha256:"]),
        fails(&["hello"]),
    ),
    case(
        "scripts-reject",
        &["scripts", "reject", "hello"],
        ok(&["hello"]),
        fails(&["hello"]),
    ),
    case(
        "config-check",
        &["config", "check"],
        ok_lacking(&["mcp.example.json", "everything", "fs", "ok: "], &[SECRET]),
        ok(&[]),
    ),
    case(
        "config-check-json",
        &["config", "check", "--json"],
        ok_lacking(&["mcp.example.json", "everything"], &[SECRET]),
        ok(&[]),
    ),
    // The example with one key misspelled: "Unknown keys are warnings with a 'did you mean'
    // hint. `openpact config check` is strict: it exits 1 on any problem."
    case(
        "config-check-typo",
        &["--config", "../typo.json", "config", "check"],
        exits(1, &["did you mean", "listWait"]),
        None,
    ),
    case(
        "tools-search",
        &["tools", "--search", "make a folder"],
        ok(&["fs:create_directory", "best first"]),
        ok(&[]),
    ),
    case(
        "tools-search-json",
        &["tools", "--search", "read a file", "--limit", "3", "--json"],
        ok(&["fs:read_text_file", "\"inputSchema\"", "\"total\""]),
        ok(&["\"tools\""]),
    ),
    // The example's profile: its stdio session, until stdin ends. Without a config there is
    // no profile, and serve refuses to start rather than serve everything.
    case(
        "serve-profile",
        &["serve", "--profile", "files"],
        ok(&[]),
        fails(&["no profile \"files\""]),
    ),
    // Its stdin ends before the editor says anything: it starts no hub and leaves.
    case("connect", &["connect"], ok(&[]), ok(&[])),
    case(
        "connect-profile",
        &["connect", "--profile", "files"],
        ok(&[]),
        fails(&["no profile \"files\""]),
    ),
    case(
        "ui",
        &["ui"],
        fails(&["no openpact hub of this config is running"]),
        fails(&["no openpact hub of this config is running"]),
    ),
    case(
        "reload",
        &["reload"],
        ok(&["nothing to reload"]),
        ok(&["nothing to reload"]),
    ),
    // The quick start's command where there is no mcp.example.json.
    case(
        "missing-config",
        &["--config", "mcp.example.json", "tools"],
        None,
        fails(&["mcp.example.json"]),
    ),
    case(
        "auth-status",
        &["auth", "status"],
        ok(&["everything-http"]),
        ok(&[]),
    ),
    case(
        "auth-status-json",
        &["auth", "status", "--json"],
        ok(&["everything-http"]),
        ok(&[]),
    ),
    // No server of that name in either config: refused at once, naming it.
    case(
        "auth-login-linear",
        &["auth", "login", "linear"],
        fails(&["linear"]),
        fails(&["linear"]),
    ),
    // A remote server nothing listens for: fails at once, naming where it tried.
    case(
        "auth-login-remote",
        &["auth", "login", "everything-http"],
        fails(&["127.0.0.1:3001"]),
        fails(&["everything-http"]),
    ),
    case(
        "auth-logout-linear",
        &["auth", "logout", "linear"],
        fails(&["linear"]),
        fails(&["linear"]),
    ),
    case(
        "auth-logout-remote",
        &["auth", "logout", "everything-http"],
        ok(&["everything-http"]),
        fails(&["everything-http"]),
    ),
    // The README's server is not in the example; `github` (disabled) takes the grants that
    // work, so nothing the other cases start changes.
    case(
        "sandbox-allow-write",
        &[
            "sandbox",
            "allow",
            "desktop-commander",
            "write",
            "~/.claude-server-commander",
        ],
        fails(&["no server named desktop-commander"]),
        fails(&["no config file found"]),
    ),
    case(
        "sandbox-allow-write-home",
        &["sandbox", "allow", "github", "write", "~/notes"],
        ok(&["github: allowed write ~/notes", "made the folder ~/notes"]),
        fails(&["no config file found"]),
    ),
    case(
        "sandbox-allow-read",
        &["sandbox", "allow", "github", "read", "/etc/hosts"],
        ok(&["github: allowed read /etc/hosts"]),
        fails(&["no config file found"]),
    ),
    case(
        "sandbox-allow-net-json",
        &[
            "sandbox",
            "allow",
            "github",
            "net",
            "api.github.com",
            "--json",
        ],
        ok(&["\"present\""]),
        fails(&["no config file found"]),
    ),
    case(
        "sandbox-allow-net",
        &["sandbox", "allow", "notion", "net", "api.notion.com"],
        fails(&["no server named notion"]),
        fails(&["no config file found"]),
    ),
    case(
        "sandbox-allow-net-private",
        &["sandbox", "allow", "fetch", "net", "192.168.1.10:8080"],
        fails(&["no server named fetch"]),
        fails(&["no config file found"]),
    ),
    case(
        "sandbox-allow-socket",
        &["sandbox", "allow", "github", "socket", "/tmp/agent.sock"],
        ok(&["github: allowed socket /tmp/agent.sock"]),
        fails(&["no config file found"]),
    ),
    // The scratch HOME has no host files: import finds nothing, setup writes the scratch's own.
    case(
        "import",
        &["import"],
        ok(&["Looked in:"]),
        ok(&["Looked in:"]),
    ),
    case(
        "import-from-write-json",
        &[
            "import",
            "--from",
            "cursor,codex",
            "--write",
            "--home",
            ".",
            "--json",
        ],
        ok(&["\"looked\""]),
        ok(&["\"looked\""]),
    ),
    case(
        "setup",
        &["setup", "cursor", "--home", "."],
        ok(&["openpact connect"]),
        ok(&["openpact connect"]),
    ),
    case(
        "import-write",
        &["import", "--write", "--home", "."],
        ok(&["Looked in:"]),
        ok(&["Looked in:"]),
    ),
    case(
        "setup-claude-code",
        &["setup", "claude-code", "--home", "."],
        ok(&["openpact connect"]),
        ok(&["openpact connect"]),
    ),
    case(
        "setup-undo-json",
        &["setup", "cursor", "--undo", "--home", ".", "--json"],
        ok(&["\"undo\": true"]),
        ok(&["\"undo\": true"]),
    ),
    // Adding and removing: each entry added is removed again, so the cases after see the
    // example as it was. Not in the bare setup, where `add` would make a user config.
    case(
        "add-stdio",
        &[
            "add",
            "walk-demo",
            "--env",
            "KEY=VALUE",
            "--cwd",
            ".",
            "--namespace",
            "demo",
            "--",
            "echo",
            "hi",
        ],
        ok(&["added walk-demo", "echo hi"]),
        None,
    ),
    case(
        "add-stdio-present",
        &["add", "walk-demo", "--json", "--", "echo"],
        exits(1, &["remove"]),
        None,
    ),
    case(
        "add-url",
        &[
            "add",
            "walk-api",
            "--url",
            "https://mcp.example.com/mcp",
            "--header",
            "Authorization: Bearer sk-walkSecret",
        ],
        ok_lacking(&["WALK_API_TOKEN"], &["sk-walkSecret"]),
        None,
    ),
    case(
        "remove-typo",
        &["remove", "walk-apo"],
        exits(1, &["did you mean walk-api?"]),
        fails(&["no config file found"]),
    ),
    case(
        "remove-url",
        &["remove", "walk-api", "--json"],
        ok(&["\"removed\""]),
        None,
    ),
    case(
        "remove-stdio",
        &["remove", "walk-demo"],
        ok(&["removed walk-demo"]),
        None,
    ),
    // Port 9 (discard) refuses at once: the registry commands fail cleanly, naming it.
    case(
        "add-registry",
        &[
            "add",
            "--registry",
            "io.github.example/weather",
            "--version",
            "1.0.0",
            "--registry-url",
            "http://127.0.0.1:9",
        ],
        fails(&["127.0.0.1:9"]),
        fails(&["127.0.0.1:9"]),
    ),
    case(
        "registry-search",
        &[
            "registry",
            "search",
            "weather",
            "--registry-url",
            "http://127.0.0.1:9",
        ],
        fails(&["127.0.0.1:9"]),
        fails(&["127.0.0.1:9"]),
    ),
    case(
        "registry-search-json",
        &[
            "registry",
            "search",
            "weather",
            "--json",
            "--registry-url",
            "http://127.0.0.1:9",
        ],
        exits(2, &["127.0.0.1:9"]),
        exits(2, &["127.0.0.1:9"]),
    ),
];

/// Cases that start `openpact serve` and talk to it (see [`serve_case`]); `servers-live`,
/// `cache-stats-live` and `cache-clear-live` run while `serve-http` is up.
const SERVE_CASES: &[(&str, &[&str])] = &[
    ("serve", &["serve"]),
    ("mcp", &["--mcp"]),
    ("serve-http", &["serve", "--http", "127.0.0.1:0"]),
    (
        "serve-http-only",
        &["serve", "--http", "127.0.0.1:0", "--no-stdio"],
    ),
];

/// Commands run beside a running `serve --http` (example and bare alike).
const LIVE_CASES: &[(&str, &[&str])] = &[
    ("servers-live", &["servers"]),
    ("cache-stats-live", &["cache", "stats"]),
    ("cache-stats-live-json", &["cache", "stats", "--json"]),
    ("cache-clear-live", &["cache", "clear"]),
    ("reload-live", &["reload"]),
    ("ui-live", &["ui"]),
    ("ui-live-no-open", &["ui", "--no-open"]),
];

/// Which cases exercise each form README.md and docs/ show. Keys are the forms as [`readme_forms`]
/// reads them. A README form missing here fails the test; so does a row here the README no
/// longer has. Each literal word of a form (flags, subcommands, arguments not in capitals)
/// must appear in the arguments of one of its cases; a runnable `sh` line must be exactly
/// one case's command line.
const COVERAGE: &[(&str, &[&str])] = &[
    // docs/reference.md, "Adding and removing servers".
    (
        "openpact add NAME [--env KEY=VALUE] [--cwd DIR] [--namespace NS] [--json] -- COMMAND ARGS",
        &["add-stdio", "add-stdio-present"],
    ),
    ("openpact add", &["add-stdio"]),
    ("openpact remove", &["remove-stdio"]),
    (
        "openpact add NAME --url URL [--header HEADER]",
        &["add-url"],
    ),
    (
        "openpact remove NAME [--json]",
        &["remove-typo", "remove-url", "remove-stdio"],
    ),
    (
        "openpact registry search QUERY [--json]",
        &["registry-search", "registry-search-json"],
    ),
    (
        "openpact add --registry NAME [--version V] [--registry-url URL]",
        &["add-registry"],
    ),
    // The "Command line" table.
    (
        "openpact serve (--mcp) [--http [ADDR]] [--no-stdio]",
        &["serve", "mcp", "serve-http", "serve-http-only"],
    ),
    ("openpact tools [--json]", &["tools", "tools-json"]),
    ("openpact serve --profile NAME", &["serve-profile"]),
    (
        "openpact connect [--profile NAME]",
        &["connect", "connect-profile"],
    ),
    ("openpact reload", &["reload", "reload-live"]),
    ("openpact ui", &["ui", "ui-live"]),
    ("openpact ui [--no-open]", &["ui", "ui-live-no-open"]),
    ("openpact import [--write]", &["import", "import-write"]),
    ("openpact import", &["import"]),
    ("openpact servers --json", &["servers-json"]),
    (
        "openpact setup HOST [--undo]",
        &["setup", "setup-undo-json"],
    ),
    (
        "openpact registry search QUERY",
        &["registry-search", "registry-search-json"],
    ),
    ("openpact connect", &["connect"]),
    ("openpact connect --profile NAME", &["connect-profile"]),
    ("openpact auth login", &["auth-login-linear"]),
    ("openpact permissions", &["permissions-list"]),
    (
        "openpact tools --search QUERY [--limit N] [--json]",
        &["tools-search", "tools-search-json"],
    ),
    (
        "openpact call SERVER:TOOL [JSON | -] [--json]",
        &[
            "call-sum",
            "call-sum-json",
            "call-echo-stdin",
            "call-echo-stdin-json",
            "call-bad-arguments",
            "call-get-env",
        ],
    ),
    (
        "openpact resources [--json]",
        &["resources", "resources-json"],
    ),
    (
        "openpact read URI [--json]",
        &["read", "read-json", "read-blob", "read-blob-json"],
    ),
    ("openpact prompts [--json]", &["prompts", "prompts-json"]),
    (
        "openpact prompt SERVER:NAME [JSON | -] [--json]",
        &["prompt", "prompt-json", "prompt-stdin"],
    ),
    (
        "openpact servers [--json] [--start]",
        &[
            "servers",
            "servers-json",
            "servers-start",
            "servers-start-json",
            "servers-live",
        ],
    ),
    (
        "openpact permissions list [--json]",
        &[
            "permissions-list-empty",
            "permissions-list",
            "permissions-list-json",
            "permissions-list-after-forget",
        ],
    ),
    (
        "openpact permissions allow|deny|forget SERVER:NAME",
        &[
            "permissions-allow",
            "permissions-deny",
            "permissions-deny-overridden",
            "permissions-forget",
        ],
    ),
    (
        "openpact cache stats [--json]",
        &[
            "cache-stats",
            "cache-stats-json",
            "cache-stats-live",
            "cache-stats-live-json",
        ],
    ),
    (
        "openpact audit tail [-n N] [--json]",
        &["audit-tail", "audit-tail-n", "audit-tail-json"],
    ),
    (
        "openpact sandbox allow NAME write|read|net|socket VALUE [--json]",
        &[
            "sandbox-allow-write",
            "sandbox-allow-write-home",
            "sandbox-allow-read",
            "sandbox-allow-net-json",
            "sandbox-allow-socket",
        ],
    ),
    (
        "openpact import [--from HOST] [--write] [--home DIR] [--json]",
        &["import", "import-from-write-json"],
    ),
    (
        "openpact setup HOST [--undo] [--home DIR] [--json]",
        &["setup", "setup-undo-json"],
    ),
    ("openpact import --write", &["import-write"]),
    ("openpact setup claude-code", &["setup-claude-code"]),
    (
        "openpact sandbox allow notion net api.notion.com",
        &["sandbox-allow-net"],
    ),
    (
        "openpact sandbox allow fetch net 192.168.1.10:8080",
        &["sandbox-allow-net-private"],
    ),
    (
        "openpact scripts list [--json]",
        &["scripts-list", "scripts-list-json"],
    ),
    (
        "openpact scripts show|approve|reject NAME",
        &["scripts-show", "scripts-approve", "scripts-reject"],
    ),
    (
        "openpact config check [--json]",
        &["config-check", "config-check-json", "config-check-typo"],
    ),
    (
        "openpact auth login|logout SERVER",
        &[
            "auth-login-linear",
            "auth-login-remote",
            "auth-logout-linear",
            "auth-logout-remote",
        ],
    ),
    (
        "openpact auth status [--json]",
        &["auth-status", "auth-status-json"],
    ),
    // `sh` blocks.
    ("cargo run --release -- serve", &["serve"]),
    ("openpact auth login linear", &["auth-login-linear"]),
    ("openpact auth logout linear", &["auth-logout-linear"]),
    (
        r#"openpact --config mcp.example.json call everything:get-sum '{"a": 2, "b": 3}'"#,
        &["call-sum"],
    ),
    (
        r#"echo '{"message": "hi"}' | openpact --config mcp.example.json call everything:echo - --json"#,
        &["call-echo-stdin-json"],
    ),
    (
        "openpact --config mcp.example.json read demo://resource/static/document/features.md",
        &["read"],
    ),
    (
        r#"openpact --config mcp.example.json prompt everything:args-prompt '{"city": "Paris"}'"#,
        &["prompt"],
    ),
    (
        "openpact --config mcp.example.json permissions allow fs:create_directory",
        &["permissions-allow"],
    ),
    (
        "openpact --config mcp.example.json permissions deny fs:move_file",
        &["permissions-deny"],
    ),
    (
        "openpact --config mcp.example.json permissions list",
        &["permissions-list"],
    ),
    (
        "openpact --config mcp.example.json permissions forget fs:create_directory",
        &["permissions-forget"],
    ),
    // Code spans in the prose.
    ("openpact tools", &["tools"]),
    (
        "openpact permissions list",
        &["permissions-list", "permissions-list-after-forget"],
    ),
    (
        "openpact permissions forget notion/net/api.notion.com:443",
        &["permissions-forget-host"],
    ),
    ("openpact call", &["call-sum"]),
    ("openpact read", &["read"]),
    (
        "cargo run --release -- --config mcp.example.json tools",
        &["tools"],
    ),
    ("openpact --mcp", &["mcp"]),
    ("openpact serve", &["serve"]),
    ("openpact serve --http", &["serve-http"]),
    ("openpact config check", &["config-check"]),
    ("openpact servers", &["servers"]),
    (
        "openpact permissions allow SERVER:TOOL",
        &["permissions-allow"],
    ),
    ("openpact cache stats", &["cache-stats-live"]),
    ("openpact cache clear", &["cache-clear", "cache-clear-live"]),
    ("openpact tools --json", &["tools-json"]),
    ("openpact scripts approve NAME", &["scripts-approve"]),
    ("openpact serve --http --no-stdio", &["serve-http-only"]),
];

/// Where in the README a form was found.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Source {
    Table,
    Shell,
    Prose,
}

/// One `openpact …` form of the README, and the lines it shows as its output (`sh` lines
/// after a `$ ` prompt).
#[derive(Debug)]
struct Form {
    text: String,
    source: Source,
    output: Vec<String>,
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A command of a `sh` block line (prompt and comment removed), if it runs openpact.
fn shell_command(line: &str) -> Option<String> {
    let line = line.strip_prefix("$ ").unwrap_or(line);
    let line = line.find(" #").map_or(line, |i| &line[..i]);
    let line = collapse(line);
    let runs = line.starts_with("openpact ")
        || line.contains("| openpact ")
        || line.starts_with("cargo run --release -- ");
    runs.then_some(line)
}

/// README.md, then each `docs/*.md` (the files the link check reads, `crate::docs`).
fn documents() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate::docs::documents(root)
        .iter()
        .map(|p| std::fs::read_to_string(root.join(p)).unwrap())
        .collect()
}

/// Every `openpact …` form in `docs` (README.md's text first), in order, each once.
fn readme_forms<S: AsRef<str>>(docs: &[S]) -> Vec<Form> {
    let mut forms: Vec<Form> = Vec::new();
    for doc in docs {
        doc_forms(doc.as_ref(), &mut forms);
    }
    forms
}

/// `text` as a form of `forms` (once: its index if it is there already).
fn add(forms: &mut Vec<Form>, text: String, source: Source) -> usize {
    match forms.iter().position(|f| f.text == text) {
        Some(i) => i,
        None => {
            forms.push(Form {
                text,
                source,
                output: Vec::new(),
            });
            forms.len() - 1
        }
    }
}

/// The forms of one document, added to `forms`.
fn doc_forms(doc: &str, forms: &mut Vec<Form>) {
    let mut fence: Option<String> = None;
    let mut prompted: Option<usize> = None;
    let mut section = "";
    let mut prose = String::new();
    for line in doc.lines() {
        if let Some(lang) = line.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(lang.trim().to_string()),
            };
            prompted = None;
            continue;
        }
        match fence.as_deref() {
            Some("sh") => {
                match shell_command(line) {
                    Some(cmd) => {
                        let i = add(forms, cmd, Source::Shell);
                        prompted = line.starts_with("$ ").then_some(i);
                    }
                    None if line.starts_with("$ ") => prompted = None,
                    None => {
                        if let Some(i) = prompted {
                            forms[i].output.push(line.trim().to_string());
                        }
                    }
                }
                continue;
            }
            Some(_) => continue,
            None => {}
        }
        if line.starts_with("## ") {
            section = line;
        }
        if section == "## Command line" && line.starts_with("| `") && !line.contains('…') {
            // The first cell; `\|` inside it is an alternative, not a column.
            let row = line.replace("\\|", "\u{1}");
            let cell = row.split('|').nth(1).unwrap_or("");
            for part in cell.split("`, `") {
                let text = collapse(&part.replace('`', "").replace('\u{1}', "|"));
                add(forms, format!("openpact {text}"), Source::Table);
            }
        }
        prose.push_str(line);
        prose.push('\n');
    }
    for span in prose.split('`').skip(1).step_by(2) {
        let text = collapse(span);
        if (text.starts_with("openpact ") || text.starts_with("cargo run --release -- "))
            && !text.contains('…')
        {
            add(forms, text, Source::Prose);
        }
    }
}

/// A command line: the words after `openpact`, and what goes to its stdin.
type Line = (Vec<String>, Option<String>);

/// A `sh` line as the words and stdin it runs `openpact` with, when it is a plain command
/// (single quotes, an optional `echo '…' |` in front, no placeholders or brackets).
fn runnable(line: &str) -> Option<Line> {
    let (stdin, rest) = match line.strip_prefix("echo ") {
        Some(rest) => {
            let (words, tail) = rest.split_once(" | ")?;
            let words = shell_words(words)?;
            (Some(format!("{}\n", words.join(" "))), tail)
        }
        None => (None, line),
    };
    let rest = rest
        .strip_prefix("openpact ")
        .or_else(|| rest.strip_prefix("cargo run --release -- "))?;
    let words = shell_words(rest)?;
    let plain = words.iter().all(|w| !w.contains('[') && !is_placeholder(w));
    plain.then_some((words, stdin))
}

/// Words split as `sh` does for unquoted and single-quoted text; None for anything else.
fn shell_words(text: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                word.get_or_insert_with(String::new);
            }
            c if quoted => word.get_or_insert_with(String::new).push(c),
            ' ' | '\t' => words.extend(word.take()),
            '"' | '\\' | '$' | '`' | '|' | ';' | '&' | '<' | '>' | '*' => return None,
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if quoted {
        return None;
    }
    words.extend(word);
    Some(words)
}

/// `SERVER:TOOL`, `JSON`, `N`, `ADDR`: a value the user supplies.
fn is_placeholder(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_uppercase())
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == ':' || c == '_')
}

/// The literal words of a form: flags, subcommands and their alternatives, values written
/// out; not placeholders, brackets, `|` or the program.
fn literal_words(form: &str) -> Vec<String> {
    let form = form
        .strip_prefix("openpact ")
        .or_else(|| form.strip_prefix("cargo run --release -- "))
        .unwrap_or(form);
    form.replace(['[', ']', '(', ')', '|'], " ")
        .split_whitespace()
        .filter(|w| !is_placeholder(w))
        .map(String::from)
        .collect()
}

/// Every case's name with the command lines it runs in the example and bare setups.
fn case_commands() -> BTreeMap<&'static str, Vec<Line>> {
    let mut all = BTreeMap::new();
    let both = |args: &[&str], stdin: Option<&str>, example: bool, bare: bool| {
        let mut v = Vec::new();
        if example {
            v.push((example_args(args), stdin.map(String::from)));
        }
        if bare {
            v.push((
                args.iter().map(|a| a.to_string()).collect(),
                stdin.map(String::from),
            ));
        }
        v
    };
    for c in CASES {
        let v = both(c.args, c.stdin, c.example.is_some(), c.bare.is_some());
        assert!(
            all.insert(c.name, v).is_none(),
            "two cases named {}",
            c.name
        );
    }
    for (name, args) in SERVE_CASES.iter().chain(LIVE_CASES) {
        let v = both(args, None, true, true);
        assert!(all.insert(*name, v).is_none(), "two cases named {name}");
    }
    all
}

/// `args` as the example setup runs them.
fn example_args(args: &[&str]) -> Vec<String> {
    let own = args.contains(&"--config");
    let config: &[&str] = if own {
        &[]
    } else {
        &["--config", "mcp.example.json"]
    };
    config.iter().chain(args).map(|a| a.to_string()).collect()
}

/// Problems with the coverage of `forms` by [`COVERAGE`] and the cases.
fn coverage_problems(forms: &[Form]) -> Vec<String> {
    let cases = case_commands();
    let mut problems = Vec::new();
    let table: BTreeMap<&str, &[&str]> = COVERAGE.iter().copied().collect();
    for form in forms {
        let Some(names) = table.get(form.text.as_str()) else {
            problems.push(format!(
                "README.md or docs/ show `{}` ({:?}) but no case of the walk covers it: add one and a COVERAGE row",
                form.text, form.source
            ));
            continue;
        };
        let mut runs = Vec::new();
        for name in *names {
            match cases.get(name) {
                Some(v) => runs.extend(v.iter()),
                None => problems.push(format!("COVERAGE names an unknown case {name}")),
            }
        }
        let exact = (form.source == Source::Shell)
            .then(|| runnable(&form.text))
            .flatten();
        if let Some((words, stdin)) = exact {
            if !runs.iter().any(|(a, i)| *a == words && *i == stdin) {
                problems.push(format!(
                    "no case runs `{}` as written (words {words:?}, stdin {stdin:?})",
                    form.text
                ));
            }
        } else {
            for word in literal_words(&form.text) {
                if !runs.iter().any(|(a, _)| a.contains(&word)) {
                    problems.push(format!(
                        "`{}`: none of its cases {names:?} uses `{word}`",
                        form.text
                    ));
                }
            }
        }
    }
    for (text, _) in COVERAGE {
        if !forms.iter().any(|f| f.text == *text) {
            problems.push(format!(
                "COVERAGE lists `{text}`, which neither README.md nor docs/ show any more"
            ));
        }
    }
    problems
}

#[test]
fn readme_forms_are_read_from_every_source() {
    let docs = documents();
    let forms = readme_forms(&docs);
    for source in [Source::Table, Source::Shell, Source::Prose] {
        assert!(
            forms.iter().any(|f| f.source == source),
            "no {source:?} form read from README.md: {forms:#?}"
        );
    }
    let sum = forms
        .iter()
        .find(|f| f.text.contains("everything:get-sum"))
        .expect("the get-sum example");
    assert_eq!(sum.output, ["The sum of 2 and 3 is 5."], "{sum:?}");
    // A form the README gains without a case is named.
    let mut more = docs.clone();
    more.push("```sh\nopenpact tools --verbose\n```\n".into());
    let problems = coverage_problems(&readme_forms(&more));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`openpact tools --verbose`")),
        "{problems:#?}"
    );
}

/// One setup of the walk: its scratch dir and the environment every run gets.
struct Setup {
    label: &'static str,
    example: bool,
    sc: Scratch,
    path: String,
}

impl Setup {
    fn new(label: &'static str, example: bool, peers: Option<&Peers>) -> Setup {
        let sc = Scratch::new();
        let bin = sc.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(sc.path().join("cwd")).unwrap();
        if let Some(peers) = peers {
            write_npx(&bin.join("npx"), peers);
        }
        let path = format!("{}:{}", s(&bin), std::env::var("PATH").unwrap_or_default());
        Setup {
            label,
            example,
            sc,
            path,
        }
    }

    fn cwd(&self) -> PathBuf {
        self.sc.path().join("cwd")
    }

    fn env(&self) -> [(&str, &str); 5] {
        [
            ("PATH", self.path.as_str()),
            ("GITHUB_TOKEN", SECRET),
            // The user's keyring is never touched.
            ("OPENPACT_TOKEN_STORE", "file"),
            ("OPENPACT_OAUTH_BROWSER", "none"),
            ("OPENPACT_OAUTH_TIMEOUT_SECS", "20"),
        ]
    }

    fn args(&self, args: &[&str]) -> Vec<String> {
        if self.example {
            example_args(args)
        } else {
            args.iter().map(|a| a.to_string()).collect()
        }
    }

    async fn run(&self, args: &[&str], stdin: Option<&str>) -> Ran {
        let args = self.args(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        openpact(&self.sc, &args, &self.env(), stdin).await
    }
}

/// An `npx` that runs the pinned peers for exactly the versions installed, and nothing else.
fn write_npx(path: &Path, peers: &Peers) {
    let dir = PathBuf::from(peers.vars["OPENPACT_PEERS_DIR"].as_str().unwrap());
    let mut arms = String::new();
    for (package, peer) in [
        ("@modelcontextprotocol/server-everything", "PEER_EVERYTHING"),
        ("@modelcontextprotocol/server-filesystem", "PEER_FILESYSTEM"),
    ] {
        let manifest = dir.join("node_modules").join(package).join("package.json");
        let manifest: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
        let version = manifest["version"].as_str().unwrap();
        let words: Vec<String> = peers
            .command(peer)
            .iter()
            .map(|w| format!("'{w}'"))
            .collect();
        arms.push_str(&format!(
            "  '{package}@{version}') shift; exec {} \"$@\" ;;\n",
            words.join(" ")
        ));
    }
    let script = format!(
        "#!/bin/sh\n# npx for the README walk: the pinned peers, no network.\n\
         [ \"$1\" = -y ] && shift\ncase \"$1\" in\n{arms}esac\n\
         echo \"npx (test stand-in): $1 is not installed in the pinned peers\" >&2\nexit 1\n"
    );
    std::fs::write(path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The lines of stderr worth quoting: a panic's, else the last few.
fn gist(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let picked: Vec<&str> = match lines.iter().position(|l| l.contains("panicked")) {
        Some(i) => lines[i..lines.len().min(i + 2)].to_vec(),
        None => lines[lines.len().saturating_sub(2)..].to_vec(),
    };
    let joined = picked.join(" | ");
    match joined.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &joined[..i]),
        None => joined,
    }
}

fn panicked(out: &Ran) -> bool {
    out.code == Some(101) || out.stderr.contains("panicked")
}

/// What is wrong with `out` for `want`, checked also against the README's printed `output`.
fn judge(out: &Ran, args: &[String], want: &Outcome<'_>, output: &[String]) -> Vec<String> {
    let mut wrong = Vec::new();
    if panicked(out) {
        wrong.push("panicked".to_string());
    }
    let code = out.code.unwrap_or(-1);
    let exit = match want.exit {
        Exit::Code(c) if code != c => Some(format!("exit {code}, the README says {c}")),
        Exit::Fails if code == 0 => Some("exit 0, yet it cannot have done that".into()),
        Exit::Fails if out.stderr.trim().is_empty() => {
            Some(format!("exit {code} with nothing on stderr"))
        }
        _ => None,
    };
    // What a run shows is judged only once it ended as it should.
    let Some(exit) = exit else {
        let shown = if code == 0 {
            out.stdout.clone()
        } else {
            format!("{}{}", out.stdout, out.stderr)
        };
        for text in want
            .has
            .iter()
            .copied()
            .chain(output.iter().map(String::as_str))
        {
            if !shown.contains(text) {
                wrong.push(format!("does not show {text:?}"));
            }
        }
        wrong.extend(lacks(out, want.lacks));
        // "Logs go to stderr; OPENPACT_LOG … (default: … `warn` otherwise)".
        if let Some(l) = out
            .stderr
            .lines()
            .find(|l| l.contains(" INFO ") || l.contains(" DEBUG "))
        {
            wrong.push(format!("logs below warn with OPENPACT_LOG unset: {l:?}"));
        }
        if args.iter().any(|a| a == "--json") {
            // `audit tail --json` prints the log's own lines: none when it is empty.
            let lines = args.iter().any(|a| a == "audit");
            if let Err(e) = json_output(&out.stdout, code == 0 && !lines) {
                wrong.push(format!("--json output is not JSON ({e})"));
            }
        }
        return wrong;
    };
    wrong.push(exit);
    wrong.extend(lacks(out, want.lacks));
    wrong
}

/// `texts` that `out` shows although it must not.
fn lacks(out: &Ran, texts: &[&str]) -> Vec<String> {
    texts
        .iter()
        .filter(|t| out.stdout.contains(*t) || out.stderr.contains(*t))
        .map(|t| format!("shows {t:?}"))
        .collect()
}

/// Checks that `stdout` is one JSON document, or JSON lines (one record each, as `audit tail
/// --json` prints the log's own lines). Empty output passes unless `needed`.
fn json_output(stdout: &str, needed: bool) -> Result<(), String> {
    if stdout.trim().is_empty() {
        return if needed {
            Err("nothing on stdout".into())
        } else {
            Ok(())
        };
    }
    if serde_json::from_str::<Value>(stdout).is_ok() {
        return Ok(());
    }
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        serde_json::from_str::<Value>(line).map_err(|e| format!("{e}: {line}"))?;
    }
    Ok(())
}

/// How a failed run is reported: the setup, the command line, what is wrong, the exit code
/// and what it said.
fn report(setup: &Setup, args: &[String], out: Option<&Ran>, wrong: &[String]) -> String {
    let line = format!("openpact {}", args.join(" "));
    match out {
        Some(out) => format!(
            "[{}] {line}: {} (exit {:?}; stderr: {}; stdout: {})",
            setup.label,
            wrong.join("; "),
            out.code,
            gist(&out.stderr),
            gist(&out.stdout)
        ),
        None => format!("[{}] {line}: {}", setup.label, wrong.join("; ")),
    }
}

/// Runs every case of [`CASES`] in `setup`; returns the runs by case name and the problems.
async fn walk_cases(setup: &Setup, forms: &[Form]) -> (BTreeMap<&'static str, Ran>, Vec<String>) {
    let mut runs = BTreeMap::new();
    let mut problems = Vec::new();
    for case in CASES {
        let want = if setup.example {
            case.example
        } else {
            case.bare
        };
        let Some(want) = want else { continue };
        let out = setup.run(case.args, case.stdin).await;
        let args = setup.args(case.args);
        // What the README prints after this very command line, if anything.
        let output: Vec<String> = if setup.example {
            forms
                .iter()
                .filter(|f| {
                    runnable(&f.text).is_some_and(|(w, i)| w == args && i.as_deref() == case.stdin)
                })
                .flat_map(|f| f.output.iter().cloned())
                .collect()
        } else {
            Vec::new()
        };
        let wrong = judge(&out, &args, &want, &output);
        if !wrong.is_empty() {
            problems.push(report(setup, &args, Some(&out), &wrong));
        }
        runs.insert(case.name, out);
    }
    (runs, problems)
}

/// Checks across runs: what one command claims, a later one must bear out.
fn cross_checks(setup: &Setup, runs: &BTreeMap<&'static str, Ran>) -> Vec<String> {
    let mut problems = Vec::new();
    let args = |name: &str| setup.args(CASES.iter().find(|c| c.name == name).unwrap().args);
    if let Some(tail) = runs.get("audit-tail-n") {
        // One line per record; a record's error follows on an indented line of its own.
        let lines = tail
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with(' '))
            .count();
        let most = if setup.example { 1..=1 } else { 0..=1 };
        if tail.code != Some(0) || !most.contains(&lines) || panicked(tail) {
            problems.push(report(
                setup,
                &args("audit-tail-n"),
                Some(tail),
                &[format!("-n 1 printed {lines} line(s)")],
            ));
        }
    }
    problems
}

/// The `/health` of an HTTP face, once `hub` has logged where it serves.
async fn health(hub: &Hub) -> Value {
    let logged = "serving MCP over HTTP on ";
    hub.wait_log(logged, support::WAIT).await;
    let log = hub.stderr();
    let start = log.find(logged).unwrap() + logged.len();
    let end = start + log[start..].find("/mcp").unwrap();
    let url = format!("{}/health", &log[start..end]);
    let reply = crate::http_face::client().get(&url).send().await.unwrap();
    assert_eq!(reply.status(), 200, "{url}");
    reply.json().await.unwrap()
}

/// Runs one serve case in `setup`: the MCP handshake and a tool list over stdio (and
/// `/health` over HTTP), then stdin EOF (SIGTERM with `--no-stdio`) must end it with 0.
/// `serve-http` also runs [`LIVE_CASES`] while it is up. Returns the problems; a helper's
/// panic is caught by the caller.
async fn serve_case(setup: &Setup, args: Vec<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut hub = Hub::spawn(isolated(&setup.sc, &words, &setup.env()));
    let http = words.contains(&"--http");
    let stdio = !words.contains(&"--no-stdio");
    let want: &[&str] = if setup.example {
        &["everything:get-sum", "fs:read_text_file", "workspace_read"]
    } else {
        &["workspace_read"]
    };
    if stdio {
        support::ready(&mut hub.client, want).await;
    }
    if http {
        let h = health(&hub).await;
        if h["status"] != "ok" {
            problems.push(format!("/health: {h}"));
        }
        if setup.example && !h["servers"].to_string().contains("everything") {
            problems.push(format!("/health lists no everything server: {h}"));
        }
    }
    if stdio && http {
        problems.extend(live_cases(setup, &hub).await);
    }
    // Stdio alone ends with stdin; with HTTP, stdin ending only ends the stdio session and
    // the hub serves on until SIGTERM (README, "Serving over HTTP").
    let code = if http {
        hub.signal(nix::sys::signal::Signal::SIGTERM).await.0
    } else {
        hub.close().await.0
    };
    let stderr = hub.stderr();
    if code != Some(0) || stderr.contains("panicked") {
        problems.push(format!(
            "exit {code:?} at the end; stderr: {}",
            gist(&stderr)
        ));
    }
    problems
}

/// `servers` and `cache stats|clear` beside a running `serve` (it is listed and ready).
async fn live_cases(setup: &Setup, hub: &Hub) -> Vec<String> {
    let pid = hub.child.id().unwrap().to_string();
    let mut problems = Vec::new();
    for (name, args) in LIVE_CASES {
        let has: &[&str] = match *name {
            "servers-live" if setup.example => &["everything", "fs", "ready"],
            "reload-live" if setup.example => &["applied", "no server changed"],
            "reload-live" => &["nothing to reload"],
            "ui-live" | "ui-live-no-open" => &["/ui/login?key="],
            "cache-stats-live" | "cache-stats-live-json" => &[pid.as_str()],
            _ => &[],
        };
        let want = Outcome {
            exit: Exit::Code(0),
            has,
            lacks: &["no openpact serve is running"],
        };
        let full = setup.args(args);
        // Both servers answered the tool list above, so neither may show as starting for
        // long: the status file is rewritten on every change (a burst coalesced over 100 ms).
        let deadline = Instant::now() + Duration::from_secs(2);
        let (out, unready) = loop {
            let out = setup.run(args, None).await;
            let unready = (*name == "servers-live" && setup.example)
                .then(|| {
                    out.stdout
                        .lines()
                        .find(|l| l.starts_with("everything ") || l.starts_with("fs "))
                        .filter(|l| !l.contains(" ready "))
                        .map(String::from)
                })
                .flatten();
            if unready.is_none() || Instant::now() > deadline {
                break (out, unready);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let mut wrong = judge(&out, &full, &want, &[]);
        if let Some(l) = unready {
            wrong.push(format!(
                "a server is still not shown ready after 2 s: {l:?}"
            ));
        }
        if !wrong.is_empty() {
            problems.push(report(setup, &full, Some(&out), &wrong));
        }
    }
    problems
}

/// The whole walk in one setup.
async fn walk(setup: Setup, forms: &[Form]) -> Vec<String> {
    if setup.example {
        std::fs::write(setup.cwd().join("mcp.example.json"), EXAMPLE).unwrap();
        let typo = EXAMPLE.replacen("\"listWait\"", "\"listWiat\"", 1);
        assert_ne!(typo, EXAMPLE, "mcp.example.json sets no listWait any more");
        std::fs::write(setup.sc.path().join("typo.json"), typo).unwrap();
        let scripts = setup.cwd().join("ai-data/scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        std::fs::write(scripts.join("hello.star"), HELLO).unwrap();
    }
    let (runs, mut problems) = walk_cases(&setup, forms).await;
    problems.extend(cross_checks(&setup, &runs));
    let setup = std::sync::Arc::new(setup);
    for (_, args) in SERVE_CASES {
        let full = setup.args(args);
        let task = tokio::spawn({
            let setup = setup.clone();
            let full = full.clone();
            async move { serve_case(&setup, full).await }
        });
        let wrong = match tokio::time::timeout(LIMIT * 2, task).await {
            Ok(Ok(wrong)) => wrong,
            Ok(Err(e)) => vec![format!("failed: {}", panic_text(e))],
            Err(_) => vec![format!("did not finish within {:?}", LIMIT * 2)],
        };
        if !wrong.is_empty() {
            problems.push(report(&setup, &full, None, &wrong));
        }
    }
    problems
}

fn panic_text(e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic".into()),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn every_command_the_readme_shows_works_as_shown() {
    let t0 = Instant::now();
    let forms = readme_forms(&documents());
    let mut problems = coverage_problems(&forms);
    let peers = Peers::get();
    let bare = walk(Setup::new("bare", false, None), &forms);
    let problems_seen = match &peers {
        Some(peers) => {
            let example = walk(Setup::new("example", true, Some(peers)), &forms);
            let (a, b) = tokio::join!(example, bare);
            [a, b].concat()
        }
        None => bare.await,
    };
    problems.extend(problems_seen);
    eprintln!(
        "README walk: {} forms, {} cases, {:.1?}",
        forms.len(),
        case_commands().len(),
        t0.elapsed()
    );
    assert!(
        problems.is_empty(),
        "{} problem(s) walking README.md:\n- {}",
        problems.len(),
        problems.join("\n- ")
    );
}
