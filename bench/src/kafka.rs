//! The broker side of the measurements: topics, pre-filled input, how far a topic has been
//! written, and the broker-side timestamps of its first and last records.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::producer::{
    BaseRecord, DefaultProducerContext, Producer, ProducerContext, ThreadedProducer,
};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// The producer settings wasm-connect's worker uses, so the native baseline sends the same way.
pub fn producer_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in wasm_connect::kafka::producer::SETTINGS {
        config.set(*key, *value);
    }
    config
}

/// Queue datagen's records `0..count` on `producer` (waiting while its queue is full) and flush;
/// returns the value bytes, newlines included (the size of a sink's output file).
pub fn send_records<C: ProducerContext<DeliveryOpaque = ()>>(
    producer: &ThreadedProducer<C>,
    topic: &str,
    count: u64,
    value_size: usize,
) -> Result<u64> {
    let mut bytes = 0;
    for id in 0..count {
        let (key, value) = record(id, value_size);
        bytes += value.len() as u64 + 1;
        let mut rec = BaseRecord::to(topic).key(&key).payload(&value);
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((_, back)) => {
                    rec = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(300))?;
    Ok(bytes)
}

/// Create `topic` with `partitions` partitions. Its records carry the broker's append time
/// (`LogAppendTime`), so the timestamps the workloads read are when the broker wrote each record,
/// whatever the producer set.
pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    create_topic_stamped(bootstrap, topic, partitions, "LogAppendTime").await
}

/// Create `topic` with `partitions` partitions, its records carrying the producer's timestamps
/// (`CreateTime`): when each record was made, whenever the broker wrote it.
pub async fn create_topic_create_time(bootstrap: &str, topic: &str, partitions: i32) -> Result<()> {
    create_topic_stamped(bootstrap, topic, partitions, "CreateTime").await
}

async fn create_topic_stamped(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    timestamp_type: &str,
) -> Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let results = admin
        .create_topics(
            [
                &NewTopic::new(topic, partitions, TopicReplication::Fixed(1))
                    .set("message.timestamp.type", timestamp_type),
            ],
            &AdminOptions::new(),
        )
        .await?;
    for r in results {
        r.map_err(|(t, e)| anyhow::anyhow!("cannot create topic {t}: {e}"))?;
    }
    created().push(topic.to_owned());
    Ok(())
}

/// The topics `create_topic` made in this process.
fn created() -> std::sync::MutexGuard<'static, Vec<String>> {
    static CREATED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    CREATED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Delete `topic` now (and forget it for [`delete_created_topics`]).
pub async fn delete_topic(bootstrap: &str, topic: &str) -> Result<()> {
    created().retain(|t| t != topic);
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    for r in admin.delete_topics(&[topic], &AdminOptions::new()).await? {
        r.map_err(|(t, e)| anyhow::anyhow!("cannot delete topic {t}: {e}"))?;
    }
    Ok(())
}

/// Delete every topic `create_topic` made in this process.
pub async fn delete_created_topics(bootstrap: &str) -> Result<()> {
    let topics = std::mem::take(&mut *created());
    if topics.is_empty() {
        return Ok(());
    }
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    for r in admin.delete_topics(&names, &AdminOptions::new()).await? {
        r.map_err(|(t, e)| anyhow::anyhow!("cannot delete topic {t}: {e}"))?;
    }
    Ok(())
}

/// The record datagen would write for id `id` (key, value), so every system moves the same
/// bytes.
pub fn record(id: u64, value_size: usize) -> (String, String) {
    (
        id.to_string(),
        datagen::value_json(id, 0, id, 0, value_size),
    )
}

/// Write `count` records to `topic` with the worker's producer settings, waiting for every
/// acknowledgement; returns the value bytes written.
pub fn fill(bootstrap: &str, topic: &str, count: u64, value_size: usize) -> Result<u64> {
    let producer: ThreadedProducer<DefaultProducerContext> = producer_config(bootstrap).create()?;
    send_records(&producer, topic, count, value_size)
}

fn reader(bootstrap: &str) -> Result<BaseConsumer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "wasm-connect-bench-reader")
        .set("enable.auto.commit", "false")
        .create()?)
}

/// A reader of partition 0 of `topic`, from `offset`.
fn reader_at(bootstrap: &str, topic: &str, offset: i64) -> Result<BaseConsumer> {
    let consumer = reader(bootstrap)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset))?;
    consumer.assign(&tpl)?;
    Ok(consumer)
}

