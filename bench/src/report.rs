//! `BENCHMARKS.md` and `bench/results.json`: the tables (median and spread per workload and
//! system, ratios, targets met or not), the machine, the command. Everything below the notes
//! marker in an existing `BENCHMARKS.md` (profiling notes, written by hand) is kept.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result};

use crate::Options;
use crate::measure::Summary;
use crate::workloads::{BoundaryPoint, Results, Run};

/// Hand-written notes start after this line in BENCHMARKS.md.
const NOTES_MARKER: &str = "<!-- notes: everything below is kept by the harness -->";

const WASM: &str = "wasm-connect";
const NATIVE: &str = "native rdkafka";
const CONNECT: &str = "Kafka Connect";
const NO_OP: &str = "wasm-connect, no-op plugin";

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

/// `a / b` within each repetition of `workload` (the systems of one repetition run back to
/// back, so they share the broker's state and the machine's load at the time), summarized over
/// repetitions.
fn paired(runs: &[Run], workload: &str, a: &str, b: &str) -> Option<Summary> {
    let of = |rep: usize, system: &str| {
        runs.iter()
            .find(|r| r.workload == workload && r.system == system && r.rep == rep)
            .and_then(|r| r.throughput)
    };
    let ratios: Vec<f64> = runs
        .iter()
        .filter(|r| r.workload == workload && r.system == a)
        .filter_map(|r| Some(of(r.rep, a)? / of(r.rep, b)?))
        .collect();
    Summary::of(&ratios)
}

