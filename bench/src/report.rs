//! `BENCHMARKS.md` and `bench/results.json`: the tables (median and spread per workload and
//! system, CPU per record, paired ratios with their intervals, targets met or not), the
//! machine, the command. The page is the harness's alone; profiling notes live in
//! `docs/benchmark-journal.md`, written by hand.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::Options;
use crate::measure::{RatioCi, Summary};
use crate::workloads::{BoundaryPoint, CONNECTORS, Results, Run};

const WASM: &str = "wasm-connect";
const NATIVE: &str = "native rdkafka";
const CONNECT: &str = "Kafka Connect";
const NO_OP: &str = "wasm-connect, no-op plugin";
const CONNECT_TUNED: &str = "Kafka Connect, tuned";
const CONNECT_SMALL_HEAP: &str = "Kafka Connect, tuned, -Xmx256m";

/// The steady-state workloads: key, title, what runs.
const WINDOWED: &[(&str, &str, &str)] = &[
    (
        "source-datagen-1-task",
        "datagen, 1 task, 1 partition",
        "wasm-connect runs `datagen`; the native baseline sends `datagen`'s records made before the run (100 000 of them, over and over, so its cost is librdkafka's alone) 2 000 at a time with librdkafka's batch call, as the worker does, with the worker's producer settings, after a warm-up record so its client is connected. The no-op plugin (`bench-source`) returns copies of one prepared record: the ceiling of any plugin on this host and contract version.",
    ),
    (
        "source-datagen-2-task",
        "datagen, 2 tasks, 2 partitions",
        "As above with 2 tasks; the native baseline runs 2 threads sharing one producer, as the worker's tasks share one.",
    ),
    (
        "source-datagen-8-task",
        "datagen, 8 tasks, 8 partitions",
        "As above with 8 tasks (4 for each core of this machine); the native baseline runs 8 threads.",
    ),
    (
        "source-datagen-1-task-1KiB",
        "datagen, 1 KiB values, 1 task, 1 partition",
        "As the first, with 1 KiB values.",
    ),
    (
        "source-datagen-2-task-1KiB",
        "datagen, 1 KiB values, 2 tasks, 2 partitions",
        "As the second, with 1 KiB values.",
    ),
    (
        "source-datagen-1-task-10KiB",
        "datagen, 10 KiB values, 1 task, 1 partition",
        "As the first, with 10 KiB values.",
    ),
    (
        "source-file-1-task",
        "a file of 100-byte lines, 1 task",
        "Every system reads the same pre-written file: wasm-connect's `file-source` against Kafka Connect's `FileStreamSource` (`batch.size=2000`, as many records per poll as wasm-connect asks of a plugin), at Connect's defaults (16 KiB producer batches, one request in flight) and tuned (the producer settings wasm-connect uses: 1 MiB batches, 5 ms linger, idempotence, 5 in flight, 1 GiB buffer). Connect runs with `-Xms256M -Xmx2G`, as `connect-standalone.sh` does, and once more tuned with a 256 MiB heap (`-Xms256M -Xmx256M`), to show its memory held to a container's size and whether its throughput holds there.",
    ),
    (
        "source-file-json-1-task",
        "a file of 100-byte lines, 1 task, JSON converter with schemas",
        "As above, with the converter wasm-connect documents as its default on both sides: `json` with `schemas.enable=true` against Kafka Connect's `JsonConverter` with `schemas.enable=true` (tuned), each line wrapped in the `{\"schema\", \"payload\"}` envelope.",
    ),
    (
        crate::workloads::TRANSFORMS_WORKLOAD,
        "a file of 100-byte lines, 1 task, JSON with schemas, 3 transforms",
        "As `source-file-json-1-task`, each line going through the same three transforms on both sides (`transforms=hoist,insert,rename`: `HoistField$Value` wraps the line in a struct field `line`, `InsertField$Value` adds a static field `origin`, `ReplaceField$Value` renames `line` to `message`), so every record is a struct of two fields in the schema envelope. wasm-connect runs its own transforms; Kafka Connect (tuned) runs `connect-transforms`. The `transforms` group also runs `source-file-json-1-task` in the same invocation (unless the `source` group ran it): the cost of the chain is the difference between the two rows of a system.",
    ),
    (
        "source-datagen-1-task-lz4",
        "datagen, 1 task, 1 partition, lz4",
        "As the first, with `compression.type=lz4` on both producers (librdkafka's, in the worker and the native baseline alike).",
    ),
    (
        "source-datagen-1-task-zstd",
        "datagen, 1 task, 1 partition, zstd",
        "As the first, with `compression.type=zstd` on both producers.",
    ),
    (
        "source-file-1-task-lz4",
        "a file of 100-byte lines, 1 task, lz4",
        "As `source-file-1-task` (wasm-connect and Kafka Connect tuned), with `compression.type=lz4` on both producers: librdkafka's lz4 against the Java client's.",
    ),
    (
        "source-file-1-task-zstd",
        "a file of 100-byte lines, 1 task, zstd",
        "As above with `compression.type=zstd`: librdkafka's zstd against zstd-jni's.",
    ),
    (
        "sink-drop",
        "sink, records dropped, 1 task",
        "The least a sink can do in each system: wasm-connect with `bench-sink` (accepts every batch, writes nothing; counted by its task's `records_done`, as `put` returns), the native baseline taking batches from split partition queues exactly as the worker does and dropping them, and Kafka Connect (tuned: `max.poll.records=2000`, as many as `sink.batch.max.records`) with `NoOpSinkTask` (`bench/connect-sinks/`). The native and Connect sinks write how many records they were handed to a file the harness reads.",
    ),
    (
        "sink-file",
        "sink, values appended to a file, 1 task",
        "Values appended as lines through a buffer: wasm-connect's `file-sink`, the native consumer (64 KiB buffered writes), Kafka Connect tuned with `BufferedFileSinkTask` (64 KiB buffer, flushed on commit; `bench/connect-sinks/`), and Kafka Connect at its defaults with its own `FileStreamSink` (one write per record), as users run it. Counted from the file's size.",
    ),
    (
        "sink-drop-2-task",
        "sink, records dropped, 2 tasks, 2 partitions",
        "As `sink-drop`, with 2 tasks reading a 2-partition topic: wasm-connect's `bench-sink` with `tasks.max=2`, the native baseline with 2 consumers in one group (a thread each, as the worker runs a consumer per task), Kafka Connect tuned with `NoOpSinkTask` and `tasks.max=2`.",
    ),
    (
        "sink-drop-1KiB",
        "sink, 1 KiB values, records dropped, 1 task",
        "As `sink-drop`, reading a topic of 1 KiB values.",
    ),
    (
        "sink-drop-2-task-1KiB",
        "sink, 1 KiB values, records dropped, 2 tasks, 2 partitions",
        "As `sink-drop-2-task`, reading a topic of 1 KiB values.",
    ),
    (
        "sink-file-1KiB",
        "sink, 1 KiB values appended to a file, 1 task",
        "As `sink-file`, reading a topic of 1 KiB values (wasm-connect and the native consumer only).",
    ),
    (
        crate::postgres::SOURCE,
        "PostgreSQL source: a table into a topic, 1 task",
        "`scripts/postgres`'s server on loopback; a table of six columns (`bigint` primary key, `text`, `numeric(12,2)`, `boolean`, `timestamp`, nullable `text`; about 90 bytes of text a row), read in `incrementing` mode 5 000 rows a query, written as JSON with schemas (the JsonConverter's envelope, key and value, about 800 bytes a record). wasm-connect runs `postgres-source`; the native program runs the same queries with the same client (`wasm-connect-postgres-wire`, compiled natively) and sends the same records (the first record of both topics is checked to be the same bytes) with the worker's producer settings. Counted from the first record in the topic to the last by the partition's high watermark; the window column is that span. The database server's CPU is not counted (it runs the same queries for both).",
    ),
    (
        crate::postgres::SINK,
        "PostgreSQL sink: a topic into a table by upsert, 1 task",
        "The topic the source wrote, into a new table: `insert.mode=upsert`, `pk.mode=record_key`, 3 000 rows a statement. wasm-connect runs `postgres-sink`; the native program (rdkafka's consumer, the same client, serde for the envelope) runs the plugin's statements: per batch `BEGIN`, one round trip of `SAVEPOINT`, a multi-row `INSERT ... ON CONFLICT DO UPDATE` and `RELEASE`, then `COMMIT`. Counted from the first row written to the last by a column the server fills (`loaded_at DEFAULT clock_timestamp()`); afterwards the copy is compared with the table, every row and column. The database server's CPU is not counted.",
    ),
];

