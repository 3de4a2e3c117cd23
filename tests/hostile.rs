//! Hostile plugins against a real worker and broker: each misbehaves one way (spins, hoards
//! memory, overflows its stack, panics, floods its output, returns a record over the size limit
//! or more records than asked, returns a packed batch that breaks the contract's rules, reads
//! files it was not granted, escapes its grant with `..` or a symlink, connects to a peer or
//! looks up a name it was not granted). Each must end FAILED with a trace naming the cause, while the worker keeps
//! serving REST and a well-behaved connector beside them keeps its rate and loses nothing.

use std::collections::BTreeSet;
use std::fs;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{self, consume, create_topic, unique_topic};
use wasm_connect_tests::plugins_with;
use wasm_connect_tests::rest::{block, create, get, start_neighbour, task_metrics, task_status};
use wasm_connect_tests::worker::Worker;

/// `base` with the keys of `extra` set over it.
fn merged(mut base: Value, extra: &Value) -> Value {
    for (k, v) in extra.as_object().into_iter().flatten() {
        base[k] = v.clone();
    }
    base
}

/// The neighbour's rate (records a second).
const RATE: u64 = 200;

#[tokio::test(flavor = "multi_thread")]
async fn hostile_plugins_fail_alone_while_rest_and_a_neighbour_keep_going() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen"], &["misbehave", "malformed-batch"]);
    // A granted directory, a secret beside it, and a symlink from inside to the secret.
    let granted = dir.path().join("granted");
    fs::create_dir_all(&granted).unwrap();
    let secret = dir.path().join("secret.txt");
    fs::write(&secret, "do not read").unwrap();
    std::os::unix::fs::symlink(&secret, granted.join("link")).unwrap();
    fs::write(granted.join("fine.txt"), "granted").unwrap();

    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "500".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));

    let neighbour_topic = unique_topic("neighbour");
    create_topic(&neighbour_topic, 1).await;
    start_neighbour(&url, "neighbour", &neighbour_topic, RATE).await;
    let done = |metrics: &Value| metrics["records_done"].as_u64().unwrap_or(0);

    // The network: nothing granted, another port granted, the worker's own REST port, a name
    // not granted.
    let rest_address = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let refused_connect_nothing = format!(
        "the sandbox refused TCP connect to {}: not granted by sandbox.net.connect (granted: nothing)",
        kafka::bootstrap()
    );
    let refused_connect_port = format!(
        "the sandbox refused TCP connect to {}: not granted by sandbox.net.connect (granted: 127.0.0.1:1)",
        kafka::bootstrap()
    );
    let refused_rest = format!("the sandbox refused TCP connect to {rest_address}");
    let refused_http = format!(
        "the sandbox refused HTTP GET http://{}/: not granted by sandbox.http.allow (granted: nothing)",
        kafka::bootstrap()
    );
    let path = |p: &std::path::Path| p.display().to_string();
    let read_granted =
        |file: String| json!({"mode": "read", "path": file, "sandbox.fs.read": path(&granted)});
    let hostile: Vec<(&str, Value, &str)> = vec![
        (
            "spin",
            json!({"mode": "spin"}),
            "longer than its CPU deadline of 500 ms",
        ),
        (
            "alloc",
            json!({"mode": "alloc"}),
            "over its limit of 67108864 bytes",
        ),
        (
            "recurse",
            json!({"mode": "recurse"}),
            "call stack exhausted",
        ),
        ("panic", json!({"mode": "panic"}), "the plugin trapped"),
        (
            "flood",
            json!({"mode": "flood"}),
            "longer than its CPU deadline of 500 ms",
        ),
        (
            "oversized",
            json!({"mode": "oversized", "size": "4096", "sandbox.record.max.bytes": "1024"}),
            "over the limit of 1024 bytes (sandbox.record.max.bytes)",
        ),
        (
            "too-many",
            json!({"mode": "too-many"}),
            "records but at most",
        ),
        (
            "passwd",
            json!({"mode": "read", "path": "/etc/passwd"}),
            "cannot read /etc/passwd",
        ),
        ("outside", read_granted(path(&secret)), "cannot read"),
        (
            "dotdot",
            read_granted(format!("{}/../secret.txt", path(&granted))),
            "cannot read",
        ),
        (
            "symlink",
            read_granted(path(&granted.join("link"))),
            "cannot read",
        ),
        (
            "network",
            json!({"mode": "connect", "address": kafka::bootstrap()}),
            refused_connect_nothing.as_str(),
        ),
        (
            "net-port",
            json!({"mode": "connect", "address": kafka::bootstrap(), "sandbox.net.connect": "127.0.0.1:1"}),
            refused_connect_port.as_str(),
        ),
        (
            "net-rest",
            json!({"mode": "connect", "address": rest_address, "sandbox.net.connect": kafka::bootstrap()}),
            refused_rest.as_str(),
        ),
        (
            "net-http",
            json!({"mode": "http", "address": format!("http://{}/", kafka::bootstrap())}),
            refused_http.as_str(),
        ),
        (
            "net-name",
            json!({"mode": "resolve", "address": "exfiltrate.example.invalid:80", "sandbox.net.connect": "db.example.com:5432"}),
            "the sandbox refused name lookup of \"exfiltrate.example.invalid\": not granted by sandbox.net.connect (granted: db.example.com:5432)",
        ),
        (
            "batch-span",
            json!({"connector.class": "malformed-batch", "mode": "span"}),
            "malformed batch: record 0 of the batch: its value span (4000 bytes from byte 2) lies outside the batch's 4 data bytes",
        ),
        (
            "batch-utf8",
            json!({"connector.class": "malformed-batch", "mode": "utf8"}),
            "malformed batch: record 0 of the batch: its value is not valid UTF-8",
        ),
        (
            "batch-headers",
            json!({"connector.class": "malformed-batch", "mode": "headers"}),
            "its header range (3 entries from entry 0) lies outside the batch's 0 headers",
        ),
        (
            "batch-columns",
            json!({"connector.class": "malformed-batch", "mode": "columns"}),
            "its timestamp list has 2 entries but the batch has 1 records",
        ),
    ];
    let started = Instant::now();
    let base_done = done(&task_metrics(&url, "neighbour", 0).await);
    for (name, extra, _) in &hostile {
        let config = merged(
            json!({"connector.class": "misbehave", "topic": unique_topic(name),
                "task.restart.max.attempts": "0", "sandbox.call.timeout.ms": "500",
                "sandbox.memory.max.bytes": "67108864"}),
            extra,
        );
        assert_eq!(
            create(&url, name, config).await,
            StatusCode::CREATED,
            "{name}"
        );
    }

    // Watch everything through REST: the hostile tasks fail one by one, the neighbour never
    // stops making progress for long.
    let mut traces: Vec<Option<String>> = vec![None; hostile.len()];
    let mut last_progress = (Instant::now(), base_done);
    let mut longest_stall = Duration::ZERO;
    while traces.iter().any(Option::is_none) || started.elapsed() < Duration::from_secs(8) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "hostile tasks still not failed: {traces:?}\n{}",
            worker.log_text()
        );
        for (i, (name, _, _)) in hostile.iter().enumerate() {
            if traces[i].is_none() {
                let status = task_status(&url, name, 0).await;
                assert!(!status.is_null(), "REST answers while {name} misbehaves");
                if status["state"] == "FAILED" {
                    traces[i] = Some(status["trace"].as_str().unwrap_or_default().to_owned());
                }
            }
        }
        let now_done = done(&task_metrics(&url, "neighbour", 0).await);
        if now_done > last_progress.1 {
            last_progress = (Instant::now(), now_done);
        }
        longest_stall = longest_stall.max(last_progress.0.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let neighbour_metrics = task_metrics(&url, "neighbour", 0).await;
    let produced = done(&neighbour_metrics) - base_done;

    for ((name, _, cause), trace) in hostile.iter().zip(&traces) {
        let trace = trace.as_deref().unwrap_or_default();
        assert!(
            trace.contains(cause),
            "{name}: the trace names the cause ({cause:?}): {trace}"
        );
    }
    assert!(
        worker.log_text().contains("misbehave panicked on purpose"),
        "the panic message is logged"
    );
    let log = worker.log_text();
    let flood_lines = log.matches("flooding the log").count();
    assert!(
        flood_lines <= 2000,
        "the flood was cut to the log budget, {flood_lines} lines"
    );
    assert!(
        log.contains("lines of plugin output were dropped"),
        "the drop is logged"
    );

    assert_eq!(neighbour_metrics["state"], "RUNNING", "{neighbour_metrics}");
    assert_eq!(neighbour_metrics["restarts"], 0, "{neighbour_metrics}");
    let rate = produced as f64 / elapsed;
    assert!(
        rate >= RATE as f64 * 0.75,
        "the neighbour kept its rate of {RATE}/s: {rate:.0}/s over {elapsed:.1} s"
    );
    // (Sampled between rounds of REST calls on two busy cores, hence the generous bound.)
    assert!(
        longest_stall < Duration::from_secs(3),
        "the neighbour stalled for {longest_stall:?}"
    );
    let connectors = block(get(&url, "/connectors"));
    assert_eq!(
        connectors.as_array().map(Vec::len),
        Some(hostile.len() + 1),
        "{connectors}"
    );

    let (_, log) = worker.stop();
    // Nothing the neighbour produced is missing: its ids are 0..n without a gap.
    let total = done(&neighbour_metrics) as usize;
    let records = consume(&neighbour_topic, total, Duration::from_secs(60));
    let ids: BTreeSet<u64> = records
        .iter()
        .filter_map(|r| String::from_utf8(r.key.clone()?).ok()?.parse().ok())
        .collect();
    assert!(
        ids.len() >= total,
        "{} of {total} records\n{log}",
        ids.len()
    );
    let max = ids.iter().next_back().copied().unwrap_or(0);
    assert_eq!(ids.len() as u64, max + 1, "no gaps in the neighbour's ids");
}

