//! `GET /`, `GET /health` and the loggers endpoints.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::error::{ApiError, JsonBody};
use crate::herder::Herder;
use crate::logging;

pub async fn root(State(herder): State<Arc<Herder>>) -> Json<Value> {
    let cluster = herder.kafka_cluster_id().await;
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": option_env!("WASM_CONNECT_COMMIT").unwrap_or("unknown"),
        "kafka_cluster_id": cluster,
    }))
}

/// `GET /health`: liveness, Kafka Connect's shape. The worker itself is alive whenever it
/// answers, so this is 200 even while Kafka is away (a liveness probe must not restart a worker
/// that waits for its cluster); the body then says `degraded` and why.
pub async fn health(State(herder): State<Arc<Herder>>) -> Json<Value> {
    Json(health_body(
        herder.is_started(),
        herder.shared().health.outage(),
    ))
}

fn health_body(started: bool, outage: Option<crate::kafka::health::Outage>) -> Value {
    match outage {
        _ if !started => {
            json!({"status": "starting", "message": "Worker is still starting up: loading plugins and restoring connectors."})
        }
        None => {
            json!({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."})
        }
        Some(outage) => {
            json!({"status": "degraded", "message": format!("{}; connectors wait for it", outage.describe())})
        }
    }
}

/// `GET /health/ready`: readiness. 503 while the worker starts (plugins load, stored connectors
/// come back) and while the Kafka cluster does not answer (nothing can move), 200 otherwise;
/// same body as `/health`.
pub async fn ready(State(herder): State<Arc<Herder>>) -> (axum::http::StatusCode, Json<Value>) {
    // One reading for both, so code and body agree.
    let outage = herder.shared().health.outage();
    let started = herder.is_started();
    let degraded = outage.is_some() || !started;
    let body = Json(health_body(started, outage));
    let code = if degraded {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    } else {
        axum::http::StatusCode::OK
    };
    (code, body)
}

fn level_json(level: &logging::LoggerLevel) -> Value {
    json!({"level": level.level, "last_modified": level.last_modified})
}

pub async fn loggers() -> Json<Value> {
    let all = logging::loggers();
    Json(Value::Object(
        all.iter()
            .map(|(name, level)| (name.clone(), level_json(level)))
            .collect(),
    ))
}

pub async fn logger(Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    logging::level_of(&name)
        .map(|l| Json(level_json(&l)))
        .ok_or_else(|| ApiError::not_found(format!("Logger {name} not found")))
}

pub async fn set_logger(
    Path(name): Path<String>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let level = body
        .get("level")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request("The body must be {\"level\": \"DEBUG\"}"))?;
    let affected = logging::set_level(&name, level).map_err(ApiError::bad_request)?;
    Ok(Json(json!(affected)))
}

impl Herder {
    /// The Kafka cluster id, or null when the cluster does not answer in time.
    pub async fn kafka_cluster_id(&self) -> Option<String> {
        let producer = Arc::clone(&self.shared().producer);
        tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_cluster_id(std::time::Duration::from_secs(5))
        })
        .await
        .ok()
        .flatten()
    }
}
