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
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};

use crate::kafka::producer_config;
use rdkafka::producer::Producer as _;

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

/// Send `count` datagen records to `topic`; returns once all are acknowledged. With `warm_up`
/// (an existing topic), first wait until a record sent there is acknowledged.
pub fn source(
    bootstrap: &str,
    topic: &str,
    count: u64,
    value_size: usize,
    warm_up: Option<&str>,
) -> Result<()> {
    let acked = Arc::new(AtomicU64::new(0));
    let producer: ThreadedProducer<Acks> =
        producer_config(bootstrap).create_with_context(Acks(Arc::clone(&acked)))?;
    if let Some(warm_up) = warm_up {
        warm(&producer, warm_up, &acked)?;
    }
    send_batched(&producer, topic, count, value_size)?;
    let acked = acked.load(Ordering::Relaxed);
    if acked != count {
        bail!("{acked} of {count} records acknowledged");
    }
    report_peak();
    Ok(())
}

/// Send one record to `topic` and wait for its acknowledgement: then the client knows the
/// cluster and has its producer id, as the worker's long-lived producer has by the time a task
/// sends. Without it librdkafka held every record for about 500 ms (its idempotent producer id
/// comes on a 500 ms retry timer when no broker is connected yet), by when the whole run was
/// queued: the broker's append times then measured only the sending of a ready backlog, not
/// the records' generation and queueing.
fn warm(producer: &ThreadedProducer<Acks>, topic: &str, acked: &AtomicU64) -> Result<()> {
    producer
        .send(BaseRecord::<(), str>::to(topic).payload("warm-up"))
        .map_err(|(e, _)| anyhow::anyhow!("cannot send the warm-up record to {topic}: {e}"))?;
    producer.flush(Duration::from_secs(30))?;
    if acked.swap(0, Ordering::Relaxed) != 1 {
        bail!("the warm-up record to {topic} was not acknowledged");
    }
    Ok(())
}

/// Records handed to librdkafka per call, as many as the worker polls from a plugin at a time.
const BATCH: u64 = 2000;

/// Queue datagen's records `0..count` `BATCH` at a time with librdkafka's batch call
/// (`rd_kafka_produce_batch`), as the worker does for records without headers or timestamps,
/// and flush. (With one `send` per record instead the baseline measured no faster: this is the
/// stricter ceiling.)
fn send_batched(
    producer: &ThreadedProducer<Acks>,
    topic: &str,
    count: u64,
    value_size: usize,
) -> Result<()> {
    use rdkafka::bindings as rdsys;
    let name = std::ffi::CString::new(topic)?;
    // SAFETY: the client outlives the handle, which is destroyed below.
    let rkt = unsafe {
        rdsys::rd_kafka_topic_new(
            producer.client().native_ptr(),
            name.as_ptr(),
            std::ptr::null_mut(),
        )
    };
    if rkt.is_null() {
        bail!("no topic handle for {topic}");
    }
    let mut start = 0;
    while start < count {
        let records: Vec<(String, String)> = (start..count.min(start + BATCH))
            .map(|id| crate::kafka::record(id, value_size))
            .collect();
        let mut messages: Vec<rdsys::rd_kafka_message_t> = records
            .iter()
            .map(|(key, value)| rdsys::rd_kafka_message_t {
                err: rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
                rkt: std::ptr::null_mut(),
                partition: -1,
                payload: value.as_ptr().cast_mut().cast(),
                len: value.len(),
                key: key.as_ptr().cast_mut().cast(),
                key_len: key.len(),
                offset: 0,
                _private: std::ptr::null_mut(),
            })
            .collect();
        let mut from = 0;
        while from < messages.len() {
            let rest = &mut messages[from..];
            // SAFETY: the messages point into `records`, alive across the call; librdkafka
            // copies them and writes only `err`.
            unsafe {
                rdsys::rd_kafka_produce_batch(
                    rkt,
                    -1,
                    rdsys::RD_KAFKA_MSG_F_COPY | rdsys::RD_KAFKA_MSG_F_PARTITION,
                    rest.as_mut_ptr(),
                    rest.len() as i32,
                )
            };
            match rest
                .iter()
                .position(|m| m.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR)
            {
                None => from = messages.len(),
                Some(i)
                    if rest[i].err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__QUEUE_FULL =>
                {
                    from += i;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Some(i) => bail!(
                    "record {} refused: {:?}",
                    start + (from + i) as u64,
                    rest[i].err
                ),
            }
        }
        start += records.len() as u64;
    }
    // SAFETY: created above, destroyed once, before the client.
    unsafe { rdsys::rd_kafka_topic_destroy(rkt) };
    producer.flush(Duration::from_secs(300))?;
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
