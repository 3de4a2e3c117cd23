//! The systems under test, each started as its own process so memory and CPU are measured the
//! same way: wasm-connect (the release binary, with the `datagen`, `file-source` and `file-sink`
//! plugins, or the no-op `bench-*` plugins), the native baseline (this binary's `native-source`
//! / `native-sink` commands: rdkafka directly), and Apache Kafka Connect 4.x standalone
//! (`FileStreamSource`, `FileStreamSink`, and the harness's own Java connectors in
//! `bench/connect-sinks`: a no-op sink, a buffered file sink and a paced source), at Connect's
//! defaults, tuned (its producer and consumer given the settings wasm-connect's use,
//! [`CONNECT_TUNED`]) and tuned with a small heap.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::kafka;
use crate::measure::{now_ms, status_kib};

/// Which system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    WasmConnect,
    Native,
    /// Kafka Connect at its defaults.
    KafkaConnect,
    /// Kafka Connect with [`CONNECT_TUNED`].
    KafkaConnectTuned,
    /// Kafka Connect with [`CONNECT_TUNED`] and a 256 MiB heap (`-Xmx256m`): its memory when
    /// held to a size a container would give it, and whether its throughput holds there.
    KafkaConnectSmallHeap,
    /// wasm-connect running `bench-source` or `bench-sink`, which do no work of their own: the
    /// most any plugin can reach through this host and contract version.
    NoOpPlugin,
}

impl System {
    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            System::WasmConnect => "wasm-connect",
            System::Native => "native rdkafka",
            System::KafkaConnect => "Kafka Connect",
            System::KafkaConnectTuned => "Kafka Connect, tuned",
            System::KafkaConnectSmallHeap => "Kafka Connect, tuned, -Xmx256m",
            System::NoOpPlugin => "wasm-connect, no-op plugin",
        }
    }

    /// Whether this is Kafka Connect (either way).
    pub fn is_connect(self) -> bool {
        matches!(
            self,
            System::KafkaConnect | System::KafkaConnectTuned | System::KafkaConnectSmallHeap
        )
    }
}

/// Kafka Connect's worker settings for its clients that match wasm-connect's
/// (`wasm_connect::kafka::producer::SETTINGS`: 1 MiB batches, 5 ms linger, idempotence with 5
/// requests in flight, a 1 GiB buffer; sink batches of `sink.batch.max.records`). Connect's own
/// defaults differ: 16 KiB batches and one request in flight for source producers.
pub const CONNECT_TUNED: &[(&str, &str)] = &[
    ("producer.batch.size", "1048576"),
    ("producer.linger.ms", "5"),
    ("producer.acks", "all"),
    ("producer.enable.idempotence", "true"),
    ("producer.max.in.flight.requests.per.connection", "5"),
    ("producer.buffer.memory", "1073741824"),
    ("consumer.max.poll.records", "2000"),
];

/// `connect-standalone.sh`'s (and `connect-distributed.sh`'s) heap settings.
pub const CONNECT_HEAP: &[&str] = &["-Xms256M", "-Xmx2G"];

/// Where things are.
pub struct Env {
    pub bootstrap: String,
    pub repo: PathBuf,
    /// The wasm-connect binary.
    pub worker: PathBuf,
    /// Kafka Connect's jars (none: skip Kafka Connect).
    pub connect_libs: Option<PathBuf>,
    /// The compiled benchmark sinks for Kafka Connect (`bench/connect-sinks/`).
    pub connect_sinks: Option<PathBuf>,
    /// The producers' `compression.type` in the source runs started from now on, on every
    /// system alike (`None`: none, the producers' default).
    pub compression: Option<&'static str>,
}

