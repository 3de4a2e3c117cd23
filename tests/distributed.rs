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
use wasm_connect_tests::rest::{block, create, get, task_metrics};
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
    // Slow tasks: between polls a task waits in the host, not inside a plugin call, so when
    // the worker continues nothing but the fence (and the membership noticing it is out of the
    // group) stands between a stale instance and the topic. (Busy tasks are usually caught
    // inside a plugin call, which then passes its wall-clock deadline and traps: they would
    // not prove the fence.) Two tasks on each worker: each stale instance races the
    // membership's discovery that it is out of the group, so the more the surer the test.
    const TASKS: usize = 6;
    const PER_TASK: u64 = 30;
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    let follower = cluster.follower();
    let url = cluster.node(follower).url.clone();
    let topic = unique_topic("dist-pause");
    block(async {
        create_topic(&topic, 3).await;
        // A stale instance that went on after the pause would send at once: records were due
        // all along.
        let datagen = json!({"connector.class": "datagen", "topic": topic, "tasks.max": TASKS.to_string(),
            "rate": (PER_TASK * TASKS as u64).to_string(), "value.converter": "string"});
        assert_eq!(create(&url, "gen", datagen).await, StatusCode::CREATED);
    });
    let mut owners = None;
    assert!(eventually(Duration::from_secs(60), || {
        owners = running_tasks(&url, "gen", TASKS);
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
        after = running_tasks(&url, "gen", TASKS);
        after.as_ref().is_some_and(|a| !a.contains(&paused_id))
    });
    // The new owners run well ahead of where the paused instances stopped: a stale record
    // is then far behind (see below), a legitimate move back only a flush interval behind.
    std::thread::sleep(Duration::from_secs(8));
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
    // reached by then (the 8 s its new owner ran of records behind). A task that moves back to
    // it legitimately resumes from the last flushed offset, a fraction of a second behind.
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
                && seq + 3 * PER_TASK < reached.get(task).copied().unwrap_or(0)
        })
        .map(|(_, task, seq, _)| (*task, *seq))
        .collect();
    assert!(
        stale.is_empty(),
        "records the paused worker sent after it continued: {stale:?}\n{node_worker_log}"
    );
}

