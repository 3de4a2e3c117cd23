//! The workloads, each run on every system it applies to, several times, the systems taking
//! turns at going first:
//!
//! - source throughput, measured over a steady-state window (see `window`) with the CPU time of
//!   the system and of the broker: `datagen` against the native producer making the same records
//!   (1, 2 and 8 tasks on topics with as many partitions, native with as many threads; 100 B,
//!   1 KiB and 10 KiB values), and `file-source` against Kafka Connect's `FileStreamSource`, at
//!   Connect's defaults, tuned, and tuned with a 256 MiB heap, all reading the same pre-written
//!   file, with the `string` converter and with `json` and schemas;
//! - sink throughput (100 B and 1 KiB values): a pre-filled topic copied to a file, or consumed
//!   by a sink that drops what it gets, on every system; from the first record to 90 % of them;
//! - start-up: process start to the broker's append time of the first record, warm (compile
//!   cache filled) and cold (empty data directory);
//! - restart recovery: a source killed with SIGKILL mid-file and started again at once, from the
//!   kill to the broker's append time of the first record written after it;
//! - end-to-end latency of a source paced at [`LATENCY_RATE`] records a second: each value
//!   carries the time it was due, the topic stamps the broker's append time, p50/p99/max of the
//!   difference (the source direction only, through the no-op plugin and a Java task alike);
//! - peak memory (`VmHWM`) of every run above;
//! - density: 10, 100, 1000 and 10 000 low-rate datagen tasks in one worker, and
//!   [`CONNECTORS`] one-task connectors in wasm-connect against Kafka Connect (RSS and CPU);
//! - a three-worker cluster of each, wasm-connect against Kafka Connect: a worker's death to its
//!   tasks producing again, and a `tasks.max` change to the new tasks producing (`cluster`);
//! - the ceiling: source (1 task) and sink through wasm-connect with plugins that do no work,
//!   which no real plugin can beat on this host and contract version.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::Options;
use crate::kafka;
use crate::measure::now_ms;
use crate::systems::{Env, Job, Running, SinkOutput, System};
use crate::window::{Probe, Progress, Timing};

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
    /// Seconds of the measured window (windowed workloads).
    #[serde(default)]
    pub seconds: Option<f64>,
    /// CPU seconds of the system's process per million records, over the window.
    #[serde(default)]
    pub cpu_s_per_m: Option<f64>,
    /// CPU seconds of the broker per million records, over the window.
    #[serde(default)]
    pub broker_cpu_s_per_m: Option<f64>,
    /// What the run used that its row must name (converter, client settings).
    #[serde(default)]
    pub settings: String,
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

/// One run of the connector-density comparison: many one-task connectors at a low rate in one
/// worker, wasm-connect against Kafka Connect.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectorDensityRun {
    pub system: &'static str,
    pub connectors: u32,
    /// From the process start until every connector's task was running.
    pub all_running_s: f64,
    /// The measured window.
    pub seconds: f64,
    /// Records that reached the topic over the window.
    pub records: u64,
    /// CPU seconds of the system's process over the window.
    pub cpu_seconds: Option<f64>,
    pub rss_kib: Option<u64>,
    pub peak_rss_kib: Option<u64>,
}

/// One run of the latency workload.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRun {
    pub system: &'static str,
    pub rep: usize,
    /// Records a second the source was paced at.
    pub rate: u32,
    /// The measured window.
    pub seconds: f64,
    pub records: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub settings: String,
}

/// Records a second of the latency workload.
pub const LATENCY_RATE: u32 = 10_000;

/// Connectors in the connector-density comparison.
pub const CONNECTORS: u32 = 100;

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
    /// End-to-end latency at [`LATENCY_RATE`].
    #[serde(default)]
    pub latency: Vec<LatencyRun>,
    /// wasm-connect against Kafka Connect, [`CONNECTORS`] connectors each.
    #[serde(default)]
    pub connector_density: Vec<ConnectorDensityRun>,
    /// Three-worker clusters: failover and reconfiguration times.
    #[serde(default)]
    pub cluster: Vec<crate::cluster::ClusterRun>,
    pub boundary: Vec<BoundaryPoint>,
    pub seconds: f64,
    /// Seconds each workload group took, in the order they ran (what a trimmed matrix saves).
    #[serde(default)]
    pub group_seconds: Vec<(String, f64)>,
    /// The untimed warm-up and the window of the steady-state workloads, in seconds.
    pub warm_up_s: f64,
    pub window_s: f64,
}

struct Suite {
    env: Env,
    /// The warm-up and window of the steady-state workloads.
    timing: Timing,
    /// The local broker's process, for its CPU time.
    broker: Option<u32>,
    work: tempfile::TempDir,
    /// A filled compile cache, copied into each warm run's data directory.
    warm_cache: std::path::PathBuf,
    systems: Vec<System>,
    counter: u64,
    /// The datagen workloads to run: (tasks, value bytes).
    datagen_matrix: &'static [(u32, usize)],
    /// The value sizes of the sink workloads.
    sink_sizes: &'static [usize],
}

/// Records a file source writes before it is killed in the recovery workload.
const RECOVERY_AFTER: u64 = 200_000;

/// The value size of every workload that names no other: 100 bytes.
pub const VALUE_SIZE: usize = 100;

/// The datagen workloads of a full run: (tasks, value bytes), each on a topic with as many
/// partitions as tasks.
const DATAGEN_FULL: &[(u32, usize)] = &[
    (1, 100),
    (2, 100),
    (8, 100),
    (1, 1024),
    (2, 1024),
    (1, 10240),
];

/// The datagen workloads of a quick run (the headline rows) and of a smoke run.
const DATAGEN_QUICK: &[(u32, usize)] = &[(1, 100), (2, 100)];

