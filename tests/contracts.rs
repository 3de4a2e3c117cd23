//! Contract versions, end to end against the real broker: plugins built for each earlier
//! contract (`tests/fixtures/contract-<version>/`, built by the SDK of that version) still load
//! and move data, and every field of a record, in every case, crosses the packed batches (0.2.0
//! on) intact in both directions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect::plugin::World;
use wasm_connect_sdk::{Data, SourceRecord};
use wasm_connect_tests::kafka::{self, Consumed, consume, create_topic, unique_topic};
use wasm_connect_tests::rest::{block, create, task_status};
use wasm_connect_tests::worker::{Worker, eventually, lines};
use wasm_connect_tests::{load, plugin_file, plugins_with, repo_root, sandbox};

/// A plugin directory under `dir` with the prebuilt plugins of contract `version`.
fn fixture_plugins(dir: &Path, version: &str) -> PathBuf {
    let plugins = dir.join(format!("plugins-{version}"));
    std::fs::create_dir_all(&plugins).unwrap();
    for name in ["datagen", "file-sink"] {
        let file = repo_root().join(format!("tests/fixtures/contract-{version}/{name}.wasm"));
        std::fs::copy(&file, plugins.join(format!("{name}.wasm")))
            .unwrap_or_else(|e| panic!("copy {}: {e}", file.display()));
    }
    plugins
}

/// A worker on the test broker with `plugins`; its REST URL, and an output directory in `dir`.
fn start_worker(dir: &Path, plugins: &Path) -> (Worker, String, PathBuf) {
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "500".to_owned()),
    ];
    let mut worker = Worker::start(dir, &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    (worker, url, out)
}

