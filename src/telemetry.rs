//! OpenTelemetry (`openpact.telemetry`): OTLP/HTTP export of the hub's MCP spans and the
//! `mcp.*.operation.duration` histograms, named per the MCP semantic conventions; trace
//! context read from and written to `params._meta` (SEP-414). Off by default, and then free:
//! no exporter, no layer, and every span helper here answers `Span::none()` after one load.
//!
//! The spans are made with `tracing` under [`TARGET`], which only the OpenTelemetry layer
//! listens to (the log output never shows them); `tracing-opentelemetry` turns them into
//! OpenTelemetry spans (`otel.name`, `otel.kind`, `otel.status_code` fields).

use crate::config::TelemetrySettings;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry::propagation::{TextMapCompositePropagator, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;
use tracing::Span;
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};

/// The `tracing` target of the telemetry spans: what the OpenTelemetry layer takes, and the
/// log output leaves out.
pub const TARGET: &str = "openpact::telemetry::span";

/// The trace-context keys of `params._meta` (SEP-414: W3C Trace Context and Baggage).
pub const META_KEYS: [&str; 3] = ["traceparent", "tracestate", "baggage"];

static ON: AtomicBool = AtomicBool::new(false);
static ARGUMENTS: AtomicBool = AtomicBool::new(false);
static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// Whether telemetry is exporting: the one check the hot path pays when it is off.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Whether spans carry the call's arguments and result (redacted):
/// `openpact.telemetry.arguments`.
pub fn arguments() -> bool {
    ARGUMENTS.load(Ordering::Relaxed)
}

/// Where and as what the hub exports, once the config and the environment are read.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The OTLP/HTTP traces URL (`…/v1/traces`).
    pub traces: String,
    /// The OTLP/HTTP metrics URL (`…/v1/metrics`).
    pub metrics: String,
    pub service_name: String,
    pub arguments: bool,
}

impl Export {
    /// The export `settings` and the environment (`env`) ask for, `None` when off. The
    /// standard variables win over the config: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (full URLs), `OTEL_EXPORTER_OTLP_ENDPOINT` (a
    /// base, as `otlp`) and `OTEL_SERVICE_NAME`; `OTEL_SDK_DISABLED=true` turns it off.
    pub fn resolve(
        settings: &TelemetrySettings,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<Export> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return None;
        }
        let base = var("OTEL_EXPORTER_OTLP_ENDPOINT")
            .map(|b| b.trim().trim_end_matches('/').to_string())
            .or_else(|| settings.otlp.clone());
        let traces = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        let metrics = var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
        if base.is_none() && traces.is_none() && metrics.is_none() {
            return None;
        }
        let under = |path: &str| {
            let base = base.as_deref().unwrap_or("http://localhost:4318");
            format!("{base}{path}")
        };
        Some(Export {
            traces: traces.unwrap_or_else(|| under("/v1/traces")),
            metrics: metrics.unwrap_or_else(|| under("/v1/metrics")),
            service_name: var("OTEL_SERVICE_NAME")
                .or_else(|| settings.service_name.clone())
                .unwrap_or_else(|| "openpact".into()),
            arguments: settings.arguments,
        })
    }
}

/// Why the exporters could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("OTLP {signal} exporter for {url}: {reason}")]
    Exporter {
        signal: &'static str,
        url: String,
        reason: String,
    },
}

/// The running exporters: [`Guard::shutdown`] flushes what is still buffered.
pub struct Guard {
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
}

impl Guard {
    /// Exports what is buffered and stops the exporters (at exit).
    pub fn shutdown(self) {
        ON.store(false, Ordering::Relaxed);
        if let Err(e) = self.tracer.shutdown() {
            tracing::warn!("telemetry: flushing traces failed: {e}");
        }
        if let Err(e) = self.meter.shutdown() {
            tracing::warn!("telemetry: flushing metrics failed: {e}");
        }
    }
}

