//! The native baselines, run as child processes of the harness (`native-source`,
//! `native-sink`): what rdkafka alone does with the same records and the same producer
//! settings as the worker. They are the ceiling wasm-connect is measured against.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rdkafka::client::ClientContext;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, ProducerContext, ThreadedProducer};

use crate::kafka::producer_config;
use rdkafka::producer::Producer as _;

struct Acks(Arc<AtomicU64>);

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if result.is_ok() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Send `count` datagen records to `topic` (0: without end, until killed) from `threads`
/// threads sharing one producer, as the worker's tasks share one (thread `i` of `n` makes
/// records `i`, `i + n`, ..., as datagen's tasks do); returns once all are acknowledged. With
/// `warm_up` (an existing topic), first wait until a record sent there is acknowledged.
/// `compression` is the producer's `compression.type`.
pub fn source(
    bootstrap: &str,
    topic: &str,
    count: u64,
    value_size: usize,
    warm_up: Option<&str>,
    threads: u32,
    compression: &str,
) -> Result<()> {
    let acked = Arc::new(AtomicU64::new(0));
    let producer: ThreadedProducer<Acks> = producer_config(bootstrap)
        .set("compression.type", compression)
        .create_with_context(Acks(Arc::clone(&acked)))?;
    if let Some(warm_up) = warm_up {
        warm(&producer, warm_up, &acked)?;
    }
    let threads = u64::from(threads.max(1));
    // Made before anything is sent, so the baseline's cost is librdkafka's alone: a ceiling no
    // plugin's generator can beat, whatever it does per record.
    let pool: Vec<(String, String)> = (0..POOL)
        .map(|id| crate::kafka::record(id, value_size))
        .collect();
    let pool = &pool;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|index| {
                let producer = &producer;
                scope.spawn(move || {
                    send_batched(
                        producer,
                        topic,
                        Ids {
                            index,
                            threads,
                            count,
                        },
                        pool,
                    )
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| bail!("a sending thread panicked"))
        })
    })?;
    producer.flush(Duration::from_secs(300))?;
    let acked = acked.load(Ordering::Relaxed);
    if acked != count {
        bail!("{acked} of {count} records acknowledged");
    }
    report_peak();
    Ok(())
}

/// The record ids one sending thread makes: `index`, `index + threads`, ... below `count` (no
/// end when `count` is 0).
#[derive(Clone, Copy)]
struct Ids {
    index: u64,
    threads: u64,
    count: u64,
}

impl Ids {
    /// The next batch of at most `BATCH` ids from `from` (an id of this thread).
    fn batch(self, from: u64) -> impl Iterator<Item = u64> {
        let end = if self.count == 0 {
            u64::MAX
        } else {
            self.count
        };
        (0..BATCH)
            .map(move |i| from + i * self.threads)
            .take_while(move |id| *id < end)
    }
}

/// Send one record to `topic` and wait for its acknowledgement: then the client knows the
/// cluster and has its producer id, as the worker's long-lived producer has by the time a task
/// sends. Without it librdkafka held every record for about 500 ms (its idempotent producer id
/// comes on a 500 ms retry timer when no broker is connected yet), by when the whole run was
/// queued: the broker's append times then measured only the sending of a ready backlog, not
/// the records' generation and queueing.
fn warm(producer: &ThreadedProducer<Acks>, topic: &str, acked: &AtomicU64) -> Result<()> {
    producer
        .send(BaseRecord::<(), str>::to(topic).payload("warm-up"))
        .map_err(|(e, _)| anyhow::anyhow!("cannot send the warm-up record to {topic}: {e}"))?;
    producer.flush(Duration::from_secs(30))?;
    if acked.swap(0, Ordering::Relaxed) != 1 {
        bail!("the warm-up record to {topic} was not acknowledged");
    }
    Ok(())
}

/// Records handed to librdkafka per call, as many as the worker polls from a plugin at a time.
const BATCH: u64 = 2000;

/// Records in flight per sending thread before it waits: the worker's default
/// `source.max.in.flight.records` per task.
const IN_FLIGHT_PER_THREAD: u64 = 20_000;

/// Records made before the run and sent over and over: record `id` is datagen's record
/// `id % POOL` (the same bytes for every id below it).
const POOL: u64 = 100_000;

