//! `http-sink`: sends records to an HTTP(S) endpoint in batches, through `wasi:http` — the
//! worker makes the connections and does TLS, and sends only to the URLs `sandbox.http.allow`
//! grants.
//!
//! Each `put` sends its records' values in requests of up to `batch.max.records` records and
//! `batch.max.bytes` bytes of body: a JSON array (`http.body.format=json_array`) or one value
//! per line (`ndjson`). A value the converter made JSON is sent as that JSON, text as a JSON
//! string, bytes as their JSON if they are JSON and as a base64 string otherwise; null values
//! (tombstones) are not sent.
//!
//! Answers: 2xx delivers the request's records. 5xx, 408, 429 and connection errors are
//! passing: `put` returns a retriable error and the worker delivers the batch again after its
//! backoff, and not before the time a `Retry-After` asked for (a retry earlier than that
//! returns the retriable error again without sending). Records a request already delivered are
//! not sent again when the same batch comes back. Any other 4xx says the records are wrong: a
//! request of one record makes it a failed record (with `errors.tolerance=all` it goes to the
//! dead-letter queue, with the answer's status and the start of its body); a request of
//! several is sent again record by record to find which. A refused URL (not granted) or a
//! certificate that does not verify fails the task: retrying cannot help.

pub mod settings;

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingResponse, Method, OutgoingBody, OutgoingRequest, RequestOptions,
    Scheme,
};
use wasm_connect_sdk::serde_json::{self, Value};
use wasm_connect_sdk::{
    Config, ConfigError, Connector, DataRef, Error, RecordFailure, Result, SinkConnector,
    SinkRecords, SinkTask, Spec, export_sink_connector,
};

pub use settings::{BodyFormat, Settings, Url};

/// The longest `Retry-After` honoured: a server asking for more is retried after this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);
/// How much of an error answer's body goes into the failure's message.
const BODY_EXCERPT: u64 = 512;

/// The connector: checks its config; every task sends whatever it is given.
pub struct HttpSink;

impl Connector for HttpSink {
    fn spec() -> Spec {
        settings::spec()
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        Settings::from_config(config).err().unwrap_or_default()
    }

    fn create(config: &Config) -> Result<Self> {
        Settings::from_config(config).map_err(Error::InvalidConfig)?;
        Ok(HttpSink)
    }

    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        Ok(vec![config.clone(); max_tasks.max(1) as usize])
    }
}

impl SinkConnector for HttpSink {
    type Task = HttpSinkTask;
}

/// What an exchange came to.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// 2xx.
    Delivered,
    /// Worth retrying, not before `after` if the server said.
    Passing {
        why: String,
        after: Option<Duration>,
    },
    /// The records were refused (4xx).
    Refused(String),
    /// Retrying cannot help.
    Fatal(String),
}

/// One task.
pub struct HttpSinkTask {
    settings: Settings,
    /// Records of the current batch already delivered: (topic, partition, offset). Cleared
    /// when a `put` returns, so it holds at most one batch.
    delivered: HashSet<(String, i32, i64)>,
    /// No request before this (the last `Retry-After`).
    not_before: Option<Instant>,
}

/// A record to send: its index in the batch, coordinates and body element.
struct Pending {
    index: u32,
    at: (String, i32, i64),
    element: Vec<u8>,
}

impl SinkTask for HttpSinkTask {
    fn create(config: Config) -> Result<Self> {
        Ok(HttpSinkTask {
            settings: Settings::from_config(&config).map_err(Error::InvalidConfig)?,
            delivered: HashSet::new(),
            not_before: None,
        })
    }

