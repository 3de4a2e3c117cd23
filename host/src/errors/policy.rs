//! The `errors.*` keys of a connector config, with Kafka Connect's names and meanings.

use std::time::Duration;

/// `none` (default): the first bad record fails the task. `all`: bad records are skipped.
pub const TOLERANCE: &str = "errors.tolerance";
/// How long to retry a failed record write (ms); 0 = never, -1 = forever.
pub const RETRY_TIMEOUT: &str = "errors.retry.timeout";
/// Longest wait between those retries (ms).
pub const RETRY_DELAY_MAX: &str = "errors.retry.delay.max.ms";
/// Log each error (with its stage and record position).
pub const LOG_ENABLE: &str = "errors.log.enable";
/// Include keys and values in those logs.
pub const LOG_INCLUDE_MESSAGES: &str = "errors.log.include.messages";
/// The dead-letter queue topic (empty: none). Used only with `errors.tolerance=all`, as in
/// Kafka Connect: under `none` the task fails instead.
pub const DLQ_TOPIC: &str = "errors.deadletterqueue.topic.name";
/// Add `__connect.errors.*` headers to dead-letter records.
pub const DLQ_CONTEXT_HEADERS: &str = "errors.deadletterqueue.context.headers.enable";
/// Replication factor of the DLQ topic when the worker creates it.
pub const DLQ_REPLICATION: &str = "errors.deadletterqueue.topic.replication.factor";

/// Every `errors.*` key, for docs and checks.
pub const KEYS: &[&str] = &[
    TOLERANCE,
    RETRY_TIMEOUT,
    RETRY_DELAY_MAX,
    LOG_ENABLE,
    LOG_INCLUDE_MESSAGES,
    DLQ_TOPIC,
    DLQ_CONTEXT_HEADERS,
    DLQ_REPLICATION,
];

/// A connector's error handling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPolicy {
    /// `errors.tolerance=all`.
    pub tolerate_all: bool,
    /// `None`: retry forever.
    pub retry_timeout: Option<Duration>,
    pub retry_delay_max: Duration,
    pub log: bool,
    pub log_messages: bool,
    pub dlq_topic: Option<String>,
    pub dlq_context_headers: bool,
    pub dlq_replication: i32,
}

impl Default for ErrorPolicy {
    fn default() -> Self {
        Self {
            tolerate_all: false,
            retry_timeout: Some(Duration::ZERO),
            retry_delay_max: Duration::from_secs(60),
            log: false,
            log_messages: false,
            dlq_topic: None,
            dlq_context_headers: false,
            dlq_replication: -1,
        }
    }
}

impl ErrorPolicy {
    /// Read the `errors.*` keys of `config`; every problem is returned as `key: message`.
    pub fn from_config(config: &[(String, String)]) -> Result<Self, Vec<String>> {
        let mut policy = Self::default();
        let mut problems = Vec::new();
        for (key, value) in config {
            let v = value.trim();
            let boolean = |problems: &mut Vec<String>| {
                crate::config::keys::read_bool(key, value).unwrap_or_else(|e| {
                    problems.push(e);
                    false
                })
            };
            match key.as_str() {
                TOLERANCE => match v {
                    "none" => policy.tolerate_all = false,
                    "all" => policy.tolerate_all = true,
                    _ => problems.push(format!("{key}: {value:?} must be none or all")),
                },
                RETRY_TIMEOUT => match v.parse::<i64>() {
                    Ok(-1) => policy.retry_timeout = None,
                    Ok(ms) if ms >= 0 => {
                        policy.retry_timeout = Some(Duration::from_millis(ms as u64))
                    }
                    _ => problems.push(format!(
                        "{key}: {value:?} must be a number of milliseconds, 0 (no retries) or -1 (forever)"
                    )),
                },
                RETRY_DELAY_MAX => match crate::config::keys::read_number(key, value) {
                    Ok(ms) => policy.retry_delay_max = Duration::from_millis(ms),
                    Err(e) => problems.push(e),
                },
                LOG_ENABLE => policy.log = boolean(&mut problems),
                LOG_INCLUDE_MESSAGES => policy.log_messages = boolean(&mut problems),
                DLQ_CONTEXT_HEADERS => policy.dlq_context_headers = boolean(&mut problems),
                DLQ_TOPIC => policy.dlq_topic = (!v.is_empty()).then(|| v.to_owned()),
                DLQ_REPLICATION => match v.parse::<i32>() {
                    Ok(n) if n == -1 || n >= 1 => policy.dlq_replication = n,
                    _ => problems.push(format!(
                        "{key}: {value:?} must be -1 (broker default) or a positive integer"
                    )),
                },
                _ => {}
            }
        }
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_keys_and_defaults_are_the_key_table_s() {
        use crate::config::keys::{defaults, key};
        for name in KEYS {
            assert!(key(name).is_some(), "{name} is not in the key table");
        }
        // The policy keeps Kafka Connect's defaults in its own `Default`; the table says the
        // same.
        assert_eq!(
            ErrorPolicy::from_config(&defaults()).ok(),
            Some(ErrorPolicy::default())
        );
    }

    #[test]
    fn defaults_match_kafka_connect() {
        let p = ErrorPolicy::from_config(&[]).unwrap();
        assert!(!p.tolerate_all && !p.log && p.dlq_topic.is_none());
        assert_eq!(p.retry_timeout, Some(Duration::ZERO));
    }

    #[test]
    fn keys_are_read_and_bad_values_named() {
        let p = ErrorPolicy::from_config(&cfg(&[
            (TOLERANCE, "all"),
            (RETRY_TIMEOUT, "-1"),
            (DLQ_TOPIC, "dead"),
            (DLQ_CONTEXT_HEADERS, "true"),
        ]))
        .unwrap();
        assert!(p.tolerate_all && p.dlq_context_headers && p.retry_timeout.is_none());
        assert_eq!(p.dlq_topic.as_deref(), Some("dead"));
        let problems = ErrorPolicy::from_config(&cfg(&[(TOLERANCE, "some"), (LOG_ENABLE, "yes")]))
            .unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("errors.tolerance: \"some\""));
        assert!(problems[1].starts_with("errors.log.enable: \"yes\""));
    }
}
