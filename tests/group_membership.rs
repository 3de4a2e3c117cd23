//! Distributed mode's membership on the real broker: members in this process join a group
//! through Kafka's group coordinator with the Connect protocol, the broker elects a leader, the
//! leader's incremental cooperative assignor splits a connector and its tasks, and the group
//! rebalances as members join, leave, and vanish without a word. Each member applies its
//! assignments as a worker does (stop what is revoked, start what is assigned, rejoin after a
//! revocation or a scheduled delay), and the test checks, after every change, that every task
//! runs exactly once and the counts are balanced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use wasm_connect::distributed::assignor::{Assignor, Round};
use wasm_connect::distributed::protocol::{
    Assignment, NO_ERROR, PROTOCOL_NAME, PROTOCOL_TYPE, Work, WorkerState, decode_assignment,
    decode_metadata, encode_assignment, encode_metadata,
};
use wasm_connect::kafka::group::{Event, GroupMember, GroupSecurity, LeaderDuty, MemberConfig};
use wasm_connect::storage::ConnectorTaskId;
use wasm_connect_tests::kafka;

/// The members' logs in the test's output (shown when it fails).
fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("wasm_connect=debug")
        .try_init();
}

/// The lost work of a departed member waits this long for it.
const DELAY: Duration = Duration::from_secs(1);

/// One member's state, as its owner keeps it.
#[derive(Default)]
struct State {
    /// Everything it runs (its cumulative assignment), `None` before the first and after
    /// losing its membership.
    running: Option<Assignment>,
    /// The generation it last joined.
    generation: Option<i32>,
    /// Everything revoked from it, ever.
    revoked: Work,
}

struct Duty {
    url: String,
    configured: BTreeMap<String, u32>,
    state: Arc<Mutex<State>>,
    assignor: Mutex<Assignor>,
    started: std::time::Instant,
}

impl LeaderDuty for Duty {
    fn metadata(&self) -> Vec<(String, Bytes)> {
        let state = WorkerState {
            url: self.url.clone(),
            config_offset: 0,
            running: self.state.lock().unwrap().running.clone(),
        };
        vec![(PROTOCOL_NAME.to_owned(), encode_metadata(&state))]
    }

    fn assign(
        &self,
        generation: i32,
        leader: &str,
        protocol: &str,
        members: &[(String, Bytes)],
    ) -> Vec<(String, Bytes)> {
        assert_eq!(protocol, PROTOCOL_NAME);
        let states: BTreeMap<String, WorkerState> = members
            .iter()
            .map(|(id, bytes)| (id.clone(), decode_metadata(bytes).unwrap()))
            .collect();
        let running: BTreeMap<String, Work> = states
            .iter()
            .map(|(id, s)| {
                let work = s.running.as_ref().map(|a| a.assigned.clone());
                (id.clone(), work.unwrap_or_default())
            })
            .collect();
        let last = self.state.lock().unwrap().generation;
        let plan = self.assignor.lock().unwrap().assign(&Round {
            members: &running,
            configured: &self.configured,
            last_completed_generation: last,
            generation,
            now_ms: self.started.elapsed().as_millis() as u64,
        });
        let leader_url = states[leader].url.clone();
        running
            .keys()
            .map(|id| {
                let assignment = Assignment {
                    error: NO_ERROR,
                    leader: leader.to_owned(),
                    leader_url: leader_url.clone(),
                    config_offset: 0,
                    assigned: plan.assigned.get(id).cloned().unwrap_or_default(),
                    revoked: plan.revoked.get(id).cloned().unwrap_or_default(),
                    delay_ms: plan.delay.as_millis() as i32,
                };
                (id.clone(), encode_assignment(&assignment))
            })
            .collect()
    }
}

/// A member and the task that applies its assignments.
struct Worker {
    name: String,
    state: Arc<Mutex<State>>,
    owner: tokio::task::JoinHandle<()>,
    leave: Option<tokio::sync::oneshot::Sender<()>>,
}

fn config(group: &str, name: &str) -> MemberConfig {
    MemberConfig {
        bootstrap: vec![kafka::bootstrap()],
        security: GroupSecurity::plaintext(),
        group_id: group.to_owned(),
        client_id: name.to_owned(),
        protocol_type: PROTOCOL_TYPE.to_owned(),
        session_timeout: Duration::from_secs(6),
        rebalance_timeout: Duration::from_secs(10),
        heartbeat_interval: Duration::from_millis(500),
        request_timeout: Duration::from_secs(5),
        fence: None,
    }
}