/// What a comparison divides.
#[derive(Clone, Copy)]
enum Metric {
    /// Records a second.
    Throughput,
    /// Records per CPU-second of the system's own process.
    PerCpuSecond,
}

/// One paired comparison, with its target if there is one.
struct Comparison {
    workload: &'static str,
    a: &'static str,
    b: &'static str,
    metric: Metric,
    target: Option<f64>,
}

const fn compare(
    workload: &'static str,
    a: &'static str,
    b: &'static str,
    metric: Metric,
    target: Option<f64>,
) -> Comparison {
    Comparison {
        workload,
        a,
        b,
        metric,
        target,
    }
}

/// The comparisons the page reports, targets from the benchmark issue: ≥ 0.9 × native, and
/// ≥ 3 × Kafka Connect tuned per CPU-second.
const COMPARISONS: &[Comparison] = &[
    compare(
        "source-datagen-1-task",
        WASM,
        NATIVE,
        Metric::Throughput,
        Some(0.9),
    ),
    compare(
        "source-datagen-1-task",
        WASM,
        NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        "source-datagen-1-task",
        NO_OP,
        NATIVE,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-datagen-2-task",
        WASM,
        NATIVE,
        Metric::Throughput,
        Some(0.9),
    ),
    compare(
        "source-datagen-2-task",
        WASM,
        NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        "source-datagen-8-task",
        WASM,
        NATIVE,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-datagen-8-task",
        WASM,
        NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        "source-datagen-1-task-1KiB",
        WASM,
        NATIVE,
        Metric::Throughput,
        Some(0.9),
    ),
    compare(
        "source-datagen-1-task-1KiB",
        WASM,
        NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        "source-datagen-2-task-1KiB",
        WASM,
        NATIVE,
        Metric::Throughput,
        Some(0.9),
    ),
    compare(
        "source-datagen-2-task-1KiB",
        WASM,
        NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        "source-datagen-1-task-10KiB",
        WASM,
        NATIVE,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-datagen-1-task-10KiB",
        WASM,
        NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        "source-file-1-task",
        WASM,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare(
        "source-file-1-task",
        WASM,
        CONNECT_TUNED,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-file-1-task",
        WASM,
        CONNECT,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-file-1-task",
        CONNECT_TUNED,
        CONNECT,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-file-1-task",
        CONNECT_SMALL_HEAP,
        CONNECT_TUNED,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-file-json-1-task",
        WASM,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare(
        "source-file-json-1-task",
        WASM,
        CONNECT_TUNED,
        Metric::Throughput,
        None,
    ),
    compare(
        crate::workloads::TRANSFORMS_WORKLOAD,
        WASM,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        crate::workloads::TRANSFORMS_WORKLOAD,
        WASM,
        CONNECT_TUNED,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-datagen-1-task-lz4",
        WASM,
        NATIVE,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-datagen-1-task-zstd",
        WASM,
        NATIVE,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-file-1-task-lz4",
        WASM,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare(
        "source-file-1-task-lz4",
        WASM,
        CONNECT_TUNED,
        Metric::Throughput,
        None,
    ),
    compare(
        "source-file-1-task-zstd",
        WASM,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare(
        "source-file-1-task-zstd",
        WASM,
        CONNECT_TUNED,
        Metric::Throughput,
        None,
    ),
    compare("sink-drop", NO_OP, NATIVE, Metric::Throughput, Some(0.9)),
    compare("sink-drop", NO_OP, NATIVE, Metric::PerCpuSecond, None),
    compare(
        "sink-drop",
        NO_OP,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare("sink-drop", NO_OP, CONNECT_TUNED, Metric::Throughput, None),
    compare("sink-file", WASM, NATIVE, Metric::Throughput, Some(0.9)),
    compare("sink-file", WASM, NATIVE, Metric::PerCpuSecond, None),
    compare(
        "sink-file",
        WASM,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare("sink-file", WASM, CONNECT_TUNED, Metric::Throughput, None),
    compare("sink-file", WASM, CONNECT, Metric::Throughput, None),
    compare(
        "sink-drop-2-task",
        NO_OP,
        NATIVE,
        Metric::Throughput,
        Some(0.9),
    ),
    compare(
        "sink-drop-2-task",
        NO_OP,
        NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        "sink-drop-2-task",
        NO_OP,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare(
        "sink-drop-1KiB",
        NO_OP,
        NATIVE,
        Metric::Throughput,
        Some(0.9),
    ),
    compare("sink-drop-1KiB", NO_OP, NATIVE, Metric::PerCpuSecond, None),
    compare(
        "sink-drop-1KiB",
        NO_OP,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare(
        "sink-drop-2-task-1KiB",
        NO_OP,
        NATIVE,
        Metric::Throughput,
        Some(0.9),
    ),
    compare(
        "sink-drop-2-task-1KiB",
        NO_OP,
        NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        "sink-drop-2-task-1KiB",
        NO_OP,
        CONNECT_TUNED,
        Metric::PerCpuSecond,
        Some(3.0),
    ),
    compare(
        "sink-file-1KiB",
        WASM,
        NATIVE,
        Metric::Throughput,
        Some(0.9),
    ),
    compare("sink-file-1KiB", WASM, NATIVE, Metric::PerCpuSecond, None),
    compare(
        crate::postgres::SOURCE,
        WASM,
        crate::postgres::NATIVE,
        Metric::Throughput,
        None,
    ),
    compare(
        crate::postgres::SOURCE,
        WASM,
        crate::postgres::NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
    compare(
        crate::postgres::SINK,
        WASM,
        crate::postgres::NATIVE,
        Metric::Throughput,
        None,
    ),
    compare(
        crate::postgres::SINK,
        WASM,
        crate::postgres::NATIVE,
        Metric::PerCpuSecond,
        None,
    ),
];

/// The systems that ran `workload`, in the order they first appear.
fn systems_in<'a>(runs: &'a [Run], workload: &str) -> Vec<&'a str> {
    let mut systems: Vec<&str> = Vec::new();
    for r in runs.iter().filter(|r| r.workload == workload) {
        if !systems.contains(&r.system) {
            systems.push(r.system);
        }
    }
    systems
}

/// Criterion's estimates for the boundary benchmark (`<dir>/{source,sink}/<size>/<batch>`).
pub fn read_criterion(dir: &Path) -> Vec<BoundaryPoint> {
    let mut points = Vec::new();
    for direction in ["source", "sink"] {
        for size in ["100B", "1KiB", "10KiB"] {
            for batch in [1u32, 10, 100, 1_000, 10_000] {
                let file = dir.join(format!("{direction}/{size}/{batch}/new/estimates.json"));
                let Ok(text) = std::fs::read_to_string(&file) else {
                    continue;
                };
                let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
                    continue;
                };
                let Some(ns) = json["mean"]["point_estimate"].as_f64() else {
                    continue;
                };
                let per_record = ns / f64::from(batch);
                points.push(BoundaryPoint {
                    direction: direction.into(),
                    record_size: size.into(),
                    batch,
                    ns_per_record: per_record,
                    records_per_s: 1e9 / per_record,
                });
            }
        }
    }
    points
}

fn summarize(
    runs: &[Run],
    workload: &str,
    system: &str,
    metric: impl Fn(&Run) -> Option<f64>,
) -> Option<Summary> {
    let values: Vec<f64> = runs
        .iter()
        .filter(|r| r.workload == workload && r.system == system)
        .filter_map(metric)
        .collect();
    Summary::of(&values)
}

/// `a / b` of `metric` within each repetition of `workload` (the systems of one repetition
/// run back to back, so they share the broker's state and the machine's load at the time).
fn paired(runs: &[Run], workload: &str, a: &str, b: &str, metric: Metric) -> Vec<f64> {
    let value = |r: &Run| match metric {
        Metric::Throughput => r.throughput,
        Metric::PerCpuSecond => r.cpu_s_per_m.filter(|c| *c > 0.0).map(|c| 1e6 / c),
    };
    let of = |rep: usize, system: &str| {
        runs.iter()
            .find(|r| r.workload == workload && r.system == system && r.rep == rep)
            .and_then(value)
    };
    runs.iter()
        .filter(|r| r.workload == workload && r.system == a)
        .filter_map(|r| Some(of(r.rep, a)? / of(r.rep, b)?))
        .collect()
}

fn decimal_cell(s: Option<Summary>) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.runs == 1 => format!("{:.2}", s.median),
        Some(s) => format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max),
    }
}

fn cell(s: Option<Summary>, unit: &str, scale: f64) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.runs == 1 => format!("{:.0}{unit}", s.median / scale),
        Some(s) => format!(
            "{:.0}{unit} ({:.0}–{:.0})",
            s.median / scale,
            s.min / scale,
            s.max / scale
        ),
    }
}

fn ratio(a: Option<Summary>, b: Option<Summary>) -> Option<f64> {
    Some(a?.median / b?.median)
}

fn show(r: Option<f64>) -> String {
    r.map_or("—".into(), |r| format!("{r:.2}"))
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

fn shell(command: &str, args: &[&str]) -> String {
    Command::new(command)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .unwrap_or_default()
}

fn machine(worker: &Path) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    format!(
        "- {model}, {cores} cores, {mem_gib:.0} GiB memory, Linux {}\n- {}; Java: {}\n- wasm-connect at commit {}: `{}`",
        shell("uname", &["-r"]),
        shell("rustc", &["--version"]),
        shell("java", &["-version"]),
        shell("git", &["rev-parse", "--short", "HEAD"]),
        worker.display(),
    )
}

/// Write the JSON and the Markdown.
pub fn write(options: &Options, results: &Results) -> Result<()> {
    if !options.only.is_empty() && !options.markdown_given {
        // A partial run must not replace the full table; show it instead.
        println!("{}", render(options, results));
        return Ok(());
    }
    if let Some(dir) = options.json.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&options.json, serde_json::to_string_pretty(results)?)
        .with_context(|| format!("cannot write {}", options.json.display()))?;
    std::fs::write(&options.markdown, render(options, results))
        .with_context(|| format!("cannot write {}", options.markdown.display()))?;
    eprintln!(
        "wrote {} and {}",
        options.markdown.display(),
        options.json.display()
    );
    Ok(())
}

