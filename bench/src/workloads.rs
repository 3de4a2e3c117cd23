//! The workloads, each run on every system it applies to, several times:
//!
//! - source throughput (1 and 2 tasks): records written to a topic; throughput from the broker's
//!   append timestamps of the first and last record, so start-up does not count;
//! - sink throughput: a pre-filled topic copied to a file; from the first byte in the file to
//!   90 % of its bytes;
//! - start-up: process start to the broker's append time of the first record, warm (compile
//!   cache filled) and cold (empty data directory);
//! - peak memory (`VmHWM`) of every run above;
//! - density: 10, 100, 1000 and 10 000 low-rate datagen tasks in one worker;
//! - the ceiling: source (1 task) and sink through wasm-connect with plugins that do no work,
//!   which no real plugin can beat on this host and contract version.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::Options;
use crate::kafka;
use crate::measure::now_ms;
use crate::systems::{Env, Job, Running, System};

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub workload: String,
    pub system: &'static str,
    pub rep: usize,
    pub records: u64,
    /// Records a second.
    pub throughput: Option<f64>,
    /// Process start to the first record acknowledged by the broker.
    pub startup_ms: Option<f64>,
    pub peak_rss_kib: Option<u64>,
    /// Value size of a record as it landed in Kafka.
    pub value_bytes: Option<usize>,
}

/// Records a second each density task is configured to write.
pub const DENSITY_RATE_PER_TASK: u32 = 1;

/// Each density task's memory limit (`sandbox.memory.max.bytes`): room for datagen's connector
/// instance to split 10 000 tasks; the worker's memory budget is set to the sum over tasks.
pub const DENSITY_MEMORY_LIMIT: u64 = 16 << 20;

/// One density run.
#[derive(Debug, Clone, Serialize)]
pub struct DensityRun {
    pub tasks: u32,
    pub seconds: f64,
    pub records: u64,
    pub throughput: f64,
    pub rss_kib: Option<u64>,
    pub peak_rss_kib: Option<u64>,
    /// Tasks that wrote at least one record during the measurement.
    pub tasks_with_progress: u32,
    pub min_task_records: u64,
}

impl DensityRun {
    /// Whether every task kept up: none below half the records its rate asks for over the
    /// window. A task that made some progress can still be starving.
    pub fn none_starved(&self) -> bool {
        self.tasks_with_progress == self.tasks
            && self.min_task_records as f64 >= 0.5 * self.seconds * f64::from(DENSITY_RATE_PER_TASK)
    }
}

/// One boundary micro-benchmark result (from criterion).
#[derive(Debug, Clone, Serialize)]
pub struct BoundaryPoint {
    pub direction: String,
    pub record_size: String,
    pub batch: u32,
    pub ns_per_record: f64,
    pub records_per_s: f64,
}

/// Everything one run of the suite measured.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub runs: Vec<Run>,
    pub density: Vec<DensityRun>,
    pub boundary: Vec<BoundaryPoint>,
    pub seconds: f64,
}

struct Suite {
    env: Env,
    work: tempfile::TempDir,
    /// A filled compile cache, copied into each warm run's data directory.
    warm_cache: std::path::PathBuf,
    systems: Vec<System>,
    counter: u64,
}

const VALUE_SIZE: usize = 100;

/// Run every workload, then delete the topics the run created.
pub async fn run_all(options: &Options, repo: &Path) -> Result<Results> {
    let outcome = run_workloads(options, repo).await;
    // A run writes several GB of topics; repeated runs must not fill the broker's disk.
    if let Err(e) = kafka::delete_created_topics(&options.bootstrap).await {
        eprintln!("warning: cannot delete the run's topics: {e:#}");
    }
    outcome
}