impl Worker {
    fn start(
        group: &str,
        name: &str,
        configured: &[(&str, u32)],
        changed: watch::Sender<u64>,
    ) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let duty = Arc::new(Duty {
            url: format!("http://{name}:8083/"),
            configured: configured
                .iter()
                .map(|(c, n)| (c.to_string(), *n))
                .collect(),
            state: Arc::clone(&state),
            assignor: Mutex::new(Assignor::new(DELAY)),
            started: std::time::Instant::now(),
        });
        let mut member = GroupMember::start(config(group, name), duty);
        let (leave, mut leaving) = tokio::sync::oneshot::channel::<()>();
        let shared = Arc::clone(&state);
        let owner = tokio::spawn(async move {
            let mut rejoin_at: Option<tokio::time::Instant> = None;
            loop {
                let event = tokio::select! {
                    event = member.next_event() => event,
                    _ = &mut leaving => {
                        member.leave(Duration::from_secs(5)).await;
                        return;
                    }
                    () = async { tokio::time::sleep_until(rejoin_at.unwrap_or_else(tokio::time::Instant::now)).await }, if rejoin_at.is_some() => {
                        rejoin_at = None;
                        member.rejoin();
                        continue;
                    }
                };
                match event {
                    Some(Event::Joined(joined)) => {
                        let assignment = decode_assignment(&joined.assignment).unwrap();
                        assert!(!assignment.failed());
                        let mut state = shared.lock().unwrap();
                        let mut work = state
                            .running
                            .as_ref()
                            .map(|a| a.assigned.clone())
                            .unwrap_or_default();
                        work.remove(&assignment.revoked);
                        work.add(&assignment.assigned);
                        state.revoked.add(&assignment.revoked);
                        state.generation = Some(joined.generation);
                        state.running = Some(Assignment {
                            assigned: work,
                            revoked: Work::default(),
                            ..assignment.clone()
                        });
                        drop(state);
                        if !assignment.revoked.is_empty() {
                            member.rejoin();
                        } else if assignment.delay_ms > 0 {
                            rejoin_at = Some(
                                tokio::time::Instant::now()
                                    + Duration::from_millis(assignment.delay_ms as u64),
                            );
                        }
                    }
                    Some(Event::Lost(_)) => {
                        let mut state = shared.lock().unwrap();
                        state.running = None;
                        state.generation = None;
                    }
                    Some(Event::Failed(e)) => panic!("member failed: {e}"),
                    None => return,
                }
                changed.send_modify(|n| *n += 1);
            }
        });
        Self {
            name: name.to_owned(),
            state,
            owner,
            leave: Some(leave),
        }
    }

    fn work(&self) -> Work {
        let state = self.state.lock().unwrap();
        state
            .running
            .as_ref()
            .map(|a| a.assigned.clone())
            .unwrap_or_default()
    }

    async fn leave(mut self) {
        if let Some(leave) = self.leave.take() {
            let _ = leave.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut self.owner).await;
    }

    /// Gone without a word (as a killed process): no LeaveGroup, no more heartbeats.
    fn vanish(self) {
        self.owner.abort();
    }
}

