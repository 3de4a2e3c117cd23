//! Distributed mode with real processes on the real broker: workers that share connectors
//! created through any of them, tasks that move when a worker dies or stalls, and nothing lost.
//!
//! Each test has its own group and state topics and short timeouts (session 6 s, the broker's
//! minimum; scheduled delay 2 s), so they run side by side.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use wasm_connect_tests::cluster::{Cluster, DELAY, SESSION};
use wasm_connect_tests::kafka::{consume, create_topic, unique_topic};
use wasm_connect_tests::rest::{block, create, get};
use wasm_connect_tests::worker::eventually;

/// Worker ids running each task of `name`, as worker `url` reports, once every task is
/// RUNNING (`None` until then).
fn running_tasks(url: &str, name: &str, tasks: usize) -> Option<Vec<String>> {
    let status = block(get(url, &format!("/connectors/{name}/status")));
    let list = status["tasks"].as_array()?;
    if list.len() != tasks || status["connector"]["state"] != "RUNNING" {
        return None;
    }
    list.iter()
        .map(|t| {
            (t["state"] == "RUNNING").then(|| t["worker_id"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

/// The datagen records of `topic`: (task, seq) of each, in the order read, with its timestamp.
fn datagen_records(topic: &str, at_least: usize, timeout: Duration) -> Vec<(u64, u64, u64, i64)> {
    consume(topic, at_least, timeout)
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_slice(r.value.as_deref().unwrap_or_default()).unwrap();
            (
                v["id"].as_u64().unwrap(),
                v["task"].as_u64().unwrap(),
                v["seq"].as_u64().unwrap(),
                r.timestamp.unwrap_or(0),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn work_created_through_a_follower_spreads_over_three_workers_that_agree_on_status() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    let follower = cluster.follower();
    let url = cluster.node(follower).url.clone();

    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    for i in 0..5 {
        std::fs::write(input.join(format!("f{i}.txt")), format!("line {i}\n")).unwrap();
    }
    let files_topic = unique_topic("dist-files");
    let gen_topic = unique_topic("dist-gen");
    block(async {
        create_topic(&files_topic, 1).await;
        create_topic(&gen_topic, 3).await;
        let files = json!({"connector.class": "file-source", "topic": files_topic, "tasks.max": "3",
            "directory": input.display().to_string(), "sandbox.fs.read": input.display().to_string(),
            "value.converter": "string"});
        let datagen = json!({"connector.class": "datagen", "topic": gen_topic, "tasks.max": "4", "rate": "20", "value.converter": "string"});
        assert_eq!(create(&url, "files", files).await, StatusCode::CREATED);
        assert_eq!(create(&url, "gen", datagen).await, StatusCode::CREATED);
    });

    // Every worker reports every task RUNNING, with the same workers.
    let mut statuses = Vec::new();
    let agreed = eventually(Duration::from_secs(60), || {
        statuses = cluster
            .running()
            .into_iter()
            .map(|i| {
                let url = &cluster.node(i).url;
                (
                    running_tasks(url, "files", 3),
                    running_tasks(url, "gen", 4),
                    block(get(url, "/connectors/files/status"))["connector"]["worker_id"].clone(),
                    block(get(url, "/connectors/gen/status"))["connector"]["worker_id"].clone(),
                )
            })
            .collect();
        statuses.iter().all(|s| s.0.is_some() && s.1.is_some())
            && statuses.windows(2).all(|w| w[0] == w[1])
    });
    assert!(
        agreed,
        "every worker reports the same RUNNING tasks: {statuses:?}\n{}",
        cluster.logs()
    );

    // Spread: each worker's task count and connector count within one of the others'.
    let (files, datagen, files_owner, gen_owner) = statuses[0].clone();
    let mut tasks: BTreeMap<String, usize> = BTreeMap::new();
    for w in files.unwrap().into_iter().chain(datagen.unwrap()) {
        *tasks.entry(w).or_default() += 1;
    }
    let ids: Vec<String> = cluster
        .running()
        .iter()
        .map(|i| cluster.node(*i).id.clone())
        .collect();
    let counts: Vec<usize> = ids
        .iter()
        .map(|id| tasks.get(id).copied().unwrap_or(0))
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), 7);
    assert!(
        counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
        "task counts per worker within one: {tasks:?} over {ids:?}"
    );
    assert_ne!(
        files_owner, gen_owner,
        "two connectors on three workers: on two of them"
    );

    // And each worker says the same of itself in /admin/cluster.
    for i in cluster.running() {
        let view = cluster.membership(i);
        let own: BTreeSet<String> = view["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            own.len(),
            tasks.get(&cluster.node(i).id).copied().unwrap_or(0),
            "{view}"
        );
    }

    // The file source's lines all arrived once.
    let lines: BTreeSet<String> = consume(&files_topic, 5, Duration::from_secs(30))
        .iter()
        .map(|r| r.text())
        .collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_worker_s_tasks_resume_elsewhere_from_its_flushed_offsets_losing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let follower = cluster.follower();
    let url = cluster.node(follower).url.clone();
    let topic = unique_topic("dist-kill");
    const COUNT: u64 = 6000;
    block(async {
        create_topic(&topic, 3).await;
        let datagen = json!({"connector.class": "datagen", "topic": topic, "tasks.max": "4",
            "rate": "400", "count": COUNT.to_string(), "value.converter": "string"});
        assert_eq!(create(&url, "gen", datagen).await, StatusCode::CREATED);
    });
    let mut owners = None;
    assert!(
        eventually(Duration::from_secs(60), || {
            owners = running_tasks(&url, "gen", 4);
            owners.is_some()
        }),
        "tasks run:\n{}",
        cluster.logs()
    );
    // Kill a worker with tasks (not the one asked over REST), mid-stream.
    let owners = owners.unwrap();
    let victim = cluster
        .running()
        .into_iter()
        .find(|i| *i != follower && owners.contains(&cluster.node(*i).id))
        .expect("another worker runs a task");
    let victim_id = cluster.node(victim).id.clone();
    let moved: Vec<u64> = owners
        .iter()
        .enumerate()
        .filter(|(_, w)| **w == victim_id)
        .map(|(t, _)| t as u64)
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    cluster.kill(victim);

    // Its tasks run elsewhere after the session timeout and the scheduled delay.
    let mut after = None;
    assert!(
        eventually(SESSION + DELAY + Duration::from_secs(30), || {
            after = running_tasks(&url, "gen", 4);
            after.as_ref().is_some_and(|a| !a.contains(&victim_id))
        }),
        "the dead worker's tasks moved: {after:?}\n{}",
        cluster.logs()
    );

    // Every record arrived (lost = 0); duplicates only where a moved task resumed from its
    // owner's last flushed offset: a run of sequence numbers per moved task.
    let mut records = Vec::new();
    let mut ids = BTreeSet::new();
    eventually(Duration::from_secs(60), || {
        // Everything the topic holds so far.
        records = datagen_records(&topic, usize::MAX, Duration::from_secs(3));
        ids = records.iter().map(|r| r.0).collect();
        ids.len() as u64 >= COUNT
    });
    let missing: Vec<u64> = (0..COUNT).filter(|i| !ids.contains(i)).take(20).collect();
    assert!(
        missing.is_empty(),
        "lost records (first 20): {missing:?}\n{}",
        cluster.logs()
    );
    let mut seen = BTreeSet::new();
    let mut duplicated: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (id, task, seq, _) in &records {
        if !seen.insert(*id) {
            duplicated.entry(*task).or_default().push(*seq);
        }
    }
    for (task, seqs) in &duplicated {
        assert!(
            moved.contains(task),
            "task {task} did not move, yet has duplicates {seqs:?}"
        );
        let (min, max) = (seqs.iter().min().unwrap(), seqs.iter().max().unwrap());
        assert_eq!(
            (max - min + 1) as usize,
            seqs.len(),
            "task {task}'s duplicates are one run after its last flushed offset: {seqs:?}"
        );
        // 100 records/s per task, offsets flushed every 500 ms: a few hundred at most.
        assert!(seqs.len() < 400, "task {task}: {} duplicates", seqs.len());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_worker_whose_tasks_moved_produces_nothing_for_them_when_it_continues() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    let follower = cluster.follower();
    let url = cluster.node(follower).url.clone();
    let topic = unique_topic("dist-pause");
    block(async {
        create_topic(&topic, 3).await;
        let datagen = json!({"connector.class": "datagen", "topic": topic, "tasks.max": "3", "rate": "300", "value.converter": "string"});
        assert_eq!(create(&url, "gen", datagen).await, StatusCode::CREATED);
    });
    let mut owners = None;
    assert!(eventually(Duration::from_secs(60), || {
        owners = running_tasks(&url, "gen", 3);
        owners.is_some()
    }));
    let owners = owners.unwrap();
    let paused = cluster
        .running()
        .into_iter()
        .find(|i| *i != follower && owners.contains(&cluster.node(*i).id))
        .expect("another worker runs a task");
    let paused_id = cluster.node(paused).id.clone();
    let moved: BTreeSet<u64> = owners
        .iter()
        .enumerate()
        .filter(|(_, w)| **w == paused_id)
        .map(|(t, _)| t as u64)
        .collect();

    // Paused past the session timeout and the delay: its tasks move meanwhile.
    cluster.node(paused).worker.signal("STOP");
    let mut after = None;
    let moved_away = eventually(SESSION + DELAY + Duration::from_secs(30), || {
        after = running_tasks(&url, "gen", 3);
        after.as_ref().is_some_and(|a| !a.contains(&paused_id))
    });
    std::thread::sleep(Duration::from_secs(2));
    let continued = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    cluster.node(paused).worker.signal("CONT");
    assert!(
        moved_away,
        "tasks moved off the paused worker: {after:?}\n{}",
        cluster.logs()
    );
    // It notices it is out of the group and stops them; meanwhile it sends nothing.
    let node = cluster.node(paused);
    let mut node_worker_log = String::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            node_worker_log = node.worker.log_text();
            node_worker_log.contains("out of the workers' group")
        }),
        "the paused worker noticed:\n{node_worker_log}"
    );
    std::thread::sleep(Duration::from_secs(3));

    // The stale instance of a moved task would go on from where it was when paused: records
    // made after the worker continued with sequence numbers far behind what the task had
    // reached by then (at 100 records/s per task, seconds behind). A task that moves back to it
    // legitimately resumes from the last flushed offset, a fraction of a second behind.
    let records = datagen_records(&topic, usize::MAX, Duration::from_secs(8));
    let mut reached: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, task, seq, ts) in &records {
        if *ts < continued {
            let max = reached.entry(*task).or_default();
            *max = (*max).max(*seq);
        }
    }
    let stale: Vec<(u64, u64)> = records
        .iter()
        .filter(|(_, task, seq, ts)| {
            moved.contains(task)
                && *ts >= continued
                && seq + 300 < reached.get(task).copied().unwrap_or(0)
        })
        .map(|(_, task, seq, _)| (*task, *seq))
        .collect();
    assert!(
        stale.is_empty(),
        "records the paused worker sent after it continued: {stale:?}\n{node_worker_log}"
    );
}