/// " (startup 120 s, source 900 s, ...)" (nothing when the run kept no group times).
fn group_times(groups: &[(String, f64)]) -> String {
    if groups.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(group, seconds)| format!("{group} {seconds:.0} s"))
        .collect();
    format!(" ({})", parts.join(", "))
}

fn render(options: &Options, results: &Results) -> String {
    let runs = &results.runs;
    let throughput = |w: &str, s: &str| summarize(runs, w, s, |r| r.throughput);
    let startup = |w: &str, s: &str| summarize(runs, w, s, |r| r.startup_ms);
    let rss =
        |w: &str, s: &str| summarize(runs, w, s, |r| r.peak_rss_kib.map(|k| k as f64 * 1024.0));
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Results of one run of the suite{}: every system on the same machine, against the same Apache Kafka 4.4 broker (KRaft, one node, loopback), {} repetitions of each throughput, start-up and memory workload: medians, with the range over repetitions in brackets. Density runs once per size; the boundary table shows criterion's means. The raw numbers are in `bench/results.json`. These measurements took {:.0} s{} (the whole command also builds everything and runs the boundary micro-benchmarks).\n",
        if options.smoke {
            " (**smoke run: too small to mean anything**)"
        } else {
            ""
        },
        options.reps,
        results.seconds,
        group_times(&results.group_seconds),
    );
    let _ = writeln!(md, "## Machine\n\n{}\n", machine(&options.worker));
    let _ = writeln!(
        md,
        "## Reproduce\n\n```sh\nscripts/bench\n```\n\nIt builds wasm-connect (without the embedded broker, which the suite never starts) and the harness in release mode, runs the boundary micro-benchmarks (`cargo bench --profile release -p wasm-connect-bench --bench boundary`), fetches Kafka Connect 4.3.1 (`connect-runtime`, `connect-file`, `connect-json`, `connect-test-plugins`) from Maven Central, starts the broker, and runs this (the command as it ran, with this machine's paths): `{}`.\n",
        options.command
    );

    let _ = writeln!(md, "## Throughput, steady state\n");
    let _ = writeln!(
        md,
        "Each run starts its system, waits until records reach the topic, lets it warm up for {:.1} s untimed (the JVM's JIT, connections, first batches; a sink until a sixth of its input is consumed, if that comes sooner), then counts the records moved over a {:.1} s window (for sources, the records that reached the topic, from its partitions' high watermarks; for sinks, as each section says; read by the harness's clock for every system; a window closes early if the input is nearly used up, so the window column says how long each run was measured) and the CPU time (user + system, all threads, from `/proc`) the system's process and the broker used in that window. The broker's share is reported because on this 2-core machine it competes with the system measured. Every source run writes to a fresh topic with as many partitions as tasks, deleted afterwards; the sinks all read one pre-filled topic, each run in a consumer group of its own. Values are 100-byte JSON text (larger where a title says so) with string keys, through the string converter (bytes unchanged) on every system unless a row's settings say otherwise.\n",
        results.warm_up_s, results.window_s,
    );
    for (key, title, what) in WINDOWED {
        let rows: Vec<&str> = systems_in(runs, key);
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(md, "### {title}\n\n{what}\n");
        let _ = writeln!(
            md,
            "| system | records/s | CPU s per M records | broker CPU s per M records | window (s) | peak RSS (MiB) | settings |\n|---|---|---|---|---|---|---|"
        );
        for system in rows {
            let settings = runs
                .iter()
                .find(|r| r.workload == *key && r.system == system)
                .map_or("", |r| r.settings.as_str());
            let _ = writeln!(
                md,
                "| {system} | {} | {} | {} | {} | {} | {settings} |",
                cell(throughput(key, system), "", 1.0),
                decimal_cell(summarize(runs, key, system, |r| r.cpu_s_per_m)),
                decimal_cell(summarize(runs, key, system, |r| r.broker_cpu_s_per_m)),
                decimal_cell(summarize(runs, key, system, |r| r.seconds)),
                cell(rss(key, system), "", 1024.0 * 1024.0),
            );
        }
        md.push('\n');
    }

    let _ = writeln!(md, "\n## Comparisons\n");
    let _ = writeln!(
        md,
        "Each ratio divides two systems' runs of the same repetition (they ran back to back, taking turns at going first, so a pair shares the machine's state at the time), and summarizes the pairs by their geometric mean with a 95 % bootstrap confidence interval. **A target is met only when the whole interval clears it.** With few pairs the interval is narrower than the truth; the pairs column says how many it rests on. \"per CPU-second\" compares records per CPU second of the systems' own processes.\n"
    );
    let _ = writeln!(
        md,
        "| workload | ratio | estimate | 95 % CI | pairs | target | verdict |\n|---|---|---|---|---|---|---|"
    );
    for c in COMPARISONS {
        let ci = RatioCi::of(&paired(runs, c.workload, c.a, c.b, c.metric));
        let (estimate, interval, pairs) = match ci {
            Some(ci) => (
                format!("{:.2}", ci.estimate),
                format!("{:.2}–{:.2}", ci.low, ci.high),
                ci.pairs.to_string(),
            ),
            None => ("—".into(), "—".into(), "0".into()),
        };
        let (target, met) = match c.target {
            Some(t) => (format!("≥ {t}"), verdict(ci.map(|ci| ci.clears(t)))),
            None => (String::new(), ""),
        };
        let _ = writeln!(
            md,
            "| {} | {} / {}{} | {estimate} | {interval} | {pairs} | {target} | {met} |",
            c.workload,
            c.a,
            c.b,
            match c.metric {
                Metric::Throughput => "",
                Metric::PerCpuSecond => ", per CPU-second",
            },
        );
    }

    let _ = writeln!(
        md,
        "\n## Start-up (ms from process start to the broker's append time of the first record)\n"
    );
    let _ = writeln!(
        md,
        "| | {WASM} | {CONNECT} | {CONNECT} / {WASM} |\n|---|---|---|---|"
    );
    let warm = startup("startup-warm", WASM);
    let cold = startup("startup-cold", WASM);
    let kc = startup("startup-warm", CONNECT);
    let _ = writeln!(
        md,
        "| warm (plugins in the compile cache) | {} | {} | {} |",
        cell(warm, " ms", 1.0),
        cell(kc, " ms", 1.0),
        show(ratio(kc, warm))
    );
    let _ = writeln!(
        md,
        "| cold (empty data directory: plugins compiled) | {} | | |",
        cell(cold, " ms", 1.0)
    );

    let recovery = startup("recovery", WASM);
    let recovery_connect = startup("recovery", CONNECT_TUNED);
    let _ = writeln!(
        md,
        "\n## Restart recovery (ms from `kill -9` to the first record the restarted process wrote)\n"
    );
    let _ = writeln!(
        md,
        "A file source copies a 10 M-line file (wasm-connect's `file-source`, Kafka Connect's `FileStreamSource`, tuned; both standalone, offsets committed every second) until it has written 200 000 records and committed offsets twice; it is killed with SIGKILL and started again at once with the same configuration and state. Measured from the kill to the producer timestamp of the first record written after it: process start, reading the stored offsets, reopening the file where they point, the first batch acknowledged.\n"
    );
    let _ = writeln!(
        md,
        "| {WASM} | {CONNECT_TUNED} | {CONNECT_TUNED} / {WASM} |\n|---|---|---|\n| {} | {} | {} |",
        cell(recovery, " ms", 1.0),
        cell(recovery_connect, " ms", 1.0),
        show(ratio(recovery_connect, recovery)),
    );

    if !results.latency.is_empty() {
        let rate = results.latency.first().map_or(0, |l| l.rate);
        let _ = writeln!(
            md,
            "\n## End-to-end latency of a source at {rate} records/s (ms)\n"
        );
        let _ = writeln!(
            md,
            "One task paced at {rate} records a second from its start, each 100-byte value beginning with the wall-clock time its record was due: wasm-connect with `bench-source` (`rate`, `stamp`: the no-op plugin, so what is measured is the worker), Kafka Connect with the benchmark's `RateSourceConnector` (`bench/connect-sinks/`, the same pacing and stamp), tuned (the same 5 ms linger as wasm-connect's producer) and at its defaults (0 ms linger). After the warm-up, every record written in the window is read back; its latency is the broker's append time (`LogAppendTime`) minus its stamp: the poll loop's scheduling, conversion, the producer's batching and the broker's append. Medians over repetitions, with their range.\n"
        );
        let _ = writeln!(
            md,
            "| system | p50 | p99 | p99.9 | max | records | settings |\n|---|---|---|---|---|---|---|"
        );
        let mut systems: Vec<&str> = Vec::new();
        for l in &results.latency {
            if !systems.contains(&l.system) {
                systems.push(l.system);
            }
        }
        for system in systems {
            let of = |f: fn(&crate::workloads::LatencyRun) -> f64| {
                let values: Vec<f64> = results
                    .latency
                    .iter()
                    .filter(|l| l.system == system)
                    .map(f)
                    .collect();
                decimal_cell(Summary::of(&values)).replace(".00", "")
            };
            let settings = results
                .latency
                .iter()
                .find(|l| l.system == system)
                .map_or("", |l| l.settings.as_str());
            let _ = writeln!(
                md,
                "| {system} | {} | {} | {} | {} | {} | {settings} |",
                of(|l| l.p50_ms),
                of(|l| l.p99_ms),
                of(|l| l.p999_ms),
                of(|l| l.max_ms),
                of(|l| l.records as f64),
            );
        }
    }

    if !results.cluster.is_empty() {
        cluster_section(&mut md, &results.cluster);
    }

    let _ = writeln!(md, "\n## Peak memory (resident set, MiB)\n");
    let _ = writeln!(
        md,
        "| workload | {WASM} | {NATIVE} | {CONNECT} | {CONNECT_TUNED} | {CONNECT_SMALL_HEAP} |\n|---|---|---|---|---|---|"
    );
    let mib = 1024.0 * 1024.0;
    for (label, key) in [
        ("source, datagen, 1 task", "source-datagen-1-task"),
        ("source, datagen, 2 tasks", "source-datagen-2-task"),
        ("source, file, 1 task", "source-file-1-task"),
        ("sink, dropped", "sink-drop"),
        ("sink, file", "sink-file"),
    ] {
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} | {} |",
            cell(rss(key, WASM), "", mib),
            cell(rss(key, NATIVE), "", mib),
            cell(rss(key, CONNECT), "", mib),
            cell(rss(key, CONNECT_TUNED), "", mib),
            cell(rss(key, CONNECT_SMALL_HEAP), "", mib),
        );
    }

    if !results.connector_density.is_empty() {
        let _ = writeln!(
            md,
            "\n## Density against Kafka Connect ({} one-task connectors in one worker, one record a second each)\n",
            results
                .connector_density
                .first()
                .map_or(0, |d| d.connectors)
        );
        let _ = writeln!(
            md,
            "Both standalone, every connector given on the command line: wasm-connect runs `datagen` with `rate=1`; Kafka Connect runs the benchmark's `RateSourceConnector` (`bench/connect-sinks/`: the same pacing, 100-byte string values), with its tuned producer settings, at `connect-standalone.sh`'s heap and with `-Xmx256m`. Memory is the process's resident set after the window; CPU is the process's over the window.\n"
        );
        let _ = writeln!(
            md,
            "| system | all tasks running after (s) | RSS (MiB) | peak RSS (MiB) | CPU (% of a core) | records/s |\n|---|---|---|---|---|---|"
        );
        for d in &results.connector_density {
            let _ = writeln!(
                md,
                "| {} | {:.1} | {:.0} | {:.0} | {} | {:.0} |",
                d.system,
                d.all_running_s,
                d.rss_kib.unwrap_or(0) as f64 / 1024.0,
                d.peak_rss_kib.unwrap_or(0) as f64 / 1024.0,
                d.cpu_seconds
                    .map_or("—".into(), |c| format!("{:.1}", 100.0 * c / d.seconds)),
                d.records as f64 / d.seconds,
            );
        }
    }

    let window = results.density.first().map_or(0.0, |d| d.seconds);
    let _ = writeln!(
        md,
        "\n## Density (one worker, `datagen` tasks at {} record a second each, counted over {window:.0} s)\n",
        crate::workloads::DENSITY_RATE_PER_TASK
    );
    let _ = writeln!(
        md,
        "One connector with `tasks.max` = tasks; each task's memory limit is {} MiB (`sandbox.memory.max.bytes`), and the worker admits exactly that many tasks and their memory (`tasks.max.per.worker`, `tasks.max.per.connector`, `sandbox.memory.budget.bytes`); the default memory reservation per instance (its limit).\n",
        crate::workloads::DENSITY_MEMORY_LIMIT >> 20
    );
    let _ = writeln!(
        md,
        "| tasks | RSS (MiB) | peak RSS (MiB) | records/s | tasks that made progress | fewest records of a task |\n|---|---|---|---|---|---|"
    );
    for d in &results.density {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.0} | {} of {} | {} |",
            d.tasks,
            d.rss_kib.unwrap_or(0) as f64 / 1024.0,
            d.peak_rss_kib.unwrap_or(0) as f64 / 1024.0,
            d.throughput,
            d.tasks_with_progress,
            d.tasks,
            d.min_task_records
        );
    }

    if !results.boundary.is_empty() {
        let _ = writeln!(
            md,
            "\n## Host↔guest boundary (ns per record, and millions of records/s; criterion, `bench/benches/boundary.rs`)\n"
        );
        let _ = writeln!(
            md,
            "`source`: the guest returns the batch from `poll`, the host lifts it. `sink`: the host lowers the batch into `put`.\n"
        );
        let _ = writeln!(
            md,
            "| direction | record | batch 1 | 10 | 100 | 1 000 | 10 000 |\n|---|---|---|---|---|---|---|"
        );
        // (In the order measured: 100B, 1KiB, 10KiB.)
        let order = |size: &str| ["100B", "1KiB", "10KiB"].iter().position(|s| *s == size);
        let mut rows: BTreeMap<(String, Option<usize>, String), Vec<String>> = BTreeMap::new();
        for p in &results.boundary {
            rows.entry((
                p.direction.clone(),
                order(&p.record_size),
                p.record_size.clone(),
            ))
            .or_default()
            .push(format!(
                "{:.0} ({:.2} M/s)",
                p.ns_per_record,
                p.records_per_s / 1e6
            ));
        }
        for ((direction, _, size), cells) in rows {
            let _ = writeln!(md, "| {direction} | {size} | {} |", cells.join(" | "));
        }
    }

    let _ = writeln!(
        md,
        "\n## Targets\n\nThroughput targets are judged on the lower bound of the 95 % interval of the comparisons above; the others on medians.\n\n| target | measured | verdict |\n|---|---|---|"
    );
    let at_most = |r: Option<f64>, t: f64| r.map(|r| r <= t);
    for c in COMPARISONS {
        let Some(t) = c.target else { continue };
        let ci = RatioCi::of(&paired(runs, c.workload, c.a, c.b, c.metric));
        let _ = writeln!(
            md,
            "| {} / {} ≥ {t} ({}{}) | {} | {} |",
            c.a,
            c.b,
            c.workload,
            match c.metric {
                Metric::Throughput => "",
                Metric::PerCpuSecond => ", per CPU-second",
            },
            ci.map_or("—".into(), |ci| format!(
                "{:.2} ({:.2}–{:.2})",
                ci.estimate, ci.low, ci.high
            )),
            verdict(ci.map(|ci| ci.clears(t)))
        );
    }
    let rss_ratio = |key: &str, connect: &str| ratio(rss(key, WASM), rss(key, connect));
    let rows = [
        (
            "warm start-up ≤ 1/20 of Kafka Connect's",
            ratio(warm, kc),
            at_most(ratio(warm, kc), 0.05),
        ),
        (
            "restart recovery ≤ 1/10 of Kafka Connect's (file source, tuned)",
            ratio(recovery, recovery_connect),
            at_most(ratio(recovery, recovery_connect), 0.1),
        ),
        (
            "peak RSS ≤ 1/10 of Kafka Connect's (file source, tuned)",
            rss_ratio("source-file-1-task", CONNECT_TUNED),
            at_most(rss_ratio("source-file-1-task", CONNECT_TUNED), 0.1),
        ),
        (
            "peak RSS ≤ 1/10 of Kafka Connect's (sink, file, tuned)",
            rss_ratio("sink-file", CONNECT_TUNED),
            at_most(rss_ratio("sink-file", CONNECT_TUNED), 0.1),
        ),
    ];
    for (target, measured, met) in rows {
        let _ = writeln!(md, "| {target} | {} | {} |", show(measured), verdict(met));
    }
    let density_rss = |system: &str| {
        results
            .connector_density
            .iter()
            .find(|d| d.system == system)
            .and_then(|d| d.rss_kib)
            .map(|k| k as f64)
    };
    // Against the leaner of the two Kafka Connect configurations.
    let connect_rss = [CONNECT_TUNED, CONNECT_SMALL_HEAP]
        .into_iter()
        .filter_map(density_rss)
        .reduce(f64::min);
    let density_ratio = density_rss(WASM).zip(connect_rss).map(|(w, c)| w / c);
    let p99 = latency_p99_ratios(&results.latency);
    let p99_ci = RatioCi::of(&p99);
    let _ = writeln!(
        md,
        "| end-to-end p99 latency at {} records/s ≤ Kafka Connect's (tuned; Connect's p99 / ours, paired per repetition, ≥ 1) | {} | {} |",
        crate::workloads::LATENCY_RATE,
        p99_ci.map_or("—".into(), |ci| format!(
            "{:.2} ({:.2}–{:.2})",
            ci.estimate, ci.low, ci.high
        )),
        verdict(p99_ci.map(|ci| ci.clears(1.0)))
    );
    let _ = writeln!(
        md,
        "| {} connectors in ≤ 1/10 of Kafka Connect's RSS (the leaner of its two heaps) | {} | {} |",
        CONNECTORS,
        show(density_ratio),
        verdict(at_most(density_ratio, 0.1))
    );
    for (tasks, label) in [(1000, "1 000"), (10_000, "10 000")] {
        let run = results.density.iter().find(|d| d.tasks == tasks);
        let _ = writeln!(
            md,
            "| {label} tasks under 2 GiB RSS, none below half its rate | {} | {} |",
            run.map_or("—".into(), |d| format!(
                "{:.0} MiB; slowest task {} records in {:.0} s at {}/s",
                d.peak_rss_kib.unwrap_or(0) as f64 / 1024.0,
                d.min_task_records,
                d.seconds,
                crate::workloads::DENSITY_RATE_PER_TASK
            )),
            verdict(
                run.map(
                    |d| d.peak_rss_kib.unwrap_or(u64::MAX) < 2 * 1024 * 1024 && d.none_starved()
                )
            ),
        );
    }
    reach(&mut md, runs);
    let _ = writeln!(
        md,
        "\nWhat was profiled and changed to get here, with the numbers of each step, is in [docs/benchmark-journal.md](docs/benchmark-journal.md)."
    );
    md
}

