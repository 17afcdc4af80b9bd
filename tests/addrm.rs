//! `openpact add`, `remove`, `add --registry` and `registry search`, as a person runs them:
//! the config edited in place (its comments kept), refusals with the way out, secrets kept out
//! of the file as `${VAR}` references, a running hub picking the change up without a restart,
//! and the MCP Registry played by a loopback stand-in serving `server.json` documents written
//! to the published schema (fixtures/registry/README.md).

use crate::support::{
    FIXTURE, OPENPACT, Ran, Scratch, Stand, WAIT, json_reply, ready, runner_stand_in, serve_with,
    state_dir, wait_for_tools,
};
use serde_json::{Value, json};
use std::path::Path;

const ORIGINAL: &str = "{\n  // the user's own note, kept by every edit\n  \"mcpServers\": {\n    \"a\": {\"command\": \"echo\"} // first\n  }\n}\n";

/// `openpact --config CONFIG ARGS…` run to its end with `env` added (and only the scratch's
/// `bin` and the system's folders on PATH, so which runners exist is the test's choice).
async fn run(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let bin = config.parent().unwrap().join("bin");
    let mut cmd = tokio::process::Command::new(OPENPACT);
    cmd.arg("--config")
        .arg(config)
        .args(args)
        .env("OPENPACT_STATE_DIR", state_dir(config))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env_remove("OPENPACT_CONFIG")
        .env_remove("OPENPACT_REGISTRY_URL")
        .envs(env.iter().copied());
    Ran::of(cmd, args, WAIT).await
}

fn read(config: &Path) -> String {
    std::fs::read_to_string(config).unwrap()
}

fn config_with_note(sc: &Scratch) -> std::path::PathBuf {
    let config = sc.path().join("mcp.json");
    std::fs::write(&config, ORIGINAL).unwrap();
    config
}

#[tokio::test]
async fn add_and_remove_both_forms_keeping_comments_and_secrets_out() {
    let sc = Scratch::new();
    let config = config_with_note(&sc);
    let stdio = run(
        &config,
        &[
            "add",
            "gh",
            "--env",
            "GITHUB_TOKEN=ghp_not_written",
            "--env",
            "LOG=debug",
            "--namespace",
            "github",
            "--",
            FIXTURE,
            "--flag",
        ],
        &[],
    )
    .await;
    stdio.expect_code(0);
    assert!(stdio.stdout.contains("GITHUB_TOKEN"), "{stdio}");
    let remote = run(
        &config,
        &[
            "add",
            "api",
            "--url",
            "https://mcp.example.com/mcp",
            "--header",
            "Authorization: Bearer sk-not-written",
            "--header",
            "X-Team: blue",
            "--json",
        ],
        &[],
    )
    .await;
    let done = remote.json();
    assert_eq!(done["set"][0]["name"], "API_TOKEN", "{done}");
    let text = read(&config);
    assert!(
        !text.contains("not_written") && !text.contains("not-written"),
        "{text}"
    );
    assert!(text.starts_with("{\n  // the user's own note"), "{text}");
    assert!(
        text.contains("\"a\": {\"command\": \"echo\"}, // first\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "    \"gh\": {{\"command\": \"{FIXTURE}\", \"args\": [\"--flag\"], \"env\": {{\"GITHUB_TOKEN\": \"${{GITHUB_TOKEN}}\", \"LOG\": \"debug\"}}, \"namespace\": \"github\"}},\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "\"headers\": {\"Authorization\": \"Bearer ${API_TOKEN}\", \"X-Team\": \"blue\"}"
        ),
        "{text}"
    );
    // The file passes the check once the variables the commands named are set.
    run(
        &config,
        &["config", "check"],
        &[("GITHUB_TOKEN", "t"), ("API_TOKEN", "t")],
    )
    .await
    .expect_code(0);

    // A name already there: refused, with the way out, and nothing changed.
    let again = run(&config, &["add", "gh", "--", "echo"], &[]).await;
    again.expect_code(1);
    assert!(again.stderr.contains("openpact remove gh"), "{again}");
    // An unknown name: refused with the nearest one.
    let typo = run(&config, &["remove", "gx"], &[]).await;
    typo.expect_code(1);
    assert!(typo.stderr.contains("did you mean gh?"), "{typo}");

    run(&config, &["remove", "api"], &[]).await.expect_code(0);
    run(&config, &["remove", "gh"], &[]).await.expect_code(0);
    assert_eq!(read(&config), ORIGINAL);
}

#[tokio::test]
async fn add_makes_a_missing_config() {
    let sc = Scratch::new();
    let config = sc.path().join("new").join("mcp.json");
    run(&config, &["add", "f", "--", "echo", "hi"], &[])
        .await
        .expect_code(0);
    assert_eq!(
        read(&config),
        "{\n  \"mcpServers\": {\n    \"f\": {\"command\": \"echo\", \"args\": [\"hi\"]}\n  }\n}\n"
    );
}

