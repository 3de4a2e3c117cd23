//! The REST API, with Kafka Connect 4.x's paths, verbs, status codes and JSON shapes, so tools
//! written for Kafka Connect drive wasm-connect unchanged. `docs/rest.md` documents every entry
//! of [`ENDPOINTS`]; a test keeps the two in step, and another calls each one.

mod admin;
pub mod auth;
mod connectors;
pub mod error;
mod plugins;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post, put};

use crate::herder::Herder;
use error::ApiError;

/// Every endpoint: method and path (axum syntax, `{name}` for parameters).
pub const ENDPOINTS: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/health"),
    ("GET", "/health/ready"),
    ("GET", "/connectors"),
    ("POST", "/connectors"),
    ("GET", "/connectors/{name}"),
    ("DELETE", "/connectors/{name}"),
    ("GET", "/connectors/{name}/config"),
    ("PUT", "/connectors/{name}/config"),
    ("PATCH", "/connectors/{name}/config"),
    ("GET", "/connectors/{name}/status"),
    ("POST", "/connectors/{name}/restart"),
    ("PUT", "/connectors/{name}/pause"),
    ("PUT", "/connectors/{name}/resume"),
    ("PUT", "/connectors/{name}/stop"),
    ("GET", "/connectors/{name}/tasks"),
    ("GET", "/connectors/{name}/tasks/{task}/status"),
    ("GET", "/connectors/{name}/tasks/{task}/metrics"),
    ("POST", "/connectors/{name}/tasks/{task}/restart"),
    ("GET", "/connectors/{name}/offsets"),
    ("PATCH", "/connectors/{name}/offsets"),
    ("DELETE", "/connectors/{name}/offsets"),
    ("GET", "/connectors/{name}/topics"),
    ("PUT", "/connectors/{name}/topics/reset"),
    ("GET", "/connector-plugins"),
    ("GET", "/connector-plugins/{plugin}/config"),
    ("PUT", "/connector-plugins/{plugin}/config/validate"),
    ("GET", "/admin/loggers"),
    ("GET", "/admin/loggers/{logger}"),
    ("PUT", "/admin/loggers/{logger}"),
];

/// The message of the 404 for paths that are not endpoints (tests tell it apart from a 404 for
/// an unknown connector).
pub const UNKNOWN_ENDPOINT: &str = "Unknown endpoint";

/// The router over `herder`, guarded by `credentials`.
pub fn router(herder: Arc<Herder>, credentials: Arc<auth::Credentials>) -> Router {
    use connectors as c;
    Router::new()
        .route("/", get(admin::root))
        .route("/health", get(admin::health))
        .route("/health/ready", get(admin::ready))
        .route("/connectors", get(c::list).post(c::create))
        .route("/connectors/{name}", get(c::info).delete(c::delete))
        .route(
            "/connectors/{name}/config",
            get(c::get_config).put(c::put_config).patch(c::patch_config),
        )
        .route("/connectors/{name}/status", get(c::status))
        .route("/connectors/{name}/restart", post(c::restart))
        .route("/connectors/{name}/pause", put(c::pause))
        .route("/connectors/{name}/resume", put(c::resume))
        .route("/connectors/{name}/stop", put(c::stop))
        .route("/connectors/{name}/tasks", get(c::tasks))
        .route(
            "/connectors/{name}/tasks/{task}/status",
            get(c::task_status),
        )
        .route(
            "/connectors/{name}/tasks/{task}/metrics",
            get(c::task_metrics),
        )
        .route(
            "/connectors/{name}/tasks/{task}/restart",
            post(c::restart_task),
        )
        .route(
            "/connectors/{name}/offsets",
            get(c::offsets)
                .patch(c::alter_offsets)
                .delete(c::reset_offsets),
        )
        .route("/connectors/{name}/topics", get(c::topics))
        .route("/connectors/{name}/topics/reset", put(c::reset_topics))
        .route("/connector-plugins", get(plugins::list))
        .route("/connector-plugins/{plugin}/config", get(plugins::config))
        .route(
            "/connector-plugins/{plugin}/config/validate",
            put(plugins::validate),
        )
        .route("/admin/loggers", get(admin::loggers))
        .route(
            "/admin/loggers/{logger}",
            get(admin::logger).put(admin::set_logger),
        )
        .fallback(|| async { ApiError::not_found(UNKNOWN_ENDPOINT) })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "HTTP method not allowed for this endpoint",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            credentials,
            auth::require,
        ))
        .with_state(herder)
}

/// Where the REST API listens and who may use it.
#[derive(Debug, Clone)]
pub struct RestConfig {
    pub listener: SocketAddr,
    pub credentials: auth::Credentials,
}

impl RestConfig {
    /// From the worker's `listeners` (`http://host:port`, Kafka Connect's key) and auth keys.
    /// A listener off loopback without credentials is refused.
    pub fn from_worker(
        listeners: &str,
        token_file: Option<&str>,
        basic_file: Option<&str>,
    ) -> Result<Self, String> {
        let first = listeners.split(',').next().unwrap_or("").trim();
        let address = first
            .strip_prefix("http://")
            .ok_or_else(|| format!("listeners: {first:?} must look like http://127.0.0.1:8083 (https is not supported yet)"))?;
        let listener: SocketAddr = address
            .parse()
            .map_err(|e| format!("listeners: {first:?} is not http://IP:PORT ({e})"))?;
        let credentials = auth::Credentials::load(token_file, basic_file)?;
        if !listener.ip().is_loopback() && !credentials.enabled() {
            return Err(format!(
                "listeners: refusing to serve the REST API on {listener} without authentication; set rest.auth.token.file or rest.auth.basic.file (or {} / {}), or listen on 127.0.0.1",
                auth::TOKEN_ENV,
                auth::BASIC_ENV
            ));
        }
        Ok(Self {
            listener,
            credentials,
        })
    }
}

/// Serve the API until the returned task is aborted; the address it really listens on (port 0
/// picks a free one) is returned once bound.
pub async fn serve(
    herder: Arc<Herder>,
    config: RestConfig,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), String> {
    let listener = tokio::net::TcpListener::bind(config.listener)
        .await
        .map_err(|e| format!("listeners: cannot listen on {}: {e}", config.listener))?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let app = router(herder, Arc::new(config.credentials));
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("the REST server stopped: {e}");
        }
    });
    Ok((address, task))
}