/// Each task's records done, as the worker running it counts them (a restarted task starts
/// counting again from zero).
fn task_counts(cluster: &Cluster, name: &str, owners: &[String]) -> Vec<u64> {
    owners
        .iter()
        .enumerate()
        .map(|(t, owner)| {
            let i = cluster
                .running()
                .into_iter()
                .find(|i| cluster.node(*i).id == *owner)
                .expect("the owner runs");
            let m = block(task_metrics(&cluster.node(i).url, name, t as u32));
            m["records_done"].as_u64().unwrap_or(0)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fourth_worker_takes_a_share_and_tasks_that_stay_keep_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let url = cluster.node(cluster.follower()).url.clone();
    let topic = unique_topic("dist-join");
    block(async {
        create_topic(&topic, 3).await;
        let datagen = json!({"connector.class": "datagen", "topic": topic, "tasks.max": "6",
            "rate": "300", "value.converter": "string"});
        assert_eq!(create(&url, "gen", datagen).await, StatusCode::CREATED);
    });
    let mut before = None;
    assert!(eventually(Duration::from_secs(60), || {
        before = running_tasks(&url, "gen", 6);
        before.is_some()
    }));
    let before = before.unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let counts_before = task_counts(&cluster, "gen", &before);

    cluster.start_node(3);
    let new_id = cluster.node(3).id.clone();
    let mut after = None;
    assert!(
        eventually(Duration::from_secs(60), || {
            after = running_tasks(&url, "gen", 6);
            after.as_ref().is_some_and(|a| a.contains(&new_id))
        }),
        "the new worker runs a task: {after:?}\n{}",
        cluster.logs()
    );
    let after = after.unwrap();
    let counts_after = task_counts(&cluster, "gen", &after);
    let mut per_worker: BTreeMap<&str, usize> = BTreeMap::new();
    for w in &after {
        *per_worker.entry(w).or_default() += 1;
    }
    assert_eq!(per_worker.len(), 4, "all four workers run tasks: {after:?}");
    assert!(
        per_worker.values().all(|n| (1..=2).contains(n)),
        "{per_worker:?}"
    );
    // A task that stayed where it was counts on from where it was: it was not restarted.
    let mut stayed = 0;
    for t in 0..6 {
        if before[t] == after[t] {
            stayed += 1;
            assert!(
                counts_after[t] >= counts_before[t],
                "task {t} stayed on {} but was restarted ({} then {})",
                before[t],
                counts_before[t],
                counts_after[t]
            );
        }
    }
    assert!(
        stayed >= 4,
        "only what balance needs moves: {before:?} -> {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn tasks_max_raised_through_a_follower_splits_again_and_loses_no_line() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    let url = cluster.node(cluster.follower()).url.clone();
    let input = dir.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    const LINES: usize = 3000;
    for f in 0..5 {
        let text: String = (0..LINES).map(|l| format!("f{f}-{l}\n")).collect();
        std::fs::write(input.join(format!("f{f}.txt")), text).unwrap();
    }
    let topic = unique_topic("dist-resplit");
    let config = |tasks: u32| {
        json!({"connector.class": "file-source", "topic": topic, "tasks.max": tasks.to_string(),
            "directory": input.display().to_string(), "sandbox.fs.read": input.display().to_string(),
            "value.converter": "string"})
    };
    block(async {
        create_topic(&topic, 1).await;
        assert_eq!(create(&url, "files", config(2)).await, StatusCode::CREATED);
    });
    assert!(eventually(Duration::from_secs(60), || running_tasks(
        &url, "files", 2
    )
    .is_some()));
    let status = block(async {
        reqwest::Client::new()
            .put(format!("{url}/connectors/files/config"))
            .json(&config(3))
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, StatusCode::OK);
    let mut owners = None;
    assert!(
        eventually(Duration::from_secs(60), || {
            owners = cluster
                .running()
                .into_iter()
                .map(|i| running_tasks(&cluster.node(i).url, "files", 3))
                .collect::<Option<Vec<_>>>();
            owners.is_some()
        }),
        "three tasks run, as every worker sees:\n{}",
        cluster.logs()
    );
    let mut lines = BTreeSet::new();
    let complete = eventually(Duration::from_secs(60), || {
        lines = consume(&topic, usize::MAX, Duration::from_secs(3))
            .iter()
            .map(|r| r.text())
            .collect();
        lines.len() == 5 * LINES
    });
    assert!(
        complete,
        "every line arrived: {} of {}\n{}",
        lines.len(),
        5 * LINES,
        cluster.logs()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolling_restart_keeps_connectors_and_their_target_states_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let url = cluster.node(cluster.follower()).url.clone();
    let topic = unique_topic("dist-rolling");
    const COUNT: u64 = 9000;
    block(async {
        create_topic(&topic, 3).await;
        let running = json!({"connector.class": "datagen", "topic": topic, "tasks.max": "3",
            "rate": "300", "count": COUNT.to_string(), "value.converter": "string"});
        assert_eq!(create(&url, "running", running).await, StatusCode::CREATED);
        for (name, state) in [("paused", "pause"), ("stopped", "stop")] {
            let other = unique_topic(name);
            let config = json!({"connector.class": "datagen", "topic": other, "tasks.max": "2", "rate": "10"});
            assert_eq!(create(&url, name, config).await, StatusCode::CREATED);
            let answer = reqwest::Client::new()
                .put(format!("{url}/connectors/{name}/{state}"))
                .send()
                .await
                .unwrap()
                .status();
            assert!(answer.is_success(), "{name}: {answer}");
        }
    });
    let state_of = |url: &str, name: &str| -> String {
        block(get(url, &format!("/connectors/{name}/status")))["connector"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert!(eventually(Duration::from_secs(60), || state_of(
        &url, "paused"
    ) == "PAUSED"
        && state_of(&url, "stopped") == "STOPPED"
        && running_tasks(&url, "running", 3).is_some()));

    // One worker at a time: stopped politely, started again, rejoined.
    for i in 0..3 {
        cluster.stop(i);
        std::thread::sleep(Duration::from_secs(1));
        cluster.start_node(i);
    }
    let urls: Vec<String> = cluster
        .running()
        .iter()
        .map(|i| cluster.node(*i).url.clone())
        .collect();
    let kept = eventually(Duration::from_secs(60), || {
        urls.iter().all(|u| {
            state_of(u, "paused") == "PAUSED"
                && state_of(u, "stopped") == "STOPPED"
                && running_tasks(u, "running", 3).is_some()
        })
    });
    assert!(
        kept,
        "every worker shows the three connectors as they were:\n{}",
        cluster.logs()
    );
    let mut ids = BTreeSet::new();
    let complete = eventually(Duration::from_secs(90), || {
        ids = datagen_records(&topic, usize::MAX, Duration::from_secs(3))
            .iter()
            .map(|r| r.0)
            .collect();
        ids.len() as u64 >= COUNT
    });
    let missing: Vec<u64> = (0..COUNT).filter(|i| !ids.contains(i)).take(20).collect();
    assert!(
        complete && missing.is_empty(),
        "lost (first 20): {missing:?}\n{}",
        cluster.logs()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_leader_killed_during_a_creation_leaves_the_connector_once_with_all_its_task_configs() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3, &[]);
    let follower = cluster.follower();
    let leader = cluster.leader();
    let url = cluster.node(follower).url.clone();
    let topic = unique_topic("dist-leader");
    create_topic(&topic, 3).await;
    let config = json!({"connector.class": "datagen", "topic": topic, "tasks.max": "3", "rate": "10",
        "value.converter": "string"});
    // The creation goes to a follower, which forwards it to the leader; the leader dies while
    // it is on its way. The client tries again, as a client of a cluster does.
    let request = {
        let (url, config) = (url.clone(), config.clone());
        tokio::spawn(async move { create(&url, "gen", config).await })
    };
    tokio::time::sleep(Duration::from_millis(30)).await;
    cluster.kill(leader);
    let first = request.await.unwrap();
    let again = create(&url, "gen", config).await;
    assert!(
        first == StatusCode::CREATED || again == StatusCode::CREATED,
        "created by one of the two tries ({first}, {again})\n{}",
        cluster.logs()
    );
    assert!(
        again == StatusCode::CREATED || again == StatusCode::CONFLICT,
        "{again}"
    );
    for i in cluster.running() {
        let url = &cluster.node(i).url;
        let names = get(url, "/connectors").await;
        assert_eq!(names, json!(["gen"]), "worker {i}");
        let tasks = get(url, "/connectors/gen/tasks").await;
        assert_eq!(
            tasks.as_array().map(Vec::len),
            Some(3),
            "worker {i}: {tasks}"
        );
    }
    let url2 = url.clone();
    assert!(
        tokio::task::spawn_blocking(
            move || eventually(Duration::from_secs(60), || running_tasks(&url2, "gen", 3)
                .is_some())
        )
        .await
        .unwrap(),
        "{}",
        cluster.logs()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connector_moves_from_a_standalone_worker_to_the_cluster_without_replaying() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("dist-move");
    create_topic(&topic, 2).await;
    const COUNT: u64 = 4000;
    let config_file = dir.path().join("gen.properties");
    wasm_connect_tests::worker::write_properties(
        &config_file,
        &[
            ("name", "gen".into()),
            ("connector.class", "datagen".into()),
            ("topic", topic.clone()),
            ("tasks.max", "2".into()),
            ("rate", "400".into()),
            ("count", COUNT.to_string()),
            ("value.converter", "string".into()),
        ],
    );
    // First on a standalone worker, stopped halfway.
    let alone = dir.path().join("standalone");
    std::fs::create_dir_all(&alone).unwrap();
    let mut standalone = wasm_connect_tests::worker::Worker::start(
        &alone,
        &wasm_connect_tests::kafka::worker_settings(500),
        std::slice::from_ref(&config_file),
    );
    let standalone_url = standalone.rest_url(Duration::from_secs(120));
    let halfway = tokio::task::spawn_blocking({
        let topic = topic.clone();
        move || {
            eventually(Duration::from_secs(60), || {
                datagen_records(&topic, usize::MAX, Duration::from_secs(1)).len() as u64
                    >= COUNT / 2
            })
        }
    })
    .await
    .unwrap();
    assert!(halfway, "{}", standalone.log_text());
    let stopped = reqwest::Client::new()
        .put(format!("{standalone_url}/connectors/gen/stop"))
        .send()
        .await
        .unwrap()
        .status();
    assert!(stopped.is_success());
    let url2 = standalone_url.clone();
    let stopped = tokio::task::spawn_blocking(move || {
        eventually(Duration::from_secs(30), || {
            block(get(&url2, "/connectors/gen/status"))["connector"]["state"] == "STOPPED"
        })
    })
    .await
    .unwrap();
    assert!(stopped, "{}", standalone.log_text());

    // Then on the cluster, from the standalone worker's offsets.
    let cluster = Cluster::start(&dir.path().join("cluster"), 2, &[]);
    let url = cluster.node(0).url.clone();
    let out = std::process::Command::new(wasm_connect_tests::wasm_connect_bin())
        .args(["connectors", "--url", &url, "create", "-f"])
        .arg(&config_file)
        .args(["--offsets-from", &standalone_url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Every record once: nothing replayed, nothing lost.
    let mut records = Vec::new();
    let complete = tokio::task::spawn_blocking({
        let topic = topic.clone();
        move || {
            let mut records = Vec::new();
            let done = eventually(Duration::from_secs(90), || {
                records = datagen_records(&topic, usize::MAX, Duration::from_secs(2));
                records.iter().map(|r| r.0).collect::<BTreeSet<_>>().len() as u64 >= COUNT
            });
            (done, records)
        }
    })
    .await
    .unwrap();
    let done = complete.0;
    records.extend(complete.1);
    let ids: Vec<u64> = records.iter().map(|r| r.0).collect();
    let distinct: BTreeSet<u64> = ids.iter().copied().collect();
    assert!(
        done,
        "every record arrived: {} of {COUNT}\n{}",
        distinct.len(),
        cluster.logs()
    );
    assert_eq!(
        ids.len(),
        distinct.len(),
        "no record twice: the cluster resumed where the standalone worker stopped"
    );
    drop(standalone);
}

#[tokio::test(flavor = "multi_thread")]
async fn restarts_asked_of_any_worker_reach_the_tasks_wherever_they_run() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 3, &[]);
    let url = cluster.node(cluster.follower()).url.clone();
    let topic = unique_topic("dist-restart");
    create_topic(&topic, 3).await;
    let datagen = json!({"connector.class": "datagen", "topic": topic, "tasks.max": "3",
        "rate": "300", "value.converter": "string"});
    assert_eq!(create(&url, "gen", datagen).await, StatusCode::CREATED);
    let (cluster, url) = tokio::task::spawn_blocking(move || {
        let mut owners = None;
        assert!(eventually(Duration::from_secs(60), || {
            owners = running_tasks(&url, "gen", 3);
            owners.is_some()
        }));
        let owners = owners.unwrap();
        std::thread::sleep(Duration::from_secs(3));

        // One task, asked of a worker that does not run it: restarted where it runs, alone.
        let (task, other) = (0..3)
            .flat_map(|t| cluster.running().into_iter().map(move |i| (t, i)))
            .find(|(t, i)| cluster.node(*i).id != owners[*t])
            .unwrap();
        let before = task_counts(&cluster, "gen", &owners);
        let answer = block(async {
            reqwest::Client::new()
                .post(format!(
                    "{}/connectors/gen/tasks/{task}/restart",
                    cluster.node(other).url
                ))
                .send()
                .await
                .unwrap()
                .status()
        });
        assert_eq!(answer, StatusCode::NO_CONTENT, "{}", cluster.logs());
        let after = task_counts(&cluster, "gen", &owners);
        for t in 0..3 {
            if t == task {
                assert!(
                    after[t] < before[t],
                    "task {t} restarted: {before:?} -> {after:?}"
                );
            } else {
                assert!(
                    after[t] >= before[t],
                    "task {t} untouched: {before:?} -> {after:?}"
                );
            }
        }

        // The connector with its tasks, asked of a follower: every task, on every worker.
        std::thread::sleep(Duration::from_secs(2));
        let before = task_counts(&cluster, "gen", &owners);
        let (status, plan) = block(async {
            let response = reqwest::Client::new()
                .post(format!("{url}/connectors/gen/restart?includeTasks=true"))
                .send()
                .await
                .unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        });
        assert_eq!(status, StatusCode::ACCEPTED, "{plan}");
        assert_eq!(plan["connector"]["state"], "RESTARTING", "{plan}");
        assert!(
            plan["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|t| t["state"] == "RESTARTING"),
            "{plan}"
        );
        let mut after = Vec::new();
        assert!(
            eventually(Duration::from_secs(30), || {
                after = task_counts(&cluster, "gen", &owners);
                (0..3).all(|t| after[t] < before[t])
            }),
            "every task restarted: {before:?} -> {after:?}\n{}",
            cluster.logs()
        );
        assert!(eventually(Duration::from_secs(60), || running_tasks(
            &url, "gen", 3
        )
        .is_some()));
        (cluster, url)
    })
    .await
    .unwrap();
    drop((cluster, url));
}
