//! The control plane: one control loop, an actor per connector, reads from a snapshot.
//!
//! - Reads about other connectors (and the connector list) are answered while a connector's
//!   task is stuck in `stop` for 20 s during its delete: asserted by order (the reads complete
//!   while the delete is still pending), not by a time limit.
//! - An offsets reset racing a resume of the same connector is serialized: either the reset
//!   happens first (the source starts again from nothing) or it is refused because the
//!   connector already runs; never half of each.
//! - A connector that asks for a reconfiguration (`context.request-reconfiguration` from a
//!   task's `poll`) is split again by its kept connector instance, and its tasks restart on the
//!   new split.
//! - A connector whose `monitor` reports a change is split again too; one whose `monitor` fails
//!   for good is FAILED.
//! - A connector whose `task-configs` fails retriably is retried under the restart policy and
//!   ends RUNNING.
//! - `file-source` over a directory notices files added while it runs (its `monitor`): the split
//!   grows from 3 files to 5, every line of all 5 reaches the sink, and a neighbour connector
//!   keeps its task.
//! - A sink task whose partitions are revoked (a second worker joins its group) flushes and
//!   commits them before the group moves them on: no record is written twice.
//! - A sink task whose `put` fails retriably for about four `max.poll.interval.ms` stays in its
//!   group (it polls the consumer while it backs off) and writes every record exactly once.
//! - A sink task whose consumer is fenced (another member took its `group.instance.id`) fails,
//!   is restarted with a new consumer, and commits again.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{self, consume, create_topic, unique_topic};
use wasm_connect_tests::plugins_with;
use wasm_connect_tests::rest::{
    block, create, get, start_neighbour, task_metrics, task_status, wait_for_state,
};
use wasm_connect_tests::worker::{Worker, eventually, lines};

