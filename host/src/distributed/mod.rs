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

pub mod assignor;
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
