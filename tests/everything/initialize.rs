//! `initialize` through the hub: it declares what server-everything offers, and a client
//! that initializes late sees the ready server's capabilities and instructions.

use super::{Conn, Peer, QUIET, Side, open_both};
use crate::support::{Peers, Scratch, WAIT};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// What server-everything offers, as both it and the hub must declare it.
fn assert_everything_caps(side: Side, caps: &Value) {
    assert_eq!(caps["resources"]["subscribe"], true, "{side:?}: {caps:#}");
    for cap in ["tools", "resources", "prompts", "completions", "logging"] {
        assert!(caps[cap].is_object(), "{side:?}: no {cap} in {caps:#}");
    }
    assert_eq!(caps["tools"]["listChanged"], true, "{side:?}: {caps:#}");
    assert_eq!(caps["prompts"]["listChanged"], true, "{side:?}: {caps:#}");
    assert_eq!(caps["resources"]["listChanged"], true, "{side:?}: {caps:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_initialize_declares_what_everything_offers() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (direct, hub) = open_both(&peers, &sc).await;
    assert_eq!(direct.init["serverInfo"]["name"], "mcp-servers/everything");
    assert_eq!(hub.init["serverInfo"]["name"], "openpact");
    assert_everything_caps(Side::Direct, &direct.init["capabilities"]);
    assert_everything_caps(Side::Hub, &hub.init["capabilities"]);
    // Only what the hub can bridge: server-everything's experimental `tasks` is not relayed.
    let keys: BTreeSet<&str> = hub.init["capabilities"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["tools", "resources", "prompts", "completions", "logging"]),
        "{:#}",
        hub.init
    );
}

/// A client that initializes only once server-everything is ready gets the capabilities
/// (and instructions) of the real server, not the "still starting: everything" answer; and
/// since it came after the hub's 1 s wait, server-everything was told no client capability:
/// the hub lists what server-everything lists to a client declaring none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_initialize_sees_the_ready_server() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (mut direct, mut hub) = tokio::join!(
        Peer::start(Side::Direct, &peers, &sc),
        Peer::start(Side::Hub, &peers, &sc)
    );
    let deadline = Instant::now() + WAIT;
    let stderr = loop {
        let Conn::Hub(h) = &hub.conn else {
            unreachable!()
        };
        let text = h.stderr();
        if text.contains("ready server=everything") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "everything not ready within {WAIT:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(stderr.contains("ready server=everything"));
    for p in [&mut direct, &mut hub] {
        p.initialize(json!({})).await;
        p.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_everything_caps(p.side, &p.init["capabilities"]);
    }
    let own = direct.init["instructions"]
        .as_str()
        .expect("server-everything has instructions");
    let all = hub.init["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("no instructions: {:#}", hub.init));
    assert!(
        all.contains(&format!("## everything\n{}", own.trim())),
        "{all}"
    );
    // server-everything registers its conditional tools after `initialized`.
    direct.settle(QUIET).await;
    let d = direct.list_bare("tools/list", "tools").await;
    let h = hub.list_bare("tools/list", "tools").await;
    assert_eq!(h, d);
    let names: Vec<&str> = d.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(!names.contains(&"get-roots-list"), "{names:?}");
    assert!(names.contains(&"get-sum"), "{names:?}");
}
