//! Code mode doing real work: programs that call the real filesystem, memory, time and
//! everything servers and the fixture catalogues with canned data (`--data`), through
//! `openpact serve` with `"codeMode": {"mode": "on"}`. Each program's result is checked
//! against an answer worked out here, from the files the test wrote or the data file the
//! fixture answers from, never from what the hub said.
//!
//! The real peers come from `.ci/peers.sh`; without them the tests that need them print
//! SKIPPED and pass, unless `OPENPACT_REQUIRE_PEERS=1`. The tracker's tests need only the
//! fixture.

use crate::http_face::Http;
use crate::support::{Client, FIXTURE, Hub, Peers, Scratch, is_error, s, serve, serve_with};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The fixture catalogues and their canned data.
const CATALOGUES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/catalogues");

/// The SQL whose rows `postgres.data.json` holds: the top five customers by revenue.
const TOP_CUSTOMERS: &str = "SELECT c.id, c.name, sum(o.total_cents) AS revenue_cents FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name ORDER BY revenue_cents DESC LIMIT 5";

/// A fixture serving catalogue `name` and answering from its data file.
fn catalogue(name: &str) -> Value {
    json!({"command": FIXTURE, "args": [
        "--tools-file", format!("{CATALOGUES}/{name}.json"),
        "--data", format!("{CATALOGUES}/{name}.data.json"),
    ]})
}

/// The canned answers of catalogue `name`.
fn data(name: &str) -> Value {
    let path = format!("{CATALOGUES}/{name}.data.json");
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// The result of the first case of `tool` in `data` whose `when` is exactly `when` (`None`:
/// the fallback without one).
fn canned<'d>(data: &'d Value, tool: &str, when: Option<Value>) -> &'d Value {
    data[tool]
        .as_array()
        .unwrap()
        .iter()
        .find(|case| case.get("when") == when.as_ref())
        .unwrap_or_else(|| panic!("no case of {tool} when {when:?}"))
}

/// A Starlark string literal of `text` (JSON's escapes are Starlark's too).
fn lit(text: &str) -> String {
    json!(text).to_string()
}

/// The `openpact` settings of every hub here: code mode on, and a `listWait` long enough for
/// mcp-server-time and node servers starting on a busy machine.
fn code_mode() -> Value {
    json!({"codeMode": {"mode": "on"}, "listWait": "60s"})
}

/// A hub in code mode over `servers`, initialized, its list showing `run_code`.
async fn code_hub(sc: &Scratch, servers: Value) -> Hub {
    let mut hub = serve(&sc.servers(servers, Some(code_mode()))).await;
    listing_run_code(&mut hub.client).await;
    hub
}

/// `initialize`, then a `tools/list` that must show code mode's tools (a list in code mode
/// names no upstream tool to wait for; calls wait `listWait` for servers still starting).
async fn listing_run_code(c: &mut Client) {
    c.initialize().await;
    let tools = c.list_tools().await;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(
        names.contains(&"run_code") && names.contains(&"search_tools"),
        "code mode lists {names:?}"
    );
}

