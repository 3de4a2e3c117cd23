//! The HTTP grant: which URLs a connector's instances may send requests to through
//! `wasi:http/outgoing-handler` (`sandbox.http.allow`).
//!
//! Invariants:
//! - A request is sent only when its scheme, host and port equal an entry's and its path lies
//!   under the entry's path prefix (at a `/` boundary); with no entry, nothing is sent.
//! - A path with a `.` or `..` segment (also percent-encoded) is refused whatever the grant: a
//!   server would resolve it outside the prefix that was checked.
//! - The worker makes the connection and the TLS handshake (certificates checked against the
//!   system's roots, and the CAs of `sandbox.http.tls.ca.location`): the plugin sees only the
//!   HTTP exchange.

use rustls::pki_types::CertificateDer;

pub use crate::config_keys::{HTTP_ALLOW, HTTP_TLS_CA};

/// One entry: a scheme, host and port, and a path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HttpEntry {
    https: bool,
    /// Lower case; IPv6 addresses without brackets.
    host: String,
    port: u16,
    /// Starts with `/`; `/` allows every path.
    path: String,
    /// As the operator wrote it.
    text: String,
}

/// What `sandbox.http.allow` grants a connector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpGrant {
    entries: Vec<HttpEntry>,
    /// The CA certificates of `sandbox.http.tls.ca.location` (DER), trusted besides the
    /// system's roots.
    extra_roots: Vec<CertificateDer<'static>>,
}

impl HttpGrant {
    /// The grant a connector config makes; an error names the key and the bad entry.
    pub fn from_config(config: &[(String, String)]) -> Result<Self, String> {
        let ca = config
            .iter()
            .rev()
            .find(|(k, v)| k == HTTP_TLS_CA && !v.trim().is_empty());
        Ok(Self {
            entries: super::parse_list(config, HTTP_ALLOW, parse_entry)?,
            extra_roots: match ca {
                Some((_, path)) => read_roots(path.trim())?,
                None => Vec::new(),
            },
        })
    }

    /// The CA certificates trusted besides the system's roots.
    pub fn extra_roots(&self) -> &[CertificateDer<'static>] {
        &self.extra_roots
    }

    /// Whether nothing is granted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What is granted, in one phrase.
    pub fn describe(&self) -> String {
        super::describe_list(self.entries.iter().map(|e| e.text.as_str()))
    }

    /// Whether a request to `uri` may be sent.
    pub fn allows(&self, uri: &http::Uri) -> bool {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return false,
        };
        let Some(host) = uri.host() else {
            return false;
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let path = uri.path();
        if has_dot_segment(path) {
            return false;
        }
        self.entries
            .iter()
            .any(|e| e.https == https && e.host == host && e.port == port && under(path, &e.path))
    }
}

/// Whether `path` is `prefix` or lies under it at a segment boundary.
fn under(path: &str, prefix: &str) -> bool {
    if prefix.ends_with('/') {
        path.starts_with(prefix)
    } else {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// Whether a path has a `.` or `..` segment, plainly or percent-encoded.
fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}

/// The certificates of the PEM file at `path`; an error names the key and says what to do.
fn read_roots(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("{HTTP_TLS_CA}: cannot read {path}: {e}; name a PEM file of CA certificates the worker can read"))?;
    let certs = openssl::x509::X509::stack_from_pem(&pem)
        .map_err(|e| format!("{HTTP_TLS_CA}: {path} is not a PEM file of certificates ({e})"))?;
    if certs.is_empty() {
        return Err(format!(
            "{HTTP_TLS_CA}: {path} holds no certificate; it must hold PEM \"BEGIN CERTIFICATE\" blocks"
        ));
    }
    certs
        .iter()
        .map(|c| {
            c.to_der()
                .map(CertificateDer::from)
                .map_err(|e| format!("{HTTP_TLS_CA}: a certificate of {path} cannot be used ({e})"))
        })
        .collect()
}

fn parse_entry(item: &str) -> Result<HttpEntry, String> {
    let bad = |why: &str| {
        format!(
            "{HTTP_ALLOW}: {item:?} {why}; write scheme://host[:port][/path/prefix], e.g. https://api.example.com/v1/"
        )
    };
    let url = url::Url::parse(item).map_err(|e| bad(&format!("is not a URL ({e})")))?;
    let https = match url.scheme() {
        "https" => true,
        "http" => false,
        _ => return Err(bad("is neither http:// nor https://")),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "carries credentials; grants name where requests may go, credentials belong in the connector's own keys",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("has a query or fragment; grant a path prefix"));
    }
    let host = match url.host() {
        Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        Some(url::Host::Ipv4(a)) => a.to_string(),
        Some(url::Host::Ipv6(a)) => a.to_string(),
        None => return Err(bad("has no host")),
    };
    let port = url
        .port_or_known_default()
        .ok_or_else(|| bad("has no port"))?;
    let path = url.path().to_owned();
    if has_dot_segment(&path) {
        return Err(bad("has a . or .. segment in its path"));
    }
    Ok(HttpEntry {
        https,
        host,
        port,
        path,
        text: item.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(value: &str) -> Result<HttpGrant, String> {
        HttpGrant::from_config(&[(HTTP_ALLOW.to_owned(), value.to_owned())])
    }

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    #[test]
    fn requests_go_only_to_granted_scheme_host_port_and_path_prefix() {
        let g = grant("https://API.example.com/v1/, http://127.0.0.1:8080, http://[::1]:9000/hook")
            .unwrap();
        for ok in [
            "https://api.example.com/v1/items",
            "https://api.example.com:443/v1/",
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8080/anything?q=1",
            "http://[::1]:9000/hook",
            "http://[::1]:9000/hook/sub",
        ] {
            assert!(g.allows(&uri(ok)), "{ok}");
        }
        for refused in [
            "http://api.example.com/v1/items",
            "https://api.example.com/v2/items",
            "https://api.example.com/v1",
            "https://api.example.com:8443/v1/items",
            "https://evil.example.com/v1/items",
            "http://127.0.0.1:8081/",
            "http://[::1]:9000/hooks",
            "https://api.example.com/v1/../admin",
            "https://api.example.com/v1/%2E%2E/admin",
        ] {
            assert!(!g.allows(&uri(refused)), "{refused}");
        }
        assert!(!HttpGrant::default().allows(&uri("http://127.0.0.1:8080/")));
    }

    #[test]
    fn bad_entries_name_the_key() {
        for bad in [
            "api.example.com",
            "ftp://api.example.com/",
            "https://user:pw@api.example.com/",
            "https://api.example.com/?q=1",
        ] {
            let err = grant(bad).unwrap_err();
            assert!(err.starts_with(HTTP_ALLOW), "{bad}: {err}");
        }
    }
}
