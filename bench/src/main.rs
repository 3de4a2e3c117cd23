//! The end-to-end benchmark suite: wasm-connect against raw librdkafka and Apache Kafka Connect
//! on the same machine and the same real broker, in one run. `scripts/bench` builds everything
//! in release mode, fetches Kafka Connect, starts the broker and runs this; the results go to
//! `BENCHMARKS.md` (tables) and `bench/results.json` (every run).
//!
//! ```text
//! wasm-connect-bench run [--smoke | --quick] [--reps N] [--window S] [--warm-up S] [--worker PATH] [--connect-libs DIR]
//!                        [--criterion DIR] [--markdown FILE] [--json FILE] [--bootstrap ADDR]
//!                        [--only startup,source,compression,sink,latency,density,cluster,postgres,transforms]
//! wasm-connect-bench native-source BOOTSTRAP TOPIC COUNT VALUE_SIZE [WARM_UP_TOPIC [THREADS [COMPRESSION]]]
//! wasm-connect-bench native-sink BOOTSTRAP TOPIC COUNT FILE [file|drop [THREADS]]
//! wasm-connect-bench native-postgres-source JOB
//! wasm-connect-bench native-postgres-sink JOB
//! ```
//!
//! `run` uses the broker at `--bootstrap` (default `$WASM_CONNECT_BENCH_BOOTSTRAP`, else the
//! test broker of `scripts/kafka`). `WASM_CONNECT_BENCH_KEEP` set to anything keeps the run's
//! directories.

mod cluster;
mod kafka;
mod measure;
mod native;
mod postgres;
mod report;
mod systems;
mod window;
mod workloads;

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// What `run` was asked to do.
pub struct Options {
    /// A few records per workload: proves the harness works, measures nothing.
    pub smoke: bool,
    pub reps: usize,
    /// The untimed warm-up before a steady-state window.
    pub warm_up: std::time::Duration,
    /// The steady-state window.
    pub window: std::time::Duration,
    pub worker: PathBuf,
    pub connect_libs: Option<PathBuf>,
    pub criterion: Option<PathBuf>,
    pub markdown: PathBuf,
    pub json: PathBuf,
    pub bootstrap: String,
    /// The command line, for the report.
    pub command: String,
    /// Only these workload groups (empty: all). A partial run prints its tables instead of
    /// replacing `BENCHMARKS.md`, unless `--markdown` names a file.
    pub only: Vec<String>,
    /// Whether `--markdown` was given.
    pub markdown_given: bool,
    /// `--quick`: the headline rows only.
    pub quick: bool,
}

/// The workload groups `--only` chooses from.
pub const GROUPS: &[&str] = &[
    "startup",
    "source",
    "compression",
    "sink",
    "latency",
    "density",
    "cluster",
    "postgres",
    "transforms",
];

impl Options {
    /// Whether workload group `group` (one of [`GROUPS`]) runs.
    pub fn runs(&self, group: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|g| g == group)
    }

    /// Whether every value size and task count runs (not `--quick`; a smoke run proves them
    /// all).
    pub fn full_matrix(&self) -> bool {
        !self.quick
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

fn parse_run(args: &[String]) -> Result<Options> {
    let repo = repo_root();
    let mut options = Options {
        smoke: false,
        // Three repetitions of 7 s windows: 21 s of steady state per system and workload (the
        // benchmark issue asks for at least 20), and what fits the whole matrix in the 45
        // minutes it allows on this 2-core machine with a warm build cache
        // (docs/benchmark-journal.md, newest entry). Every ratio is paired per repetition and
        // its interval says how little three pairs prove; `--reps 5 --window 20` is the longer
        // run for a machine with the time.
        reps: 3,
        warm_up: std::time::Duration::from_secs(3),
        window: std::time::Duration::from_secs(7),
        worker: repo.join("target/release/wasm-connect"),
        connect_libs: None,
        criterion: None,
        markdown: repo.join("BENCHMARKS.md"),
        json: repo.join("bench/results.json"),
        bootstrap: std::env::var("WASM_CONNECT_BENCH_BOOTSTRAP")
            .unwrap_or_else(|_| "127.0.0.1:19092".into()),
        command: format!("wasm-connect-bench {}", args.join(" ")),
        only: Vec::new(),
        markdown_given: false,
        quick: false,
    };
    let (mut reps, mut window, mut warm_up) = (None, None, None);
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .with_context(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--smoke" => options.smoke = true,
            // The headline rows in about ten minutes: every throughput pair, fewer and shorter
            // runs (the intervals are wider, and say so).
            // (its settings apply where no option of the command line says otherwise, in
            // whatever order they come).
            "--quick" => options.quick = true,
            "--reps" => reps = Some(value()?.parse().context("--reps: a number")?),
            "--window" => window = Some(seconds(&value()?, "--window")?),
            "--warm-up" => warm_up = Some(seconds(&value()?, "--warm-up")?),
            "--worker" => options.worker = value()?.into(),
            "--connect-libs" => options.connect_libs = Some(value()?.into()),
            "--criterion" => options.criterion = Some(value()?.into()),
            "--markdown" => {
                options.markdown = value()?.into();
                options.markdown_given = true;
            }
            "--only" => {
                for group in value()?.split(',').map(str::trim).filter(|g| !g.is_empty()) {
                    if !GROUPS.contains(&group) {
                        bail!("--only: unknown workload group {group:?} (one of {GROUPS:?})");
                    }
                    options.only.push(group.to_owned());
                }
            }
            "--json" => options.json = value()?.into(),
            "--bootstrap" => options.bootstrap = value()?,
            other => bail!("unknown option {other:?} (see the module docs of bench/src/main.rs)"),
        }
    }
    if options.quick {
        options.window = std::time::Duration::from_secs(6);
        if options.only.is_empty() {
            options.only = vec!["source".into(), "sink".into()];
        }
    }
    options.reps = reps.unwrap_or(options.reps);
    options.window = window.unwrap_or(options.window);
    options.warm_up = warm_up.unwrap_or(options.warm_up);
    if options.reps == 0 {
        bail!("--reps must be at least 1");
    }
    if options.smoke {
        options.reps = 1;
    }
    Ok(options)
}