/// What a `run_code` answer says: its text, without the note a program run without kernel
/// confinement gets (whether this machine confines is not what these tests are about).
fn said(r: &Value) -> String {
    assert!(r.get("error").is_none(), "run_code: {r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    match text.find("\n(The program ran unconfined") {
        Some(at) => text[..at].to_string(),
        None => text.to_string(),
    }
}

/// Runs `code` in session `c`; the answer's text and whether it is a tool error.
async fn run(c: &mut Client, code: &str) -> (String, bool) {
    let r = c.call("run_code", json!({"code": code})).await;
    (said(&r), is_error(&r))
}

/// Runs `code`, which must succeed; the program's value (its answer's last line, as JSON).
async fn value(c: &mut Client, code: &str) -> Value {
    let (text, failed) = run(c, code).await;
    assert!(!failed, "the program failed:\n{code}\n---\n{text}");
    let last = text.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not a JSON value ({e}): {text}"))
}

/// A folder the filesystem server may read, by its real path (server-filesystem compares
/// real paths).
fn folder(sc: &Scratch, name: &str) -> PathBuf {
    let dir = sc.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(&dir).unwrap()
}

/// A code-mode hub over the real filesystem server on a folder of [`fill_notes`]'s notes.
async fn notes_hub(sc: &Scratch, peers: &Peers) -> (PathBuf, Hub) {
    let notes = folder(sc, "notes");
    fill_notes(&notes);
    let hub = code_hub(
        sc,
        json!({"fs": peers.entry("PEER_FILESYSTEM", &[s(&notes)])}),
    )
    .await;
    (notes, hub)
}

/// Notes, some `.md` files mentioning the flux capacitor and some not, and other files
/// (and a folder named like a note) that mention it but are no notes.
fn fill_notes(dir: &Path) {
    let files = [
        (
            "arrival.md",
            "Arrival checklist\nThe flux capacitor needs 1.21 gigawatts.\n",
        ),
        ("budget.md", "# Budget\nNothing about time travel here.\n"),
        (
            "clock-tower.md",
            "Clock tower plan\n\nLightning strikes at 10:04; wire the flux capacitor to the hook.\n",
        ),
        ("diner.md", "Diner\nMilkshakes, no capacitors.\n"),
        (
            "enchantment.md",
            "# Enchantment under the sea\nBand list.\n",
        ),
        (
            "garage.md",
            "Garage inventory: the flux capacitor\nplutonium case, tools\n",
        ),
        ("hoverboard.md", "Hoverboard\nDoes not work on water.\n"),
        ("notes.txt", "the flux capacitor, but this is not a note\n"),
        ("schema.json", "{\"part\": \"flux capacitor\"}\n"),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    // More notes than `parallel` runs at once (codeMode.parallel, 8 by default).
    for day in 1..=6 {
        let text = format!("Log, day {day}\nA routine day at the lab.\n");
        std::fs::write(dir.join(format!("log-{day:02}.md")), text).unwrap();
    }
    let folder = dir.join("attic.md");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("inside.md"),
        "the flux capacitor, one level down\n",
    )
    .unwrap();
}

/// Read from the disk: the `.md` files directly in `dir` that mention `needle`, by name,
/// each with its first line.
fn mentioning(dir: &Path, needle: &str) -> Value {
    let mut hits: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .filter_map(|n| {
            let text = std::fs::read_to_string(dir.join(&n)).unwrap();
            let first = text.split('\n').next().unwrap().to_string();
            text.contains(needle).then_some((n, first))
        })
        .collect();
    hits.sort();
    Value::Array(
        hits.into_iter()
            .map(|(name, first)| json!({"name": name, "first": first}))
            .collect(),
    )
}

/// "List the folder, read every `.md` file, return the three that mention X with their
/// first line": one listing and the reads in one `parallel`, over the real
/// server-filesystem.
#[tokio::test]
async fn a_program_finds_the_notes_that_mention_a_word_over_the_real_filesystem() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (notes, mut hub) = notes_hub(&sc, &peers).await;

    let code = format!(
        r#"
root = {root}
listing = tools.fs.list_directory(path=root)["content"]
names = [l[len("[FILE] "):] for l in listing.split("\n") if l.startswith("[FILE] ") and l.endswith(".md")]
texts = parallel([["fs:read_text_file", {{"path": root + "/" + n}}] for n in names])
hits = [{{"name": n, "first": t["content"].split("\n")[0]}} for n, t in zip(names, texts) if "flux capacitor" in t["content"]]
print("read", len(names), "notes")
sorted(hits, key=lambda h: h["name"])
"#,
        root = lit(s(&notes))
    );
    let (text, failed) = run(&mut hub.client, &code).await;
    assert!(!failed, "{text}");
    let expected = mentioning(&notes, "flux capacitor");
    assert_eq!(
        expected.as_array().unwrap().len(),
        3,
        "the test's own notes"
    );
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("read 13 notes"), "{text}");
    let got: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(got, expected, "{text}");
    // Only what the program returned reached the client, not the notes themselves.
    assert!(
        !text.contains("gigawatts") && !text.contains("Milkshakes"),
        "{text}"
    );
}

/// Tracker issues that are open (not in a completed or canceled state) with more than two
/// comments, worked out from the tracker's canned data.
fn busy_open_issues(tracker: &Value) -> Value {
    let states = &canned(tracker, "list_issue_statuses", None)["result"]["states"];
    let closed: Vec<&str> = states
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "completed" || s["type"] == "canceled")
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let issues = &canned(tracker, "list_issues", None)["result"]["issues"];
    let busy: Vec<Value> = issues
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| !closed.contains(&i["state"]["name"].as_str().unwrap()))
        .filter_map(|i| {
            let id = i["identifier"].as_str().unwrap();
            let comments = &canned(tracker, "list_comments", Some(json!({"issueId": id})))["result"]
                ["comments"];
            let n = comments.as_array().unwrap().len();
            (n > 2).then(|| json!({"issue": id, "comments": n}))
        })
        .collect();
    Value::Array(busy)
}