/// Compile the benchmark's Kafka Connect sinks (`bench/connect-sinks/`) against `libs` into
/// `out`; returns the class directory.
pub fn compile_connect_sinks(repo: &Path, libs: &Path, out: &Path) -> Result<PathBuf> {
    let sources = repo.join("bench/connect-sinks/wasmconnect/bench");
    let files: Vec<PathBuf> = fs::read_dir(&sources)
        .with_context(|| format!("cannot list {}", sources.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    let status = Command::new("javac")
        .arg("-d")
        .arg(out)
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .args(&files)
        .status()
        .context("cannot run javac (a JDK 17+ must be on PATH)")?;
    if !status.success() {
        bail!("javac failed on {} ({status})", sources.display());
    }
    Ok(out.to_owned())
}

/// A running system.
pub struct Running {
    child: Child,
    /// When it was started (ms since the epoch).
    pub started_ms: i64,
    pub log: PathBuf,
    /// Kafka Connect's REST address (wasm-connect's is read from its log: [`Running::rest_url`]).
    pub rest: Option<String>,
}

impl Running {
    /// Start `command` with its stdout and stderr in `log`.
    pub fn spawn(mut command: Command, log: PathBuf) -> Result<Self> {
        let out = fs::File::create(&log)?;
        let started_ms = now_ms();
        let child = command
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out))
            .spawn()
            .with_context(|| format!("cannot start {command:?}"))?;
        Ok(Self {
            child,
            started_ms,
            log,
            rest: None,
        })
    }

    /// CPU seconds the process has used so far.
    pub fn cpu_seconds(&self) -> Option<f64> {
        crate::measure::cpu_seconds(self.child.id())
    }

    /// Peak resident memory so far, in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        status_kib(self.child.id(), "VmHWM:")
    }

    /// Current resident memory, in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        status_kib(self.child.id(), "VmRSS:")
    }

    /// Fail (with the end of its log) if the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let log = fs::read_to_string(&self.log).unwrap_or_default();
            let tail: String = log
                .lines()
                .rev()
                .take(30)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            bail!("{} exited ({status}):\n{tail}", self.log.display());
        }
        Ok(())
    }

    /// Whether the process has exited successfully (an unsuccessful exit is an error).
    pub fn exited_cleanly(&mut self) -> Result<bool> {
        match self.child.try_wait()? {
            Some(status) if status.success() => Ok(true),
            Some(_) => self.check_alive().map(|()| false),
            None => Ok(false),
        }
    }

    /// Kill the process (measurements are taken by then).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Wait for the process to exit on its own; its log.
    pub fn wait(mut self, timeout: Duration) -> Result<String> {
        let deadline = std::time::Instant::now() + timeout;
        while self.child.try_wait()?.is_none() {
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("{} did not finish within {timeout:?}", self.log.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(fs::read_to_string(&self.log)?)
    }

    /// The worker's REST address (Kafka Connect's is chosen when it starts; wasm-connect logs
    /// its own once running).
    pub fn rest_url(&mut self, timeout: Duration) -> Result<String> {
        if let Some(rest) = &self.rest {
            return Ok(rest.clone());
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            self.check_alive()?;
            let log = fs::read_to_string(&self.log).unwrap_or_default();
            if let Some(start) = log.find("REST API at ") {
                let rest = &log[start + "REST API at ".len()..];
                if let Some(end) = rest.find(',') {
                    return Ok(rest[..end].trim().to_owned());
                }
            }
            if std::time::Instant::now() > deadline {
                bail!("wasm-connect did not start within {timeout:?}:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Write `pairs` as a Java properties file.
pub fn write_properties(path: &Path, pairs: &[(&str, String)]) -> Result<()> {
    let text: String = pairs.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// A sink connector's name, unique per run of the harness and per run dir (its consumer group
/// is `connect-<name>`, and committed offsets of an earlier run must not be found).
pub fn sink_name(dir: &Path) -> String {
    let part = |p: Option<&Path>| {
        p.and_then(Path::file_name).map_or(String::new(), |n| {
            n.to_string_lossy().trim_start_matches('.').to_owned()
        })
    };
    format!("bench-{}-{}", part(dir.parent()), part(Some(dir)))
}

/// A free loopback port (for Kafka Connect's REST listener).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// What to run.
pub enum Job<'a> {
    /// Generate records of about `value_size` bytes into `topic` with `tasks` tasks: `count` of
    /// them, or until stopped (`None`; the no-op source always writes until stopped).
    Generate {
        topic: &'a str,
        count: Option<u64>,
        tasks: u32,
        value_size: usize,
    },
    /// Read the lines of `file` into `topic` (one task); values through the JSON converter
    /// with its schema envelope when `json`, else the string converter; through
    /// [`TRANSFORM_CHAIN`] first when `transforms`.
    ReadFile {
        topic: &'a str,
        file: &'a Path,
        json: bool,
        transforms: bool,
    },
    /// Consume `topic` (a group of its own) into `output` with `tasks` tasks (the native
    /// baseline: consumer threads), until stopped. More than one task only drops records.
    Sink {
        topic: &'a str,
        output: SinkOutput<'a>,
        tasks: u32,
    },
    /// `tasks` datagen tasks writing one record a second each to `topic`, until killed.
    Density { topic: &'a str, tasks: u32 },
    /// One task writing `rate` records a second to `topic`, each value starting with the time
    /// it was due: `bench-source` for wasm-connect (the no-op plugin), the benchmark's
    /// `RateSourceConnector` for Kafka Connect.
    Stamped { topic: &'a str, rate: u32 },
    /// `count` connectors of one task each, every one writing `rate` records a second of 100
    /// bytes to `topic`, until killed: `datagen` for wasm-connect, the benchmark's
    /// `RateSourceConnector` for Kafka Connect.
    Connectors {
        topic: &'a str,
        count: u32,
        rate: u32,
    },
}

/// The transforms of the transform workload, the same keys for wasm-connect and Kafka Connect:
/// three of the commonest, each line wrapped in a struct, a static field added, the line's
/// field renamed.
pub const TRANSFORM_CHAIN: &[(&str, &str)] = &[
    ("transforms", "hoist,insert,rename"),
    (
        "transforms.hoist.type",
        "org.apache.kafka.connect.transforms.HoistField$Value",
    ),
    ("transforms.hoist.field", "line"),
    (
        "transforms.insert.type",
        "org.apache.kafka.connect.transforms.InsertField$Value",
    ),
    ("transforms.insert.static.field", "origin"),
    ("transforms.insert.static.value", "bench"),
    (
        "transforms.rename.type",
        "org.apache.kafka.connect.transforms.ReplaceField$Value",
    ),
    ("transforms.rename.renames", "line:message"),
];

/// The connector configurations of a [`Job::Connectors`], `class` being the connector class.
fn rate_connectors(
    topic: &str,
    count: u32,
    rate: u32,
    class: &str,
) -> Vec<Vec<(&'static str, String)>> {
    (0..count)
        .map(|i| {
            vec![
                ("name", format!("bench-density-{i}")),
                ("connector.class", class.to_owned()),
                ("tasks.max", "1".to_owned()),
                ("topic", topic.to_owned()),
                ("rate", rate.to_string()),
                ("value.size", "100".to_owned()),
            ]
        })
        .collect()
}

/// Write `connectors` to `connector-<i>.properties` in `dir`; their paths.
fn write_connectors(dir: &Path, connectors: &[Vec<(&str, String)>]) -> Result<Vec<PathBuf>> {
    connectors
        .iter()
        .enumerate()
        .map(|(i, pairs)| {
            let path = dir.join(format!("connector-{i}.properties"));
            write_properties(&path, pairs)?;
            Ok(path)
        })
        .collect()
}

/// What a sink does with the records.
#[derive(Clone, Copy)]
pub enum SinkOutput<'a> {
    /// Drop them: wasm-connect's `bench-sink`, the native consumer counting, Connect's
    /// `NoOpSinkTask` (`bench/connect-sinks/`). The native and Connect ones write how many they
    /// were handed to `progress`.
    Drop { progress: &'a Path },
    /// Append each value as a line to `file`, buffered: `file-sink`, the native consumer,
    /// `BufferedFileSinkTask` for Connect.
    File { file: &'a Path },
    /// Connect's own `FileStreamSink` into `file` (one write per record).
    FileStream { file: &'a Path },
}

impl Env {
    /// Start `system` on `job` in `dir`; `data` is wasm-connect's data directory (its compile
    /// cache makes a warm start).
    pub fn start(&self, system: System, job: &Job<'_>, dir: &Path, data: &Path) -> Result<Running> {
        fs::create_dir_all(dir)?;
        // Sink connectors consume as group `connect-<name>`: every run needs its own.
        match system {
            System::WasmConnect => self.start_wasm_connect(job, dir, data, false),
            System::NoOpPlugin => self.start_wasm_connect(job, dir, data, true),
            System::Native => self.start_native(job, dir),
            System::KafkaConnect => self.start_kafka_connect(job, dir, false, CONNECT_HEAP),
            System::KafkaConnectTuned => self.start_kafka_connect(job, dir, true, CONNECT_HEAP),
            System::KafkaConnectSmallHeap => {
                self.start_kafka_connect(job, dir, true, &["-Xms256M", "-Xmx256M"])
            }
        }
    }

    fn start_wasm_connect(
        &self,
        job: &Job<'_>,
        dir: &Path,
        data: &Path,
        no_op: bool,
    ) -> Result<Running> {
        let plugins = if no_op {
            "dist/bench-plugins"
        } else {
            "dist/plugins"
        };
        let worker = dir.join("worker.properties");
        let mut settings = vec![
            ("bootstrap.servers", self.bootstrap.clone()),
            ("plugin.path", self.repo.join(plugins).display().to_string()),
            ("data.dir", data.display().to_string()),
            ("listeners", "http://127.0.0.1:0".into()),
            ("offset.flush.interval.ms", "1000".into()),
            ("key.converter", "string".into()),
            ("value.converter", "string".into()),
        ];
        if let Some(codec) = self.compression {
            settings.push(("producer.compression.type", codec.to_owned()));
        }
        if let Job::Density { tasks, .. } = job {
            // Admission: room for every task in one connector, and a memory budget that is
            // exactly the sum of their limits.
            let memory = u64::from(*tasks) * crate::workloads::DENSITY_MEMORY_LIMIT;
            settings.extend([
                ("tasks.max.per.worker", tasks.to_string()),
                ("tasks.max.per.connector", tasks.to_string()),
                ("sandbox.memory.budget.bytes", memory.to_string()),
            ]);
        }
        write_properties(&worker, &settings)?;
        let pairs: Vec<(&str, String)> = match job {
            Job::Stamped { topic, rate } if no_op => vec![
                ("name", "bench-source".into()),
                ("connector.class", "bench-source".into()),
                ("tasks.max", "1".into()),
                ("topic", (*topic).into()),
                ("record.size", "100".into()),
                ("key", "1234567".into()),
                ("rate", rate.to_string()),
                ("stamp", "true".into()),
            ],
            Job::Stamped { .. } => bail!("the latency workload runs the no-op plugin"),
            Job::Connectors { .. } if no_op => bail!("no no-op plugin for this workload"),
            Job::Connectors { topic, count, rate } => {
                let files =
                    write_connectors(dir, &rate_connectors(topic, *count, *rate, "datagen"))?;
                return self.spawn_wasm_connect(&worker, &files, dir);
            }
            Job::Generate {
                topic,
                tasks,
                value_size,
                ..
            } if no_op => vec![
                // Writes until it is stopped; the harness counts what reached the topic.
                ("name", "bench-source".into()),
                ("connector.class", "bench-source".into()),
                ("tasks.max", tasks.to_string()),
                ("topic", (*topic).into()),
                ("record.size", value_size.to_string()),
                // About as long as datagen's keys in this run (the record number as text).
                ("key", "1234567".into()),
            ],
            Job::Sink {
                topic,
                output: SinkOutput::Drop { .. },
                tasks,
            } if no_op => vec![
                ("name", sink_name(dir)),
                ("connector.class", "bench-sink".into()),
                ("tasks.max", tasks.to_string()),
                ("topics", (*topic).into()),
            ],
            Job::Sink {
                output: SinkOutput::Drop { .. } | SinkOutput::FileStream { .. },
                ..
            } => {
                bail!("wasm-connect drops records with the no-op plugin, and has no FileStreamSink")
            }
            Job::Density { .. } | Job::ReadFile { .. } | Job::Sink { .. } if no_op => {
                bail!("no no-op plugin for this workload")
            }
            Job::Generate {
                topic,
                count,
                tasks,
                value_size,
            } => vec![
                ("name", "bench-source".into()),
                ("connector.class", "datagen".into()),
                ("tasks.max", tasks.to_string()),
                ("topic", (*topic).into()),
                ("count", count.map_or("-1".into(), |c| c.to_string())),
                ("value.size", value_size.to_string()),
            ],
            Job::ReadFile {
                topic,
                file,
                json,
                transforms,
            } => {
                let mut pairs = vec![
                    ("name", "bench-source".into()),
                    ("connector.class", "file-source".into()),
                    ("topic", (*topic).into()),
                    ("files", file.display().to_string()),
                    ("tail", "false".into()),
                    (
                        "sandbox.fs.read",
                        file.parent().unwrap_or(dir).display().to_string(),
                    ),
                ];
                if *json {
                    pairs.extend([
                        ("value.converter", "json".into()),
                        ("value.converter.schemas.enable", "true".into()),
                    ]);
                }
                if *transforms {
                    pairs.extend(TRANSFORM_CHAIN.iter().map(|(k, v)| (*k, v.to_string())));
                }
                pairs
            }
            Job::Sink {
                topic,
                output: SinkOutput::File { file },
                ..
            } => vec![
                ("name", sink_name(dir)),
                ("connector.class", "file-sink".into()),
                ("topics", (*topic).into()),
                ("file", file.display().to_string()),
                (
                    "sandbox.fs.write",
                    file.parent().unwrap_or(dir).display().to_string(),
                ),
            ],
            Job::Density { topic, tasks } => vec![
                ("name", "bench-density".into()),
                ("connector.class", "datagen".into()),
                ("tasks.max", tasks.to_string()),
                ("topic", (*topic).into()),
                (
                    "rate",
                    (tasks * crate::workloads::DENSITY_RATE_PER_TASK).to_string(),
                ),
                ("value.size", "100".into()),
                (
                    "sandbox.memory.max.bytes",
                    crate::workloads::DENSITY_MEMORY_LIMIT.to_string(),
                ),
            ],
        };
        let connector = dir.join("connector.properties");
        write_properties(&connector, &pairs)?;
        self.spawn_wasm_connect(&worker, &[connector], dir)
    }

    /// Start wasm-connect standalone in `dir` with `worker`'s settings and `connectors`.
    pub fn spawn_wasm_connect(
        &self,
        worker: &Path,
        connectors: &[PathBuf],
        dir: &Path,
    ) -> Result<Running> {
        let mut command = Command::new(&self.worker);
        command
            .arg("standalone")
            .arg(worker)
            .args(connectors)
            .current_dir(dir)
            .env("RUST_LOG", "warn,wasm_connect=info");
        Running::spawn(command, dir.join("wasm-connect.log"))
    }

    /// Create what `start` needs for `system` before it runs `job`.
    pub async fn prepare(&self, system: System, job: &Job<'_>) -> Result<()> {
        if let (System::Native, Job::Generate { topic, .. }) = (system, job) {
            kafka::create_topic(&self.bootstrap, &warm_up_topic(topic), 1).await?;
        }
        Ok(())
    }

    fn start_native(&self, job: &Job<'_>, dir: &Path) -> Result<Running> {
        let mut command = Command::new(std::env::current_exe()?);
        match job {
            Job::Generate {
                topic,
                count,
                value_size,
                tasks,
            } => command.args([
                "native-source",
                &self.bootstrap,
                topic,
                &count.unwrap_or(0).to_string(),
                &value_size.to_string(),
                &warm_up_topic(topic),
                &tasks.to_string(),
                self.compression.unwrap_or("none"),
            ]),
            Job::ReadFile { .. } => bail!("the native baseline does not read files"),
            Job::Sink {
                topic,
                output,
                tasks,
            } => {
                let (file, mode) = match output {
                    SinkOutput::Drop { progress } => (progress, "drop"),
                    SinkOutput::File { file } => (file, "file"),
                    SinkOutput::FileStream { .. } => bail!("FileStreamSink is Kafka Connect's"),
                };
                command.args([
                    "native-sink",
                    &self.bootstrap,
                    topic,
                    "0",
                    &file.display().to_string(),
                    mode,
                    &tasks.to_string(),
                ])
            }
            Job::Density { .. } | Job::Connectors { .. } | Job::Stamped { .. } => {
                bail!("the density and latency workloads are wasm-connect's and Kafka Connect's")
            }
        };
        Running::spawn(command, dir.join("native.log"))
    }

    fn start_kafka_connect(
        &self,
        job: &Job<'_>,
        dir: &Path,
        tuned: bool,
        heap: &[&str],
    ) -> Result<Running> {
        let string = "org.apache.kafka.connect.storage.StringConverter".to_owned();
        let rest = format!("http://127.0.0.1:{}", free_port()?);
        let mut worker = vec![
            ("bootstrap.servers", self.bootstrap.clone()),
            ("key.converter", string.clone()),
            ("value.converter", string.clone()),
            (
                "offset.storage.file.filename",
                dir.join("offsets").display().to_string(),
            ),
            ("offset.flush.interval.ms", "1000".into()),
            ("listeners", rest.clone()),
        ];
        if tuned {
            worker.extend(CONNECT_TUNED.iter().map(|(k, v)| (*k, (*v).to_owned())));
        }
        if let Some(codec) = self.compression {
            worker.push(("producer.compression.type", codec.to_owned()));
        }
        let connectors: Vec<Vec<(&str, String)>> = match job {
            Job::Connectors { topic, count, rate } => rate_connectors(
                topic,
                *count,
                *rate,
                "wasmconnect.bench.RateSourceConnector",
            ),
            Job::Stamped { topic, rate } => {
                let mut connector =
                    rate_connectors(topic, 1, *rate, "wasmconnect.bench.RateSourceConnector");
                connector[0].push(("stamp", "true".into()));
                connector
            }
            _ => vec![self.connect_connector(job, dir)?],
        };
        // Later keys win in Java properties files.
        let worker_file = dir.join("connect-standalone.properties");
        write_properties(&worker_file, &worker)?;
        let connector_files = write_connectors(dir, &connectors)?;
        let mut command = self.kafka_connect_java(dir, heap, "ConnectStandalone")?;
        command.arg(&worker_file).args(&connector_files);
        let out = fs::File::create(dir.join("kafka-connect.out"))?;
        let log = dir.join("kafka-connect.log");
        let err = fs::File::create(&log)?;
        let started_ms = now_ms();
        let child = command
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .context("cannot start java (Kafka Connect)")?;
        Ok(Running {
            child,
            started_ms,
            log,
            rest: Some(rest),
        })
    }
    /// A `java` command running Kafka Connect's `org.apache.kafka.connect.cli.<main>`
    /// (`ConnectStandalone` or `ConnectDistributed`) in `dir` with the JVM options `heap`, its
    /// jars and the benchmark's connectors on the class path, logging warnings and errors to
    /// stderr.
    pub fn kafka_connect_java(&self, dir: &Path, heap: &[&str], main: &str) -> Result<Command> {
        let libs = self
            .connect_libs
            .as_ref()
            .context("Kafka Connect's jars are not available")?;
        let log4j = dir.join("log4j2.properties");
        fs::write(
            &log4j,
            "rootLogger.level = warn\nrootLogger.appenderRef.out.ref = out\nappender.out.type = Console\nappender.out.target = SYSTEM_ERR\nappender.out.name = out\nappender.out.layout.type = PatternLayout\nappender.out.layout.pattern = %d %p %c %m%n\n",
        )?;
        let mut command = Command::new("java");
        command
            .args(heap)
            .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
            .arg("-cp")
            .arg(format!(
                "{}/*:{}",
                libs.display(),
                self.connect_sinks.as_deref().unwrap_or(libs).display()
            ))
            .arg(format!("org.apache.kafka.connect.cli.{main}"))
            .current_dir(dir);
        Ok(command)
    }

    /// Kafka Connect's connector configuration for `job` (one connector).
    fn connect_connector(&self, job: &Job<'_>, dir: &Path) -> Result<Vec<(&'static str, String)>> {
        Ok(match job {
            Job::ReadFile {
                topic,
                file,
                json,
                transforms,
            } => {
                let mut pairs = vec![
                    ("name", "bench-source".into()),
                    (
                        "connector.class",
                        "org.apache.kafka.connect.file.FileStreamSourceConnector".into(),
                    ),
                    ("topic", (*topic).into()),
                    ("file", file.display().to_string()),
                    // As many records per poll as wasm-connect asks of a plugin
                    // (`source.poll.max.records`); also Connect's default.
                    ("batch.size", "2000".into()),
                ];
                if *json {
                    pairs.extend([
                        (
                            "value.converter",
                            "org.apache.kafka.connect.json.JsonConverter".into(),
                        ),
                        ("value.converter.schemas.enable", "true".into()),
                    ]);
                }
                if *transforms {
                    pairs.extend(TRANSFORM_CHAIN.iter().map(|(k, v)| (*k, v.to_string())));
                }
                pairs
            }
            Job::Generate { .. } => bail!("Kafka Connect has no record generator to match datagen"),
            Job::Sink {
                topic,
                output,
                tasks,
            } => {
                let (class, key, path) = match output {
                    SinkOutput::Drop { progress } => (
                        "wasmconnect.bench.NoOpSinkConnector",
                        "progress.file",
                        progress,
                    ),
                    SinkOutput::File { file } => {
                        ("wasmconnect.bench.BufferedFileSinkConnector", "file", file)
                    }
                    SinkOutput::FileStream { file } => (
                        "org.apache.kafka.connect.file.FileStreamSinkConnector",
                        "file",
                        file,
                    ),
                };
                vec![
                    ("name", sink_name(dir)),
                    ("connector.class", class.into()),
                    ("tasks.max", tasks.to_string()),
                    ("topics", (*topic).into()),
                    (key, path.display().to_string()),
                ]
            }
            Job::Density { .. } | Job::Connectors { .. } | Job::Stamped { .. } => {
                bail!("the density and latency workloads are set up in start_kafka_connect")
            }
        })
    }
}

/// Where the native source sends its warm-up record (`native::warm`) before a run to `topic`.
fn warm_up_topic(topic: &str) -> String {
    format!("{topic}-warm-up")
}
