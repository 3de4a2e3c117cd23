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

pub async fn health() -> Json<Value> {
    Json(
        json!({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}),
    )
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
