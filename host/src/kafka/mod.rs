//! Kafka I/O, all through rdkafka: the worker's shared producer (acknowledgements routed back to
//! the task that sent each record), consumers for sink tasks, and topic creation.

pub mod clients;
pub mod consumer;
pub mod delivery;
pub mod fetch_queues;
pub mod group;
pub mod group_offsets;
pub mod headers;
pub mod health;
pub mod producer;
pub mod security;
pub mod topics;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;

/// Settings common to every client of this worker.
pub fn base_config(bootstrap: &str, client_id: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        // Loopback clusters and the embedded broker advertise 127.0.0.1; don't try IPv6 first.
        .set("broker.address.family", "v4");
    config
}

/// Apply `key = value` overrides (a worker's `producer.*`, `consumer.*`, `admin.*`).
pub fn apply(config: &mut ClientConfig, overrides: &[(String, String)]) {
    for (k, v) in overrides {
        config.set(k, v);
    }
}

/// How long repeats of one kind of librdkafka message are held back after it was logged.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(10);

/// Rate limit for repeated messages: the first of a kind is logged, the repeats within
/// [`REPEAT_WINDOW`] are only counted, and the next one logged after the window says how many
/// were held back. During an outage librdkafka reports the same connection failure from every
/// client many times a second; this keeps that to a line per kind per window.
#[derive(Debug, Default)]
pub struct Repeats {
    seen: Mutex<HashMap<String, (Instant, u64)>>,
}

impl Repeats {
    /// Whether to log a message of kind `key` now: `Some(n)` with the repeats held back since
    /// the last one logged, `None` to hold this one back.
    pub fn admit(&self, key: &str) -> Option<u64> {
        self.admit_at(key, Instant::now())
    }

    fn admit_at(&self, key: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match seen.get_mut(key) {
            Some((logged, held)) if now.duration_since(*logged) < REPEAT_WINDOW => {
                *held += 1;
                None
            }
            Some((logged, held)) => {
                *logged = now;
                Some(std::mem::take(held))
            }
            None => {
                // Kinds are few (facilities, error codes), but never let the map grow unbounded.
                if seen.len() >= 1024 {
                    seen.clear();
                }
                seen.insert(key.to_owned(), (now, 0));
                Some(0)
            }
        }
    }
}

/// The repeat limit every Kafka client in the process shares.
///
/// Process-wide on purpose: it limits lines of the one log every worker in the process writes
/// (the tracing subscriber is process-wide too, `logging.rs`), and librdkafka's lines do not
/// say which worker's client wrote them, so a limit per worker would print the same line once
/// per worker. Nothing reads it but the log; what a worker decides from (a client's failure,
/// the cluster's health) is kept per worker (`security::LastFailure`, `health.rs`).
pub fn repeats() -> &'static Repeats {
    static REPEATS: OnceLock<Repeats> = OnceLock::new();
    REPEATS.get_or_init(Repeats::default)
}

/// " (N more like it held back)" when `held` > 0.
pub fn held_back(held: u64) -> String {
    if held == 0 {
        String::new()
    } else {
        format!(
            " ({held} more like it in the last {} s held back)",
            REPEAT_WINDOW.as_secs()
        )
    }
}

/// What kind of error `error` is, for [`Repeats`]: librdkafka's code, else its text.
pub fn error_kind(error: &rdkafka::error::KafkaError) -> String {
    error
        .rdkafka_error_code()
        .map_or_else(|| error.to_string(), |code| format!("{code:?}"))
}

/// Routes librdkafka's logs and errors into tracing, repeats rate-limited ([`Repeats`]). The
/// context of the worker's clients that keep no failure (admin, offsets, sink consumers).
#[derive(Clone, Default)]
pub struct TracingContext;

impl ClientContext for TracingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        route_log(Keeper::Log, level, fac, message);
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        route_error(Keeper::Log, error, reason);
    }
}

/// Where a client keeps its failures to authenticate or to set up TLS (every client logs them).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keeper<'a> {
    /// Nowhere but the log: the worker's admin, offsets and sink clients. The health probe
    /// asks through the shared producer and names what that producer kept; a failure of the
    /// others' is told by the log (and, when they share the producer's settings, by the
    /// producer's own failure).
    Log,
    /// The worker's shared producer's [`security::LastFailure`], which the health probe
    /// (`health.rs`) names in an outage.
    Worker(&'a security::LastFailure),
    /// A connector's own client ([`OwnClient`]), which its task's status shows.
    Own(&'a OwnClient),
}

/// How a client routes its log lines: a TLS failure that only a line tells (see
/// [`security::classify_log`]) is kept as [`route_error`] keeps errors; every line is
/// logged, repeats rate-limited.
pub(crate) fn route_log(keeper: Keeper<'_>, level: RDKafkaLogLevel, fac: &str, message: &str) {
    if matches!(
        level,
        RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning
    ) && let Some(failure) = security::classify_log(message)
    {
        match keeper {
            Keeper::Own(own) => own.record(failure),
            Keeper::Worker(last) => last.record(failure),
            Keeper::Log => {}
        }
    }
    log_line(level, fac, message);
}

/// Log one of librdkafka's lines, repeats rate-limited ([`Repeats`]).
fn log_line(level: RDKafkaLogLevel, fac: &str, message: &str) {
    // Debug output is asked for explicitly (`debug` in the client config): all of it.
    if !matches!(level, RDKafkaLogLevel::Debug) {
        // One kind: same level, facility and text but for numbers (broker ids, ports,
        // addresses, durations), so distinct messages are never held back for each other.
        let text: String = message
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .take(120)
            .collect();
        let Some(held) = repeats().admit(&format!("log:{}:{fac}:{text}", level as i32)) else {
            return;
        };
        let held = held_back(held);
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", facility = fac, "{message}{held}")
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", facility = fac, "{message}{held}")
            }
            _ => tracing::info!(target: "librdkafka", facility = fac, "{message}{held}"),
        }
        return;
    }
    tracing::debug!(target: "librdkafka", facility = fac, "{message}");
}

