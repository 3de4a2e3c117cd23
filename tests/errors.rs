//! Record errors (`errors.*`) against the real broker: under `errors.tolerance=all` a bad record
//! is skipped and lands in the dead-letter queue with Kafka Connect's context headers, for
//! sinks (conversion failures, per-record `put` failures) and sources (conversion failures,
//! records the broker rejects); under `none` it fails the task with a trace naming the record.

use std::fs;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{
    Consumed, committed_offset, consume, create_topic, create_topic_with, produce, unique_topic,
};
use wasm_connect_tests::rest::{block, create, get, task_metrics, wait_for_state};
use wasm_connect_tests::worker::{eventually, lines, start_with_plugins as start};

/// Merge `extra` into `base` (both JSON objects).
fn with(base: &Value, extra: Value) -> Value {
    let mut merged = base.clone();
    for (k, v) in extra.as_object().expect("object") {
        merged[k] = v.clone();
    }
    merged
}

fn dlq_settings(dlq: &str) -> Value {
    json!({
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.log.enable": "true",
    })
}

/// Exactly `n` records of `topic` (waiting a little for any extra one, so duplicates show).
fn consume_exactly(topic: &str, n: usize) -> Vec<Consumed> {
    let mut records = consume(topic, n, Duration::from_secs(30));
    if records.len() == n {
        records = consume(topic, n + 1, Duration::from_secs(3));
    }
    assert_eq!(records.len(), n, "{n} records in {topic}: {records:?}");
    records
}

