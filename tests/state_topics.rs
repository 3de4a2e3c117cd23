//! Distributed mode's state in Kafka topics, on the real broker.
//!
//! The config log: what one worker appends, every worker reads back in order (as Kafka
//! Connect's config store does), a restarted reader finds the same state, the records are Kafka
//! Connect's, and a second writer with the same transactional id fences the first, whose late
//! writes then fail and are never seen.
//!
//! The offsets topic: what one worker commits, another reads (a task that moved resumes from
//! it), keyed and partitioned as a Java worker keys and partitions it.
//!
//! The status topic: what each worker writes about what it runs, every worker reads, with the
//! writer's worker id; a stale worker's write of an older generation does not win.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use serde_json::json;
use wasm_connect::distributed::config_log::KafkaConfigLog;
use wasm_connect::distributed::offset_topic::KafkaOffsetStore;
use wasm_connect::distributed::status_topic::KafkaStatusStore;
use wasm_connect::offsets::OffsetStore;
use wasm_connect::storage::{
    ConfigLog, ConfigRecord, ConnectorTaskId, StatusStore, StoredStatus, TargetState,
};
use wasm_connect_tests::kafka;

fn pairs(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn open(topic: &str, writer: Option<&str>) -> KafkaConfigLog {
    KafkaConfigLog::open(&kafka::bootstrap(), topic, &[], &[], "test", writer).unwrap()
}

/// Every key and value of partition 0 of `topic`, read with a plain consumer.
fn raw(topic: &str) -> Vec<(String, Option<String>)> {
    raw_partition(topic, 0)
}

/// Every key and value of `partition` of `topic`, read with a plain consumer.
fn raw_partition(topic: &str, partition: i32) -> Vec<(String, Option<String>)> {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("group.id", "raw-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let (_, high) = consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(10))
        .unwrap();
    let mut out = Vec::new();
    if high == 0 {
        return out;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    // Transaction markers take offsets but are not delivered: read until the position is the
    // end, not until `high` messages came.
    let at_end = |c: &BaseConsumer| {
        c.position()
            .ok()
            .and_then(|p| p.elements().first().map(|e| e.offset()))
            .is_some_and(|o| matches!(o, rdkafka::Offset::Offset(o) if o >= high))
    };
    while !at_end(&consumer) && std::time::Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.push((
                String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                m.payload().map(|p| String::from_utf8_lossy(p).into_owned()),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_are_read_back_in_order_by_every_reader_and_fenced_writers_fail() {
    let topic = kafka::unique_topic("configs");
    kafka::create_topic_with(&topic, 1, &[("cleanup.policy", "compact")]).await;
    let group = kafka::unique_topic("cluster");
    let writer = open(&topic, Some(&group));
    let follower = open(&topic, None);
    let mut events = follower.subscribe();
    let created = vec![
        ConfigRecord::Connector {
            name: "my-source".into(),
            config: pairs(&[("connector.class", "datagen"), ("tasks.max", "2")]),
        },
        ConfigRecord::Target {
            name: "my-source".into(),
            state: TargetState::Paused,
        },
        ConfigRecord::Tasks {
            name: "my-source".into(),
            configs: vec![pairs(&[("t", "0")]), pairs(&[("t", "1")])],
            build: Some("b1".into()),
        },
    ];
    let appended = writer.append(created.clone()).await.unwrap();
    assert_eq!(
        appended.iter().map(|e| &e.record).collect::<Vec<_>>(),
        created.iter().collect::<Vec<_>>()
    );
    // The follower reads the same events, with the same offsets, in order.
    for expected in &appended {
        let event = tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .expect("read back")
            .unwrap();
        assert_eq!(&event, expected);
    }
    // Kafka Connect's records.
    let records = raw(&topic);
    let keys: Vec<&str> = records.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "connector-my-source",
            "target-state-my-source",
            "task-my-source-0",
            "task-my-source-1",
            "commit-my-source"
        ]
    );
    assert_eq!(
        records[1].1.as_deref(),
        Some(r#"{"state":"PAUSED","state.v2":"PAUSED"}"#)
    );

    // A new reader (a restarted worker) finds the state.
    let state = open(&topic, None).read().unwrap();
    let stored = &state.connectors["my-source"];
    assert_eq!(stored.target, TargetState::Paused);
    assert_eq!(stored.tasks.as_ref().map(Vec::len), Some(2));
    assert_eq!(stored.tasks_build.as_deref(), Some("b1"));
    assert!(follower.position() >= 5);
    // A reader does not write: only the leader does.
    let refused = follower
        .append(vec![ConfigRecord::Removed {
            name: "my-source".into(),
        }])
        .await
        .unwrap_err();
    assert!(refused.contains("not the group's leader"), "{refused}");

    // A second writer with the same transactional id (a new leader) fences the first: the old
    // one's writes fail and nobody reads them.
    let new_leader = open(&topic, Some(&group));
    let late = writer
        .append(vec![ConfigRecord::Removed {
            name: "my-source".into(),
        }])
        .await;
    assert!(
        late.is_err(),
        "a fenced writer's append must fail: {late:?}"
    );
    assert!(!writer.is_writer(), "a fenced writer drops its producer");
    new_leader
        .append(vec![ConfigRecord::Target {
            name: "my-source".into(),
            state: TargetState::Running,
        }])
        .await
        .unwrap();
    // A checked append sees everything stored before it, and stores nothing when refused.
    let refused = new_leader
        .append_checked(
            vec![ConfigRecord::Removed {
                name: "my-source".into(),
            }],
            |state| match state.connectors.get("my-source") {
                Some(c) if c.target == TargetState::Running => Err("refused".into()),
                _ => Ok(()),
            },
        )
        .await;
    assert_eq!(refused, Err("refused".into()));
    let state = open(&topic, None).read().unwrap();
    assert_eq!(state.connectors["my-source"].target, TargetState::Running);
    assert!(
        state.connectors.contains_key("my-source"),
        "the fenced removal was not stored"
    );
}

/// Kafka's `Utils.murmur2` and the Java producer's partition for a keyed record.
fn java_partition(key: &[u8], partitions: u32) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ key.len() as u32;
    let chunks = key.chunks_exact(4);
    let tail = chunks.remainder();
    for chunk in chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    match tail.len() {
        3 => {
            h ^= u32::from(tail[2]) << 16;
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    ((h & 0x7fff_ffff) % partitions) as i32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_committed_on_one_worker_are_read_on_another_keyed_as_java_keys_them() {
    let topic = kafka::unique_topic("offsets");
    kafka::create_topic_with(&topic, 5, &[("cleanup.policy", "compact")]).await;
    let open = || KafkaOffsetStore::open(&kafka::bootstrap(), &topic, &[], &[], "test").unwrap();
    let first = open();
    let offsets = vec![
        (
            r#"{"file":"/in/a.txt"}"#.to_owned(),
            r#"{"position":10}"#.to_owned(),
        ),
        (
            r#"{"file":"/in/b.txt"}"#.to_owned(),
            r#"{"position":3}"#.to_owned(),
        ),
    ];
    first.commit("src", &offsets, 10).await.unwrap();
    // Seen here at once, and by another worker once it has read to the end.
    let a = json!({"file": "/in/a.txt"});
    assert_eq!(first.offset("src", &a), Some(json!({"position": 10})));
    let second = open();
    assert_eq!(second.offset("src", &a), Some(json!({"position": 10})));
    assert_eq!(second.offsets_of("src").len(), 2);
    // Connect's key, on the partition a Java producer picks for it.
    let key = r#"["src",{"file":"/in/a.txt"}]"#;
    let partition = java_partition(key.as_bytes(), 5);
    let records = raw_partition(&topic, partition);
    assert!(
        records
            .iter()
            .any(|(k, v)| k == key && v.as_deref() == Some(r#"{"position":10}"#)),
        "{key} not on partition {partition}: {records:?}"
    );
    // A key a Java worker wrote with the partition's fields in its HashMap's order: the same
    // source partition.
    let producer: rdkafka::producer::BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .create()
        .unwrap();
    producer
        .send(
            rdkafka::producer::BaseRecord::to(&topic)
                .key(r#"["src",{"table":"users","db":"app"}]"#)
                .payload(r#"{"id":7}"#),
        )
        .unwrap();
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(10)).unwrap();
    first.read_to_end().unwrap();
    assert_eq!(
        first.offset("src", &json!({"db": "app", "table": "users"})),
        Some(json!({"id": 7}))
    );
    // Changed on one worker: seen on the other.
    let mut changes = vec![(json!({"file": "/in/a.txt"}), Some(json!({"position": 11})))];
    second.alter("src", &changes).await.unwrap();
    first.read_to_end().unwrap();
    assert_eq!(first.offset("src", &a), Some(json!({"position": 11})));
    // Removed (a tombstone): gone everywhere.
    changes[0].1 = None;
    second.alter("src", &changes).await.unwrap();
    first.read_to_end().unwrap();
    assert_eq!(first.offset("src", &a), None);
    assert_eq!(open().offsets_of("src").len(), 2);
    // A connector past its limit of source partitions is refused whole.
    let many: Vec<(String, String)> = (0..3)
        .map(|i| (format!(r#"{{"file":"/x{i}"}}"#), "1".to_owned()))
        .collect();
    let refused = first.commit("src", &many, 3).await.unwrap_err();
    assert!(
        refused.contains("sandbox.source.partitions.max"),
        "{refused}"
    );
    assert!(
        first
            .commit("src", &[("not json".into(), "1".into())], 10)
            .await
            .is_err()
    );
}

/// Wait until `done` holds, polling (statuses are written without waiting).
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_written_by_each_worker_are_read_by_every_worker() {
    let topic = kafka::unique_topic("status");
    kafka::create_topic_with(&topic, 3, &[("cleanup.policy", "compact")]).await;
    let open = || KafkaStatusStore::open(&kafka::bootstrap(), &topic, &[], &[], "test").unwrap();
    let a = open();
    let b = open();
    a.set_generation(4);
    b.set_generation(4);
    let status = |state: &'static str, worker: &str| StoredStatus {
        state,
        trace: (state == "FAILED").then(|| "boom".to_owned()),
        worker_id: worker.to_owned(),
    };
    a.put_connector("my-conn", status("RUNNING", "a:8083"));
    let task = ConnectorTaskId::new("my-conn", 1);
    b.put_task(&task, status("FAILED", "b:8083"));
    // Each reads the other's.
    until("b reads a's connector status", || {
        b.connector("my-conn") == Some(status("RUNNING", "a:8083"))
    })
    .await;
    until("a reads b's task status", || {
        a.task(&task) == Some(status("FAILED", "b:8083"))
    })
    .await;
    // A new reader (a restarted worker) finds both.
    let c = open();
    assert_eq!(c.connector("my-conn"), Some(status("RUNNING", "a:8083")));
    assert_eq!(c.task(&task), Some(status("FAILED", "b:8083")));
    // Connect's keys and values.
    let mut records = Vec::new();
    for partition in 0..3 {
        records.extend(raw_partition(&topic, partition));
    }
    let connector = records
        .iter()
        .find(|(k, _)| k == "status-connector-my-conn")
        .and_then(|(_, v)| v.clone())
        .expect("status-connector-my-conn written");
    let value: serde_json::Value = serde_json::from_str(&connector).unwrap();
    assert_eq!(
        value,
        json!({"state": "RUNNING", "trace": null, "worker_id": "a:8083", "generation": 4})
    );
    assert!(records.iter().any(|(k, _)| k == "status-task-my-conn-1"));
    // After a rebalance (generation 5) b runs the connector; a, still at 4, is stale and
    // cannot overwrite what b wrote.
    b.set_generation(5);
    b.put_connector("my-conn", status("RUNNING", "b:8083"));
    until("a reads b's newer status", || {
        a.connector("my-conn") == Some(status("RUNNING", "b:8083"))
    })
    .await;
    a.put_connector("my-conn", status("PAUSED", "a:8083"));
    assert_eq!(a.connector("my-conn"), Some(status("RUNNING", "b:8083")));
    // A deleted connector's statuses go, everywhere.
    b.remove_connector("my-conn");
    until("a forgets the deleted connector", || {
        a.connector("my-conn").is_none() && a.task(&task).is_none()
    })
    .await;
}
