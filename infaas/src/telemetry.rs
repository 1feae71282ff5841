//! Logging set-up: human-readable text or JSON lines.

use tracing_subscriber::{fmt, EnvFilter};

use infaas_control::config::LogFormat;

pub fn init(format: LogFormat, level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if let Err(e) = result {
        eprintln!("logging was already initialised: {e}");
    }
}