async fn run_workloads(options: &Options, repo: &Path) -> Result<Results> {
    let started = Instant::now();
    // Absolute paths: each system runs in its own directory.
    let worker = options.worker.canonicalize().with_context(|| {
        format!(
            "no wasm-connect binary at {} (build it, or pass --worker)",
            options.worker.display()
        )
    })?;
    let connect_libs = match &options.connect_libs {
        Some(libs) => Some(
            libs.canonicalize()
                .with_context(|| format!("no Kafka Connect jars at {}", libs.display()))?,
        ),
        None => None,
    };
    let env = Env {
        bootstrap: options.bootstrap.clone(),
        repo: repo.to_owned(),
        worker,
        connect_libs,
    };
    let mut systems = vec![System::WasmConnect, System::Native];
    if env.connect_libs.is_some() {
        systems.push(System::KafkaConnect);
    }
    let mut work = tempfile::tempdir()?;
    if std::env::var_os("WASM_CONNECT_BENCH_KEEP").is_some() {
        work.disable_cleanup(true);
        eprintln!("keeping the run directories in {}", work.path().display());
    }
    let mut suite = Suite {
        env,
        warm_cache: work.path().join("warm-cache"),
        work,
        systems,
        counter: 0,
    };
    let mut runs = Vec::new();
    // A million records a run: at 300 000, a run of the worker or the native producer lasted
    // under half a second, and linger, the first batches and the broker's pauses made its
    // spread larger than the differences measured (BENCHMARKS.md §000). The sink's start-up
    // (group join, first fetches) is likewise a small part of a million records' span.
    let (count, reps) = if options.smoke {
        (2_000, 1)
    } else {
        (1_000_000, options.reps)
    };
    let sink_count = count;

    // Cold start first: it also fills the compile cache the warm runs start from.
    let startup_count = if options.smoke { 10 } else { 100 };
    // Every group needs the filled compile cache for its warm starts.
    let startup_reps = if options.runs("startup") { reps } else { 1 };
    for rep in 0..startup_reps {
        runs.push(
            suite
                .source(
                    System::WasmConnect,
                    "startup-cold",
                    1,
                    startup_count,
                    rep,
                    false,
                )
                .await?,
        );
    }
    let warm_reps = if options.runs("startup") { reps } else { 0 };
    for rep in 0..warm_reps {
        for &system in &suite.systems.clone() {
            if system != System::Native {
                runs.push(
                    suite
                        .source(system, "startup-warm", 1, startup_count, rep, true)
                        .await?,
                );
            }
        }
    }
    // The broker is a JVM started for this run: its first few million records are slower while
    // its JIT compiles the produce path. Every system's source runs got faster rep by rep, and
    // the first system of each rep paid most (BENCHMARKS.md §00000000); so the broker takes
    // untimed records first, and the systems take turns at going first.
    if options.runs("source") || options.runs("sink") {
        let topic = suite.topic("warm-up");
        kafka::create_topic(&suite.env.bootstrap, &topic).await?;
        kafka::fill(&suite.env.bootstrap, &topic, count * 3, VALUE_SIZE)?;
    }
    let source_tasks: &[u32] = if options.runs("source") { &[1, 2] } else { &[] };
    for &tasks in source_tasks {
        let mut systems = suite.systems.clone();
        if tasks == 1 {
            systems.push(System::NoOpPlugin);
        }
        for rep in 0..reps {
            let mut order = systems.clone();
            let first = rep % order.len();
            order.rotate_left(first);
            for &system in &order {
                let workload = format!("source-{tasks}-task");
                runs.push(
                    suite
                        .source(system, &workload, tasks, count, rep, true)
                        .await?,
                );
            }
        }
    }
    if options.runs("sink") {
        let topic = suite.topic("sink-input");
        kafka::create_topic(&suite.env.bootstrap, &topic).await?;
        let bytes = kafka::fill(&suite.env.bootstrap, &topic, sink_count, VALUE_SIZE)?;
        for rep in 0..reps {
            for &system in &suite.systems.clone() {
                runs.push(suite.sink(system, &topic, sink_count, bytes, rep)?);
            }
            runs.push(suite.sink_no_op(&topic, sink_count, rep).await?);
        }
    }
    let mut density = Vec::new();
    let (sizes, seconds): (&[u32], u64) = if !options.runs("density") {
        (&[], 0)
    } else if options.smoke {
        (&[10], 3)
    } else {
        (&[10, 100, 1000, 10_000], 10)
    };
    for &tasks in sizes {
        density.push(suite.density(tasks, Duration::from_secs(seconds)).await?);
    }
    let boundary = options
        .criterion
        .as_deref()
        .map(crate::report::read_criterion)
        .unwrap_or_default();
    Ok(Results {
        runs,
        density,
        boundary,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl Suite {
    fn topic(&mut self, what: &str) -> String {
        self.counter += 1;
        format!("bench-{what}-{}-{}", now_ms(), self.counter)
    }

    fn run_dir(&mut self, what: &str) -> std::path::PathBuf {
        self.counter += 1;
        self.work.path().join(format!("{what}-{}", self.counter))
    }

    /// A fresh data directory, with the filled compile cache when `warm`.
    fn data_dir(&mut self, warm: bool) -> Result<std::path::PathBuf> {
        let data = self.run_dir("data");
        std::fs::create_dir_all(&data)?;
        if warm && self.warm_cache.exists() {
            copy_dir(&self.warm_cache, &data.join("compiled"))?;
        }
        Ok(data)
    }

    async fn source(
        &mut self,
        system: System,
        workload: &str,
        tasks: u32,
        count: u64,
        rep: usize,
        warm: bool,
    ) -> Result<Run> {
        let topic = self.topic(workload);
        kafka::create_topic(&self.env.bootstrap, &topic).await?;
        let dir = self.run_dir(workload);
        let data = self.data_dir(warm)?;
        let job = Job::Source {
            topic: &topic,
            count,
            tasks,
            value_size: VALUE_SIZE,
        };
        self.env.prepare(system, &job).await?;
        settle();
        let mut running = self.env.start(system, &job, &dir, &data)?;
        let done = wait_for(&mut running, || {
            kafka::wait_for_records(
                &self.env.bootstrap,
                &topic,
                count,
                Duration::from_millis(50),
            )
            .is_ok()
        });
        let mut peak = running.peak_rss_kib();
        let started_ms = running.started_ms;
        let log = running.log.clone();
        finish(system, running, done)?;
        if system == System::Native {
            peak = native_peak(&log);
        }
        if system == System::WasmConnect && !self.warm_cache.exists() {
            copy_dir(&data.join("compiled"), &self.warm_cache)?;
        }
        let (first, last, value_bytes) =
            kafka::timestamps(&self.env.bootstrap, &topic, 0, count as i64 - 1)?;
        let span = ((last - first) as f64 / 1000.0).max(0.001);
        eprintln!(
            "{workload} {} rep {rep}: {:.0} records/s, first record after {} ms",
            system.name(),
            (count - 1) as f64 / span,
            first - started_ms
        );
        Ok(Run {
            workload: workload.to_owned(),
            system: system.name(),
            rep,
            records: count,
            throughput: (count > 1 && !workload.starts_with("startup"))
                .then(|| (count - 1) as f64 / span),
            startup_ms: Some((first - started_ms) as f64),
            peak_rss_kib: peak,
            value_bytes: Some(value_bytes),
        })
    }

    fn sink(
        &mut self,
        system: System,
        topic: &str,
        count: u64,
        bytes: u64,
        rep: usize,
    ) -> Result<Run> {
        let dir = self.run_dir("sink");
        let data = self.data_dir(true)?;
        let out = dir.join("out");
        std::fs::create_dir_all(&out)?;
        let file = out.join("sink.txt");
        let job = Job::Sink {
            topic,
            count,
            file: &file,
        };
        settle();
        let mut running = self.env.start(system, &job, &dir, &data)?;
        // Up to 90 % of the bytes: `file-sink` writes its last buffer at the worker's next flush
        // (every second), the native consumer when it exits; that wait is not throughput.
        let measured_bytes = bytes / 10 * 9;
        let measured_records = count as f64 * 0.9;
        let mut first_byte = None;
        let done = wait_for(&mut running, || {
            let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            if size > 0 && first_byte.is_none() {
                first_byte = Some(Instant::now());
            }
            size >= measured_bytes
        });
        let finished = Instant::now();
        let mut peak = running.peak_rss_kib();
        let log = running.log.clone();
        finish(system, running, done)?;
        if system == System::Native {
            peak = native_peak(&log);
        }
        let span = first_byte
            .map(|t| finished.duration_since(t).as_secs_f64())
            .unwrap_or(0.0)
            .max(0.001);
        eprintln!(
            "sink {} rep {rep}: {:.0} records/s",
            system.name(),
            measured_records / span
        );
        Ok(Run {
            workload: "sink".into(),
            system: system.name(),
            rep,
            records: count,
            throughput: Some(measured_records / span),
            startup_ms: None,
            peak_rss_kib: peak,
            value_bytes: Some(VALUE_SIZE),
        })
    }

    /// The sink ceiling: `bench-sink` writes nothing, so throughput comes from the task's
    /// `records_done` (counted when `put` returns), from its first change to 90 % of `count`,
    /// as the file-based runs measure. (When one batch already holds 90 %, as in a smoke run,
    /// from the last sample before it.)
    async fn sink_no_op(&mut self, topic: &str, count: u64, rep: usize) -> Result<Run> {
        let dir = self.run_dir("sink");
        let data = self.data_dir(true)?;
        let file = dir.join("unused");
        let job = Job::Sink {
            topic,
            count,
            file: &file,
        };
        settle();
        let mut running = self.env.start(System::NoOpPlugin, &job, &dir, &data)?;
        let outcome = self.count_sink_records(&mut running, &dir, count).await;
        let peak = running.peak_rss_kib();
        running.kill();
        let (first, last) = outcome?;
        let throughput =
            (last.1 - first.1) as f64 / last.0.duration_since(first.0).as_secs_f64().max(0.001);
        eprintln!(
            "sink {} rep {rep}: {throughput:.0} records/s",
            System::NoOpPlugin.name()
        );
        Ok(Run {
            workload: "sink".into(),
            system: System::NoOpPlugin.name(),
            rep,
            records: count,
            throughput: Some(throughput),
            startup_ms: None,
            peak_rss_kib: peak,
            value_bytes: Some(VALUE_SIZE),
        })
    }

    /// (time, records done) when the count first moved (or when it was last seen at 0, if that
    /// move was already the end) and when it reached 90 % of `count`. Polled every 10 ms: the
    /// requests cost the measured worker well under 1 % of a core.
    async fn count_sink_records(
        &self,
        running: &mut Running,
        dir: &Path,
        count: u64,
    ) -> Result<((Instant, u64), (Instant, u64))> {
        let url = format!(
            "{}/connectors/{}/tasks/0/metrics",
            running.rest_url(Duration::from_secs(120))?,
            crate::systems::sink_name(dir)
        );
        // Before the connector exists, nothing is done.
        let mut before = (Instant::now(), 0);
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()?;
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut first = None;
        while Instant::now() < deadline {
            running.check_alive()?;
            // Not found until the connector is created: counts as nothing done yet.
            let metrics: serde_json::Value = match client.get(&url).send().await {
                Ok(response) => response.json().await.unwrap_or_default(),
                Err(_) => serde_json::Value::Null,
            };
            if metrics["state"] == "FAILED" {
                bail!(
                    "the no-op sink's task failed: {metrics}; see {}",
                    running.log.display()
                );
            }
            let done = metrics["records_done"].as_u64();
            let now = Instant::now();
            let end = done.is_some_and(|d| d >= count / 10 * 9);
            match done {
                Some(0) => before = (now, 0),
                Some(d) if first.is_none() => first = Some(if end { before } else { (now, d) }),
                _ => {}
            }
            if let (true, Some(first), Some(done)) = (end, first, done) {
                return Ok((first, (now, done)));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        bail!(
            "{} did not finish its job; see {}",
            System::NoOpPlugin.name(),
            running.log.display()
        )
    }

    async fn density(&mut self, tasks: u32, duration: Duration) -> Result<DensityRun> {
        let topic = self.topic("density");
        kafka::create_topic(&self.env.bootstrap, &topic).await?;
        let dir = self.run_dir("density");
        let data = self.data_dir(true)?;
        let mut running = self.env.start(
            System::WasmConnect,
            &Job::Density {
                topic: &topic,
                tasks,
            },
            &dir,
            &data,
        )?;
        let url = running.rest_url(Duration::from_secs(120))?;
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            running.check_alive()?;
            let status: serde_json::Value = client
                .get(format!("{url}/connectors/bench-density/status"))
                .send()
                .await?
                .json()
                .await
                .unwrap_or_default();
            let running_tasks = status["tasks"]
                .as_array()
                .map_or(0, |t| t.iter().filter(|t| t["state"] == "RUNNING").count());
            if running_tasks == tasks as usize {
                break;
            }
            if Instant::now() > deadline {
                bail!("{running_tasks} of {tasks} tasks running after 300 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let before = task_counts(&client, &url, tasks).await?;
        let started = Instant::now();
        tokio::time::sleep(duration).await;
        let after = task_counts(&client, &url, tasks).await?;
        let seconds = started.elapsed().as_secs_f64();
        let rss_kib = running.rss_kib();
        let peak_rss_kib = running.peak_rss_kib();
        running.kill();
        let deltas: Vec<u64> = after
            .iter()
            .zip(&before)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect();
        let records: u64 = deltas.iter().sum();
        let run = DensityRun {
            tasks,
            seconds,
            records,
            throughput: records as f64 / seconds,
            rss_kib,
            peak_rss_kib,
            tasks_with_progress: deltas.iter().filter(|d| **d > 0).count() as u32,
            min_task_records: deltas.iter().copied().min().unwrap_or(0),
        };
        eprintln!("density {tasks}: {run:?}");
        Ok(run)
    }
}

/// `records_done` of every task.
async fn task_counts(client: &reqwest::Client, url: &str, tasks: u32) -> Result<Vec<u64>> {
    let mut counts = Vec::with_capacity(tasks as usize);
    for id in 0..tasks {
        let metrics: serde_json::Value = client
            .get(format!("{url}/connectors/bench-density/tasks/{id}/metrics"))
            .send()
            .await?
            .json()
            .await?;
        counts.push(metrics["records_done"].as_u64().context("records_done")?);
    }
    Ok(counts)
}

/// Poll `done` until it holds (checking the process stays up); false after 10 minutes.
fn wait_for(running: &mut Running, mut done: impl FnMut() -> bool) -> Result<bool> {
    let deadline = Instant::now() + Duration::from_secs(600);
    while Instant::now() < deadline {
        if done() {
            return Ok(true);
        }
        if running.exited_cleanly()? {
            // (The native baseline exits when its job is done.)
            return Ok(done());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(false)
}

/// Write back what earlier runs left in the page cache before a run starts. The broker's
/// writes pile up (a million records a run, some 4 GB over the suite) until the kernel starts
/// writing them back, and then the writeback competes with whichever run is measured: in one
/// suite every sink system but Kafka Connect ran about 30 % slower than in the run before,
/// once the source runs had grown from 300 000 to 1 000 000 records.
fn settle() {
    if let Err(e) = std::process::Command::new("sync").status() {
        eprintln!("sync before a run: {e}");
    }
}

/// End a run: the native baseline exits by itself; the workers are killed.
fn finish(system: System, running: Running, done: Result<bool>) -> Result<()> {
    let log = running.log.clone();
    let done = match done {
        Ok(done) => done,
        Err(e) => {
            running.kill();
            return Err(e);
        }
    };
    if system == System::Native {
        running.wait(Duration::from_secs(120))?;
    } else {
        running.kill();
    }
    if !done {
        bail!(
            "{} did not finish its job; see {}",
            system.name(),
            log.display()
        );
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// The native baseline reports its own peak memory as it exits.
fn native_peak(log: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("peak_rss_kib="))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn density(tasks_with_progress: u32, min_task_records: u64) -> DensityRun {
        DensityRun {
            tasks: 1000,
            seconds: 10.0,
            records: 0,
            throughput: 0.0,
            rss_kib: None,
            peak_rss_kib: None,
            tasks_with_progress,
            min_task_records,
        }
    }

    #[test]
    fn a_task_far_below_its_rate_is_starving_even_with_some_progress() {
        assert!(density(1000, 10).none_starved());
        assert!(density(1000, 5).none_starved());
        assert!(!density(1000, 1).none_starved());
        assert!(!density(999, 10).none_starved());
    }
}
