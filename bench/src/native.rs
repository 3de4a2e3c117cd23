//! The native baselines, run as child processes of the harness (`native-source`,
//! `native-sink`): what rdkafka alone does with the same records and the same producer
//! settings as the worker. They are the ceiling wasm-connect is measured against.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryResult, ProducerContext, ThreadedProducer};

use crate::kafka::{producer_config, send_records};

struct Acks(Arc<AtomicU64>);

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if result.is_ok() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Send `count` datagen records to `topic`; returns once all are acknowledged.
pub fn source(bootstrap: &str, topic: &str, count: u64, value_size: usize) -> Result<()> {
    let acked = Arc::new(AtomicU64::new(0));
    let producer: ThreadedProducer<Acks> =
        producer_config(bootstrap).create_with_context(Acks(Arc::clone(&acked)))?;
    send_records(&producer, topic, count, value_size)?;
    let acked = acked.load(Ordering::Relaxed);
    if acked != count {
        bail!("{acked} of {count} records acknowledged");
    }
    report_peak();
    Ok(())
}

/// Copy `count` records of `topic` into `file`, one value per line.
pub fn sink(bootstrap: &str, topic: &str, count: u64, file: &str) -> Result<()> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("native-sink-{topic}"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    for (key, value) in wasm_connect::kafka::consumer::SETTINGS {
        config.set(*key, *value);
    }
    let consumer: BaseConsumer = config.create()?;
    consumer.subscribe(&[topic])?;
    let mut out = BufWriter::with_capacity(64 * 1024, File::create(file).context("output file")?);
    let mut seen = 0;
    while seen < count {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                out.write_all(message.payload().unwrap_or_default())?;
                out.write_all(b"\n")?;
                seen += 1;
            }
            Some(Err(e)) => eprintln!("consumer: {e}"),
            None => {}
        }
    }
    out.into_inner()
        .map_err(|e| anyhow::anyhow!("flush: {e}"))?
        .sync_data()?;
    report_peak();
    Ok(())
}

/// Print this process's peak memory for the harness (it cannot read it after the exit).
fn report_peak() {
    if let Some(kib) = crate::measure::status_kib(std::process::id(), "VmHWM:") {
        println!("peak_rss_kib={kib}");
    }
}
