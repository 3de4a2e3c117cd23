//! A smoke run of the benchmark harness: a few records per workload on every system, so the
//! harness cannot rot. It measures nothing (the suite's numbers come from `scripts/bench`);
//! it checks that every workload ran on every system and that the report was written.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_owned()
}

fn run(command: &mut Command) -> String {
    let output = command.output().expect("run a command");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn the_harness_runs_every_workload_on_every_system_and_writes_the_report() {
    let repo = repo();
    run(&mut Command::new(repo.join("scripts/build-plugins")));
    run(Command::new(repo.join("scripts/kafka")).arg("start"));
    run(Command::new(repo.join("scripts/postgres")).arg("start"));
    let libs = run(Command::new(repo.join("bench/kafka-connect")).arg("fetch"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "wasm-connect",
            "--bin",
            "wasm-connect",
        ])
        .current_dir(&repo));
    let worker = std::env::current_exe()
        .expect("test executable")
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .join("wasm-connect");
    let out = tempfile::tempdir().expect("temp dir");
    let (markdown, json) = (
        out.path().join("BENCHMARKS.md"),
        out.path().join("results.json"),
    );
    run(Command::new(env!("CARGO_BIN_EXE_wasm-connect-bench"))
        .arg("run")
        .arg("--smoke")
        .arg("--worker")
        .arg(&worker)
        .arg("--connect-libs")
        .arg(&libs)
        .arg("--markdown")
        .arg(&markdown)
        .arg("--json")
        .arg(&json));

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("results.json")).expect("JSON");
    let runs = results["runs"].as_array().expect("runs");
    for (workload, systems) in [
        ("startup-cold", &["wasm-connect"][..]),
        ("startup-warm", &["wasm-connect", "Kafka Connect"][..]),
        (
            "source-datagen-1-task",
            &[
                "wasm-connect",
                "native rdkafka",
                "wasm-connect, no-op plugin",
            ][..],
        ),
        (
            "source-datagen-2-task",
            &["wasm-connect", "native rdkafka"][..],
        ),
        (
            "source-datagen-8-task",
            &["wasm-connect", "native rdkafka"][..],
        ),
        (
            "source-datagen-1-task-1KiB",
            &["wasm-connect", "native rdkafka"][..],
        ),
        (
            "source-datagen-2-task-1KiB",
            &["wasm-connect", "native rdkafka"][..],
        ),
        (
            "source-datagen-1-task-10KiB",
            &["wasm-connect", "native rdkafka"][..],
        ),
        (
            "source-file-1-task",
            &[
                "wasm-connect",
                "Kafka Connect",
                "Kafka Connect, tuned",
                "Kafka Connect, tuned, -Xmx256m",
            ][..],
        ),
        (
            "source-file-json-1-task",
            &["wasm-connect", "Kafka Connect, tuned"][..],
        ),
        (
            "source-file-json-transforms-1-task",
            &["wasm-connect", "Kafka Connect, tuned"][..],
        ),
        (
            "source-datagen-1-task-lz4",
            &["wasm-connect", "native rdkafka"][..],
        ),
        (
            "source-datagen-1-task-zstd",
            &["wasm-connect", "native rdkafka"][..],
        ),
        (
            "source-file-1-task-lz4",
            &["wasm-connect", "Kafka Connect, tuned"][..],
        ),
        (
            "source-file-1-task-zstd",
            &["wasm-connect", "Kafka Connect, tuned"][..],
        ),
        (
            "sink-drop",
            &[
                "wasm-connect, no-op plugin",
                "native rdkafka",
                "Kafka Connect, tuned",
            ][..],
        ),
        (
            "sink-file",
            &[
                "wasm-connect",
                "native rdkafka",
                "Kafka Connect",
                "Kafka Connect, tuned",
            ][..],
        ),
        (
            "sink-drop-2-task",
            &[
                "wasm-connect, no-op plugin",
                "native rdkafka",
                "Kafka Connect, tuned",
            ][..],
        ),
        (
            "sink-drop-1KiB",
            &[
                "wasm-connect, no-op plugin",
                "native rdkafka",
                "Kafka Connect, tuned",
            ][..],
        ),
        (
            "sink-drop-2-task-1KiB",
            &[
                "wasm-connect, no-op plugin",
                "native rdkafka",
                "Kafka Connect, tuned",
            ][..],
        ),
        ("sink-file-1KiB", &["wasm-connect", "native rdkafka"][..]),
        ("recovery", &["wasm-connect", "Kafka Connect, tuned"][..]),
        (
            "postgres-source",
            &["wasm-connect", "native postgres-wire + rdkafka"][..],
        ),
        (
            "postgres-sink",
            &["wasm-connect", "native postgres-wire + rdkafka"][..],
        ),
    ] {
        for system in systems {
            let run = runs
                .iter()
                .find(|r| r["workload"] == workload && r["system"] == *system)
                .unwrap_or_else(|| panic!("no {workload} run of {system}: {results}"));
            let timed = workload.starts_with("startup") || workload == "recovery";
            let measured = if timed {
                &run["startup_ms"]
            } else {
                &run["throughput"]
            };
            assert!(
                measured.as_f64().is_some_and(|v| v > 0.0),
                "{workload} {system}: {run}"
            );
            assert!(
                run["peak_rss_kib"].as_u64().is_some_and(|k| k > 0),
                "{workload} {system}: {run}"
            );
            if !timed {
                // Steady-state runs: a window, and the CPU the system spent in it.
                assert!(
                    run["seconds"].as_f64().is_some_and(|s| s > 0.0)
                        && run["cpu_s_per_m"].as_f64().is_some_and(|c| c > 0.0),
                    "{workload} {system}: {run}"
                );
            }
        }
    }
    // The same input makes the same records on both sides of a pair: datagen and the native
    // producer (whose records are datagen's), and, through the JSON converter with schemas,
    // wasm-connect and Kafka Connect's JsonConverter (the same envelope, byte for byte in size).
    let value_bytes = |workload: &str, system: &str| {
        runs.iter()
            .find(|r| r["workload"] == workload && r["system"] == system)
            .and_then(|r| r["value_bytes"].as_u64())
            .unwrap_or_else(|| panic!("no value size for {workload} {system}"))
    };
    for (workload, size) in [
        ("source-datagen-1-task", 100),
        ("source-datagen-1-task-1KiB", 1024),
        ("source-datagen-1-task-10KiB", 10240),
    ] {
        let (wasm, native) = (
            value_bytes(workload, "wasm-connect"),
            value_bytes(workload, "native rdkafka"),
        );
        assert_eq!(wasm, native, "{workload}");
        assert!(wasm.abs_diff(size) <= size / 20, "{workload}: {wasm} bytes");
    }
    let json = value_bytes("source-file-json-1-task", "wasm-connect");
    assert_eq!(
        json,
        value_bytes("source-file-json-1-task", "Kafka Connect, tuned"),
        "the JSON converter's envelope matches Kafka Connect's JsonConverter's"
    );
    assert!(json > 150, "{json} bytes: a 100-byte line in the envelope");
    let transformed = value_bytes("source-file-json-transforms-1-task", "wasm-connect");
    assert_eq!(
        transformed,
        value_bytes("source-file-json-transforms-1-task", "Kafka Connect, tuned"),
        "the same three transforms make the same record as Kafka Connect's"
    );
    assert!(
        transformed > json,
        "{transformed} bytes: a struct of two fields"
    );
    let latency = results["latency"].as_array().expect("latency runs");
    for system in [
        "wasm-connect, no-op plugin",
        "Kafka Connect, tuned",
        "Kafka Connect",
    ] {
        let run = latency
            .iter()
            .find(|l| l["system"] == system)
            .unwrap_or_else(|| panic!("no latency run of {system}: {results}"));
        assert!(
            run["records"].as_u64().is_some_and(|n| n > 0)
                && run["p99_ms"]
                    .as_f64()
                    .is_some_and(|p| p >= run["p50_ms"].as_f64().unwrap_or(f64::MAX)),
            "{system}: {run}"
        );
    }
    let connectors = results["connector_density"]
        .as_array()
        .expect("connector density");
    for system in [
        "wasm-connect",
        "Kafka Connect, tuned",
        "Kafka Connect, tuned, -Xmx256m",
    ] {
        let run = connectors
            .iter()
            .find(|d| d["system"] == system)
            .unwrap_or_else(|| panic!("no connector density run of {system}: {results}"));
        assert!(
            run["connectors"] == 10
                && run["records"].as_u64().is_some_and(|n| n > 0)
                && run["rss_kib"].as_u64().is_some_and(|k| k > 0)
                && run["cpu_seconds"].as_f64().is_some_and(|c| c > 0.0),
            "{system}: {run}"
        );
    }
    // Both clusters moved the dead worker's tasks and started the new ones, no sooner than the
    // session timeout allows for the failover.
    let cluster = results["cluster"].as_array().expect("cluster runs");
    for system in ["wasm-connect", "Kafka Connect"] {
        let run = cluster
            .iter()
            .find(|c| c["system"] == system)
            .unwrap_or_else(|| panic!("no cluster run of {system}: {results}"));
        let session = run["session_ms"].as_f64().unwrap_or(f64::MAX);
        assert!(
            run["moved_tasks"].as_u64().is_some_and(|n| n > 0)
                && run["failover_ms"]
                    .as_f64()
                    .is_some_and(|f| f >= session / 2.0)
                && run["reconfigure_ms"].as_f64().is_some_and(|r| r >= 0.0)
                && run["records"].as_u64().is_some_and(|n| n > 0),
            "{system}: {run}"
        );
    }
    let density = &results["density"][0];
    assert_eq!(density["tasks"], 10, "{results}");
    assert_eq!(
        density["tasks_with_progress"], 10,
        "every density task progressed: {results}"
    );
    let report = std::fs::read_to_string(&markdown).expect("BENCHMARKS.md");
    for heading in [
        "## Throughput, steady state",
        "## Comparisons",
        "## Start-up",
        "## Restart recovery",
        "## End-to-end latency",
        "## Peak memory",
        "## Density",
        "## Density against Kafka Connect",
        "## Distributed mode",
        "## Targets",
        "### How far librdkafka itself gets against Kafka Connect",
    ] {
        assert!(report.contains(heading), "{heading} missing:\n{report}");
    }
    assert!(report.contains("smoke run"), "a smoke report says so");
}