/// For each workload with a "≥ 3 × Kafka Connect tuned per CPU-second" target: where librdkafka
/// itself stands against Connect. wasm-connect moves every record through librdkafka, so its
/// CPU per record cannot go below the native baseline's; when the native baseline is under 3 ×
/// Connect, no worker built on librdkafka meets the target, and the page shows that
/// measurement rather than only a failed verdict.
fn reach(md: &mut String, runs: &[Run]) {
    let cpu = |w: &str, s: &str| summarize(runs, w, s, |r| r.cpu_s_per_m).map(|s| s.median);
    let _ = writeln!(
        md,
        "\n### How far librdkafka itself gets against Kafka Connect (the ceiling of the 3 × targets)\n\nEvery record wasm-connect moves goes through librdkafka, so its CPU per record cannot fall below that of the native baseline on the same records. Where the native baseline spends more than a third of Kafka Connect's CPU per record, the 3 × target is out of reach for any worker built on librdkafka on this machine. The sinks compare the same workload; no native baseline reads files, so the file sources are set against the native producer sending the same 100-byte records already made (`source-datagen-1-task`: less work than reading and splitting a file), which makes that ceiling an upper bound. Medians of CPU seconds per million records; not paired.\n\n| workload | {CONNECT_TUNED} | {NATIVE} (where measured) | ceiling: {CONNECT_TUNED} / {NATIVE} | 3 × reachable |\n|---|---|---|---|---|"
    );
    for c in COMPARISONS {
        if c.target != Some(3.0) {
            continue;
        }
        let (native_workload, note) = if c.workload.starts_with("source-file") {
            ("source-datagen-1-task", " (`source-datagen-1-task`)")
        } else {
            (c.workload, "")
        };
        let connect = cpu(c.workload, CONNECT_TUNED);
        let native = cpu(native_workload, NATIVE);
        let ceiling = connect.zip(native).map(|(c, n)| c / n);
        let _ = writeln!(
            md,
            "| {} | {} | {}{note} | {} | {} |",
            c.workload,
            connect.map_or("—".into(), |v| format!("{v:.2}")),
            native.map_or("—".into(), |v| format!("{v:.2}")),
            show(ceiling),
            match ceiling {
                Some(x) if x >= 3.0 => "yes",
                Some(_) => "**no**",
                None => "—",
            }
        );
    }
}

