//! The PostgreSQL workloads (`--only postgres`): wasm-connect's `postgres-source` and
//! `postgres-sink` against a native program doing the same queries with the same client
//! (`wasm-connect-postgres-wire`, compiled natively) and the same Kafka client settings, on the
//! server `scripts/postgres` runs.
//!
//! - **source**: one table of [`ROWS_FULL`] rows (six columns of the common types: `bigint`
//!   key, `text`, `numeric(12,2)`, `boolean`, `timestamp`, nullable `text`) read in
//!   `incrementing` mode, [`BATCH_ROWS`] rows a query, into a topic as JSON with schemas (the
//!   JsonConverter envelope, key and value). The native program runs the plugin's queries
//!   (`SELECT ... WHERE id > $1 ORDER BY id LIMIT n`), writes the same envelopes (checked: the
//!   first record of both topics must be the same bytes) and sends them with the worker's
//!   producer settings. Measured from the first record in the topic to the last, by the
//!   partition's high watermark.
//! - **sink**: that topic written into a new table by upsert on the key (`insert.mode=upsert`,
//!   `pk.mode=record_key`), [`SINK_BATCH`] rows a statement: per batch `BEGIN`, one pipelined
//!   `SAVEPOINT` / multi-row `INSERT ... ON CONFLICT DO UPDATE` / `RELEASE`, `COMMIT`, as the
//!   plugin does. Measured from the first row written to the last by a column the server fills
//!   (`loaded_at DEFAULT clock_timestamp()`), so neither program's clock is trusted; the copy is
//!   then compared with the source table row by row.
//!
//! CPU is the measured program's own over the same span; the database server's is not counted
//! (it does the same work for both).

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer as _, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use serde::{Deserialize, Serialize};
use wasm_connect_postgres_wire::{Client, Config, Statement, quote_ident, values};

use crate::kafka;
use crate::measure::now_ms;
use crate::systems::{Env, Running, sink_name, write_properties};
use crate::workloads::Run;

/// The source workload's key in the report.
pub const SOURCE: &str = "postgres-source";

/// The sink workload's key in the report.
pub const SINK: &str = "postgres-sink";

/// The native program's name in the report.
pub const NATIVE: &str = "native postgres-wire + rdkafka";

/// The wasm-connect worker's name in the report.
pub const WASM: &str = "wasm-connect";

/// Rows of the table in a full run.
pub const ROWS_FULL: u64 = 1_000_000;

/// Rows in a `--quick` run.
pub const ROWS_QUICK: u64 = 400_000;

/// Rows in a smoke run.
pub const ROWS_SMOKE: u64 = 5_000;

/// `batch.max.rows` of the source: rows a query returns (Kafka Connect's JDBC source defaults to
/// 100, which its users raise for bulk loads).
pub const BATCH_ROWS: u32 = 5_000;

/// `batch.size` of the sink: rows a statement writes (the plugin's default, as Kafka Connect's
/// JDBC sink's).
pub const SINK_BATCH: usize = 3_000;

/// How often progress and CPU time are sampled.
const SAMPLE: Duration = Duration::from_millis(100);

/// How long a run may take before it fails.
const PATIENCE: Duration = Duration::from_secs(600);

/// The table's columns as `SELECT` lists them.
const COLUMNS: &str = r#""id", "name", "amount", "active", "created_at", "note""#;

/// The table's definition (also the copy's, which adds `loaded_at`).
const TABLE_COLUMNS: &str = "id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12,2) NOT NULL, \
     active boolean NOT NULL, created_at timestamp NOT NULL, note text";

/// The key's schema as `postgres-source` gives it (the JsonConverter's form).
const KEY_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"rows"}"#;

/// The value's schema as `postgres-source` gives it.
const VALUE_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":false,"field":"name"},{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},"field":"amount"},{"type":"boolean","optional":false,"field":"active"},{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"created_at"},{"type":"string","optional":true,"field":"note"}],"optional":false,"name":"rows"}"#;

