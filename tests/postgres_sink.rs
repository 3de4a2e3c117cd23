//! `postgres-sink` in a real worker, against the real PostgreSQL server of `scripts/postgres`
//! and the real broker: a round trip from one database through `postgres-source`, Kafka (the
//! json converter with schemas) and `postgres-sink` into another, every column type, updates
//! under timestamp+incrementing with upsert, and a kill -9 of the worker mid-stream, the
//! records in Kafka checked against Kafka Connect's own JsonConverter; and
//! per-record failures into the dead-letter queue, with tombstones deleting rows.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasm_connect_tests::kafka::{
    self, KeyValue, consume, create_topic, produce_keyed, unique_topic,
};
use wasm_connect_tests::postgres::{self, client, fresh_database, jdbc_url};
use wasm_connect_tests::rest::create;
use wasm_connect_tests::worker::{Worker, write_properties};
use wasm_connect_tests::{connect_libs, plugins_with, repo_root};

/// Every type the source and sink carry, with nulls (a column that is always null, and
/// nullable columns null in some rows), timestamps at millisecond precision (Connect's).
const ITEMS: &str = "CREATE TABLE items (
    id serial PRIMARY KEY,
    small smallint NOT NULL,
    big bigint,
    price numeric(10,2),
    ratio double precision,
    approx real,
    name text NOT NULL,
    code varchar(20),
    active boolean,
    created timestamp(3),
    changed timestamptz(3) NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
    day date,
    at_time time(3),
    payload bytea,
    doc jsonb,
    info json,
    nothing text
)";

/// Insert rows `from..to` into `items`; every fourth row has nulls where a column allows them.
fn insert_items(db: &str, from: u32, to: u32) {
    let mut c = client(db);
    c.simple_query(&format!(
        "INSERT INTO items (small, big, price, ratio, approx, name, code, active, created, day,
                            at_time, payload, doc, info)
         SELECT g % 300, CASE WHEN g % 4 = 0 THEN NULL ELSE g::bigint * 1000000007 END,
                CASE WHEN g % 4 = 0 THEN NULL ELSE round(g * 1.25 - 500, 2) END,
                g / 7.0, (g % 13) * 0.5, 'item ' || g || ' ‘quoted’',
                CASE WHEN g % 4 = 0 THEN NULL ELSE 'C' || g END, g % 2 = 0,
                TIMESTAMP '2020-02-29 12:34:56.789' + g * INTERVAL '1 hour 1 millisecond',
                DATE '1969-12-25' + g, TIME '00:00:00.001' + g * INTERVAL '1 minute 1 ms',
                CASE WHEN g % 4 = 0 THEN NULL ELSE decode(lpad(to_hex(g), 8, '0') || '00ff', 'hex') END,
                jsonb_build_object('n', g, 'tags', jsonb_build_array('a', g)),
                CASE WHEN g % 4 = 0 THEN NULL ELSE ('{{\"raw\": ' || g || '}}')::json END
         FROM generate_series({from}, {}) g",
        to - 1
    ))
    .expect("insert items");
    c.close();
}

/// The rows of `items` in a form both sides share: the source's `timestamptz` as UTC, JSON as
/// its text, bytes as hex; one line per row, in id order.
fn contents(db: &str, source: bool) -> Vec<String> {
    let changed = if source {
        "changed AT TIME ZONE 'UTC'"
    } else {
        "changed"
    };
    let mut c = client(db);
    let rows = c
        .query(
            &format!(
                "SELECT id, small, big, price::text, ratio, approx, name, code, active, created,
                        {changed}, day, at_time, encode(payload, 'hex'), doc::text, info::text,
                        nothing FROM items ORDER BY id"
            ),
            &[],
        )
        .expect("read items");
    c.close();
    rows.rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| v.as_deref().unwrap_or("NULL"))
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect()
}

/// The sink database's rows, or none while its table does not exist yet.
fn sink_contents(db: &str) -> Vec<String> {
    let mut c = client(db);
    let exists = c
        .query("SELECT to_regclass('items') IS NOT NULL", &[])
        .expect("look up items");
    c.close();
    if exists.rows[0][0].as_deref() != Some("t") {
        return Vec::new();
    }
    contents(db, false)
}

