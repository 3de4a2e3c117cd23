//! `postgres-source` in a real worker, against the real PostgreSQL server of
//! `scripts/postgres` and the real broker: the seeds' example (five tables, `tasks.max=3`),
//! rows inserted later, a table created while the connector runs, and the timestamp mode.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{self, consume};
use wasm_connect_tests::plugins_with;
use wasm_connect_tests::postgres::{self, client, fresh_database, jdbc_url};
use wasm_connect_tests::rest::{create, get};
use wasm_connect_tests::worker::Worker;

const SEED_TABLES: [&str; 5] = ["users", "orders", "products", "inventory", "audit_log"];

fn create_table(db: &str, table: &str, rows: u32) {
    let mut c = client(db);
    c.simple_query(&format!(
        "CREATE TABLE {table} (id bigserial PRIMARY KEY, name text NOT NULL,
                               updated_at timestamp NOT NULL DEFAULT clock_timestamp());
         INSERT INTO {table} (name) SELECT '{table}-' || g FROM generate_series(1, {rows}) g"
    ))
    .unwrap();
    c.close();
}

fn insert(db: &str, table: &str, names: &[&str]) {
    let mut c = client(db);
    for name in names {
        c.execute(
            &format!("INSERT INTO {table} (name) VALUES ($1)"),
            &[Some(name)],
        )
        .unwrap();
    }
    c.close();
}

/// The values of `topic`'s records (plain JSON), waiting for `count` of them.
fn values(topic: &str, count: usize) -> Vec<Value> {
    consume(topic, count, Duration::from_secs(60))
        .iter()
        .map(|r| serde_json::from_slice(r.value.as_deref().unwrap_or(b"null")).unwrap())
        .collect()
}

