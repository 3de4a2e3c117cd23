//! The Kafka cluster goes away and comes back: the real broker is stopped and restarted with
//! `scripts/kafka` while a source and a sink run. The source stops polling once its in-flight
//! budget is used up, the sink waits, REST keeps answering, no task fails, and once the broker
//! is back both finish with nothing lost.
//!
//! This is the only test in its binary: cargo runs test binaries one after another, so stopping
//! the shared broker here cannot disturb other tests.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{self, consume, create_topic, unique_topic};
use wasm_connect_tests::rest::{block, create, get, task_metrics, task_status};
use wasm_connect_tests::worker::{Worker, eventually, lines};
use wasm_connect_tests::{plugins_with, repo_root};

/// At 300 records/s, 50 s of source: the outage must hit mid-run even when the sink's group
/// join is slow (with 8 000 records, one CI run had the source done before the sink reached
/// its 600th record).
const COUNT: u64 = 15000;
const IN_FLIGHT: u64 = 300;

fn kafka_script(command: &str) {
    let output = Command::new(repo_root().join("scripts/kafka"))
        .arg(command)
        .output()
        .expect("run scripts/kafka");
    assert!(
        output.status.success(),
        "scripts/kafka {command} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Starts the broker again however the test ends, so later tests find it.
struct RestartBroker;

impl Drop for RestartBroker {
    fn drop(&mut self) {
        kafka_script("start");
    }
}

/// Whether every task and connector status carries the outage trace, `/health/ready` answers
/// 503 saying degraded and why, and `/health` (liveness, KIP-1017) stays healthy.
async fn degraded_everywhere(url: &str) -> bool {
    let mut all = true;
    for name in ["source", "sink"] {
        let status = get(url, &format!("/connectors/{name}/status")).await;
        for trace in [&status["connector"]["trace"], &status["tasks"][0]["trace"]] {
            all &= trace
                .as_str()
                .is_some_and(|t| t.starts_with("Kafka unreachable since "));
        }
        all &= status["tasks"][0]["state"] == "RUNNING";
    }
    let health = get(url, "/health").await;
    let Ok(ready) = reqwest::get(format!("{url}/health/ready")).await else {
        return false;
    };
    let ready_status = ready.status();
    let ready: Value = ready.json().await.unwrap_or(Value::Null);
    all && health["status"] == "healthy"
        && ready["status"] == "degraded"
        && ready["message"]
            .as_str()
            .is_some_and(|m| m.contains("Kafka unreachable"))
        && ready_status == StatusCode::SERVICE_UNAVAILABLE
}

/// Whether no status carries the outage trace, `/health` is healthy and `/health/ready` 200.
async fn normal_everywhere(url: &str) -> bool {
    let mut all = true;
    for name in ["source", "sink"] {
        let status = get(url, &format!("/connectors/{name}/status")).await;
        all &= status["connector"]["trace"].is_null()
            && status["tasks"][0]["state"] == "RUNNING"
            && !status["tasks"][0]["trace"]
                .as_str()
                .is_some_and(|t| t.contains("Kafka unreachable"));
    }
    let health = get(url, "/health").await;
    let ready = reqwest::get(format!("{url}/health/ready"))
        .await
        .map(|r| r.status());
    all && health["status"] == "healthy" && ready.ok() == Some(StatusCode::OK)
}

fn count(metrics: &Value, key: &str) -> u64 {
    metrics[key].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_outage_pauses_the_pipeline_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen", "file-sink"], &[]);
    let topic = unique_topic("outage");
    create_topic(&topic, 1).await;
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "500".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let source = json!({"connector.class": "datagen", "topic": topic, "count": COUNT.to_string(), "rate": "300",
        "value.converter": "string", "source.max.in.flight.records": IN_FLIGHT.to_string()});
    let sink = json!({"connector.class": "file-sink", "topics": topic, "file": out.join("out.txt").display().to_string(),
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(create(&url, "source", source).await, StatusCode::CREATED);
    assert_eq!(create(&url, "sink", sink).await, StatusCode::CREATED);
    assert!(
        eventually(Duration::from_secs(60), || {
            count(&block(task_metrics(&url, "sink", 0)), "records_done") >= 600
        }),
        "the pipeline runs:\n{}",
        worker.log_text()
    );

    let _restart = RestartBroker;
    let log_before = worker.log_text().len();
    kafka_script("stop");
    // While the broker is away: REST answers, nothing fails, and the source has at most its
    // in-flight budget of records unacknowledged (it stopped polling).
    let before = block(task_metrics(&url, "source", 0));
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(250));
        for name in ["source", "sink"] {
            let status = task_status(&url, name, 0).await;
            assert_eq!(
                status["state"], "RUNNING",
                "{name} during the outage: {status}"
            );
        }
        let metrics = task_metrics(&url, "source", 0).await;
        let unacknowledged = count(&metrics, "records_in") - count(&metrics, "records_done");
        assert!(
            unacknowledged <= IN_FLIGHT,
            "{unacknowledged} records in flight, over the budget of {IN_FLIGHT}: {metrics}"
        );
    }
    let during = task_metrics(&url, "source", 0).await;
    assert!(
        count(&during, "records_in") <= count(&before, "records_done") + IN_FLIGHT,
        "the source stopped polling: before {before}, during {during}"
    );
    assert!(
        count(&during, "records_in") < COUNT,
        "the outage hit mid-run: {during}"
    );
    // The statuses and health say the cluster is away (the probe notices within seconds).
    let degraded = eventually(Duration::from_secs(30), || block(degraded_everywhere(&url)));
    assert!(
        degraded,
        "statuses and /health/ready show the outage: {}\n{}",
        block(get(&url, "/connectors/sink/status")),
        block(get(&url, "/health/ready"))
    );
    let health = reqwest::get(format!("{url}/health")).await.unwrap();
    assert_eq!(health.status(), StatusCode::OK, "liveness stays 200");

    let outage_log = worker.log_text()[log_before..].to_owned();
    kafka_script("start");
    // Back to normal: no outage trace, healthy, ready.
    let normal = eventually(Duration::from_secs(60), || block(normal_everywhere(&url)));
    assert!(
        normal,
        "statuses and /health return to normal: {}\n{}",
        block(get(&url, "/connectors/sink/status")),
        block(get(&url, "/health"))
    );
    // librdkafka's and the consumer's complaints are rate-limited: a line per kind per 10 s,
    // not dozens a second.
    let complaints: Vec<&str> = outage_log
        .lines()
        .filter(|l| l.contains("librdkafka") || l.contains("consumer: "))
        .collect();
    assert!(
        complaints.len() <= 40,
        "{} log lines from the Kafka clients during the outage:\n{}",
        complaints.len(),
        complaints.join("\n")
    );
    eprintln!(
        "{} Kafka client log lines during the outage",
        complaints.len()
    );
    let done = eventually(Duration::from_secs(120), || {
        let ids: BTreeSet<String> = lines(&out.join("out.txt")).into_iter().collect();
        ids.len() as u64 == COUNT
    });
    let log = worker.log_text();
    assert!(
        done,
        "{} distinct lines of {COUNT}\n{log}",
        lines(&out.join("out.txt"))
            .into_iter()
            .collect::<BTreeSet<_>>()
            .len()
    );
    let records = consume(&topic, COUNT as usize, Duration::from_secs(60));
    let ids: BTreeSet<u64> = records
        .iter()
        .filter_map(|r| String::from_utf8(r.key.clone()?).ok()?.parse().ok())
        .collect();
    assert_eq!(
        ids,
        (0..COUNT).collect(),
        "every source record reached the topic"
    );
    for name in ["source", "sink"] {
        let metrics = task_metrics(&url, name, 0).await;
        assert_eq!(
            metrics["restarts"], 0,
            "{name} was never restarted: {metrics}"
        );
    }
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}
