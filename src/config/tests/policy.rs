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