/// Wait until `topic` holds `count` records (or `timeout` passes).
pub fn wait_for_records(bootstrap: &str, topic: &str, count: u64, timeout: Duration) -> Result<()> {
    let consumer = reader(bootstrap)?;
    let deadline = Instant::now() + timeout;
    loop {
        let (_, high) = consumer
            .fetch_watermarks(topic, 0, Duration::from_secs(5))
            .unwrap_or((0, 0));
        if high as u64 >= count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{topic} holds {high} of {count} records after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The timestamps (ms since the epoch) of the records at `first` and `last` of `topic`, and
/// the value size of the last.
pub fn timestamps(
    bootstrap: &str,
    topic: &str,
    first: i64,
    last: i64,
) -> Result<(i64, i64, usize)> {
    let consumer = reader(bootstrap)?;
    let at = |offset: i64| -> Result<(i64, usize)> {
        read_at(&consumer, topic, offset, |message| {
            let timestamp = message
                .timestamp()
                .to_millis()
                .context("record without a timestamp")?;
            Ok((timestamp, message.payload().map_or(0, <[u8]>::len)))
        })
    };
    let (first, _) = at(first)?;
    let (last, size) = at(last)?;
    Ok((first, last, size))
}

/// The high watermark of partition 0 of `topic`.
pub fn high_watermark(bootstrap: &str, topic: &str) -> Result<i64> {
    let (_, high) = reader(bootstrap)?
        .fetch_watermarks(topic, 0, Duration::from_secs(5))
        .with_context(|| format!("cannot read the watermarks of {topic}"))?;
    Ok(high)
}

/// The value of the record at `offset` of partition 0 of `topic` (empty for a null value).
pub fn value_at(bootstrap: &str, topic: &str, offset: i64) -> Result<Vec<u8>> {
    read_at(&reader(bootstrap)?, topic, offset, |message| {
        Ok(message.payload().unwrap_or_default().to_vec())
    })
}

/// `read` of the record at `offset` of partition 0 of `topic`, waiting up to 30 s for it.
fn read_at<T>(
    consumer: &BaseConsumer,
    topic: &str,
    offset: i64,
    read: impl FnOnce(&BorrowedMessage<'_>) -> Result<T>,
) -> Result<T> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset))?;
    // (Reassigning moves the one consumer of `timestamps` from the first offset to the last.)
    consumer.assign(&tpl)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            return read(&message?);
        }
    }
    bail!("no record at offset {offset} of {topic}")
}

/// The timestamp of the first record of partition 0 of `topic`, from offset `from` on, whose
/// timestamp is at least `since` (ms since the epoch); waits up to `timeout` for it.
pub fn first_since(
    bootstrap: &str,
    topic: &str,
    from: i64,
    since: i64,
    timeout: Duration,
) -> Result<i64> {
    let consumer = reader_at(bootstrap, topic, from)?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let timestamp = message?
                .timestamp()
                .to_millis()
                .context("record without a timestamp")?;
            if timestamp >= since {
                return Ok(timestamp);
            }
        }
    }
    bail!("no record of {topic} from offset {from} stamped at or after {since} within {timeout:?}")
}

/// For each of `tasks`, the append time of the first record of partition 0 of `topic`, from
/// offset `from` on, appended at or after `since` (ms since the epoch), whose value names that
/// task (`"task":i`, as datagen's values and the benchmark's Java source with `tag.task` do);
/// waits up to `timeout` for all of them.
pub fn first_per_task(
    bootstrap: &str,
    topic: &str,
    from: i64,
    since: i64,
    tasks: &[u32],
    timeout: Duration,
) -> Result<std::collections::BTreeMap<u32, i64>> {
    let consumer = reader_at(bootstrap, topic, from)?;
    let mut found = std::collections::BTreeMap::new();
    let deadline = Instant::now() + timeout;
    while found.len() < tasks.len() {
        if Instant::now() > deadline {
            let missing: Vec<&u32> = tasks.iter().filter(|t| !found.contains_key(*t)).collect();
            bail!("no record of tasks {missing:?} in {topic} since {since} within {timeout:?}");
        }
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = message?;
        let appended = message
            .timestamp()
            .to_millis()
            .context("record without a timestamp")?;
        if appended < since {
            continue;
        }
        if let Some(task) = task_of(message.payload().unwrap_or_default())
            && tasks.contains(&task)
        {
            found.entry(task).or_insert(appended);
        }
    }
    Ok(found)
}

/// The task a value names (`"task":i`), if it names one.
fn task_of(value: &[u8]) -> Option<u32> {
    const TAG: &[u8] = b"\"task\":";
    let at = value.windows(TAG.len()).position(|w| w == TAG)? + TAG.len();
    let digits = value[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    std::str::from_utf8(&value[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

/// For every record of partition 0 of `topic` at offsets `from..to`, whose value starts with
/// the time (ms since the epoch) it was due: the broker's append time minus that, in ms.
pub fn stamped_latencies(bootstrap: &str, topic: &str, from: i64, to: i64) -> Result<Vec<i64>> {
    let consumer = reader_at(bootstrap, topic, from)?;
    let mut latencies = Vec::with_capacity((to - from).max(0) as usize);
    let deadline = Instant::now() + Duration::from_secs(120);
    while latencies.len() < (to - from).max(0) as usize {
        if Instant::now() > deadline {
            bail!(
                "read {} of {} records of {topic}",
                latencies.len(),
                to - from
            );
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message?;
        if message.offset() >= to {
            break;
        }
        let appended = message
            .timestamp()
            .to_millis()
            .context("record without a timestamp")?;
        let value = message.payload().unwrap_or_default();
        let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
        let due: i64 = std::str::from_utf8(&value[..digits])
            .ok()
            .and_then(|d| d.parse().ok())
            .with_context(|| {
                format!(
                    "record {} of {topic} does not start with a time",
                    message.offset()
                )
            })?;
        latencies.push(appended - due);
    }
    Ok(latencies)
}

#[cfg(test)]
mod tests {
    use super::task_of;

    #[test]
    fn values_name_their_task() {
        assert_eq!(
            task_of(br#"{"id":7,"task":12,"seq":3,"payload":"x"}"#),
            Some(12)
        );
        assert_eq!(task_of(br#"{"task":0,"seq":9}"#), Some(0));
        assert_eq!(task_of(b"1700000000000     "), None);
        assert_eq!(task_of(br#"{"task":"x"}"#), None);
    }
}
