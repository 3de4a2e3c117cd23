//! The REST API, with Kafka Connect 4.x's paths, verbs, status codes and JSON shapes, so tools
//! written for Kafka Connect drive wasm-connect unchanged. `docs/rest.md` documents every entry
//! of [`ENDPOINTS`]; a test keeps the two in step, and another calls each one.

mod admin;
pub mod auth;
mod connectors;
pub mod error;
mod plugins;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};

use crate::config::connector::Problem;
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
    ("GET", "/admin/cluster"),
    ("GET", "/admin/loggers"),
    ("GET", "/admin/loggers/{logger}"),
    ("PUT", "/admin/loggers/{logger}"),
    ("POST", "/internal/config/append"),
];

/// The message of the 404 for paths that are not endpoints (tests tell it apart from a 404 for
/// an unknown connector).
pub const UNKNOWN_ENDPOINT: &str = "Unknown endpoint";

/// Worker key: the largest request body the API reads, in bytes (larger ones are answered
/// 413).
pub const MAX_BODY_KEY: &str = "rest.request.max.bytes";

/// Default of [`MAX_BODY_KEY`].
pub const DEFAULT_MAX_BODY: usize = 2 * 1024 * 1024;

/// How long a TLS handshake may take before the connection is dropped (so clients that open
/// connections and send nothing cannot hold handshake tasks).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The API as one listener serves it: the endpoints behind the guard, then, around everything
/// (so they see requests before routing and responses after every rejection), a trailing
/// slash trimmed from the path and Kafka Connect's JSON body given to every error.
pub fn app(herder: Arc<Herder>, guard: auth::Guard, max_body: usize) -> Router {
    let api = router(herder, guard).layer(DefaultBodyLimit::max(max_body));
    Router::new()
        .fallback_service(api)
        .layer(axum::middleware::map_request(trim_trailing_slash))
        .layer(axum::middleware::map_response(json_errors))
}

/// `name` percent-encoded as one URL path segment.
pub fn path_segment(name: &str) -> String {
    url::form_urlencoded::byte_serialize(name.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

/// The router over `herder`, guarded by `guard`.
pub fn router(herder: Arc<Herder>, guard: auth::Guard) -> Router {
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
        .route(
            crate::distributed::cluster::APPEND_PATH,
            post(admin::internal_append),
        )
        .route("/admin/cluster", get(admin::cluster))
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
            Arc::new(guard),
            auth::require,
        ))
        .with_state(herder)
}

/// `/connectors/x/` is `/connectors/x`, as in Kafka Connect (Debezium's tutorials post to
/// `/connectors/`).
async fn trim_trailing_slash(mut request: Request) -> Request {
    let path = request.uri().path();
    if path.len() > 1 && path.ends_with('/') {
        let trimmed = path.trim_end_matches('/');
        let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
        let rebuilt = match request.uri().query() {
            Some(q) => format!("{trimmed}?{q}"),
            None => trimmed.to_owned(),
        };
        if let Ok(uri) = rebuilt.parse() {
            *request.uri_mut() = uri;
        }
    }
    request
}

/// Every error answered in Kafka Connect's JSON body, including those the HTTP framework makes
/// itself (a query string or path it cannot read, a body over the limit): their plain text
/// becomes the message.
async fn json_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let mut rebuilt = ApiError::new(status, message).into_response();
    // Headers that say something (WWW-Authenticate, Allow) stay.
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rebuilt.headers_mut().append(name.clone(), value.clone());
        }
    }
    rebuilt
}

/// One REST listener: where, and with what TLS (`None`: plain HTTP).
#[derive(Debug, Clone)]
pub struct Listener {
    /// The address to bind (port 0 picks a free one).
    pub address: SocketAddr,
    /// HTTPS settings for an `https://` listener.
    pub tls: Option<tls::Tls>,
}

impl Listener {
    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// Whether every client must present a certificate the listener trusts (mutual TLS, which
    /// authenticates callers as credentials do).
    fn mutual_tls(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|t| t.client_auth == tls::ClientAuth::Required)
    }
}

/// Where the REST API listens and who may use it, read once from the worker config.
#[derive(Debug, Clone)]
pub struct RestConfig {
    /// Every listener of `listeners` (HTTP and HTTPS side by side if both are listed).
    pub listeners: Vec<Listener>,
    /// Bearer tokens and basic-auth users.
    pub credentials: auth::Credentials,
    /// The largest request body, in bytes ([`MAX_BODY_KEY`]).
    pub max_body: usize,
}