    fn put(&mut self, records: &SinkRecords) -> Result<Vec<RecordFailure>> {
        if let Some(at) = self.not_before {
            let now = Instant::now();
            if now < at {
                return Err(Error::retriable(format!(
                    "{} asked to wait (Retry-After): {} ms left",
                    self.settings.url.shown(),
                    (at - now).as_millis()
                )));
            }
            self.not_before = None;
        }
        let mut pending = Vec::new();
        for record in records {
            let Some(value) = record.value() else {
                continue;
            };
            let at = (
                record.topic().to_owned(),
                record.partition(),
                record.offset(),
            );
            if self.delivered.contains(&at) {
                continue;
            }
            pending.push(Pending {
                index: record.index(),
                at,
                element: element(value, self.settings.format),
            });
        }
        let mut failures = Vec::new();
        let mut start = 0;
        while start < pending.len() {
            let end = self.chunk_end(&pending, start);
            self.deliver(&pending[start..end], &mut failures)?;
            start = end;
        }
        self.delivered.clear();
        Ok(failures)
    }
}

impl HttpSinkTask {
    /// Where the request starting at `pending[start]` ends: within the record and byte limits,
    /// at least one record.
    fn chunk_end(&self, pending: &[Pending], start: usize) -> usize {
        let mut bytes = 2;
        let mut end = start;
        while end < pending.len() && end - start < self.settings.max_records {
            let size = pending[end].element.len() + 1;
            if end > start && bytes + size > self.settings.max_bytes {
                break;
            }
            bytes += size;
            end += 1;
        }
        end
    }

    /// Send `chunk`; on a 4xx for several records, each record alone.
    fn deliver(&mut self, chunk: &[Pending], failures: &mut Vec<RecordFailure>) -> Result<()> {
        match self.exchange(chunk) {
            Outcome::Refused(_) if chunk.len() > 1 => {
                for one in chunk {
                    self.deliver(std::slice::from_ref(one), failures)?;
                }
                Ok(())
            }
            Outcome::Refused(why) => {
                failures.push(RecordFailure {
                    index: chunk[0].index,
                    message: why,
                });
                Ok(())
            }
            Outcome::Delivered => {
                self.delivered.extend(chunk.iter().map(|p| p.at.clone()));
                Ok(())
            }
            Outcome::Passing { why, after } => {
                if let Some(after) = after {
                    self.not_before = Some(Instant::now() + after.min(MAX_RETRY_AFTER));
                }
                Err(Error::retriable(why))
            }
            Outcome::Fatal(why) => Err(Error::fatal(why)),
        }
    }

    /// One request with `chunk`'s records.
    fn exchange(&self, chunk: &[Pending]) -> Outcome {
        let s = &self.settings;
        let body = body(chunk, s.format);
        let content_type = match s.format {
            BodyFormat::JsonArray => "application/json",
            BodyFormat::Ndjson => "application/x-ndjson",
        };
        let url = s.url.shown();
        let mut headers: Vec<(String, Vec<u8>)> = vec![
            ("content-type".to_owned(), content_type.as_bytes().to_vec()),
            (
                "content-length".to_owned(),
                body.len().to_string().into_bytes(),
            ),
        ];
        headers.extend(
            s.headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.as_bytes().to_vec())),
        );
        let fields = match Fields::from_list(&headers) {
            Ok(fields) => fields,
            Err(e) => return Outcome::Fatal(format!("http.headers cannot be sent: {e:?}")),
        };
        let request = OutgoingRequest::new(fields);
        let method = if s.method == "PUT" {
            Method::Put
        } else {
            Method::Post
        };
        let scheme = if s.url.https {
            Scheme::Https
        } else {
            Scheme::Http
        };
        let set = request.set_method(&method).is_ok()
            && request.set_scheme(Some(&scheme)).is_ok()
            && request.set_authority(Some(&s.url.authority)).is_ok()
            && request
                .set_path_with_query(Some(&s.url.path_and_query))
                .is_ok();
        if !set {
            return Outcome::Fatal(format!("http.url {url} cannot be sent"));
        }
        let options = RequestOptions::new();
        let timeout = s.timeout_ms.saturating_mul(1_000_000);
        // A host that does not support a timeout keeps its own: nothing to do about it.
        let _ = options.set_connect_timeout(Some(timeout));
        let _ = options.set_first_byte_timeout(Some(timeout));
        let _ = options.set_between_bytes_timeout(Some(timeout));
        let Ok(outgoing) = request.body() else {
            return Outcome::Fatal("the request's body was taken twice".to_owned());
        };
        let future = match outgoing_handler::handle(request, Some(options)) {
            Ok(future) => future,
            Err(code) => return failed(&url, &code),
        };
        if let Err(why) = write_body(&outgoing, &body) {
            // The body's stream closes when the request failed: a refusal of the worker's
            // grant (fatal) or a broken connection (passing) says which in the answer, which
            // comes once the unfinished body is dropped.
            drop(outgoing);
            future.subscribe().block();
            if let Some(Ok(Err(code))) = future.get() {
                return failed(&url, &code);
            }
            return Outcome::Passing {
                why: format!("sending to {url} failed: {why}"),
                after: None,
            };
        }
        if let Err(e) = OutgoingBody::finish(outgoing, None) {
            return failed(&url, &e);
        }
        future.subscribe().block();
        match future.get() {
            Some(Ok(Ok(response))) => answer(&url, &response),
            Some(Ok(Err(code))) => failed(&url, &code),
            _ => Outcome::Passing {
                why: format!("{url} gave no answer"),
                after: None,
            },
        }
    }
}