/// The codecs of the compression workloads (`compression.type`).
const COMPRESSIONS: &[&str] = &["lz4", "zstd"];

/// The value sizes of the sink workloads of a full run.
const SINK_SIZES_FULL: &[usize] = &[100, 1024];

/// Bytes of values the sinks' input topic holds at most: the broker's page cache (the machine
/// has 24 GiB), so sinks are measured reading memory, not the disk. The native sink reads
/// 1 KiB values at about 2 GB a second here; a 4 GiB input ran out under the shortest window.
const SINK_BYTES_MAX: u64 = 10 << 30;

/// Lines a second no system is expected to read from a file: the file-source workload's input
/// covers the warm-up and window at this rate (a faster system runs out, and the run says so).
const FILE_LINES_PER_S_BOUND: f64 = 1_500_000.0;

/// Records the sinks' input topic holds at most. Sinks read it from the page cache at several
/// million records a second, faster than a topic can reasonably be sized for: the window of a
/// fast sink closes when its input is nearly used up (each row reports its window).
const SINK_RECORDS_MAX: u64 = 40_000_000;

/// Records a second the sinks' input is sized for (up to [`SINK_RECORDS_MAX`]): the native
/// 2-task sink reads about 4 M a second here, and an input sized for less ran out before the
/// shortest window a run accepts.
const SINK_RECORDS_PER_S: f64 = 5_000_000.0;

/// The settings of a source that wraps each value in the JSON converter's schema envelope.
const JSON_CONVERTER: &str = "JSON converter with schemas (`schemas.enable=true`)";
const JSON_TRANSFORMS: &str =
    "JSON converter with schemas; HoistField, InsertField, ReplaceField (`$Value`)";

/// The input of a smoke run's file source and sinks: enough to see records move.
const SMOKE_INPUT: u64 = 3_000_000;

/// The settings of a source that moves bytes through unchanged.
const STRING_CONVERTER: &str = "string converter (bytes unchanged)";

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
    let mut work = tempfile::tempdir()?;
    if std::env::var_os("WASM_CONNECT_BENCH_KEEP").is_some() {
        work.disable_cleanup(true);
        eprintln!("keeping the run directories in {}", work.path().display());
    }
    let connect_sinks = match &connect_libs {
        Some(libs) => {
            let out = work.path().join("connect-sinks");
            Some(crate::systems::compile_connect_sinks(repo, libs, &out)?)
        }
        None => None,
    };
    let env = Env {
        bootstrap: options.bootstrap.clone(),
        repo: repo.to_owned(),
        worker,
        connect_libs,
        connect_sinks,
        compression: None,
    };
    let mut systems = vec![System::WasmConnect, System::Native];
    if env.connect_libs.is_some() {
        // A quick run keeps the pairs with a target: Kafka Connect at its defaults (and with
        // `-Xmx256m`) is a full run's context, not a headline.
        if !options.quick {
            systems.push(System::KafkaConnect);
        }
        systems.push(System::KafkaConnectTuned);
    }
    let timing = if options.smoke {
        Timing {
            warm_up: Duration::from_millis(300),
            window: Duration::from_secs(1),
            strict: false,
        }
    } else {
        Timing {
            warm_up: options.warm_up,
            window: options.window,
            strict: true,
        }
    };
    let broker = crate::window::broker_pid(&env.bootstrap);
    if broker.is_none() {
        eprintln!(
            "the broker at {} is not one scripts/kafka runs here: its CPU time is not reported",
            env.bootstrap
        );
    }
    let mut suite = Suite {
        env,
        timing,
        broker,
        warm_cache: work.path().join("warm-cache"),
        work,
        systems,
        counter: 0,
        datagen_matrix: if options.full_matrix() {
            DATAGEN_FULL
        } else {
            DATAGEN_QUICK
        },
        sink_sizes: if options.full_matrix() {
            SINK_SIZES_FULL
        } else {
            &SINK_SIZES_FULL[..1]
        },
    };
    let mut runs = Vec::new();
    let mut groups = GroupClock::start();
    // A million records a run: at 300 000, a run of the worker or the native producer lasted
    // under half a second, and linger, the first batches and the broker's pauses made its
    // spread larger than the differences measured (docs/benchmark-journal.md §000). The sink's start-up
    // (group join, first fetches) is likewise a small part of a million records' span.
    let (count, reps) = if options.smoke {
        (2_000, 1)
    } else {
        (1_000_000, options.reps)
    };

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
            if matches!(system, System::WasmConnect | System::KafkaConnect) {
                runs.push(
                    suite
                        .source(system, "startup-warm", 1, startup_count, rep, true)
                        .await?,
                );
            }
        }
    }
    if options.runs("startup") {
        let mut systems = vec![System::WasmConnect];
        if suite.systems.contains(&System::KafkaConnectTuned) {
            systems.push(System::KafkaConnectTuned);
        }
        // Far more lines than either system copies before it is killed and has restarted.
        let lines = if options.smoke { 2_000_000 } else { 10_000_000 };
        let file = suite.work.path().join("recovery-input").join("lines.txt");
        std::fs::create_dir_all(file.parent().unwrap_or(suite.work.path()))?;
        write_lines(&file, lines)?;
        for rep in 0..reps {
            for system in rotated(&systems, rep) {
                runs.push(suite.recovery(system, &file, rep).await?);
            }
        }
        let _ = std::fs::remove_file(&file);
    }
    // Without the startup group this was the compile cache's filling alone.
    groups.lap(if options.runs("startup") {
        "startup"
    } else {
        "compile cache"
    });
    // The broker is a JVM started for this run: its first few million records are slower while
    // its JIT compiles the produce path. Every system's source runs got faster rep by rep, and
    // the first system of each rep paid most (docs/benchmark-journal.md §00000000); so the broker takes
    // untimed records first, and the systems take turns at going first.
    if ["source", "compression", "sink", "transforms"]
        .iter()
        .any(|g| options.runs(g))
    {
        let topic = suite.topic("warm-up");
        kafka::create_topic(&suite.env.bootstrap, &topic, 1).await?;
        kafka::fill(&suite.env.bootstrap, &topic, count * 3, VALUE_SIZE)?;
    }
    if options.runs("source") {
        runs.extend(suite.source_pairs(reps).await?);
        groups.lap("source");
    }
    if options.runs("transforms") {
        let without = !options.runs("source");
        runs.extend(suite.transform_pairs(reps, without).await?);
        groups.lap("transforms");
    }
    // Compressed batches: not a headline row (a quick run leaves them out).
    if options.runs("compression") && options.full_matrix() {
        runs.extend(suite.compression_pairs(reps).await?);
        groups.lap("compression");
    }
    if options.runs("sink") {
        for &value_size in suite.sink_sizes {
            runs.extend(suite.sink_pairs(reps, value_size).await?);
        }
        groups.lap("sink");
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
    if options.runs("density") {
        groups.lap("density (tasks)");
    }
    let boundary = options
        .criterion
        .as_deref()
        .map(crate::report::read_criterion)
        .unwrap_or_default();
    let mut latency = Vec::new();
    if options.runs("latency") {
        let mut systems = vec![System::NoOpPlugin];
        if suite.systems.contains(&System::KafkaConnectTuned) {
            systems.extend([System::KafkaConnectTuned, System::KafkaConnect]);
        }
        for rep in 0..reps {
            for system in rotated(&systems, rep) {
                latency.push(suite.latency(system, rep).await?);
            }
        }
        groups.lap("latency");
    }
    let mut connector_density = Vec::new();
    if options.runs("density") {
        let mut systems = vec![System::WasmConnect];
        if suite.systems.contains(&System::KafkaConnectTuned) {
            systems.extend([System::KafkaConnectTuned, System::KafkaConnectSmallHeap]);
        }
        let connectors = if options.smoke { 10 } else { CONNECTORS };
        for system in systems {
            connector_density.push(
                suite
                    .connector_density(system, connectors, Duration::from_secs(seconds))
                    .await?,
            );
        }
        groups.lap("density (connectors)");
    }
    let mut cluster = Vec::new();
    if options.runs("cluster") {
        let mut systems = vec![System::WasmConnect];
        if suite.env.connect_libs.is_some() {
            systems.push(System::KafkaConnect);
        }
        for rep in 0..reps {
            for system in rotated(&systems, rep) {
                cluster.push(
                    crate::cluster::run(&suite.env, suite.work.path(), system, rep, options.smoke)
                        .await?,
                );
            }
        }
        groups.lap("cluster");
    }
    if options.runs("postgres") {
        let rows = if options.smoke {
            crate::postgres::ROWS_SMOKE
        } else if options.quick {
            crate::postgres::ROWS_QUICK
        } else {
            crate::postgres::ROWS_FULL
        };
        let db = crate::postgres::Database::create(rows)?;
        let outcome = postgres_runs(&suite, &db, reps).await;
        db.drop_database();
        runs.extend(outcome?);
        groups.lap("postgres");
    }
    Ok(Results {
        runs,
        density,
        latency,
        connector_density,
        cluster,
        boundary,
        seconds: started.elapsed().as_secs_f64(),
        group_seconds: groups.laps,
        warm_up_s: suite.timing.warm_up.as_secs_f64(),
        window_s: suite.timing.window.as_secs_f64(),
    })
}