impl RestConfig {
    /// From the worker's keys: `listeners` (Kafka Connect's key, a comma-separated list of
    /// `http://host:port` and `https://host:port`), the HTTPS listener's `listeners.https.ssl.*`
    /// (or `ssl.*`), `rest.auth.*` and [`MAX_BODY_KEY`]. A listener off loopback that does not
    /// authenticate its callers (credentials, or HTTPS with `ssl.client.auth=required`) is
    /// refused.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Self, Vec<Problem>> {
        let get = |k: &str| crate::config::file::last(pairs, k);
        let mut problems = Vec::new();
        let raw = get("listeners").unwrap_or("http://127.0.0.1:8083");
        let mut listeners = Vec::new();
        let mut tls_settings: Option<Result<tls::Tls, ()>> = None;
        for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((scheme, address)) = entry.split_once("://") else {
                problems.push(Problem::new(
                    "listeners",
                    format!(
                        "{entry:?} must look like http://127.0.0.1:8083 or https://0.0.0.0:8443"
                    ),
                ));
                continue;
            };
            let address = match parse_address(address) {
                Ok(a) => a,
                Err(e) => {
                    problems.push(Problem::new("listeners", format!("{entry:?}: {e}")));
                    continue;
                }
            };
            let tls = match scheme.to_ascii_lowercase().as_str() {
                "http" => None,
                "https" => {
                    let read = tls_settings.get_or_insert_with(|| {
                        tls::from_pairs(pairs).map_err(|p| problems.extend(p))
                    });
                    match read {
                        Ok(t) => Some(t.clone()),
                        Err(()) => continue,
                    }
                }
                other => {
                    problems.push(Problem::new(
                        "listeners",
                        format!("{entry:?}: the scheme {other:?} is neither http nor https"),
                    ));
                    continue;
                }
            };
            listeners.push(Listener { address, tls });
        }
        if listeners.is_empty() && problems.is_empty() {
            problems.push(Problem::new(
                "listeners",
                "names no listener; for example http://127.0.0.1:8083",
            ));
        }
        if tls_settings.is_none() && pairs.iter().any(|(k, _)| k.starts_with(tls::PREFIX)) {
            problems.push(Problem::new(
                tls::PREFIX,
                "HTTPS keys are set, but listeners names no https:// listener; add one (listeners=https://0.0.0.0:8443) or remove them",
            ));
        }
        let credentials =
            auth::Credentials::load(get("rest.auth.token.file"), get("rest.auth.basic.file"))
                .map_err(|e| problems.push(Problem::new("", e)))
                .unwrap_or_default();
        for listener in &listeners {
            if !listener.address.ip().is_loopback()
                && !credentials.enabled()
                && !listener.mutual_tls()
            {
                problems.push(Problem::new("listeners", format!(
                    "refusing to serve the REST API on {}://{} without authentication; set rest.auth.token.file or rest.auth.basic.file (or {} / {}), require client certificates on an https listener (listeners.https.ssl.client.auth=required), or listen on 127.0.0.1",
                    listener.scheme(),
                    listener.address,
                    auth::TOKEN_ENV,
                    auth::BASIC_ENV
                )));
            }
        }
        // Read by the key table's kind, as every numeric worker key is.
        let max_body = match get(MAX_BODY_KEY) {
            None => DEFAULT_MAX_BODY,
            Some(v) => crate::config::keys::kind(MAX_BODY_KEY)
                .number(v)
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
                .unwrap_or_else(|e| {
                    problems.push(Problem::new(MAX_BODY_KEY, e));
                    DEFAULT_MAX_BODY
                }),
        };
        if problems.is_empty() {
            Ok(Self {
                listeners,
                credentials,
                max_body,
            })
        } else {
            Err(problems)
        }
    }
}

