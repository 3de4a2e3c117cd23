//! `GET /`, `GET /health`, `GET /health/ready` and the loggers endpoints.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::error::{ApiError, JsonBody};
use crate::herder::Herder;
use crate::logging;

/// `GET /`: the worker's version and the commit it was built from (`build.rs`), and the Kafka
/// cluster's id, Kafka Connect's shape.
pub async fn root(State(herder): State<Arc<Herder>>) -> Json<Value> {
    let cluster = herder.kafka_cluster_id().await;
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": env!("WASM_CONNECT_COMMIT"),
        "kafka_cluster_id": cluster,
    }))
}

/// How long `GET /health` waits for the control loop (Kafka Connect's health check timeout).
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET /health`: liveness, as KIP-1017 defines it. `503 starting` until the plugins are loaded
/// and the stored connectors restored; then `200 healthy` if the control loop answers within
/// [`HEALTH_TIMEOUT`], else `500 unhealthy` (a worker that takes no requests: restart it). A
/// Kafka outage is not a liveness failure (restarting the worker would not bring Kafka back);
/// `/health/ready` reports it. Answers without credentials (see `auth::OPEN`).
pub async fn health(State(herder): State<Arc<Herder>>) -> (StatusCode, Json<Value>) {
    let started = herder.is_started();
    liveness(started, herder.answers_within(HEALTH_TIMEOUT)).await
}

/// The health answer once whether start-up is done is known and `answers` says whether the
/// control loop answered in time (asked only after start-up, as Kafka Connect does).
async fn liveness(
    started: bool,
    answers: impl std::future::Future<Output = bool>,
) -> (StatusCode, Json<Value>) {
    if !started {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "starting", "message": STARTING})),
        );
    }
    if answers.await {
        (
            StatusCode::OK,
            Json(json!({"status": "healthy", "message": HEALTHY})),
        )
    } else {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(
                json!({"status": "unhealthy", "message": "Worker was unable to handle this request and may be unable to handle other requests."}),
            ),
        )
    }
}

const STARTING: &str = "Worker is still starting up.";
const HEALTHY: &str = "Worker has completed startup and is ready to handle requests.";

fn readiness_body(started: bool, outage: Option<crate::kafka::health::Outage>) -> Value {
    match outage {
        _ if !started => {
            json!({"status": "starting", "message": format!("{STARTING} Loading plugins and restoring connectors.")})
        }
        None => json!({"status": "healthy", "message": HEALTHY}),
        Some(outage) => {
            json!({"status": "degraded", "message": format!("{}; connectors wait for it", outage.describe())})
        }
    }
}

/// `GET /health/ready`: readiness. 503 while the worker starts (plugins load, stored connectors
/// come back) and while the Kafka cluster does not answer (nothing can move; the body says
/// `degraded` and why), 200 otherwise.
pub async fn ready(State(herder): State<Arc<Herder>>) -> (StatusCode, Json<Value>) {
    // One reading for both, so code and body agree.
    let outage = herder.shared().health.outage();
    let started = herder.is_started();
    let degraded = outage.is_some() || !started;
    let body = Json(readiness_body(started, outage));
    let code = if degraded {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
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
    /// The Kafka cluster id, or null when the cluster does not answer in time. Once known it
    /// is kept (a cluster's id never changes), and during an outage an unknown one is not
    /// asked for: `GET /` answers at once either way, as probes expect.
    pub async fn kafka_cluster_id(&self) -> Option<String> {
        if let Some(id) = self.cluster_id.get() {
            return Some(id.clone());
        }
        if self.shared().health.outage().is_some() {
            return None;
        }
        let producer = Arc::clone(&self.shared().producer);
        let id = tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_cluster_id(std::time::Duration::from_secs(5))
        })
        .await
        .ok()
        .flatten()?;
        Some(self.cluster_id.get_or_init(|| id).clone())
    }
}

/// `GET /admin/cluster` (distributed mode): this worker in its group: generation, whether it
/// leads, the leader's URL, and the connectors and tasks it runs. 404 in standalone mode.
pub async fn cluster(State(herder): State<Arc<Herder>>) -> Result<Json<Value>, ApiError> {
    let cluster = herder
        .cluster()
        .ok_or_else(|| ApiError::not_found("This worker is not in distributed mode"))?;
    Ok(Json(json!(cluster.membership())))
}

/// `POST /internal/config/append` (distributed mode, on the group's leader): a follower's
/// records for the config topic. Only requests signed with the cluster's session key are taken
/// (checked here, not by the API's credentials: workers call each other without them).
pub async fn internal_append(
    State(herder): State<Arc<Herder>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use crate::distributed::cluster::{SIGNATURE_HEADER, TIMESTAMP_HEADER};
    use axum::response::IntoResponse;
    let Some(cluster) = herder.cluster() else {
        return ApiError::not_found("This worker is not in distributed mode").into_response();
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match cluster
        .append_forwarded(header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER), &body)
        .await
    {
        Ok(offsets) => Json(json!({ "offsets": offsets })).into_response(),
        Err((code, message)) => super::error::ApiError::new(
            StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            message,
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn liveness_has_kip_1017_s_three_answers() {
        let (code, body) = liveness(false, async { true }).await;
        assert_eq!(
            (code, body["status"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("starting"))
        );
        let (code, body) = liveness(true, async { true }).await;
        assert_eq!(
            (code, body["status"].as_str()),
            (StatusCode::OK, Some("healthy"))
        );
        // A control loop that does not answer in time: what `Herder::answers_within` reports
        // after its timeout.
        let (code, body) = liveness(true, async { false }).await;
        assert_eq!(
            (code, body["status"].as_str()),
            (StatusCode::INTERNAL_SERVER_ERROR, Some("unhealthy"))
        );
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .starts_with("Worker was unable to handle this request")
        );
    }
}
