//! Whether the Kafka cluster answers, as the worker's statuses and `/health` report it.
//!
//! librdkafka hides an outage from its callers: records wait in its queues and are retried, and
//! connection errors arrive only as log lines. So the worker asks: every [`PROBE_INTERVAL`] a
//! thread sends a metadata request for the topics the client already knows (none for a worker
//! that only runs sinks; a cheap request every broker answers) through the shared producer's
//! client, and records when the cluster stopped answering and why. [`FAILURES_FOR_OUTAGE`]
//! failures in a row mark the cluster unreachable (one slow answer under load does not), the
//! first success marks it back. When the producer failed to authenticate or to set up TLS
//! ([`super::security::LastFailure`], which it keeps for this worker alone), that is the
//! reason given, with the user the worker's clients authenticate as: a wrong password reads as
//! one, not as a timeout.

use std::ffi::CStr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use rdkafka::bindings as rdsys;

use super::producer::Producer;
use super::security::LastFailure;

/// How often the cluster is probed.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(2);
/// How long one probe waits for an answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Failed probes in a row before the cluster counts as unreachable.
pub const FAILURES_FOR_OUTAGE: u32 = 2;

/// Since when, and why, the cluster does not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    /// When the first probe failed.
    pub since: SystemTime,
    /// The same moment on the monotonic clock, for durations.
    pub since_instant: Instant,
    /// librdkafka's reason.
    pub error: String,
}

impl Outage {
    /// "Kafka unreachable since <RFC 3339 time> (N s): <error>".
    pub fn describe(&self) -> String {
        format!(
            "Kafka unreachable since {} ({} s): {}",
            rfc3339(self.since),
            self.since_instant.elapsed().as_secs(),
            self.error
        )
    }
}

/// The worker's view of the cluster, shared by statuses and `/health`.
#[derive(Debug, Default)]
pub struct KafkaHealth {
    /// Who the worker's clients authenticate as, and how, for messages.
    principal: Option<String>,
    mechanism: Option<String>,
    outage: Mutex<Option<Outage>>,
    /// Failed probes in a row, and when the first of them was sent.
    failing: Mutex<(u32, Option<(SystemTime, Instant)>)>,
}

impl KafkaHealth {
    /// The health of a cluster the worker's clients reach with `client`'s settings.
    pub fn identified(client: &super::security::Translated) -> Self {
        Self {
            principal: client.principal.clone(),
            mechanism: client.mechanism.clone(),
            ..Self::default()
        }
    }

