//! The connector's configuration, checked once: every problem names its key.

use wasm_connect_sdk::{Config, ConfigDef, ConfigError, ConfigType, Importance, Spec};

/// How a request's body holds its records (`http.body.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    /// `[r1,r2,...]`, `application/json`.
    JsonArray,
    /// One record per line, `application/x-ndjson`.
    Ndjson,
}

/// A URL split as `wasi:http` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub https: bool,
    /// `host[:port]`.
    pub authority: String,
    /// `/path?query`.
    pub path_and_query: String,
}

impl Url {
    /// Parse `text`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Url, String> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("{text:?} is not a URL; write http(s)://host[:port]/path"))?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "https" => true,
            "http" => false,
            other => return Err(format!("scheme {other:?} is neither http nor https")),
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
            Some(i) => (&rest[..i], rest[i..].to_owned()),
            None => (rest, "/".to_owned()),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(format!(
                "{text:?} has no host, or user info (put credentials in http.headers)"
            ));
        }
        Ok(Url {
            https,
            authority: authority.to_owned(),
            path_and_query: path,
        })
    }

    /// The URL without its query (which may carry a credential), for messages.
    pub fn shown(&self) -> String {
        let path = self.path_and_query.split('?').next().unwrap_or("/");
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.authority)
    }
}

/// Everything the tasks read from their config.
#[derive(Debug, Clone)]
pub struct Settings {
    pub url: Url,
    /// `POST` or `PUT`.
    pub method: String,
    /// Extra request headers, in order.
    pub headers: Vec<(String, String)>,
    pub format: BodyFormat,
    /// The most records one request carries.
    pub max_records: usize,
    /// The most body bytes one request carries (a single larger record goes alone).
    pub max_bytes: usize,
    /// How long the answer may take, in milliseconds.
    pub timeout_ms: u64,
}

/// The plugin's spec: every key, documented.
pub fn spec() -> Spec {
    let key = |name, ty, doc| ConfigDef::new(name, ty, doc);
    Spec::new(
        "http-sink",
        env!("CARGO_PKG_VERSION"),
        "Sends records to an HTTP(S) endpoint in batches (a JSON array or NDJSON), retrying 5xx, 429 and connection errors; a 4xx answer makes a record a failed record",
    )
    .config(
        key(
            "http.url",
            ConfigType::String,
            "The endpoint: http(s)://host[:port]/path. The worker sends the requests; grant the URL with sandbox.http.allow (and a private CA with sandbox.http.tls.ca.location).",
        )
        .required()
        .importance(Importance::High),
    )
    .config(
        key("http.method", ConfigType::String, "POST or PUT.")
            .default("POST")
            .allowed(&["POST", "PUT"]),
    )
    .config(
        key(
            "http.headers",
            ConfigType::Password,
            "Extra request headers as Name: value pairs separated by |, e.g. Authorization: Bearer ${file:/etc/secrets/api.properties:token}|X-Source: connect. Never shown back (it usually holds a credential).",
        )
        .default("")
        .importance(Importance::Medium),
    )
    .config(
        key(
            "http.body.format",
            ConfigType::String,
            "json_array: the body is a JSON array of the records' values (application/json); ndjson: one value per line (application/x-ndjson).",
        )
        .default("json_array")
        .allowed(&["json_array", "ndjson"]),
    )
    .config(key("batch.max.records", ConfigType::Int, "The most records one request carries.").default(500))
    .config(
        key(
            "batch.max.bytes",
            ConfigType::Int,
            "The most body bytes one request carries; a single record over it is sent alone.",
        )
        .default(1_048_576),
    )
    .config(
        key(
            "http.timeout.ms",
            ConfigType::Int,
            "How long connecting and the answer's first byte may each take (running out is retried); keep it well under the call's wall-clock deadline (sandbox.call.wall.timeout.ms), which bounds the whole put and fails the task.",
        )
        .default(10_000),
    )
}

