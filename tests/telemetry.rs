//! `openpact.telemetry`: the hub's spans and metrics as a real OTLP/HTTP receiver gets them
//! (built on the official `opentelemetry-proto` definitions), one trace from a client's
//! `traceparent` through the hub to the `traceparent` a fixture server received; and with
//! telemetry off, nothing exported and nothing injected.

use crate::support::{Scratch, fixture, ready, s, serve_with};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What the receiver got: each request's path and body.
type Posts = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A loopback OTLP/HTTP receiver: answers every POST with an empty (valid) protobuf export
/// response and keeps its body.
struct Receiver {
    url: String,
    posts: Posts,
    server: Arc<tiny_http::Server>,
}

impl Receiver {
    fn start() -> Receiver {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let url = format!("http://{}", server.server_addr().to_ip().unwrap());
        let posts = Posts::default();
        let (srv, got) = (server.clone(), posts.clone());
        std::thread::spawn(move || {
            for mut request in srv.incoming_requests() {
                let mut body = Vec::new();
                let _ = std::io::Read::read_to_end(request.as_reader(), &mut body);
                got.lock().unwrap().push((request.url().to_string(), body));
                let header =
                    tiny_http::Header::from_bytes("Content-Type", "application/x-protobuf");
                let _ =
                    request.respond(tiny_http::Response::empty(200).with_header(header.unwrap()));
            }
        });
        Receiver { url, posts, server }
    }

    fn spans(&self) -> Vec<Span> {
        self.bodies("/v1/traces")
            .iter()
            .map(|b| ExportTraceServiceRequest::decode(b.as_slice()).expect("a trace export"))
            .flat_map(|r| r.resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }

    fn service_names(&self) -> Vec<String> {
        self.bodies("/v1/traces")
            .iter()
            .map(|b| ExportTraceServiceRequest::decode(b.as_slice()).unwrap())
            .flat_map(|r| r.resource_spans)
            .filter_map(|r| r.resource)
            .filter_map(|r| text(&r.attributes, "service.name"))
            .collect()
    }

    fn metric_names(&self) -> Vec<String> {
        self.bodies("/v1/metrics")
            .iter()
            .map(|b| ExportMetricsServiceRequest::decode(b.as_slice()).expect("a metrics export"))
            .flat_map(|r| r.resource_metrics)
            .flat_map(|r| r.scope_metrics)
            .flat_map(|s| s.metrics)
            .map(|m| m.name)
            .collect()
    }

    fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        let posts = self.posts.lock().unwrap();
        posts
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match value.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(i) => Some(i.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// The `_meta` objects the fixture recorded, one per `tools/call`.
fn recorded(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
const SECRET: &str = "argument-value-that-must-not-be-exported";

/// The environment of a hub under test: exports flushed fast, and no `OTEL_*` of the
/// machine's that would turn telemetry on or point it elsewhere.
const QUICK: [(&str, &str); 4] = [
    ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
];

/// A client's `tools/call` with a `traceparent` becomes one trace: the hub's server span is
/// the client span's child, the policy stages and the upstream client span its children, and
/// the server receives a `traceparent` whose parent is the hub's client span. Span names and
/// attributes follow the MCP conventions, the operation-duration histograms arrive, and the
/// call's argument value is nowhere in the export. A server entry with `"telemetry": false`
/// gets the client's `_meta` as it was.
#[tokio::test]
async fn a_call_is_one_trace_from_the_client_through_the_hub_to_the_server() {
    let receiver = Receiver::start();
    let sc = Scratch::new();
    let (meta, quiet_meta) = (sc.path().join("meta.jsonl"), sc.path().join("quiet.jsonl"));
    let mut quiet = fixture(&["--record-meta", s(&quiet_meta)]);
    quiet["telemetry"] = json!(false);
    let config = sc.servers(
        json!({"fx": fixture(&["--record-meta", s(&meta)]), "quiet": quiet}),
        Some(json!({
            "telemetry": {"otlp": receiver.url, "serviceName": "openpact-test"},
            // The fixtures write what they received into the scratch dir.
            "sandbox": {"default": "off"},
        })),
    );
    let mut hub = serve_with(&config, &[], &QUICK).await;
    ready(&mut hub.client, &["fx:echo", "quiet:echo"]).await;
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    for tool in ["fx:echo", "quiet:echo"] {
        let r = hub
            .client
            .request(
                "tools/call",
                json!({
                    "name": tool,
                    "arguments": {"message": SECRET},
                    "_meta": {"traceparent": traceparent, "tracestate": "vendor=1"},
                }),
            )
            .await;
        assert_eq!(r["result"]["content"][0]["text"], SECRET, "{r}");
    }
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0), "{}", hub.stderr());

    let spans = receiver.spans();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let [server] = named("tools/call fx:echo")[..] else {
        panic!("one server span for the call: {names:?}");
    };
    assert_eq!(server.kind, SpanKind::Server as i32);
    assert_eq!(hex(&server.trace_id), TRACE_ID, "the client's trace");
    assert_eq!(
        hex(&server.parent_span_id),
        CLIENT_SPAN,
        "the client's span is the parent"
    );
    for (key, want) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "fx:echo"),
        ("gen_ai.operation.name", "execute_tool"),
        ("jsonrpc.request.id", "3"),
    ] {
        let got = text(&server.attributes, key);
        if key == "jsonrpc.request.id" {
            assert!(got.is_some(), "{key} on the server span");
        } else {
            assert_eq!(got.as_deref(), Some(want), "{key} on the server span");
        }
    }
    for stage in ["look up", "admit", "dispatch", "settle"] {
        let ours = named(stage)
            .into_iter()
            .filter(|s| s.parent_span_id == server.span_id)
            .count();
        assert_eq!(ours, 1, "stage {stage} under the server span: {names:?}");
    }
    let dispatch = named("dispatch")
        .into_iter()
        .find(|s| s.parent_span_id == server.span_id)
        .unwrap();
    let client = named("tools/call echo")
        .into_iter()
        .find(|s| s.parent_span_id == dispatch.span_id)
        .expect("the upstream request's client span, under dispatch");
    assert_eq!(client.kind, SpanKind::Client as i32);
    assert_eq!(hex(&client.trace_id), TRACE_ID);
    assert_eq!(
        text(&client.attributes, "gen_ai.tool.name").as_deref(),
        Some("echo")
    );
    assert!(text(&client.attributes, "mcp.protocol.version").is_some());

