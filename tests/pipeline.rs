//! End to end against the real Apache Kafka broker: the worker binary moves data between real
//! plugins and Kafka, survives SIGKILL, redistributes work when tasks.max changes, and rides out
//! a sink's retriable errors; a sink killed mid-stream takes its partition back at once; a topic
//! name the broker refuses fails the task at once.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use wasm_connect_tests::kafka::{
    by_partition, consume, create_topic, produce, produce_spread, unique_topic,
};
use wasm_connect_tests::worker::{Worker, eventually, lines, write_properties};
use wasm_connect_tests::{kafka, test_plugin_file};

fn worker_settings() -> Vec<(&'static str, String)> {
    kafka::worker_settings(500)
}

/// Parse datagen's JSON values (the json converter's envelope unwrapped).
fn datagen_payloads(records: &[kafka::Consumed]) -> Vec<Value> {
    records
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_slice(r.value.as_ref().unwrap()).unwrap();
            v["payload"].clone()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn datagen_with_three_tasks_writes_exactly_the_configured_records() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("datagen");
    create_topic(&topic, 3).await;
    let connector = dir.path().join("datagen.properties");
    write_properties(
        &connector,
        &[
            ("name", "datagen-exact".into()),
            ("connector.class", "datagen".into()),
            ("tasks.max", "3".into()),
            ("topic", topic.clone()),
            ("count", "3000".into()),
            ("value.size", "200".into()),
        ],
    );
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[connector]);
    worker.wait_for_log("wasm-connect is running", Duration::from_secs(120));

    let records = consume(&topic, 3000, Duration::from_secs(120));
    // Give any excess records a moment to show up before counting.
    let extra = consume(&topic, 3001, Duration::from_secs(3));
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
    assert_eq!(records.len(), 3000, "{log}");
    assert_eq!(extra.len(), 3000, "no more than the configured count");

    let payloads = datagen_payloads(&records);
    let mut ids: Vec<u64> = Vec::new();
    for (record, payload) in records.iter().zip(&payloads) {
        let key = String::from_utf8(record.key.clone().unwrap()).unwrap();
        assert_eq!(key, payload["id"].to_string(), "the key is the record id");
        assert_eq!(
            payload["id"].as_u64().unwrap() % 3,
            payload["task"].as_u64().unwrap()
        );
        assert!(payload["payload"].as_str().unwrap().len() > 100);
        ids.push(payload["id"].as_u64().unwrap());
    }
    ids.sort();
    assert_eq!(ids, (0..3000).collect::<Vec<_>>(), "every id exactly once");

    // Per key (and so per task) order: within each partition a task's sequence only grows.
    for (_, list) in by_partition(&records) {
        let mut last: HashMap<u64, i64> = HashMap::new();
        for payload in datagen_payloads(&list) {
            let task = payload["task"].as_u64().unwrap();
            let seq = payload["seq"].as_i64().unwrap();
            assert!(
                seq > *last.get(&task).unwrap_or(&-1),
                "task {task} out of order"
            );
            last.insert(task, seq);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn file_source_to_topic_to_file_sink_including_appended_lines() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let output = dir.path().join("out");
    fs::create_dir_all(&input).unwrap();
    fs::create_dir_all(&output).unwrap();
    let topic = unique_topic("lines");
    create_topic(&topic, 1).await;
    let mut expected: Vec<String> = Vec::new();
    for f in 0..3 {
        let body: Vec<String> = (0..200).map(|l| format!("file{f} line{l}")).collect();
        fs::write(input.join(format!("f{f}.txt")), body.join("\n") + "\n").unwrap();
        expected.extend(body);
    }
    let source = dir.path().join("source.json");
    fs::write(
        &source,
        serde_json::json!({
            "name": "files-in",
            "config": {
                "connector.class": "file-source",
                "tasks.max": "2",
                "topic": topic,
                "directory": input.display().to_string(),
                "sandbox.fs.read": input.display().to_string(),
                "value.converter": "org.apache.kafka.connect.storage.StringConverter"
            }
        })
        .to_string(),
    )
    .unwrap();
    let sink = dir.path().join("sink.toml");
    fs::write(
        &sink,
        format!(
            "name = \"files-out\"\n\"connector.class\" = \"file-sink\"\n\"tasks.max\" = 2\ntopics = \"{topic}\"\nfile = \"{}/all.txt\"\n\"sandbox.fs.write\" = \"{}\"\n\"value.converter\" = \"string\"\n",
            output.display(),
            output.display()
        ),
    )
    .unwrap();
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[source, sink]);
    worker.wait_for_log("wasm-connect is running", Duration::from_secs(120));
    let out_file = output.join("all.txt");
    assert!(
        eventually(Duration::from_secs(60), || lines(&out_file).len()
            >= expected.len()),
        "only {} of {} lines arrived:\n{}",
        lines(&out_file).len(),
        expected.len(),
        worker.log_text()
    );

    // Lines appended while running are picked up.
    let mut appended = Vec::new();
    for l in 0..50 {
        appended.push(format!("file1 appended{l}"));
    }
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(input.join("f1.txt"))
        .unwrap();
    use std::io::Write;
    writeln!(f, "{}", appended.join("\n")).unwrap();
    expected.extend(appended);
    assert!(
        eventually(Duration::from_secs(60), || lines(&out_file).len()
            >= expected.len()),
        "appended lines missing:\n{}",
        worker.log_text()
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");

    let got = lines(&out_file);
    let mut sorted_got = got.clone();
    sorted_got.sort();
    let mut sorted_expected = expected.clone();
    sorted_expected.sort();
    assert_eq!(
        sorted_got, sorted_expected,
        "the output equals the input lines"
    );
    // One topic partition, so each file's lines keep their order.
    for f in 0..3 {
        let prefix = format!("file{f} ");
        let of_file: Vec<&String> = got.iter().filter(|l| l.starts_with(&prefix)).collect();
        let in_order: Vec<&String> = expected.iter().filter(|l| l.starts_with(&prefix)).collect();
        assert_eq!(of_file, in_order, "file {f} out of order");
    }
}

/// The last flushed sequence number per datagen task, from the worker's offset file.
fn flushed_seqs(data_dir: &Path) -> BTreeMap<u64, i64> {
    let text = fs::read_to_string(data_dir.join("offsets.json"))
        .unwrap_or_else(|_| "{\"offsets\":[]}".into());
    let doc: Value = serde_json::from_str(&text).unwrap();
    doc["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["key"][1]["task"].as_u64().unwrap(),
                e["value"]["seq"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_mid_stream_loses_nothing_and_duplicates_only_unflushed_records() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("crash");
    create_topic(&topic, 2).await;
    let connector = dir.path().join("datagen.properties");
    write_properties(
        &connector,
        &[
            ("name", "crashy".into()),
            ("connector.class", "datagen".into()),
            ("tasks.max", "2".into()),
            ("topic", topic.clone()),
            ("count", "20000".into()),
            ("rate", "4000".into()),
        ],
    );
    let mut worker = Worker::start(
        dir.path(),
        &worker_settings(),
        std::slice::from_ref(&connector),
    );
    worker.wait_for_log("wasm-connect is running", Duration::from_secs(120));
    // Let it get well into the stream, past a few offset flushes.
    assert!(eventually(Duration::from_secs(60), || {
        flushed_seqs(&dir.path().join("data"))
            .values()
            .all(|s| *s > 1000)
            && flushed_seqs(&dir.path().join("data")).len() == 2
    }));
    worker.kill();
    let flushed = flushed_seqs(&dir.path().join("data"));
    let before_restart = consume(&topic, 20000, Duration::from_secs(5)).len();
    assert!(before_restart < 20000, "the kill came mid-stream");

    let mut worker = Worker::start(dir.path(), &worker_settings(), &[connector]);
    worker.wait_for_log("wasm-connect is running", Duration::from_secs(120));
    let records = consume(&topic, 40000, Duration::from_secs(30));
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");

    let mut seen: HashMap<u64, usize> = HashMap::new();
    let mut duplicates = 0;
    for payload in datagen_payloads(&records) {
        let id = payload["id"].as_u64().unwrap();
        let count = seen.entry(id).or_default();
        *count += 1;
        if *count > 1 {
            duplicates += 1;
            let task = payload["task"].as_u64().unwrap();
            let seq = payload["seq"].as_i64().unwrap();
            assert!(
                seq > flushed[&task],
                "record {id} (task {task} seq {seq}) was flushed (up to {}) yet sent again",
                flushed[&task]
            );
        }
    }
    assert_eq!(
        seen.len(),
        20000,
        "no record lost ({duplicates} duplicates)"
    );
    assert!(
        duplicates <= before_restart,
        "duplicates are bounded by what the first run sent"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn changing_tasks_max_redistributes_the_work_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    fs::create_dir_all(&input).unwrap();
    let topic = unique_topic("retask");
    create_topic(&topic, 1).await;
    let mut expected: Vec<String> = Vec::new();
    for f in 0..4 {
        let body: Vec<String> = (0..100).map(|l| format!("f{f} first{l}")).collect();
        fs::write(input.join(format!("f{f}.txt")), body.join("\n") + "\n").unwrap();
        expected.extend(body);
    }
    let write_config = |tasks: u32| {
        let path = dir.path().join(format!("source-{tasks}.properties"));
        write_properties(
            &path,
            &[
                ("name", "retask".into()),
                ("connector.class", "file-source".into()),
                ("tasks.max", tasks.to_string()),
                ("topic", topic.clone()),
                ("directory", input.display().to_string()),
                ("sandbox.fs.read", input.display().to_string()),
                ("value.converter", "string".into()),
            ],
        );
        path
    };
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[write_config(1)]);
    worker.wait_for_log("tasks=1", Duration::from_secs(120));
    assert!(eventually(Duration::from_secs(60), || consume(
        &topic,
        400,
        Duration::from_secs(2)
    )
    .len()
        >= 400));
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");

    for f in 0..4 {
        let more: Vec<String> = (0..100).map(|l| format!("f{f} second{l}")).collect();
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(input.join(format!("f{f}.txt")))
            .unwrap();
        use std::io::Write;
        writeln!(file, "{}", more.join("\n")).unwrap();
        expected.extend(more);
    }
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[write_config(3)]);
    worker.wait_for_log("tasks=3", Duration::from_secs(120));
    let records = consume(&topic, 800, Duration::from_secs(60));
    let extra = consume(&topic, 801, Duration::from_secs(3));
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
    let mut got: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect();
    got.sort();
    expected.sort();
    assert_eq!(
        got, expected,
        "every line once: offsets are per file, whatever the task split"
    );
    assert_eq!(extra.len(), 800, "nothing sent twice after an orderly stop");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_that_fails_retriably_for_a_while_recovers_without_loss_or_reordering() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("flaky");
    create_topic(&topic, 1).await;
    let values: Vec<Vec<u8>> = (0..500)
        .map(|i| format!("value {i}").into_bytes())
        .collect();
    produce(&topic, &values);

    let plugins = dir.path().join("plugins");
    fs::create_dir_all(&plugins).unwrap();
    fs::copy(
        test_plugin_file("flaky-sink"),
        plugins.join("flaky-sink.wasm"),
    )
    .unwrap();
    let output = dir.path().join("out");
    fs::create_dir_all(&output).unwrap();
    let connector = dir.path().join("flaky.properties");
    write_properties(
        &connector,
        &[
            ("name", "flaky".into()),
            ("connector.class", "flaky-sink".into()),
            ("topics", topic.clone()),
            ("file", output.join("out.txt").display().to_string()),
            ("sandbox.fs.write", output.display().to_string()),
            ("fail.times", "4".into()),
            ("value.converter", "string".into()),
        ],
    );
    let mut settings = worker_settings();
    settings.push(("plugin.path", plugins.display().to_string()));
    let worker = Worker::start(dir.path(), &settings, &[connector]);
    let out = output.join("out.txt");
    assert!(
        eventually(Duration::from_secs(90), || lines(&out).len() >= 500),
        "{}",
        worker.log_text()
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
    assert!(
        log.contains("delivering the same"),
        "the retries are logged:\n{log}"
    );
    let expected: Vec<String> = (0..500).map(|i| format!("value {i}")).collect();
    assert_eq!(lines(&out), expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_that_fails_conversion_fails_the_task_and_says_which_record() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("poison");
    create_topic(&topic, 1).await;
    produce(
        &topic,
        &[
            b"{\"schema\":{\"type\":\"string\"},\"payload\":\"fine\"}".to_vec(),
            b"not json".to_vec(),
        ],
    );
    let output = dir.path().join("out");
    fs::create_dir_all(&output).unwrap();
    let connector = dir.path().join("sink.properties");
    write_properties(
        &connector,
        &[
            ("name", "poisoned".into()),
            ("connector.class", "file-sink".into()),
            ("topics", topic.clone()),
            ("file", output.join("out.txt").display().to_string()),
            ("sandbox.fs.write", output.display().to_string()),
        ],
    );
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[connector]);
    worker.wait_for_log("task failed", Duration::from_secs(120));
    let (status, log) = worker.stop();
    assert!(
        log.contains(&format!(
            "record {topic}-0 offset 1: the value converter failed: not valid JSON"
        )),
        "{log}"
    );
    assert!(
        !status.success(),
        "a failed task makes the worker exit non-zero:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_topic_name_kafka_refuses_fails_the_task_at_once_and_says_so() {
    // The broker refuses to create the topic: a restart would only repeat that, so the task
    // fails without one, naming the topic and what to fix.
    let dir = tempfile::tempdir().unwrap();
    let connector = dir.path().join("bad-topic.properties");
    write_properties(
        &connector,
        &[
            ("name", "bad-topic".into()),
            ("connector.class", "datagen".into()),
            ("topic", "bad topic!".into()),
            ("count", "10".into()),
        ],
    );
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[connector]);
    worker.wait_for_log("task failed", Duration::from_secs(120));
    let (_, log) = worker.stop();
    assert!(
        log.contains(r#""bad topic!" is not a valid topic name"#)
            && log.contains("fix the connector's topic"),
        "{log}"
    );
    assert!(!log.contains("restarting it in"), "not restarted:\n{log}");
}

/// A value of the partition-move test: record `i` of the run.
fn numbered(i: usize) -> Vec<u8> {
    format!("v{i:05}").into_bytes()
}

/// The record numbers in `dir`'s `p<partition>.txt` files, per partition, in file order.
fn written(dir: &Path) -> BTreeMap<usize, Vec<usize>> {
    (0..4)
        .map(|p| {
            let numbers = lines(&dir.join(format!("p{p}.txt")))
                .iter()
                .map(|line| {
                    line.strip_prefix('v')
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("not a written value: {line:?}"))
                })
                .collect();
            (p, numbers)
        })
        .collect()
}

/// A file-sink connector `name` on `topic` writing `file` (a name, `{partition}` allowed) in
/// `home/out`, its config in `home/sink.properties`; returns the config's path and the output
/// directory.
fn file_sink_in(home: &Path, name: &str, topic: &str, file: &str) -> (PathBuf, PathBuf) {
    let out = home.join("out");
    fs::create_dir_all(&out).unwrap();
    let connector = home.join("sink.properties");
    write_properties(
        &connector,
        &[
            ("name", name.into()),
            ("connector.class", "file-sink".into()),
            ("topics", topic.into()),
            ("file", format!("{}/{file}", out.display())),
            ("sandbox.fs.write", out.display().to_string()),
            ("value.converter", "string".into()),
        ],
    );
    (connector, out)
}

/// Distinct records written to any of `dirs`.
fn distinct(dirs: &[&Path]) -> usize {
    let mut all: Vec<usize> = dirs
        .iter()
        .flat_map(|d| written(d).into_values().flatten())
        .collect();
    all.sort_unstable();
    all.dedup();
    all.len()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_writes_every_record_in_order_while_its_partitions_move_between_workers() {
    // Sink tasks take messages from each assigned partition's own queue (split off before
    // librdkafka assigns it). Two workers running the same connector share its consumer group;
    // the second joining and then leaving moves partitions both ways while records flow.
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("moves");
    create_topic(&topic, 4).await;
    let start = |name: &str| {
        let home = dir.path().join(name);
        let (connector, out) = file_sink_in(&home, "moves", &topic, "p{partition}.txt");
        let mut worker = Worker::start(&home, &worker_settings(), &[connector]);
        worker.wait_for_log("partitions assigned", Duration::from_secs(120));
        (worker, out)
    };
    let values: Vec<Vec<u8>> = (0..6000).map(numbered).collect();
    let (first, rest) = values.split_at(2000);
    let (second, third) = rest.split_at(2000);

    let (a, out_a) = start("a");
    produce_spread(&topic, 4, first);
    assert!(
        eventually(Duration::from_secs(60), || distinct(&[&out_a]) >= 2000),
        "one worker wrote the first records: {} of 2000",
        distinct(&[&out_a])
    );
    let (b, out_b) = start("b");
    produce_spread(&topic, 4, second);
    assert!(
        eventually(Duration::from_secs(60), || distinct(&[&out_a, &out_b])
            >= 4000),
        "two workers wrote the next records: {} of 4000",
        distinct(&[&out_a, &out_b])
    );
    assert!(
        written(&out_b).values().any(|n| !n.is_empty()),
        "the second worker got partitions"
    );
    let (status, log) = b.stop();
    assert!(status.success(), "{log}");
    produce_spread(&topic, 4, third);
    assert!(
        eventually(Duration::from_secs(60), || distinct(&[&out_a, &out_b])
            >= 6000),
        "the first worker took the partitions back: {} of 6000",
        distinct(&[&out_a, &out_b])
    );
    let (status, log) = a.stop();
    assert!(status.success(), "{log}");

    // Partition p holds records p, p + 4, p + 8, … in that order. Each file keeps that order
    // (the other worker may have written a stretch in between), except for repeats, which
    // at-least-once allows for what was not yet committed; together the files hold every record.
    let files: Vec<(&Path, usize, Vec<usize>)> = [&out_a, &out_b]
        .into_iter()
        .flat_map(|out| {
            written(out)
                .into_iter()
                .map(move |(partition, numbers)| (out.as_path(), partition, numbers))
        })
        .collect();
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, _, numbers) in &files {
        for &i in numbers {
            *counts.entry(i).or_default() += 1;
        }
    }
    for (out, partition, numbers) in &files {
        let mut furthest: Option<usize> = None;
        for &i in numbers {
            assert_eq!(
                i % 4,
                *partition,
                "v{i:05} is in the file of partition {partition}"
            );
            if let Some(f) = furthest.filter(|&f| i <= f) {
                assert!(
                    counts[&i] > 1,
                    "{}: v{i:05} came after v{f:05} and is not a repeat",
                    out.display()
                );
            }
            furthest = furthest.max(Some(i));
        }
    }
    let seen: Vec<usize> = counts.into_keys().collect();
    assert_eq!(
        seen,
        (0..values.len()).collect::<Vec<_>>(),
        "every record written"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sink_killed_mid_stream_takes_its_partition_back_before_its_old_session_expires() {
    // A long session: a restarted consumer that joined as a new member would wait for the dead
    // one's session to expire (a minute) before the group gave it the partition. Sink tasks are
    // static members, so the restarted task rejoins as itself at once.
    const SESSION: Duration = Duration::from_secs(60);
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("recover");
    create_topic(&topic, 1).await;
    let mut settings = worker_settings();
    settings.push((
        "consumer.session.timeout.ms",
        SESSION.as_millis().to_string(),
    ));
    let start = |name: &str| {
        let home = dir.path().join(name);
        let (connector, out) = file_sink_in(&home, "recover", &topic, "out.txt");
        let mut worker = Worker::start(&home, &settings, &[connector]);
        let url = worker.rest_url(Duration::from_secs(120));
        (worker, url, out.join("out.txt"))
    };
    let values: Vec<Vec<u8>> = (0..4000).map(numbered).collect();
    let (first, second) = values.split_at(2000);
    produce(&topic, first);
    let distinct_lines = |path: &Path| {
        let mut all = lines(path);
        all.sort();
        all.dedup();
        all.len()
    };
    let (a, _, out_a) = start("a");
    assert!(
        eventually(Duration::from_secs(60), || lines(&out_a).len() >= 2000),
        "the worker wrote the first records: {}",
        lines(&out_a).len()
    );
    let killed = std::time::Instant::now();
    a.kill();
    produce(&topic, second);
    let (a, url_a, out_a) = start("a");
    let back = eventually(SESSION, || distinct_lines(&out_a) >= 4000);
    let took = killed.elapsed();
    assert!(
        back,
        "the restarted task got its partition back and wrote the rest: {} distinct lines\n{}",
        distinct_lines(&out_a),
        a.log_text()
    );
    assert!(
        took < SESSION / 3,
        "it took {took:?} from the kill, so the group waited for the dead member's session ({SESSION:?})"
    );
    eprintln!("partition back and every record written {took:?} after the kill");

    // A second worker in the same group: one partition, so one of the two tasks has none, and
    // its status says so.
    let (b, url_b, out_b) = start("b");
    let idle_trace = |url: &str| {
        let status = wasm_connect_tests::rest::block(wasm_connect_tests::rest::task_status(
            url, "recover", 0,
        ));
        status["state"] == "RUNNING"
            && status["trace"]
                .as_str()
                .is_some_and(|t| t.starts_with("no partitions assigned"))
    };
    // Settled: exactly one says it has no partition, on two looks a second apart (a task also
    // says so for the moment before its first assignment).
    let settled = || match (idle_trace(&url_a), idle_trace(&url_b)) {
        (true, false) => Some("a"),
        (false, true) => Some("b"),
        _ => None,
    };
    let mut idle = None;
    assert!(
        eventually(Duration::from_secs(60), || {
            let first = settled();
            std::thread::sleep(Duration::from_secs(1));
            idle = first.filter(|_| settled() == first);
            idle.is_some()
        }),
        "one task has no partition and its status says so"
    );
    // The busy one stops in order and leaves the group: the idle one takes over at once.
    let (busy, idle_out) = if idle == Some("a") {
        (b, out_a)
    } else {
        (a, out_b)
    };
    let (status, log) = busy.stop();
    assert!(status.success(), "{log}");
    let before = lines(&idle_out).len();
    produce(&topic, &[numbered(4000)]);
    assert!(
        eventually(Duration::from_secs(20), || lines(&idle_out).len() > before),
        "the other worker took over the partition when the first left"
    );
}