/// The server of `scripts/postgres` (its port from `WASM_CONNECT_POSTGRES_PORT`, as there), as
/// the `connect` role.
pub fn login(dbname: &str) -> Config {
    Config {
        host: "127.0.0.1".to_owned(),
        port: std::env::var("WASM_CONNECT_POSTGRES_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(15432),
        dbname: dbname.to_owned(),
        user: "connect".to_owned(),
        password: Some("connect-secret".to_owned()),
        application_name: "wasm-connect-bench".to_owned(),
    }
}

fn connect(dbname: &str) -> Result<Client> {
    let config = login(dbname);
    Client::connect(&config).with_context(|| {
        format!(
            "cannot log in to PostgreSQL at {}:{} as connect (start it with `scripts/postgres start`)",
            config.host, config.port
        )
    })
}

/// A database of the run holding the source table `rows`.
pub struct Database {
    pub name: String,
    pub rows: u64,
}

impl Database {
    /// Create a new database with `rows` rows in table `rows`.
    pub fn create(rows: u64) -> Result<Self> {
        let name = format!("bench_{}", now_ms());
        let mut admin = connect("postgres")?;
        admin
            .simple_query(&format!("CREATE DATABASE {}", quote_ident(&name)))
            .context("cannot create the benchmark's database")?;
        admin.close();
        let mut client = connect(&name)?;
        // Every tenth note is NULL; names and notes vary in length like real text.
        client
            .simple_query(&format!(
                "CREATE TABLE public.rows ({TABLE_COLUMNS}); \
                 INSERT INTO public.rows \
                 SELECT g, 'customer-' || g, (g % 1000000) / 100.0 + 0.01, g % 2 = 0, \
                        timestamp '2026-01-01 00:00:00' + g * interval '1.001 second', \
                        CASE WHEN g % 10 = 0 THEN NULL ELSE md5(g::text) END \
                 FROM generate_series(1, {rows}) g"
            ))
            .context("cannot fill the benchmark's table")?;
        // (A statement of its own: VACUUM cannot run in the implicit transaction of several.)
        client
            .simple_query("VACUUM ANALYZE public.rows")
            .context("cannot vacuum the benchmark's table")?;
        client.close();
        Ok(Self { name, rows })
    }

    /// Drop the database (a run leaves nothing behind).
    pub fn drop_database(&self) {
        if let Ok(mut admin) = connect("postgres") {
            let _ = admin.simple_query(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                quote_ident(&self.name)
            ));
            admin.close();
        }
    }
}

/// What the native programs are told (one JSON argument).
#[derive(Serialize, Deserialize)]
pub struct NativeJob {
    pub bootstrap: String,
    pub topic: String,
    pub dbname: String,
    /// The sink's table.
    pub table: String,
    pub rows: u64,
}

/// CPU time of a process at a moment (ms since the epoch).
#[derive(Clone, Copy)]
struct CpuSample {
    at_ms: f64,
    cpu: f64,
}

/// The CPU time at `at_ms`, interpolated between the samples around it.
fn cpu_at(samples: &[CpuSample], at_ms: f64) -> Option<f64> {
    let after = samples.iter().position(|s| s.at_ms >= at_ms)?;
    if after == 0 {
        return Some(samples[0].cpu);
    }
    let (a, b) = (samples[after - 1], samples[after]);
    let span = b.at_ms - a.at_ms;
    Some(if span <= 0.0 {
        b.cpu
    } else {
        a.cpu + (b.cpu - a.cpu) * (at_ms - a.at_ms) / span
    })
}

/// Which program runs a workload.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Program {
    WasmConnect,
    Native,
}

impl Program {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Program::WasmConnect => WASM,
            Program::Native => NATIVE,
        }
    }

    /// Its short name in topics, tables and directories.
    fn tag(self) -> &'static str {
        match self {
            Program::WasmConnect => "wasm",
            Program::Native => "native",
        }
    }
}