/// The distributed section: three workers of each system, medians over repetitions with their
/// range, and the paired ratios (Kafka Connect's time over wasm-connect's).
fn cluster_section(md: &mut String, runs: &[crate::cluster::ClusterRun]) {
    use crate::cluster::{IN_FLIGHT_MS, RATE_PER_TASK, TASKS_AFTER, TASKS_BEFORE};
    let session = runs.first().map_or(0, |r| r.session_ms);
    let _ = writeln!(
        md,
        "\n## Distributed mode: three workers, a worker's death and a reconfiguration (ms)\n"
    );
    let _ = writeln!(
        md,
        "Three workers of each system in distributed mode on the same broker, with the same group settings: `session.timeout.ms={session}` (a full run uses Kafka Connect's defaults, 10000 with `heartbeat.interval.ms=3000`; a smoke run 6000 and 2000), `scheduled.rebalance.max.delay.ms=0` (Connect's default of five minutes would make the failover that delay on both), Kafka Connect at its defaults otherwise. The first worker starts alone (the broker makes it the leader), then the other two. One source connector whose records name their task, {RATE_PER_TASK} records a second per task: wasm-connect's `datagen`, Kafka Connect's benchmark `RateSourceConnector` (`tag.task`), created through a follower. **Reconfiguration**: `tasks.max` {TASKS_BEFORE} → {TASKS_AFTER} sent to a follower, until the first record of the slowest new task. **Failover**: `kill -9` of the follower with the most tasks, until the first record of the slowest of its tasks written by another worker (records appended within {IN_FLIGHT_MS} ms of the kill are not counted: they may be the dead worker's). Every time is the broker's append time. No member is declared dead before its session times out after its last heartbeat, and the others learn of the rebalance only at their own next heartbeat (the classic group protocol pushes nothing): the session timeout plus up to one heartbeat interval is the floor of the failover for both, and what is left is each system's own (rejoin, assignment, task start). CPU: the three workers over the span from before the reconfiguration to the kill, per million records written in it (at this rate mostly what the cluster costs to keep, not per-record work). Medians over repetitions, with their range; the ratio is Connect's time over ours, paired per repetition.\n"
    );
    let _ = writeln!(
        md,
        "| system | failover | reconfiguration | tasks moved | CPU s per M records | peak RSS, 3 workers (MiB) |\n|---|---|---|---|---|---|"
    );
    let mut systems: Vec<&str> = Vec::new();
    for r in runs {
        if !systems.contains(&r.system) {
            systems.push(r.system);
        }
    }
    for system in &systems {
        let of = |f: &dyn Fn(&crate::cluster::ClusterRun) -> Option<f64>| {
            let values: Vec<f64> = runs
                .iter()
                .filter(|r| r.system == *system)
                .filter_map(f)
                .collect();
            Summary::of(&values)
        };
        let _ = writeln!(
            md,
            "| {system} | {} | {} | {} | {} | {} |",
            cell(of(&|r| Some(r.failover_ms)), " ms", 1.0),
            cell(of(&|r| Some(r.reconfigure_ms)), " ms", 1.0),
            cell(of(&|r| Some(r.moved_tasks as f64)), "", 1.0),
            decimal_cell(of(&|r| r.cpu_s_per_m)),
            cell(of(&|r| r.peak_rss_kib.map(|k| k as f64)), "", 1024.0),
        );
    }
    let ours = crate::systems::System::WasmConnect.name();
    if let [theirs] = systems
        .iter()
        .copied()
        .filter(|s| *s != ours)
        .collect::<Vec<_>>()[..]
    {
        let pairs = |f: fn(&crate::cluster::ClusterRun) -> f64| -> Vec<f64> {
            runs.iter()
                .filter(|r| r.system == theirs)
                .filter_map(|t| {
                    let o = runs.iter().find(|r| r.system == ours && r.rep == t.rep)?;
                    (f(o) > 0.0).then(|| f(t) / f(o))
                })
                .collect()
        };
        let _ = writeln!(
            md,
            "\n{theirs} / {ours}, paired: failover {}, reconfiguration {}.",
            decimal_cell(Summary::of(&pairs(|r| r.failover_ms))),
            decimal_cell(Summary::of(&pairs(|r| r.reconfigure_ms))),
        );
    }
}

