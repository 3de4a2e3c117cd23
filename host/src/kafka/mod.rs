//! Kafka I/O, all through rdkafka: the worker's shared producer (acknowledgements routed back to
//! the task that sent each record), consumers for sink tasks, and topic creation.

pub mod consumer;
pub mod delivery;
pub mod fetch_queues;
pub mod headers;
pub mod producer;
pub mod topics;

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;

/// Settings common to every client of this worker.
pub fn base_config(bootstrap: &str, client_id: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        // Loopback clusters and the embedded broker advertise 127.0.0.1; don't try IPv6 first.
        .set("broker.address.family", "v4");
    config
}

/// Apply `key = value` overrides (a worker's `producer.*`, `consumer.*`, `admin.*`).
pub fn apply(config: &mut ClientConfig, overrides: &[(String, String)]) {
    for (k, v) in overrides {
        config.set(k, v);
    }
}

/// Routes librdkafka's logs and errors into tracing.
#[derive(Clone, Default)]
pub struct TracingContext;

impl ClientContext for TracingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", facility = fac, "{message}")
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", facility = fac, "{message}")
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", facility = fac, "{message}")
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", facility = fac, "{message}")
            }
        }
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        tracing::warn!(target: "librdkafka", "{error}: {reason}");
    }
}

impl rdkafka::consumer::ConsumerContext for TracingContext {}
