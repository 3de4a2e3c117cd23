//! Capacity is admitted, not discovered: a worker refuses connectors whose tasks or memory do
//! not fit, with a message that names the limit and the key to raise; what it admitted keeps
//! running; a persisted connector that no longer fits fails alone at start; and a worker holds
//! thousands of tasks, every one making progress. Real worker, real broker, real plugins.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{self, unique_topic};
use wasm_connect_tests::rest::{block, get, task_metrics};
use wasm_connect_tests::worker::{Worker, eventually};

/// `POST /connectors`: status and body.
async fn create(url: &str, name: &str, config: Value) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .post(format!("{url}/connectors"))
        .json(&json!({"name": name, "config": config}))
        .send()
        .await
        .expect("POST /connectors");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A datagen config writing `rate` records a second in all to a topic of its own.
fn datagen(tasks: u32, rate: u32) -> Value {
    json!({"connector.class": "datagen", "tasks.max": tasks.to_string(), "rate": rate.to_string(),
        "topic": unique_topic("capacity"), "value.converter": "string",
        "sandbox.memory.max.bytes": "16777216"})
}

/// Connector `name`'s state and its tasks' states.
async fn states(url: &str, name: &str) -> (String, Vec<String>) {
    let status = get(url, &format!("/connectors/{name}/status")).await;
    let tasks = status["tasks"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["state"].as_str().unwrap_or("").to_owned())
                .collect()
        })
        .unwrap_or_default();
    (
        status["connector"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        tasks,
    )
}

/// Records task 0 of `name` has written so far.
fn done(url: &str, name: &str) -> u64 {
    block(task_metrics(url, name, 0))["records_done"]
        .as_u64()
        .unwrap_or(0)
}

/// Wait until task 0 of `name` has written more than it had.
fn progresses(url: &str, name: &str) -> bool {
    let before = done(url, name);
    eventually(Duration::from_secs(30), || done(url, name) > before)
}