fn ratio_cell(s: Option<Summary>) -> String {
    match s {
        None => "—".into(),
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
    let notes = std::fs::read_to_string(&options.markdown)
        .ok()
        .and_then(|old| {
            old.split_once(NOTES_MARKER)
                .map(|(_, notes)| notes.to_owned())
        })
        .unwrap_or_else(|| "\n## Profiling notes\n\n(none yet)\n".into());
    let markdown = format!("{}{NOTES_MARKER}{notes}", render(options, results));
    std::fs::write(&options.markdown, markdown)
        .with_context(|| format!("cannot write {}", options.markdown.display()))?;
    eprintln!(
        "wrote {} and {}",
        options.markdown.display(),
        options.json.display()
    );
    Ok(())
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
        "Results of one run of the suite{}: every system on the same machine, against the same Apache Kafka 4.4 broker (KRaft, one node, loopback), {} repetitions of each throughput, start-up and memory workload: medians, with the range over repetitions in brackets. Density runs once per size; the boundary table shows criterion's means. The raw numbers are in `bench/results.json`. These measurements took {:.0} s (the whole command also builds everything and runs the boundary micro-benchmarks).\n",
        if options.smoke {
            " (**smoke run: too small to mean anything**)"
        } else {
            ""
        },
        options.reps,
        results.seconds
    );
    let _ = writeln!(md, "## Machine\n\n{}\n", machine(&options.worker));
    let _ = writeln!(
        md,
        "## Reproduce\n\n```sh\nscripts/bench\n```\n\nIt builds wasm-connect (without the embedded broker, which the suite never starts) and the harness in release mode, runs the boundary micro-benchmarks (`cargo bench --profile release -p wasm-connect-bench --bench boundary`), fetches Kafka Connect 4.3.1 (`connect-runtime`, `connect-file`, `connect-json`, `connect-test-plugins`) from Maven Central, starts the broker, and runs this (the command as it ran, with this machine's paths): `{}`.\n",
        options.command
    );

    let s1 = |s: &str| throughput("source-1-task", s);
    let s2 = |s: &str| throughput("source-2-task", s);
    let sk = |s: &str| throughput("sink", s);
    let _ = writeln!(md, "## Throughput (records/s)\n");
    let _ = writeln!(
        md,
        "Source: `datagen` (100-byte JSON values, string keys) through wasm-connect; the same records sent by librdkafka directly with the worker's producer settings, once a warm-up record to another topic is acknowledged (so its client is connected and has its producer id, as the worker's long-lived one has), 2 000 at a time with its batch call (`rd_kafka_produce_batch`) as the worker does; 1 000 000 records a run, as for the sink; Kafka Connect's `VerifiableSourceConnector` (a long value in JSON with its schema envelope; the value sizes as they landed in Kafka are in the last column). Measured between the broker's append timestamps (`LogAppendTime`) of the first and last record, so start-up does not count. Sink: a topic of 100-byte values copied to a file by `file-sink`, by an rdkafka consumer, by Kafka Connect's `FileStreamSink`; from the first byte in the file to 90% of its bytes (`file-sink` writes its last buffer at the worker's next flush, every second, and the native consumer when it exits; that wait is not throughput).\n"
    );
    let _ = writeln!(
        md,
        "The ratio columns divide the medians; the last but one divides each repetition's two runs (the systems of a repetition run back to back, so a pair shares the machine's state at the time) and gives the median and range of those ratios: a narrower view of the same comparison when the machine drifts between repetitions. Targets are judged on the ratio of medians.\n"
    );
    let _ = writeln!(
        md,
        "| workload | {WASM} | {NATIVE} | {CONNECT} | {WASM} / native | {WASM} / {CONNECT} | {WASM} / native, per repetition | value bytes (wasm-connect / Kafka Connect) |\n|---|---|---|---|---|---|---|---|"
    );
    for (workload, key) in [
        ("source, 1 task", "source-1-task"),
        ("source, 2 tasks", "source-2-task"),
        ("sink, 1 task", "sink"),
    ] {
        let get = |s: &str| throughput(key, s);
        let bytes = |s: &str| {
            runs.iter()
                .find(|r| r.workload == key && r.system == s)
                .and_then(|r| r.value_bytes)
                .map_or("—".into(), |b| b.to_string())
        };
        let _ = writeln!(
            md,
            "| {workload} | {} | {} | {} | {} | {} | {} | {} / {} |",
            cell(get(WASM), "", 1.0),
            cell(get(NATIVE), "", 1.0),
            cell(get(CONNECT), "", 1.0),
            show(ratio(get(WASM), get(NATIVE))),
            show(ratio(get(WASM), get(CONNECT))),
            ratio_cell(paired(runs, key, WASM, NATIVE)),
            bytes(WASM),
            bytes(CONNECT),
        );
    }

    let _ = writeln!(
        md,
        "\n## Ceiling: wasm-connect with plugins that do no work (records/s)\n"
    );
    let _ = writeln!(
        md,
        "The same workloads through wasm-connect with `bench-source` (returns copies of one prepared record with a 100-byte value and a 7-byte text key) and `bench-sink` (accepts every record and drops it), both from `bench/plugins/`. What is left is the host and the contract's boundary: no plugin can be faster on this host and contract version, so a target this row misses is out of every plugin's reach until one of them changes. The source is measured like the others; the no-op sink writes no file, so it is timed by its task's `records_done` (counted as `put` returns, from the REST metrics) from its first change to 90 % of the records.\n"
    );
    let _ = writeln!(
        md,
        "| workload | {NO_OP} | / native | / {CONNECT} | {WASM} (real plugin) / no-op |\n|---|---|---|---|---|"
    );
    for (workload, key) in [
        ("source, 1 task", "source-1-task"),
        ("sink, 1 task", "sink"),
    ] {
        let get = |s: &str| throughput(key, s);
        let _ = writeln!(
            md,
            "| {workload} | {} | {} | {} | {} |",
            cell(get(NO_OP), "", 1.0),
            show(ratio(get(NO_OP), get(NATIVE))),
            show(ratio(get(NO_OP), get(CONNECT))),
            show(ratio(get(WASM), get(NO_OP))),
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

    let _ = writeln!(md, "\n## Peak memory (resident set, MiB)\n");
    let _ = writeln!(
        md,
        "| workload | {WASM} | {NATIVE} | {CONNECT} | {WASM} / {CONNECT} |\n|---|---|---|---|---|"
    );
    let mib = 1024.0 * 1024.0;
    for (label, key) in [
        ("source, 1 task", "source-1-task"),
        ("source, 2 tasks", "source-2-task"),
        ("sink, 1 task", "sink"),
    ] {
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} | {} |",
            cell(rss(key, WASM), "", mib),
            cell(rss(key, NATIVE), "", mib),
            cell(rss(key, CONNECT), "", mib),
            show(ratio(rss(key, WASM), rss(key, CONNECT))),
        );
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
        "\n## Targets\n\nThe last column is the same ratio for the no-op plugins of the ceiling table: where it misses too, no plugin can meet the target on this host and contract version.\n\n| target | measured | | no-op plugin |\n|---|---|---|---|"
    );
    let at_least = |r: Option<f64>, t: f64| r.map(|r| r >= t);
    let at_most = |r: Option<f64>, t: f64| r.map(|r| r <= t);
    let ceiling = |r: Option<f64>, t: f64| match r {
        Some(r) => format!("{r:.2}: {}", verdict(Some(r >= t))),
        None => "—".into(),
    };
    let throughput_rows = [
        (
            "source throughput ≥ 0.9 × native (1 task)",
            ratio(s1(WASM), s1(NATIVE)),
            at_least(ratio(s1(WASM), s1(NATIVE)), 0.9),
            ceiling(ratio(s1(NO_OP), s1(NATIVE)), 0.9),
        ),
        (
            "sink throughput ≥ 0.9 × native",
            ratio(sk(WASM), sk(NATIVE)),
            at_least(ratio(sk(WASM), sk(NATIVE)), 0.9),
            ceiling(ratio(sk(NO_OP), sk(NATIVE)), 0.9),
        ),
        (
            "≥ 3 × Kafka Connect per task (source, 1 task)",
            ratio(s1(WASM), s1(CONNECT)),
            at_least(ratio(s1(WASM), s1(CONNECT)), 3.0),
            ceiling(ratio(s1(NO_OP), s1(CONNECT)), 3.0),
        ),
        (
            "≥ 3 × Kafka Connect per task (source, 2 tasks)",
            ratio(s2(WASM), s2(CONNECT)),
            at_least(ratio(s2(WASM), s2(CONNECT)), 3.0),
            "—".into(),
        ),
        (
            "≥ 3 × Kafka Connect per task (sink)",
            ratio(sk(WASM), sk(CONNECT)),
            at_least(ratio(sk(WASM), sk(CONNECT)), 3.0),
            ceiling(ratio(sk(NO_OP), sk(CONNECT)), 3.0),
        ),
    ];
    for (target, measured, met, no_op) in throughput_rows {
        let _ = writeln!(
            md,
            "| {target} | {} | {} | {no_op} |",
            show(measured),
            verdict(met)
        );
    }
    let rss_ratio = |key: &str| ratio(rss(key, WASM), rss(key, CONNECT));
    let rows = [
        (
            "warm start-up ≤ 1/20 of Kafka Connect's",
            ratio(warm, kc),
            at_most(ratio(warm, kc), 0.05),
        ),
        (
            "peak RSS ≤ 1/10 of Kafka Connect's (source, 1 task)",
            rss_ratio("source-1-task"),
            at_most(rss_ratio("source-1-task"), 0.1),
        ),
        (
            "peak RSS ≤ 1/10 of Kafka Connect's (source, 2 tasks)",
            rss_ratio("source-2-task"),
            at_most(rss_ratio("source-2-task"), 0.1),
        ),
        (
            "peak RSS ≤ 1/10 of Kafka Connect's (sink)",
            rss_ratio("sink"),
            at_most(rss_ratio("sink"), 0.1),
        ),
    ];
    for (target, measured, met) in rows {
        let _ = writeln!(md, "| {target} | {} | {} | |", show(measured), verdict(met));
    }
    for (tasks, label) in [(1000, "1 000"), (10_000, "10 000")] {
        let run = results.density.iter().find(|d| d.tasks == tasks);
        let _ = writeln!(
            md,
            "| {label} tasks under 2 GiB RSS, none below half its rate | {} | {} | |",
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
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(system: &'static str, rep: usize, throughput: f64) -> Run {
        Run {
            workload: "w".into(),
            system,
            rep,
            records: 1,
            throughput: Some(throughput),
            startup_ms: None,
            peak_rss_kib: None,
            value_bytes: None,
        }
    }

    #[test]
    fn paired_ratios_divide_within_each_repetition() {
        // Both systems slow in repetition 1: the ratio of medians says 1.5, each pair 2 or 1.
        let runs = [
            run(WASM, 0, 4.0),
            run(NATIVE, 0, 2.0),
            run(NATIVE, 1, 1.0),
            run(WASM, 1, 1.0),
            run(WASM, 2, 6.0),
            run(NATIVE, 2, 3.0),
            run(WASM, 3, 9.0), // no native run to pair with
        ];
        let s = paired(&runs, "w", WASM, NATIVE).expect("three pairs");
        assert_eq!((s.runs, s.median, s.min, s.max), (3, 2.0, 1.0, 2.0));
        assert_eq!(ratio_cell(Some(s)), "2.00 (1.00–2.00)");
        assert!(paired(&runs, "other", WASM, NATIVE).is_none());
    }
}