#[tokio::test]
async fn a_running_hub_shows_an_added_server_and_drops_a_removed_one() {
    let sc = Scratch::new();
    let config = sc.servers(json!({"a": {"command": FIXTURE}}), None);
    let mut hub = serve_with(&config, &[], &[]).await;
    ready(&mut hub.client, &["a:echo"]).await;
    let fixture = FIXTURE.to_string();
    run(&config, &["add", "b", "--", &fixture], &[])
        .await
        .expect_code(0);
    wait_for_tools(
        &mut hub.client,
        |names| names.iter().any(|n| n == "b:echo"),
        WAIT,
    )
    .await;
    run(&config, &["remove", "b"], &[]).await.expect_code(0);
    let tools = wait_for_tools(
        &mut hub.client,
        |names| !names.iter().any(|n| n.starts_with("b:")),
        WAIT,
    )
    .await;
    assert!(
        tools.iter().any(|t| t["name"] == "a:echo"),
        "a's tools stay: {tools:?}"
    );
}

/// The registry stand-in: each fixture document as a `ServerResponse`, found by a search
/// matching its name, or fetched at `versions/latest`.
fn registry() -> Stand {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/registry");
    let docs: Vec<Value> = ["weather-npm.json", "notes-pypi.json", "tickets-remote.json"]
        .iter()
        .map(|f| serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap())
        .collect();
    let wrap = |d: &Value| {
        json!({"server": d, "_meta": {"io.modelcontextprotocol.registry/official": {
            "status": "active", "publishedAt": "2025-11-01T10:00:00Z", "isLatest": true}}})
    };
    Stand::start(move |seen| {
        let url = seen.url.as_str();
        if let Some(query) = url.strip_prefix("/v0.1/servers?search=") {
            let query = query.split('&').next().unwrap_or_default();
            let found: Vec<Value> = docs
                .iter()
                .filter(|d| d["name"].as_str().unwrap().contains(query))
                .map(wrap)
                .collect();
            let count = found.len();
            return json_reply(200, json!({"servers": found, "metadata": {"count": count}}));
        }
        for d in &docs {
            let name = d["name"].as_str().unwrap().replace('/', "%2F");
            if url == format!("/v0.1/servers/{name}/versions/latest") {
                return json_reply(200, wrap(d));
            }
        }
        json_reply(404, json!({"error": "Server not found"}))
    })
}

#[tokio::test]
async fn add_from_the_registry_and_search_it() {
    let reg = registry();
    let sc = Scratch::new();
    let config = config_with_note(&sc);
    runner_stand_in(&sc, "npx");
    runner_stand_in(&sc, "uvx");
    let url = reg.base.clone();
    let with_registry = [("OPENPACT_REGISTRY_URL", url.as_str())];

    let found = run(
        &config,
        &["registry", "search", "openpact-test", "--json"],
        &with_registry,
    )
    .await;
    let found = found.json();
    let names: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "io.github.openpact-test/weather",
            "io.github.openpact-test/notes",
            "io.github.openpact-test/tickets"
        ]
    );
    let human = run(
        &config,
        &["registry", "search", "notes", "--registry-url", &url],
        &[],
    )
    .await;
    human.expect_code(0);
    assert!(
        human.stdout.contains("io.github.openpact-test/notes") && human.stdout.contains("pypi"),
        "{human}"
    );

    let npm = run(
        &config,
        &["add", "--registry", "io.github.openpact-test/weather"],
        &with_registry,
    )
    .await;
    npm.expect_code(0);
    assert!(npm.stdout.contains("npx is on PATH"), "{npm}");
    let pypi = run(
        &config,
        &[
            "add",
            "--registry",
            "io.github.openpact-test/notes",
            "--json",
        ],
        &with_registry,
    )
    .await;
    let done = pypi.json();
    let set: Vec<&str> = done["set"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(set, ["NOTES_API_KEY", "NOTES_WORKSPACE"], "{done}");
    assert!(
        done["notes"].to_string().contains("NOTES_LOG_LEVEL"),
        "{done}"
    );
    let remote = run(
        &config,
        &[
            "add",
            "--registry",
            "io.github.openpact-test/tickets",
            "tix",
        ],
        &with_registry,
    )
    .await;
    remote.expect_code(0);
    assert!(remote.stdout.contains("remote only"), "{remote}");
    let missing = run(
        &config,
        &["add", "--registry", "io.github.openpact-test/nothing"],
        &with_registry,
    )
    .await;
    missing.expect_code(2);
    assert!(missing.stderr.contains("registry search"), "{missing}");

    let text = read(&config);
    assert!(text.starts_with("{\n  // the user's own note"), "{text}");
    // The file's two comments are whole lines or ` // …` line ends.
    let json_only: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| l.split(" // ").next().unwrap())
        .collect();
    let raw: Value = serde_json::from_str(&json_only.join("\n")).unwrap();
    let servers = &raw["mcpServers"];
    assert_eq!(
        servers["weather"],
        json!({"command": "npx", "args": ["-y", "@openpact-test/weather-mcp@1.2.0", "--units", "metric"]})
    );
    assert_eq!(
        servers["notes"],
        json!({"command": "uvx", "args": ["openpact-test-notes-mcp==0.4.1"],
               "env": {"NOTES_API_KEY": "${NOTES_API_KEY}", "NOTES_WORKSPACE": "${NOTES_WORKSPACE}"}})
    );
    assert_eq!(
        servers["tix"],
        json!({"url": "https://eu.tickets.example.com/mcp", "headers": {"Authorization": "${TIX_AUTHORIZATION}"}})
    );
    run(
        &config,
        &["config", "check"],
        &[
            ("NOTES_API_KEY", "k"),
            ("NOTES_WORKSPACE", "w"),
            ("TIX_AUTHORIZATION", "Bearer t"),
        ],
    )
    .await
    .expect_code(0);
}