/// The settings both connectors share: the login, the grant, JSON with schemas.
fn connector_common(db: &str) -> Vec<(&'static str, String)> {
    let config = login(db);
    vec![
        (
            "connection.url",
            format!("jdbc:postgresql://{}:{}/{db}", config.host, config.port),
        ),
        ("connection.user", config.user),
        ("connection.password", config.password.unwrap_or_default()),
        (
            "sandbox.net.connect",
            format!("{}:{}", config.host, config.port),
        ),
        ("key.converter", "json".into()),
        ("key.converter.schemas.enable", "true".into()),
        ("value.converter", "json".into()),
        ("value.converter.schemas.enable", "true".into()),
    ]
}

/// Start wasm-connect standalone in `dir` with one connector.
fn start_worker(env: &Env, dir: &Path, connector: &[(&str, String)]) -> Result<Running> {
    std::fs::create_dir_all(dir)?;
    let data = dir.join("data");
    std::fs::create_dir_all(&data)?;
    let worker = dir.join("worker.properties");
    write_properties(
        &worker,
        &[
            ("bootstrap.servers", env.bootstrap.clone()),
            (
                "plugin.path",
                env.repo.join("dist/plugins").display().to_string(),
            ),
            ("data.dir", data.display().to_string()),
            ("listeners", "http://127.0.0.1:0".into()),
            ("offset.flush.interval.ms", "1000".into()),
        ],
    )?;
    let file = dir.join("connector.properties");
    write_properties(&file, connector)?;
    env.spawn_wasm_connect(&worker, &[file], dir)
}

/// Start the native program `command` (`native-postgres-source` or `-sink`) on `job`.
fn start_native(dir: &Path, command: &str, job: &NativeJob) -> Result<Running> {
    std::fs::create_dir_all(dir)?;
    let mut native = Command::new(std::env::current_exe()?);
    native.arg(command).arg(serde_json::to_string(job)?);
    Running::spawn(native, dir.join("native.log"))
}

/// What one run measured.
struct Measured {
    rows: u64,
    seconds: f64,
    /// CPU seconds of the program over `seconds`.
    cpu: Option<f64>,
    peak_rss_kib: Option<u64>,
}

/// A run's row in the report.
fn run_row(workload: &str, program: Program, rep: usize, m: Measured, settings: String) -> Run {
    Run {
        workload: workload.to_owned(),
        system: program.name(),
        rep,
        records: m.rows,
        throughput: (m.seconds > 0.0).then(|| m.rows as f64 / m.seconds),
        startup_ms: None,
        peak_rss_kib: m.peak_rss_kib,
        value_bytes: None,
        seconds: Some(m.seconds),
        cpu_s_per_m: m.cpu.map(|c| c / (m.rows as f64 / 1e6)),
        broker_cpu_s_per_m: None,
        settings,
    }
}

/// One source run: `program` copies `db`'s table into a new topic; returns its row and the
/// topic.
pub async fn source(
    env: &Env,
    work: &Path,
    program: Program,
    db: &Database,
    rep: usize,
) -> Result<(Run, String)> {
    let tag = program.tag();
    let prefix = format!("bench-pg-{tag}-{rep}-{}-", now_ms());
    let topic = format!("{prefix}rows");
    kafka::create_topic(&env.bootstrap, &topic, 1).await?;
    let dir = work.join(format!("postgres-source-{tag}-{rep}"));
    let mut running = match program {
        Program::WasmConnect => {
            let mut connector = vec![
                ("name", format!("bench-pg-source-{rep}")),
                ("connector.class", "postgres-source".into()),
                ("tasks.max", "1".into()),
                ("table.include.list", "public.rows".into()),
                ("mode", "incrementing".into()),
                ("incrementing.column.name", "id".into()),
                ("batch.max.rows", BATCH_ROWS.to_string()),
                ("topic.prefix", prefix.clone()),
            ];
            connector.extend(connector_common(&db.name));
            start_worker(env, &dir, &connector)?
        }
        Program::Native => start_native(
            &dir,
            "native-postgres-source",
            &NativeJob {
                bootstrap: env.bootstrap.clone(),
                topic: topic.clone(),
                dbname: db.name.clone(),
                table: "rows".into(),
                rows: db.rows,
            },
        )?,
    };
    let outcome = measure_source(env, &mut running, &topic, db.rows).await;
    let peak = running.peak_rss_kib();
    running.kill();
    let (first, last) = outcome?;
    let row = run_row(
        SOURCE,
        program,
        rep,
        Measured {
            rows: last.records - first.records,
            seconds: (last.at_ms - first.at_ms) / 1000.0,
            cpu: Some(last.cpu - first.cpu),
            peak_rss_kib: peak,
        },
        format!("incrementing mode, batch.max.rows={BATCH_ROWS}, JSON with schemas"),
    );
    Ok((row, topic))
}