/// Queue the records `ids` (from `pool`) `BATCH` at a time with librdkafka's batch call
/// (`rd_kafka_produce_batch`), as the worker does for records without headers or timestamps.
/// (With one `send` per record instead the baseline measured no faster: this is the stricter
/// ceiling.)
fn send_batched(
    producer: &ThreadedProducer<Acks>,
    topic: &str,
    ids: Ids,
    pool: &[(String, String)],
) -> Result<()> {
    use rdkafka::bindings as rdsys;
    let name = std::ffi::CString::new(topic)?;
    // SAFETY: the client outlives the handle, which is destroyed below.
    let rkt = unsafe {
        rdsys::rd_kafka_topic_new(
            producer.client().native_ptr(),
            name.as_ptr(),
            std::ptr::null_mut(),
        )
    };
    if rkt.is_null() {
        bail!("no topic handle for {topic}");
    }
    let mut start = ids.index;
    loop {
        // As the worker bounds each task's records in flight (`source.max.in.flight.records`):
        // an unbounded backlog fills librdkafka's queue, and senders then spin on a full one.
        while producer.in_flight_count() as u64 > IN_FLIGHT_PER_THREAD * ids.threads {
            std::thread::sleep(Duration::from_micros(200));
        }
        let records: Vec<&(String, String)> = ids
            .batch(start)
            .map(|id| &pool[(id % POOL) as usize])
            .collect();
        if records.is_empty() {
            break;
        }
        let mut messages: Vec<rdsys::rd_kafka_message_t> = records
            .iter()
            .map(|(key, value)| rdsys::rd_kafka_message_t {
                err: rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
                rkt: std::ptr::null_mut(),
                partition: -1,
                payload: value.as_ptr().cast_mut().cast(),
                len: value.len(),
                key: key.as_ptr().cast_mut().cast(),
                key_len: key.len(),
                offset: 0,
                _private: std::ptr::null_mut(),
            })
            .collect();
        let mut from = 0;
        while from < messages.len() {
            let rest = &mut messages[from..];
            // SAFETY: the messages point into `records`, alive across the call; librdkafka
            // copies them and writes only `err`.
            unsafe {
                rdsys::rd_kafka_produce_batch(
                    rkt,
                    -1,
                    rdsys::RD_KAFKA_MSG_F_COPY | rdsys::RD_KAFKA_MSG_F_PARTITION,
                    rest.as_mut_ptr(),
                    rest.len() as i32,
                )
            };
            match rest
                .iter()
                .position(|m| m.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR)
            {
                None => from = messages.len(),
                Some(i)
                    if rest[i].err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__QUEUE_FULL =>
                {
                    from += i;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Some(i) => bail!(
                    "record {} refused: {:?}",
                    start + (from + i) as u64 * ids.threads,
                    rest[i].err
                ),
            }
        }
        start += records.len() as u64 * ids.threads;
    }
    // SAFETY: created above, destroyed once, before the client.
    unsafe { rdsys::rd_kafka_topic_destroy(rkt) };
    Ok(())
}

/// Consume `topic` as the worker's sink tasks do (its consumer: cooperative group
/// membership, each partition's queue split off and taken `BATCH` messages at a time), until
/// `count` records (0: until killed). `drop`: count them, writing the count to `file` every
/// 20 ms (replaced atomically); else append each value as a line to `file` through a 64 KiB
/// buffer. `threads` consumers in one group, each on a thread of its own, as the worker runs
/// one consumer per sink task (dropping only: one file has one writer).
pub fn sink(
    bootstrap: &str,
    topic: &str,
    count: u64,
    file: &str,
    drop: bool,
    threads: usize,
) -> Result<()> {
    if threads == 0 {
        bail!("native-sink: THREADS must be at least 1");
    }
    if threads > 1 && !drop {
        bail!("native-sink: more than one thread only in drop mode");
    }
    let group = format!("native-{topic}-{}", std::process::id());
    let total = Progress {
        records: AtomicU64::new(0),
        written: std::sync::Mutex::new(std::time::Instant::now()),
        path: drop.then(|| file.into()),
    };
    std::thread::scope(|scope| {
        let consumers: Vec<_> = (0..threads)
            .map(|i| {
                let (group, total) = (&group, &total);
                scope.spawn(move || consume(bootstrap, topic, group, i, count, file, total))
            })
            .collect();
        consumers.into_iter().try_for_each(|c| {
            c.join()
                .map_err(|_| anyhow::anyhow!("a consumer thread panicked"))?
        })
    })?;
    report_peak();
    Ok(())
}

/// One consumer of [`sink`], member `index` of `group`.
fn consume(
    bootstrap: &str,
    topic: &str,
    group: &str,
    index: usize,
    count: u64,
    file: &str,
    total: &Progress,
) -> Result<()> {
    use futures::FutureExt as _;
    use wasm_connect::kafka::consumer::{self, Subscription};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // rdkafka's stream consumer lives on a tokio runtime.
    let _runtime = runtime.enter();
    let (consumer, _events) = consumer::create(
        bootstrap,
        "native-sink",
        group,
        &format!("native-sink-{index}"),
        &Subscription::Topics(vec![topic.to_owned()]),
        &[],
        None,
    )
    .map_err(anyhow::Error::msg)?;
    // The worker holds a revoked partition until its task has flushed and committed it; this
    // consumer commits nothing, so it gives revoked partitions up at once. (Holding them with
    // no one to release them stalled the group's rebalance when the second consumer joined,
    // and a 2-consumer run counted nothing.)
    consumer.stop_holding_revocations();
    let mut sink = Output::new(file, total.path.is_some())?;
    runtime.block_on(async {
        while count == 0 || total.records.load(Ordering::Relaxed) < count {
            // Counted after every turn, not only after a batch from the split queues: while a
            // rebalance moves partitions, messages can arrive through the consumer queue alone.
            sink.batch_done(total)?;
            // The consumer queue first: rebalances are served there (and messages of a
            // partition whose queue was not split come there), as in the worker's loop.
            while let Some(message) = consumer.recv().now_or_never() {
                match message {
                    Ok(m) => sink.add(m.payload().unwrap_or_default())?,
                    Err(e) => eprintln!("consumer: {e}"),
                }
            }
            let taken = consumer.fetched().take(BATCH as usize);
            if taken.is_empty() {
                drop_taken(taken);
                tokio::select! {
                    () = consumer.fetched().ready() => {}
                    message = consumer.recv() => match message {
                        Ok(m) => sink.add(m.payload().unwrap_or_default())?,
                        Err(e) => eprintln!("consumer: {e}"),
                    },
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
                continue;
            }
            for message in taken.iter() {
                match message {
                    Ok(m) => sink.add(m.payload().unwrap_or_default())?,
                    Err(e) => eprintln!("consumer: {e}"),
                }
            }
        }
        anyhow::Ok(())
    })?;
    sink.finish()
}

/// Ends a borrow of the consumer's queues before it is waited on again.
fn drop_taken(_: wasm_connect::kafka::fetch_queues::Taken<'_>) {}

/// What the consumers of [`sink`] share: the records handed over so far and, in drop mode, the
/// count file and when it was last written.
struct Progress {
    records: AtomicU64,
    written: std::sync::Mutex<std::time::Instant>,
    path: Option<std::path::PathBuf>,
}

/// Where one native consumer puts records.
struct Output {
    /// Records since the last batch was counted in [`Progress`].
    records: u64,
    file: Option<BufWriter<File>>,
}

impl Output {
    fn new(file: &str, drop: bool) -> Result<Self> {
        Ok(Self {
            records: 0,
            file: if drop {
                None
            } else {
                Some(BufWriter::with_capacity(
                    64 * 1024,
                    File::create(file).context("output file")?,
                ))
            },
        })
    }

    fn add(&mut self, value: &[u8]) -> Result<()> {
        self.records += 1;
        if let Some(out) = &mut self.file {
            out.write_all(value)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// After each batch: the records counted in `total`, and in drop mode the count written
    /// for the harness, every 20 ms (by whichever consumer finds it due).
    fn batch_done(&mut self, total: &Progress) -> Result<()> {
        let records = total.records.fetch_add(self.records, Ordering::Relaxed) + self.records;
        self.records = 0;
        if let Some(path) = &total.path
            && let Ok(mut written) = total.written.try_lock()
            && written.elapsed() >= Duration::from_millis(20)
        {
            *written = std::time::Instant::now();
            let temporary = path.with_extension("tmp");
            std::fs::write(&temporary, records.to_string())?;
            std::fs::rename(&temporary, path)?;
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        if let Some(out) = self.file {
            out.into_inner()
                .map_err(|e| anyhow::anyhow!("flush: {e}"))?
                .sync_data()?;
        }
        Ok(())
    }
}

/// Print this process's peak memory for the harness (it cannot read it after the exit).
fn report_peak() {
    if let Some(kib) = crate::measure::status_kib(std::process::id(), "VmHWM:") {
        println!("peak_rss_kib={kib}");
    }
}
