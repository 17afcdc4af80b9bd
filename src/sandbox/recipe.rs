//! A confined server's environment at each start: the recipe its plan keeps (the entry's
//! variables and the names it may have) built with its own folders and its proxy's address.

use super::{DATA_VAR, Network, env, places};
use std::path::Path;

/// How to make the server's environment at each start.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EnvRecipe {
    pub(super) entry: Vec<(String, String)>,
    pub(super) names: Vec<String>,
    pub(super) container: bool,
    /// Launched by pnpm (`pnpm dlx`, `pnpx`): its cache variables are npm's setting names,
    /// which npm itself warns about (and will refuse), so only a pnpm launch gets them.
    pub(super) pnpm: bool,
}

/// npm's setting for its "new version available" notice.
pub(super) const NPM_UPDATE_NOTIFIER: &str = "npm_config_update_notifier";

/// A confined server's own folders, as its environment names them.
pub(super) struct Dirs<'a> {
    pub(super) tmpdir: &'a Path,
    pub(super) data: &'a Path,
    pub(super) caches: &'a Path,
}

impl EnvRecipe {
    pub(super) fn build(
        &self,
        hub: &[(String, String)],
        network: &Network,
        dirs: &Dirs,
        proxy: Option<&str>,
    ) -> env::Environment {
        let mut ours: Vec<(String, String)> = Vec::new();
        // The package caches go before the entry's `env`, which may send one elsewhere (the
        // write grant still decides whether it can write there).
        let mut entry = Vec::new();
        if !self.container {
            let t = dirs.tmpdir.display().to_string();
            ours.extend(["TMPDIR", "TMP", "TEMP"].map(|k| (k.to_string(), t.clone())));
            ours.push((DATA_VAR.to_string(), dirs.data.display().to_string()));
            entry = places::private_cache_vars(dirs.caches, self.pnpm);
            // npm's notice of a newer npm fills the last lines of stderr, which the hub's
            // "failed to start" reason quotes, and hides the real error of an `npx` start.
            if !self
                .entry
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(NPM_UPDATE_NOTIFIER))
            {
                entry.push((NPM_UPDATE_NOTIFIER.to_string(), "false".to_string()));
            }
        }
        entry.extend(self.entry.iter().cloned());
        if let (Network::Proxy(_), Some(url)) = (network, proxy) {
            for k in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "http_proxy",
                "https_proxy",
                "npm_config_proxy",
                "npm_config_https_proxy",
            ] {
                ours.push((k.to_string(), url.to_string()));
            }
            // Nothing bypasses the proxy: a loopback service is reached through it too, and
            // only if the profile allows it.
            ours.push(("NO_PROXY".into(), String::new()));
            ours.push(("no_proxy".into(), String::new()));
            ours.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
        }
        env::EnvRequest {
            hub,
            entry: &entry,
            names: &self.names,
            container: self.container,
            network_open: matches!(network, Network::Any) || self.container,
            ours: &ours,
        }
        .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_update_notice_is_off_unless_the_entry_sets_it() {
        let dirs = Dirs {
            tmpdir: Path::new("/t"),
            data: Path::new("/d"),
            caches: Path::new("/c"),
        };
        let notifier = |entry: &[(&str, &str)]| {
            let recipe = EnvRecipe {
                entry: entry
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                names: Vec::new(),
                container: false,
                pnpm: false,
            };
            let vars = recipe.build(&[], &Network::None, &dirs, None).vars;
            vars.into_iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(NPM_UPDATE_NOTIFIER))
                .collect::<Vec<_>>()
        };
        let set = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(notifier(&[]), set("npm_config_update_notifier", "false"));
        assert_eq!(
            notifier(&[("npm_config_update_notifier", "true")]),
            set("npm_config_update_notifier", "true")
        );
        assert_eq!(
            notifier(&[("NPM_CONFIG_UPDATE_NOTIFIER", "true")]),
            set("NPM_CONFIG_UPDATE_NOTIFIER", "true")
        );
    }
}