/// A progress sample of a source run.
#[derive(Clone, Copy)]
struct Progress {
    at_ms: f64,
    records: u64,
    cpu: f64,
}

/// Sample the topic's high watermark and the program's CPU time until `rows` records are in
/// the topic: the first sample with records in it, and the first with all of them.
async fn measure_source(
    env: &Env,
    running: &mut Running,
    topic: &str,
    rows: u64,
) -> Result<(Progress, Progress)> {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &env.bootstrap)
        .create()?;
    let started = Instant::now();
    let (mut first, mut previous) = (None, None);
    loop {
        if started.elapsed() > PATIENCE {
            bail!("{topic}: not all {rows} rows reached the topic within {PATIENCE:?}");
        }
        let (_, high) = reader
            .fetch_watermarks(topic, 0, Duration::from_secs(5))
            .with_context(|| format!("cannot read the watermarks of {topic}"))?;
        let sample = Progress {
            at_ms: now_ms() as f64,
            records: high.max(0) as u64,
            cpu: running.cpu_seconds().unwrap_or(0.0),
        };
        if sample.records >= rows {
            // (Only a smoke run's few rows arrive between two samples: then the span starts
            // at the sample before, or at the process's start.)
            let first = first.or(previous).unwrap_or(Progress {
                at_ms: running.started_ms as f64,
                records: 0,
                cpu: 0.0,
            });
            return Ok((first, sample));
        }
        if first.is_none() && sample.records > 0 {
            first = Some(sample);
        }
        previous = Some(sample);
        // Neither program exits on its own (the native ones wait to be killed when done, so
        // that their CPU time can still be read).
        running.check_alive()?;
        tokio::time::sleep(SAMPLE).await;
    }
}

