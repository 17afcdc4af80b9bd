//! `openpact.builtins`: paths relative to the config file, defaults and checks.

use super::*;

#[test]
fn builtins_settings_parse_relative_to_the_config() {
    let f = Fixture::new();
    let base = f.dir.path();
    let c = f.ok(r#"{}"#, &[]);
    let b = &c.hub.builtins;
    assert!(b.enabled && b.web.enabled && !b.web.allow_private);
    assert_eq!(b.workspace_root, base.join("ai-data"));
    assert_eq!(b.scripts.dir, base.join("ai-data/scripts"));
    assert!(b.vault.is_none() && b.github.is_none() && !b.chat.any() && b.calendars.is_empty());

    let c = f.ok(
        r#"{"openpact": {"builtins": {
            "workspace": {"root": "./data"},
            "vault": {"path": "~/notes", "git": {"sync": true}},
            "web": {"enabled": true, "allowPrivate": true, "maxBytes": "1MiB", "timeout": "5s"},
            "github": {"tokenEnv": "GH_TOKEN", "baseUrl": "http://127.0.0.1:9/"},
            "chat": {"discord": {"tokenEnv": "D"}, "slack": {}, "webhook": {"url": "${HOOK}"}},
            "calendars": [{"name": "work", "url": "http://127.0.0.1:9/w.ics"}, {"name": "home", "file": "home.ics"}],
            "scripts": {"dir": "./s", "allowlist": ["weather.star"], "exec": true, "timeout": "2s"}
        }}}"#,
        &[("HOOK", "http://127.0.0.1:9/hook")],
    );
    let b = &c.hub.builtins;
    assert_eq!(b.workspace_root, base.join("./data"));
    assert_eq!(b.workspace_root.to_str(), base.join("data").to_str());
    assert_eq!(
        b.vault,
        Some(VaultSettings {
            path: PathBuf::from("/home/u/notes"),
            git_sync: true,
            max_bytes: 1024 * 1024,
            git_timeout: Duration::from_secs(30),
        })
    );
    assert!(
        b.web.allow_private
            && b.web.max_bytes == 1024 * 1024
            && b.web.timeout == Duration::from_secs(5)
    );
    assert_eq!(
        b.github,
        Some(GithubSettings {
            token_env: "GH_TOKEN".into(),
            base_url: "http://127.0.0.1:9".into()
        })
    );
    assert_eq!(b.chat.discord.as_ref().unwrap().token_env, "D");
    assert_eq!(
        b.chat.slack.as_ref().unwrap().base_url,
        "https://slack.com/api"
    );
    assert_eq!(b.chat.webhook.as_deref(), Some("http://127.0.0.1:9/hook"));
    assert_eq!(
        b.calendars[1].feed,
        CalendarFeed::File(base.join("home.ics"))
    );
    assert_eq!(
        (b.scripts.dir.clone(), b.scripts.exec),
        (base.join("./s"), true)
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    let c = f.ok(r#"{"openpact": {"builtins": false}}"#, &[]);
    assert!(!c.hub.builtins.enabled);
    let c = f.ok(
        r#"{"openpact": {"builtins": {"chat": {"webhook": {"url": "${NOPE_HOOK}"}}}}}"#,
        &[],
    );
    assert!(c.hub.builtins.chat.webhook.is_none());
    assert!(
        c.warnings[0].contains("webhook provider is off"),
        "{:?}",
        c.warnings
    );
    let errs = f.err_short(
        r#"{"openpact": {"builtins": {"calendars": [{"name": "x"}], "github": {}}}}"#,
        &[],
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
}