/// The layer that turns [`TARGET`]'s spans into exported ones, and its exporters. Turns
/// the span helpers on.
pub fn start<S>(
    export: &Export,
) -> Result<(OpenTelemetryLayer<S, SdkTracer>, Guard), TelemetryError>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let failed = |signal, url: &str, e: &dyn std::fmt::Display| TelemetryError::Exporter {
        signal,
        url: url.to_string(),
        reason: e.to_string(),
    };
    // reqwest is built without a default crypto provider (an https:// collector needs one);
    // another part of the process may have installed ring already, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(export.service_name.clone())
        .build();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(&export.traces)
        .build()
        .map_err(|e| failed("traces", &export.traces, &e))?;
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(&export.metrics)
        .build()
        .map_err(|e| failed("metrics", &export.metrics, &e))?;
    let tracer = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let meter = SdkMeterProvider::builder()
        .with_periodic_exporter(metrics)
        .with_resource(resource)
        .build();
    let m = meter.meter("openpact");
    // The conventions' advised buckets (seconds).
    let buckets = vec![
        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    ];
    let histogram = |name: &'static str, what: &'static str| {
        m.f64_histogram(name)
            .with_unit("s")
            .with_description(what)
            .with_boundaries(buckets.clone())
            .build()
    };
    let _ = INSTRUMENTS.set(Instruments {
        server: histogram(
            "mcp.server.operation.duration",
            "Duration of MCP requests the hub served",
        ),
        client: histogram(
            "mcp.client.operation.duration",
            "Duration of MCP requests the hub sent to servers",
        ),
    });
    let layer = OpenTelemetryLayer::new(tracer.tracer("openpact"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false)
        .with_tracked_inactivity(false);
    ARGUMENTS.store(export.arguments, Ordering::Relaxed);
    ON.store(true, Ordering::Relaxed);
    Ok((layer, Guard { tracer, meter }))
}

struct Instruments {
    server: Histogram<f64>,
    client: Histogram<f64>,
}

/// Which side of an MCP request a span is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Side {
    /// A client's request the hub serves.
    Server,
    /// A request the hub sends a server.
    Client,
}

/// What a span says of its request.
#[derive(Debug, Default)]
pub struct Request<'a> {
    pub method: &'a str,
    /// `gen_ai.tool.name` (or the prompt's name) / `mcp.resource.uri`: the span name's target.
    pub tool: Option<&'a str>,
    pub uri: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub protocol_version: Option<&'a str>,
    pub session_id: Option<&'a str>,
}

/// One MCP operation being timed: its span, and what its duration is recorded with.
pub struct Operation {
    pub span: Span,
    side: Side,
    start: Instant,
    attributes: Vec<KeyValue>,
    error: Mutex<Option<String>>,
}

impl Operation {
    /// The span `{method} {target}` of `request` (a child of the current span), or `None`
    /// when telemetry is off.
    pub fn new(side: Side, request: &Request<'_>) -> Option<Operation> {
        if !on() {
            return None;
        }
        let target = request.tool.or(request.uri);
        let name = match target {
            Some(t) => format!("{} {t}", request.method),
            None => request.method.to_string(),
        };
        let kind = match side {
            Side::Server => "server",
            Side::Client => "client",
        };
        let prompt = request.method == "prompts/get";
        let tool_key = if prompt {
            "gen_ai.prompt.name"
        } else {
            "gen_ai.tool.name"
        };
        // Set at creation, not recorded after: each record is another pass through the layer.
        let span = tracing::info_span!(
            target: TARGET,
            "mcp",
            otel.name = %name,
            otel.kind = kind,
            otel.status_code = tracing::field::Empty,
            mcp.method.name = request.method,
            gen_ai.tool.name = request.tool.filter(|_| !prompt),
            gen_ai.prompt.name = request.tool.filter(|_| prompt),
            gen_ai.operation.name = (request.method == "tools/call").then_some("execute_tool"),
            gen_ai.tool.call.arguments = tracing::field::Empty,
            gen_ai.tool.call.result = tracing::field::Empty,
            mcp.resource.uri = request.uri,
            jsonrpc.request.id = request.request_id,
            mcp.protocol.version = request.protocol_version,
            mcp.session.id = request.session_id,
            error.type = tracing::field::Empty,
        );
        let mut attributes = vec![KeyValue::new("mcp.method.name", request.method.to_string())];
        if let Some(tool) = request.tool {
            attributes.push(KeyValue::new(tool_key, tool.to_string()));
        }
        if let Some(v) = request.protocol_version {
            attributes.push(KeyValue::new("mcp.protocol.version", v.to_string()));
        }
        Some(Operation {
            span,
            side,
            start: Instant::now(),
            attributes,
            error: Mutex::new(None),
        })
    }