#[tokio::test]
async fn plugins_of_every_contract_version_load() {
    let sandbox = sandbox();
    let dir = tempfile::tempdir().unwrap();
    for (name, world) in [("datagen", World::Source), ("file-sink", World::Sink)] {
        let current = load(&sandbox, &plugin_file(name)).await;
        assert_eq!(
            (current.contract.to_string(), current.world),
            ("0.4.0".to_owned(), world)
        );
        for version in ["0.1.0", "0.2.0", "0.3.0"] {
            let fixtures = fixture_plugins(dir.path(), version);
            let plugin = load(&sandbox, &fixtures.join(format!("{name}.wasm"))).await;
            assert_eq!(
                (plugin.contract.to_string(), plugin.world),
                (version.to_owned(), world)
            );
            assert_eq!(plugin.spec.name, current.spec.name);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_of_contract_0_1_0_plugins_moves_every_record() {
    pipeline_of_fixtures("0.1.0").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_of_contract_0_2_0_plugins_moves_every_record() {
    pipeline_of_fixtures("0.2.0").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_of_contract_0_3_0_plugins_moves_every_record() {
    pipeline_of_fixtures("0.3.0").await;
}

/// `datagen` into Kafka and `file-sink` out of it, both the fixtures of contract `version`:
/// every record arrives once.
async fn pipeline_of_fixtures(version: &str) {
    const COUNT: usize = 2000;
    let dir = tempfile::tempdir().unwrap();
    let plugins = fixture_plugins(dir.path(), version);
    let topic = unique_topic(&format!("contract-{}", version.replace('.', "-")));
    create_topic(&topic, 2).await;
    let (worker, url, out) = start_worker(dir.path(), &plugins);
    let source = json!({"connector.class": "datagen", "topic": topic, "count": COUNT.to_string(),
        "tasks.max": "2", "value.converter": "string"});
    let sink = json!({"connector.class": "file-sink", "topics": topic,
        "file": out.join("out.txt").display().to_string(),
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(create(&url, "source", source).await, StatusCode::CREATED);
    assert_eq!(create(&url, "sink", sink).await, StatusCode::CREATED);
    let done = eventually(Duration::from_secs(120), || {
        lines(&out.join("out.txt")).len() >= COUNT
    });
    let status = task_status(&url, "sink", 0).await;
    let (_, log) = worker.stop();
    assert!(
        done,
        "the sink wrote everything; sink task: {status}\n{log}"
    );
    let ids: BTreeSet<u64> = lines(&out.join("out.txt"))
        .iter()
        .map(|line| {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            value["id"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(ids, (0..COUNT as u64).collect(), "every id, once");
}

/// What the bytes converter makes of a source record's key or value.
fn kafka_bytes(data: &Option<Data>) -> Option<Vec<u8>> {
    data.as_ref().map(|d| d.as_bytes().to_vec())
}

/// The index `every-field-source` gave a record (its `seq` header).
fn seq(record: &Consumed) -> u64 {
    record.header("seq").unwrap().parse().unwrap()
}

fn check_in_kafka(record: &Consumed, topic: &str, expected: &SourceRecord, default_topic: &str) {
    let i = seq(record);
    let want_topic = expected.topic.as_deref().unwrap_or(default_topic);
    assert_eq!(topic, want_topic, "record {i}: topic");
    if let Some(p) = expected.partition {
        assert_eq!(record.partition, p, "record {i}: partition");
    }
    assert_eq!(record.key, kafka_bytes(&expected.key), "record {i}: key");
    assert_eq!(
        record.value,
        kafka_bytes(&expected.value),
        "record {i}: value"
    );
    let headers: Vec<(String, Option<Vec<u8>>)> = expected
        .headers
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    assert_eq!(record.headers, headers, "record {i}: headers");
    match expected.timestamp {
        Some(t) => assert_eq!(record.timestamp, Some(t), "record {i}: timestamp"),
        // None: the worker's clock when it sent the record (this test runs after 2023).
        None => assert!(
            record.timestamp > Some(1_700_000_000_000),
            "record {i}: timestamp {:?}",
            record.timestamp
        ),
    }
}

/// What `every-field-sink` wrote for a record it got through the string key converter and the
/// bytes value converter.
fn sink_line(topic: &str, record: &Consumed) -> Value {
    let headers: Vec<Value> = record.headers.iter().map(|(k, v)| json!([k, v])).collect();
    json!({
        "topic": topic,
        "partition": record.partition,
        "offset": record.offset,
        "key": record.key.as_ref().map(|k| json!({"kind": "text", "data": String::from_utf8(k.clone()).unwrap()})),
        "value": record.value.as_ref().map(|v| json!({"kind": "bytes", "data": v})),
        "headers": headers,
        "timestamp": record.timestamp,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn every_field_crosses_the_packed_batches_intact() {
    const COUNT: u64 = 300;
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &[], &["every-field-source", "every-field-sink"]);
    let main_topic = unique_topic("every-field");
    let other_topic = unique_topic("every-field-other");
    create_topic(&main_topic, 3).await;
    create_topic(&other_topic, 3).await;
    let (worker, url, out) = start_worker(dir.path(), &plugins);
    let source = json!({"connector.class": "every-field-source", "topic": main_topic,
        "other.topic": other_topic, "sandbox.topics.write": other_topic, "count": COUNT.to_string(),
        "key.converter": "bytes", "value.converter": "bytes"});
    let file = out.join("records.jsonl");
    let sink = json!({"connector.class": "every-field-sink",
        "topics": format!("{main_topic},{other_topic}"),
        "file": file.display().to_string(), "sandbox.fs.write": out.display().to_string(),
        "key.converter": "string", "value.converter": "bytes"});
    assert_eq!(create(&url, "source", source).await, StatusCode::CREATED);
    assert_eq!(create(&url, "sink", sink).await, StatusCode::CREATED);
    let done = eventually(Duration::from_secs(120), || {
        lines(&file).len() as u64 >= COUNT
    });
    let status = block(task_status(&url, "sink", 0));
    let (_, log) = worker.stop();
    assert!(
        done,
        "the sink got every record; sink task: {status}\n{log}"
    );

    // Source direction: what reached Kafka is exactly what the plugin returned.
    let other_count = (0..COUNT).filter(|i| i % 4 == 3).count();
    let in_main = consume(
        &main_topic,
        COUNT as usize - other_count,
        Duration::from_secs(30),
    );
    let in_other = consume(&other_topic, other_count, Duration::from_secs(30));
    assert_eq!(in_main.len() + in_other.len(), COUNT as usize);
    let mut seen = BTreeSet::new();
    for (topic, records) in [(&main_topic, &in_main), (&other_topic, &in_other)] {
        for record in records {
            let i = seq(record);
            let expected = every_field_source::record(i, &other_topic);
            check_in_kafka(record, topic, &expected, &main_topic);
            assert!(seen.insert(i), "record {i} once");
        }
    }

    // Sink direction: the plugin saw every field of every record as it is in Kafka.
    let written: BTreeMap<(String, i32, i64), Value> = lines(&file)
        .iter()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let key = (
                v["topic"].as_str().unwrap().to_owned(),
                v["partition"].as_i64().unwrap() as i32,
                v["offset"].as_i64().unwrap(),
            );
            (key, v)
        })
        .collect();
    assert_eq!(written.len(), COUNT as usize, "one line per record");
    for (topic, records) in [(&main_topic, &in_main), (&other_topic, &in_other)] {
        for record in records {
            let key = (topic.clone(), record.partition, record.offset);
            assert_eq!(
                written[&key],
                sink_line(topic, record),
                "record {}",
                seq(record)
            );
        }
    }
}
