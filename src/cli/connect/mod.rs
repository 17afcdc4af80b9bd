//! `openpact connect`: an editor's stdio session served by the shared hub of its config
//! (see [`crate::face::socket`]), which it starts when none runs. When stdin and stdout are
//! pipes or sockets (what editors give), it hands them to the hub and only watches
//! (`handover`, [`crate::face::handoff`]); otherwise it relays each message (`relay`).
//! Either way it keeps just enough of the session (`kept`) to stand in for the editor when
//! the hub goes away: it fails the requests that were in flight with an error that says so,
//! waits for the old hub's process to be gone, starts a new hub (`hub`), has it replay the
//! editor's `initialize`, log level and subscriptions, and announces `list_changed` — the
//! editor's pipe stays open throughout, and what the editor sends meanwhile waits in it for
//! the new hub. A client of the shared hub, so a command, not one of the hub's faces.

mod handover;
mod hub;
mod kept;
mod relay;

use crate::config::{self, Config};
use crate::face::handoff;
use crate::face::socket;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the in-flight requests of a hub that went away are answered with.
pub const RESTARTED: &str = "the shared openpact hub stopped while this request was in flight, and has been restarted; send the request again";

/// How long a hub that was just started may take to listen.
const START_WAIT: Duration = Duration::from_secs(15);
/// How long a hub may take to take over the editor's pipes (replaying its session first).
const REPLAY_WAIT: Duration = Duration::from_secs(30);
/// How long a hub that went away may take to exit (one asked to stop stops its servers
/// first) before the next one is reached or started anyway.
const EXIT_WAIT: Duration = Duration::from_secs(15);
/// How many hubs in a row may let the connection go before the session is set up (each
/// waited for until it has exited) before `connect` gives up on this try.
const SETUP_TRIES: usize = 5;
/// While the hub has the editor's pipes: how long its notes gather before they are read, so
/// that `connect` wakes a few times a second however many calls go by.
const NOTES_PAUSE: Duration = Duration::from_millis(20);
/// Set (to anything) to relay even pipes that could be handed over.
pub const RELAY_ENV: &str = "OPENPACT_CONNECT_RELAY";
/// After the editor closes its end: how long answers to its last requests may take.
const FINISH_GRACE: Duration = Duration::from_millis(1500);

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("could not set up stdio: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Start(String),
}

/// Where the shared hub is and how to start it.
pub struct Target {
    pub socket: PathBuf,
    /// The config file, absolute (`None`: the hub runs without one).
    pub config: Option<PathBuf>,
    /// `--state-dir` as given, passed on to the hub.
    pub state_dir: Option<PathBuf>,
    /// Where the hub's log goes.
    pub log: PathBuf,
    pub profile: Option<String>,
    pub max_message_size: usize,
}

/// Serves the editor until it closes its end: hands its pipes to the hub when they can be
/// handed over, relays them otherwise.
pub async fn run(target: Target) -> Result<(), ConnectError> {
    let stdin = std::io::stdin().as_fd().try_clone_to_owned()?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned()?;
    if std::env::var_os(RELAY_ENV).is_none()
        && handoff::passable(stdin.as_fd())
        && handoff::passable(stdout.as_fd())
    {
        return handover::hand_over(&target, stdin, stdout).await;
    }
    relay::relay(target).await
}

/// Whether a shared hub listens on `target`'s socket now. (It takes the connection closed
/// without a word for the question.)
pub fn hub_listens(target: &Target) -> bool {
    std::os::unix::net::UnixStream::connect(&target.socket).is_ok()
}

/// The hub's socket and log for `config` (as loaded) and `state_dir`.
pub fn target_for(
    config: Option<&Path>,
    state_dir: &Path,
    state_dir_arg: Option<PathBuf>,
    profile: Option<String>,
    max_message_size: usize,
) -> Target {
    let socket = socket::path_for(config, state_dir);
    let stem = socket
        .file_stem()
        .map_or_else(|| "hub".into(), |s| s.to_string_lossy().into_owned());
    Target {
        log: state_dir.join(format!("shared-{stem}.log")),
        socket,
        config: config.map(|c| std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf())),
        state_dir: state_dir_arg.map(|s| std::path::absolute(&s).unwrap_or(s)),
        profile,
        max_message_size,
    }
}

/// `openpact connect [--profile NAME]`: the hub of the config (checked here, or joined
/// despite its errors when it runs already), then the editor served through it.
pub(super) async fn command(
    config_arg: &Option<PathBuf>,
    state_dir_arg: &Option<PathBuf>,
    state: &Path,
    profile: Option<String>,
) -> anyhow::Result<()> {
    let target = match super::load(config_arg) {
        Ok(config) => checked(&config, state, state_dir_arg, profile)?,
        Err(broken) => joining_despite(config_arg, state_dir_arg, state, profile, broken)?,
    };
    run(target).await?;
    Ok(())
}

/// The hub of a config that loads, once the profile asked for is one of it.
fn checked(
    config: &Config,
    state: &Path,
    state_dir_arg: &Option<PathBuf>,
    profile: Option<String>,
) -> anyhow::Result<Target> {
    if let Some(name) = &profile
        && let Err(hint) = config.profile_view(name)
    {
        anyhow::bail!("no profile \"{name}\" in the config: {hint}");
    }
    Ok(target_for(
        config.source.as_deref(),
        state,
        state_dir_arg.clone(),
        profile,
        config.hub.max_message_size,
    ))
}

/// A config that does not load only matters to `connect` when no hub runs for its file: a
/// running one serves the last version that did (a reload never applies a broken one), and a
/// new window joins it. It checks the profile itself. Otherwise the error, as for any command.
fn joining_despite(
    config_arg: &Option<PathBuf>,
    state_dir_arg: &Option<PathBuf>,
    state: &Path,
    profile: Option<String>,
    broken: anyhow::Error,
) -> anyhow::Result<Target> {
    let Ok(Some(file)) = config::file(config_arg.as_deref()) else {
        return Err(broken);
    };
    let target = target_for(
        Some(&file),
        state,
        state_dir_arg.clone(),
        profile,
        config::HubSettings::DEFAULT_MAX_MESSAGE_SIZE,
    );
    if !hub_listens(&target) {
        return Err(broken);
    }
    tracing::warn!(
        "{broken:#}\nThe shared hub of this config keeps serving its last good version; this window joins it. Fix the file and the hub reloads it."
    );
    Ok(target)
}