/// Wait until the workers run `tasks` tasks of `connector` (and the connector) exactly once,
/// balanced within one, reacting to every change the members report.
async fn until_settled(
    workers: &[&Worker],
    changes: &mut watch::Receiver<u64>,
    connector: &str,
    tasks: u32,
    within: Duration,
) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let works: Vec<Work> = workers.iter().map(|w| w.work()).collect();
        let mut all = Work::default();
        let mut count = 0;
        for work in &works {
            all.add(work);
            count += work.len();
        }
        let complete = all.connectors.len() == 1
            && all.connectors.contains(connector)
            && (0..tasks).all(|t| all.tasks.contains(&ConnectorTaskId::new(connector, t)))
            && all.tasks.len() == tasks as usize;
        let once = count == all.len();
        let task_counts: Vec<usize> = works.iter().map(|w| w.tasks.len()).collect();
        let balanced =
            task_counts.iter().max().unwrap_or(&0) - task_counts.iter().min().unwrap_or(&0) <= 1;
        if complete && once && balanced {
            return;
        }
        let summary: Vec<String> = workers
            .iter()
            .zip(&works)
            .map(|(w, work)| {
                format!(
                    "{}: {:?}",
                    w.name,
                    work.tasks.iter().map(|t| t.task).collect::<Vec<_>>()
                )
            })
            .collect();
        if tokio::time::timeout_at(deadline, changes.changed())
            .await
            .is_err()
        {
            panic!("the group did not settle within {within:?}: {summary:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_leave_and_vanish_and_the_work_rebalances_once_each() {
    logs();
    let group = format!("wasm-connect-{}", uuid::Uuid::new_v4());
    let configured = [("source", 6)];
    let (changed, mut changes) = watch::channel(0u64);
    let a = Worker::start(&group, "a", &configured, changed.clone());
    let b = Worker::start(&group, "b", &configured, changed.clone());
    let c = Worker::start(&group, "c", &configured, changed.clone());
    until_settled(
        &[&a, &b, &c],
        &mut changes,
        "source",
        6,
        Duration::from_secs(60),
    )
    .await;
    for worker in [&a, &b, &c] {
        assert_eq!(worker.work().tasks.len(), 2, "{}", worker.name);
        assert!(
            worker.state.lock().unwrap().revoked.is_empty(),
            "a fresh group revokes nothing"
        );
    }

    // A fourth member joins: it gets a share; the others only give up what moves to it.
    let before: Vec<Work> = [&a, &b, &c].iter().map(|w| w.work()).collect();
    let d = Worker::start(&group, "d", &configured, changed.clone());
    until_settled(
        &[&a, &b, &c, &d],
        &mut changes,
        "source",
        6,
        Duration::from_secs(60),
    )
    .await;
    assert!(!d.work().tasks.is_empty());
    for (worker, before) in [&a, &b, &c].iter().zip(&before) {
        let now = worker.work();
        let mut gained = now.clone();
        gained.remove(before);
        assert!(
            gained.tasks.is_empty(),
            "{} only gives up work: {gained:?}",
            worker.name
        );
    }

    // One leaves in order: after the scheduled delay its work runs on the others.
    d.leave().await;
    until_settled(
        &[&a, &b, &c],
        &mut changes,
        "source",
        6,
        Duration::from_secs(60),
    )
    .await;

    // One vanishes: after its session expires and the delay passes, the others run its work.
    c.vanish();
    until_settled(
        &[&a, &b],
        &mut changes,
        "source",
        6,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(a.work().tasks.len() + b.work().tasks.len(), 6);
    a.leave().await;
    b.leave().await;
}

#[tokio::test]
async fn a_group_with_another_protocol_is_refused_with_what_to_do() {
    logs();
    // A member offering another protocol name than the group's: the broker refuses it.
    struct Other;
    impl LeaderDuty for Other {
        fn metadata(&self) -> Vec<(String, Bytes)> {
            vec![("sessioned".to_owned(), Bytes::from_static(&[0, 2]))]
        }
        fn assign(
            &self,
            _: i32,
            _: &str,
            _: &str,
            members: &[(String, Bytes)],
        ) -> Vec<(String, Bytes)> {
            members
                .iter()
                .map(|(m, _)| (m.clone(), Bytes::new()))
                .collect()
        }
    }
    let group = format!("wasm-connect-{}", uuid::Uuid::new_v4());
    let (changed, mut changes) = watch::channel(0u64);
    let ours = Worker::start(&group, "ours", &[("s", 1)], changed);
    tokio::time::timeout(Duration::from_secs(30), changes.changed())
        .await
        .expect("our member joins")
        .unwrap();
    let mut other = GroupMember::start(config(&group, "java-connect"), Arc::new(Other));
    let event = tokio::time::timeout(Duration::from_secs(30), other.next_event())
        .await
        .expect("an answer")
        .expect("an event");
    match event {
        Event::Failed(e) => {
            let message = e.to_string();
            assert!(
                message.contains("another protocol") && message.contains("group.id"),
                "{message}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    ours.leave().await;
}

/// Java client keys and values.
type Settings = Vec<(&'static str, String)>;

/// The group connection from Kafka Connect's (Java) client settings, translated as the
/// worker's rdkafka clients' are.
fn security(settings: &[(&str, String)]) -> Result<GroupSecurity, String> {
    let settings: Vec<wasm_connect::kafka::security::Setting> = settings
        .iter()
        .map(|(k, v)| wasm_connect::kafka::security::Setting::plain(k, v))
        .collect();
    let translated =
        wasm_connect::kafka::security::translate(&settings).map_err(|p| format!("{p:?}"))?;
    GroupSecurity::from_librdkafka(&translated.pairs).map_err(|e| e.to_string())
}

/// One member alone in a fresh group on `bootstrap` with `security`: its first event.
async fn first_event(bootstrap: &str, security: GroupSecurity) -> Event {
    struct Alone;
    impl LeaderDuty for Alone {
        fn metadata(&self) -> Vec<(String, Bytes)> {
            vec![(PROTOCOL_NAME.to_owned(), Bytes::from_static(b"m"))]
        }
        fn assign(
            &self,
            _: i32,
            _: &str,
            _: &str,
            members: &[(String, Bytes)],
        ) -> Vec<(String, Bytes)> {
            members
                .iter()
                .map(|(m, _)| (m.clone(), Bytes::from_static(b"yours")))
                .collect()
        }
    }
    let group = format!("wasm-connect-{}", uuid::Uuid::new_v4());
    let mut config = config(&group, "secured");
    config.bootstrap = vec![bootstrap.to_owned()];
    config.security = security;
    let mut member = GroupMember::start(config, Arc::new(Alone));
    let event = tokio::time::timeout(Duration::from_secs(30), member.next_event())
        .await
        .expect("an event within 30 s")
        .expect("an event");
    member.leave(Duration::from_secs(5)).await;
    event
}

#[tokio::test]
async fn members_join_over_every_security_protocol_the_workers_clients_use() {
    logs();
    let env = kafka::secured();
    let ca = env["CA_PEM"].clone();
    // Java client keys for SASL with `mechanism` and `password` over `protocol`.
    let sasl = |protocol: &str, mechanism: &str, password: &str| -> Settings {
        let module = if mechanism == "PLAIN" {
            "plain.PlainLoginModule"
        } else {
            "scram.ScramLoginModule"
        };
        let mut settings: Settings = vec![
            ("security.protocol", protocol.to_owned()),
            ("sasl.mechanism", mechanism.to_owned()),
            (
                "sasl.jaas.config",
                format!(
                    "org.apache.kafka.common.security.{module} required username=\"{}\" password=\"{password}\";",
                    env["SASL_USER"]
                ),
            ),
        ];
        if protocol == "SASL_SSL" {
            settings.push(("ssl.truststore.type", "PEM".into()));
            settings.push(("ssl.truststore.location", ca.clone()));
        }
        settings
    };
    let password = env["SASL_PASSWORD"].as_str();
    let cases: Vec<(&str, &str, Settings)> = vec![
        (
            "SASL_SSL with SCRAM-SHA-512",
            "SASL_SSL",
            sasl("SASL_SSL", "SCRAM-SHA-512", password),
        ),
        (
            "SASL_PLAINTEXT with SCRAM-SHA-256",
            "SASL_PLAINTEXT",
            sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", password),
        ),
        (
            "SASL_PLAINTEXT with PLAIN",
            "SASL_PLAINTEXT",
            sasl("SASL_PLAINTEXT", "PLAIN", password),
        ),
        (
            "SSL with a client certificate",
            "SSL",
            vec![
                ("security.protocol", "SSL".into()),
                ("ssl.truststore.type", "PEM".into()),
                ("ssl.truststore.location", ca.clone()),
                ("ssl.keystore.type", "PEM".into()),
                ("ssl.keystore.location", env["CLIENT_KEYSTORE_PEM"].clone()),
            ],
        ),
    ];
    for (what, listener, settings) in cases {
        let security = security(&settings).unwrap_or_else(|e| panic!("{what}: {e}"));
        match first_event(&env[listener], security).await {
            Event::Joined(joined) => {
                assert_eq!(&joined.assignment[..], b"yours", "{what}");
                assert_eq!(joined.leader_id, joined.member_id, "{what}");
            }
            other => panic!("{what}: expected to join, got {other:?}"),
        }
    }
    // A wrong password: refused, saying what to check, without the password.
    let wrong = security(&sasl("SASL_PLAINTEXT", "SCRAM-SHA-512", "not-the-password")).unwrap();
    match first_event(&env["SASL_PLAINTEXT"], wrong).await {
        Event::Failed(e) => {
            let message = e.to_string();
            assert!(message.contains("SASL authentication failed"), "{message}");
            assert!(!message.contains("not-the-password"), "{message}");
        }
        other => panic!("a wrong password must fail the member, got {other:?}"),
    }
}