impl Settings {
    /// The settings of `config`, or every problem with it.
    pub fn from_config(config: &Config) -> Result<Settings, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let url = match Url::parse(config.get("http.url").unwrap_or_default()) {
            Ok(url) => Some(url),
            Err(e) => {
                errors.push(ConfigError::new("http.url", e));
                None
            }
        };
        let method = config.string_or("http.method", "POST").to_ascii_uppercase();
        if method != "POST" && method != "PUT" {
            errors.push(ConfigError::new(
                "http.method",
                format!("{method:?} is neither POST nor PUT"),
            ));
        }
        let mut headers = Vec::new();
        for entry in config.string_or("http.headers", "").split('|') {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            match entry.split_once(':') {
                Some((name, value)) if is_token(name.trim()) => {
                    headers.push((name.trim().to_owned(), value.trim().to_owned()));
                }
                // The entry may hold a secret: name it by its position only.
                _ => errors.push(ConfigError::new(
                    "http.headers",
                    format!(
                        "entry {} is not Name: value (entries are separated by |)",
                        headers.len() + 1
                    ),
                )),
            }
        }
        let format = match config.string_or("http.body.format", "json_array").as_str() {
            "json_array" => BodyFormat::JsonArray,
            "ndjson" => BodyFormat::Ndjson,
            other => {
                errors.push(ConfigError::new(
                    "http.body.format",
                    format!("{other:?} is neither json_array nor ndjson"),
                ));
                BodyFormat::JsonArray
            }
        };
        let mut positive = |key: &str, default: u64| match config.parse_or::<u64>(key, default) {
            Ok(0) => {
                errors.push(ConfigError::new(key, "is 0; it must be at least 1"));
                default
            }
            Ok(n) => n,
            Err(e) => {
                errors.push(e);
                default
            }
        };
        let max_records = positive("batch.max.records", 500) as usize;
        let max_bytes = positive("batch.max.bytes", 1_048_576) as usize;
        let timeout_ms = positive("http.timeout.ms", 10_000);
        match url {
            Some(url) if errors.is_empty() => Ok(Settings {
                url,
                method,
                headers,
                format,
                max_records,
                max_bytes,
                timeout_ms,
            }),
            _ => Err(errors),
        }
    }
}

/// Whether `name` is an HTTP header name (RFC 9110 token).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_as_wasi_http_takes_them() {
        let url = Url::parse("https://api.example.com:8443/v1/events?key=secret").unwrap();
        assert_eq!(
            url,
            Url {
                https: true,
                authority: "api.example.com:8443".to_owned(),
                path_and_query: "/v1/events?key=secret".to_owned()
            }
        );
        assert_eq!(url.shown(), "https://api.example.com:8443/v1/events");
        assert_eq!(Url::parse("http://h").unwrap().path_and_query, "/");
        assert!(Url::parse("ftp://h/x").is_err());
        assert!(
            Url::parse("https://user:pw@h/x")
                .unwrap_err()
                .contains("user info")
        );
    }

    #[test]
    fn headers_and_numbers_are_checked() {
        let config = |headers: &str| {
            Config::new()
                .with("http.url", "http://h/x")
                .with("http.headers", headers)
        };
        let settings =
            Settings::from_config(&config("Authorization: Bearer a:b | X-A: 1")).unwrap();
        assert_eq!(
            settings.headers,
            vec![
                ("Authorization".to_owned(), "Bearer a:b".to_owned()),
                ("X-A".to_owned(), "1".to_owned())
            ]
        );
        let errors = Settings::from_config(&config("no colon secret")).unwrap_err();
        assert_eq!(errors[0].key, "http.headers");
        assert!(
            !errors[0].message.contains("secret"),
            "{}",
            errors[0].message
        );
        let errors = Settings::from_config(&config("").with("batch.max.records", "0")).unwrap_err();
        assert_eq!(errors[0].key, "batch.max.records");
    }
}
