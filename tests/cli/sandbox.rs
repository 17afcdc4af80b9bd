//! `openpact sandbox allow`: the config edited in place (comments, layout and mode kept), the
//! folder made, what is there already left alone, and each refusal said with nothing changed.

use super::{Cli, stdout_json, with_servers};
use crate::support::FIXTURE;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

/// The fixture as `fx` (no `sandbox` key), `off` unconfined, `on` with `"sandbox": true`,
/// written as JSONC with comments and a trailing comma, mode 0640.
fn jsonc() -> (Cli, String) {
    let cli = with_servers(json!({}), None);
    let text = format!(
        "{{\n  // my servers\n  \"mcpServers\": {{\n    \"fx\": {{\n      \"command\": \"{FIXTURE}\", // the fixture\n    }},\n    \"off\": {{\"command\": \"{FIXTURE}\", \"sandbox\": false}},\n    \"on\": {{\"command\": \"{FIXTURE}\", \"sandbox\": true /* default profile */}}\n  }}\n}}\n"
    );
    std::fs::write(&cli.cfg, &text).unwrap();
    std::fs::set_permissions(&cli.cfg, std::fs::Permissions::from_mode(0o640)).unwrap();
    (cli, text)
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn sandbox_allow_edits_the_config_in_place_and_makes_the_folder() {
    let (cli, before) = jsonc();
    let out = cli
        .run(&["sandbox", "allow", "fx", "write", "~/.app"])
        .await;
    out.expect_code(0);
    assert!(
        out.stdout.contains("fx: allowed write ~/.app"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("no openpact serve is running"),
        "{}",
        out.stdout
    );
    let after = std::fs::read_to_string(&cli.cfg).unwrap();
    assert_eq!(
        after,
        before.replace(
            "\"command\": \"FX\", // the fixture\n".replace("FX", FIXTURE).as_str(),
            &"\"command\": \"FX\", // the fixture\n      \"sandbox\": {\"filesystem\": {\"write\": [\"~/.app\"]}},\n"
                .replace("FX", FIXTURE)
        )
    );
    assert_eq!(mode(&cli.cfg), 0o640, "the file's mode is kept");
    let folder = cli.sc.path().join("home/.app");
    assert!(folder.is_dir());
    assert_eq!(mode(&folder), 0o700);
    // The config still loads, with the grant.
    cli.run(&["config", "check"]).await.expect_code(0);

    // Again: there already, nothing changed.
    let again = cli.run(&["sandbox", "allow", "fx", "w", "~/.app"]).await;
    again.expect_code(0);
    assert!(
        again.stdout.contains("allowed already; nothing changed"),
        "{}",
        again.stdout
    );
    assert_eq!(std::fs::read_to_string(&cli.cfg).unwrap(), after);

    // `"sandbox": true` becomes the object; the comment beside it stays; --json says what.
    let out = cli
        .run(&[
            "sandbox",
            "allow",
            "on",
            "net",
            "api.example.com",
            "*.example.org",
            "--json",
        ])
        .await;
    out.expect_code(0);
    let v = stdout_json(&out);
    assert_eq!(v["server"], "on");
    assert_eq!(v["kind"], "net");
    assert_eq!(v["added"], json!(["api.example.com", "*.example.org"]));
    assert_eq!(v["hubs"], json!([]));
    let text = std::fs::read_to_string(&cli.cfg).unwrap();
    assert!(
        text.contains("\"sandbox\": {\"network\": {\"allow\": [\"api.example.com\", \"*.example.org\"]}} /* default profile */"),
        "{text}"
    );
    assert!(text.contains("// my servers") && text.contains("// the fixture"));
}

#[tokio::test]
async fn sandbox_allow_refuses_clearly_and_changes_nothing() {
    let (cli, before) = jsonc();
    let refused = |args: &'static [&'static str], want: &'static str| {
        let cli = &cli;
        let before = &before;
        async move {
            let out = cli.run(args).await;
            assert_ne!(out.code, Some(0), "{args:?} should be refused");
            assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
            assert_eq!(
                &std::fs::read_to_string(&cli.cfg).unwrap(),
                before,
                "{args:?}"
            );
        }
    };
    refused(
        &["sandbox", "allow", "fz", "write", "~/.x"],
        "no server named fz; did you mean fx?",
    )
    .await;
    refused(
        &["sandbox", "allow", "off", "write", "~/.x"],
        "\"sandbox\": false",
    )
    .await;
    refused(
        &["sandbox", "allow", "fx", "wrte", "~/.x"],
        "not a kind of grant; use one of write, read, net, socket",
    )
    .await;
    // What the config check would then report.
    refused(
        &["sandbox", "allow", "fx", "net", "bad host"],
        "sandbox.network.allow[0]: `bad host` contains whitespace",
    )
    .await;
    refused(
        &["sandbox", "allow", "fx", "write", "/nonexistent-dir/x"],
        "create it with `mkdir -p /nonexistent-dir/x`",
    )
    .await;
    assert!(!cli.sc.path().join("home/.x").exists());

    // A config that does not load is not edited; where it breaks is said.
    let broken = before.replace("\"off\": {", "\"off\": {,");
    std::fs::write(&cli.cfg, &broken).unwrap();
    let out = cli.run(&["sandbox", "allow", "fx", "write", "~/.x"]).await;
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("does not load") && out.stderr.contains(":7:"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&cli.cfg).unwrap(), broken);
}