/// The program that lists the open issues (states by their type, as a program would ask)
/// and fetches every one's comments at once.
const OPEN_ISSUES: &str = r#"
states = tools.tracker.list_issue_statuses()["states"]
closed = [s["name"] for s in states if s["type"] in ("completed", "canceled")]
issues = [i for i in tools.tracker.list_issues()["issues"] if i["state"]["name"] not in closed]
comments = parallel([["tracker:list_comments", {"issueId": i["identifier"]}] for i in issues])
"#;

/// "For every open issue in the tracker, fetch its comments and return those with more than
/// two", over the tracker catalogue answering from its data.
#[tokio::test]
async fn a_program_returns_the_open_issues_with_more_than_two_comments() {
    let sc = Scratch::new();
    let mut hub = code_hub(&sc, json!({"tracker": catalogue("tracker")})).await;
    let code = format!(
        r#"{OPEN_ISSUES}
[{{"issue": i["identifier"], "comments": len(c["comments"])}} for i, c in zip(issues, comments) if len(c["comments"]) > 2]
"#
    );
    let got = value(&mut hub.client, &code).await;
    let expected = busy_open_issues(&data("tracker"));
    assert!(
        expected.as_array().unwrap().len() >= 3,
        "the data has busy open issues: {expected}"
    );
    assert_eq!(got, expected);
}

/// The memory graph the rows of `postgres.data.json`'s top customers make: one entity per
/// customer with its id and revenue, each customer outranking the next.
fn customer_graph(rows: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let entities = rows
        .iter()
        .map(|r| {
            json!({"name": r["name"], "entityType": "customer", "observations": [
                format!("id {}", r["id"]),
                format!("revenue_cents {}", r["revenue_cents"]),
            ]})
        })
        .collect();
    let relations = rows
        .windows(2)
        .map(|w| json!({"from": w[0]["name"], "to": w[1]["name"], "relationType": "outranks"}))
        .collect();
    (entities, relations)
}

/// Sorted by their JSON text, for comparing sets.
fn sorted(mut items: Vec<Value>) -> Vec<Value> {
    items.sort_by_key(Value::to_string);
    items
}

/// "Copy these rows into memory entities and relations": rows from the postgres catalogue's
/// data into the real server-memory by `create_entities` and `create_relations`; a second
/// program reads the graph back, and the server's file holds it.
#[tokio::test]
async fn a_program_copies_database_rows_into_memory_entities_and_relations() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let store = folder(&sc, "memory");
    let file = store.join("memory.jsonl");
    let mut memory = peers.entry("PEER_MEMORY", &[]);
    memory["env"] = json!({"MEMORY_FILE_PATH": s(&file)});
    let mut hub = code_hub(
        &sc,
        json!({"postgres": catalogue("postgres"), "memory": memory}),
    )
    .await;

    let copy = format!(
        r#"
rows = tools.postgres.query(sql={sql})["rows"]
made = call("memory:create_entities", {{"entities": [
    {{"name": r["name"], "entityType": "customer",
      "observations": ["id %d" % r["id"], "revenue_cents %d" % r["revenue_cents"]]}}
    for r in rows]}})
linked = call("memory:create_relations", {{"relations": [
    {{"from": rows[i]["name"], "to": rows[i + 1]["name"], "relationType": "outranks"}}
    for i in range(len(rows) - 1)]}})
{{"entities": len(made["entities"]), "relations": len(linked["relations"])}}
"#,
        sql = lit(TOP_CUSTOMERS)
    );
    let rows = canned(
        &data("postgres"),
        "query",
        Some(json!({"sql": TOP_CUSTOMERS})),
    )["result"]["rows"]
        .as_array()
        .unwrap()
        .clone();
    let (entities, relations) = customer_graph(&rows);
    let got = value(&mut hub.client, &copy).await;
    assert_eq!(
        got,
        json!({"entities": entities.len(), "relations": relations.len()})
    );

    let graph = value(&mut hub.client, "tools.memory.read_graph()").await;
    let listed = |key: &str| {
        sorted(
            graph[key]
                .as_array()
                .unwrap_or_else(|| panic!("{graph}"))
                .clone(),
        )
    };
    assert_eq!(listed("entities"), sorted(entities.clone()), "{graph}");
    assert_eq!(listed("relations"), sorted(relations), "{graph}");
    // The server wrote what it was told, where its entry says.
    let stored = std::fs::read_to_string(&file).unwrap();
    for e in &entities {
        assert!(stored.contains(e["name"].as_str().unwrap()), "{stored}");
    }
}

