//! `initialize` through the hub: it declares what server-everything offers, and a client
//! that initializes late sees the ready server's capabilities and instructions.

use super::{QUIET, Side, open_all, start_all};
use crate::support::{Peers, Scratch, WAIT};
use serde_json::{Value, json};
use std::collections::BTreeSet;

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
    let (direct, hubs) = open_all(&peers, &sc).await;
    assert_eq!(direct.init["serverInfo"]["name"], "mcp-servers/everything");
    assert_everything_caps(Side::Direct, &direct.init["capabilities"]);
    for hub in &hubs {
        assert_eq!(hub.init["serverInfo"]["name"], "openpact", "{:?}", hub.side);
        assert_everything_caps(hub.side, &hub.init["capabilities"]);
        // What the hub can bridge, `tasks` included (it runs and follows tasks itself).
        let keys: BTreeSet<&str> = hub.init["capabilities"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                "tools",
                "resources",
                "prompts",
                "completions",
                "logging",
                "tasks"
            ]),
            "{:?}: {:#}",
            hub.side,
            hub.init
        );
    }
}

/// A client that initializes only once server-everything is ready gets the capabilities
/// (and instructions) of the real server, not the "still starting: everything" answer; and
/// since it came after the hub's wait for the client (3 s), server-everything was told no client capability:
/// the hub lists what server-everything lists to a client declaring none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_initialize_sees_the_ready_server() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (mut direct, mut hubs) = start_all(&peers, &sc, async |_| {}).await;
    for hub in &mut hubs {
        hub.hub().wait_log("ready server=everything", WAIT).await;
    }
    for p in std::iter::once(&mut direct).chain(&mut hubs) {
        p.initialize(json!({})).await;
        p.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_everything_caps(p.side, &p.init["capabilities"]);
    }
    let own = direct.init["instructions"]
        .as_str()
        .expect("server-everything has instructions")
        .to_string();
    // server-everything registers its conditional tools after `initialized`.
    direct.settle(QUIET).await;
    let d = direct.list_bare("tools/list", "tools").await;
    for hub in &mut hubs {
        let side = hub.side;
        let all = hub.init["instructions"]
            .as_str()
            .unwrap_or_else(|| panic!("{side:?}: no instructions: {:#}", hub.init));
        assert!(
            all.contains(&format!("## everything\n{}", own.trim())),
            "{side:?}: {all}"
        );
        let h = hub.list_bare("tools/list", "tools").await;
        assert_eq!(h, d, "{side:?}");
    }
    let names: Vec<&str> = d.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(!names.contains(&"get-roots-list"), "{names:?}");
    assert!(names.contains(&"get-sum"), "{names:?}");
}