/// The PostgreSQL workloads, `reps` pairs each: the sources first (their first records must be
/// the same bytes, so the two programs do the same work), then the sinks, all reading the topic
/// wasm-connect's first source run wrote.
async fn postgres_runs(
    suite: &Suite,
    db: &crate::postgres::Database,
    reps: usize,
) -> Result<Vec<Run>> {
    use crate::postgres::{self, Program};
    let programs = [Program::WasmConnect, Program::Native];
    let work = suite.work.path();
    let mut runs = Vec::new();
    let mut input = None;
    for rep in 0..reps {
        let mut firsts = Vec::new();
        for program in rotated(&programs, rep) {
            let (run, topic) = postgres::source(&suite.env, work, program, db, rep).await?;
            let first = kafka::value_at(&suite.env.bootstrap, &topic, 0)?;
            firsts.push((program, first));
            if program == Program::WasmConnect && input.is_none() {
                input = Some(topic);
            }
            runs.push(run);
        }
        if let [(a, x), (b, y)] = &firsts[..]
            && x != y
        {
            bail!(
                "the first records of {} and {} differ, so they do not do the same work:\n{}\n{}",
                a.name(),
                b.name(),
                String::from_utf8_lossy(x),
                String::from_utf8_lossy(y)
            );
        }
    }
    let input = input.context("no source run wrote the sinks' input")?;
    for rep in 0..reps {
        for program in rotated(&programs, rep) {
            runs.push(postgres::sink(&suite.env, work, program, db, &input, rep).await?);
        }
    }
    Ok(runs)
}

/// How long each workload group took: a lap ends where the next begins, so time between
/// groups (the broker's warm-up) counts toward the group after it. Lapped only for groups
/// that ran.
struct GroupClock {
    since: Instant,
    laps: Vec<(String, f64)>,
}

impl GroupClock {
    fn start() -> Self {
        Self {
            since: Instant::now(),
            laps: Vec::new(),
        }
    }

