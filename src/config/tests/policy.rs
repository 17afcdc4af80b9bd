//! `openpact.policy`: defaults and checks.

use super::*;

#[test]
fn policy_settings_parse_with_defaults_and_checks() {
    let f = Fixture::new();
    let c = f.ok(r#"{"mcpServers": {"time": {"command": "tool"}}}"#, &[]);
    let p = &c.hub.policy;
    assert_eq!(p.permissions.default, Rule::Ask);
    assert_eq!(p.permissions.non_interactive, Rule::Deny);
    assert_eq!(
        p.rate_limits.default,
        Some(Limit {
            per_second: 10.0,
            burst: 20
        })
    );
    assert!(p.audit.enabled && !p.audit.arguments);
    assert_eq!(p.cache.default, None);

    let c = f.ok(
        r#"{
          "mcpServers": {"time": {"command": "tool"}, "github": {"command": "tool"}},
          "openpact": {
            "permissions": {"default": "deny", "allow": ["time:*"], "ask": [], "deny": ["*:delete_*"], "nonInteractive": "allow", "promptTimeout": "5s"},
            "cache": {"default": "off", "rules": {"time:*": "30s", "github:x": "off"}, "trustReadOnlyHint": true, "maxBytes": "1MiB"},
            "rateLimits": {"default": "off", "servers": {"github": {"perSecond": 2, "burst": 5}}, "tools": {"github:create_issue": {"perSecond": 0.2, "burst": 1}}},
            "secrets": {"env": ["GITHUB_TOKEN"]},
            "audit": {"enabled": false, "arguments": true, "maxBytes": "32MiB"}
          }
        }"#,
        &[],
    );
    let p = &c.hub.policy;
    assert_eq!(p.permissions.default, Rule::Deny);
    assert_eq!(p.permissions.allow, ["time:*"]);
    assert_eq!(p.permissions.non_interactive, Rule::Allow);
    assert_eq!(p.permissions.prompt_timeout, Duration::from_secs(5));
    assert_eq!(
        p.cache.rules,
        [
            ("time:*".to_string(), Some(Duration::from_secs(30))),
            ("github:x".to_string(), None)
        ]
    );
    assert!(p.cache.trust_read_only_hint);
    assert_eq!(p.cache.max_bytes, 1024 * 1024);
    assert_eq!(p.rate_limits.default, None);
    assert_eq!(
        p.rate_limits.tools[0].1,
        Some(Limit {
            per_second: 0.2,
            burst: 1
        })
    );
    assert_eq!(p.secrets.env, ["GITHUB_TOKEN"]);
    assert!(!p.audit.enabled && p.audit.arguments);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    let errs = f.err_short(r#"{"openpact": {"permissions": {"default": "maybe", "allow": ["a:[x"]}, "rateLimits": {"default": {"perSecond": 0}}}}"#, &[]);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs[0].contains("openpact.permissions.default")
            && errs[0].contains("\"allow\", \"ask\", \"deny\"")
    );
    assert!(
        errs[1].contains("openpact.permissions.allow[0]") && errs[1].contains("not a valid glob")
    );
    assert!(errs[2].contains("openpact.rateLimits.default.perSecond"));

    let c = f.ok(r#"{"mcpServers": {"time": {"command": "tool"}}, "openpact": {"permissions": {"allow": ["tiem:*", "*:x"]}}}"#, &[]);
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(c.warnings[0].contains("\"tiem:*\" names server \"tiem\", which is not configured"));
}

/// A server with a `namespace` is named by it in every tool glob (its tools are
/// `gh:…`): a glob that uses the server's config name would never match, so it is an error
/// that says what to write, wherever it is — permissions, cache, rate limits, profiles,
/// alwaysLoad, the server's own filters — and a limit per server names the server as
/// mcpServers does.
#[test]
fn a_glob_naming_a_namespaced_server_by_its_config_name_is_an_error_with_the_fix() {
    let f = Fixture::new();
    let errs = f.err_short(
        r#"{
          "mcpServers": {
            "github": {"command": "tool", "namespace": "gh", "disabledTools": ["github:delete_*"]},
            "plain": {"command": "tool", "namespace": ""}
          },
          "openpact": {
            "permissions": {"allow": ["github:get_*", "gh:list_*"], "deny": ["github:crash", "plain:rm"]},
            "cache": {"rules": {"github:x": "1m"}},
            "rateLimits": {"servers": {"gh": {"perSecond": 1, "burst": 1}}, "tools": {"github:y": {"perSecond": 1, "burst": 1}}},
            "toolSearch": {"alwaysLoad": ["github:get_me"]},
            "profiles": {"p": {"servers": ["gh"], "tools": ["!github:create_*"], "toolSearch": {"alwaysLoad": ["github:z"]}}}
          }
        }"#,
        &[],
    );
    let expect = [
        r#"openpact.permissions.allow: "github:get_*" names server "github" by its config name, but its tools are named "gh:…" (its namespace), so it would never match; write "gh:get_*""#,
        r#"openpact.permissions.deny: "github:crash" names server "github" by its config name, but its tools are named "gh:…" (its namespace), so it would never match; write "gh:crash""#,
        r#"openpact.permissions.deny: "plain:rm" names server "plain" by its config name, but its tools have no prefix (namespace ""), so it would never match; write "rm""#,
        r#"write "gh:x""#,
        r#"write "gh:y""#,
        r#"openpact.rateLimits.servers: "gh" is the namespace of server "github"; limits per server name the server as mcpServers does: write "github""#,
        r#"openpact.toolSearch.alwaysLoad: "github:get_me""#,
        r#"openpact.profiles.p.servers[0]: "gh" is not a configured server (it is the namespace of server "github"; a profile names servers as mcpServers does: write "github")"#,
        r#"openpact.profiles.p.tools: "!github:create_*" names server "github" by its config name, but its tools are named "gh:…" (its namespace), so it would never match; write "!gh:create_*""#,
        r#"openpact.profiles.p.toolSearch.alwaysLoad: "github:z""#,
        r#"mcpServers.github.disabledTools: "github:delete_*" would never match: disabledTools names the server's own tools, without a prefix; write "delete_*""#,
    ];
    for e in expect {
        assert!(
            errs.iter().any(|p| p.contains(e)),
            "missing {e}\nin {errs:#?}"
        );
    }
    assert_eq!(errs.len(), expect.len(), "{errs:#?}");
    // Named as its tools are, every rule is fine.
    f.ok(
        r#"{
          "mcpServers": {"github": {"command": "tool", "namespace": "gh", "enabledTools": ["get_*"]}},
          "openpact": {"permissions": {"deny": ["gh:crash"]}, "rateLimits": {"servers": {"github": {"perSecond": 1, "burst": 1}}},
                       "profiles": {"p": {"servers": ["github"], "tools": ["!gh:create_*"]}}}
        }"#,
        &[],
    );
}