/// A hub in code mode serving its stdio client and HTTP sessions; the base URL of the
/// HTTP face.
async fn code_hub_over_http(sc: &Scratch, servers: Value) -> (Hub, String) {
    let config = sc.servers(servers, Some(code_mode()));
    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], &[]).await;
    listing_run_code(&mut hub.client).await;
    let base = hub.http_base().await;
    (hub, base)
}

/// `keep` in one program and `kept` in the next of the same session: the second works on
/// what the first kept without it passing through the client; another session of the same
/// hub does not see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_values_carry_from_one_program_to_the_next_of_a_session_only() {
    let sc = Scratch::new();
    let (mut hub, base) = code_hub_over_http(&sc, json!({"tracker": catalogue("tracker")})).await;
    let tracker = data("tracker");

    let first = format!(
        r#"{OPEN_ISSUES}
busy = [i["identifier"] for i, c in zip(issues, comments) if len(c["comments"]) > 2]
keep("busy", busy)
len(busy)
"#
    );
    let expected = busy_open_issues(&tracker);
    let busy: Vec<&str> = expected
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["issue"].as_str().unwrap())
        .collect();
    let (text, failed) = run(&mut hub.client, &first).await;
    assert!(!failed, "{text}");
    assert_eq!(
        text,
        busy.len().to_string(),
        "only the count reaches the client"
    );

    let second = r#"
ids = kept("busy")
[tools.tracker.get_issue(id=i)["title"] for i in ids]
"#;
    let titles: Vec<Value> = busy
        .iter()
        .map(|id| canned(&tracker, "get_issue", Some(json!({"id": id})))["result"]["title"].clone())
        .collect();
    assert_eq!(value(&mut hub.client, second).await, Value::Array(titles));

    // Another client session of the same hub has kept nothing.
    let mut other = Http::at(format!("{base}/mcp"));
    other.initialize(json!({})).await;
    let r = other
        .call(
            1,
            "run_code",
            json!({"code": "[kept(\"busy\"), kept(\"nothing\")]"}),
        )
        .await;
    assert_eq!(said(&r), "[null,null]", "{r}");
    // Freeing it in the first session leaves nothing there either.
    let (text, failed) = run(&mut hub.client, "keep(\"busy\", None)\nkept(\"busy\")").await;
    assert!(!failed, "{text}");
    assert_eq!(
        text,
        "(The program printed nothing and its last expression was None.)"
    );
}

/// A tool's error fails the program with the tool's own words (`call`), or comes back as a
/// value the program goes on from (`try_call`, `parallel(fail=False)`): over the real
/// server-filesystem (a file that is not there) and the tracker's canned error.
#[tokio::test]
async fn tool_errors_fail_a_program_or_are_returned_as_values() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let notes = folder(&sc, "notes");
    fill_notes(&notes);
    let missing = notes.join("missing.md");
    let present = notes.join("garage.md");
    let mut hub = code_hub(
        &sc,
        json!({"fs": peers.entry("PEER_FILESYSTEM", &[s(&notes)]), "tracker": catalogue("tracker")}),
    )
    .await;

    // `call`: the program stops at the error; what it printed before stays.
    let code = format!(
        "print(\"before\")\ncall(\"fs:read_text_file\", {{\"path\": {}}})\nprint(\"after\")",
        lit(s(&missing))
    );
    let (text, failed) = run(&mut hub.client, &code).await;
    assert!(failed, "{text}");
    assert!(text.starts_with("before\nThe program failed: "), "{text}");
    assert!(!text.contains("after"), "{text}");
    assert!(
        text.contains("ENOENT") && text.contains(s(&missing)),
        "{text}"
    );

    // The tracker's own error text, from its data, through the attribute form.
    let tracker = data("tracker");
    let not_found = canned(&tracker, "get_issue", None)["error"]
        .as_str()
        .unwrap();
    let (text, failed) = run(&mut hub.client, "tools.tracker.get_issue(id=\"ENG-999\")").await;
    assert!(failed, "{text}");
    assert!(
        text.starts_with("The program failed: ") && text.contains(not_found),
        "{text}"
    );

    // `try_call` and `parallel(fail=False)`: the error is a value and the program goes on.
    let code = format!(
        r#"
gone = try_call("fs:read_text_file", {{"path": {missing}}})
there = try_call("fs:read_text_file", {{"path": {present}}})
both = parallel([["tracker:get_issue", {{"id": "ENG-999"}}], ["tracker:get_issue", {{"id": "ENG-3"}}]], fail=False)
{{"gone": gone, "there": there, "both": both, "went_on": True}}
"#,
        missing = lit(s(&missing)),
        present = lit(s(&present)),
    );
    let got = value(&mut hub.client, &code).await;
    assert_eq!(got["gone"]["ok"], false, "{got}");
    let error = got["gone"]["error"].as_str().unwrap();
    assert!(
        error.contains("ENOENT") && error.contains(s(&missing)),
        "{got}"
    );
    let garage = std::fs::read_to_string(&present).unwrap();
    assert_eq!(
        got["there"],
        json!({"ok": true, "value": {"content": garage}})
    );
    let eng3 = &canned(&tracker, "get_issue", Some(json!({"id": "ENG-3"})))["result"];
    assert_eq!(
        got["both"],
        json!([{"ok": false, "error": not_found}, {"ok": true, "value": eng3}])
    );
    assert_eq!(got["went_on"], true);
}