    /// End the lap of `group` (printed, and kept for the report).
    fn lap(&mut self, group: &str) {
        let now = Instant::now();
        let seconds = now.duration_since(self.since).as_secs_f64();
        self.since = now;
        eprintln!("group {group}: {seconds:.0} s");
        self.laps.push((group.to_owned(), seconds));
    }
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
        kafka::create_topic(&self.env.bootstrap, &topic, 1).await?;
        let dir = self.run_dir(workload);
        let data = self.data_dir(warm)?;
        // Kafka Connect has no generator to match datagen: it starts by reading a file of as
        // many lines.
        let lines = dir.join("lines.txt");
        if system.is_connect() {
            std::fs::create_dir_all(&dir)?;
            write_lines(&lines, count)?;
        }
        let job = if system.is_connect() {
            Job::ReadFile {
                topic: &topic,
                file: &lines,
                json: false,
                transforms: false,
            }
        } else {
            Job::Generate {
                topic: &topic,
                count: Some(count),
                tasks,
                value_size: VALUE_SIZE,
            }
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
            seconds: None,
            cpu_s_per_m: None,
            broker_cpu_s_per_m: None,
            settings: String::new(),
        })
    }

    /// Restart recovery of a file source (wasm-connect's `file-source`, Kafka Connect's
    /// `FileStreamSource`, tuned): the system copies a large file until it has written
    /// [`RECOVERY_AFTER`] records and committed offsets, is killed with SIGKILL, and is started
    /// again at once with the same configuration and state; measured from the kill to the
    /// producer timestamp of the first record the new process wrote.
    async fn recovery(&mut self, system: System, file: &Path, rep: usize) -> Result<Run> {
        let topic = self.topic("recovery");
        // The producer's timestamps: a record the killed process had sent before the kill is
        // stamped before it, whenever the broker wrote it.
        kafka::create_topic_create_time(&self.env.bootstrap, &topic, 1).await?;
        let dir = self.run_dir("recovery");
        let data = self.data_dir(true)?;
        let job = Job::ReadFile {
            topic: &topic,
            file,
            json: false,
            transforms: false,
        };
        settle();
        let mut running = self.env.start(system, &job, &dir, &data)?;
        let copied = wait_for(&mut running, || {
            kafka::wait_for_records(
                &self.env.bootstrap,
                &topic,
                RECOVERY_AFTER,
                Duration::from_millis(50),
            )
            .is_ok()
        });
        if !matches!(copied, Ok(true)) {
            running.kill();
            bail!(
                "recovery on {}: the first run did not copy {RECOVERY_AFTER} records",
                system.name()
            );
        }
        // Both systems commit source offsets every second (`offset.flush.interval.ms`): wait
        // for at least two commits, so the new process resumes rather than starts over.
        std::thread::sleep(Duration::from_millis(2500));
        let killed_ms = now_ms();
        running.kill();
        let from = kafka::high_watermark(&self.env.bootstrap, &topic)?;
        let running = self.env.start(system, &job, &dir, &data)?;
        let first = kafka::first_since(
            &self.env.bootstrap,
            &topic,
            from,
            killed_ms,
            Duration::from_secs(120),
        );
        let peak = running.peak_rss_kib();
        running.kill();
        let first = first.with_context(|| format!("recovery on {}", system.name()))?;
        if let Err(e) = kafka::delete_topic(&self.env.bootstrap, &topic).await {
            eprintln!("warning: cannot delete {topic}: {e:#}");
        }
        let recovery_ms = (first - killed_ms) as f64;
        eprintln!(
            "recovery {} rep {rep}: {recovery_ms:.0} ms from the kill to the first new record",
            system.name()
        );
        Ok(Run {
            workload: "recovery".to_owned(),
            system: system.name(),
            rep,
            records: 0,
            throughput: None,
            startup_ms: Some(recovery_ms),
            peak_rss_kib: peak,
            value_bytes: Some(VALUE_SIZE),
            seconds: None,
            cpu_s_per_m: None,
            broker_cpu_s_per_m: None,
            settings: match system {
                System::WasmConnect => "`file-source`, string converter".to_owned(),
                _ => "`FileStreamSource`, string converter, producer as wasm-connect's".to_owned(),
            },
        })
    }

    /// The source workloads: `datagen` against the native producer (1 task and 2), and
    /// `file-source` against Kafka Connect's `FileStreamSource` on one pre-written file.
    async fn source_pairs(&mut self, reps: usize) -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        for &(tasks, value_size) in self.datagen_matrix {
            let mut systems = vec![System::WasmConnect, System::Native];
            if tasks == 1 && value_size == VALUE_SIZE {
                systems.push(System::NoOpPlugin);
            }
            let workload = datagen_workload(tasks, value_size);
            for rep in 0..reps {
                for system in rotated(&systems, rep) {
                    let source = SourceInput::Generate { tasks, value_size };
                    runs.push(self.source_window(system, &workload, &source, rep).await?);
                }
            }
        }
        let mut systems = vec![System::WasmConnect];
        systems.extend(self.systems.iter().filter(|s| s.is_connect()));
        // (Only beside Connect at its defaults: a quick run leaves both out.)
        if self.systems.contains(&System::KafkaConnect) {
            systems.push(System::KafkaConnectSmallHeap);
        }
        let (file, lines) = self.input_file()?;
        let source = SourceInput::File {
            path: file.clone(),
            lines,
            json: false,
            transforms: false,
        };
        for rep in 0..reps {
            for system in rotated(&systems, rep) {
                runs.push(
                    self.source_window(system, "source-file-1-task", &source, rep)
                        .await?,
                );
            }
        }
        // wasm-connect's documented default converter, against Connect's JsonConverter: both
        // wrap each line in the schema envelope.
        let source = SourceInput::File {
            path: file.clone(),
            lines,
            json: true,
            transforms: false,
        };
        let mut systems = vec![System::WasmConnect];
        systems.extend(
            self.systems
                .iter()
                .filter(|s| **s == System::KafkaConnectTuned),
        );
        for rep in 0..reps {
            for system in rotated(&systems, rep) {
                runs.push(
                    self.source_window(system, "source-file-json-1-task", &source, rep)
                        .await?,
                );
            }
        }
        let _ = std::fs::remove_file(&file);
        Ok(runs)
    }

    /// The transform workload: the file read with the JSON converter through
    /// [`crate::systems::TRANSFORM_CHAIN`], by wasm-connect and Kafka Connect (tuned), and the
    /// same without transforms (unless the source group ran it) for the cost of the chain in
    /// the same invocation.
    async fn transform_pairs(&mut self, reps: usize, without: bool) -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        let (file, lines) = self.input_file()?;
        let mut systems = vec![System::WasmConnect];
        systems.extend(
            self.systems
                .iter()
                .filter(|s| **s == System::KafkaConnectTuned),
        );
        let mut inputs = vec![(TRANSFORMS_WORKLOAD, true)];
        if without {
            inputs.push(("source-file-json-1-task", false));
        }
        for (workload, transforms) in inputs {
            let source = SourceInput::File {
                path: file.clone(),
                lines,
                json: true,
                transforms,
            };
            for rep in 0..reps {
                for system in rotated(&systems, rep) {
                    runs.push(self.source_window(system, workload, &source, rep).await?);
                }
            }
        }
        let _ = std::fs::remove_file(&file);
        Ok(runs)
    }

    /// Write the file the file-source workloads read: enough lines for a warm-up and a window
    /// at [`FILE_LINES_PER_S_BOUND`] (a few in a smoke run). Returns its path and line count.
    fn input_file(&self) -> Result<(std::path::PathBuf, u64)> {
        let window = (self.timing.warm_up + self.timing.window).as_secs_f64();
        let lines = if self.timing.strict {
            (window * FILE_LINES_PER_S_BOUND) as u64
        } else {
            SMOKE_INPUT
        };
        let file = self.work.path().join("input").join("lines.txt");
        std::fs::create_dir_all(file.parent().unwrap_or(self.work.path()))?;
        write_lines(&file, lines)?;
        Ok((file, lines))
    }

    /// The source workloads again with compressed batches, each codec set as the producers'
    /// `compression.type` on every system alike: datagen against the native producer, and the
    /// file read by `file-source` against Kafka Connect's `FileStreamSource` (tuned).
    async fn compression_pairs(&mut self, reps: usize) -> Result<Vec<Run>> {
        let mut runs = Vec::new();
        let (file, lines) = self.input_file()?;
        for &codec in COMPRESSIONS {
            self.env.compression = Some(codec);
            let workload = format!("{}-{codec}", datagen_workload(1, VALUE_SIZE));
            let generate = SourceInput::Generate {
                tasks: 1,
                value_size: VALUE_SIZE,
            };
            for rep in 0..reps {
                for system in rotated(&[System::WasmConnect, System::Native], rep) {
                    runs.push(
                        self.source_window(system, &workload, &generate, rep)
                            .await?,
                    );
                }
            }
            let mut systems = vec![System::WasmConnect];
            systems.extend(
                self.systems
                    .iter()
                    .filter(|s| **s == System::KafkaConnectTuned),
            );
            let read = SourceInput::File {
                path: file.clone(),
                lines,
                json: false,
                transforms: false,
            };
            let workload = format!("source-file-1-task-{codec}");
            for rep in 0..reps {
                for system in rotated(&systems, rep) {
                    runs.push(self.source_window(system, &workload, &read, rep).await?);
                }
            }
        }
        self.env.compression = None;
        let _ = std::fs::remove_file(&file);
        Ok(runs)
    }

    /// One steady-state source run of `system` into a fresh topic (as many partitions as
    /// tasks), deleted afterwards: a window of records can be gigabytes.
    async fn source_window(
        &mut self,
        system: System,
        workload: &str,
        input: &SourceInput,
        rep: usize,
    ) -> Result<Run> {
        let topic = self.topic(workload);
        let (tasks, limit, value_size) = match input {
            SourceInput::Generate { tasks, value_size } => (*tasks, None, *value_size),
            SourceInput::File { lines, .. } => (1, Some(*lines), VALUE_SIZE),
        };
        let partitions = tasks as i32;
        kafka::create_topic(&self.env.bootstrap, &topic, partitions).await?;
        let dir = self.run_dir(workload);
        let data = self.data_dir(true)?;
        let job = match input {
            SourceInput::Generate { tasks, value_size } => Job::Generate {
                topic: &topic,
                count: None,
                tasks: *tasks,
                value_size: *value_size,
            },
            SourceInput::File {
                path,
                json,
                transforms,
                ..
            } => Job::ReadFile {
                topic: &topic,
                file: path,
                json: *json,
                transforms: *transforms,
            },
        };
        self.env.prepare(system, &job).await?;
        settle();
        let mut running = self.env.start(system, &job, &dir, &data)?;
        let progress = Progress::Topic {
            topic: topic.clone(),
            partitions,
        };
        let measured = self.measure(&mut running, progress, limit).await;
        let peak = running.peak_rss_kib();
        running.kill();
        // The first record as it landed: its size names the row's record, and lets the smoke
        // run compare two systems' bytes for the same input.
        let value_bytes = kafka::value_at(&self.env.bootstrap, &topic, 0)
            .map(|v| v.len())
            .unwrap_or(value_size);
        if let Err(e) = kafka::delete_topic(&self.env.bootstrap, &topic).await {
            eprintln!("warning: cannot delete {topic}: {e:#}");
        }
        let window = measured.with_context(|| format!("{workload} on {}", system.name()))?;
        let converter = match input {
            SourceInput::File {
                json: true,
                transforms: true,
                ..
            } => JSON_TRANSFORMS,
            SourceInput::File { json: true, .. } => JSON_CONVERTER,
            _ => STRING_CONVERTER,
        };
        let settings = match system {
            System::KafkaConnectTuned => format!("{converter}; producer as wasm-connect's"),
            System::KafkaConnectSmallHeap => {
                format!("{converter}; producer as wasm-connect's; `-Xmx256m`")
            }
            System::KafkaConnect => format!("{converter}; Connect's default producer"),
            System::NoOpPlugin => "one prepared record, copied".to_owned(),
            System::Native => {
                "records made before the run, the worker's producer settings and batch call"
                    .to_owned()
            }
            _ => converter.to_owned(),
        };
        let settings = match self.env.compression {
            Some(codec) => format!("{settings}; `compression.type={codec}`"),
            None => settings,
        };
        Ok(windowed_run(
            workload,
            system,
            rep,
            &window,
            peak,
            value_bytes,
            settings,
        ))
    }

    /// Measure one window of `running` by `progress` (see `window`); the caller stops the
    /// system whatever the outcome.
    async fn measure(
        &self,
        running: &mut Running,
        progress: Progress,
        input: Option<u64>,
    ) -> Result<crate::window::Window> {
        Probe::new(&self.env.bootstrap, progress)?
            .measure(running, self.broker, self.timing, input)
            .await
    }

    /// The sink workloads, all reading one pre-filled topic (each run in a consumer group of
    /// its own): records dropped (wasm-connect's no-op plugin, the native consumer, Connect's
    /// `NoOpSinkTask`), and records appended to a file, buffered (`file-sink`, the native
    /// consumer, Connect's `BufferedFileSinkTask`) and by Connect's own `FileStreamSink`. At the
    /// default value size, records are also dropped by 2 tasks (native: 2 consumer threads)
    /// reading a 2-partition topic.
    async fn sink_pairs(&mut self, reps: usize, value_size: usize) -> Result<Vec<Run>> {
        let window = (self.timing.warm_up + self.timing.window).as_secs_f64();
        let count = if self.timing.strict {
            ((window * SINK_RECORDS_PER_S) as u64)
                .min(SINK_RECORDS_MAX)
                .min(SINK_BYTES_MAX / value_size as u64)
        } else {
            SMOKE_INPUT.min(SINK_BYTES_MAX / 10 / value_size as u64)
        };
        let connect = self.systems.iter().any(|s| s.is_connect());
        let mut drop = vec![
            (System::NoOpPlugin, SinkKind::Drop),
            (System::Native, SinkKind::Drop),
        ];
        let mut file = vec![
            (System::WasmConnect, SinkKind::File),
            (System::Native, SinkKind::File),
        ];
        if connect {
            drop.push((System::KafkaConnectTuned, SinkKind::Drop));
            // (Larger values: only the pairs with a target.)
            if value_size == VALUE_SIZE {
                file.push((System::KafkaConnectTuned, SinkKind::File));
                if self.systems.contains(&System::KafkaConnect) {
                    file.push((System::KafkaConnect, SinkKind::FileStream));
                }
            }
        }
        // 2 tasks at every size: the 0.9 × native target names 1 and 2 tasks at 100 B and 1 KiB.
        let groups = vec![
            (1, vec![("sink-drop", drop.clone()), ("sink-file", file)]),
            (2, vec![("sink-drop-2-task", drop)]),
        ];
        let mut runs = Vec::new();
        for (tasks, workloads) in groups {
            let topic = self.topic("sink-input");
            kafka::create_topic(&self.env.bootstrap, &topic, tasks as i32).await?;
            let bytes = kafka::fill(&self.env.bootstrap, &topic, count, value_size)?;
            let input = SinkInput {
                topic: &topic,
                records: count,
                bytes_per_record: bytes as f64 / count.max(1) as f64,
                tasks,
            };
            for (what, systems) in workloads {
                let workload = sized(what, value_size);
                for rep in 0..reps {
                    for (system, kind) in rotated(&systems, rep) {
                        runs.push(
                            self.sink_window(system, &workload, kind, &input, rep)
                                .await?,
                        );
                    }
                }
            }
            if let Err(e) = kafka::delete_topic(&self.env.bootstrap, &topic).await {
                eprintln!("warning: cannot delete {topic}: {e:#}");
            }
        }
        Ok(runs)
    }

    /// One steady-state sink run of `system`.
    async fn sink_window(
        &mut self,
        system: System,
        workload: &str,
        kind: SinkKind,
        input: &SinkInput<'_>,
        rep: usize,
    ) -> Result<Run> {
        let dir = self.run_dir(workload);
        let data = self.data_dir(true)?;
        let out = dir.join("out");
        std::fs::create_dir_all(&out)?;
        let file = out.join("sink.txt");
        let progress_file = out.join("progress");
        let output = match kind {
            SinkKind::Drop => SinkOutput::Drop {
                progress: &progress_file,
            },
            SinkKind::File => SinkOutput::File { file: &file },
            SinkKind::FileStream => SinkOutput::FileStream { file: &file },
        };
        let job = Job::Sink {
            topic: input.topic,
            output,
            tasks: input.tasks,
        };
        let progress = match (system, kind) {
            (System::WasmConnect | System::NoOpPlugin, _) => Progress::Tasks {
                connector: crate::systems::sink_name(&dir),
                tasks: input.tasks,
            },
            (_, SinkKind::Drop) => Progress::CountFile {
                path: progress_file.clone(),
            },
            _ => Progress::FileLines {
                path: file.clone(),
                bytes_per_record: input.bytes_per_record,
            },
        };
        settle();
        let mut running = self.env.start(system, &job, &dir, &data)?;
        let measured = self
            .measure(&mut running, progress, Some(input.records))
            .await;
        let peak = running.peak_rss_kib();
        running.kill();
        // The output can be gigabytes.
        let _ = std::fs::remove_file(&file);
        let window = measured.with_context(|| format!("{workload} on {}", system.name()))?;
        let settings = match (system, kind) {
            (System::NoOpPlugin, _) => "`bench-sink`, string converter".to_owned(),
            (System::Native, SinkKind::Drop) => {
                "rdkafka, batches from split partition queues as the worker takes them; dropped"
                    .to_owned()
            }
            (System::Native, _) => {
                "rdkafka, batches from split partition queues; 64 KiB buffered writes".to_owned()
            }
            (System::WasmConnect, _) => "`file-sink`, string converter".to_owned(),
            (System::KafkaConnectTuned, SinkKind::Drop) => {
                "`NoOpSinkTask`, string converter, `max.poll.records=2000`".to_owned()
            }
            (System::KafkaConnectTuned, _) => {
                "`BufferedFileSinkTask` (64 KiB buffer), string converter, `max.poll.records=2000`"
                    .to_owned()
            }
            _ => "`FileStreamSink` (a write per record), string converter, Connect's defaults"
                .to_owned(),
        };
        Ok(windowed_run(
            workload,
            system,
            rep,
            &window,
            peak,
            // (Each record's bytes in the file: its value and a newline.)
            (input.bytes_per_record - 1.0).round() as usize,
            settings,
        ))
    }

    /// End-to-end latency of a source at a fixed rate: one task paced at [`LATENCY_RATE`]
    /// records a second, each value stamped with the time its record was due; after the
    /// warm-up, every record of the window is read back, and its latency is the broker's
    /// append time minus its stamp (both clocks this machine's).
    async fn latency(&mut self, system: System, rep: usize) -> Result<LatencyRun> {
        let topic = self.topic("latency");
        kafka::create_topic(&self.env.bootstrap, &topic, 1).await?;
        let dir = self.run_dir("latency");
        let data = self.data_dir(true)?;
        let job = Job::Stamped {
            topic: &topic,
            rate: LATENCY_RATE,
        };
        settle();
        let mut running = self.env.start(system, &job, &dir, &data)?;
        let window = async {
            let started = wait_for(&mut running, || {
                kafka::wait_for_records(&self.env.bootstrap, &topic, 1, Duration::from_millis(50))
                    .is_ok()
            })?;
            if !started {
                bail!("no record reached {topic}");
            }
            tokio::time::sleep(self.timing.warm_up).await;
            running.check_alive()?;
            let from = kafka::high_watermark(&self.env.bootstrap, &topic)?;
            let opened = Instant::now();
            tokio::time::sleep(self.timing.window).await;
            running.check_alive()?;
            let to = kafka::high_watermark(&self.env.bootstrap, &topic)?;
            Ok((from, to, opened.elapsed().as_secs_f64()))
        }
        .await;
        running.kill();
        let measured = window.and_then(|(from, to, seconds)| {
            Ok((
                kafka::stamped_latencies(&self.env.bootstrap, &topic, from, to)?,
                seconds,
            ))
        });
        if let Err(e) = kafka::delete_topic(&self.env.bootstrap, &topic).await {
            eprintln!("warning: cannot delete {topic}: {e:#}");
        }
        let (mut latencies, seconds) =
            measured.with_context(|| format!("latency on {}", system.name()))?;
        if latencies.is_empty() {
            bail!("latency on {}: no record in the window", system.name());
        }
        latencies.sort_unstable();
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize] as f64;
        let run = LatencyRun {
            system: system.name(),
            rep,
            rate: LATENCY_RATE,
            seconds,
            records: latencies.len() as u64,
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            max_ms: at(1.0),
            settings: match system {
                System::NoOpPlugin => {
                    "`bench-source` (`rate`, `stamp`), the worker's producer (5 ms linger)"
                }
                System::KafkaConnectTuned => {
                    "`RateSourceConnector` (`stamp`), producer as wasm-connect's (5 ms linger)"
                }
                _ => "`RateSourceConnector` (`stamp`), Connect's default producer (0 ms linger)",
            }
            .to_owned(),
        };
        eprintln!(
            "latency {} rep {rep}: p50 {} ms, p99 {} ms, max {} ms over {} records",
            run.system, run.p50_ms, run.p99_ms, run.max_ms, run.records
        );
        Ok(run)
    }

    /// `connectors` one-task connectors in one worker of `system`, one record a second each:
    /// how long until all run, then the process's resident memory and CPU time over
    /// `duration`.
    async fn connector_density(
        &mut self,
        system: System,
        connectors: u32,
        duration: Duration,
    ) -> Result<ConnectorDensityRun> {
        let topic = self.topic("connectors");
        kafka::create_topic(&self.env.bootstrap, &topic, 1).await?;
        let dir = self.run_dir("connectors");
        let data = self.data_dir(true)?;
        let job = Job::Connectors {
            topic: &topic,
            count: connectors,
            rate: DENSITY_RATE_PER_TASK,
        };
        settle();
        let mut running = self.env.start(system, &job, &dir, &data)?;
        let outcome = async {
            let url = running.rest_url(Duration::from_secs(120))?;
            let client = reqwest::Client::new();
            let deadline = Instant::now() + Duration::from_secs(300);
            loop {
                running.check_alive()?;
                let tasks = running_tasks(&client, &url).await;
                if tasks >= connectors as usize {
                    break;
                }
                if Instant::now() > deadline {
                    bail!("{tasks} of {connectors} tasks running after 300 s");
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let all_running_s = (now_ms() - running.started_ms) as f64 / 1000.0;
            // Start-up garbage and first connections out of the way.
            tokio::time::sleep(Duration::from_secs(3)).await;
            let before = kafka::high_watermark(&self.env.bootstrap, &topic)?;
            let cpu_before = running.cpu_seconds();
            let started = Instant::now();
            tokio::time::sleep(duration).await;
            let cpu_after = running.cpu_seconds();
            let seconds = started.elapsed().as_secs_f64();
            let after = kafka::high_watermark(&self.env.bootstrap, &topic)?;
            Ok(ConnectorDensityRun {
                system: system.name(),
                connectors,
                all_running_s,
                seconds,
                records: (after - before).max(0) as u64,
                cpu_seconds: cpu_after.zip(cpu_before).map(|(a, b)| a - b),
                rss_kib: running.rss_kib(),
                peak_rss_kib: running.peak_rss_kib(),
            })
        }
        .await;
        running.kill();
        if let Err(e) = kafka::delete_topic(&self.env.bootstrap, &topic).await {
            eprintln!("warning: cannot delete {topic}: {e:#}");
        }
        let run =
            outcome.with_context(|| format!("{connectors} connectors on {}", system.name()))?;
        eprintln!("connectors {}: {run:?}", system.name());
        Ok(run)
    }

    async fn density(&mut self, tasks: u32, duration: Duration) -> Result<DensityRun> {
        let topic = self.topic("density");
        kafka::create_topic(&self.env.bootstrap, &topic, 1).await?;
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

/// Tasks in state RUNNING, from `GET /connectors?expand=status` (Kafka Connect's shape, which
/// wasm-connect answers too); 0 while the worker does not answer.
async fn running_tasks(client: &reqwest::Client, url: &str) -> usize {
    let Ok(response) = client
        .get(format!("{url}/connectors?expand=status"))
        .send()
        .await
    else {
        return 0;
    };
    let status: serde_json::Value = response.json().await.unwrap_or_default();
    status.as_object().map_or(0, |connectors| {
        connectors
            .values()
            .filter_map(|c| c["status"]["tasks"].as_array())
            .flatten()
            .filter(|t| t["state"] == "RUNNING")
            .count()
    })
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

/// A steady-state run's record (and its line on the console).
fn windowed_run(
    workload: &str,
    system: System,
    rep: usize,
    window: &crate::window::Window,
    peak_rss_kib: Option<u64>,
    value_bytes: usize,
    settings: String,
) -> Run {
    let cpu = window.per_million(window.cpu_seconds);
    let broker = window.per_million(window.broker_cpu_seconds);
    eprintln!(
        "{workload} {} rep {rep}: {:.0} records/s over {:.1} s, {} CPU s per M records (broker {})",
        system.name(),
        window.throughput(),
        window.seconds,
        show_opt(cpu),
        show_opt(broker),
    );
    Run {
        workload: workload.to_owned(),
        system: system.name(),
        rep,
        records: window.records,
        throughput: Some(window.throughput()),
        startup_ms: None,
        peak_rss_kib,
        value_bytes: Some(value_bytes),
        seconds: Some(window.seconds),
        cpu_s_per_m: cpu,
        broker_cpu_s_per_m: broker,
        settings,
    }
}

/// What a sink run does with the records.
#[derive(Debug, Clone, Copy)]
enum SinkKind {
    Drop,
    File,
    /// Kafka Connect's `FileStreamSink`.
    FileStream,
}

/// The pre-filled topic the sink runs read, with as many partitions as the runs have tasks.
struct SinkInput<'a> {
    topic: &'a str,
    records: u64,
    bytes_per_record: f64,
    tasks: u32,
}

/// What a source run reads.
enum SourceInput {
    /// Records made as it goes (`datagen`, the native generator), by `tasks` tasks.
    Generate { tasks: u32, value_size: usize },
    /// The `lines` lines of a pre-written file, through the JSON converter with schemas when
    /// `json`, through [`crate::systems::TRANSFORM_CHAIN`] first when `transforms`.
    File {
        path: std::path::PathBuf,
        lines: u64,
        json: bool,
        transforms: bool,
    },
}

/// The transform workload's name.
pub const TRANSFORMS_WORKLOAD: &str = "source-file-json-transforms-1-task";

/// `what`, with the value size appended unless it is the default 100 bytes.
pub fn sized(what: &str, value_size: usize) -> String {
    match value_size {
        VALUE_SIZE => what.to_owned(),
        n if n % 1024 == 0 => format!("{what}-{}KiB", n / 1024),
        n => format!("{what}-{n}B"),
    }
}

/// The name of the datagen workload with `tasks` tasks and values of `value_size` bytes.
pub fn datagen_workload(tasks: u32, value_size: usize) -> String {
    sized(&format!("source-datagen-{tasks}-task"), value_size)
}

/// `systems` rotated by `rep`, so each goes first in turn.
fn rotated<T: Clone>(systems: &[T], rep: usize) -> Vec<T> {
    let mut order = systems.to_vec();
    if !order.is_empty() {
        let first = rep % order.len();
        order.rotate_left(first);
    }
    order
}

/// Write `lines` of datagen's values (`VALUE_SIZE` bytes, record ids `0..lines`) to `path`.
fn write_lines(path: &Path, lines: u64) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for id in 0..lines {
        let (_, value) = kafka::record(id, VALUE_SIZE);
        out.write_all(value.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

fn show_opt(value: Option<f64>) -> String {
    value.map_or("—".into(), |v| format!("{v:.2}"))
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
