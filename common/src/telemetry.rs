//! One `init()` for structured logs and traces: an env filter (`RUST_LOG`, default
//! `info`), text or JSON lines (`PROBACTR_LOG_FORMAT`), and, when the standard `OTEL_*`
//! variables name an OTLP endpoint, spans exported over OTLP/HTTP (protobuf). Spans carry
//! `job.id`, `run.id`, `executor.id`.
//!
//! Without an endpoint no tracing layer is installed: spans cost what they cost before.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::config::{Config, LogFormat};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Whether traces are exported (set once by [`init`]); read on the hot path as one load.
static TRACING: AtomicBool = AtomicBool::new(false);
/// The tracer spans with explicit times are made with (queue wait, fire).
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether this process exports traces.
pub fn tracing_on() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// The tracer of this process, when it exports traces.
pub(crate) fn tracer() -> Option<&'static SdkTracer> {
    if tracing_on() {
        TRACER.get()
    } else {
        None
    }
}

/// What [`init`] installed; [`Telemetry::shutdown`] flushes the spans not yet exported.
#[derive(Debug, Default)]
#[must_use = "call shutdown() on the way out so the last spans are exported"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Exports what is buffered and stops the exporter (a clean exit's last step).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            TRACING.store(false, Ordering::Relaxed);
            if let Err(err) = provider.shutdown() {
                tracing::warn!(error = %err, "exporting the last spans failed");
            }
        }
    }
}

/// Installs the global subscriber, and the OTLP exporter when `OTEL_*` asks for one; a
/// second call installs nothing (tests start processes in-process more than once).
/// `service` names the process when `OTEL_SERVICE_NAME` does not.
pub fn init(config: &Config, service: &'static str) -> Telemetry {
    let filter = EnvFilter::try_new(&config.log_filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let colours = std::io::stderr().is_terminal();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colours);
    let exporter = match otlp_settings() {
        Ok(true) => build_provider(service).map(Some).map_err(|err| err.to_string()),
        Ok(false) => Ok(None),
        Err(why) => Err(why),
    };
    let (provider, problem) = match exporter {
        Ok(provider) => (provider, None),
        Err(why) => (None, Some(why)),
    };
    // Each format is its own (monomorphised) stack: no dynamic call per log line.
    let installed = match config.log_format {
        LogFormat::Json => install(fmt.json().flatten_event(true), provider.as_ref(), filter),
        LogFormat::Text => install(fmt.with_target(false), provider.as_ref(), filter),
    };
    if let Some(why) = problem {
        tracing::error!(error = %why, "traces are not exported");
    }
    let Some(provider) = provider.filter(|_| installed) else {
        return Telemetry::default();
    };
    let _first = TRACER.set(provider.tracer("probactr"));
    crate::run_trace::set_cluster_seed(&config.redis_prefix, &config.database_url);
    TRACING.store(true, Ordering::Relaxed);
    tracing::info!("exporting traces over OTLP");
    Telemetry {
        provider: Some(provider),
    }
}

/// Installs logs in `fmt` and, with a provider, spans exported through it, both under
/// `filter`; false when a subscriber was already installed.
fn install<F>(fmt: F, provider: Option<&SdkTracerProvider>, filter: EnvFilter) -> bool
where
    F: Layer<Registry> + Send + Sync + 'static,
{
    let otel = provider.map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("probactr"))
            .with_tracked_inactivity(false)
    });
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .with(filter)
        .try_init()
        .is_ok()
}

/// Whether the standard variables ask for OTLP traces: an endpoint is set, the SDK is
/// not disabled, the traces exporter is not `none`; the protocol, when set, must be
/// `http/protobuf` (the one this build speaks).
fn otlp_settings() -> Result<bool, String> {
    let set = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
    let endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"));
    if endpoint.is_none()
        || set("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|value| value.eq_ignore_ascii_case("none"))
    {
        return Ok(false);
    }
    let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match protocol.as_deref() {
        None | Some("http/protobuf") => Ok(true),
        Some(other) => Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL: {other:?} is not supported; use http/protobuf"
        )),
    }
}

/// The provider: a batch exporter over OTLP/HTTP. Endpoint, headers and timeout come from
/// the `OTEL_EXPORTER_OTLP_*` variables, the sampler from `OTEL_TRACES_SAMPLER(_ARG)`, the
/// resource from `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (the SDK reads them).
fn build_provider(
    service: &'static str,
) -> Result<SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()?;
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service);
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_id_generator(crate::run_trace::DerivedIds::default())
        .with_resource(resource.build())
        .build())
}

/// Installs the Prometheus recorder. With `listen` set (`PROBACTR_METRICS_LISTEN`) it
/// serves `/metrics` there; the returned handle renders the text for a process that
/// serves it itself (the manager). A second call returns None (the recorder is global).
pub fn install_metrics(
    listen: Option<std::net::SocketAddr>,
) -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    let builder = metrics_exporter_prometheus::PrometheusBuilder::new();
    match listen {
        Some(address) => {
            let (recorder, exporter) = match builder.with_http_listener(address).build() {
                Ok(built) => built,
                Err(err) => {
                    tracing::error!(%address, error = %err, "cannot serve metrics");
                    return None;
                }
            };
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                return None;
            }
            tokio::spawn(async move {
                if let Err(err) = exporter.await {
                    tracing::error!(error = ?err, "metrics listener stopped");
                }
            });
            tracing::info!(%address, "serving Prometheus metrics at /metrics");
            Some(handle)
        }
        None => builder.install_recorder().ok(),
    }
}