/// Granted peers are reachable, by name (looked up through the filtered resolver) and by
/// address, and a granted name resolves: the grant is a key, not a wall.
#[tokio::test(flavor = "multi_thread")]
async fn granted_peers_are_reachable_by_name_and_by_address() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &[], &["misbehave"]);
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let port = kafka::bootstrap()
        .rsplit_once(':')
        .map(|(_, p)| p.to_owned())
        .unwrap();
    let cases = [
        (
            "by-name",
            json!({"mode": "connect", "address": format!("localhost:{port}"), "sandbox.net.connect": format!("localhost:{port}")}),
            "connected to ",
        ),
        (
            "by-block",
            json!({"mode": "connect", "address": kafka::bootstrap(), "sandbox.net.connect": format!("127.0.0.0/8:{port}")}),
            "connected to 127.0.0.1:",
        ),
        (
            "http",
            json!({"mode": "http", "address": format!("{url}/connectors?expand=status"),
                   "sandbox.http.allow": format!("{url}/connectors")}),
            "HTTP 200",
        ),
        (
            "lookup",
            json!({"mode": "resolve", "address": "localhost:1", "sandbox.net.connect": "localhost:2, *.example.invalid:1"}),
            "resolved to ",
        ),
    ];
    let mut topics = Vec::new();
    for (name, extra, _) in &cases {
        let topic = unique_topic(name);
        let config = merged(
            json!({"connector.class": "misbehave", "topic": topic,
                "task.restart.max.attempts": "0"}),
            extra,
        );
        assert_eq!(
            create(&url, name, config).await,
            StatusCode::CREATED,
            "{name}"
        );
        topics.push(topic);
    }
    for ((name, _, expected), topic) in cases.iter().zip(&topics) {
        let records = consume(topic, 1, Duration::from_secs(60));
        let text = records
            .first()
            .and_then(|r| String::from_utf8(r.value.clone()?).ok())
            .unwrap_or_default();
        assert!(
            text.contains(expected),
            "{name}: {text:?} (status {})\n{}",
            task_status(&url, name, 0).await,
            worker.log_text()
        );
    }
    worker.stop();
}