    /// The outage in progress, if the cluster does not answer.
    pub fn outage(&self) -> Option<Outage> {
        self.outage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Record a probe's result; logs once when the cluster goes away and once when it is back.
    /// `client` is the failure the probed client kept: named instead of the probe's error, and
    /// forgotten when a probe succeeds.
    pub fn record(&self, result: Result<(), String>, client: &LastFailure) {
        let result = match result {
            Ok(()) => {
                client.clear();
                Ok(())
            }
            // What the client found is more telling than the probe's timeout.
            Err(probe) => Err(client.get().map_or(probe, |f| {
                f.describe(self.principal.as_deref(), self.mechanism.as_deref())
            })),
        };
        let mut outage = self.outage.lock().unwrap_or_else(|e| e.into_inner());
        let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        let first_failure = match &result {
            Ok(()) => {
                *failing = (0, None);
                None
            }
            Err(_) => {
                let start = *failing.1.get_or_insert((SystemTime::now(), Instant::now()));
                failing.0 += 1;
                if failing.0 < FAILURES_FOR_OUTAGE {
                    return;
                }
                Some(start)
            }
        };
        match (result, outage.as_ref()) {
            (Ok(()), Some(gone)) => {
                tracing::warn!(target: "wasm_connect::kafka", "Kafka is reachable again after {} s", gone.since_instant.elapsed().as_secs());
                *outage = None;
            }
            (Ok(()), None) => {}
            (Err(error), None) => {
                tracing::warn!(target: "wasm_connect::kafka", "Kafka is unreachable: {error}; statuses say so until it answers again");
                let (since, since_instant) =
                    first_failure.unwrap_or((SystemTime::now(), Instant::now()));
                *outage = Some(Outage {
                    since,
                    since_instant,
                    error,
                });
            }
            // Keep when it started; the reason may change (refused, then timed out).
            (Err(error), Some(_)) => {
                if let Some(o) = outage.as_mut() {
                    o.error = error;
                }
            }
        }
    }

    /// Probe the cluster through `producer` every [`PROBE_INTERVAL`] on a thread of its own,
    /// for as long as the producer lives.
    pub fn watch(self: &Arc<Self>, producer: &Arc<Producer>) {
        let health = Arc::downgrade(self);
        let producer = Arc::downgrade(producer);
        let spawned = std::thread::Builder::new()
            .name("kafka-health".into())
            .spawn(move || probe_loop(&health, &producer));
        if let Err(e) = spawned {
            tracing::error!(
                "cannot start the Kafka health probe, statuses will not show outages: {e}"
            );
        }
    }
}

fn probe_loop(health: &Weak<KafkaHealth>, producer: &Weak<Producer>) {
    loop {
        let (Some(health), Some(producer)) = (health.upgrade(), producer.upgrade()) else {
            return;
        };
        let started = Instant::now();
        health.record(probe(&producer), producer.last_failure());
        drop((health, producer));
        std::thread::sleep(PROBE_INTERVAL.saturating_sub(started.elapsed()));
    }
}

/// One metadata request for no topics: `Ok` once a broker answered.
fn probe(producer: &Producer) -> Result<(), String> {
    let rk = producer.client().native_ptr();
    let mut metadata: *const rdsys::rd_kafka_metadata = std::ptr::null();
    let timeout = PROBE_TIMEOUT.as_millis() as i32;
    // SAFETY: `rk` is the live client `producer` owns for the whole call; with `all_topics` 0
    // and no topic handle librdkafka asks about the topics it knows locally. On success it hands over
    // `metadata`, which is destroyed here and nowhere else.
    let err =
        unsafe { rdsys::rd_kafka_metadata(rk, 0, std::ptr::null_mut(), &mut metadata, timeout) };
    if err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        if !metadata.is_null() {
            // SAFETY: see above; `metadata` came from this successful call.
            unsafe { rdsys::rd_kafka_metadata_destroy(metadata) };
        }
        return Ok(());
    }
    // SAFETY: librdkafka returns a static, NUL-terminated string for every error code.
    let text = unsafe { CStr::from_ptr(rdsys::rd_kafka_err2str(err)) };
    Err(text.to_string_lossy().into_owned())
}

/// `time` as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = crate::transform::java::civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_181_296);
        assert_eq!(rfc3339(t), "2026-12-02T03:14:56Z");
        let leap = SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn an_outage_keeps_its_start_and_ends_with_the_first_answer() {
        let health = KafkaHealth::default();
        let none = LastFailure::default();
        assert!(health.outage().is_none());
        health.record(Err("Local: Broker transport failure".into()), &none);
        assert!(health.outage().is_none(), "one failure is not an outage");
        health.record(Err("Local: Broker transport failure".into()), &none);
        let first = health.outage().unwrap();
        health.record(Err("Local: Timed out".into()), &none);
        let second = health.outage().unwrap();
        assert_eq!(first.since, second.since);
        assert_eq!(second.error, "Local: Timed out");
        assert!(second.describe().starts_with("Kafka unreachable since "));
        health.record(Ok(()), &none);
        assert!(health.outage().is_none());
        // A failure between successes does not count.
        health.record(Err("Local: Timed out".into()), &none);
        health.record(Ok(()), &none);
        health.record(Err("Local: Timed out".into()), &none);
        assert!(health.outage().is_none());
    }

    #[test]
    fn an_outage_names_the_probed_client_s_failure_and_no_other_worker_s() {
        use super::super::security::Failure;
        let client = |user: &str| {
            KafkaHealth::identified(&super::super::security::Translated {
                principal: Some(user.to_owned()),
                mechanism: Some("PLAIN".to_owned()),
                ..Default::default()
            })
        };
        // Two workers in one process: each has its producer, and each producer its record.
        let (a, b) = (client("alice"), client("bob"));
        let (a_failed, b_failed) = (LastFailure::default(), LastFailure::default());
        a_failed.record(Failure::Authentication("bad password".into()));
        for _ in 0..FAILURES_FOR_OUTAGE {
            a.record(Err("Local: Timed out".into()), &a_failed);
            b.record(Err("Local: Timed out".into()), &b_failed);
        }
        let a_says = a.outage().unwrap().error;
        assert!(
            a_says.starts_with("authentication failed for user alice (PLAIN): bad password"),
            "{a_says}"
        );
        assert_eq!(b.outage().unwrap().error, "Local: Timed out");
        // The first answer ends the outage and forgets the failure.
        a.record(Ok(()), &a_failed);
        assert!(a.outage().is_none() && a_failed.get().is_none());
        assert!(b_failed.get().is_none() && b.outage().is_some());
    }
}
