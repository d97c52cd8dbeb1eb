//! Traces of runs over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (`stategraph_otel`): the
//! layer beside the log lines, and the flush before the process ends. The exporter's guard is
//! kept here, process-wide, because the process can end in two places: `App::run`'s return
//! and a forced quit on a second signal (`progress.rs`, `std::process::exit`, which runs no
//! destructors); both call [`finish`] first.

use std::sync::Mutex;

use stategraph_otel::OtelGuard;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

static GUARD: Mutex<Option<OtelGuard>> = Mutex::new(None);

/// The exporting layer when the environment asks for traces (its guard kept for [`finish`]);
/// `None`, at no cost, when it does not. A bad configuration is said once and the command goes
/// on without traces.
pub(crate) fn layer<S>(service: &str) -> Option<impl Layer<S> + Send + Sync + 'static>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    match stategraph_otel::layer_from_env::<S>(service) {
        Ok(Some((layer, guard))) => {
            if let Ok(mut slot) = GUARD.lock() {
                *slot = Some(guard);
            }
            Some(layer)
        }
        Ok(None) => None,
        Err(e) => {
            say!("warning: {e}");
            None
        }
    }
}

/// Sends the spans still buffered and stops the exporter (a no-op without traces).
pub(crate) fn finish() {
    let guard = GUARD.lock().ok().and_then(|mut slot| slot.take());
    drop(guard);
}