/// The body element of a value: JSON as is (compact for NDJSON when it spans lines), text as a
/// JSON string, bytes as their JSON or a base64 string.
fn element(value: DataRef<'_>, format: BodyFormat) -> Vec<u8> {
    let json = |text: &str| -> Vec<u8> {
        if format == BodyFormat::Ndjson
            && text.contains('\n')
            && let Ok(v) = serde_json::from_str::<Value>(text)
        {
            return v.to_string().into_bytes();
        }
        text.trim().as_bytes().to_vec()
    };
    match value {
        DataRef::Json(text) => json(text),
        DataRef::Text(text) => Value::String(text.to_owned()).to_string().into_bytes(),
        DataRef::Bytes(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) if serde_json::from_str::<Value>(text).is_ok() => json(text),
            _ => Value::String(BASE64.encode(bytes)).to_string().into_bytes(),
        },
    }
}

/// A request's body: the elements as a JSON array or as lines.
fn body(chunk: &[Pending], format: BodyFormat) -> Vec<u8> {
    let size: usize = chunk.iter().map(|p| p.element.len() + 1).sum();
    let mut out = Vec::with_capacity(size + 2);
    match format {
        BodyFormat::JsonArray => {
            out.push(b'[');
            for (i, p) in chunk.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&p.element);
            }
            out.push(b']');
        }
        BodyFormat::Ndjson => {
            for p in chunk {
                out.extend_from_slice(&p.element);
                out.push(b'\n');
            }
        }
    }
    out
}