/// The PNG data of server-everything's tiny image, read from the server's own source.
fn tiny_image(peers: &Peers) -> String {
    let dir = peers.vars["OPENPACT_PEERS_DIR"].as_str().unwrap();
    let source = Path::new(dir)
        .join("node_modules/@modelcontextprotocol/server-everything/dist/tools/get-tiny-image.js");
    let js = std::fs::read_to_string(&source).unwrap();
    let start = js.find("MCP_TINY_IMAGE = \"").unwrap() + "MCP_TINY_IMAGE = \"".len();
    let end = start + js[start..].find('"').unwrap();
    js[start..end].to_string()
}

/// mcp-server-time and server-everything in one program: the hour and minute of the current
/// time summed by everything's `get-sum` and echoed; and everything's tiny image as a
/// descriptor without its data, unless the program asks for the raw result.
#[tokio::test]
async fn one_program_uses_the_time_and_everything_servers_and_images_stay_out() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let mut hub = code_hub(
        &sc,
        json!({"time": peers.entry("PEER_TIME", &[]), "everything": peers.entry("PEER_EVERYTHING", &[])}),
    )
    .await;

    let before = std::time::SystemTime::now();
    let code = r#"
now = tools.time.get_current_time(timezone="UTC")
clock = now["datetime"][11:16]
hour, minute = int(clock[:2]), int(clock[3:])
{"now": now, "sum": tools.everything.get_sum(a=hour, b=minute), "echo": tools.everything.echo(message=now["datetime"])}
"#;
    let got = value(&mut hub.client, code).await;
    let now = &got["now"];
    assert_eq!(now["timezone"], "UTC", "{got}");
    let datetime = now["datetime"].as_str().unwrap();
    // The time is this machine's: within the minute around the program.
    let stamp = chrono::DateTime::parse_from_rfc3339(datetime).unwrap();
    let at = chrono::DateTime::<chrono::Utc>::from(before);
    assert!(
        (stamp.timestamp() - at.timestamp()).abs() < 60,
        "{datetime} vs {at}"
    );
    let (hour, minute): (u32, u32) = (
        datetime[11..13].parse().unwrap(),
        datetime[14..16].parse().unwrap(),
    );
    assert_eq!(
        got["sum"],
        format!("The sum of {hour} and {minute} is {}.", hour + minute)
    );
    assert_eq!(got["echo"], format!("Echo: {datetime}"));

    let image = tiny_image(&peers);
    let (text, failed) = run(&mut hub.client, "tools.everything.get_tiny_image()").await;
    assert!(!failed, "{text}");
    assert!(
        !text.contains(&image[..40]),
        "base64 reached the model: {text}"
    );
    let got: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(got[0], "Here's the image you requested:", "{got}");
    assert_eq!(got[1]["type"], "image", "{got}");
    assert_eq!(got[1]["mimeType"], "image/png", "{got}");
    assert_eq!(got[1]["bytes"], image.len() / 4 * 3, "{got}");
    assert!(got[1].get("data").is_none(), "{got}");
    assert_eq!(got[2], "The image above is the MCP logo.", "{got}");

    let raw = r#"
