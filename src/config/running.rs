//! What a running hub takes of a new config: the settings it reads only at start keep their
//! running values and are named, so that a reload says they wait for a restart.

use super::{Config, HubSettings};

/// What the hub runs of `new`: `new` with the settings read only at start kept as in `old`,
/// and the names of those that differ (they wait for a restart). Kept as they run, a later
/// reload reports them again.
pub fn as_running(old: &Config, mut new: Config) -> (Config, Vec<String>) {
    let mut waiting = Vec::new();
    let (o, n) = (&old.hub, &mut new.hub);
    macro_rules! keep {
        ($($field:ident).+, $name:expr) => {
            if o.$($field).+ != n.$($field).+ {
                waiting.push($name.to_string());
                n.$($field).+ = o.$($field).+.clone();
            }
        };
    }
    keep!(tool_names, "openpact.toolNames");
    keep!(max_message_size, "openpact.maxMessageSize");
    keep!(page_size, "openpact.pageSize");
    keep!(list_wait, "openpact.listWait");
    keep!(restart, "openpact.restart");
    keep!(http, "openpact.http");
    keep!(policy.cache.max_bytes, "openpact.cache.maxBytes");
    keep!(shared, "openpact.shared");
    keep!(telemetry, "openpact.telemetry");
    // Sessions hold a view by its index: profiles may be added, not removed or moved.
    let names =
        |c: &HubSettings| -> Vec<String> { c.profiles.iter().map(|p| p.name.clone()).collect() };
    if !names(n).starts_with(&names(o)) {
        waiting.push("openpact.profiles (removing, renaming or reordering profiles)".into());
        n.profiles.clone_from(&o.profiles);
    }
    (new, waiting)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        crate::config::parse(text, std::path::Path::new(""), &|_| None).unwrap()
    }

    /// What waits for a restart runs as before and is reported on every reload until then;
    /// what applies live comes through.
    #[test]
    fn settings_read_at_start_keep_running_and_are_reported_again() {
        let old = config(r#"{"openpact": {"listWait": "5s", "profiles": {"a": {}, "b": {}}}}"#);
        let new = config(
            r#"{"openpact": {"listWait": "1s", "profiles": {"b": {}}, "toolSearch": {"mode": "on"}}}"#,
        );
        let (running, waiting) = as_running(&old, new.clone());
        assert_eq!(
            waiting,
            [
                "openpact.listWait",
                "openpact.profiles (removing, renaming or reordering profiles)"
            ]
        );
        assert_eq!(running.hub.list_wait, old.hub.list_wait);
        assert_eq!(running.hub.profiles, old.hub.profiles);
        assert_eq!(running.hub.tool_search, new.hub.tool_search, "applies live");
        let (_, again) = as_running(&running, new);
        assert_eq!(again, waiting, "reported again by the next reload");
        let (_, none) = as_running(&old, old.clone());
        assert!(none.is_empty());
    }
}
