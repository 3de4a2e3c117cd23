//! The README's first command, run for real on the embedded broker (bounded count), twice: the
//! second run resumes from the stored offsets and adds nothing.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use wasm_connect_tests::worker::{Worker, eventually, write_properties};
use wasm_connect_tests::{build_plugins, repo_root};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn quickstart(dir: &Path, port: u16, count: u32, log: &str) -> Child {
    let out = fs::File::create(dir.join(log)).unwrap();
    Command::new(repo_root().join("scripts/quickstart"))
        .env("QUICKSTART_DIR", dir)
        .env("QUICKSTART_COUNT", count.to_string())
        .env("QUICKSTART_RATE", "2000")
        .env("QUICKSTART_LISTENER", format!("127.0.0.1:{port}"))
        .env("QUICKSTART_REST", "http://127.0.0.1:0")
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) -> std::process::ExitStatus {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    for _ in 0..900 {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    child.wait().unwrap()
}

fn output_lines(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("out/quickstart.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn run_quickstart_in(dir: &Path) {
    build_plugins();
    let port = free_port();
    let child = quickstart(dir, port, 3000, "first.log");
    let done = eventually(Duration::from_secs(600), || output_lines(dir).len() >= 3000);
    let status = stop(child);
    let log = fs::read_to_string(dir.join("first.log")).unwrap();
    assert!(done, "the quickstart did not write 3000 lines:\n{log}");
    assert!(status.success(), "a clean stop ({status}):\n{log}");
    assert!(
        log.contains("Output:") && log.contains("quickstart.txt"),
        "{log}"
    );
    assert!(log.contains("Ctrl-C"), "{log}");
    assert!(
        log.contains("records produced") && log.contains("/s"),
        "progress is printed:\n{log}"
    );
    assert!(
        log.contains(&format!("127.0.0.1:{port}")),
        "says where the broker listens:\n{log}"
    );

    let lines = output_lines(dir);
    assert_eq!(lines.len(), 3000);
    let mut ids: Vec<u64> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, (0..3000).collect::<Vec<_>>());

    // Second run: resumes from the stored offsets; the count is done, so nothing new arrives.
    let child = quickstart(dir, port, 3000, "second.log");
    let second_log = dir.join("second.log");
    let running = eventually(Duration::from_secs(300), || {
        fs::read_to_string(&second_log)
            .unwrap_or_default()
            .contains("Press Ctrl-C")
    });
    std::thread::sleep(Duration::from_secs(5));
    let status = stop(child);
    let log = fs::read_to_string(&second_log).unwrap();
    assert!(running && status.success(), "{log}");
    assert_eq!(
        output_lines(dir).len(),
        3000,
        "the second run resumed instead of starting over:\n{log}"
    );
}

#[test]
fn quickstart_with_an_absolute_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    run_quickstart_in(dir.path());
}

#[test]
fn embedded_broker_with_a_relative_data_directory() {
    // The worker runs in `dir` with `data.dir=rel-data`: tansu must store in dir/rel-data, not
    // somewhere derived from its URL quirks.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    fs::create_dir_all(&out).unwrap();
    let datagen = dir.path().join("datagen.properties");
    write_properties(
        &datagen,
        &[
            ("name", "rel-datagen".into()),
            ("connector.class", "datagen".into()),
            ("topic", "rel".into()),
            ("count", "500".into()),
        ],
    );
    let sink = dir.path().join("sink.properties");
    write_properties(
        &sink,
        &[
            ("name", "rel-sink".into()),
            ("connector.class", "file-sink".into()),
            ("topics", "rel".into()),
            ("file", out.join("rel.txt").display().to_string()),
            ("sandbox.fs.write", out.display().to_string()),
        ],
    );
    let settings = [
        ("data.dir", "rel-data".to_owned()),
        (
            "embedded.broker.listener",
            format!("127.0.0.1:{}", free_port()),
        ),
        ("offset.flush.interval.ms", "500".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[datagen, sink]);
    worker.wait_for_log("embedded Kafka broker listening", Duration::from_secs(120));
    let file = out.join("rel.txt");
    let done = eventually(Duration::from_secs(120), || {
        fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .count()
            >= 500
    });
    let (status, log) = worker.stop();
    assert!(done && status.success(), "{log}");
    assert!(dir.path().join("rel-data/broker.db").exists(), "{log}");
}
