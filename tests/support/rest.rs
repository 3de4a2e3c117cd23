//! Talking to a worker's REST API from tests (blocking helpers usable from async tests on the
//! multi-threaded runtime).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::worker::eventually;

/// Run a future to completion from synchronous code inside a multi-threaded tokio test.
pub fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// `POST /connectors`; the status code.
pub async fn create(url: &str, name: &str, config: Value) -> StatusCode {
    reqwest::Client::new()
        .post(format!("{url}/connectors"))
        .json(&json!({"name": name, "config": config}))
        .send()
        .await
        .expect("POST /connectors")
        .status()
}

/// `GET <path>` as JSON (`Null` when the body is not JSON).
pub async fn get(url: &str, path: &str) -> Value {
    match reqwest::get(format!("{url}{path}")).await {
        Ok(response) => response.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

/// Task `id` of connector `name`: its status.
pub async fn task_status(url: &str, name: &str, id: u32) -> Value {
    get(url, &format!("/connectors/{name}/tasks/{id}/status")).await
}

/// Task `id` of connector `name`: its metrics.
pub async fn task_metrics(url: &str, name: &str, id: u32) -> Value {
    get(url, &format!("/connectors/{name}/tasks/{id}/metrics")).await
}

/// Wait until task 0 of `name` is in `state`; returns its last status (panics on timeout).
pub fn wait_for_state(url: &str, name: &str, state: &str, timeout: Duration) -> Value {
    let mut last = Value::Null;
    let reached = eventually(timeout, || {
        last = block(task_status(url, name, 0));
        last["state"] == state
    });
    assert!(reached, "task 0 of {name} never reached {state}: {last}");
    last
}

/// Create a `datagen` connector `name` writing `rate` records a second of 100-byte string
/// values to `topic`, and wait until it has written a second's worth.
pub async fn start_neighbour(url: &str, name: &str, topic: &str, rate: u64) {
    let config = json!({"connector.class": "datagen", "topic": topic, "rate": rate.to_string(),
        "value.size": "100", "value.converter": "string"});
    assert_eq!(create(url, name, config).await, StatusCode::CREATED);
    let mut done = 0;
    for _ in 0..300 {
        done = task_metrics(url, name, 0).await["records_done"]
            .as_u64()
            .unwrap_or(0);
        if done >= rate {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} wrote {done} records in 30 s, not {rate}");
}