r = call("everything:get-tiny-image", {}, raw=True)
[b for b in r["content"] if b["type"] == "image"][0]["data"]
"#;
    assert_eq!(value(&mut hub.client, raw).await, json!(image));
}

/// `search_tools` in code mode shows the real filesystem's `read_text_file` as the Starlark
/// call that invokes it; a program written from that signature, both its forms, reads the
/// file.
#[tokio::test]
async fn search_shows_a_real_tool_as_a_starlark_call_and_a_program_written_from_it_works() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (notes, mut hub) = notes_hub(&sc, &peers).await;

    let r = hub
        .client
        .call(
            "search_tools",
            json!({"query": "read the contents of a text file", "limit": 3}),
        )
        .await;
    assert!(!is_error(&r), "{r}");
    let found = r["result"]["content"][0]["text"].as_str().unwrap();
    // The match's block: its signature, then its lines up to the next blank one.
    let block: Vec<&str> = found
        .split("\n\n")
        .find(|b| b.starts_with("tools.fs.read_text_file("))
        .unwrap_or_else(|| panic!("no signature of fs:read_text_file in:\n{found}"))
        .lines()
        .collect();
    let line = block[0];
    assert!(
        line.starts_with("tools.fs.read_text_file(path: str, "),
        "{line}"
    );
    assert!(
        line.contains("head: float = None") && line.ends_with(") -> dict"),
        "{line}"
    );
    let or = "  or: call(\"fs:read_text_file\", {\"path\": ...})";
    for want in [or, "  path (str, required)", "  returns: {content: str}"] {
        assert!(block.contains(&want), "{want:?} not in:\n{found}");
    }
    assert!(
        block
            .iter()
            .any(|l| l.starts_with("  head (float, optional): ")),
        "{found}"
    );

    // Programs as the block spells them: the callee before `(` with `path` by keyword (and
    // the optional `head`), and the call form with its dict; each result's `content`.
    let callee = &line[..line.find('(').unwrap()];
    let path = lit(s(&notes.join("clock-tower.md")));
    let dict_form = or.trim().trim_start_matches("or: ").replace("...", &path);
    let code = format!(
        "[{callee}(path={path})[\"content\"], {callee}(path={path}, head=1)[\"content\"], {dict_form}[\"content\"]]"
    );
    let text = std::fs::read_to_string(notes.join("clock-tower.md")).unwrap();
    let first = text.lines().next().unwrap();
    assert_eq!(
        value(&mut hub.client, &code).await,
        json!([text, first, text])
    );
}

/// Reading big files in one `parallel`: answers too big to hand the program at once fail
/// the call with a message naming the limit (`fail=False`: only as many as must, the rest
/// arrive), where the program used to end with "the program's worker ended (exit status:
/// 0)" and no word of why.
#[tokio::test]
async fn answers_too_big_to_take_in_at_once_fail_naming_the_limit() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let logs = folder(&sc, "logs");
    // Nine of these are over the 32 MiB a program takes in at once; eight are not.
    let line = format!("{}log line!\n", "0123456789".repeat(9));
    let size = 4_000_000;
    std::fs::write(logs.join("big.log"), line.repeat(size / line.len())).unwrap();
    let mut hub = code_hub(
        &sc,
        json!({"fs": peers.entry("PEER_FILESYSTEM", &[s(&logs)])}),
    )
    .await;
    let reads = format!(
        "[[\"fs:read_text_file\", {{\"path\": {}}}]] * 9",
        lit(s(&logs.join("big.log")))
    );

    let (text, failed) = run(&mut hub.client, &format!("len(parallel({reads}))")).await;
    assert!(failed, "{text}");
    assert!(
        text.contains("fs:read_text_file: the answer is 3.")
            && text.contains(" MiB, and a program takes in at most 32 MiB at once"),
        "{text}"
    );

    let code = format!(
        "[len(r[\"value\"][\"content\"]) if r[\"ok\"] else r[\"error\"] for r in parallel({reads}, fail=False)]"
    );
    let got = value(&mut hub.client, &code).await;
    let got = got.as_array().unwrap();
    let (whole, refused): (Vec<&Value>, Vec<&Value>) = got.iter().partition(|v| v.is_u64());
    assert_eq!(refused.len(), 1, "{got:?}");
    assert!(
        refused[0].as_str().unwrap().contains("at most 32 MiB"),
        "{got:?}"
    );
    assert!(whole.iter().all(|n| **n == json!(size)), "{got:?}");
}
