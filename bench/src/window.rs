//! Steady-state measurement. A run is timed over a window that opens once the system moves
//! records and an untimed warm-up has passed (the JVM's JIT, connection set-up and the first
//! batches fall before it), and every system is read by the same clock, this process's. Over
//! the window: how many records moved, the CPU time of the system's process, and the CPU time
//! of the broker (when it is the local one of `scripts/kafka`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::measure::cpu_seconds;
use crate::systems::Running;

/// The shortest window that still measures something (the probe samples every 100 ms, so its
/// edges are within 10 % of it): a run whose input runs out sooner is an error that says to
/// make the input larger.
pub const MIN_WINDOW: Duration = Duration::from_secs(2);

/// How far a system has got.
pub enum Progress {
    /// Records in `topic` (its partitions' high watermarks): a source's output.
    Topic { topic: String, partitions: i32 },
    /// The `records_done` of a wasm-connect connector's tasks, from its REST API.
    Tasks { connector: String, tasks: u32 },
    /// Records written to a file as lines, from its size (`bytes_per_record` on average).
    FileLines {
        path: PathBuf,
        bytes_per_record: f64,
    },
    /// A count of records the system writes to a file (replaced atomically): the no-op sinks
    /// without a REST API to ask.
    CountFile { path: PathBuf },
}

/// How long to warm up and to measure.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub warm_up: Duration,
    pub window: Duration,
    /// Whether a window cut to under [`MIN_WINDOW`] by the input running out is an error (a
    /// smoke run measures nothing, and accepts it).
    pub strict: bool,
}

/// What one window measured.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub records: u64,
    pub seconds: f64,
    /// CPU seconds of the system's process over the window.
    pub cpu_seconds: Option<f64>,
    /// CPU seconds of the broker over the window.
    pub broker_cpu_seconds: Option<f64>,
}

impl Window {
    /// Records a second.
    pub fn throughput(&self) -> f64 {
        self.records as f64 / self.seconds.max(1e-3)
    }

    /// CPU seconds per million records of `cpu` (a process's share of the window).
    pub fn per_million(&self, cpu: Option<f64>) -> Option<f64> {
        (self.records > 0).then(|| cpu.map(|c| c * 1e6 / self.records as f64))?
    }
}

/// Reads a system's progress.
pub struct Probe {
    progress: Progress,
    reader: BaseConsumer,
    client: reqwest::Client,
    /// The worker's REST address, for [`Progress::Tasks`].
    rest: Option<String>,
}

impl Probe {
    /// A probe of `progress` against the broker at `bootstrap`.
    pub fn new(bootstrap: &str, progress: Progress) -> Result<Self> {
        Ok(Self {
            progress,
            reader: ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("group.id", "wasm-connect-bench-probe")
                .set("enable.auto.commit", "false")
                .create()?,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()?,
            rest: None,
        })
    }

    /// Records moved so far; `None` while the system cannot say yet (a connector not created).
    async fn records(&mut self, running: &mut Running) -> Result<Option<u64>> {
        match &self.progress {
            Progress::Topic { topic, partitions } => {
                let mut sum = 0;
                for partition in 0..*partitions {
                    sum += high_watermark(&self.reader, topic, partition).await?;
                }
                Ok(Some(sum))
            }
            Progress::FileLines {
                path,
                bytes_per_record,
            } => {
                let size = std::fs::metadata(path).map_or(0, |m| m.len());
                Ok(Some((size as f64 / bytes_per_record.max(1.0)) as u64))
            }
            Progress::CountFile { path } => Ok(std::fs::read_to_string(path)
                .ok()
                .and_then(|text| text.trim().parse().ok())),
            Progress::Tasks { connector, tasks } => {
                let url = match &self.rest {
                    Some(url) => url.clone(),
                    None => {
                        let url = running.rest_url(Duration::from_secs(120))?;
                        self.rest = Some(url.clone());
                        url
                    }
                };
                let mut sum = 0;
                for task in 0..*tasks {
                    let response = self
                        .client
                        .get(format!("{url}/connectors/{connector}/tasks/{task}/metrics"))
                        .send()
                        .await;
                    let Ok(response) = response else {
                        return Ok(None);
                    };
                    let metrics: serde_json::Value = response.json().await.unwrap_or_default();
                    if metrics["state"] == "FAILED" {
                        bail!(
                            "task {task} of {connector} failed: {metrics}; see {}",
                            running.log.display()
                        );
                    }
                    match metrics["records_done"].as_u64() {
                        Some(done) => sum += done,
                        None => return Ok(None),
                    }
                }
                Ok(Some(sum))
            }
        }
    }

