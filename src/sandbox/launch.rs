//! Starting a planned server: its command line (through the wrapper when confined), its
//! environment, and its private folders, made at each start and swept when their hub is gone.

use super::recipe::Dirs;
use super::{Mode, Network, Plan, Profile, hub_env, proxy, temp_root, wrapper_command};
use std::path::{Path, PathBuf};

/// How to start one server process.
#[derive(Debug)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The whole environment; `None` inherits the hub's (with the entry's `env` on top).
    pub env: Option<Vec<(String, String)>>,
    /// Names of the hub's variables the server does not get (for a debug log line).
    pub withheld: Vec<String>,
}

/// Why a server cannot be started as its sandbox asks.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("sandbox: {0}")]
    Refused(String),
    #[error("sandbox: could not prepare the server's private folder {path}: {source}")]
    TempDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("sandbox: could not find openpact's own executable to confine the server: {0}")]
    Wrapper(std::io::Error),
}

impl Plan {
    /// The command line and environment for one start. `proxy` is the server's egress
    /// proxy, when its network goes through one.
    pub fn launch(
        &self,
        program: &Path,
        args: &[String],
        proxy: Option<&proxy::EgressProxy>,
    ) -> Result<Launch, LaunchError> {
        let plain = || Launch {
            program: program.to_path_buf(),
            args: args.to_vec(),
            env: None,
            withheld: Vec::new(),
        };
        if let Mode::Refused { reason } = &self.mode {
            return Err(LaunchError::Refused(reason.clone()));
        }
        let Some(recipe) = &self.env else {
            return Ok(plain());
        };
        let hub = hub_env();
        let Some(profile) = &self.profile else {
            // A container runtime: only the environment is ours to decide.
            let none = Path::new("");
            let dirs = Dirs {
                tmpdir: none,
                data: none,
                caches: none,
            };
            let env = recipe.build(&hub, &Network::Any, &dirs, None);
            return Ok(Launch {
                env: Some(env.vars),
                withheld: env.withheld,
                ..plain()
            });
        };
        prepare_dirs(profile)?;
        let url = proxy.map(proxy::EgressProxy::url);
        let env = recipe.build(
            &hub,
            &profile.network,
            &Dirs {
                tmpdir: &profile.tmpdir,
                data: &profile.data,
                caches: &profile.caches,
            },
            url.as_deref(),
        );
        if self.mode != Mode::Enforced {
            return Ok(Launch {
                env: Some(env.vars),
                withheld: env.withheld,
                ..plain()
            });
        }
        let rules = profile.confinement(proxy.map(proxy::EgressProxy::port));
        let rules = serde_json::to_string(&rules).unwrap_or_default();
        let (wrapper, mut wrapped) = wrapper_command().map_err(LaunchError::Wrapper)?;
        wrapped.extend([rules, "--".to_string()]);
        wrapped.push(program.display().to_string());
        wrapped.extend(args.iter().cloned());
        Ok(Launch {
            program: wrapper,
            args: wrapped,
            env: Some(env.vars),
            withheld: env.withheld,
        })
    }
}

/// Makes the private temp dir and data folder (0700), the granted folders under the home
/// folder that are missing (0700: at each start, since the user may have removed one), and
/// its private package caches.
fn prepare_dirs(profile: &Profile) -> Result<(), LaunchError> {
    use crate::platform;
    let err = |path: &Path| {
        let path = path.display().to_string();
        move |source| LaunchError::TempDir { path, source }
    };
    platform::create_dir_all(&profile.tmpdir, 0o700).map_err(err(&profile.tmpdir))?;
    // In a shared temp dir, someone else may have made the folder first to read or plant
    // files in every server's temp dir: use it only if it is ours and closed to others.
    if let Some(base) = temp_root().parent() {
        let meta = std::fs::metadata(base).map_err(err(base))?;
        if !platform::private_to_user(&meta) {
            return Err(err(base)(std::io::Error::other(
                "it belongs to another user or is open to others; remove it",
            )));
        }
    }
    platform::create_dir_all(&profile.data, 0o700).map_err(err(&profile.data))?;
    for dir in profile.create.iter().filter(|d| !d.exists()) {
        // Not fatal: the server may not need this folder for what it is asked to do.
        if let Err(e) = platform::create_dir_all(dir, 0o700) {
            tracing::warn!(path = %dir.display(), error = %e, "sandbox: could not make a granted folder, so the grant does nothing");
        }
    }
    platform::create_dir_all(&profile.caches, 0o700).map_err(err(&profile.caches))?;
    Ok(())
}

/// Removes this hub's private temp dirs (when it stops).
pub fn remove_temp_root() {
    let _ = std::fs::remove_dir_all(temp_root());
}

/// Removes the private temp dirs of hubs that are gone (one killed outright cannot clean up
/// after itself).
pub fn sweep_stale_temp() {
    let root = temp_root();
    let Some(base) = root.parent() else { return };
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // Only when surely gone: a pid we may not signal still names a live process.
        if crate::platform::liveness(pid) == crate::platform::Liveness::Gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
