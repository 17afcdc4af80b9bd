//! A local server under its sandbox: the launch (command line, environment, the egress
//! proxy and the hub's gate over it), the refusals it reports, and the hint a start that
//! failed inside the sandbox carries.

use super::{Sink, Upstream};
use std::sync::Arc;

/// The hosts a server's egress proxy refused (host, port), the first few.
pub(super) type RefusedHosts = Arc<std::sync::Mutex<Vec<(String, u16)>>>;
const REFUSED_KEPT: usize = 8;

/// A server's egress proxy answered to the hub through its sink.
struct SinkGate {
    sink: Arc<dyn Sink>,
    index: usize,
    /// The hosts refused so far, which a failed start names.
    seen: RefusedHosts,
}

impl crate::sandbox::proxy::Gate for SinkGate {
    fn decide(
        &self,
        host: &str,
        port: u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::sandbox::proxy::Decision> + Send>>
    {
        self.sink.egress_decide(self.index, host, port)
    }

    fn refused(&self, refusal: &crate::sandbox::proxy::Refusal) {
        self.sink.egress_refused(self.index, refusal);
        if let Ok(mut seen) = self.seen.lock()
            && seen.len() < REFUSED_KEPT
            && !seen
                .iter()
                .any(|(h, p)| *h == refusal.host && *p == refusal.port)
        {
            seen.push((refusal.host.clone(), refusal.port));
        }
    }
}

impl Upstream {
    /// The sandbox's recent refusals of this server.
    pub fn refusals(&self) -> &crate::sandbox::refusal::Record {
        &self.refusals
    }

    /// Files each refusal `text` (a redacted stderr line, a tool result's text) reports, when
    /// the kernel confines this server: elsewhere a denied path is the file's own mode, which
    /// no grant changes. Whether any was.
    pub fn note_refusals(&self, text: &str) -> bool {
        let (crate::sandbox::Mode::Enforced, Some(profile)) =
            (&self.sandbox.mode, &self.sandbox.profile)
        else {
            return false;
        };
        let home = home_dir();
        let config = self.config_named();
        let judge = crate::sandbox::refusal::Judge {
            server: &self.name,
            home: home.as_deref(),
            profile,
            config: config.as_deref(),
        };
        let mut noted = false;
        for line in text.lines() {
            if let Some(r) = crate::sandbox::refusal::detect(line).and_then(|s| judge.refusal(&s)) {
                tracing::warn!(server = %self.name, "{}", r.sentence());
                self.refusals.note(r);
                noted = true;
            }
        }
        if noted {
            // Published like any change, so `servers` and the status file show it.
            self.update(|_| {});
        }
        noted
    }

    /// The config file a refusal's command names, as the user would type it: `None` for the
    /// user's own, which a plain `openpact` finds from anywhere; any other file must be named,
    /// or the command would edit another config than this hub's.
    pub(super) fn config_named(&self) -> Option<String> {
        let lookup = |k: &str| std::env::var(k).ok();
        let file = self
            .sink
            .config_file()
            .filter(|f| crate::config::user_config_file(&lookup).as_ref() != Some(f))?;
        Some(crate::sandbox::refusal::tilde(&file, home_dir().as_deref()))
    }

    /// How this server is contained.
    pub fn sandbox(&self) -> &crate::sandbox::Plan {
        &self.sandbox
    }

    /// The process's command line and environment under its sandbox, the egress proxy its
    /// network goes through (kept for as long as the server is supervised), and the hosts
    /// that proxy refused.
    pub(super) async fn launch(
        &self,
        program: &std::path::Path,
        args: &[String],
    ) -> Result<
        (
            crate::sandbox::Launch,
            Option<crate::sandbox::proxy::EgressProxy>,
            RefusedHosts,
        ),
        String,
    > {
        let refused = RefusedHosts::default();
        let proxy = match self.sandbox.proxied() {
            None => None,
            Some(allow) => {
                let gate = Arc::new(SinkGate {
                    sink: self.sink.clone(),
                    index: self.index,
                    seen: refused.clone(),
                });
                let proxy = crate::sandbox::proxy::EgressProxy::start(
                    self.name.to_string(),
                    self.config_named(),
                    allow.to_vec(),
                    gate,
                )
                .await
                .map_err(|e| format!("sandbox: could not start the egress proxy: {e}"))?;
                Some(proxy)
            }
        };
        let launch = self
            .sandbox
            .launch(program, args, proxy.as_ref())
            .map_err(|e| e.to_string())?;
        if !launch.withheld.is_empty() {
            tracing::debug!(server = %self.name(), withheld = %launch.withheld.join(", "), "variables of the hub's environment not passed to the server (sandbox)");
        }
        for warning in self.sandbox.profile.iter().flat_map(|p| &p.warnings) {
            tracing::warn!(server = %self.name(), "sandbox: {warning}");
        }
        Ok((launch, proxy, refused))
    }

    /// A start that failed inside the sandbox says so, and how to widen it: by the host the
    /// egress proxy refused meanwhile when there is one.
    pub(super) fn with_sandbox_hint(&self, reason: String, refused: &RefusedHosts) -> String {
        if self.sandbox.profile.is_none() {
            return reason;
        }
        // What the server itself said was refused (a path, a socket), and the hosts its
        // proxy refused while it started (an install script's download).
        let refused = refused.lock().map(|r| r.clone()).unwrap_or_default();
        let hints: Vec<String> = self
            .refusals
            .recent()
            .last()
            .map(crate::sandbox::refusal::Refusal::sentence)
            .into_iter()
            .chain(crate::sandbox::runtimes::refused_during_start(
                self.name(),
                self.config_named().as_deref(),
                &refused,
            ))
            .chain(self.sandbox.profile.as_ref().and_then(|p| {
                crate::sandbox::runtimes::failed_install_script(&p.caches.join("npm"), self.name())
            }))
            .collect();
        if !hints.is_empty() {
            return format!("{reason} ({})", hints.join("; "));
        }
        format!(
            "{reason} (it ran in openpact's sandbox: if it needs more files, hosts or variables, widen its profile with \"sandbox\": {{\"filesystem\": {{\"read\"/\"write\": […]}}, \"network\": …, \"env\": […]}}, or set \"sandbox\": false; `openpact servers` shows what each server may touch)"
        )
    }
}

/// The user's home folder, which refusals show paths under as `~`.
fn home_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from)
}