/// A duration given in (possibly fractional) seconds.
fn seconds(text: &str, option: &str) -> Result<std::time::Duration> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(std::time::Duration::from_secs_f64)
        .with_context(|| format!("{option}: {text:?} is not a positive number of seconds"))
}

/// What `--help` prints (the module docs say more).
const USAGE: &str = "\
usage:
  wasm-connect-bench run [--smoke | --quick] [--reps N] [--window S] [--warm-up S] [--worker PATH] [--connect-libs DIR]
                         [--criterion DIR] [--markdown FILE] [--json FILE] [--bootstrap HOST:PORT]
                         [--only startup,source,compression,sink,latency,density,cluster,postgres,transforms]
  wasm-connect-bench native-source BOOTSTRAP TOPIC COUNT VALUE_SIZE [WARM_UP_TOPIC [THREADS [COMPRESSION]]]
  wasm-connect-bench native-sink BOOTSTRAP TOPIC COUNT FILE [file|drop [THREADS]]
  wasm-connect-bench native-postgres-source JOB     (JOB: JSON, written by `run`)
  wasm-connect-bench native-postgres-sink JOB

--bootstrap defaults to $WASM_CONNECT_BENCH_BOOTSTRAP, else the test broker of scripts/kafka.
A run with --only prints its tables and writes no files, unless --markdown is given (then it
writes the Markdown and the JSON). WASM_CONNECT_BENCH_KEEP (any value) keeps the run's
directories.";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> Result<&str> {
        args.get(i)
            .map(String::as_str)
            .with_context(|| format!("missing argument {i}"))
    };
    // (Among `run`'s options too, but not the native commands', which take file names.)
    let help = |a: &String| matches!(a.as_str(), "--help" | "-h");
    if args.first().is_some_and(|a| help(a) || a == "help")
        || (args.first().is_some_and(|a| a == "run") && args.iter().any(help))
    {
        println!("{USAGE}");
        return Ok(());
    }
    match args.first().map(String::as_str) {
        Some("run") => {
            let options = parse_run(&args)?;
            let rt = tokio::runtime::Runtime::new()?;
            let results = rt.block_on(workloads::run_all(&options, &repo_root()))?;
            report::write(&options, &results)
        }
        Some("native-source") => {
            let warm_up = args.get(5).map(String::as_str);
            let threads = args.get(6).map_or(Ok(1), |t| t.parse())?;
            let compression = args.get(7).map_or("none", String::as_str);
            native::source(
                arg(1)?,
                arg(2)?,
                arg(3)?.parse()?,
                arg(4)?.parse()?,
                warm_up,
                threads,
                compression,
            )
        }
        Some("native-sink") => {
            let drop = match args.get(5).map(String::as_str) {
                None | Some("file") => false,
                Some("drop") => true,
                Some(other) => bail!("native-sink: mode {other:?} is file or drop"),
            };
            let threads = args.get(6).map_or(Ok(1), |t| t.parse())?;
            native::sink(arg(1)?, arg(2)?, arg(3)?.parse()?, arg(4)?, drop, threads)
        }
        Some("native-postgres-source") => postgres::native_source(arg(1)?),
        Some("native-postgres-sink") => postgres::native_sink(arg(1)?),
        _ => bail!("{USAGE}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{GROUPS, parse_run};

    fn args(list: &[&str]) -> Vec<String> {
        std::iter::once("run")
            .chain(list.iter().copied())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn only_selects_workload_groups() {
        let all = parse_run(&args(&[])).expect("no options");
        assert!(GROUPS.iter().all(|g| all.runs(g)));
        let some = parse_run(&args(&["--only", "sink, density"])).expect("valid groups");
        assert!(some.runs("sink") && some.runs("density"));
        assert!(!some.runs("source") && !some.runs("startup"));
        assert!(
            !some.markdown_given,
            "a partial run leaves BENCHMARKS.md alone"
        );
    }

    #[test]
    fn only_rejects_unknown_groups_by_name() {
        let error = parse_run(&args(&["--only", "sink,sinks"]))
            .err()
            .expect("sinks is not a group")
            .to_string();
        assert!(error.contains("\"sinks\""), "{error}");
    }

    #[test]
    fn quick_keeps_the_groups_and_numbers_the_command_line_names_in_any_order() {
        let quick = parse_run(&args(&["--quick"])).expect("quick");
        assert!(quick.quick && quick.runs("source") && quick.runs("sink"));
        assert!(!quick.runs("density") && !quick.runs("startup"));
        assert_eq!(quick.window, std::time::Duration::from_secs(6));
        for order in [
            ["--only", "source", "--quick"],
            ["--quick", "--only", "source"],
        ] {
            let some = parse_run(&args(&order)).expect("quick with --only");
            assert!(some.quick && some.runs("source"), "{order:?}");
            assert!(!some.runs("sink"), "{order:?}: --only names the groups");
        }
        let longer =
            parse_run(&args(&["--reps", "5", "--window", "20", "--quick"])).expect("quick");
        assert_eq!(longer.reps, 5);
        assert_eq!(longer.window, std::time::Duration::from_secs(20));
    }
}