/// Wait (up to `timeout`) until the sink's table equals the source's; say where they differ.
fn wait_for_equal(source: &str, sink: &str, timeout: Duration, worker: &Worker) {
    let started = Instant::now();
    loop {
        let (a, b) = (contents(source, true), sink_contents(sink));
        if a == b {
            return;
        }
        if started.elapsed() > timeout {
            let first = a.iter().zip(&b).find(|(x, y)| x != y);
            panic!(
                "the sink's table should equal the source's: {} rows against {}; first difference: {first:?}\n{}",
                a.len(),
                b.len(),
                worker.log_text()
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// `envelopes` read and written again by Kafka Connect's JsonConverter (schemas enabled), one
/// output line each (`tests/java/JsonConverterCheck.java`, run by the machine's Java on Kafka
/// Connect's own jars).
fn through_kafka_connect(envelopes: &[String]) -> Vec<String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let classpath = format!("{}/*", connect_libs().display());
    let mut java = Command::new("java")
        .args(["-cp", &classpath])
        .arg(repo_root().join("tests/java/JsonConverterCheck.java"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run java");
    let mut input = java.stdin.take().unwrap();
    for line in envelopes {
        writeln!(input, "{line}").unwrap();
    }
    drop(input);
    let output = java.wait_with_output().unwrap();
    assert!(output.status.success(), "the JsonConverter check failed");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The password file both connectors read through the file config provider.
fn secrets(dir: &Path) -> PathBuf {
    let secrets = dir.join("db.properties");
    std::fs::write(&secrets, "password=connect-secret\n").unwrap();
    secrets
}

fn worker_settings(plugins: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "300".to_owned()),
        ("config.providers", "file".to_owned()),
        (
            "config.providers.file.class",
            "org.apache.kafka.common.config.provider.FileConfigProvider".to_owned(),
        ),
    ]
}

/// Kafka Connect's json converter with schemas, for keys and values.
const JSON_WITH_SCHEMAS: [(&str, &str); 4] = [
    (
        "key.converter",
        "org.apache.kafka.connect.json.JsonConverter",
    ),
    ("key.converter.schemas.enable", "true"),
    (
        "value.converter",
        "org.apache.kafka.connect.json.JsonConverter",
    ),
    ("value.converter.schemas.enable", "true"),
];

#[test]
fn a_round_trip_through_kafka_copies_every_type_and_update_and_survives_kill_9() {
    let (source_db, sink_db) = (fresh_database("rt_src"), fresh_database("rt_dst"));
    let mut c = client(&source_db);
    c.simple_query(ITEMS).unwrap();
    c.close();
    insert_items(&source_db, 1, 301);

    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["postgres-source", "postgres-sink"], &[]);
    let password = format!("${{file:{}:password}}", secrets(dir.path()).display());
    let prefix = format!("rt-{}-", uuid::Uuid::new_v4().simple());
    let grant = format!("127.0.0.1:{}", postgres::port());
    let mut source = vec![
        ("name", "rt-source".to_owned()),
        ("connector.class", "postgres-source".to_owned()),
        ("connection.url", jdbc_url(&source_db)),
        ("connection.user", "connect".to_owned()),
        ("connection.password", password.clone()),
        ("mode", "timestamp+incrementing".to_owned()),
        ("timestamp.column.name", "changed".to_owned()),
        ("incrementing.column.name", "id".to_owned()),
        ("topic.prefix", prefix.clone()),
        ("poll.interval.ms", "200".to_owned()),
        ("batch.max.rows", "50".to_owned()),
        ("sandbox.net.connect", grant.clone()),
    ];
    let mut sink = vec![
        ("name", "rt-sink".to_owned()),
        ("connector.class", "postgres-sink".to_owned()),
        ("topics", format!("{prefix}items")),
        ("connection.url", jdbc_url(&sink_db)),
        ("connection.user", "connect".to_owned()),
        ("connection.password", password),
        ("table.name.format", "items".to_owned()),
        ("insert.mode", "upsert".to_owned()),
        ("pk.mode", "record_key".to_owned()),
        ("auto.create", "true".to_owned()),
        ("batch.size", "40".to_owned()),
        ("sandbox.net.connect", grant),
    ];
    for (k, v) in JSON_WITH_SCHEMAS {
        source.push((k, v.to_owned()));
        sink.push((k, v.to_owned()));
    }
    let (source_file, sink_file) = (
        dir.path().join("source.properties"),
        dir.path().join("sink.properties"),
    );
    write_properties(&source_file, &source);
    write_properties(&sink_file, &sink);
    let connectors = [source_file, sink_file];
    let settings = worker_settings(&plugins);
    let worker = Worker::start(dir.path(), &settings, &connectors);
    wait_for_equal(&source_db, &sink_db, Duration::from_secs(90), &worker);

    // What Kafka holds is Kafka Connect's JSON with the source's schema.
    let first = consume(&format!("{prefix}items"), 1, Duration::from_secs(10));
    let envelope: Value = serde_json::from_slice(first[0].value.as_deref().unwrap()).unwrap();
    let fields = envelope["schema"]["fields"].as_array().unwrap();
    let field = |name: &str| fields.iter().find(|f| f["field"] == name).unwrap().clone();
    assert_eq!(envelope["schema"]["name"], "items");
    assert_eq!(
        field("id"),
        json!({"type": "int32", "optional": false, "field": "id"})
    );
    assert_eq!(
        field("price")["name"],
        "org.apache.kafka.connect.data.Decimal"
    );
    assert_eq!(field("price")["parameters"]["scale"], "2");
    assert_eq!(
        field("changed")["name"],
        "org.apache.kafka.connect.data.Timestamp"
    );
    assert_eq!(field("day")["name"], "org.apache.kafka.connect.data.Date");
    assert_eq!(field("payload")["type"], "bytes");
    assert_eq!(envelope["payload"]["id"], 1);
    let key: Value = serde_json::from_slice(first[0].key.as_deref().unwrap()).unwrap();
    assert_eq!(
        key,
        json!({"schema": {"type": "struct", "fields": [{"type": "int32", "optional": false, "field": "id"}], "optional": false},
               "payload": {"id": 1}})
    );

    // Kafka Connect's own JsonConverter reads every key and value as the data they describe and
    // writes them back as the same JSON (rows with and without nulls, every type).
    let records = consume(&format!("{prefix}items"), 40, Duration::from_secs(10));
    let ours: Vec<String> = records
        .iter()
        .flat_map(|r| [r.key.as_deref().unwrap(), r.value.as_deref().unwrap()])
        .map(|b| String::from_utf8(b.to_vec()).unwrap())
        .collect();
    let theirs = through_kafka_connect(&ours);
    assert_eq!(theirs.len(), ours.len(), "{theirs:?}");
    for (ours, theirs) in ours.iter().zip(&theirs) {
        let parsed: Value = serde_json::from_str(theirs)
            .unwrap_or_else(|_| panic!("Kafka Connect's JsonConverter refused {ours}: {theirs}"));
        assert_eq!(
            serde_json::from_str::<Value>(ours).unwrap(),
            parsed,
            "Kafka Connect's JsonConverter writes this record differently"
        );
    }

    // Updates (timestamp+incrementing sees them; upsert applies them) and new rows, written
    // while the worker is killed and started again.
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let (db, writing) = (source_db.clone(), writing.clone());
        std::thread::spawn(move || {
            for round in 0..20u32 {
                insert_items(&db, 1001 + round * 50, 1051 + round * 50);
                let mut c = client(&db);
                c.execute(
                    "UPDATE items SET name = name || ' updated', price = price + 1,
                            changed = date_trunc('milliseconds', clock_timestamp())
                     WHERE id % 20 = $1::int",
                    &[Some(&(round % 20).to_string())],
                )
                .unwrap();
                c.close();
                std::thread::sleep(Duration::from_millis(100));
            }
            writing.store(false, Ordering::SeqCst);
        })
    };
    // Kill once the sink has some of the new rows and the writer is still busy.
    let started = Instant::now();
    while sink_contents(&sink_db).len() < 450 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        writing.load(Ordering::SeqCst),
        "the writer should still be writing when the worker is killed"
    );
    worker.kill();
    let worker = Worker::start(dir.path(), &settings, &connectors);
    writer.join().unwrap();
    let mut c = client(&source_db);
    let updated = c
        .query(
            "SELECT count(*) FROM items WHERE name LIKE '%updated%'",
            &[],
        )
        .unwrap();
    c.close();
    assert_ne!(updated.rows[0][0].as_deref(), Some("0"));
    wait_for_equal(&source_db, &sink_db, Duration::from_secs(120), &worker);
    assert_eq!(contents(&source_db, true).len(), 300 + 20 * 50);
    worker.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_rows_go_to_the_dead_letter_queue_and_tombstones_delete() {
    let db = fresh_database("dlq");
    let mut c = client(&db);
    c.simple_query(
        "CREATE TABLE stock (sku text PRIMARY KEY, qty integer NOT NULL CHECK (qty >= 0))",
    )
    .unwrap();
    c.close();
    let topic = unique_topic("stock");
    let dlq = unique_topic("stock-dlq");
    let key = |sku: &str| {
        json!({"schema": {"type": "struct", "fields": [{"type": "string", "optional": false, "field": "sku"}], "optional": false},
               "payload": {"sku": sku}})
        .to_string()
        .into_bytes()
    };
    let value = |sku: &str, qty: i64| {
        json!({"schema": {"type": "struct", "fields": [
                   {"type": "string", "optional": false, "field": "sku"},
                   {"type": "int32", "optional": false, "field": "qty"}], "optional": false, "name": "stock"},
               "payload": {"sku": sku, "qty": qty}})
        .to_string()
        .into_bytes()
    };
    let mut records: Vec<KeyValue> = (0..10)
        .map(|i| {
            (
                Some(key(&format!("s{i}"))),
                Some(value(&format!("s{i}"), i * 10)),
            )
        })
        .collect();
    // A row the table's CHECK refuses, in the middle of the batch.
    records.insert(4, (Some(key("bad")), Some(value("bad", -5))));
    // A tombstone deletes s2.
    records.push((Some(key("s2")), None));
    create_topic(&topic, 1).await;
    produce_keyed(&topic, &records);

    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["postgres-sink"], &[]);
    let password = format!("${{file:{}:password}}", secrets(dir.path()).display());
    let settings = worker_settings(&plugins);
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let mut config = json!({
        "connector.class": "postgres-sink",
        "topics": topic,
        "connection.url": jdbc_url(&db),
        "connection.user": "connect",
        "connection.password": password,
        "table.name.format": "stock",
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "delete.enabled": "true",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true",
        "sandbox.net.connect": format!("127.0.0.1:{}", postgres::port()),
    });
    for (k, v) in JSON_WITH_SCHEMAS {
        config[k] = json!(v);
    }
    assert_eq!(
        create(&url, "stock-sink", config).await,
        reqwest::StatusCode::CREATED
    );

    let dead = consume(&dlq, 1, Duration::from_secs(60));
    assert_eq!(dead.len(), 1, "{}", worker.log_text());
    let dead_value: Value = serde_json::from_slice(dead[0].value.as_deref().unwrap()).unwrap();
    assert_eq!(dead_value["payload"]["sku"], "bad");
    let message = dead[0]
        .header("__connect.errors.exception.message")
        .unwrap_or_default();
    assert!(message.contains("check constraint"), "{message}");
    let expected: Vec<String> = (0..10)
        .filter(|i| *i != 2)
        .map(|i| format!("s{i} | {}", i * 10))
        .collect();
    let started = Instant::now();
    loop {
        let mut c = client(&db);
        let rows = c
            .query("SELECT sku, qty FROM stock ORDER BY sku", &[])
            .unwrap();
        c.close();
        let rows: Vec<String> = rows
            .rows
            .iter()
            .map(|r| {
                format!(
                    "{} | {}",
                    r[0].as_deref().unwrap_or(""),
                    r[1].as_deref().unwrap_or("")
                )
            })
            .collect();
        if rows == expected {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "every good row written, s2 deleted, the bad one not: {rows:?}\n{}",
            worker.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    worker.stop();
}
