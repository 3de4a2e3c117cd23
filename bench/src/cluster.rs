//! The distributed workload: three workers of wasm-connect (`wasm-connect distributed`) and then
//! three of Apache Kafka Connect (`ConnectDistributed`, at its defaults), on the same broker with
//! the same group settings ([`group_settings`]), each cluster running one paced source connector
//! whose records name the task that wrote them (`datagen`'s JSON values; the benchmark's
//! `RateSourceConnector` with `tag.task`). Two times are read from the broker's append times
//! (`LogAppendTime`), so neither system's clock or logs are trusted:
//!
//! - **reconfiguration**: from the moment the request raising `tasks.max` from
//!   [`TASKS_BEFORE`] to [`TASKS_AFTER`] is sent (to a worker that was not the group's first
//!   member, so it forwards) to the first record of the slowest of the new tasks;
//! - **failover**: from `kill -9` of a worker that runs tasks (not the group's first member,
//!   which the broker usually made the leader) to the first record of the slowest of its tasks
//!   written by the worker it moved to. Records of those tasks appended within [`IN_FLIGHT_MS`]
//!   of the kill may be the dead worker's requests still in flight and are not counted; no
//!   member can be declared dead before its session timeout, so the guard takes nothing from
//!   either system.
//!
//! The floor of the failover is the session timeout less the time since the dead worker's last
//! heartbeat (up to one heartbeat interval), so its spread across repetitions is about one
//! heartbeat interval for both systems.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::{Value, json};

use crate::kafka;
use crate::measure::now_ms;
use crate::systems::{CONNECT_HEAP, Env, Running, System, free_port, write_properties};

/// Tasks of the connector when it is created.
pub const TASKS_BEFORE: u32 = 3;

/// Tasks after the reconfiguration.
pub const TASKS_AFTER: u32 = 6;

/// Records a second each task writes.
pub const RATE_PER_TASK: u32 = 100;

/// Workers in each cluster.
const WORKERS: usize = 3;

/// Records of a dead worker's tasks appended this soon after the kill may have been in flight.
pub const IN_FLIGHT_MS: i64 = 1000;

/// How long a cluster may take to start, take a request or move work before the run fails.
const PATIENCE: Duration = Duration::from_secs(120);

/// The connector's name in both clusters.
const CONNECTOR: &str = "bench-cluster";

/// One run of the distributed workload.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterRun {
    pub system: &'static str,
    pub rep: usize,
    /// From the `tasks.max` change being sent to the slowest new task's first record, in ms.
    pub reconfigure_ms: f64,
    /// From the kill to the slowest moved task's first record on its new worker, in ms.
    pub failover_ms: f64,
    /// Tasks the killed worker ran.
    pub moved_tasks: usize,
    /// The session timeout both systems ran with, in ms.
    pub session_ms: u64,
    /// Records written from just before the reconfiguration to just before the kill.
    pub records: u64,
    /// CPU seconds of the three workers over the same span.
    pub cpu_seconds: Option<f64>,
    /// `cpu_seconds` per million `records`.
    pub cpu_s_per_m: Option<f64>,
    /// The three workers' peak resident memory, summed, in KiB.
    pub peak_rss_kib: Option<u64>,
}

/// The group settings of both clusters, Kafka Connect's keys: its default session timeout and
/// heartbeat interval (a smoke run's are shorter), and no scheduled delay before a departed
/// worker's work moves (Connect's default of five minutes would make the failover time that
/// delay; a delay adds the same to both systems).
pub fn group_settings(smoke: bool) -> Vec<(&'static str, String)> {
    let (session, heartbeat) = if smoke { (6000, 2000) } else { (10_000, 3000) };
    vec![
        ("session.timeout.ms", session.to_string()),
        ("heartbeat.interval.ms", heartbeat.to_string()),
        ("scheduled.rebalance.max.delay.ms", "0".into()),
        ("offset.flush.interval.ms", "1000".into()),
    ]
}

/// One worker of a cluster.
struct Node {
    running: Running,
    url: String,
    /// What the worker is called in status (`worker_id`).
    id: String,
}