/// Kafka Connect's (tuned) p99 latency over wasm-connect's, per repetition (a millisecond at
/// least on each side: the stamps have millisecond resolution).
fn latency_p99_ratios(runs: &[crate::workloads::LatencyRun]) -> Vec<f64> {
    let p99 = |system: &str, rep: usize| {
        runs.iter()
            .find(|l| l.system == system && l.rep == rep)
            .map(|l| l.p99_ms.max(1.0))
    };
    runs.iter()
        .filter(|l| l.system == NO_OP)
        .filter_map(|l| Some(p99(CONNECT_TUNED, l.rep)? / p99(NO_OP, l.rep)?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(system: &'static str, rep: usize, throughput: f64, cpu_s_per_m: f64) -> Run {
        Run {
            workload: "w".into(),
            system,
            rep,
            records: 1,
            throughput: Some(throughput),
            startup_ms: None,
            peak_rss_kib: None,
            value_bytes: None,
            seconds: Some(1.0),
            cpu_s_per_m: Some(cpu_s_per_m),
            broker_cpu_s_per_m: None,
            settings: String::new(),
        }
    }

    #[test]
    fn paired_ratios_divide_within_each_repetition() {
        // Both systems slow in repetition 1: each pair says 2 or 1, whatever the medians say.
        let runs = [
            run(WASM, 0, 4.0, 1.0),
            run(NATIVE, 0, 2.0, 4.0),
            run(NATIVE, 1, 1.0, 2.0),
            run(WASM, 1, 1.0, 1.0),
            run(WASM, 2, 6.0, 1.0),
            run(NATIVE, 2, 3.0, 1.0),
            run(WASM, 3, 9.0, 1.0), // no native run to pair with
        ];
        assert_eq!(
            paired(&runs, "w", WASM, NATIVE, Metric::Throughput),
            vec![2.0, 1.0, 2.0]
        );
        // Per CPU-second: a quarter of the CPU per record is four times the records per second.
        assert_eq!(
            paired(&runs, "w", WASM, NATIVE, Metric::PerCpuSecond),
            vec![4.0, 2.0, 1.0]
        );
        assert!(paired(&runs, "other", WASM, NATIVE, Metric::Throughput).is_empty());
        assert_eq!(systems_in(&runs, "w"), vec![WASM, NATIVE]);
    }
}
