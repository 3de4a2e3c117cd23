//! REST authentication: a bearer token and/or basic-auth credentials, from files or the
//! environment. Loopback listeners may run without; any other address requires it.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use subtle::ConstantTimeEq as _;

use super::error::ApiError;

/// Environment variable holding a bearer token.
pub const TOKEN_ENV: &str = "WASM_CONNECT_REST_TOKEN";
/// Environment variable holding `user:password` for basic auth.
pub const BASIC_ENV: &str = "WASM_CONNECT_REST_BASIC";

/// Accepted credentials; empty means no authentication. Its `Debug` shows how many, never
/// which.
#[derive(Clone, Default)]
pub struct Credentials {
    tokens: Vec<String>,
    /// `user:password` pairs.
    basic: Vec<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("tokens", &self.tokens.len())
            .field("basic", &self.basic.len())
            .finish()
    }
}

impl Credentials {
    /// From `rest.auth.token.file`, `rest.auth.basic.file` (one `user:password` per line) and
    /// the environment variables above.
    pub fn load(token_file: Option<&str>, basic_file: Option<&str>) -> Result<Self, String> {
        let read = |key: &str, path: &str| {
            std::fs::read_to_string(path).map_err(|e| format!("{key}: cannot read {path}: {e}"))
        };
        let mut creds = Credentials::default();
        if let Some(path) = token_file {
            creds
                .tokens
                .extend(lines(&read("rest.auth.token.file", path)?));
        }
        if let Some(path) = basic_file {
            creds
                .basic
                .extend(lines(&read("rest.auth.basic.file", path)?));
        }
        if let Ok(token) = std::env::var(TOKEN_ENV) {
            creds.tokens.extend(lines(&token));
        }
        if let Ok(basic) = std::env::var(BASIC_ENV) {
            creds.basic.extend(lines(&basic));
        }
        if let Some(bad) = creds.basic.iter().find(|b| !b.contains(':')) {
            return Err(format!(
                "basic-auth credentials must be user:password, got an entry without ':' ({} chars)",
                bad.len()
            ));
        }
        Ok(creds)
    }

    /// Whether any credentials are configured.
    pub fn enabled(&self) -> bool {
        !(self.tokens.is_empty() && self.basic.is_empty())
    }

    fn accepts(&self, headers: &HeaderMap) -> Option<bool> {
        let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
        // The scheme is case-insensitive (RFC 7235 §2.1): `bearer` and `BASIC` are accepted.
        let (scheme, rest) = value.trim_start().split_once(' ').unwrap_or((value, ""));
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "bearer" {
            let token = rest;
            return Some(matches_any(&self.tokens, token.trim().as_bytes()));
        }
        if scheme == "basic" {
            let encoded = rest;
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .ok()?;
            return Some(matches_any(&self.basic, &decoded));
        }
        Some(false)
    }
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// Whether `given` is one of `known`, compared in constant time (`subtle`): every entry is
/// compared, byte for byte, whatever matched, so the time taken says nothing about how much of
/// a secret a caller guessed, nor which entry it guessed. What it does say is whether some
/// entry has `given`'s length (`subtle` compares slices of different lengths at once, as every
/// constant-time comparison must), which tells an attacker a length but no content; tokens
/// and passwords long enough to resist guessing stay so when their length is known.
fn matches_any(known: &[String], given: &[u8]) -> bool {
    known
        .iter()
        .fold(subtle::Choice::from(0), |found, k| {
            found | k.as_bytes().ct_eq(given)
        })
        .into()
}

/// What one listener's requests are checked against.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The worker's credentials (shared by every listener).
    pub credentials: std::sync::Arc<Credentials>,
    /// The listener verified a client certificate on every connection (HTTPS with
    /// `ssl.client.auth=required`): that authenticates the caller, credentials or not.
    pub mutual_tls: bool,
    /// `http` or `https`, for URLs the API gives back (`Location`).
    pub scheme: &'static str,
}

/// The scheme the request came in with (`http` or `https`).
#[derive(Debug, Clone, Copy)]
pub struct Scheme(pub &'static str);

/// Paths anyone may ask, so that probes (Kubernetes' liveness checks) need no credentials:
/// they say only whether the worker is up.
const OPEN: &[&str] = &["/health"];

/// Paths of requests between a distributed cluster's workers: they carry a signature made with
/// the cluster's session key instead of the API's credentials, checked by their handlers.
const INTERNAL: &str = "/internal/";

/// Middleware: 401 without credentials, 403 with wrong ones; [`OPEN`] paths pass either way.
pub async fn require(
    State(guard): State<std::sync::Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    request.extensions_mut().insert(Scheme(guard.scheme));
    if request.uri().path().starts_with(INTERNAL) {
        // Signed by a worker of the cluster with its session key; the handler checks.
        return next.run(request).await;
    }
    let open = OPEN.contains(&request.uri().path());
    let creds = &guard.credentials;
    if guard.mutual_tls {
        // rustls completed no handshake without a certificate the trust store vouches for.
        return next.run(request).await;
    }
    if !creds.enabled() {
        // Without credentials the API is only for this machine: a Host header naming another
        // host is a DNS-rebinding page in a local browser, not a local client.
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        if !is_loopback_host(host) {
            if open {
                return next.run(request).await;
            }
            return ApiError::new(
                StatusCode::FORBIDDEN,
                format!("Requests for host {host} are not accepted without authentication"),
            )
            .into_response();
        }
        return next.run(request).await;
    }
    match creds.accepts(request.headers()) {
        Some(true) => next.run(request).await,
        _ if open => next.run(request).await,
        Some(false) => {
            ApiError::new(StatusCode::FORBIDDEN, "The credentials are not valid").into_response()
        }
        None => {
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "Authentication required: send a bearer token or basic-auth credentials",
            )
            .into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Basic realm=\"wasm-connect\", Bearer"),
            );
            response
        }
    }
}

/// Whether a Host header names this machine (`localhost`, `127.x`, `[::1]`, with any port).
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_are_case_insensitive() {
        let creds = Credentials {
            tokens: vec!["tok".into()],
            basic: vec!["u:p".into()],
        };
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            creds.accepts(&headers)
        };
        for ok in [
            "Bearer tok",
            "bearer tok",
            "BEARER  tok",
            "Basic dTpw",
            "basic dTpw",
        ] {
            assert_eq!(with(ok), Some(true), "{ok}");
        }
        for bad in ["Bearer nope", "bearer", "Basic dTpx", "Token tok", "tok"] {
            assert_eq!(with(bad), Some(false), "{bad}");
        }
    }

    #[test]
    fn any_entry_may_match_and_only_a_whole_one_does() {
        let known = vec!["first-token".to_owned(), "second".to_owned()];
        assert!(matches_any(&known, b"first-token"));
        assert!(matches_any(&known, b"second"));
        for bad in [
            &b"first-toke"[..],
            b"first-tokens",
            b"secone",
            b"",
            b"first-tokenfirst",
        ] {
            assert!(!matches_any(&known, bad), "{bad:?}");
        }
        assert!(!matches_any(&[], b""), "no credentials accept nothing");
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost:8083",
            "127.0.0.1:8083",
            "127.0.0.1",
            "[::1]:8083",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in ["evil.example:8083", "10.0.0.1:8083", "attacker.com"] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }
}
