//! The MCP hosts (editors and agents) whose configs `openpact import` reads and `openpact
//! setup` rewrites: one table of where each keeps its servers on Linux and macOS, in which
//! shape, and how an entry there reads as an openpact `mcpServers` entry.
//!
//! Paths follow each host's documentation; `--home DIR` puts every one of them under DIR
//! (as if `$HOME` were DIR and no `XDG_CONFIG_HOME`, `CODEX_HOME` were set), for tests and
//! for reading another account's copy.

mod convert;

pub use convert::{Read, var_name};

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The folders host paths hang from.
#[derive(Debug, Clone)]
pub struct Dirs {
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub config: PathBuf,
    /// Where desktop apps keep their settings: `~/Library/Application Support` on macOS,
    /// the config dir elsewhere.
    pub apps: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex: PathBuf,
    /// The project whose own files (`.mcp.json`, `.cursor/mcp.json`, …) are read: the
    /// working directory.
    pub project: PathBuf,
}

impl Dirs {
    /// From the environment, or all under `home` when given.
    pub fn new(home: Option<&Path>, project: PathBuf) -> Option<Dirs> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let (home, config, codex) = match home {
            Some(h) => (h.to_path_buf(), h.join(".config"), h.join(".codex")),
            None => {
                let home = PathBuf::from(env("HOME")?);
                let config =
                    env("XDG_CONFIG_HOME").map_or_else(|| home.join(".config"), PathBuf::from);
                let codex = env("CODEX_HOME").map_or_else(|| home.join(".codex"), PathBuf::from);
                (home, config, codex)
            }
        };
        let apps = if cfg!(target_os = "macos") {
            home.join("Library/Application Support")
        } else {
            config.clone()
        };
        Some(Dirs {
            home,
            config,
            apps,
            codex,
            project,
        })
    }
}

/// How a file holds its servers, and what their entries look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `{"mcpServers": {NAME: {command, args, env, url, headers, type}}}`: Claude Desktop,
    /// Cursor, a project's `.mcp.json`; Windsurf's `serverUrl` too.
    McpServers,
    /// `~/.claude.json`: `mcpServers` (user scope) and `projects.PATH.mcpServers` (local scope).
    ClaudeUser,
    /// Gemini CLI's `settings.json`: `mcpServers` where `httpUrl` is Streamable HTTP and
    /// `url` is SSE.
    Gemini,
    /// VS Code's `mcp.json`: `servers` with `type` and `inputs` (`${input:ID}`).
    VsCode,
    /// VS Code's user `settings.json`: the same under `mcp`.
    VsCodeSettings,
    /// Codex's `config.toml`: `[mcp_servers.NAME]`.
    Codex,
    /// opencode's `opencode.json`: `mcp` with `type: local|remote`, `command` as a list.
    Opencode,
}

impl Shape {
    /// The JSON path to the object of servers (`setup` rewrites it); none for TOML.
    pub fn servers_path(self) -> &'static [&'static str] {
        match self {
            Shape::McpServers | Shape::ClaudeUser | Shape::Gemini => &["mcpServers"],
            Shape::VsCode => &["servers"],
            Shape::VsCodeSettings => &["mcp", "servers"],
            Shape::Opencode => &["mcp"],
            Shape::Codex => &["mcp_servers"],
        }
    }

    /// The entry this shape gives a server run as `command` with `args`.
    pub fn stdio_entry(self, command: &str, args: &[String]) -> Value {
        match self {
            Shape::Opencode => {
                let mut line = vec![command.to_string()];
                line.extend(args.iter().cloned());
                serde_json::json!({"type": "local", "command": line, "enabled": true})
            }
            Shape::VsCode | Shape::VsCodeSettings | Shape::ClaudeUser => {
                serde_json::json!({"type": "stdio", "command": command, "args": args})
            }
            _ => serde_json::json!({"command": command, "args": args}),
        }
    }
}

/// One file a host may keep servers in.
#[derive(Debug, Clone)]
pub struct Place {
    pub path: PathBuf,
    pub shape: Shape,
    /// A user's own file (what `setup` rewrites), not a project's.
    pub user: bool,
}

/// One host: its name on the command line, its name for people, and its files.
pub struct Host {
    pub id: &'static str,
    pub title: &'static str,
    places: fn(&Dirs) -> Vec<Place>,
}

impl Host {
    pub fn places(&self, dirs: &Dirs) -> Vec<Place> {
        (self.places)(dirs)
    }

    /// The file `setup` points at openpact: the host's first user file.
    pub fn setup_place(&self, dirs: &Dirs) -> Option<Place> {
        self.places(dirs).into_iter().find(|p| p.user)
    }
}