/// Run the workload once on `system` (wasm-connect or Kafka Connect) in a new directory under
/// `work`.
pub async fn run(
    env: &Env,
    work: &Path,
    system: System,
    rep: usize,
    smoke: bool,
) -> Result<ClusterRun> {
    let name = if system.is_connect() {
        "connect"
    } else {
        "wasm"
    };
    let group = format!("bench-cluster-{name}-{}-{rep}", now_ms());
    let topic = format!("{group}-records");
    kafka::create_topic(&env.bootstrap, &topic, 1).await?;
    let dir = work.join(&group);
    let settings = group_settings(smoke);
    let mut nodes = Vec::new();
    let outcome = measure(env, &dir, system, &group, &topic, &settings, &mut nodes).await;
    for node in nodes.into_iter().flatten() {
        node.running.kill();
    }
    for suffix in ["records", "configs", "offsets", "status"] {
        let topic = format!("{group}-{suffix}");
        if let Err(e) = kafka::delete_topic(&env.bootstrap, &topic).await {
            eprintln!("warning: cannot delete {topic}: {e:#}");
        }
    }
    let (reconfigure_ms, failover_ms, moved_tasks, records, cpu_seconds, peak_rss_kib) =
        outcome.with_context(|| format!("distributed workload on {}", system.name()))?;
    let session_ms = settings
        .iter()
        .find(|(k, _)| *k == "session.timeout.ms")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or_default();
    let run = ClusterRun {
        system: system.name(),
        rep,
        reconfigure_ms,
        failover_ms,
        moved_tasks,
        session_ms,
        records,
        cpu_seconds,
        cpu_s_per_m: cpu_seconds
            .filter(|_| records > 0)
            .map(|c| c * 1e6 / records as f64),
        peak_rss_kib,
    };
    eprintln!(
        "cluster {} rep {rep}: tasks.max {TASKS_BEFORE} -> {TASKS_AFTER} in {:.0} ms, failover of {} tasks in {:.0} ms",
        run.system, run.reconfigure_ms, run.moved_tasks, run.failover_ms
    );
    Ok(run)
}

/// What [`measure`] found: reconfiguration ms, failover ms, tasks moved, records, CPU seconds
/// and peak RSS over the measured span.
type Measured = (f64, f64, usize, u64, Option<f64>, Option<u64>);

