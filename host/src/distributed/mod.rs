//! Distributed mode: workers that form a group through Kafka's group coordinator, share their
//! state through Kafka topics, and split connectors and tasks among themselves (Kafka Connect's
//! `distributed` package). Built in steps; what is here so far:
//!
//! - `settings`: a distributed worker's keys (Kafka Connect's `DistributedConfig`).
//! - `protocol`: the members' join metadata and the leader's assignments, in Kafka Connect's
//!   incremental cooperative layouts under a protocol name of our own.
//! - `assignor`: the leader's incremental cooperative assignment, a pure function with its
//!   memory across rounds.
//! - `follower`: a topic read from its beginning and followed on a thread (Kafka Connect's
//!   `KafkaBasedLog`).
//! - `config_topic`: the config topic's records in Kafka Connect's format.
//! - `offset_topic`: source offsets on the offsets topic (`offsets::OffsetStore`), Connect's
//!   keys, Java's partitioner.
//! - `status_topic`: connector and task statuses on the status topic (`storage::StatusStore`),
//!   Connect's format, generations settling stale writes.
//! - `config_log`: the config log on the config topic (`storage::ConfigLog`), read back by
//!   every worker, written in transactions that fence a deposed writer.
//! - `cluster`: the worker in its group: membership, the leader's assignments, appends through
//!   the leader (forwarded over REST, signed), and the state topics opened ([`open_cluster`]).

pub mod assignor;
pub mod cluster;
pub mod config_log;
pub mod config_topic;
pub mod follower;
pub mod offset_topic;
pub mod protocol;
pub mod settings;
pub mod status_topic;

/// How long a write to a state topic may take before it is an error that names the topic.
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The producer of a state topic (config, offsets, status): the worker's `settings`
/// (librdkafka's terms), idempotent, `acks=all`, a bounded delivery time, then `extra`.
fn state_producer(
    bootstrap: &str,
    settings: &[(String, String)],
    client_id: &str,
    extra: &[(&str, &str)],
    what: &str,
) -> Result<rdkafka::producer::FutureProducer<crate::kafka::TracingContext>, String> {
    let mut config = crate::kafka::base_config(bootstrap, client_id);
    crate::kafka::apply(&mut config, settings);
    config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", WRITE_TIMEOUT.as_millis().to_string());
    for (k, v) in extra {
        config.set(*k, *v);
    }
    crate::kafka::clients::create(&config, crate::kafka::TracingContext, what)
}

/// The partitions of `topic`, from the cluster's metadata.
fn partitions_of(
    producer: &rdkafka::producer::FutureProducer<crate::kafka::TracingContext>,
    topic: &str,
) -> Result<Vec<i32>, String> {
    use rdkafka::producer::Producer;
    let metadata = crate::kafka::blocking(|| {
        producer
            .client()
            .fetch_metadata(Some(topic), WRITE_TIMEOUT)
            .map_err(|e| format!("cannot read the metadata of topic {topic}: {e}"))
    })?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Err(format!(
            "topic {topic} does not exist (or has no partitions)"
        ));
    }
    Ok(partitions)
}

/// A keyed state topic's producer, the state its follower reads into, and the follower.
type Keyed<S> = (
    rdkafka::producer::FutureProducer<crate::kafka::TracingContext>,
    std::sync::Arc<std::sync::Mutex<S>>,
    follower::Follower,
);

/// What a keyed state topic (offsets, status) opens with: a producer partitioning as Java does
/// (`murmur2_random`: a key lands where a Java worker puts it), and a follower of every
/// partition that reads records into `state` through `read`, read to the end before returning.
fn open_keyed<S: Default + Send + 'static>(
    bootstrap: &str,
    topic: &str,
    producer: &[(String, String)],
    consumer: &[(String, String)],
    client_id: &str,
    what: &str,
    read: fn(&str, &std::sync::Mutex<S>, follower::Record<'_>),
) -> Result<Keyed<S>, String> {
    let producer = state_producer(
        bootstrap,
        producer,
        client_id,
        &[("partitioner", "murmur2_random")],
        &format!("{what} producer"),
    )?;
    let partitions = partitions_of(&producer, topic)?;
    let state: std::sync::Arc<std::sync::Mutex<S>> = std::sync::Arc::default();
    let follower = {
        let state = std::sync::Arc::clone(&state);
        let topic_name = topic.to_owned();
        follower::Follower::start(
            bootstrap,
            topic,
            &partitions,
            consumer,
            client_id,
            move |record| read(&topic_name, &state, record),
        )?
    };
    crate::kafka::blocking(|| follower.read_to_end())?;
    Ok((producer, state, follower))
}

/// A distributed worker's state topics, open.
pub(crate) struct Opened {
    pub cluster: std::sync::Arc<cluster::Cluster>,
    pub offsets: std::sync::Arc<offset_topic::KafkaOffsetStore>,
}