    /// Marks the operation failed with `error_type` (a JSON-RPC code, `tool_error`, …).
    pub fn failed(&self, error_type: &str) {
        if let Ok(mut e) = self.error.lock() {
            *e = Some(error_type.to_string());
        }
    }

    /// Records the duration histogram and the outcome on the span (which ends when dropped).
    pub fn end(&self) {
        let error = self.error.lock().ok().and_then(|mut e| e.take());
        let mut attributes = self.attributes.clone();
        if let Some(error) = &error {
            self.span.record("error.type", error.as_str());
            self.span.record("otel.status_code", "ERROR");
            attributes.push(KeyValue::new("error.type", error.clone()));
        }
        if let Some(i) = INSTRUMENTS.get() {
            let histogram = match self.side {
                Side::Server => &i.server,
                Side::Client => &i.client,
            };
            histogram.record(self.start.elapsed().as_secs_f64(), &attributes);
        }
    }
}

/// A stage of the call pipeline (`look up`, `admit`, `dispatch`, `settle`) as a child span
/// of the current one; `Span::none()` when off.
#[inline]
pub fn stage(name: &'static str) -> Span {
    if !on() {
        return Span::none();
    }
    tracing::info_span!(target: TARGET, "stage", otel.name = name, openpact.stage = name)
}

/// Makes `span`'s parent the trace context in `meta` (the request's `_meta`, keys
/// [`META_KEYS`]), when it holds a valid `traceparent`.
pub fn adopt(span: &Span, meta: &HashMap<String, String>) {
    if !meta.contains_key("traceparent") {
        return;
    }
    let cx = propagator().extract(meta);
    let _ = span.set_parent(cx);
}

/// `span`'s trace context as `_meta` members (`traceparent`, and `tracestate` / `baggage`
/// when there are any).
pub fn context_of(span: &Span) -> HashMap<String, String> {
    let mut carrier = HashMap::new();
    propagator().inject_context(&span.context(), &mut carrier);
    carrier.retain(|_, v| !v.is_empty());
    carrier
}

/// W3C Trace Context and Baggage, built once: a request's extraction and injection then
/// allocate only what they carry.
fn propagator() -> &'static TextMapCompositePropagator {
    static PROPAGATOR: std::sync::LazyLock<TextMapCompositePropagator> =
        std::sync::LazyLock::new(|| {
            TextMapCompositePropagator::new(vec![
                Box::new(TraceContextPropagator::new()),
                Box::new(BaggagePropagator::new()),
            ])
        });
    &PROPAGATOR
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    /// Off unless the config or a standard variable turns it on; the variables win.
    #[test]
    fn the_environment_turns_export_on_and_overrides_the_config() {
        let off = TelemetrySettings::default();
        assert_eq!(Export::resolve(&off, &env(&[])), None);
        let config = TelemetrySettings {
            otlp: Some("http://collector:4318".into()),
            service_name: Some("hub-a".into()),
            arguments: false,
        };
        let e = Export::resolve(&config, &env(&[])).unwrap();
        assert_eq!(e.traces, "http://collector:4318/v1/traces");
        assert_eq!(e.metrics, "http://collector:4318/v1/metrics");
        assert_eq!(e.service_name, "hub-a");
        let e = Export::resolve(
            &off,
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318/"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/x"),
                ("OTEL_SERVICE_NAME", "svc"),
            ]),
        )
        .unwrap();
        assert_eq!(e.traces, "http://t:1/x");
        assert_eq!(e.metrics, "http://other:4318/v1/metrics");
        assert_eq!(e.service_name, "svc");
        let disabled = env(&[("OTEL_SDK_DISABLED", "true")]);
        assert_eq!(Export::resolve(&config, &disabled), None);
    }
}