/// How many tables each task reads, in task order.
async fn split(url: &str, name: &str) -> Vec<usize> {
    let tasks = get(url, &format!("/connectors/{name}/tasks")).await;
    tasks
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .map(|t| {
                    let list = t["config"]["postgres-source.task.tables"]
                        .as_str()
                        .unwrap_or("[]");
                    serde_json::from_str::<Vec<String>>(list).map_or(0, |l| l.len())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Wait (up to a minute) until the tasks of `name` read `sizes` tables each.
async fn wait_for_split(url: &str, name: &str, sizes: &[usize], worker: &Worker) {
    let started = Instant::now();
    while split(url, name).await != sizes {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "tables per task should be {sizes:?}: {:?}\n{}",
            get(url, &format!("/connectors/{name}/tasks")).await,
            worker.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn worker_with_secret(dir: &std::path::Path) -> (Worker, String, String) {
    let plugins = plugins_with(dir, &["postgres-source"], &[]);
    let secrets = dir.join("db.properties");
    std::fs::write(&secrets, "password=connect-secret\n").unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "500".to_owned()),
        ("connector.monitor.interval.ms", "500".to_owned()),
        ("config.providers", "file".to_owned()),
        (
            "config.providers.file.class",
            "org.apache.kafka.common.config.provider.FileConfigProvider".to_owned(),
        ),
    ];
    let mut worker = Worker::start(dir, &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let password = format!("${{file:{}:password}}", secrets.display());
    (worker, url, password)
}

fn source_config(db: &str, password: &str, prefix: &str, extra: Value) -> Value {
    let mut config = json!({
        "connector.class": "postgres-source",
        "connection.url": jdbc_url(db),
        "connection.user": "connect",
        "connection.password": password,
        "topic.prefix": prefix,
        "poll.interval.ms": "300",
        "table.poll.interval.ms": "500",
        "sandbox.net.connect": format!("127.0.0.1:{}", postgres::port()),
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        config[k] = v.clone();
    }
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn the_seed_s_five_tables_split_two_two_one_and_every_row_arrives_then_later_rows_and_tables()
{
    let db = fresh_database("seed");
    for table in SEED_TABLES {
        create_table(&db, table, 20);
    }
    let dir = tempfile::tempdir().unwrap();
    let (worker, url, password) = worker_with_secret(dir.path());
    let prefix = format!("pg-{}-", uuid::Uuid::new_v4().simple());
    let config = source_config(
        &db,
        &password,
        &prefix,
        json!({"mode": "incrementing", "incrementing.column.name": "id", "tasks.max": "3"}),
    );
    assert_eq!(create(&url, "seed", config).await, StatusCode::CREATED);

    wait_for_split(&url, "seed", &[2, 2, 1], &worker).await;
    // Every row of every table, keyed by its primary key, with its columns.
    for table in SEED_TABLES {
        let values = values(&format!("{prefix}{table}"), 20);
        let names: Vec<&str> = values.iter().filter_map(|v| v["name"].as_str()).collect();
        let expected: Vec<String> = (1..=20).map(|i| format!("{table}-{i}")).collect();
        assert_eq!(names, expected, "{table}: in order, each once");
        assert!(
            values.iter().all(|v| v["updated_at"].is_i64()),
            "{values:?}"
        );
    }
    let keys = consume(&format!("{prefix}users"), 1, Duration::from_secs(10));
    assert_eq!(keys[0].key.as_deref(), Some(&br#"{"id":1}"#[..]));

    // Rows inserted later arrive.
    insert(&db, "users", &["late-1", "late-2"]);
    insert(&db, "audit_log", &["late-3"]);
    let users = values(&format!("{prefix}users"), 22);
    assert_eq!(users[20]["name"], "late-1");
    assert_eq!(users[21]["name"], "late-2");
    assert_eq!(
        values(&format!("{prefix}audit_log"), 21)[20]["name"],
        "late-3"
    );

    // A sixth table, created while the connector runs, is found and split in.
    create_table(&db, "shipments", 3);
    wait_for_split(&url, "seed", &[2, 2, 2], &worker).await;
    let shipments = values(&format!("{prefix}shipments"), 3);
    assert_eq!(shipments.len(), 3);
    // Tables that moved between tasks resumed from their offsets: nothing read twice.
    insert(&db, "users", &["after-split"]);
    let users = values(&format!("{prefix}users"), 23);
    let mut seen = BTreeMap::new();
    for v in &users {
        *seen.entry(v["id"].as_i64().unwrap_or(0)).or_insert(0) += 1;
    }
    assert!(
        seen.values().all(|n| *n == 1),
        "each row once after the new split: {seen:?}"
    );
    assert_eq!(users.last().unwrap()["name"], "after-split");
    worker.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn timestamp_mode_reads_rows_inserted_and_updated_later() {
    let db = fresh_database("ts");
    create_table(&db, "users", 10);
    let dir = tempfile::tempdir().unwrap();
    let (worker, url, password) = worker_with_secret(dir.path());
    let prefix = format!("pgts-{}-", uuid::Uuid::new_v4().simple());
    let config = source_config(
        &db,
        &password,
        &prefix,
        json!({"mode": "timestamp", "timestamp.column.name": "updated_at",
               "table.include.list": "users", "batch.max.rows": "3"}),
    );
    assert_eq!(create(&url, "ts", config).await, StatusCode::CREATED);
    let topic = format!("{prefix}users");
    let first = values(&topic, 10);
    assert_eq!(
        first.len(),
        10,
        "{first:?}\n{}\n{}",
        get(&url, "/connectors/ts/status").await,
        worker.log_text()
    );
    insert(&db, "users", &["late"]);
    let mut c = client(&db);
    c.execute(
        "UPDATE users SET name = 'renamed', updated_at = clock_timestamp() WHERE id = 1",
        &[],
    )
    .unwrap();
    c.close();
    let values = values(&topic, 12);
    assert_eq!(values[10]["name"], "late");
    assert_eq!(values[11]["name"], "renamed");
    assert_eq!(values[11]["id"], 1);
    worker.stop();
}