fn write_body(outgoing: &OutgoingBody, body: &[u8]) -> std::result::Result<(), String> {
    let stream = outgoing
        .write()
        .map_err(|()| "the body's stream was taken")?;
    for chunk in body.chunks(4096) {
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

/// What an answer means.
fn answer(url: &str, response: &IncomingResponse) -> Outcome {
    let status = response.status();
    if (200..300).contains(&status) {
        return Outcome::Delivered;
    }
    let retry_after = response
        .headers()
        .get("retry-after")
        .first()
        .and_then(|v| std::str::from_utf8(v).ok().and_then(retry_after));
    let excerpt = excerpt(response);
    let why = format!("{url} answered {status}: {excerpt}");
    match status {
        408 | 429 | 500..=599 => Outcome::Passing {
            why,
            after: retry_after,
        },
        400..=499 => Outcome::Refused(why),
        // 1xx and 3xx (the worker follows no redirects): the endpoint is not what was meant.
        _ => Outcome::Fatal(format!(
            "{why} (a redirect is not followed: set http.url to the final URL)"
        )),
    }
}

/// `Retry-After` as a delay: seconds, or an HTTP date.
fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

/// The start of an answer's body, as text.
fn excerpt(response: &IncomingResponse) -> String {
    let Ok(body) = response.consume() else {
        return String::new();
    };
    let mut bytes = Vec::new();
    if let Ok(stream) = body.stream() {
        while (bytes.len() as u64) < BODY_EXCERPT {
            match stream.blocking_read(BODY_EXCERPT - bytes.len() as u64) {
                Ok(chunk) if !chunk.is_empty() => bytes.extend(chunk),
                _ => break,
            }
        }
    }
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

/// What a failed exchange means: a refused URL or a certificate that does not verify cannot
/// be cured by retrying; anything else about the connection may be.
fn failed(url: &str, code: &ErrorCode) -> Outcome {
    match code {
        ErrorCode::HttpRequestDenied => Outcome::Fatal(format!(
            "the worker refused a request to {url}: grant it with sandbox.http.allow"
        )),
        ErrorCode::TlsCertificateError
        | ErrorCode::TlsAlertReceived(_)
        | ErrorCode::TlsProtocolError => Outcome::Fatal(format!(
            "TLS with {url} failed ({code:?}): its certificate must verify against the system's CAs or those of sandbox.http.tls.ca.location"
        )),
        ErrorCode::HttpRequestUriInvalid => {
            Outcome::Fatal(format!("http.url {url} is not a valid request URL"))
        }
        other => Outcome::Passing {
            why: format!("sending to {url} failed: {other:?}"),
            after: None,
        },
    }
}

export_sink_connector!(HttpSink);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_body_elements() {
        let e = |v, f| String::from_utf8(element(v, f)).unwrap();
        assert_eq!(
            e(DataRef::Json("{\"a\":1}"), BodyFormat::JsonArray),
            "{\"a\":1}"
        );
        assert_eq!(
            e(DataRef::Json("{\n \"a\": 1\n}"), BodyFormat::Ndjson),
            "{\"a\":1}"
        );
        assert_eq!(
            e(DataRef::Text("say \"hi\""), BodyFormat::JsonArray),
            "\"say \\\"hi\\\"\""
        );
        assert_eq!(e(DataRef::Bytes(b"[1,2]"), BodyFormat::JsonArray), "[1,2]");
        assert_eq!(
            e(DataRef::Bytes(&[0, 255]), BodyFormat::JsonArray),
            "\"AP8=\""
        );
        let pending = |s: &str| Pending {
            index: 0,
            at: (String::new(), 0, 0),
            element: s.as_bytes().to_vec(),
        };
        let chunk = [pending("1"), pending("{\"b\":2}")];
        assert_eq!(body(&chunk, BodyFormat::JsonArray), b"[1,{\"b\":2}]");
        assert_eq!(body(&chunk, BodyFormat::Ndjson), b"1\n{\"b\":2}\n");
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        assert_eq!(retry_after(" 3 "), Some(Duration::from_secs(3)));
        let later = SystemTime::now() + Duration::from_secs(120);
        let wait = retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(
            wait > Duration::from_secs(100) && wait <= Duration::from_secs(120),
            "{wait:?}"
        );
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon"), None);
    }

    #[test]
    fn requests_stay_within_the_record_and_byte_limits() {
        let config = Config::new()
            .with("http.url", "http://h/x")
            .with("batch.max.records", "3")
            .with("batch.max.bytes", "12");
        let task = HttpSinkTask::create(config).unwrap();
        let pending: Vec<Pending> = [3usize, 3, 3, 20, 1, 1, 1, 1]
            .iter()
            .map(|&n| Pending {
                index: 0,
                at: (String::new(), 0, 0),
                element: vec![b'1'; n],
            })
            .collect();
        let mut ends = Vec::new();
        let mut start = 0;
        while start < pending.len() {
            start = task.chunk_end(&pending, start);
            ends.push(start);
        }
        // 2 + (3+1)*2 = 10; a third would be 14 > 12. The 20-byte record goes alone.
        assert_eq!(ends, vec![2, 3, 4, 7, 8]);
    }
}