fn user(path: PathBuf, shape: Shape) -> Place {
    Place {
        path,
        shape,
        user: true,
    }
}

fn project(path: PathBuf, shape: Shape) -> Place {
    Place {
        path,
        shape,
        user: false,
    }
}

/// Every host, in the order `import` reads them (the first of a duplicate names it).
pub const HOSTS: &[Host] = &[
    Host {
        id: "claude-desktop",
        title: "Claude Desktop",
        places: |d| {
            vec![user(
                d.apps.join("Claude/claude_desktop_config.json"),
                Shape::McpServers,
            )]
        },
    },
    Host {
        id: "claude-code",
        title: "Claude Code",
        places: |d| {
            vec![
                user(d.home.join(".claude.json"), Shape::ClaudeUser),
                project(d.project.join(".mcp.json"), Shape::McpServers),
            ]
        },
    },
    Host {
        id: "cursor",
        title: "Cursor",
        places: |d| {
            vec![
                user(d.home.join(".cursor/mcp.json"), Shape::McpServers),
                project(d.project.join(".cursor/mcp.json"), Shape::McpServers),
            ]
        },
    },
    Host {
        id: "vscode",
        title: "VS Code",
        places: |d| {
            vec![
                user(d.apps.join("Code/User/mcp.json"), Shape::VsCode),
                user(
                    d.apps.join("Code/User/settings.json"),
                    Shape::VsCodeSettings,
                ),
                project(d.project.join(".vscode/mcp.json"), Shape::VsCode),
            ]
        },
    },
    Host {
        id: "windsurf",
        title: "Windsurf",
        places: |d| {
            vec![user(
                d.home.join(".codeium/windsurf/mcp_config.json"),
                Shape::McpServers,
            )]
        },
    },
    Host {
        id: "gemini",
        title: "Gemini CLI",
        places: |d| {
            vec![
                user(d.home.join(".gemini/settings.json"), Shape::Gemini),
                project(d.project.join(".gemini/settings.json"), Shape::Gemini),
            ]
        },
    },
    Host {
        id: "codex",
        title: "Codex",
        places: |d| {
            vec![
                user(d.codex.join("config.toml"), Shape::Codex),
                project(d.project.join(".codex/config.toml"), Shape::Codex),
            ]
        },
    },
    Host {
        id: "opencode",
        title: "opencode",
        places: |d| {
            vec![
                user(d.config.join("opencode/opencode.json"), Shape::Opencode),
                project(d.project.join("opencode.json"), Shape::Opencode),
            ]
        },
    },
];

/// The host named `id`, or what the names are.
pub fn named(id: &str) -> Result<&'static Host, String> {
    HOSTS.iter().find(|h| h.id == id).ok_or_else(|| {
        let ids: Vec<&str> = HOSTS.iter().map(|h| h.id).collect();
        format!(
            "`{id}` is not a host openpact knows; use one of {}",
            ids.join(", ")
        )
    })
}

/// Why a host file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not valid {format}: {message}")]
    Parse {
        path: String,
        format: &'static str,
        message: String,
    },
}

/// The file's text, `None` when it does not exist.
pub fn text_of(path: &Path) -> Result<Option<String>, FileError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FileError::Io {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// The JSON (comments and trailing commas allowed, as VS Code and opencode write) of `text`.
pub fn parse_json(text: &str, path: &Path) -> Result<Value, FileError> {
    let stripped = crate::config::edit::stripped(text);
    if stripped.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(&stripped).map_err(|e| FileError::Parse {
        path: path.display().to_string(),
        format: "JSON",
        message: e.to_string(),
    })
}

/// The TOML document of `text`.
pub fn parse_toml(text: &str, path: &Path) -> Result<toml_edit::DocumentMut, FileError> {
    text.parse::<toml_edit::DocumentMut>()
        .map_err(|e| FileError::Parse {
            path: path.display().to_string(),
            format: "TOML",
            message: e.to_string().trim().replace('\n', " "),
        })
}

/// Reads one place: `None` when the file does not exist.
pub fn read(place: &Place, dirs: &Dirs) -> Result<Option<Read>, FileError> {
    let Some(text) = text_of(&place.path)? else {
        return Ok(None);
    };
    let base = if place.user {
        &dirs.home
    } else {
        &dirs.project
    };
    let read = match place.shape {
        Shape::Codex => convert::codex(&parse_toml(&text, &place.path)?),
        shape => convert::json(&parse_json(&text, &place.path)?, shape, base),
    };
    Ok(Some(read))
}
