//! The embedded Kafka-compatible broker: started in-process when the worker config names no
//! `bootstrap.servers`, so the quickstart needs no Kafka install. Everything else talks to it
//! through the same rdkafka code path as to a real cluster.

#[cfg(feature = "embedded-broker")]
mod embedded;

#[cfg(feature = "embedded-broker")]
pub use embedded::EmbeddedBroker;

/// Stand-in when the worker is built without the `embedded-broker` feature.
#[cfg(not(feature = "embedded-broker"))]
pub struct EmbeddedBroker;

#[cfg(not(feature = "embedded-broker"))]
impl EmbeddedBroker {
    /// Always fails: this build has no embedded broker.
    pub async fn start(_data_dir: &std::path::Path, _listener: &str) -> Result<Self, String> {
        Err("bootstrap.servers: this wasm-connect was built without the embedded broker; name a Kafka cluster in bootstrap.servers".to_owned())
    }

    /// The address clients connect to.
    pub fn bootstrap(&self) -> &str {
        ""
    }
}