/// Create the three state topics where missing (compacted; the config topic with one
/// partition), then open them with the worker's client settings, each read to its end.
pub(crate) async fn open_cluster(
    bootstrap: &str,
    client_id: &str,
    config: &crate::config::WorkerConfig,
    settings: settings::DistributedSettings,
) -> Result<Opened, String> {
    use crate::kafka::clients::ClientKind;
    let clients = &config.clients;
    ensure_topics(
        bootstrap,
        client_id,
        clients.librdkafka(ClientKind::Admin),
        &settings,
    )
    .await?;
    let producer = clients.librdkafka(ClientKind::Producer).to_vec();
    let consumer = clients.librdkafka(ClientKind::Consumer).to_vec();
    let (bootstrap, client_id) = (bootstrap.to_owned(), client_id.to_owned());
    let topics = (
        settings.config_topic.name.clone(),
        settings.offset_topic.name.clone(),
        settings.status_topic.name.clone(),
    );
    let (log, offsets, status) = tokio::task::spawn_blocking(move || {
        let log = config_log::KafkaConfigLog::open(
            &bootstrap, &topics.0, &producer, &consumer, &client_id, None,
        )?;
        let offsets = offset_topic::KafkaOffsetStore::open(
            &bootstrap, &topics.1, &producer, &consumer, &client_id,
        )?;
        let status = status_topic::KafkaStatusStore::open(
            &bootstrap, &topics.2, &producer, &consumer, &client_id,
        )?;
        Ok::<_, String>((log, offsets, status))
    })
    .await
    .map_err(|e| e.to_string())??;
    let cluster = cluster::Cluster::new(
        std::sync::Arc::new(log),
        std::sync::Arc::new(status),
        settings,
    )?;
    Ok(Opened {
        cluster,
        offsets: std::sync::Arc::new(offsets),
    })
}

/// Create the state topics that do not exist, as Kafka Connect does: compacted, with the
/// configured partitions and replication factor. An existing config topic must have one
/// partition (its records' order is the cluster's order of changes).
async fn ensure_topics(
    bootstrap: &str,
    client_id: &str,
    admin_settings: &[(String, String)],
    settings: &settings::DistributedSettings,
) -> Result<(), String> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::types::RDKafkaErrorCode;
    let mut config = crate::kafka::base_config(bootstrap, &format!("{client_id}-admin"));
    crate::kafka::apply(&mut config, admin_settings);
    let admin: AdminClient<crate::kafka::TracingContext> =
        crate::kafka::clients::create(&config, crate::kafka::TracingContext, "admin client")?;
    let specs = [
        ("config.storage", &settings.config_topic),
        ("offset.storage", &settings.offset_topic),
        ("status.storage", &settings.status_topic),
    ];
    let options = AdminOptions::new().operation_timeout(Some(WRITE_TIMEOUT));
    for (prefix, spec) in specs {
        let partitions = spec.partitions.unwrap_or(-1);
        let replication = spec.replication.map_or(-1, i32::from);
        let topic = NewTopic::new(&spec.name, partitions, TopicReplication::Fixed(replication))
            .set("cleanup.policy", "compact");
        let results = admin
            .create_topics([&topic], &options)
            .await
            .map_err(|e| format!("cannot create topic {} ({prefix}.topic): {e}", spec.name))?;
        for result in results {
            match result {
                Ok(_) => {
                    tracing::info!(topic = %spec.name, partitions, replication, "created the {prefix} topic")
                }
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, RDKafkaErrorCode::InvalidReplicationFactor)) => {
                    return Err(format!(
                        "{prefix}.replication.factor: {replication} is more than the brokers the Kafka cluster has, so topic {} cannot be created; set it to at most the number of brokers (1 for a single broker), or -1 for the broker's default",
                        spec.name
                    ));
                }
                Err((_, code)) => {
                    return Err(format!(
                        "cannot create topic {} ({prefix}.topic): {code}; create it yourself (compacted{}) or give the worker the right to",
                        spec.name,
                        if prefix == "config.storage" {
                            ", one partition"
                        } else {
                            ""
                        }
                    ));
                }
            }
        }
    }
    // The config topic's one partition: checked where it exists already.
    let producer = state_producer(bootstrap, admin_settings, client_id, &[], "metadata client")?;
    let topic = &settings.config_topic.name;
    let partitions = {
        let topic = topic.clone();
        tokio::task::spawn_blocking(move || partitions_of(&producer, &topic))
            .await
            .map_err(|e| e.to_string())??
    };
    if partitions.len() != 1 {
        return Err(format!(
            "config.storage.topic: topic {topic} has {} partitions; the config topic must have exactly one (its order is the order of the cluster's changes). Name a new topic, or delete and recreate it with one partition",
            partitions.len()
        ));
    }
    Ok(())
}
