//! Transforms in running pipelines on the real broker: a source with a chain of three
//! transforms and predicates (routing, a header, a filter), a sink with RegexRouter and
//! ExtractField, and failing transforms under `errors.tolerance=all` landing in the
//! dead-letter queue with `__connect.errors.stage=TRANSFORMATION`, for a sink and a source.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{
    Consumed, committed_offset, consume, create_topic, produce, unique_topic,
};
use wasm_connect_tests::rest::{block, create, get, task_status};
use wasm_connect_tests::worker::{eventually, lines, start_with_plugins};

const T: &str = "org.apache.kafka.connect.transforms.";
const P: &str = "org.apache.kafka.connect.transforms.predicates.";

/// `every-field-source`'s index of a record (its `seq` header).
fn seq(record: &Consumed) -> u64 {
    record
        .header("seq")
        .and_then(|s| s.parse().ok())
        .expect("a seq header")
}

fn data_bytes(data: &Option<wasm_connect_sdk::Data>) -> Option<Vec<u8>> {
    data.as_ref().map(|d| match d {
        wasm_connect_sdk::Data::Bytes(b) => b.clone(),
        wasm_connect_sdk::Data::Text(s) | wasm_connect_sdk::Data::Json(s) => s.as_bytes().to_vec(),
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_chain_routes_tags_and_filters_and_commits_what_it_dropped() {
    const COUNT: u64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let main = unique_topic("chain");
    let other = unique_topic("chain-other");
    let routed = format!("{main}-routed");
    // Three partitions: the plugin names partitions 0 to 2.
    for t in [&main, &other, &routed] {
        create_topic(t, 3).await;
    }
    let (worker, url) = start_with_plugins(dir.path(), &[], &["every-field-source"]);
    let config = json!({
        "connector.class": "every-field-source", "topic": main, "other.topic": other,
        "sandbox.topics.write": format!("{other},{routed}"), "count": COUNT.to_string(),
        "key.converter": "bytes", "value.converter": "bytes",
        // Route all but the other topic's records; tag the records with duplicate headers;
        // drop tombstones.
        "transforms": "route,tag,drop",
        "transforms.route.type": format!("{T}RegexRouter"),
        "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "$1-routed",
        "transforms.route.predicate": "other",
        "transforms.route.negate": "true",
        "transforms.tag.type": "InsertHeader",
        "transforms.tag.header": "via",
        "transforms.tag.value.literal": "wasm-connect",
        "transforms.tag.predicate": "dup",
        "transforms.drop.type": format!("{T}Filter"),
        "transforms.drop.predicate": "tomb",
        "predicates": "other,dup,tomb",
        "predicates.other.type": format!("{P}TopicNameMatches"),
        "predicates.other.pattern": other,
        "predicates.dup.type": "HasHeaderKey",
        "predicates.dup.name": "dup",
        "predicates.tomb.type": format!("{P}RecordIsTombstone"),
    });
    assert_eq!(
        create(&url, "chain", config).await,
        StatusCode::CREATED,
        "{}",
        worker.log_text()
    );
    let kept: Vec<u64> = (0..COUNT).filter(|i| i % 10 != 9).collect();
    let to_other = kept.iter().filter(|i| *i % 4 == 3).count();
    let in_routed = consume(&routed, kept.len() - to_other, Duration::from_secs(60));
    let in_other = consume(&other, to_other, Duration::from_secs(30));
    assert_eq!(
        in_routed.len() + in_other.len(),
        kept.len(),
        "every record but the tombstones; log:\n{}",
        worker.log_text()
    );
    assert!(
        consume(&main, 1, Duration::from_secs(2)).is_empty(),
        "nothing left on the unrouted topic"
    );
    for (topic, records) in [(&routed, &in_routed), (&other, &in_other)] {
        for record in records {
            let i = seq(record);
            let expected = every_field_source::record(i, &other);
            assert_eq!(*topic == other, i % 4 == 3, "record {i} routed to {topic}");
            assert!(i % 10 != 9, "tombstone {i} was dropped");
            assert_eq!(record.key, data_bytes(&expected.key), "record {i}'s key");
            assert_eq!(
                record.value,
                data_bytes(&expected.value),
                "record {i}'s value"
            );
            let mut headers: Vec<(String, Option<Vec<u8>>)> = expected
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.clone()))
                .collect();
            if i.is_multiple_of(5) {
                headers.push(("via".into(), Some(b"wasm-connect".to_vec())));
            }
            assert_eq!(record.headers, headers, "record {i}'s headers");
        }
    }
    // The last record of source partition {"p":1} is a tombstone the chain dropped: its
    // position is committed all the same.
    let committed = eventually(Duration::from_secs(30), || {
        let offsets = block(get(&url, "/connectors/chain/offsets"));
        offsets["offsets"].as_array().is_some_and(|all| {
            all.iter()
                .any(|o| o["partition"] == json!({"p": 1}) && o["offset"] == json!({"i": 59}))
        })
    });
    let (_, log) = worker.stop();
    assert!(committed, "the dropped record's offset is committed\n{log}");
}

/// A JsonConverter envelope of an order.
fn order(id: i64, city: &str) -> Vec<u8> {
    json!({
        "schema": {"type": "struct", "optional": false, "name": "Order", "fields": [
            {"field": "id", "type": "int64", "optional": false},
            {"field": "name", "type": "string", "optional": true},
            {"field": "address", "type": "struct", "optional": false, "fields": [
                {"field": "city", "type": "string", "optional": false}]}]},
        "payload": {"id": id, "name": format!("n{id}"), "address": {"city": city}},
    })
    .to_string()
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_gets_routed_extracted_records_and_failed_ones_go_to_the_dlq() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("orders");
    let dlq = unique_topic("dlq");
    create_topic(&topic, 1).await;
    let mut values: Vec<Vec<u8>> = (0..10)
        .map(|i| order(i, if i % 2 == 0 { "Lyon" } else { "Oslo" }))
        .collect();
    // Record 4: a string where a struct is expected; ExtractField fails on it.
    values[4] =
        br#"{"schema":{"type":"string","optional":false},"payload":"not an order"}"#.to_vec();
    produce(&topic, &values);
    let (worker, url) = start_with_plugins(dir.path(), &[], &["every-field-sink"]);
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let file = out.join("records.jsonl");
    let config = json!({
        "connector.class": "every-field-sink", "topics": topic,
        "file": file.display().to_string(), "sandbox.fs.write": out.display().to_string(),
        "key.converter": "string", "value.converter": "json",
        "transforms": "route,extract",
        "transforms.route.type": format!("{T}RegexRouter"),
        "transforms.route.regex": "orders-(.*)",
        "transforms.route.replacement": "routed-$1",
        "transforms.extract.type": format!("{T}ExtractField$Value"),
        "transforms.extract.field": "address",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true",
    });
    assert_eq!(create(&url, "sink", config).await, StatusCode::CREATED);
    let done = eventually(Duration::from_secs(60), || lines(&file).len() >= 9);
    let status = block(task_status(&url, "sink", 0));
    assert!(done, "9 records put; task {status}\n{}", worker.log_text());
    let suffix = topic.strip_prefix("orders-").unwrap();
    let written: Vec<Value> = lines(&file)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(written.len(), 9, "{written:?}");
    for (line, offset) in written.iter().zip((0..10).filter(|o| *o != 4)) {
        assert_eq!(line["topic"], format!("routed-{suffix}"), "{line}");
        assert_eq!(line["offset"], offset, "the original offset: {line}");
        let city = if offset % 2 == 0 { "Lyon" } else { "Oslo" };
        assert_eq!(line["value"]["kind"], "json", "{line}");
        let value: Value = serde_json::from_str(line["value"]["data"].as_str().unwrap()).unwrap();
        assert_eq!(value, json!({"city": city}), "the extracted field: {line}");
    }
    let dead = consume(&dlq, 1, Duration::from_secs(30));
    assert_eq!(dead.len(), 1, "{}", worker.log_text());
    let letter = &dead[0];
    assert_eq!(
        letter.value.as_deref(),
        Some(&values[4][..]),
        "the original bytes"
    );
    for (key, expected) in [
        ("__connect.errors.stage", "TRANSFORMATION"),
        ("__connect.errors.offset", "4"),
        (
            "__connect.errors.class.name",
            "org.apache.kafka.connect.transforms.ExtractField$Value",
        ),
        ("__connect.errors.exception.class.name", "DataException"),
    ] {
        assert_eq!(letter.header(key).as_deref(), Some(expected), "{key}");
    }
    let message = letter
        .header("__connect.errors.exception.message")
        .unwrap_or_default();
    assert!(
        message.contains("Only Struct objects supported for [field extraction]"),
        "{message}"
    );
    // Offsets are committed on the consumed topic, past the failed record.
    let committed = eventually(Duration::from_secs(30), || {
        committed_offset("connect-sink", &topic, 0) == Some(10)
    });
    let (_, log) = worker.stop();
    assert!(committed, "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_records_failing_a_transform_go_to_the_dlq() {
    const COUNT: u64 = 30;
    let dir = tempfile::tempdir().unwrap();
    let main = unique_topic("extract");
    let other = unique_topic("extract-other");
    let dlq = unique_topic("dlq");
    for t in [&main, &other] {
        create_topic(t, 3).await;
    }
    let (worker, url) = start_with_plugins(dir.path(), &[], &["every-field-source"]);
    let config = json!({
        "connector.class": "every-field-source", "topic": main, "other.topic": other,
        "sandbox.topics.write": other, "count": COUNT.to_string(),
        "key.converter": "bytes", "value.converter": "bytes",
        // Values with a struct schema (every third record) have the field; text and bytes
        // values do not.
        "transforms": "extract",
        "transforms.extract.type": "ExtractField$Value",
        "transforms.extract.field": "i",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true",
    });
    assert_eq!(create(&url, "source", config).await, StatusCode::CREATED);
    let failing: Vec<u64> = (0..COUNT).filter(|i| i % 3 != 0 && i % 10 != 9).collect();
    let dead = consume(&dlq, failing.len(), Duration::from_secs(60));
    assert_eq!(dead.len(), failing.len(), "{}", worker.log_text());
    for letter in &dead {
        let i = seq(letter);
        assert!(failing.contains(&i), "record {i} failed");
        let expected = every_field_source::record(i, &other);
        assert_eq!(
            letter.value,
            data_bytes(&expected.value),
            "the polled value"
        );
        assert_eq!(
            letter.header("__connect.errors.stage").as_deref(),
            Some("TRANSFORMATION")
        );
        assert_eq!(
            letter.header("__connect.errors.source.offset"),
            Some(json!({"i": i}).to_string())
        );
    }
    // The records that passed carry the extracted field.
    let passed: Vec<u64> = (0..COUNT).filter(|i| !failing.contains(i)).collect();
    let to_other = passed.iter().filter(|i| *i % 4 == 3).count();
    let mut sent = consume(&main, passed.len() - to_other, Duration::from_secs(30));
    sent.extend(consume(&other, to_other, Duration::from_secs(30)));
    assert_eq!(sent.len(), passed.len());
    for record in &sent {
        let i = seq(record);
        let expected = if i % 10 == 9 {
            None
        } else {
            Some(i.to_string().into_bytes())
        };
        assert_eq!(record.value, expected, "record {i}");
    }
    let (_, log) = worker.stop();
    assert!(!log.contains("panicked"), "{log}");
}