    // What the server received: the same trace, its parent the hub's client span.
    let got = recorded(&meta);
    assert_eq!(got.len(), 1, "{got:?}");
    let received = got[0]["traceparent"].as_str().expect("a traceparent");
    assert_eq!(
        received,
        format!("00-{TRACE_ID}-{}-01", hex(&client.span_id)),
        "the server's parent is the hub's upstream span"
    );
    assert_eq!(got[0]["tracestate"], "vendor=1", "tracestate carried on");
    // Opted out: the client's _meta reaches that server as it was sent.
    let quiet_got = recorded(&quiet_meta);
    assert_eq!(quiet_got.len(), 1, "{quiet_got:?}");
    assert_eq!(quiet_got[0]["traceparent"], traceparent.as_str());

    assert!(
        receiver
            .service_names()
            .iter()
            .all(|n| n == "openpact-test"),
        "{:?}",
        receiver.service_names()
    );
    let metrics = receiver.metric_names();
    for name in [
        "mcp.server.operation.duration",
        "mcp.client.operation.duration",
    ] {
        assert!(metrics.iter().any(|m| m == name), "{name} in {metrics:?}");
    }
    let everything: Vec<u8> = receiver
        .posts
        .lock()
        .unwrap()
        .iter()
        .flat_map(|(_, b)| b.clone())
        .collect();
    assert!(
        !everything
            .windows(SECRET.len())
            .any(|w| w == SECRET.as_bytes()),
        "an argument value was exported"
    );
}

/// Off (no `openpact.telemetry`; the endpoint variable set but `OTEL_SDK_DISABLED=true`):
/// nothing is sent, and a server gets no `traceparent` the client did not send.
#[tokio::test]
async fn with_telemetry_off_nothing_is_exported_or_injected() {
    let receiver = Receiver::start();
    let sc = Scratch::new();
    let meta = sc.path().join("meta.jsonl");
    let config = sc.servers(
        json!({"fx": fixture(&["--record-meta", s(&meta)])}),
        Some(json!({"sandbox": {"default": "off"}})),
    );
    let mut env = QUICK.to_vec();
    env.extend([
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
        ("OTEL_SDK_DISABLED", "true"),
    ]);
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["fx:echo"]).await;
    let r = hub.client.call("fx:echo", json!({"message": "hi"})).await;
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{r}");
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0));
    assert_eq!(recorded(&meta), [json!({})], "no _meta injected");
    assert!(receiver.posts.lock().unwrap().is_empty());
}

/// With `arguments` on, a call's span carries its arguments and its result, each redacted
/// with the secrets policy first: a secret's value never leaves in either.
#[tokio::test]
async fn opted_in_arguments_and_results_are_exported_redacted() {
    let receiver = Receiver::start();
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({
            "telemetry": {"otlp": receiver.url, "arguments": true},
            "secrets": {"env": ["OTEL_TEST_SECRET"]},
            "sandbox": {"default": "off"},
        })),
    );
    let mut env = QUICK.to_vec();
    env.push(("OTEL_TEST_SECRET", "hunter2-in-the-span"));
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["fx:echo"]).await;
    hub.client
        .call("fx:echo", json!({"message": "say hunter2-in-the-span"}))
        .await;
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0), "{}", hub.stderr());
    let spans = receiver.spans();
    let server = spans
        .iter()
        .find(|s| s.name == "tools/call fx:echo")
        .expect("the call's span");
    let arguments = text(&server.attributes, "gen_ai.tool.call.arguments").expect("arguments");
    let result = text(&server.attributes, "gen_ai.tool.call.result").expect("result");
    for value in [&arguments, &result] {
        assert!(value.contains("say [REDACTED:OTEL_TEST_SECRET]"), "{value}");
    }
    for body in receiver.bodies("/v1/traces") {
        let body = String::from_utf8_lossy(&body);
        assert!(!body.contains("hunter2"), "a secret left in the export");
    }
}