#[tokio::test(flavor = "multi_thread")]
async fn connectors_that_do_not_fit_are_refused_by_name_and_the_neighbour_keeps_running() {
    let dir = tempfile::tempdir().unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("tasks.max.per.worker", "10".to_owned()),
        // 10 tasks of 16 MiB fit; more memory does not.
        ("sandbox.memory.budget.bytes", (160u64 << 20).to_string()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let (status, body) = create(&url, "neighbour", datagen(2, 20)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(progresses(&url, "neighbour"), "{}", worker.log_text());

    // tasks.max over the per-connector ceiling (the worker limit here): refused before any
    // instance exists, naming the limit and the key.
    let (status, body) = create(&url, "huge", datagen(100_000, 1)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("tasks.max: 100000")
            && message.contains("tasks.max.per.connector is 10")
            && message.contains("raise tasks.max.per.connector"),
        "{message}"
    );
    // The validate endpoint says the same, on tasks.max.
    let validated: Value = reqwest::Client::new()
        .put(format!("{url}/connector-plugins/datagen/config/validate"))
        .json(&json!({"connector.class": "datagen", "name": "huge", "tasks.max": "100000", "topic": "t"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let errors: Vec<String> = validated["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["value"]["name"] == "tasks.max")
        .flat_map(|c| c["value"]["errors"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e.as_str().map(str::to_owned))
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("tasks.max.per.connector")),
        "{validated}"
    );

    // Within the ceiling, but the worker has 2 tasks already: 9 more do not fit.
    let (status, body) = create(&url, "nine", datagen(9, 9)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("at most 10 (tasks.max.per.worker)")
            && message.contains("other connectors have 2"),
        "{message}"
    );
    // 8 tasks fit; then the memory budget is what a bigger limit runs into.
    let (status, body) = create(&url, "eight", datagen(8, 8)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut hungry = datagen(8, 8);
    hungry["sandbox.memory.max.bytes"] = json!((32u64 << 20).to_string());
    let refused = reqwest::Client::new()
        .put(format!("{url}/connectors/eight/config"))
        .json(&hungry)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let text = refused.text().await.unwrap();
    assert!(
        text.contains("sandbox.memory.budget.bytes")
            && text.contains("lower sandbox.memory.max.bytes"),
        "{text}"
    );
    let eight = get(&url, "/connectors/eight/config").await;
    assert_eq!(
        eight["sandbox.memory.max.bytes"], "16777216",
        "a refused update leaves the running config alone"
    );
    // A stopped connector frees its room; resuming it needs the room back.
    let client = reqwest::Client::new();
    let put = |path: &str| client.put(format!("{url}{path}")).send();
    assert!(
        put("/connectors/eight/stop")
            .await
            .unwrap()
            .status()
            .is_success()
    );
    let (status, body) = create(&url, "six", datagen(6, 6)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let refused = put("/connectors/eight/resume").await.unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let text = refused.text().await.unwrap();
    assert!(text.contains("tasks.max.per.worker"), "{text}");
    assert_eq!(states(&url, "eight").await.0, "STOPPED");

    // Nothing of this disturbed the neighbour.
    assert_eq!(
        states(&url, "neighbour").await,
        ("RUNNING".to_owned(), vec!["RUNNING".to_owned(); 2])
    );
    assert!(progresses(&url, "neighbour"), "{}", worker.log_text());
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_persisted_connector_that_no_longer_fits_fails_alone_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let roomy = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("tasks.max.per.worker", "12".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &roomy, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    for (name, tasks) in [("big", 8), ("small", 2)] {
        let (status, body) = create(&url, name, datagen(tasks, 20)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");

    // The same data directory, a smaller worker: "big" (restored first) no longer fits.
    let tight = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("tasks.max.per.worker", "4".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &tight, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let status = get(&url, "/connectors/big/status").await;
    assert_eq!(status["connector"]["state"], "FAILED", "{status}");
    let trace = status["connector"]["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains("tasks.max: 8") && trace.contains("tasks.max.per.worker is 4"),
        "{trace}"
    );
    assert_eq!(status["tasks"], json!([]), "{status}");
    assert_eq!(
        states(&url, "small").await,
        ("RUNNING".to_owned(), vec!["RUNNING".to_owned(); 2])
    );
    assert!(progresses(&url, "small"), "{}", worker.log_text());
    // Its config is kept, so an operator can fix it.
    let config = get(&url, "/connectors/big/config").await;
    assert_eq!(config["tasks.max"], "8");
    // The worker stops cleanly, and its exit status reports the failed connector.
    let (status, log) = worker.stop();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("small: ") && log.contains("stopped."), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_thousand_tasks_run_in_one_worker_and_every_one_makes_progress() {
    // The benchmark's density rows go to 10 000 tasks; 2 000 keep this test quick in debug.
    const TASKS: u32 = 2000;
    let dir = tempfile::tempdir().unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("tasks.max.per.connector", TASKS.to_string()),
        ("offset.flush.interval.ms", "1000".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    // Two records a second per task.
    let (status, body) = create(&url, "many", datagen(TASKS, 2 * TASKS)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let mut last = (String::new(), Vec::new());
    let all_running = eventually(Duration::from_secs(120), || {
        last = block(states(&url, "many"));
        last.1.len() == TASKS as usize && last.1.iter().all(|s| s == "RUNNING")
    });
    assert!(all_running, "{last:?}\n{}", worker.log_text());
    let client = reqwest::Client::new();
    let mut stalled: Vec<u32> = (0..TASKS).collect();
    let progressed = eventually(Duration::from_secs(60), || {
        stalled.retain(|&id| {
            let metrics: Value = block(async {
                client
                    .get(format!("{url}/connectors/many/tasks/{id}/metrics"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()
            })
            .unwrap_or_default();
            metrics["records_done"].as_u64().unwrap_or(0) == 0
        });
        stalled.is_empty()
    });
    assert!(
        progressed,
        "{} tasks never had a record acknowledged, e.g. {:?}",
        stalled.len(),
        &stalled[..stalled.len().min(10)]
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}
