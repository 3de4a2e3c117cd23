//! The three systems under test, each started as its own process so memory is measured the same
//! way: wasm-connect (the release binary, with the `datagen` and `file-sink` plugins), the
//! native baseline (this binary's `native-source` / `native-sink` commands: rdkafka directly),
//! and Apache Kafka Connect 4.x standalone (`VerifiableSourceConnector`, `FileStreamSink`).

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
    KafkaConnect,
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
            System::NoOpPlugin => "wasm-connect, no-op plugin",
        }
    }
}

/// Where things are.
pub struct Env {
    pub bootstrap: String,
    pub repo: PathBuf,
    /// The wasm-connect binary.
    pub worker: PathBuf,
    /// Kafka Connect's jars (none: skip Kafka Connect).
    pub connect_libs: Option<PathBuf>,
}

/// A running system.
pub struct Running {
    child: Child,
    /// When it was started (ms since the epoch).
    pub started_ms: i64,
    pub log: PathBuf,
}

impl Running {
    fn spawn(mut command: Command, log: PathBuf) -> Result<Self> {
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
        })
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

    /// The worker's REST address (wasm-connect logs it once running).
    pub fn rest_url(&mut self, timeout: Duration) -> Result<String> {
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

fn write_properties(path: &Path, pairs: &[(&str, String)]) -> Result<()> {
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
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// What to run.
pub enum Job<'a> {
    /// Write `count` records of about `value_size` bytes to `topic` with `tasks` tasks (the
    /// no-op source writes until it is stopped; the harness counts `count` of them).
    Source {
        topic: &'a str,
        count: u64,
        tasks: u32,
        value_size: usize,
    },
    /// Copy `topic` (`count` records) into `file`, one value per line.
    Sink {
        topic: &'a str,
        count: u64,
        file: &'a Path,
    },
    /// `tasks` datagen tasks writing one record a second each to `topic`, until killed.
    Density { topic: &'a str, tasks: u32 },
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
            System::KafkaConnect => self.start_kafka_connect(job, dir),
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
        let connector = dir.join("connector.properties");
        let pairs: Vec<(&str, String)> = match job {
            Job::Source {
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
            Job::Sink { topic, .. } if no_op => vec![
                ("name", sink_name(dir)),
                ("connector.class", "bench-sink".into()),
                ("topics", (*topic).into()),
            ],
            Job::Density { .. } if no_op => bail!("the density workload runs datagen only"),
            Job::Source {
                topic,
                count,
                tasks,
                value_size,
            } => vec![
                ("name", "bench-source".into()),
                ("connector.class", "datagen".into()),
                ("tasks.max", tasks.to_string()),
                ("topic", (*topic).into()),
                ("count", count.to_string()),
                ("value.size", value_size.to_string()),
            ],
            Job::Sink { topic, file, .. } => vec![
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
        write_properties(&connector, &pairs)?;
        let mut command = Command::new(&self.worker);
        command
            .arg("standalone")
            .arg(&worker)
            .arg(&connector)
            .current_dir(dir)
            .env("RUST_LOG", "warn,wasm_connect=info");
        Running::spawn(command, dir.join("wasm-connect.log"))
    }

    /// Create what `start` needs for `system` before it runs `job`.
    pub async fn prepare(&self, system: System, job: &Job<'_>) -> Result<()> {
        if let (System::Native, Job::Source { topic, .. }) = (system, job) {
            kafka::create_topic(&self.bootstrap, &warm_up_topic(topic)).await?;
        }
        Ok(())
    }

    fn start_native(&self, job: &Job<'_>, dir: &Path) -> Result<Running> {
        let mut command = Command::new(std::env::current_exe()?);
        match job {
            Job::Source {
                topic,
                count,
                value_size,
                ..
            } => command.args([
                "native-source",
                &self.bootstrap,
                topic,
                &count.to_string(),
                &value_size.to_string(),
                &warm_up_topic(topic),
            ]),
            Job::Sink { topic, count, file } => command.args([
                "native-sink",
                &self.bootstrap,
                topic,
                &count.to_string(),
                &file.display().to_string(),
            ]),
            Job::Density { .. } => bail!("the density workload is wasm-connect only"),
        };
        Running::spawn(command, dir.join("native.log"))
    }

    fn start_kafka_connect(&self, job: &Job<'_>, dir: &Path) -> Result<Running> {
        let libs = self
            .connect_libs
            .as_ref()
            .context("Kafka Connect's jars are not available")?;
        let string = "org.apache.kafka.connect.storage.StringConverter".to_owned();
        let mut worker = vec![
            ("bootstrap.servers", self.bootstrap.clone()),
            ("key.converter", string.clone()),
            ("value.converter", string.clone()),
            (
                "offset.storage.file.filename",
                dir.join("offsets").display().to_string(),
            ),
            ("offset.flush.interval.ms", "1000".into()),
            ("listeners", format!("http://127.0.0.1:{}", free_port()?)),
        ];
        let connector: Vec<(&str, String)> = match job {
            Job::Source { topic, tasks, .. } => {
                // Verifiable records carry a long; with JSON and its schema envelope the value is
                // about 60 bytes (the table reports the sizes measured in the topic).
                worker.push((
                    "value.converter",
                    "org.apache.kafka.connect.json.JsonConverter".into(),
                ));
                vec![
                    ("name", "bench-source".into()),
                    (
                        "connector.class",
                        "org.apache.kafka.connect.tools.VerifiableSourceConnector".into(),
                    ),
                    ("tasks.max", tasks.to_string()),
                    ("topic", (*topic).into()),
                    ("throughput", "-1".into()),
                ]
            }
            Job::Sink { topic, file, .. } => vec![
                ("name", sink_name(dir)),
                (
                    "connector.class",
                    "org.apache.kafka.connect.file.FileStreamSinkConnector".into(),
                ),
                ("topics", (*topic).into()),
                ("file", file.display().to_string()),
            ],
            Job::Density { .. } => bail!("the density workload is wasm-connect only"),
        };
        // Later keys win in Java properties files.
        let worker_file = dir.join("connect-standalone.properties");
        write_properties(&worker_file, &worker)?;
        let connector_file = dir.join("connector.properties");
        write_properties(&connector_file, &connector)?;
        let log4j = dir.join("log4j2.properties");
        fs::write(
            &log4j,
            "rootLogger.level = warn\nrootLogger.appenderRef.out.ref = out\nappender.out.type = Console\nappender.out.target = SYSTEM_ERR\nappender.out.name = out\nappender.out.layout.type = PatternLayout\nappender.out.layout.pattern = %d %p %c %m%n\n",
        )?;
        let mut command = Command::new("java");
        command
            // connect-standalone.sh's heap settings.
            .args(["-Xms256M", "-Xmx2G"])
            .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
            .arg("-cp")
            .arg(format!("{}/*", libs.display()))
            .arg("org.apache.kafka.connect.cli.ConnectStandalone")
            .arg(&worker_file)
            .arg(&connector_file)
            .current_dir(dir);
        // VerifiableSourceTask prints every record to stdout: keep that out of the log.
        let out = fs::File::create("/dev/null")?;
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
        })
    }
}

/// Where the native source sends its warm-up record (`native::warm`) before a run to `topic`.
fn warm_up_topic(topic: &str) -> String {
    format!("{topic}-warm-up")
}
