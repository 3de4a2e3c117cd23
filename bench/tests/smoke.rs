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
            "source-file-1-task",
            &["wasm-connect", "Kafka Connect", "Kafka Connect, tuned"][..],
        ),
        (
            "source-file-json-1-task",
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
    ] {
        for system in systems {
            let run = runs
                .iter()
                .find(|r| r["workload"] == workload && r["system"] == *system)
                .unwrap_or_else(|| panic!("no {workload} run of {system}: {results}"));
            let measured = if workload.starts_with("startup") {
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
            if !workload.starts_with("startup") {
                // Steady-state runs: a window, and the CPU the system spent in it.
                assert!(
                    run["seconds"].as_f64().is_some_and(|s| s > 0.0)
                        && run["cpu_s_per_m"].as_f64().is_some_and(|c| c > 0.0),
                    "{workload} {system}: {run}"
                );
            }
        }
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
        "## Peak memory",
        "## Density",
        "## Targets",
    ] {
        assert!(report.contains(heading), "{heading} missing:\n{report}");
    }
    assert!(report.contains("smoke run"), "a smoke report says so");
}
