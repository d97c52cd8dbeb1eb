//! Traces of stategraph runs over OTLP/HTTP, so Jaeger, Tempo or Honeycomb show a run as a tree.
//!
//! Layout: this one file. The engine and the crates above it only emit `tracing` spans
//! (`run` > `step` > `node` > `model_call` / `tool_call`, a subgraph's `run` under its parent's
//! `node`); this crate turns them into OpenTelemetry spans and ships them. It has one job:
//! build a `tracing-opentelemetry` layer from the standard `OTEL_*` environment
//! ([`layer_from_env`]), or install it as the global subscriber ([`init_from_env`]), and hand
//! back an [`OtelGuard`] whose drop flushes what is still buffered.
//!
//! Nothing is built, and nothing costs, when `OTEL_EXPORTER_OTLP_ENDPOINT` (nor
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. The exporter reads the rest itself:
//! `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the default, or `http/json`),
//! `OTEL_EXPORTER_OTLP_HEADERS` (e.g. `x-honeycomb-team=KEY`), `OTEL_EXPORTER_OTLP_TIMEOUT`;
//! the resource reads `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt as _;

/// The variable that turns exporting on: the collector's base URL (`/v1/traces` is added).
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The traces-only endpoint, used as given (no path added); it also turns exporting on.
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// Why traces could not be set up. The program can go on without them.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// The exporter refused its configuration (a malformed endpoint, protocol or header).
    #[error("cannot export traces to the OTLP endpoint in {ENDPOINT_VAR}: {0}; fix the OTEL_EXPORTER_OTLP_* variables or unset {ENDPOINT_VAR}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// Another global subscriber was already installed (by [`init_from_env`]'s caller).
    #[error("a tracing subscriber is already installed; add stategraph_otel::layer_from_env's layer to it instead")]
    AlreadyInstalled,
}

/// Flushes buffered spans and stops the exporter when dropped: hold it until the program's
/// last span has closed (before `std::process::exit`, which runs no destructors).
///
/// ```
/// // Without OTEL_EXPORTER_OTLP_ENDPOINT there is nothing to hold.
/// # std::env::remove_var("OTEL_EXPORTER_OTLP_ENDPOINT");
/// # std::env::remove_var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
/// let guard = stategraph_otel::init_from_env("my-agent").unwrap();
/// assert!(guard.is_none());
/// ```
#[must_use = "dropping the guard flushes and stops the exporter"]
pub struct OtelGuard {
    provider: SdkTracerProvider,
}

impl OtelGuard {
    /// Sends what is buffered now, keeping the exporter running.
    ///
    /// ```no_run
    /// if let Some(guard) = stategraph_otel::init_from_env("my-agent").unwrap() {
    ///     guard.flush();
    /// }
    /// ```
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            eprintln!("warning: traces not all sent to the OTLP endpoint: {e}");
        }
    }
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        // shutdown flushes the batch first; a collector that is down costs its timeout, once.
        if let Err(e) = self.provider.shutdown() {
            eprintln!("warning: traces not all sent to the OTLP endpoint: {e}");
        }
    }
}

/// Whether the environment asks for traces (`OTEL_EXPORTER_OTLP_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set and not empty).
///
/// ```
/// # std::env::remove_var("OTEL_EXPORTER_OTLP_ENDPOINT");
/// # std::env::remove_var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
/// assert!(!stategraph_otel::enabled());
/// ```
pub fn enabled() -> bool {
    [ENDPOINT_VAR, TRACES_ENDPOINT_VAR]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// The layer that exports stategraph's spans (targets `stategraph*`, info and up), and its
/// guard; `None` when the environment does not ask for traces. For a program that builds its
/// own subscriber (the `graph` CLI adds it beside its log lines).
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt as _;
/// use tracing_subscriber::util::SubscriberInitExt as _;
/// let (otel, _guard) = match stategraph_otel::layer_from_env("my-agent").unwrap() {
///     Some((layer, guard)) => (Some(layer), Some(guard)),
///     None => (None, None),
/// };
/// tracing_subscriber::registry().with(otel).init();
/// // ... run graphs; `_guard` flushes when main returns.
/// ```
pub fn layer_from_env<S>(
    default_service: &str,
) -> Result<Option<(impl Layer<S> + Send + Sync + 'static, OtelGuard)>, OtelError>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    if !enabled() {
        return Ok(None);
    }
    // reqwest's rustls has no crypto provider of its own here (ring is the workspace's); one
    // already installed by the program is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
    // With both HTTP encodings built in, the exporter's own default is JSON; the OTLP
    // default is protobuf, which every collector takes. The variables still choose.
    let asked = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some());
    if !asked {
        exporter = exporter.with_protocol(Protocol::HttpBinary);
    }
    let exporter = exporter.build()?;
    let mut resource = Resource::builder();
    // OTEL_SERVICE_NAME, read by the resource's own detector, wins over the program's name.
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(default_service.to_string());
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("stategraph");
    // Only stategraph's own spans: the exporter's HTTP client logs through tracing too, and
    // exporting those would feed the exporter its own requests.
    let filter = Targets::new().with_target("stategraph", LevelFilter::INFO);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(filter);
    Ok(Some((layer, OtelGuard { provider })))
}

/// Installs a global subscriber that exports stategraph's spans when the environment asks for
/// traces, and returns its guard (`None`, and nothing installed, when it does not). For a
/// program with no subscriber of its own; one that has one adds [`layer_from_env`]'s layer.
///
/// ```no_run
/// fn main() -> Result<(), stategraph_otel::OtelError> {
///     let _traces = stategraph_otel::init_from_env("my-agent")?;
///     // ... run graphs; spans are flushed when `_traces` drops.
///     Ok(())
/// }
/// ```
pub fn init_from_env(default_service: &str) -> Result<Option<OtelGuard>, OtelError> {
    let Some((layer, guard)) = layer_from_env(default_service)? else {
        return Ok(None);
    };
    tracing_subscriber::registry()
        .with(layer)
        .try_init()
        .map_err(|_| OtelError::AlreadyInstalled)?;
    Ok(Some(guard))
}