fn assert_header(record: &Consumed, key: &str, expected: &str) {
    assert_eq!(
        record.header(key).as_deref(),
        Some(expected),
        "header {key} of {record:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poison_sink_record_goes_to_the_dlq_under_all_and_fails_the_task_under_none() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("poison-sink");
    let dlq = unique_topic("dlq");
    create_topic(&topic, 1).await;
    produce(
        &topic,
        &[
            b"{\"n\":0}".to_vec(),
            b"{\"n\":1}".to_vec(),
            b"not json".to_vec(),
            b"{\"n\":3}".to_vec(),
            b"{\"n\":4}".to_vec(),
        ],
    );
    let out = dir.path().join("out");
    fs::create_dir_all(&out).unwrap();
    let (worker, url) = start(dir.path(), &["file-sink"], &[]);
    let base = json!({"connector.class": "file-sink", "topics": topic, "sandbox.fs.write": out.display().to_string(),
        "value.converter": "json", "value.converter.schemas.enable": "false"});
    let tolerant = with(
        &base,
        with(
            &dlq_settings(&dlq),
            json!({"file": out.join("tolerant.txt").display().to_string()}),
        ),
    );
    let strict = with(
        &base,
        json!({"file": out.join("strict.txt").display().to_string()}),
    );
    assert_eq!(
        create(&url, "tolerant", tolerant).await,
        StatusCode::CREATED
    );
    assert_eq!(create(&url, "strict", strict).await, StatusCode::CREATED);

    // Tolerated: every good record is written, in order, and the bad one is in the DLQ.
    let expected = ["{\"n\":0}", "{\"n\":1}", "{\"n\":3}", "{\"n\":4}"];
    assert!(
        eventually(Duration::from_secs(60), || lines(&out.join("tolerant.txt"))
            == expected),
        "{:?}\n{}",
        lines(&out.join("tolerant.txt")),
        worker.log_text()
    );
    let dead = consume_exactly(&dlq, 1);
    let letter = &dead[0];
    assert_eq!(letter.text(), "not json", "the original bytes");
    assert_header(letter, "__connect.errors.topic", &topic);
    assert_header(letter, "__connect.errors.partition", "0");
    assert_header(letter, "__connect.errors.offset", "2");
    assert_header(letter, "__connect.errors.connector.name", "tolerant");
    assert_header(letter, "__connect.errors.task.id", "0");
    assert_header(letter, "__connect.errors.stage", "VALUE_CONVERTER");
    assert_header(letter, "__connect.errors.class.name", "json");
    assert_header(
        letter,
        "__connect.errors.exception.class.name",
        "ConversionError",
    );
    let message = letter
        .header("__connect.errors.exception.message")
        .unwrap_or_default();
    assert!(message.contains("not valid JSON"), "{message}");
    let metrics = task_metrics(&url, "tolerant", 0).await;
    assert_eq!(metrics["errors"]["total_record_errors"], 1, "{metrics}");
    assert_eq!(metrics["errors"]["total_records_skipped"], 1, "{metrics}");
    assert_eq!(
        metrics["errors"]["deadletterqueue_produce_requests"], 1,
        "{metrics}"
    );
    assert!(
        worker.log_text().contains(&format!(
            "record {topic}-0 offset 2: the value converter failed"
        )),
        "errors.log.enable logs the error"
    );

    // Not tolerated: the task fails and says which record and how to tolerate it.
    let status = wait_for_state(&url, "strict", "FAILED", Duration::from_secs(60));
    let trace = status["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains(&format!(
            "record {topic}-0 offset 2: the value converter failed"
        )) && trace.contains("errors.tolerance=none"),
        "{trace}"
    );
    let (status, log) = worker.stop();
    assert!(
        !status.success(),
        "a failed task makes the worker exit non-zero\n{log}"
    );
    // The group's offset moved past the skipped record, so nothing would be delivered again;
    // the strict connector committed nothing past the poison record.
    assert_eq!(
        committed_offset("connect-tolerant", &topic, 0),
        Some(5),
        "{log}"
    );
    assert!(committed_offset("connect-strict", &topic, 0).unwrap_or(0) <= 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn records_a_sink_cannot_write_are_retried_then_dead_lettered_or_fail_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("put-failures");
    let dlq = unique_topic("dlq");
    create_topic(&topic, 1).await;
    produce(
        &topic,
        &[
            b"good 0".to_vec(),
            b"bad 1".to_vec(),
            b"good 2".to_vec(),
            b"bad 3".to_vec(),
        ],
    );
    let out = dir.path().join("out");
    fs::create_dir_all(&out).unwrap();
    let (worker, url) = start(dir.path(), &[], &["flaky-sink"]);
    let base = json!({"connector.class": "flaky-sink", "topics": topic, "sandbox.fs.write": out.display().to_string(),
        "value.converter": "string", "fail.times": "0", "reject": "bad"});
    let file = |name: &str| out.join(format!("{name}.txt"));
    let config = |name: &str, extra: Value| {
        with(
            &with(&base, json!({"file": file(name).display().to_string()})),
            extra,
        )
    };
    // Rejected every time: dead-lettered once retries are over (none by default).
    assert_eq!(
        create(&url, "dead", config("dead", dlq_settings(&dlq))).await,
        StatusCode::CREATED
    );
    // Rejected twice per record, retried without a time limit: everything is written.
    assert_eq!(
        create(&url, "retried", config("retried", json!({"reject.times": "2", "errors.retry.timeout": "-1", "errors.retry.delay.max.ms": "50"}))).await,
        StatusCode::CREATED
    );
    // Rejected every time, not tolerated: the task fails.
    assert_eq!(
        create(&url, "strict", config("strict", json!({}))).await,
        StatusCode::CREATED
    );

    assert!(
        eventually(Duration::from_secs(60), || lines(&file("dead"))
            == ["good 0", "good 2"]),
        "{:?}\n{}",
        lines(&file("dead")),
        worker.log_text()
    );
    let mut dead = consume_exactly(&dlq, 2);
    dead.sort_by_key(|r| r.header("__connect.errors.offset"));
    let values: Vec<String> = dead.iter().map(Consumed::text).collect();
    assert_eq!(values, ["bad 1", "bad 3"]);
    for letter in &dead {
        assert_header(letter, "__connect.errors.stage", "TASK_PUT");
        assert_header(letter, "__connect.errors.class.name", "flaky-sink");
        assert_header(
            letter,
            "__connect.errors.exception.class.name",
            "RecordFailure",
        );
        let message = letter
            .header("__connect.errors.exception.message")
            .unwrap_or_default();
        assert!(
            message.contains("refusing a value with \"bad\""),
            "{message}"
        );
    }

    assert!(
        eventually(Duration::from_secs(60), || lines(&file("retried"))
            == ["good 0", "good 2", "bad 1", "bad 3"]),
        "{:?}\n{}",
        lines(&file("retried")),
        worker.log_text()
    );
    let metrics = task_metrics(&url, "retried", 0).await;
    assert!(
        metrics["errors"]["total_retries"].as_u64() >= Some(2),
        "{metrics}"
    );
    assert_eq!(metrics["errors"]["total_record_errors"], 0, "{metrics}");

    let status = wait_for_state(&url, "strict", "FAILED", Duration::from_secs(60));
    let trace = status["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains(&format!(
            "record {topic}-0 offset 1: the plugin could not write it"
        )) && trace.contains("stage TASK_PUT"),
        "{trace}"
    );
    worker.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_source_records_go_to_the_dlq_under_all_and_fail_the_task_under_none() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("poison-source");
    // Records of more than 2000 bytes are too large for this topic: the broker rejects them.
    let small = unique_topic("small");
    let dlq = unique_topic("dlq");
    create_topic(&topic, 1).await;
    create_topic_with(&small, 1, &[("max.message.bytes", "2000")]).await;
    let (worker, url) = start(dir.path(), &[], &["misbehave"]);
    let base = json!({"connector.class": "misbehave", "mode": "poison", "topic": topic, "count": "20",
        "big.topic": small, "sandbox.topics.write": small, "size": "5000", "value.converter": "json", "value.converter.schemas.enable": "false"});
    let tolerant = with(
        &base,
        with(&dlq_settings(&dlq), json!({"bad.json": "3", "big": "7"})),
    );
    assert_eq!(
        create(&url, "tolerant", tolerant).await,
        StatusCode::CREATED
    );
    assert_eq!(
        create(
            &url,
            "bad-json",
            with(
                &base,
                json!({"topic": unique_topic("strict"), "bad.json": "3"})
            )
        )
        .await,
        StatusCode::CREATED
    );
    assert_eq!(
        create(
            &url,
            "too-big",
            with(&base, json!({"topic": unique_topic("strict"), "big": "2"}))
        )
        .await,
        StatusCode::CREATED
    );

    let written = consume(&topic, 18, Duration::from_secs(60));
    assert_eq!(
        consume(&topic, 19, Duration::from_secs(3)).len(),
        18,
        "no duplicates"
    );
    let seqs: Vec<String> = written.iter().map(Consumed::text).collect();
    let expected: Vec<String> = (0..20)
        .filter(|i| *i != 3 && *i != 7)
        .map(|i| format!("{{\"seq\":{i}}}"))
        .collect();
    assert_eq!(seqs, expected, "{}", worker.log_text());
    let mut dead = consume_exactly(&dlq, 2);
    dead.sort_by_key(|r| r.header("__connect.errors.source.offset"));
    let (bad_json, too_big) = (&dead[0], &dead[1]);
    assert_eq!(
        bad_json.text(),
        "{\"seq\": 3, broken",
        "the plugin's value, unconverted"
    );
    assert_header(bad_json, "__connect.errors.stage", "VALUE_CONVERTER");
    assert_header(bad_json, "__connect.errors.topic", &topic);
    assert_header(
        bad_json,
        "__connect.errors.source.partition",
        "\"misbehave\"",
    );
    assert_header(bad_json, "__connect.errors.source.offset", "3");
    assert_header(bad_json, "__connect.errors.connector.name", "tolerant");
    assert_eq!(
        too_big.value.as_ref().map(Vec::len),
        Some(5000 + 2),
        "the converted value (a JSON string)"
    );
    assert_header(too_big, "__connect.errors.stage", "KAFKA_PRODUCE");
    assert_header(too_big, "__connect.errors.topic", &small);
    assert_header(
        too_big,
        "__connect.errors.exception.class.name",
        "RecordRejected",
    );
    assert_header(too_big, "__connect.errors.source.offset", "7");
    // The offsets moved past both: the last record's offset is committed.
    let committed = eventually(Duration::from_secs(30), || {
        let offsets = block(get(&url, "/connectors/tolerant/offsets"));
        offsets["offsets"][0]["offset"] == json!(19)
    });
    assert!(
        committed,
        "{}",
        block(get(&url, "/connectors/tolerant/offsets"))
    );
    let metrics = task_metrics(&url, "tolerant", 0).await;
    assert_eq!(metrics["errors"]["total_records_skipped"], 2, "{metrics}");
    assert_eq!(metrics["records_done"], 18, "{metrics}");

    let status = wait_for_state(&url, "bad-json", "FAILED", Duration::from_secs(60));
    let trace = status["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains("offset 3): the value converter failed")
            && trace.contains("errors.tolerance=none"),
        "{trace}"
    );
    let status = wait_for_state(&url, "too-big", "FAILED", Duration::from_secs(60));
    let trace = status["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains("offset 2): Kafka rejected the record")
            && trace.contains("stage KAFKA_PRODUCE"),
        "{trace}"
    );
    worker.stop();
}