/// `host:port` of a listener: an IP address, `localhost`, or no host for every interface
/// (Kafka Connect's `http://:8083`).
fn parse_address(address: &str) -> Result<SocketAddr, String> {
    let address = address.trim_end_matches('/');
    if let Ok(a) = address.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = address.rsplit_once(':').ok_or("needs a port (host:port)")?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{port:?} is not a port"))?;
    let ip = match host {
        "" => std::net::Ipv4Addr::UNSPECIFIED.into(),
        h if h.eq_ignore_ascii_case("localhost") => std::net::Ipv4Addr::LOCALHOST.into(),
        h => h.parse::<std::net::IpAddr>().map_err(|_| {
            format!("{h:?} is not an IP address (or localhost, or empty for every interface)")
        })?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// A listener that is serving.
pub struct Serving {
    /// `http://127.0.0.1:8083` with the port really bound.
    pub url: String,
    /// The server; abort it to stop serving.
    pub task: tokio::task::JoinHandle<()>,
}

/// Serve the API on every listener until the returned tasks are aborted. All listeners are
/// bound before any serves, so a port in use fails the start with nothing left listening.
pub async fn serve(herder: Arc<Herder>, config: RestConfig) -> Result<Vec<Serving>, String> {
    let credentials = Arc::new(config.credentials);
    let mut bound = Vec::new();
    for listener in config.listeners {
        let tcp = tokio::net::TcpListener::bind(listener.address)
            .await
            .map_err(|e| {
                format!(
                    "listeners: cannot listen on {}://{}: {e}",
                    listener.scheme(),
                    listener.address
                )
            })?;
        let address = tcp.local_addr().map_err(|e| e.to_string())?;
        bound.push((listener, tcp, address));
    }
    let mut serving = Vec::new();
    for (listener, tcp, address) in bound {
        let guard = auth::Guard {
            credentials: Arc::clone(&credentials),
            mutual_tls: listener.mutual_tls(),
            scheme: listener.scheme(),
        };
        let app = app(Arc::clone(&herder), guard, config.max_body);
        let url = format!("{}://{address}", listener.scheme());
        let task = match listener.tls {
            None => tokio::spawn(async move {
                if let Err(e) = axum::serve(tcp, app).await {
                    tracing::error!("the REST server stopped: {e}");
                }
            }),
            Some(tls) => {
                let incoming = TlsListener::start(tcp, address, tls.config);
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(incoming, app).await {
                        tracing::error!("the REST server (HTTPS) stopped: {e}");
                    }
                })
            }
        };
        serving.push(Serving { url, task });
    }
    Ok(serving)
}

/// Connections that completed their TLS handshake. Handshakes run in tasks of their own (each
/// under [`HANDSHAKE_TIMEOUT`]), so a slow or silent client holds up nobody else's.
struct TlsListener {
    connections: tokio::sync::mpsc::Receiver<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        SocketAddr,
    )>,
    address: SocketAddr,
    /// Accepts TCP connections; stops when this listener is dropped.
    _acceptor: AbortOnDrop,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl TlsListener {
    fn start(
        tcp: tokio::net::TcpListener,
        address: SocketAddr,
        config: Arc<rustls::ServerConfig>,
    ) -> Self {
        let (sender, connections) = tokio::sync::mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let task = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, as axum's own loop does.
                        tracing::warn!("REST (HTTPS): cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, "REST (HTTPS): TLS handshake failed: {e}")
                        }
                        Err(_) => tracing::debug!(%peer, "REST (HTTPS): TLS handshake timed out"),
                    }
                });
            }
        });
        Self {
            connections,
            address,
            _acceptor: AbortOnDrop(task),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.connections.recv().await {
            Some(connection) => connection,
            // The acceptor only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::file::pairs_of as pairs;

    #[test]
    fn listeners_are_read_as_kafka_connect_writes_them() {
        let c = RestConfig::from_pairs(&pairs(&[(
            "listeners",
            "http://localhost:8083, http://127.0.0.1:0",
        )]))
        .unwrap();
        assert_eq!(c.listeners.len(), 2);
        assert_eq!(c.listeners[0].address, "127.0.0.1:8083".parse().unwrap());
        assert_eq!(c.max_body, DEFAULT_MAX_BODY);
        let problems = RestConfig::from_pairs(&pairs(&[
            ("listeners", "http://:8083,ftp://127.0.0.1:1,127.0.0.1:2"),
            (MAX_BODY_KEY, "lots"),
            ("listeners.https.ssl.client.auth", "required"),
        ]))
        .unwrap_err();
        let all: Vec<String> = problems.iter().map(ToString::to_string).collect();
        let all = all.join("\n");
        for expected in [
            "refusing to serve the REST API on http://0.0.0.0:8083 without authentication",
            "the scheme \"ftp\"",
            "\"127.0.0.1:2\" must look like",
            "rest.request.max.bytes: \"lots\"",
            "listeners.https.: HTTPS keys are set, but listeners names no https:// listener",
        ] {
            assert!(all.contains(expected), "{expected} in:\n{all}");
        }
    }
}