async fn measure(
    env: &Env,
    dir: &Path,
    system: System,
    group: &str,
    topic: &str,
    settings: &[(&'static str, String)],
    nodes: &mut Vec<Option<Node>>,
) -> Result<Measured> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    // The first worker alone, so it is the group's first member (and, as brokers choose, its
    // leader); then the other two together.
    nodes.push(Some(start_node(env, dir, system, group, settings, 0)?));
    ready(&client, system, nodes).await?;
    for i in 1..WORKERS {
        nodes.push(Some(start_node(env, dir, system, group, settings, i)?));
    }
    ready(&client, system, nodes).await?;
    let urls: Vec<String> = nodes.iter().flatten().map(|n| n.url.clone()).collect();
    let url = |i: usize| urls[i].clone();

    // Created through a follower, like every request below.
    let created = now_ms();
    let config = connector_config(system, topic, TASKS_BEFORE);
    send(
        &client,
        reqwest::Method::POST,
        &format!("{}/connectors", url(1)),
        &json!({"name": CONNECTOR, "config": config}),
    )
    .await?;
    let all: Vec<u32> = (0..TASKS_BEFORE).collect();
    running_tasks(&client, &url(0), TASKS_BEFORE, nodes).await?;
    first_records(env, topic, 0, created, &all).await?;

    let from = kafka::high_watermark(&env.bootstrap, topic)?;
    let cpu_before = cpu_seconds(nodes);
    let changed = now_ms();
    send(
        &client,
        reqwest::Method::PUT,
        &format!("{}/connectors/{CONNECTOR}/config", url(2)),
        &connector_config(system, topic, TASKS_AFTER),
    )
    .await?;
    let new: Vec<u32> = (TASKS_BEFORE..TASKS_AFTER).collect();
    let firsts = first_records(env, topic, from, changed, &new).await?;
    let reconfigure_ms = (firsts.values().max().copied().unwrap_or(changed) - changed) as f64;

    // The worker to kill: of those that were not the first member, the one with most tasks.
    let owners = running_tasks(&client, &url(0), TASKS_AFTER, nodes).await?;
    let victim = (1..WORKERS)
        .max_by_key(|i| {
            let id = nodes[*i]
                .as_ref()
                .map(|n| n.id.as_str())
                .unwrap_or_default();
            owners.values().filter(|o| *o == id).count()
        })
        .unwrap_or(WORKERS - 1);
    let victim_id = nodes[victim]
        .as_ref()
        .map(|n| n.id.clone())
        .unwrap_or_default();
    let moved: Vec<u32> = owners
        .iter()
        .filter(|(_, o)| **o == victim_id)
        .map(|(t, _)| *t)
        .collect();
    if moved.is_empty() {
        bail!("no worker but the first runs a task: {owners:?}");
    }
    let to = kafka::high_watermark(&env.bootstrap, topic)?;
    let cpu_seconds = cpu_before
        .zip(cpu_seconds(nodes))
        .map(|(before, after)| after - before);
    let peak_rss_kib = nodes
        .iter()
        .flatten()
        .map(|n| n.running.peak_rss_kib())
        .sum::<Option<u64>>();
    let killed = now_ms();
    if let Some(node) = nodes[victim].take() {
        node.running.kill();
    }
    let firsts = first_records(env, topic, to, killed + IN_FLIGHT_MS, &moved).await?;
    let failover_ms = (firsts.values().max().copied().unwrap_or(killed) - killed) as f64;
    Ok((
        reconfigure_ms,
        failover_ms,
        moved.len(),
        u64::try_from(to - from).unwrap_or_default(),
        cpu_seconds,
        peak_rss_kib,
    ))
}

/// Start worker `i` of the cluster of `system` called `group`.
fn start_node(
    env: &Env,
    dir: &Path,
    system: System,
    group: &str,
    settings: &[(&'static str, String)],
    i: usize,
) -> Result<Node> {
    let dir = dir.join(format!("w{i}"));
    std::fs::create_dir_all(&dir)?;
    let port = free_port()?;
    let url = format!("http://127.0.0.1:{port}");
    let mut pairs = vec![
        ("bootstrap.servers", env.bootstrap.clone()),
        ("group.id", group.to_owned()),
        ("config.storage.topic", format!("{group}-configs")),
        ("offset.storage.topic", format!("{group}-offsets")),
        ("status.storage.topic", format!("{group}-status")),
        ("config.storage.replication.factor", "1".into()),
        ("offset.storage.replication.factor", "1".into()),
        ("status.storage.replication.factor", "1".into()),
        ("offset.storage.partitions", "5".into()),
        ("status.storage.partitions", "2".into()),
        ("listeners", url.clone()),
    ];
    pairs.extend(settings.iter().cloned());
    let worker = dir.join("worker.properties");
    let (command, id) = if system.is_connect() {
        let string = "org.apache.kafka.connect.storage.StringConverter";
        pairs.extend([
            ("key.converter", string.to_owned()),
            ("value.converter", string.to_owned()),
            ("rest.advertised.host.name", "127.0.0.1".to_owned()),
            ("rest.advertised.port", port.to_string()),
        ]);
        write_properties(&worker, &pairs)?;
        let mut command = env.kafka_connect_java(&dir, CONNECT_HEAP, "ConnectDistributed")?;
        command.arg(&worker);
        (command, format!("127.0.0.1:{port}"))
    } else {
        let id = format!("w{i}");
        pairs.extend([
            (
                "plugin.path",
                env.repo.join("dist/plugins").display().to_string(),
            ),
            ("data.dir", dir.join("data").display().to_string()),
            ("worker.id", id.clone()),
            ("key.converter", "string".to_owned()),
            ("value.converter", "string".to_owned()),
        ]);
        write_properties(&worker, &pairs)?;
        let mut command = std::process::Command::new(&env.worker);
        command
            .arg("distributed")
            .arg(&worker)
            .current_dir(&dir)
            .env("RUST_LOG", "warn,wasm_connect=info");
        (command, id)
    };
    let running = Running::spawn(command, dir.join("worker.log"))?;
    Ok(Node { running, url, id })
}

/// The connector's config on `system` with `tasks` tasks of [`RATE_PER_TASK`] records a second.
fn connector_config(system: System, topic: &str, tasks: u32) -> Value {
    if system.is_connect() {
        json!({
            "connector.class": "wasmconnect.bench.RateSourceConnector",
            "tasks.max": tasks.to_string(),
            "topic": topic,
            "rate": RATE_PER_TASK.to_string(),
            "tag.task": "true",
        })
    } else {
        // datagen's rate is the connector's, split over its tasks.
        json!({
            "connector.class": "datagen",
            "tasks.max": tasks.to_string(),
            "topic": topic,
            "count": "-1",
            "rate": (RATE_PER_TASK * tasks).to_string(),
        })
    }
}

/// Wait until every running worker is a member of the group with a generation (wasm-connect's
/// `GET /admin/cluster`; Kafka Connect's `GET /health`, which answers 200 once the worker has
/// joined and read the config topic).
async fn ready(client: &reqwest::Client, system: System, nodes: &mut [Option<Node>]) -> Result<()> {
    let deadline = Instant::now() + PATIENCE;
    for node in nodes.iter_mut().flatten() {
        loop {
            node.running.check_alive()?;
            let up = if system.is_connect() {
                client
                    .get(format!("{}/health", node.url))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
            } else {
                match client
                    .get(format!("{}/admin/cluster", node.url))
                    .send()
                    .await
                {
                    Ok(r) => r
                        .json::<Value>()
                        .await
                        .is_ok_and(|v| v["generation"].as_i64().is_some_and(|g| g >= 0)),
                    Err(_) => false,
                }
            };
            if up {
                break;
            }
            if Instant::now() > deadline {
                bail!("{} did not join the group within {PATIENCE:?}", node.url);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Send `body` with `method` to `url`, again while the cluster answers that it is rebalancing
/// (409) or unavailable, until it succeeds.
async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: &Value,
) -> Result<()> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let answer = client.request(method.clone(), url).json(body).send().await;
        let last = match answer {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) if r.status().as_u16() == 409 || r.status().is_server_error() => {
                format!("{}: {}", r.status(), r.text().await.unwrap_or_default())
            }
            Ok(r) => bail!(
                "{method} {url}: {}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            ),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            bail!("{method} {url} did not succeed within {PATIENCE:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Wait until the connector has `tasks` tasks, all RUNNING; their workers (task → worker id),
/// asked of the worker at `url`.
async fn running_tasks(
    client: &reqwest::Client,
    url: &str,
    tasks: u32,
    nodes: &mut [Option<Node>],
) -> Result<BTreeMap<u32, String>> {
    let deadline = Instant::now() + PATIENCE;
    let mut last = Value::Null;
    loop {
        for node in nodes.iter_mut().flatten() {
            node.running.check_alive()?;
        }
        if let Ok(r) = client
            .get(format!("{url}/connectors/{CONNECTOR}/status"))
            .send()
            .await
            && let Ok(status) = r.json::<Value>().await
        {
            let owners: BTreeMap<u32, String> = status["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["state"] == "RUNNING")
                .filter_map(|t| {
                    let id = u32::try_from(t["id"].as_u64()?).ok()?;
                    Some((id, t["worker_id"].as_str()?.to_owned()))
                })
                .collect();
            if owners.len() == tasks as usize && owners.keys().all(|t| *t < tasks) {
                return Ok(owners);
            }
            last = status;
        }
        if Instant::now() > deadline {
            bail!("{tasks} tasks did not all run within {PATIENCE:?}; last status: {last}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The append times of the first records of `tasks` from offset `from` on, appended at or
/// after `since`.
async fn first_records(
    env: &Env,
    topic: &str,
    from: i64,
    since: i64,
    tasks: &[u32],
) -> Result<BTreeMap<u32, i64>> {
    let (bootstrap, topic, tasks) = (env.bootstrap.clone(), topic.to_owned(), tasks.to_vec());
    tokio::task::spawn_blocking(move || {
        kafka::first_per_task(&bootstrap, &topic, from, since, &tasks, PATIENCE)
    })
    .await?
}

/// The CPU seconds the running workers have used, summed (none if one cannot be read).
fn cpu_seconds(nodes: &[Option<Node>]) -> Option<f64> {
    nodes
        .iter()
        .flatten()
        .map(|n| n.running.cpu_seconds())
        .sum()
}