    async fn sample(&mut self, running: &mut Running, broker: Option<u32>) -> Result<Sample> {
        running.check_alive()?;
        let records = self.records(running).await?.unwrap_or(0);
        Ok(Sample {
            at: Instant::now(),
            records,
            cpu: running.cpu_seconds(),
            broker_cpu: broker.and_then(cpu_seconds),
        })
    }

    /// Wait until `running` moves records, warm up, then measure one window. `input`: how many
    /// records the system can move at most (a pre-written file or topic); the warm-up ends
    /// early once a sixth of it has moved. The window closes
    /// early once 95 % of it has moved, so a system faster than the input was sized for is
    /// measured over a shorter window (reported as such) rather than over an idle tail; one
    /// shorter than [`MIN_WINDOW`] is an error that says to make the input larger.
    pub async fn measure(
        &mut self,
        running: &mut Running,
        broker: Option<u32>,
        timing: Timing,
        input: Option<u64>,
    ) -> Result<Window> {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            if self.sample(running, broker).await?.records > 0 {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "no record moved within 300 s; see {}",
                    running.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The warm-up ends after its time, or once a sixth of a finite input has moved: a fast
        // sink would otherwise spend most of its input warming up.
        let warm_until = Instant::now() + timing.warm_up;
        let warm_records = input.map(|n| n / 6);
        let start = loop {
            self.wait(running, Duration::from_millis(100)).await?;
            let now = self.sample(running, broker).await?;
            if now.at >= warm_until || warm_records.is_some_and(|n| now.records >= n) {
                break now;
            }
        };
        let until = start.at + timing.window;
        let nearly_all = input.map(|n| n / 20 * 19);
        let end = loop {
            self.wait(running, Duration::from_millis(100)).await?;
            let now = self.sample(running, broker).await?;
            if now.at >= until || nearly_all.is_some_and(|n| now.records >= n) {
                break now;
            }
        };
        if timing.strict && end.at.duration_since(start.at) < MIN_WINDOW.min(timing.window) {
            bail!(
                "the input ({} records) ran out {:.1} s into a {:.0} s window: make it larger, or the window shorter; see {}",
                input.unwrap_or(0),
                end.at.duration_since(start.at).as_secs_f64(),
                timing.window.as_secs_f64(),
                running.log.display()
            );
        }
        let diff = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
        Ok(Window {
            records: end.records.saturating_sub(start.records),
            seconds: end.at.duration_since(start.at).as_secs_f64(),
            cpu_seconds: diff(start.cpu, end.cpu),
            broker_cpu_seconds: diff(start.broker_cpu, end.broker_cpu),
        })
    }

    /// Sleep `time`, failing early if the system exits.
    async fn wait(&self, running: &mut Running, time: Duration) -> Result<()> {
        let until = Instant::now() + time;
        while Instant::now() < until {
            running.check_alive()?;
            tokio::time::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100)),
            )
            .await;
        }
        Ok(())
    }
}

struct Sample {
    at: Instant,
    records: u64,
    cpu: Option<f64>,
    broker_cpu: Option<f64>,
}

/// The pid of the local broker `scripts/kafka` runs for `bootstrap`'s port, if it is one.
pub fn broker_pid(bootstrap: &str) -> Option<u32> {
    let port = bootstrap.rsplit(':').next()?;
    let config = format!("/{port}/server.properties");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cmdline.contains("kafka.Kafka") && cmdline.contains(&config)).then_some(pid)
        })
}

/// The high watermark of `topic`/`partition`, asked again for up to 10 s while the broker
/// answers with an error: a topic created moments ago can answer "not leader for partition"
/// until its leadership reaches the broker's metadata.
async fn high_watermark(reader: &BaseConsumer, topic: &str, partition: i32) -> Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match reader.fetch_watermarks(topic, partition, Duration::from_secs(5)) {
            Ok((_, high)) => return Ok(high.max(0) as u64),
            Err(e) if Instant::now() < deadline => {
                eprintln!("watermarks of {topic}/{partition}: {e}; asking again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => {
                return Err(e).with_context(|| format!("watermarks of {topic}/{partition}"));
            }
        }
    }
}