/// `method path` with an optional JSON body: the status and the body as JSON.
async fn call(url: &str, method: reqwest::Method, path: &str) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .request(method, format!("{url}{path}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The stored `seq` of datagen's task 0.
async fn datagen_seq(url: &str, name: &str) -> Option<u64> {
    let offsets = get(url, &format!("/connectors/{name}/offsets")).await;
    offsets["offsets"]
        .as_array()?
        .iter()
        .find(|o| o["partition"]["task"] == 0)?["offset"]["seq"]
        .as_u64()
}

fn wait_records_done(url: &str, name: &str, at_least: u64) {
    let mut last = Value::Null;
    let done = eventually(Duration::from_secs(60), || {
        last = block(task_metrics(url, name, 0));
        last["state"] == "RUNNING" && last["records_done"].as_u64().unwrap_or(0) >= at_least
    });
    assert!(done, "{name} did not write {at_least} records: {last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_answer_during_a_stuck_stop_and_offset_changes_are_serialized() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen"], &["misbehave"]);
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "200".to_owned()),
        // Long enough that the stop below really waits for the plugin's 20 s.
        ("task.shutdown.graceful.timeout.ms", "40000".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));

    let neighbour_topic = unique_topic("neighbour");
    create_topic(&neighbour_topic, 1).await;
    start_neighbour(&url, "neighbour", &neighbour_topic, 50).await;

    // A task that takes 20 s to stop.
    let stuck = json!({"connector.class": "misbehave", "mode": "sleep", "sleep.in": "stop",
        "sleep.ms": "20000", "topic": unique_topic("stuck")});
    assert_eq!(create(&url, "stuck", stuck).await, StatusCode::CREATED);
    wait_records_done(&url, "stuck", 0);
    let delete = tokio::spawn({
        let url = url.clone();
        async move { call(&url, reqwest::Method::DELETE, "/connectors/stuck").await }
    });
    worker.wait_for_log("deleting connector stuck", Duration::from_secs(30));
    let status = get(&url, "/connectors/neighbour/status").await;
    let list = get(&url, "/connectors").await;
    let delete_pending = !delete.is_finished();
    assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    let names: Vec<&str> = list
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(names.contains(&"neighbour"), "{list}");
    assert!(
        delete_pending,
        "the reads were answered while the delete waited on the plugin's stop"
    );
    let (deleted, body) = delete.await.unwrap();
    assert_eq!(deleted, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(
        call(&url, reqwest::Method::GET, "/connectors/stuck")
            .await
            .0,
        StatusCode::NOT_FOUND
    );

    // An offsets reset racing a resume, several times over.
    let topic = unique_topic("raced");
    create_topic(&topic, 1).await;
    let raced = json!({"connector.class": "datagen", "topic": topic, "rate": "2000",
        "value.converter": "string"});
    assert_eq!(create(&url, "raced", raced).await, StatusCode::CREATED);
    for round in 0..5 {
        wait_records_done(&url, "raced", 500);
        let stop = call(&url, reqwest::Method::PUT, "/connectors/raced/stop").await;
        assert_eq!(stop.0, StatusCode::NO_CONTENT, "round {round}: {}", stop.1);
        let before = datagen_seq(&url, "raced")
            .await
            .unwrap_or_else(|| panic!("round {round}: offsets stored after 500 records"));
        assert!(before >= 499, "round {round}: seq {before}");
        let reset = tokio::spawn({
            let url = url.clone();
            async move { call(&url, reqwest::Method::DELETE, "/connectors/raced/offsets").await }
        });
        let resume = call(&url, reqwest::Method::PUT, "/connectors/raced/resume").await;
        let (reset, body) = reset.await.unwrap();
        assert_eq!(
            resume.0,
            StatusCode::ACCEPTED,
            "round {round}: {}",
            resume.1
        );
        // Whatever the order, a few records later the stored offset tells which came first.
        wait_records_done(&url, "raced", 1);
        let stop = call(&url, reqwest::Method::PUT, "/connectors/raced/stop").await;
        assert_eq!(stop.0, StatusCode::NO_CONTENT);
        let after = datagen_seq(&url, "raced").await;
        match reset {
            StatusCode::OK => assert!(
                after.is_none_or(|seq| seq < before),
                "round {round}: the reset was acknowledged, so the source started again from nothing: seq {after:?}, {before} before"
            ),
            StatusCode::BAD_REQUEST => {
                assert!(
                    body.to_string().contains("STOPPED"),
                    "round {round}: {body}"
                );
                assert!(
                    after.is_some_and(|seq| seq > before),
                    "round {round}: the reset was refused, so the source went on: seq {after:?}, {before} before"
                );
            }
            other => panic!("round {round}: the reset answered {other}: {body}"),
        }
        let resume = call(&url, reqwest::Method::PUT, "/connectors/raced/resume").await;
        assert_eq!(resume.0, StatusCode::ACCEPTED);
    }
    let (_, log) = worker.stop();
    assert!(log.contains("stopped."), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn connectors_are_split_again_when_they_ask_or_their_monitor_reports_a_change_and_when_a_split_failed_retriably()
 {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &[], &["misbehave"]);
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "200".to_owned()),
        ("task.restart.backoff.initial.ms", "100".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let generation = |url: &str, name: &str| {
        let tasks = block(get(url, &format!("/connectors/{name}/tasks")));
        tasks[0]["config"]["generation"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_default()
    };

    // A task of the first split asks for a new one from its first poll.
    let topic = unique_topic("resplit");
    create_topic(&topic, 1).await;
    let resplit = json!({"connector.class": "misbehave", "mode": "resplit-once", "topic": topic,
        "value.converter": "string"});
    assert_eq!(create(&url, "resplit", resplit).await, StatusCode::CREATED);
    assert!(
        eventually(Duration::from_secs(60), || generation(&url, "resplit")
            == "2"),
        "the connector was split again: tasks {}\n{}",
        block(get(&url, "/connectors/resplit/tasks")),
        worker.log_text()
    );
    wait_records_done(&url, "resplit", 1);
    let records = consume(&topic, usize::MAX, Duration::from_secs(5));
    assert!(
        records.iter().any(|r| r.text() == r#"{"generation":2}"#),
        "the second split's task writes"
    );
    assert!(
        worker
            .log_text()
            .contains("the task configs changed; restarting the connector's tasks"),
        "{}",
        worker.log_text()
    );

    // task-configs fails retriably twice, then splits.
    let fails = json!({"connector.class": "misbehave", "mode": "split-fails", "fail.times": "2",
        "topic": unique_topic("fails"), "value.converter": "string"});
    assert_eq!(create(&url, "fails", fails).await, StatusCode::CREATED);
    let mut status = Value::Null;
    assert!(
        eventually(Duration::from_secs(60), || {
            status = block(get(&url, "/connectors/fails/status"));
            status["connector"]["state"] == "RUNNING" && status["tasks"][0]["state"] == "RUNNING"
        }),
        "the connector ends RUNNING: {status}\n{}",
        worker.log_text()
    );
    assert_eq!(
        generation(&url, "fails"),
        "3",
        "two failed splits, then one"
    );
    let log = worker.log_text();
    assert_eq!(
        log.matches("could not split its work").count(),
        2,
        "each retriable failure is logged once: {log}"
    );

    // The connector's monitor reports a change (its first call, one interval after the tasks
    // started): split again, no task asked.
    let topic = unique_topic("monitored");
    create_topic(&topic, 1).await;
    let monitored = json!({"connector.class": "misbehave", "mode": "monitor-once", "topic": topic,
        "value.converter": "string", "connector.monitor.interval.ms": "300"});
    assert_eq!(
        create(&url, "monitored", monitored).await,
        StatusCode::CREATED
    );
    assert!(
        eventually(Duration::from_secs(60), || generation(&url, "monitored")
            == "2"),
        "the monitored connector was split again: tasks {}\n{}",
        block(get(&url, "/connectors/monitored/tasks")),
        worker.log_text()
    );
    wait_records_done(&url, "monitored", 1);
    let records = consume(&topic, usize::MAX, Duration::from_secs(5));
    assert!(
        records.iter().any(|r| r.text() == r#"{"generation":2}"#),
        "the second split's task writes"
    );
    let log = worker.log_text();
    assert!(
        log.contains("the connector's monitor reported a change in its work")
            && log.contains("monitor: the work changed"),
        "{log}"
    );

    // A monitor that fails for good fails the connector, and says why.
    let failing = json!({"connector.class": "misbehave", "mode": "monitor-fails",
        "topic": unique_topic("monitor-fails"), "connector.monitor.interval.ms": "200"});
    assert_eq!(
        create(&url, "monitor-fails", failing).await,
        StatusCode::CREATED
    );
    let mut status = Value::Null;
    assert!(
        eventually(Duration::from_secs(60), || {
            status = block(get(&url, "/connectors/monitor-fails/status"));
            status["connector"]["state"] == "FAILED"
        }),
        "the connector fails: {status}"
    );
    assert!(
        status["connector"]["trace"]
            .as_str()
            .is_some_and(|t| t.contains("monitor") && t.contains("fails on purpose")),
        "{status}"
    );
    // (A failed connector would make the worker's exit below a failure.)
    let (deleted, _) = call(&url, reqwest::Method::DELETE, "/connectors/monitor-fails").await;
    assert_eq!(deleted, StatusCode::NO_CONTENT);

    // SIGTERM while a create is in its connector's actor (the plugin's `validate` sleeps): the
    // worker still stops in order (the control loop keeps serving the actor's store while it
    // waits for the actors to stop).
    let slow = json!({"connector.class": "misbehave", "mode": "sleep", "sleep.in": "validate",
        "sleep.ms": "3000", "topic": unique_topic("slow")});
    let creating = tokio::spawn({
        let url = url.clone();
        async move { create(&url, "slow", slow).await }
    });
    worker.wait_for_log("sleeping in validate", Duration::from_secs(30));
    let (status, log) = worker.stop();
    assert!(
        status.success() && log.contains("stopped."),
        "an orderly exit ({status}): {log}"
    );
    let _ = creating.await;
}

/// Write `bytes` as `to` the way a deploy tool does: aside, then renamed in place.
fn deploy(bytes: &[u8], to: &std::path::Path) {
    let aside = to.with_extension("partial");
    std::fs::write(&aside, bytes).unwrap();
    std::fs::rename(&aside, to).unwrap();
}

/// misbehave built with spec version `0.1.0-build.<letter>` (the built file's version marker
/// rewritten: the same plugin, another version).
fn misbehave_build(letter: u8) -> Vec<u8> {
    let mut bytes = std::fs::read(wasm_connect_tests::test_plugin_file("misbehave")).unwrap();
    let marker = b"0.1.0-build.a";
    let at = bytes
        .windows(marker.len())
        .position(|w| w == marker)
        .expect("misbehave carries its version marker");
    bytes[at + marker.len() - 1] = letter;
    bytes
}

#[tokio::test(flavor = "multi_thread")]
async fn connectors_follow_their_plugin_file_unless_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &[], &["misbehave"]);
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("plugin.scan.interval.ms", "200".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let idle = |extra: Value| {
        let mut config = json!({"connector.class": "misbehave", "mode": "sleep", "sleep.ms": "100",
            "topic": unique_topic("idle")});
        for (k, v) in extra.as_object().unwrap() {
            config[k] = v.clone();
        }
        config
    };
    assert_eq!(
        create(&url, "follows", idle(json!({}))).await,
        StatusCode::CREATED
    );
    assert_eq!(
        create(
            &url,
            "pinned",
            idle(json!({"connector.plugin.version": "[0.1.0-build.a]"}))
        )
        .await,
        StatusCode::CREATED
    );
    let versions = |url: &str, name: &str| {
        let status = block(get(url, &format!("/connectors/{name}/status")));
        (
            status["connector"]["version"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            status["tasks"][0]["version"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            status["tasks"][0]["state"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        )
    };
    let running = |version: &str| (version.to_owned(), version.to_owned(), "RUNNING".to_owned());
    assert!(eventually(Duration::from_secs(30), || {
        versions(&url, "follows") == running("0.1.0-build.a")
    }));
    assert_eq!(versions(&url, "pinned"), running("0.1.0-build.a"));

    // A second version beside the first: the unpinned connector moves to it.
    deploy(&misbehave_build(b'b'), &plugins.join("misbehave-b.wasm"));
    assert!(
        eventually(Duration::from_secs(60), || versions(&url, "follows")
            == running("0.1.0-build.b")),
        "follows runs build b: {:?}\n{}",
        versions(&url, "follows"),
        worker.log_text()
    );
    let listed = get(&url, "/connector-plugins?connectorsOnly=true").await;
    for version in ["0.1.0-build.a", "0.1.0-build.b"] {
        assert!(
            listed
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["class"] == "misbehave" && p["version"] == version),
            "{listed}"
        );
    }
    // That file replaced in place by a third build: it moves again.
    deploy(&misbehave_build(b'c'), &plugins.join("misbehave-b.wasm"));
    assert!(
        eventually(Duration::from_secs(60), || versions(&url, "follows")
            == running("0.1.0-build.c")),
        "follows runs build c: {:?}",
        versions(&url, "follows")
    );
    // The pinned one stayed on its version all along, never restarted.
    assert_eq!(versions(&url, "pinned"), running("0.1.0-build.a"));
    let log = worker.log_text();
    assert!(
        log.contains("plugin misbehave changed (0.1.0-build.a -> 0.1.0-build.b")
            && log.contains("plugin misbehave changed (0.1.0-build.b -> 0.1.0-build.c"),
        "{log}"
    );
    assert_eq!(log.matches("plugin misbehave changed").count(), 2, "{log}");
    // A version range that cannot be parsed is refused, naming the key.
    let bad = reqwest::Client::new()
        .post(format!("{url}/connectors"))
        .json(&json!({"name": "bad", "config": idle(json!({"connector.plugin.version": "[1.0,2.0"}))}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let body = bad.text().await.unwrap();
    assert!(body.contains("connector.plugin.version"), "{body}");
    // A version no file has is the version key's problem, not the class's.
    let none = reqwest::Client::new()
        .post(format!("{url}/connectors"))
        .json(
            &json!({"name": "none", "config": idle(json!({"connector.plugin.version": "9.9.9"}))}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), StatusCode::BAD_REQUEST);
    let body = none.text().await.unwrap();
    assert!(
        body.contains("connector.plugin.version: no version of misbehave")
            && body.contains("misbehave@0.1.0-build.c"),
        "{body}"
    );
    let (_, log) = worker.stop();
    assert!(log.contains("stopped."), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_source_over_a_directory_splits_again_when_files_appear_and_loses_no_line() {
    const LINES: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["file-source", "file-sink", "datagen"], &[]);
    let watched = dir.path().join("watched");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&watched).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let write_file = |n: usize| {
        let text: String = (0..LINES).map(|i| format!("file{n}-line{i}\n")).collect();
        // Written aside and renamed in, so the connector never sees half a file.
        let aside = dir.path().join(format!("file{n}.tmp"));
        std::fs::write(&aside, text).unwrap();
        std::fs::rename(&aside, watched.join(format!("file{n}.txt"))).unwrap();
    };
    for n in 0..3 {
        write_file(n);
    }
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "200".to_owned()),
        ("connector.monitor.interval.ms", "300".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));

    // A neighbour that must not notice anything.
    let neighbour_topic = unique_topic("dir-neighbour");
    create_topic(&neighbour_topic, 1).await;
    start_neighbour(&url, "neighbour", &neighbour_topic, 100).await;

    let topic = unique_topic("directory");
    create_topic(&topic, 1).await;
    let source = json!({"connector.class": "file-source", "topic": topic, "tasks.max": "3",
        "directory": watched.display().to_string(),
        "sandbox.fs.read": watched.display().to_string(), "value.converter": "string"});
    let sink = json!({"connector.class": "file-sink", "topics": topic,
        "file": out.join("out.txt").display().to_string(),
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(create(&url, "files", source).await, StatusCode::CREATED);
    assert_eq!(create(&url, "sink", sink).await, StatusCode::CREATED);
    let split = |url: &str| -> Vec<Vec<String>> {
        let tasks = block(get(url, "/connectors/files/tasks"));
        tasks
            .as_array()
            .map(|tasks| {
                tasks
                    .iter()
                    .map(|t| {
                        let files = t["config"]["file-source.task.files"]
                            .as_str()
                            .unwrap_or("[]");
                        serde_json::from_str(files).unwrap_or_default()
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let sizes = |split: &[Vec<String>]| split.iter().map(Vec::len).collect::<Vec<_>>();
    assert_eq!(sizes(&split(&url)), vec![1, 1, 1]);
    let received = |n: usize| {
        eventually(Duration::from_secs(60), || {
            lines(&out.join("out.txt")).len() >= n * LINES
        })
    };
    assert!(
        received(3),
        "the first three files arrive: {}",
        worker.log_text()
    );
    let neighbour_before = block(task_metrics(&url, "neighbour", 0))["records_done"]
        .as_u64()
        .unwrap_or(0);

    // Two more files while it runs: the monitor notices, the split covers five.
    write_file(3);
    write_file(4);
    let mut now = Vec::new();
    assert!(
        eventually(Duration::from_secs(60), || {
            now = split(&url);
            sizes(&now) == vec![2, 2, 1]
        }),
        "the split covers five files: {now:?}\n{}",
        worker.log_text()
    );
    let mut covered: Vec<String> = now.concat();
    covered.sort();
    let expected: Vec<String> = (0..5)
        .map(|n| watched.join(format!("file{n}.txt")).display().to_string())
        .collect();
    assert_eq!(covered, expected, "every file once");
    assert!(received(5), "all five files arrive: {}", worker.log_text());

    // Every line of every file, none lost (a line read twice across the restart would be a
    // duplicate, which at-least-once allows; none is expected).
    let got = lines(&out.join("out.txt"));
    let distinct: std::collections::BTreeSet<&String> = got.iter().collect();
    let want: std::collections::BTreeSet<String> = (0..5)
        .flat_map(|n| (0..LINES).map(move |i| format!("file{n}-line{i}")))
        .collect();
    assert_eq!(
        distinct
            .into_iter()
            .cloned()
            .collect::<std::collections::BTreeSet<_>>(),
        want,
        "every line of the five files"
    );
    assert_eq!(got.len(), 5 * LINES, "no line twice");

    // The neighbour's task was never restarted: the same task, still counting.
    let neighbour = block(task_metrics(&url, "neighbour", 0));
    assert!(
        neighbour["state"] == "RUNNING"
            && neighbour["records_done"].as_u64().unwrap_or(0) > neighbour_before,
        "the neighbour kept running: before {neighbour_before}, now {neighbour}"
    );
    let log = worker.log_text();
    assert!(
        log.contains("the connector's monitor reported a change in its work")
            && log.contains("the directory now has 5 files"),
        "{log}"
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_commits_revoked_partitions_before_the_group_moves_them_on() {
    const COUNT: u64 = 4000;
    let (dir, plugins, out) = flaky_sink_setup();
    // Offsets are committed only on revocation and at the end: a revocation given up before
    // its commit would hand the new owner everything since the partition was assigned.
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "600000".to_owned()),
    ];
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let mut a = Worker::start(&a_dir, &settings, &[]);
    let a_url = a.rest_url(Duration::from_secs(120));
    let topic = unique_topic("revoked");
    create_topic(&topic, 4).await;
    let file = out.join("lines.txt");
    // Each flush takes 1.5 s: the group must wait for it (and the commit after it) before the
    // revoked partitions move to their new owner, or the new owner would read them again from
    // an older commit.
    let sink = json!({"connector.class": "flaky-sink", "topics": topic,
        "file": file.display().to_string(), "fail.times": "0",
        "sleep.in": "flush", "sleep.ms": "1500",
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(
        create(&a_url, "sink", sink.clone()).await,
        StatusCode::CREATED
    );
    let source = json!({"connector.class": "datagen", "topic": topic, "count": COUNT.to_string(),
        "rate": "250", "value.converter": "string"});
    assert_eq!(create(&a_url, "source", source).await, StatusCode::CREATED);
    assert!(
        eventually(Duration::from_secs(60), || lines(&file).len() >= 300),
        "the sink consumes: {}",
        a.log_text()
    );

    // A second worker runs the same sink connector: a new member of its consumer group, so
    // the first worker's task gives up some of its partitions while records keep coming.
    let mut b = Worker::start(&b_dir, &settings, &[]);
    let b_url = b.rest_url(Duration::from_secs(120));
    assert_eq!(create(&b_url, "sink", sink).await, StatusCode::CREATED);
    assert!(
        eventually(Duration::from_secs(60), || a
            .log_text()
            .contains("partitions revoked")
            && b.log_text().contains(&format!("parts=[(\"{topic}\"",))),
        "the first worker's task gives partitions up to the second's:\n{}\n{}",
        a.log_text(),
        b.log_text()
    );

    assert!(
        eventually(Duration::from_secs(120), || lines(&file).len() as u64
            >= COUNT),
        "every record arrives: {} of {COUNT}\n{}",
        lines(&file).len(),
        a.log_text()
    );
    let ids = written_ids(&file);
    let twice: Vec<_> = ids.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{} records were written twice (a revoked partition moved on before its commit): first {:?}",
        twice.len(),
        twice.iter().take(5).collect::<Vec<_>>()
    );
    assert_eq!(
        ids.keys().copied().collect::<Vec<_>>(),
        (0..COUNT).collect::<Vec<_>>(),
        "every record once"
    );
    let (status, log) = b.stop();
    assert!(status.success(), "{log}");
    let (status, log) = a.stop();
    assert!(status.success(), "{log}");
}

/// A sink whose target stays away longer than `max.poll.interval.ms` keeps its place in the
/// group: while the worker waits to deliver the batch again it keeps polling the consumer, so
/// librdkafka neither takes the task out of the group nor hands its partitions on, and every
/// record is written exactly once when the target is back.
#[tokio::test(flavor = "multi_thread")]
async fn a_sink_stays_in_its_group_while_a_retriable_put_backs_off_past_the_poll_interval() {
    const COUNT: u64 = 300;
    let (dir, plugins, out) = flaky_sink_setup();
    // The smallest poll interval the broker's default session bounds allow.
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("consumer.session.timeout.ms", "6000".to_owned()),
        ("consumer.heartbeat.interval.ms", "1000".to_owned()),
        ("consumer.max.poll.interval.ms", "6000".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let topic = unique_topic("backoff");
    create_topic(&topic, 2).await;
    let source = json!({"connector.class": "datagen", "topic": topic,
        "count": COUNT.to_string(), "value.converter": "string"});
    assert_eq!(create(&url, "source", source).await, StatusCode::CREATED);
    // Eight retriable failures back off 0.1 + 0.2 + ... + 6.4 + 10 s: about 23 s without a
    // successful put, nearly four poll intervals.
    let file = out.join("lines.txt");
    let sink = json!({"connector.class": "flaky-sink", "topics": topic,
        "file": file.display().to_string(), "fail.times": "8",
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(create(&url, "sink", sink).await, StatusCode::CREATED);
    assert!(
        eventually(Duration::from_secs(120), || lines(&file).len() as u64
            >= COUNT),
        "every record arrives once the target is back: {} of {COUNT}\n{}",
        lines(&file).len(),
        worker.log_text()
    );
    let log = worker.log_text();
    assert_eq!(
        log.matches("delivering the same").count(),
        8,
        "the batch was delivered again after each failure:\n{log}"
    );
    for sign in [
        "maximum poll interval",
        "partitions lost",
        "partitions revoked",
    ] {
        assert!(
            !log.contains(sign),
            "the task left its group ({sign:?}) while backing off:\n{log}"
        );
    }
    let ids = written_ids(&file);
    assert_eq!(
        ids.into_iter().collect::<Vec<_>>(),
        (0..COUNT).map(|id| (id, 1)).collect::<Vec<_>>(),
        "every record exactly once"
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// A temporary directory with `datagen` and `flaky-sink` deployed: (it, the plugin directory,
/// an output directory for the sink).
fn flaky_sink_setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen"], &["flaky-sink"]);
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    (dir, plugins, out)
}

/// How many times each datagen record id was written to `file`, one JSON value per line.
fn written_ids(file: &std::path::Path) -> std::collections::BTreeMap<u64, usize> {
    lines(file)
        .iter()
        .fold(Default::default(), |mut seen, line| {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            *seen.entry(value["id"].as_u64().unwrap()).or_default() += 1;
            seen
        })
}

/// A sink task whose consumer is fenced (another consumer joined its group with the task's
/// `group.instance.id`) can neither consume nor commit again: it fails, naming why, and is
/// restarted with a new consumer, whose commits move on.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_sink_task_fails_and_restarts_with_a_new_consumer() {
    use rdkafka::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};

    let (dir, plugins, out) = flaky_sink_setup();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "500".to_owned()),
        ("task.restart.backoff.initial.ms", "200".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let topic = unique_topic("fenced");
    create_topic(&topic, 1).await;
    let source = json!({"connector.class": "datagen", "topic": topic,
        "count": "1000000", "rate": "200", "value.converter": "string"});
    assert_eq!(create(&url, "source", source).await, StatusCode::CREATED);
    let file = out.join("lines.txt");
    let sink = json!({"connector.class": "flaky-sink", "topics": topic,
        "file": file.display().to_string(), "fail.times": "0",
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(create(&url, "sink", sink).await, StatusCode::CREATED);
    assert!(
        eventually(Duration::from_secs(60), || lines(&file).len() >= 50),
        "the sink consumes: {}",
        worker.log_text()
    );

    // The task's static member id: its client id and the worker instance's id.
    let instance = std::fs::read_to_string(dir.path().join("data/worker-instance-id")).unwrap();
    let member = format!("wasm-connect-sink-0-{}", instance.trim());
    let intruder: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka::bootstrap())
        .set("group.id", "connect-sink")
        .set("group.instance.id", &member)
        // The group's protocol: with another the coordinator refuses the join.
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    intruder.subscribe(&[topic.as_str()]).unwrap();
    let fenced = eventually(Duration::from_secs(60), || {
        let _ = intruder.poll(Duration::from_millis(100));
        worker
            .log_text()
            .contains("the Kafka consumer hit a fatal error")
    });
    drop(intruder);
    assert!(fenced, "the fenced task fails: {}", worker.log_text());
    let restarted = block(async {
        for _ in 0..600 {
            let metrics = task_metrics(&url, "sink", 0).await;
            if metrics["restarts"].as_u64().unwrap_or(0) >= 1 && metrics["state"] == "RUNNING" {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    });
    assert!(restarted, "restarted and running: {}", worker.log_text());
    // The new consumer commits again.
    let before = kafka::committed_offset("connect-sink", &topic, 0).unwrap_or(0);
    assert!(
        eventually(Duration::from_secs(60), || kafka::committed_offset(
            "connect-sink",
            &topic,
            0
        )
        .unwrap_or(0)
            > before + 20),
        "commits move on after the restart: {}",
        worker.log_text()
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// How often `needle` is in `text`.
fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// A connector stored by an earlier run whose plugin hangs in `task-configs` while the worker
/// restores it (a data directory written before task configs were stored, so the worker must
/// split it) holds up nothing but itself: meanwhile another connector is created, paused,
/// resumed and deleted, each answered while the stored one is still in its split.
#[tokio::test(flavor = "multi_thread")]
async fn a_stored_connector_hanging_at_start_holds_up_no_other_connector() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen"], &["misbehave"]);
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let stuck = json!({"connectors": {"stuck": {"target_state": "RUNNING", "config": {
        "name": "stuck", "connector.class": "misbehave", "mode": "sleep",
        "sleep.in": "task-configs", "sleep.ms": "600000", "topic": unique_topic("stuck")}}}});
    std::fs::write(data.join("connectors.json"), stuck.to_string()).unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        // The split hangs for the whole test (its call's deadline is longer).
        ("sandbox.config.wall.timeout.ms", "600000".to_owned()),
        ("task.shutdown.graceful.timeout.ms", "1000".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.early_rest_url(Duration::from_secs(120));
    worker.wait_for_log("sleeping in task-configs", Duration::from_secs(60));

    let topic = unique_topic("beside-stuck");
    create_topic(&topic, 1).await;
    let config = json!({"connector.class": "datagen", "topic": topic, "rate": "10",
        "value.converter": "string"});
    assert_eq!(create(&url, "other", config).await, StatusCode::CREATED);
    for (path, expected) in [
        ("/connectors/other/pause", StatusCode::ACCEPTED),
        ("/connectors/other/resume", StatusCode::ACCEPTED),
    ] {
        let (status, body) = call(&url, reqwest::Method::PUT, path).await;
        assert_eq!(status, expected, "{path}: {body}");
    }
    let (status, body) = call(&url, reqwest::Method::DELETE, "/connectors/other").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // All of that while the stored connector was still in its split.
    let stuck_status = get(&url, "/connectors/stuck/status").await;
    assert_eq!(
        stuck_status["connector"]["state"], "UNASSIGNED",
        "{stuck_status}"
    );
    let log = worker.log_text();
    assert_eq!(count(&log, "misbehave: task-configs called"), 1, "{log}");
    assert!(
        !log.lines()
            .any(|l| l.contains("connector configured") && l.contains("connector=stuck")),
        "{log}"
    );
    // SIGTERM ends it while the stored connector's split still hangs.
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// `PUT /connector-plugins/{name}/config/validate` asks the plugin's `validate` and the
/// worker's own checks without creating the connector or splitting its work (the test plugin
/// logs every call the worker makes).
#[tokio::test(flavor = "multi_thread")]
async fn validate_never_creates_the_connector() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &[], &["misbehave"]);
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let validated: Value = reqwest::Client::new()
        .put(format!("{url}/connector-plugins/misbehave/config/validate"))
        .json(
            &json!({"connector.class": "misbehave", "name": "checked", "mode": "log",
            "tasks.max": "3"}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(validated["error_count"], 0, "{validated}");
    let log = worker.log_text();
    assert_eq!(count(&log, "misbehave: validate called"), 1, "{log}");
    assert_eq!(count(&log, "misbehave: create called"), 0, "{log}");
    assert_eq!(count(&log, "misbehave: task-configs called"), 0, "{log}");
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// A worker restarted on its data directory runs its connectors' stored task configs: the
/// connector is created again, but its work is not split again.
#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_worker_runs_the_stored_task_configs_without_splitting() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &[], &["misbehave"]);
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let config = json!({"connector.class": "misbehave", "mode": "sleep", "sleep.ms": "100",
        "tasks": "2", "tasks.max": "2", "topic": unique_topic("stored-split")});
    assert_eq!(create(&url, "kept", config).await, StatusCode::CREATED);
    wait_for_state(&url, "kept", "RUNNING", Duration::from_secs(60));
    let tasks_before = get(&url, "/connectors/kept/tasks").await;
    let log = worker.log_text();
    assert_eq!(count(&log, "misbehave: task-configs called"), 1, "{log}");
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
    let stored: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("data/connectors.json")).unwrap())
            .unwrap();
    assert_eq!(
        stored["connectors"]["kept"]["tasks"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "{stored}"
    );

    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    for id in 0..2 {
        let mut last = Value::Null;
        let running = eventually(Duration::from_secs(60), || {
            last = block(task_status(&url, "kept", id));
            last["state"] == "RUNNING"
        });
        assert!(running, "task {id}: {last}");
    }
    assert_eq!(get(&url, "/connectors/kept/tasks").await, tasks_before);
    let log = worker.log_text();
    assert_eq!(count(&log, "misbehave: create called"), 1, "{log}");
    assert_eq!(count(&log, "misbehave: task-configs called"), 0, "{log}");
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// A sink whose `flush` hangs is deleted within the shutdown grace: the flush is abandoned
/// (nothing it did not vouch for is committed), not waited on for its own deadline.
#[tokio::test(flavor = "multi_thread")]
async fn a_sink_hanging_in_flush_is_deleted_within_the_shutdown_grace() {
    let (dir, plugins, out) = flaky_sink_setup();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "300".to_owned()),
        ("task.shutdown.graceful.timeout.ms", "2000".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let topic = unique_topic("hung-flush");
    create_topic(&topic, 1).await;
    let file = out.join("lines.txt");
    // The flush's own deadline is far longer than the grace.
    let sink = json!({"connector.class": "flaky-sink", "topics": topic,
        "file": file.display().to_string(), "fail.times": "0",
        "sleep.in": "flush", "sleep.ms": "600000", "sandbox.flush.wall.timeout.ms": "600000",
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(create(&url, "hung", sink).await, StatusCode::CREATED);
    kafka::produce(&topic, &[b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    worker.wait_for_log("sleeping in flush", Duration::from_secs(60));
    let deleted = tokio::time::timeout(
        Duration::from_secs(60),
        call(&url, reqwest::Method::DELETE, "/connectors/hung"),
    )
    .await
    .expect("the delete waited for the plugin's flush");
    assert_eq!(deleted.0, StatusCode::NO_CONTENT, "{}", deleted.1);
    let log = worker.log_text();
    assert!(
        log.contains("flush did not return within 2000 ms of the stop request"),
        "{log}"
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// SIGTERM ends the worker within the documented bound (`task.shutdown.graceful.timeout.ms`
/// plus 20 s) even while two plugins hang: a source in `poll` and a sink in `put`.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_ends_the_worker_within_its_bound_with_hung_plugins() {
    let (dir, plugins, out) = flaky_sink_setup();
    let misbehave = wasm_connect_tests::test_plugin_file("misbehave");
    std::fs::copy(&misbehave, plugins.join("misbehave.wasm")).unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("task.shutdown.graceful.timeout.ms", "1000".to_owned()),
        ("sandbox.call.wall.timeout.ms", "600000".to_owned()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let source = json!({"connector.class": "misbehave", "mode": "sleep", "sleep.ms": "600000",
        "topic": unique_topic("hung-poll")});
    assert_eq!(
        create(&url, "hung-source", source).await,
        StatusCode::CREATED
    );
    let topic = unique_topic("hung-put");
    create_topic(&topic, 1).await;
    let sink = json!({"connector.class": "flaky-sink", "topics": topic,
        "file": out.join("lines.txt").display().to_string(), "fail.times": "0",
        "sleep.in": "put", "sleep.ms": "600000",
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(create(&url, "hung-sink", sink).await, StatusCode::CREATED);
    kafka::produce(&topic, &[b"x".to_vec()]);
    worker.wait_for_log("sleeping in put", Duration::from_secs(60));
    worker.wait_for_log("sleeping in poll", Duration::from_secs(60));
    let asked = std::time::Instant::now();
    let (status, log) = worker.stop();
    let took = asked.elapsed();
    // It exited on its own (the harness kills it after 90 s); the abandoned `put` fails its
    // task, so the exit code says a task failed.
    assert!(status.code().is_some(), "{status}:\n{log}");
    // The documented bound (docs/configuration.md): the grace, 10 s for the tasks' Kafka work,
    // 10 s for the producer's flush.
    assert!(
        took < Duration::from_secs(21),
        "stopping took {took:?}:\n{log}"
    );
}
