//! A distributed cluster of real `wasm-connect distributed` processes on the test broker: its
//! own group and state topics, short timeouts (seconds, not Kafka Connect's minutes), workers
//! started, killed, paused and restarted by index.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::kafka::{bootstrap, unique_topic};
use crate::rest::{block, get};
use crate::worker::{Worker, eventually};

/// How long a worker may take to start and join.
pub const START: Duration = Duration::from_secs(120);

/// The group's session timeout (the broker's minimum by default).
pub const SESSION: Duration = Duration::from_secs(6);

/// How long a departed worker's work waits for it (`scheduled.rebalance.max.delay.ms`).
pub const DELAY: Duration = Duration::from_secs(2);

/// One worker of the cluster.
pub struct Node {
    pub worker: Worker,
    pub url: String,
    pub id: String,
}

/// The cluster.
pub struct Cluster {
    dir: PathBuf,
    settings: Vec<(&'static str, String)>,
    /// By index; `None` once stopped or killed.
    pub nodes: Vec<Option<Node>>,
}

impl Cluster {
    /// A cluster of `n` workers (each started and joined), under `dir`.
    pub fn start(dir: &Path, n: usize, extra: &[(&'static str, String)]) -> Cluster {
        let group = unique_topic("cluster");
        let mut settings = vec![
            ("bootstrap.servers", bootstrap()),
            ("group.id", group.clone()),
            ("config.storage.topic", format!("{group}-configs")),
            ("offset.storage.topic", format!("{group}-offsets")),
            ("status.storage.topic", format!("{group}-status")),
            ("config.storage.replication.factor", "1".into()),
            ("offset.storage.replication.factor", "1".into()),
            ("status.storage.replication.factor", "1".into()),
            ("offset.storage.partitions", "5".into()),
            ("status.storage.partitions", "2".into()),
            ("session.timeout.ms", SESSION.as_millis().to_string()),
            ("heartbeat.interval.ms", "1000".into()),
            ("rebalance.timeout.ms", "20000".into()),
            (
                "scheduled.rebalance.max.delay.ms",
                DELAY.as_millis().to_string(),
            ),
            ("offset.flush.interval.ms", "500".into()),
        ];
        settings.extend(extra.iter().cloned());
        let mut cluster = Cluster {
            dir: dir.to_owned(),
            settings,
            nodes: Vec::new(),
        };
        // Started together, then waited for: a cluster starts in the time of one worker.
        let workers: Vec<Worker> = (0..n).map(|i| cluster.spawn(i)).collect();
        for (i, worker) in workers.into_iter().enumerate() {
            cluster.joined(i, worker);
        }
        cluster
    }

    /// Start worker `i` (again, with the same data directory and id, if it ran before), and
    /// wait until it has joined the group.
    pub fn start_node(&mut self, i: usize) {
        let worker = self.spawn(i);
        self.joined(i, worker);
    }

    fn spawn(&self, i: usize) -> Worker {
        let dir = self.dir.join(format!("w{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut pairs = self.settings.clone();
        pairs.push(("worker.id", format!("w{i}")));
        Worker::start_distributed(&dir, &pairs)
    }

    fn joined(&mut self, i: usize, mut worker: Worker) {
        let url = worker.rest_url(START);
        worker.wait_for_log("joined the workers' group", START);
        while self.nodes.len() <= i {
            self.nodes.push(None);
        }
        self.nodes[i] = Some(Node {
            worker,
            url,
            id: format!("w{i}"),
        });
    }

    /// Worker `i`.
    pub fn node(&self, i: usize) -> &Node {
        self.nodes[i].as_ref().expect("a running worker")
    }

    /// The running workers' indexes.
    pub fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_some())
            .collect()
    }

    /// `GET /admin/cluster` of worker `i`.
    pub fn membership(&self, i: usize) -> Value {
        block(get(&self.node(i).url, "/admin/cluster"))
    }

    /// The index of a running worker that is not the leader, once the group has settled.
    pub fn follower(&self) -> usize {
        let mut found = None;
        assert!(
            eventually(START, || {
                let views: Vec<(usize, Value)> = self
                    .running()
                    .into_iter()
                    .map(|i| (i, self.membership(i)))
                    .collect();
                let settled = views
                    .iter()
                    .all(|(_, v)| v["generation"].as_i64() >= Some(0))
                    && views.iter().filter(|(_, v)| v["leader"] == true).count() == 1;
                found = views
                    .iter()
                    .find(|(_, v)| v["leader"] == false)
                    .map(|(i, _)| *i);
                settled && found.is_some()
            }),
            "the group settles with one leader"
        );
        found.unwrap()
    }

    /// The index of the leader.
    pub fn leader(&self) -> usize {
        // Once settled, there is one.
        self.follower();
        self.running()
            .into_iter()
            .find(|i| self.membership(*i)["leader"] == true)
            .expect("a leader")
    }

    /// Kill worker `i` with SIGKILL.
    pub fn kill(&mut self, i: usize) -> String {
        let node = self.nodes[i].take().expect("a running worker");
        node.worker.kill()
    }

    /// Stop worker `i` with SIGTERM.
    pub fn stop(&mut self, i: usize) -> String {
        let node = self.nodes[i].take().expect("a running worker");
        node.worker.stop().1
    }

    /// Every running worker's log, for failure messages.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .flatten()
            .map(|n| format!("=== {}\n{}", n.id, n.worker.log_text()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
