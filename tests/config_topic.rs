//! The config log on the real broker: what one worker appends, every worker reads back in
//! order (as Kafka Connect's config store does), a restarted reader finds the same state, the
//! records are Kafka Connect's, and a second writer with the same transactional id fences the
//! first, whose late writes then fail and are never seen.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use wasm_connect::distributed::config_log::KafkaConfigLog;
use wasm_connect::storage::{ConfigLog, ConfigRecord, TargetState};
use wasm_connect_tests::kafka;

fn pairs(kv: &[(&str, &str)]) -> Vec<(String, String)> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn open(topic: &str, writer: Option<&str>) -> KafkaConfigLog {
    KafkaConfigLog::open(&kafka::bootstrap(), topic, &[], &[], "test", writer).unwrap()
}

/// Every key and value of `topic`, read with a plain consumer.
fn raw(topic: &str) -> Vec<(String, Option<String>)> {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("group.id", "raw-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .unwrap();
    let mut out = Vec::new();
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
    assert!(refused.contains("read only"), "{refused}");

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
    new_leader
        .append(vec![ConfigRecord::Target {
            name: "my-source".into(),
            state: TargetState::Running,
        }])
        .await
        .unwrap();
    let state = open(&topic, None).read().unwrap();
    assert_eq!(state.connectors["my-source"].target, TargetState::Running);
    assert!(
        state.connectors.contains_key("my-source"),
        "the fenced removal was not stored"
    );
}
