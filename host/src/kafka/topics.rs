//! Creating the topics source connectors write to (Kafka Connect's KIP-158): a topic is created
//! the first time a task sends to it, with the connector's `topic.creation.default.partitions`
//! and `topic.creation.default.replication.factor` (else the worker's defaults). Needed for
//! clusters with `auto.create.topics.enable=false`, and for the embedded broker.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;

use super::TracingContext;

/// Connector keys (KIP-158).
pub const PARTITIONS: &str = "topic.creation.default.partitions";
pub const REPLICATION: &str = "topic.creation.default.replication.factor";

/// Why a topic could not be made sure of.
#[derive(Debug, Clone)]
pub struct TopicError {
    /// What happened, for statuses and the log.
    pub message: String,
    /// True when the cluster did not answer (asking again later may succeed); false when it
    /// refused (a bad name, too many partitions, not authorised).
    pub unanswered: bool,
    /// True when the request itself is wrong (the name, the partitions or the replication
    /// factor): asking again, or restarting, only repeats the refusal.
    pub invalid: bool,
}

/// Creates missing topics, remembering which exist.
pub struct TopicCreator {
    admin: AdminClient<TracingContext>,
    enabled: bool,
    partitions: i32,
    replication: i32,
    known: Mutex<HashSet<String>>,
}

impl TopicCreator {
    /// A creator for `bootstrap`; `enabled=false` never creates (the broker must auto-create
    /// or the topics must exist).
    pub fn new(
        bootstrap: &str,
        client_id: &str,
        overrides: &[(String, String)],
        enabled: bool,
        partitions: i32,
        replication: i32,
    ) -> Result<Self, String> {
        let mut config = super::base_config(bootstrap, client_id);
        super::apply(&mut config, overrides);
        let admin = super::clients::create(&config, TracingContext, "admin client")?;
        Ok(Self {
            admin,
            enabled,
            partitions,
            replication,
            known: Mutex::new(HashSet::new()),
        })
    }

    /// A creator with this one's settings through a client of its own (a connector's admin
    /// overrides).
    pub fn with_client(
        &self,
        bootstrap: &str,
        client_id: &str,
        overrides: &[(String, String)],
    ) -> Result<Self, String> {
        Self::new(
            bootstrap,
            client_id,
            overrides,
            self.enabled,
            self.partitions,
            self.replication,
        )
    }

    /// Make sure `topic` exists, creating it with `connector`'s settings if needed.
    pub async fn ensure(&self, topic: &str, connector: &[(String, String)]) -> Result<(), String> {
        self.try_ensure(topic, connector)
            .await
            .map_err(|e| e.message)
    }

    /// As [`Self::ensure`], saying whether a failure is the cluster's not answering (an
    /// outage, credentials it refuses: asking again later may succeed) rather than a refusal.
    pub async fn try_ensure(
        &self,
        topic: &str,
        connector: &[(String, String)],
    ) -> Result<(), TopicError> {
        let refused = |message: String, invalid: bool| TopicError {
            message,
            unanswered: false,
            invalid,
        };
        if !self.enabled || self.lock().contains(topic) {
            return Ok(());
        }
        let setting = |key: &str, default: i32| -> Result<i32, String> {
            match connector.iter().find(|(k, _)| k == key) {
                None => Ok(default),
                Some((_, v)) => v
                    .trim()
                    .parse::<i32>()
                    .ok()
                    .filter(|n| *n == -1 || *n >= 1)
                    .ok_or_else(|| format!("{key}: {v:?} must be -1 or a positive integer")),
            }
        };
        let partitions = setting(PARTITIONS, self.partitions).map_err(|m| refused(m, true))?;
        let replication = setting(REPLICATION, self.replication).map_err(|m| refused(m, true))?;
        let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = self
            .admin
            .create_topics([&new], &options)
            .await
            .map_err(|e| TopicError {
                message: format!("cannot create topic {topic}: {e}"),
                unanswered: true,
                invalid: false,
            })?;
        for result in results {
            match result {
                Ok(_) => tracing::info!(topic, partitions, replication, "created topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((
                    _,
                    code @ (RDKafkaErrorCode::RequestTimedOut | RDKafkaErrorCode::NotController),
                )) => {
                    return Err(TopicError {
                        message: format!("cannot create topic {topic}: {code}"),
                        unanswered: true,
                        invalid: false,
                    });
                }
                Err((_, RDKafkaErrorCode::InvalidTopic)) => {
                    return Err(refused(
                        format!(
                            "{topic:?} is not a valid topic name (Kafka allows letters, digits, '.', '_' and '-', at most 249 of them); fix the connector's topic"
                        ),
                        true,
                    ));
                }
                Err((
                    _,
                    code @ (RDKafkaErrorCode::InvalidPartitions
                    | RDKafkaErrorCode::InvalidReplicationFactor),
                )) => {
                    return Err(refused(
                        format!(
                            "cannot create topic {topic} ({partitions} partitions, replication {replication}): {code}; fix {PARTITIONS} / {REPLICATION}"
                        ),
                        true,
                    ));
                }
                Err((_, code)) => {
                    return Err(refused(
                        format!(
                            "cannot create topic {topic} ({partitions} partitions, replication {replication}): {code}; create it yourself or fix {PARTITIONS} / {REPLICATION}"
                        ),
                        false,
                    ));
                }
            }
        }
        self.lock().insert(topic.to_owned());
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}