/// One sink run: `program` writes the records of `topic` (a source run's output) into a new
/// table of `db`, compared with the source table afterwards.
pub async fn sink(
    env: &Env,
    work: &Path,
    program: Program,
    db: &Database,
    topic: &str,
    rep: usize,
) -> Result<Run> {
    let tag = program.tag();
    let table = format!("copy_{tag}_{rep}_{}", now_ms());
    let mut client = connect(&db.name)?;
    client
        .simple_query(&format!(
            "CREATE TABLE public.{table} ({TABLE_COLUMNS}, loaded_at timestamptz NOT NULL DEFAULT clock_timestamp())"
        ))
        .context("cannot create the sink's table")?;
    let dir = work.join(format!("postgres-sink-{tag}-{rep}"));
    let mut running = match program {
        Program::WasmConnect => {
            let mut connector = vec![
                ("name", sink_name(&dir)),
                ("connector.class", "postgres-sink".into()),
                ("tasks.max", "1".into()),
                ("topics", topic.to_owned()),
                ("table.name.format", table.clone()),
                ("insert.mode", "upsert".into()),
                ("pk.mode", "record_key".into()),
                ("batch.size", SINK_BATCH.to_string()),
                // As many records a `put` as the native program takes a batch (the worker's
                // default is 2 000), so both run the same statements.
                ("sink.batch.max.records", SINK_BATCH.to_string()),
            ];
            connector.extend(connector_common(&db.name));
            start_worker(env, &dir, &connector)?
        }
        Program::Native => start_native(
            &dir,
            "native-postgres-sink",
            &NativeJob {
                bootstrap: env.bootstrap.clone(),
                topic: topic.to_owned(),
                dbname: db.name.clone(),
                table: table.clone(),
                rows: db.rows,
            },
        )?,
    };
    let outcome = measure_sink(&mut running, &mut client, &table, db.rows).await;
    let peak = running.peak_rss_kib();
    running.kill();
    let (seconds, cpu) = outcome?;
    // The copy must be the table: every row, every column.
    let same = client
        .simple_query(&format!(
            "SELECT count(*) FROM public.rows r JOIN public.{table} c USING (id) \
             WHERE (r.name, r.amount, r.active, r.created_at, r.note) \
                   IS NOT DISTINCT FROM (c.name, c.amount, c.active, c.created_at, c.note)"
        ))
        .context("cannot compare the copy with the table")?;
    let same: u64 = same
        .first()
        .and_then(|r| r.rows.first())
        .and_then(|r| r[0].as_deref())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let _ = client.simple_query(&format!("DROP TABLE public.{table}"));
    client.close();
    if same != db.rows {
        bail!(
            "{}: {same} of {} rows of the copy equal the table's",
            program.name(),
            db.rows
        );
    }
    Ok(run_row(
        SINK,
        program,
        rep,
        Measured {
            rows: db.rows,
            seconds,
            cpu,
            peak_rss_kib: peak,
        },
        format!(
            "upsert on the record key, batch.size={SINK_BATCH} (and sink.batch.max.records), JSON with schemas"
        ),
    ))
}

/// Sample the program's CPU until the table holds `rows` rows; then the span from the first
/// row's `loaded_at` to the last's, and the CPU over it.
async fn measure_sink(
    running: &mut Running,
    client: &mut Client,
    table: &str,
    rows: u64,
) -> Result<(f64, Option<f64>)> {
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut last_count = Instant::now();
    loop {
        if started.elapsed() > PATIENCE {
            bail!("{table}: not all {rows} rows written within {PATIENCE:?}");
        }
        if let Some(cpu) = running.cpu_seconds() {
            samples.push(CpuSample {
                at_ms: now_ms() as f64,
                cpu,
            });
        }
        if last_count.elapsed() >= Duration::from_secs(1) {
            last_count = Instant::now();
            if scalar(client, &format!("SELECT count(*) FROM public.{table}"))? >= rows as f64 {
                break;
            }
        }
        // Neither program exits on its own (the native ones wait to be killed when done, so
        // that their CPU time can still be read).
        running.check_alive()?;
        tokio::time::sleep(SAMPLE).await;
    }
    let first = scalar(
        client,
        &format!("SELECT extract(epoch FROM min(loaded_at)) * 1000 FROM public.{table}"),
    )?;
    let last = scalar(
        client,
        &format!("SELECT extract(epoch FROM max(loaded_at)) * 1000 FROM public.{table}"),
    )?;
    let cpu = match (cpu_at(&samples, first), cpu_at(&samples, last)) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    Ok(((last - first) / 1000.0, cpu))
}

/// The first column of the first row of `sql`'s answer, as a number.
fn scalar(client: &mut Client, sql: &str) -> Result<f64> {
    let results = client
        .simple_query(sql)
        .with_context(|| format!("cannot run {sql}"))?;
    results
        .first()
        .and_then(|r| r.rows.first())
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("{sql}: no number in the answer"))
}

// ---- The native programs. ----

/// The delivery reports of the native source's producer.
struct Acks(Arc<AtomicU64>);

impl rdkafka::client::ClientContext for Acks {}

