//! Outgoing HTTP for plugins (`wasi:http/outgoing-handler`): wasmtime-wasi-http's
//! implementation, with this module's hooks deciding and sending each request. A request the
//! instance's grant ([`HttpGrant`]) does not allow is refused (`HTTP-request-denied`), logged
//! and named in the call's error; an allowed one is sent by the worker, over TLS checked
//! against the system's roots for `https`.
//!
//! Each request has a connection of its own (HTTP/1.1): the worker keeps no connection between
//! requests, so nothing a plugin did outlives its call but the response it holds.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::capabilities::{HttpGrant, NetAccess};

/// How long a connection may take when the plugin does not say (the call's wall-clock deadline
/// bounds everything anyway).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the response's head may take when the plugin does not say.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);

/// The hooks of one instance.
pub(crate) struct HttpGate {
    grant: HttpGrant,
    /// Where refusals are recorded (shared with the socket check).
    net: Arc<NetAccess>,
    /// The TLS settings of this instance's requests: made at its first `https` request.
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl HttpGate {
    /// The gate of an instance granted `grant`.
    pub(crate) fn new(grant: HttpGrant, net: Arc<NetAccess>) -> Self {
        Self {
            grant,
            net,
            tls: None,
        }
    }

    /// The TLS settings: the system's roots, plus the grant's CAs if it names any.
    fn tls(&mut self) -> Arc<rustls::ClientConfig> {
        if self.grant.extra_roots().is_empty() {
            return system_tls();
        }
        self.tls
            .get_or_insert_with(|| tls_config(self.grant.extra_roots()))
            .clone()
    }
}

/// The response and the future that ends with the connection, as `send_request` returns them.
type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

impl WasiHttpHooks for HttpGate {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Result<Sent, Error>> + Send> {
        drop(fut);
        if !self.grant.allows(request.uri()) {
            // Without user info or query: either may carry a credential, and the refusal is
            // logged and shown in the task's status.
            let uri = request.uri();
            let port = uri.port().map(|p| format!(":{p}")).unwrap_or_default();
            self.net.refuse(format!(
                "HTTP {} {}://{}{port}{}: not granted by {} (granted: {})",
                request.method(),
                uri.scheme_str().unwrap_or("?"),
                uri.host().unwrap_or("?"),
                uri.path(),
                super::capabilities::http::HTTP_ALLOW,
                self.grant.describe()
            ));
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        let tls = if request.uri().scheme_str() == Some("https") {
            Some(self.tls())
        } else {
            None
        };
        Box::new(send(request, options, tls))
    }
}

/// The system's roots, loaded once.
fn system_roots() -> &'static rustls::RootCertStore {
    static ROOTS: OnceLock<rustls::RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            // A certificate the system lists but rustls cannot parse is skipped, as browsers
            // skip it.
            let _ = roots.add(cert);
        }
        roots
    })
}

/// The TLS settings of plugin requests without CAs of their own, made once.
fn system_tls() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG.get_or_init(|| tls_config(&[])).clone()
}

/// TLS settings trusting the system's roots and `extra` (certificates the grant's file held,
/// which `HttpGrant` checked could be read).
fn tls_config(extra: &[rustls::pki_types::CertificateDer<'static>]) -> Arc<rustls::ClientConfig> {
    let mut roots = system_roots().clone();
    for cert in extra {
        // A CA rustls cannot use is left out: its servers then fail verification, which the
        // request's error names.
        let _ = roots.add(cert.clone());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .unwrap_or_else(|_| {
            // ring supports the default versions; this cannot fail, but an empty configuration
            // (every handshake refused) is the safe answer if it did.
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
        });
    Arc::new(config)
}

/// Send one request on a connection of its own.
async fn send(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Sent, Error> {
    let uri = request.uri().clone();
    let https = uri.scheme_str() == Some("https");
    let host = uri
        .host()
        .ok_or(Error::HttpRequestUriInvalid)?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let connect_timeout = options
        .and_then(|o| o.connect_timeout)
        .unwrap_or(CONNECT_TIMEOUT);
    let first_byte_timeout = options
        .and_then(|o| o.first_byte_timeout)
        .unwrap_or(FIRST_BYTE_TIMEOUT);
    let tcp = tokio::time::timeout(connect_timeout, TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let _ = tcp.set_nodelay(true);
    // The request line carries only the path and query (origin form).
    let origin = uri
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str)
        .parse()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    *request.uri_mut() = origin;
    let response = if let Some(tls) = tls {
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        let tls = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(Error::Tls)?;
        exchange(TokioIo::new(tls), request, first_byte_timeout).await?
    } else {
        exchange(TokioIo::new(tcp), request, first_byte_timeout).await?
    };
    Ok(response)
}

/// An HTTP/1.1 exchange on an open connection.
async fn exchange<I>(
    io: I,
    request: http::Request<WasiBody>,
    first_byte_timeout: Duration,
) -> Result<Sent, Error>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(Error::Hyper)?;
    // The connection is driven on its own task until the response body is read or dropped.
    let driver = tokio::spawn(connection);
    let response = tokio::time::timeout(first_byte_timeout, sender.send_request(request))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)?
        .map_err(Error::Hyper)?;
    let response = response.map(|body| body.map_err(Error::Hyper).boxed_unsync());
    let done = async move {
        match driver.await {
            Ok(result) => result.map_err(Error::Hyper),
            // The task was cancelled with the runtime: nothing is left to report.
            Err(_) => Ok(()),
        }
    };
    Ok((response, Box::new(done)))
}
