//! One connection to one broker for the group membership client: TCP, TLS when the security
//! protocol says so, SASL authentication, then Kafka requests framed as the protocol says
//! (a 4-byte big-endian size, the request header, the body), one at a time.
//!
//! Invariants: a request's response is read before the next request is written (the broker
//! answers a connection's requests in order, and a group coordinator holds JoinGroup until the
//! rebalance completes, so pipelining behind it would gain nothing); every read and write is
//! bounded by the deadline the caller gives; after any error the connection is dropped
//! (a half-read frame leaves the stream unusable), which the caller does by discarding it.

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::GroupError;
use super::auth::GroupSecurity;

/// Largest response frame accepted. Group responses carry every member's metadata; a frame
/// larger than this is a confused peer (an HTTP server, a TLS listener spoken to in plain
/// text), not a Kafka broker.
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// The versions of each API this client's code is written for: `(key, min, max)`. The client
/// speaks the highest version both it and the broker support; brokers older than a minimum are
/// refused with the API's name (these minimums are Kafka 2.4's, the first with static members).
const SUPPORTED: &[(i16, i16, i16, &str)] = &[
    (18, 3, 3, "ApiVersions"),
    (10, 1, 6, "FindCoordinator"),
    (11, 5, 9, "JoinGroup"),
    (14, 3, 5, "SyncGroup"),
    (12, 3, 4, "Heartbeat"),
    (13, 3, 5, "LeaveGroup"),
    (17, 1, 1, "SaslHandshake"),
    (36, 0, 2, "SaslAuthenticate"),
];

/// The byte stream under the Kafka protocol.
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Plain(s) => write_flush(s, bytes).await,
            Self::Tls(s) => write_flush(s.as_mut(), bytes).await,
        }
    }

    async fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        match self {
            Self::Plain(s) => s.read_exact(buf).await.map(|_| ()),
            Self::Tls(s) => s.read_exact(buf).await.map(|_| ()),
        }
    }
}

async fn write_flush<S: AsyncWrite + Unpin>(s: &mut S, bytes: &[u8]) -> std::io::Result<()> {
    s.write_all(bytes).await?;
    s.flush().await
}

/// Just enough of [`Stream`] for the read helper to be generic.
#[allow(dead_code)]
trait Io: AsyncRead + AsyncWrite + Unpin {}

/// An open, authenticated connection to one broker.
pub struct Connection {
    stream: Stream,
    /// `host:port`, for messages.
    addr: String,
    client_id: StrBytes,
    correlation: i32,
    /// The broker's `(min, max)` version of each API key.
    versions: HashMap<i16, (i16, i16)>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connect to `addr` (`host:port`), handshake TLS and authenticate as `security` says, and
    /// learn the broker's API versions; the whole within `timeout`.
    pub async fn open(
        addr: &str,
        security: &GroupSecurity,
        client_id: &str,
        timeout: Duration,
    ) -> Result<Self, GroupError> {
        tokio::time::timeout(timeout, Self::open_inner(addr, security, client_id))
            .await
            .map_err(|_| GroupError::Io {
                addr: addr.to_owned(),
                what: format!(
                    "no connection within {} ms (is the broker up, and is this the listener for {}?)",
                    timeout.as_millis(),
                    security.protocol_name()
                ),
            })?
    }

