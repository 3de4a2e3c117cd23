//! The real Apache Kafka broker of the tests (started by `scripts/kafka`), and plain rdkafka
//! clients to set up topics and read back what a worker wrote.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::repo_root;

/// The broker's address, starting it (once per test process) with the project's script.
pub fn bootstrap() -> String {
    static BOOTSTRAP: OnceLock<String> = OnceLock::new();
    BOOTSTRAP
        .get_or_init(|| {
            let output = Command::new(repo_root().join("scripts/kafka"))
                .arg("start")
                .output()
                .expect("run scripts/kafka start");
            assert!(
                output.status.success(),
                "scripts/kafka start failed:\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            let port = std::env::var("WASM_CONNECT_KAFKA_PORT").unwrap_or_else(|_| "19092".into());
            format!("127.0.0.1:{port}")
        })
        .clone()
}

/// Worker settings for the test broker, flushing offsets every `flush_ms`.
pub fn worker_settings(flush_ms: u64) -> Vec<(&'static str, String)> {
    vec![
        ("bootstrap.servers", bootstrap()),
        ("offset.flush.interval.ms", flush_ms.to_string()),
    ]
}

/// A topic name no other test uses.
pub fn unique_topic(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Create `topic` with `partitions` partitions.
pub async fn create_topic(topic: &str, partitions: i32) {
    create_topic_with(topic, partitions, &[]).await
}

/// Create `topic` with `partitions` partitions and topic configs (e.g. `max.message.bytes`).
pub async fn create_topic_with(topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin client");
    let results = admin
        .create_topics(
            [&configs.iter().fold(
                NewTopic::new(topic, partitions, TopicReplication::Fixed(1)),
                |t, (k, v)| t.set(k, v),
            )],
            &AdminOptions::new(),
        )
        .await
        .expect("create topic");
    for r in results {
        r.expect("topic created");
    }
}

/// Produce `values` (with null keys) to partition 0 of `topic`, waiting for every ack.
pub fn produce(topic: &str, values: &[Vec<u8>]) {
    produce_spread(topic, 1, values);
}

/// Produce `values` (with null keys) across partitions `0..partitions` of `topic`, value `i`
/// to partition `i % partitions`, waiting for every ack.
pub fn produce_spread(topic: &str, partitions: i32, values: &[Vec<u8>]) {
    let records: Vec<Outgoing<'_>> = values
        .iter()
        .enumerate()
        .map(|(i, v)| ((i % partitions as usize) as i32, None, Some(v.as_slice())))
        .collect();
    send_all(topic, &records);
}

/// A record's key and value for [`produce_keyed`]; `None` is null.
pub type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Produce `(key, value)` records (either may be null: a null value is a tombstone) to
/// partition 0 of `topic`, in order, waiting for every ack.
pub fn produce_keyed(topic: &str, records: &[KeyValue]) {
    let records: Vec<Outgoing<'_>> = records
        .iter()
        .map(|(k, v)| (0, k.as_deref(), v.as_deref()))
        .collect();
    send_all(topic, &records);
}

/// A record to send: its partition, key and value (`None`: null).
type Outgoing<'a> = (i32, Option<&'a [u8]>, Option<&'a [u8]>);

/// Send `(partition, key, value)` records to `topic` and wait for every ack.
fn send_all(topic: &str, records: &[Outgoing<'_>]) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("producer");
    for &(partition, key, value) in records {
        let mut record = BaseRecord::<[u8], [u8]>::to(topic).partition(partition);
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(value) = value {
            record = record.payload(value);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// One record read back.
#[derive(Debug, Clone)]
pub struct Consumed {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// Milliseconds since the Unix epoch, when the record has a timestamp.
    pub timestamp: Option<i64>,
}

impl Consumed {
    /// The value of header `key` as text.
    pub fn header(&self, key: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_ref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// The value as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(self.value.as_deref().unwrap_or_default()).into_owned()
    }
}

/// Read `topic` from the beginning until `count` records arrived or `timeout` passed.
pub fn consume(topic: &str, count: usize, timeout: Duration) -> Vec<Consumed> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set(
            "group.id",
            format!("test-reader-{}", uuid::Uuid::new_v4().simple()),
        )
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    // The topic may not exist yet (a source creates it with its first record): wait for its
    // partitions within the timeout, or nothing would be assigned.
    let deadline = Instant::now() + timeout;
    let mut tpl = TopicPartitionList::new();
    while tpl.count() == 0 && Instant::now() < deadline {
        let metadata = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .expect("metadata");
        for p in metadata.topics()[0].partitions() {
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                .expect("partition");
        }
        if tpl.count() == 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    while out.len() < count && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.push(Consumed {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                headers: m
                    .headers()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default(),
                timestamp: m.timestamp().to_millis(),
            });
        }
    }
    out
}

/// Group records by partition, in offset order.
pub fn by_partition(records: &[Consumed]) -> BTreeMap<i32, Vec<Consumed>> {
    let mut map: BTreeMap<i32, Vec<Consumed>> = BTreeMap::new();
    for r in records {
        map.entry(r.partition).or_default().push(r.clone());
    }
    for list in map.values_mut() {
        list.sort_by_key(|r| r.offset);
    }
    map
}

/// The offset consumer group `group` committed for partition `partition` of `topic`.
pub fn committed_offset(group: &str, topic: &str, partition: i32) -> Option<i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let committed = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .expect("committed offsets");
    match committed.find_partition(topic, partition)?.offset() {
        Offset::Offset(o) => Some(o),
        _ => None,
    }
}

/// The test broker's secured listeners and test credentials (`scripts/kafka env`): `SASL_SSL`,
/// `SSL`, `SASL_PLAINTEXT` and `OAUTH` (OAUTHBEARER with signed tokens) addresses,
/// `SASL_USER`, `SASL_PASSWORD`, `TLS_DIR` (the test CA, client key stores and trust stores,
/// the OAuth tokens), `CLIENT_STORE_PASSWORD`, `TRUST_STORE_PASSWORD`.
pub fn secured() -> BTreeMap<String, String> {
    bootstrap();
    let output = Command::new(repo_root().join("scripts/kafka"))
        .arg("env")
        .output()
        .expect("run scripts/kafka env");
    assert!(output.status.success(), "scripts/kafka env failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}
