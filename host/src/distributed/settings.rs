//! Distributed mode's worker settings, Kafka Connect's keys (`DistributedConfig`): the group,
//! the three state topics and how to create them, the membership timings, and the REST address
//! other workers reach this one at. Read from the same worker file as everything else (see
//! `WorkerConfig::from_pairs_with`); every problem names its key and says what to do.

use std::time::Duration;

use crate::config::Problem;

/// A topic the worker creates if it is missing: its partitions and replication factor (`None`:
/// the broker's default, Kafka Connect's `-1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: Option<i32>,
    pub replication: Option<i16>,
}

/// The settings of a distributed worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistributedSettings {
    /// `group.id`.
    pub group_id: String,
    /// The config topic: always one partition.
    pub config_topic: TopicSpec,
    pub offset_topic: TopicSpec,
    pub status_topic: TopicSpec,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub rebalance_timeout: Duration,
    pub scheduled_rebalance_max_delay: Duration,
    /// Where other workers reach this worker's REST API, where given.
    pub advertised_host: Option<String>,
    pub advertised_port: Option<u16>,
    /// `http` or `https`.
    pub advertised_listener: Option<String>,
}

impl DistributedSettings {
    /// Read the settings from a worker config's (resolved) pairs.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Self, Vec<Problem>> {
        let get = |k: &str| {
            pairs
                .iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.trim())
                .filter(|v| !v.is_empty())
        };
        let mut problems = Vec::new();
        let mut required = |key: &str, what: &str| -> String {
            get(key).map(str::to_owned).unwrap_or_else(|| {
                problems.push(Problem::new(
                    key,
                    format!("is required in distributed mode: {what}"),
                ));
                String::new()
            })
        };
        let group_id = required(
            "group.id",
            "the group the workers of this cluster join (the same on every worker, unique to the cluster)",
        );
        let config = required(
            "config.storage.topic",
            "the topic the cluster keeps connector configs in (e.g. connect-configs)",
        );
        let offsets = required(
            "offset.storage.topic",
            "the topic the cluster keeps source offsets in (e.g. connect-offsets)",
        );
        let status = required(
            "status.storage.topic",
            "the topic the cluster keeps statuses in (e.g. connect-status)",
        );
        // Absent: the default; -1: the broker's default (`None`); else a number in range.
        let mut sized = |key: &str, default: i64, max: i64| -> Option<i64> {
            let Some(raw) = get(key) else {
                return Some(default);
            };
            match raw.parse::<i64>() {
                Ok(-1) => None,
                Ok(n) if (1..=max).contains(&n) => Some(n),
                _ => {
                    problems.push(Problem::new(
                        key,
                        format!("{raw:?} is not -1 (the broker's default) or a whole number from 1 to {max}"),
                    ));
                    Some(default)
                }
            }
        };
        let replication = |n: Option<i64>| n.and_then(|n| i16::try_from(n).ok());
        let partitions = |n: Option<i64>| n.and_then(|n| i32::try_from(n).ok());
        let max_replication = i64::from(i16::MAX);
        let max_partitions = i64::from(i32::MAX);
        let config_replication = replication(sized(
            "config.storage.replication.factor",
            3,
            max_replication,
        ));
        let offset_replication = replication(sized(
            "offset.storage.replication.factor",
            3,
            max_replication,
        ));
        let status_replication = replication(sized(
            "status.storage.replication.factor",
            3,
            max_replication,
        ));
        let offset_partitions = partitions(sized("offset.storage.partitions", 25, max_partitions));
        let status_partitions = partitions(sized("status.storage.partitions", 5, max_partitions));
        let mut millis = |key: &str, default: u64, min: u64| -> Duration {
            let Some(raw) = get(key) else {
                return Duration::from_millis(default);
            };
            match raw.parse::<u64>() {
                Ok(n) if n >= min => Duration::from_millis(n),
                _ => {
                    problems.push(Problem::new(
                        key,
                        format!("{raw:?} is not a whole number of milliseconds of at least {min}"),
                    ));
                    Duration::from_millis(default)
                }
            }
        };
        let session_timeout = millis("session.timeout.ms", 10_000, 1);
        let heartbeat_interval = millis("heartbeat.interval.ms", 3_000, 1);
        let rebalance_timeout = millis("rebalance.timeout.ms", 60_000, 1);
        let scheduled_rebalance_max_delay = millis("scheduled.rebalance.max.delay.ms", 300_000, 0);
        if heartbeat_interval >= session_timeout {
            problems.push(Problem::new(
                "heartbeat.interval.ms",
                format!(
                    "{} ms is not below session.timeout.ms ({} ms): a worker would be expelled between two heartbeats; make it a third of the session timeout or less",
                    heartbeat_interval.as_millis(),
                    session_timeout.as_millis()
                ),
            ));
        }
        for (a, b) in [
            ("config.storage.topic", "offset.storage.topic"),
            ("config.storage.topic", "status.storage.topic"),
            ("offset.storage.topic", "status.storage.topic"),
        ] {
            if let (Some(x), Some(y)) = (get(a), get(b))
                && x == y
            {
                problems.push(Problem::new(
                    b,
                    format!("{y:?} is also {a}: each of the three state topics needs its own"),
                ));
            }
        }
        let advertised_port = match get("rest.advertised.port") {
            None => None,
            Some(raw) => match raw.parse::<u16>() {
                Ok(p) if p > 0 => Some(p),
                _ => {
                    problems.push(Problem::new(
                        "rest.advertised.port",
                        format!("{raw:?} is not a port (1 to 65535)"),
                    ));
                    None
                }
            },
        };
        let advertised_listener = match get("rest.advertised.listener") {
            None => None,
            Some(l) if l.eq_ignore_ascii_case("http") || l.eq_ignore_ascii_case("https") => {
                Some(l.to_ascii_lowercase())
            }
            Some(other) => {
                problems.push(Problem::new(
                    "rest.advertised.listener",
                    format!("{other:?} is not http or https"),
                ));
                None
            }
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Self {
            group_id,
            config_topic: TopicSpec {
                name: config,
                partitions: Some(1),
                replication: config_replication,
            },
            offset_topic: TopicSpec {
                name: offsets,
                partitions: offset_partitions,
                replication: offset_replication,
            },
            status_topic: TopicSpec {
                name: status,
                partitions: status_partitions,
                replication: status_replication,
            },
            session_timeout,
            heartbeat_interval,
            rebalance_timeout,
            scheduled_rebalance_max_delay,
            advertised_host: get("rest.advertised.host.name").map(str::to_owned),
            advertised_port,
            advertised_listener,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::file::pairs_of as pairs;

    const REQUIRED: &[(&str, &str)] = &[
        ("group.id", "connect-cluster"),
        ("config.storage.topic", "connect-configs"),
        ("offset.storage.topic", "connect-offsets"),
        ("status.storage.topic", "connect-status"),
    ];

    #[test]
    fn kafka_connects_defaults_and_keys() {
        let settings = DistributedSettings::from_pairs(&pairs(REQUIRED)).unwrap();
        assert_eq!(settings.group_id, "connect-cluster");
        assert_eq!(
            settings.config_topic,
            TopicSpec {
                name: "connect-configs".into(),
                partitions: Some(1),
                replication: Some(3)
            }
        );
        assert_eq!(settings.offset_topic.partitions, Some(25));
        assert_eq!(settings.status_topic.partitions, Some(5));
        assert_eq!(settings.session_timeout, Duration::from_secs(10));
        assert_eq!(settings.heartbeat_interval, Duration::from_secs(3));
        assert_eq!(settings.rebalance_timeout, Duration::from_secs(60));
        assert_eq!(
            settings.scheduled_rebalance_max_delay,
            Duration::from_secs(300)
        );
        let mut given = pairs(REQUIRED);
        given.extend(pairs(&[
            ("offset.storage.replication.factor", "-1"),
            ("status.storage.partitions", "2"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "1000"),
            ("scheduled.rebalance.max.delay.ms", "0"),
            ("rest.advertised.host.name", "w1.example"),
            ("rest.advertised.port", "18083"),
            ("rest.advertised.listener", "HTTPS"),
        ]));
        let settings = DistributedSettings::from_pairs(&given).unwrap();
        assert_eq!(settings.offset_topic.replication, None);
        assert_eq!(settings.status_topic.partitions, Some(2));
        assert_eq!(settings.scheduled_rebalance_max_delay, Duration::ZERO);
        assert_eq!(settings.advertised_host.as_deref(), Some("w1.example"));
        assert_eq!(settings.advertised_port, Some(18083));
        assert_eq!(settings.advertised_listener.as_deref(), Some("https"));
    }

    #[test]
    fn every_problem_names_its_key() {
        let refused = DistributedSettings::from_pairs(&pairs(&[
            ("config.storage.topic", "same"),
            ("offset.storage.topic", "same"),
            ("status.storage.topic", "status"),
            ("offset.storage.partitions", "0"),
            ("config.storage.replication.factor", "lots"),
            ("session.timeout.ms", "3000"),
            ("heartbeat.interval.ms", "3000"),
            ("rest.advertised.port", "99999"),
            ("rest.advertised.listener", "ftp"),
        ]))
        .unwrap_err();
        let keys: Vec<&str> = refused.iter().map(|p| p.key.as_str()).collect();
        for key in [
            "group.id",
            "offset.storage.topic",
            "offset.storage.partitions",
            "config.storage.replication.factor",
            "heartbeat.interval.ms",
            "rest.advertised.port",
            "rest.advertised.listener",
        ] {
            assert!(keys.contains(&key), "no problem of {key}: {refused:?}");
        }
        let group = refused.iter().find(|p| p.key == "group.id").unwrap();
        assert!(
            group.message.contains("required in distributed mode"),
            "{group:?}"
        );
    }
}