/// `openpact.flows`: label globs checked as rules are, the guard's three settings, and
/// "did you mean" for a misspelt key.
#[test]
fn flows_settings_are_read_and_checked() {
    use crate::config::FlowGuard;
    let f = Fixture::new();
    let c = f.ok(r#"{"mcpServers": {"time": {"command": "tool"}}}"#, &[]);
    assert_eq!(c.hub.policy.flows.guard, FlowGuard::Ask);
    let c = f.ok(
        r#"{"mcpServers": {"time": {"command": "tool"}}, "openpact": {"flows": {"private": ["time:*"], "untrusted": ["web_fetch"], "egress": ["time:send_*"], "guard": "deny"}}}"#,
        &[],
    );
    let flows = &c.hub.policy.flows;
    assert_eq!(flows.private, ["time:*"]);
    assert_eq!(flows.untrusted, ["web_fetch"]);
    assert_eq!(flows.egress, ["time:send_*"]);
    assert_eq!(flows.guard, FlowGuard::Deny);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let errs = f.err_short(
        r#"{"openpact": {"flows": {"private": ["a:[x"], "guard": "maybe"}}}"#,
        &[],
    );
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs.iter()
            .any(|e| e.contains("openpact.flows.private[0]") && e.contains("not a valid glob")),
        "{errs:#?}"
    );
    assert!(errs.iter().any(|e| e.contains("openpact.flows.guard") && e.contains("\"ask\", \"deny\", \"off\"")), "{errs:#?}");
    let errs = f.err_short(r#"{"openpact": {"flows": {"egres": []}}}"#, &[]);
    assert!(
        errs[0].contains("openpact.flows.egres: unknown key (ignored); did you mean `egress`?"),
        "{errs:#?}"
    );
    let c = f.ok(r#"{"mcpServers": {"time": {"command": "tool"}}, "openpact": {"flows": {"egress": ["tiem:*"]}}}"#, &[]);
    assert!(
        c.warnings[0].contains("openpact.flows.egress")
            && c.warnings[0].contains("\"tiem:*\" names server \"tiem\", which is not configured"),
        "{:?}",
        c.warnings
    );
    // A misspelt `flows` itself gets its suggestion.
    let c = f.loose(r#"{"openpact": {"flow": {}}}"#, &[]);
    assert!(
        c.warnings[0].contains("did you mean `flows`"),
        "{:?}",
        c.warnings
    );
}