    async fn open_inner(
        addr: &str,
        security: &GroupSecurity,
        client_id: &str,
    ) -> Result<Self, GroupError> {
        let io = |what: String| GroupError::Io {
            addr: addr.to_owned(),
            what,
        };
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| io(format!("cannot connect: {e}")))?;
        let _ = tcp.set_nodelay(true);
        let stream = match security.tls() {
            None => Stream::Plain(tcp),
            Some(config) => {
                let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                    .map_err(|e| io(format!("{host:?} is not a host name TLS can check: {e}")))?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| GroupError::Tls {
                        addr: addr.to_owned(),
                        what: e.to_string(),
                    })?;
                Stream::Tls(Box::new(tls))
            }
        };
        let mut conn = Self {
            stream,
            addr: addr.to_owned(),
            client_id: StrBytes::from_string(client_id.to_owned()),
            correlation: 0,
            versions: HashMap::new(),
        };
        conn.negotiate().await?;
        if let Some(sasl) = security.sasl() {
            super::auth::authenticate(&mut conn, sasl).await?;
        }
        Ok(conn)
    }

    /// `host:port` of the broker.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// ApiVersions: which version of each API to speak.
    async fn negotiate(&mut self) -> Result<(), GroupError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("wasm-connect"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response: ApiVersionsResponse = self.exchange(&request, 3).await?;
        if response.error_code != 0 {
            return Err(self.protocol(format!(
                "answered ApiVersions with error {} ({}); wasm-connect's distributed mode needs Kafka 2.4 or newer",
                response.error_code,
                describe_code(response.error_code)
            )));
        }
        self.versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(())
    }

    /// The version of `R` to speak with this broker (requests whose fields depend on the
    /// version are built for it).
    pub fn version_of<R: Request>(&self) -> Result<i16, GroupError> {
        let Some(&(_, min, max, name)) = SUPPORTED.iter().find(|(k, ..)| *k == R::KEY) else {
            return Err(self.protocol(format!("API {} is not one this client speaks", R::KEY)));
        };
        let max = max.min(R::VERSIONS.max);
        match self.versions.get(&R::KEY) {
            Some(&(bmin, bmax)) if bmax >= min && bmin <= max => Ok(bmax.min(max)),
            Some(&(bmin, bmax)) => Err(self.protocol(format!(
                "supports {name} versions {bmin}-{bmax}, and wasm-connect speaks {min}-{max}; distributed mode needs Kafka 2.4 or newer"
            ))),
            None => Err(self.protocol(format!(
                "does not support {name}; distributed mode needs Kafka 2.4 or newer"
            ))),
        }
    }

    /// Send `request` at the highest version both sides speak and read its response. Returns
    /// the version used as well, since some fields' meaning depends on it.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        timeout: Duration,
    ) -> Result<(R::Response, i16), GroupError> {
        let version = self.version_of::<R>()?;
        let addr = self.addr.clone();
        let response = tokio::time::timeout(timeout, self.exchange(request, version))
            .await
            .map_err(|_| GroupError::Io {
                addr,
                what: format!("no response within {} ms", timeout.as_millis()),
            })??;
        Ok((response, version))
    }

    /// Write one request frame at `version` and read its response frame.
    async fn exchange<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, GroupError> {
        self.correlation = self.correlation.wrapping_add(1);
        let correlation = self.correlation;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::with_capacity(256);
        frame.put_i32(0);
        header
            .encode(&mut frame, R::header_version(version))
            .and_then(|()| request.encode(&mut frame, version))
            .map_err(|e| self.protocol(format!("cannot encode request {}: {e}", R::KEY)))?;
        let size = i32::try_from(frame.len() - 4)
            .map_err(|_| self.protocol("request too large to frame".to_owned()))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        self.stream
            .write_all(&frame)
            .await
            .map_err(|e| self.io(format!("cannot write: {e}")))?;

        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await.map_err(|e| {
            self.io(format!(
                "connection closed while waiting for a response: {e}"
            ))
        })?;
        let len = i32::from_be_bytes(len);
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= MAX_FRAME)
            .ok_or_else(|| {
                self.protocol(format!(
                    "sent a frame of {len} bytes, which is not a Kafka response (is this a Kafka listener, and does it expect {}?)",
                    if matches!(self.stream, Stream::Tls(_)) { "TLS" } else { "plain text" }
                ))
            })?;
        let mut body = vec![0u8; len];
        self.stream
            .read_exact(&mut body)
            .await
            .map_err(|e| self.io(format!("connection closed mid-response: {e}")))?;
        let mut body = Bytes::from(body);
        let response_header =
            ResponseHeader::decode(&mut body, R::Response::header_version(version))
                .map_err(|e| self.protocol(format!("undecodable response header: {e}")))?;
        if response_header.correlation_id != correlation {
            return Err(self.protocol(format!(
                "answered request {correlation} with response {}",
                response_header.correlation_id
            )));
        }
        let response = R::Response::decode(&mut body, version).map_err(|e| {
            self.protocol(format!(
                "sent a response to API {} v{version} that does not decode: {e}",
                R::KEY
            ))
        })?;
        if body.has_remaining() {
            tracing::debug!(
                broker = %self.addr,
                api = R::KEY,
                left = body.remaining(),
                "response had bytes after its last field"
            );
        }
        Ok(response)
    }

    fn io(&self, what: String) -> GroupError {
        GroupError::Io {
            addr: self.addr.clone(),
            what,
        }
    }

    fn protocol(&self, what: String) -> GroupError {
        GroupError::Protocol {
            addr: self.addr.clone(),
            what,
        }
    }
}

/// A Kafka error code's name, for messages.
pub fn describe_code(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        None => "no error".to_owned(),
        Some(e) => e.to_string(),
    }
}