impl rdkafka::producer::ProducerContext for Acks {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        if result.is_ok() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The value's payload as `postgres-source` writes it (fields in column order, as the schema
/// and Kafka Connect's JsonConverter list them).
#[derive(Serialize)]
struct Payload<'a> {
    id: i64,
    name: &'a str,
    amount: &'a str,
    active: bool,
    created_at: i64,
    note: Option<&'a str>,
}

/// The native source: the plugin's queries on `job.dbname`'s table, each row sent as the same
/// key and value envelopes.
pub fn native_source(job: &str) -> Result<()> {
    let job: NativeJob = serde_json::from_str(job).context("native-postgres-source: the job")?;
    let mut client = connect(&job.dbname)?;
    let acked = Arc::new(AtomicU64::new(0));
    let producer: ThreadedProducer<Acks> =
        kafka::producer_config(&job.bootstrap).create_with_context(Acks(Arc::clone(&acked)))?;
    let table = format!("public.{}", quote_ident(&job.table));
    let (mut last, mut sent) = (None::<String>, 0u64);
    // Kept from record to record: the baseline allocates nothing per row it sends.
    let (mut key, mut value, mut amount_text) = (Vec::new(), Vec::new(), String::new());
    loop {
        let result = match &last {
            None => client.query(
                &format!("SELECT {COLUMNS} FROM {table} ORDER BY \"id\" LIMIT {BATCH_ROWS}"),
                &[],
            ),
            Some(id) => client.query(
                &format!(
                    "SELECT {COLUMNS} FROM {table} WHERE \"id\" > $1 ORDER BY \"id\" LIMIT {BATCH_ROWS}"
                ),
                &[Some(id)],
            ),
        }
        .context("native-postgres-source: the query")?;
        for row in &result.rows {
            let text = |i: usize| row.get(i).and_then(Option::as_deref);
            let number = |i: usize| -> Result<i64> {
                text(i)
                    .and_then(|t| t.parse().ok())
                    .context("a number column without a number")
            };
            let id = number(0)?;
            let amount = values::decimal_unscaled_bytes(text(2).unwrap_or_default(), 2)
                .context("amount is not numeric(12,2)")?;
            let created = values::parse_timestamp_micros(text(4).unwrap_or_default())
                .context("created_at is not a timestamp")?;
            amount_text.clear();
            base64::engine::general_purpose::STANDARD.encode_string(amount, &mut amount_text);
            let payload = Payload {
                id,
                name: text(1).unwrap_or_default(),
                amount: &amount_text,
                active: text(3) == Some("t"),
                created_at: created.div_euclid(1000),
                note: text(5),
            };
            key.clear();
            value.clear();
            key.extend_from_slice(br#"{"schema":"#);
            key.extend_from_slice(KEY_SCHEMA.as_bytes());
            write!(key, r#","payload":{{"id":{id}}}}}"#)?;
            value.extend_from_slice(br#"{"schema":"#);
            value.extend_from_slice(VALUE_SCHEMA.as_bytes());
            value.extend_from_slice(br#","payload":"#);
            serde_json::to_writer(&mut value, &payload)?;
            value.push(b'}');
            loop {
                match producer.send(BaseRecord::to(&job.topic).key(&key).payload(&value)) {
                    Ok(()) => break,
                    Err((e, _)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err((e, _)) => bail!("native-postgres-source: send: {e}"),
                }
            }
            sent += 1;
        }
        last = result.rows.last().and_then(|r| r[0].clone()).or(last);
        if result.rows.len() < BATCH_ROWS as usize {
            break;
        }
    }
    producer.flush(Duration::from_secs(300))?;
    let acked = acked.load(Ordering::Relaxed);
    if sent != job.rows || acked != sent {
        bail!(
            "native-postgres-source: {sent} rows read, {acked} acknowledged, {} expected",
            job.rows
        );
    }
    client.close();
    wait_to_be_killed()
}

/// Done: wait for the harness to read the process's CPU time and kill it.
fn wait_to_be_killed() -> ! {
    eprintln!("done; waiting to be killed");
    loop {
        std::thread::park();
    }
}

/// A value envelope as the sink reads it (its schema is the one [`VALUE_SCHEMA`] states).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    payload: Row<'a>,
}

#[derive(Deserialize)]
struct Row<'a> {
    id: i64,
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    amount: &'a str,
    active: bool,
    created_at: i64,
    #[serde(borrow)]
    note: Option<std::borrow::Cow<'a, str>>,
}

/// The native sink: `job.topic` into `job.table` with the plugin's statements.
pub fn native_sink(job: &str) -> Result<()> {
    let job: NativeJob = serde_json::from_str(job).context("native-postgres-sink: the job")?;
    let mut client = connect(&job.dbname)?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &job.bootstrap)
        .set("group.id", format!("native-pg-{}", std::process::id()))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()?;
    consumer.subscribe(&[&job.topic])?;
    let names = ["id", "name", "amount", "active", "created_at", "note"];
    let updates: Vec<String> = names[1..]
        .iter()
        .map(|c| format!("{0} = EXCLUDED.{0}", quote_ident(c)))
        .collect();
    let insert = |rows: usize| -> String {
        let tuples: Vec<String> = (0..rows)
            .map(|r| {
                let params: Vec<String> = (1..=names.len())
                    .map(|c| format!("${}", r * names.len() + c))
                    .collect();
                format!("({})", params.join(", "))
            })
            .collect();
        format!(
            "INSERT INTO {} ({}) VALUES {} ON CONFLICT (\"id\") DO UPDATE SET {}",
            quote_ident(&job.table),
            names.map(quote_ident).join(", "),
            tuples.join(", "),
            updates.join(", ")
        )
    };
    let full = insert(SINK_BATCH);
    let mut written = 0u64;
    let mut batch = Vec::with_capacity(SINK_BATCH);
    while written < job.rows {
        batch.clear();
        while batch.len() < SINK_BATCH {
            let wait = if batch.is_empty() { 500 } else { 0 };
            match consumer.poll(Duration::from_millis(wait)) {
                Some(Ok(message)) => batch.push(message.detach()),
                Some(Err(e)) => eprintln!("consumer: {e}"),
                None => break,
            }
        }
        if batch.is_empty() {
            continue;
        }
        let mut texts: Vec<Option<String>> = Vec::with_capacity(batch.len() * names.len());
        for message in &batch {
            let envelope: Envelope<'_> =
                serde_json::from_slice(message.payload().unwrap_or_default())
                    .context("native-postgres-sink: a value that is not the table's envelope")?;
            let row = envelope.payload;
            let amount = base64::engine::general_purpose::STANDARD
                .decode(row.amount)
                .context("amount is not base64")?;
            texts.extend([
                Some(row.id.to_string()),
                Some(row.name.into_owned()),
                Some(values::decimal_from_unscaled_bytes(&amount, 2)),
                Some(row.active.to_string()),
                Some(values::format_timestamp_micros(row.created_at * 1000)),
                row.note.map(std::borrow::Cow::into_owned),
            ]);
        }
        let params: Vec<Option<&str>> = texts.iter().map(Option::as_deref).collect();
        let partial;
        let sql = if batch.len() == SINK_BATCH {
            &full
        } else {
            partial = insert(batch.len());
            &partial
        };
        client.simple_query("BEGIN")?;
        let results = client.pipeline(&[
            Statement {
                sql: "SAVEPOINT batch",
                params: &[],
            },
            Statement {
                sql,
                params: &params,
            },
            Statement {
                sql: "RELEASE SAVEPOINT batch",
                params: &[],
            },
        ])?;
        if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
            bail!("native-postgres-sink: the insert failed: {e}");
        }
        client.simple_query("COMMIT")?;
        consumer.commit_consumer_state(CommitMode::Async)?;
        written += batch.len() as u64;
    }
    client.close();
    wait_to_be_killed()
}