impl rdkafka::consumer::ConsumerContext for TracingContext {}

/// A client made from a connector's own settings (KIP-458 overrides), and its last failure to
/// authenticate or to set up TLS. The worker's probe (see [`health`]) goes through the worker's
/// clients and cannot see such a failure, so the task's status shows it from here, and it is
/// logged once, naming the task, when it first happens.
///
/// Invariant: `failed` is true exactly when `failure` holds one, so the clients' hot paths
/// (a delivery report, a fetch) check a flag instead of taking the lock.
#[derive(Debug)]
pub struct OwnClient {
    /// The keys that made the client the connector's own: `producer.override.*`, say.
    keys: &'static str,
    /// Which task it serves, for the log: `connector x task 0`.
    task: String,
    /// Who it authenticates as, and how (see [`security::Translated`]).
    principal: Option<String>,
    mechanism: Option<String>,
    failed: AtomicBool,
    failure: Mutex<Option<security::Failure>>,
}

impl OwnClient {
    /// A client of `task` built from `settings`, which `keys` made the connector's own.
    pub fn new(keys: &'static str, task: String, settings: &security::Translated) -> Self {
        Self {
            keys,
            task,
            principal: settings.principal.clone(),
            mechanism: settings.mechanism.clone(),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    /// Route a librdkafka error: logged as every client's is, and kept (and logged in words)
    /// if it is a failure to authenticate or to set up TLS.
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        if let Some(failure) = security::classify(error.rdkafka_error_code(), reason) {
            self.record(failure);
        }
        if let Some(held) = repeats().admit(&format!("error:{}", error_kind(&error))) {
            tracing::warn!(target: "librdkafka", "{error}: {reason}{}", held_back(held));
        }
    }

    /// Keep `failure`; the first of a run of them is logged.
    fn record(&self, failure: security::Failure) {
        let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            tracing::warn!(target: "wasm_connect::kafka", "{}: {}", self.task, self.describe_failure(&failure));
        }
        *slot = Some(failure);
        self.failed.store(true, Ordering::Release);
    }

    /// The client reached the cluster (a record was delivered, partitions were assigned): any
    /// failure it had is over.
    fn succeeded(&self) {
        if self.failed.load(Ordering::Acquire) {
            *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
            self.failed.store(false, Ordering::Release);
        }
    }

    fn describe_failure(&self, failure: &security::Failure) -> String {
        format!(
            "the connector's own Kafka client ({}): {}",
            self.keys,
            failure.describe(self.principal.as_deref(), self.mechanism.as_deref())
        )
    }

    /// What went wrong, for the task's status, while the client cannot reach the cluster.
    pub fn trouble(&self) -> Option<String> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().map(|f| {
            format!(
                "{}; the task waits (nothing is lost) until it succeeds",
                self.describe_failure(f)
            )
        })
    }
}

/// How a client routes its errors: kept where `keeper` says (a connector's own client's
/// [`OwnClient`] also logs the failure in words), and logged, repeats rate-limited.
pub(crate) fn route_error(keeper: Keeper<'_>, error: rdkafka::error::KafkaError, reason: &str) {
    match keeper {
        Keeper::Own(own) => return own.error(error, reason),
        Keeper::Worker(last) => last.observe(error.rdkafka_error_code(), reason),
        Keeper::Log => {}
    }
    if let Some(held) = repeats().admit(&format!("error:{}", error_kind(&error))) {
        tracing::warn!(target: "librdkafka", "{error}: {reason}{}", held_back(held));
    }
}

/// Tell `own`, if any, that its client reached the cluster.
pub(crate) fn succeeded(own: Option<&OwnClient>) {
    if let Some(own) = own {
        own.succeeded();
    }
}

/// Run `f`, a call that blocks (a synchronous commit, a metadata request), from async code: on
/// a multi-threaded runtime the thread is handed over for the call (`block_in_place`), so
/// other tasks move on to other threads instead of waiting behind it.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_within_the_window_are_counted_and_reported_with_the_next_line() {
        let repeats = Repeats::default();
        let t0 = Instant::now();
        assert_eq!(repeats.admit_at("FAIL", t0), Some(0));
        for i in 1..=40 {
            assert_eq!(
                repeats.admit_at("FAIL", t0 + Duration::from_millis(i * 100)),
                None
            );
        }
        // Another kind is not held back by the first.
        assert_eq!(
            repeats.admit_at("ERROR", t0 + Duration::from_secs(1)),
            Some(0)
        );
        assert_eq!(repeats.admit_at("FAIL", t0 + REPEAT_WINDOW), Some(40));
        assert_eq!(repeats.admit_at("FAIL", t0 + REPEAT_WINDOW * 3), Some(0));
        assert!(held_back(40).contains("40 more"));
        assert_eq!(held_back(0), "");
    }
}
