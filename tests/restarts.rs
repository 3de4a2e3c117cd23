//! The restart policy: a failed task is rebuilt from scratch and resumes from its committed
//! offsets, with backoff, until it works or it has failed too often.

use std::fs;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{consume, create_topic, unique_topic};
use wasm_connect_tests::worker::{Worker, eventually};
use wasm_connect_tests::{kafka, test_plugin_file};

async fn setup(dir: &std::path::Path) -> (Worker, String, String) {
    let plugins = dir.join("plugins");
    fs::create_dir_all(&plugins).unwrap();
    fs::copy(test_plugin_file("crashy"), plugins.join("crashy.wasm")).unwrap();
    fs::create_dir_all(dir.join("state")).unwrap();
    let topic = unique_topic("crashy");
    create_topic(&topic, 1).await;
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "200".to_owned()),
        ("task.restart.backoff.initial.ms", "200".to_owned()),
    ];
    let mut worker = Worker::start(dir, &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    (worker, url, topic)
}

async fn create(url: &str, config: Value) -> StatusCode {
    reqwest::Client::new()
        .post(format!("{url}/connectors"))
        .json(&json!({"name": "crashy", "config": config}))
        .send()
        .await
        .unwrap()
        .status()
}

async fn task_status(url: &str) -> Value {
    reqwest::get(format!("{url}/connectors/crashy/tasks/0/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_traps_twice_is_restarted_and_completes_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let (worker, url, topic) = setup(dir.path()).await;
    let state = dir.path().join("state");
    let config = json!({"connector.class": "crashy", "topic": topic, "state.dir": state.display().to_string(),
        "sandbox.fs.write": state.display().to_string(), "fail.first": "2", "count": "200", "value.converter": "string"});
    assert_eq!(create(&url, config).await, StatusCode::CREATED);

    let records = consume(&topic, 1000, Duration::from_secs(30));
    let mut values: Vec<u64> = records
        .iter()
        .map(|r| {
            String::from_utf8(r.value.clone().unwrap())
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    values.sort();
    values.dedup();
    assert_eq!(
        values,
        (0..200).collect::<Vec<_>>(),
        "every record arrived:\n{}",
        worker.log_text()
    );
    assert_eq!(
        fs::read_to_string(state.join("instances")).unwrap().trim(),
        "3",
        "two traps, then a third instance that works"
    );
    assert_eq!(task_status(&url).await["state"], "RUNNING");
    let log = worker.log_text();
    assert_eq!(log.matches("restarting it in").count(), 2, "{log}");
    assert!(
        log.contains("crashy instance gives up"),
        "the trap's panic message is logged"
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_always_traps_ends_failed_after_the_configured_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let (worker, url, topic) = setup(dir.path()).await;
    let state = dir.path().join("state");
    let config = json!({"connector.class": "crashy", "topic": topic, "state.dir": state.display().to_string(),
        "sandbox.fs.write": state.display().to_string(), "fail.first": "1000", "task.restart.max.attempts": "2"});
    assert_eq!(create(&url, config).await, StatusCode::CREATED);
    let mut last = Value::Null;
    let failed = eventually(Duration::from_secs(60), || {
        last = futures_block(task_status(&url));
        last["state"] == "FAILED"
    });
    assert!(failed, "{last}\n{}", worker.log_text());
    let trace = last["trace"].as_str().unwrap();
    assert!(
        trace.contains("the plugin trapped") && trace.contains("task.restart.max.attempts is 2"),
        "{trace}"
    );
    assert_eq!(
        fs::read_to_string(state.join("instances")).unwrap().trim(),
        "3",
        "the first run and two restarts"
    );
    worker.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_config_is_not_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let (worker, url, topic) = setup(dir.path()).await;
    // The state directory is not granted: the task's create reports an invalid config, which a
    // restart would only repeat.
    let config = json!({"connector.class": "crashy", "topic": topic, "state.dir": "/not/granted", "fail.first": "0"});
    assert_eq!(create(&url, config).await, StatusCode::CREATED);
    let mut last = Value::Null;
    assert!(eventually(Duration::from_secs(60), || {
        last = futures_block(task_status(&url));
        last["state"] == "FAILED"
    }));
    let trace = last["trace"].as_str().unwrap();
    assert!(
        trace.contains("/not/granted")
            && trace.contains("not restarted: a restart would fail the same way"),
        "{last}"
    );
    assert!(
        !worker.log_text().contains("restarting it in"),
        "no restart was attempted"
    );
    worker.stop();
}

fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}
