//! A distributed worker's part in its cluster (Kafka Connect's `DistributedHerder` and
//! `WorkerCoordinator`, around the herder's control loop):
//!
//! - membership: the worker is a member of the group through Kafka's group coordinator; as
//!   leader it computes every member's assignment ([`Duty`]); as a member it stops what is
//!   revoked, then runs what it is given, once it has read the config topic as far as the
//!   assignment was made at;
//! - the config log as the herder's actors use it ([`ClusterLog`]): read from the config topic
//!   by every worker, appended by the leader alone (a transactional writer, so a deposed
//!   leader's late writes are fenced); a follower's appends are forwarded to the leader over
//!   its REST API, signed with the session key the leader keeps on the config topic.
//!
//! Invariants: a worker runs work only for the generation it joined, after stopping what that
//! generation revoked (the assignor never gives work to one member before another has given
//! it up); out of the group (session lost, the member fenced itself) it runs nothing; an
//! append is answered with the offsets its records have on the config topic, which every
//! worker reads back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};

use super::assignor::{Assignor, Round};
use super::config_log::KafkaConfigLog;
use super::protocol::{
    Assignment, CONFIG_MISMATCH, NO_ERROR, PROTOCOL_NAME, Work, WorkerState, decode_assignment,
    decode_metadata, encode_assignment, encode_metadata,
};
use super::settings::DistributedSettings;
use super::status_topic::KafkaStatusStore;
use crate::herder::Herder;
use crate::kafka::group::{Event, GroupMember, LeaderDuty, MemberConfig};
use crate::storage::config::CONFLICT;
use crate::storage::{ConfigEvent, ConfigLog, ConfigRecord, ConfigState, ConnectorTaskId};

/// The internal endpoint a follower sends its appends to (on the leader).
pub const APPEND_PATH: &str = "/internal/config/append";

/// Headers of a signed request between workers: when it was signed (ms since the epoch), and
/// the signature (base64 HMAC-SHA256 over method, path, timestamp and body).
pub const TIMESTAMP_HEADER: &str = "x-wasm-connect-timestamp";
pub const SIGNATURE_HEADER: &str = "x-wasm-connect-signature";

/// A signed request older (or newer) than this is refused: a captured one cannot be replayed
/// later.
const SIGNATURE_WINDOW: Duration = Duration::from_secs(300);

/// How long a worker waits after a config event before it checks whether the connectors
/// changed (the records of one change arrive together).
const RECHECK_DELAY: Duration = Duration::from_millis(200);

/// How often the leader checks that it is the config topic's writer with a current key.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(1);

/// A session key is replaced after this long (Kafka Connect's `inter.worker.key.ttl.ms`
/// default).
const SESSION_KEY_TTL: Duration = Duration::from_secs(3600);

/// After `CONFIG_MISMATCH`, members rejoin after this, giving the leader time to catch up.
const MISMATCH_DELAY: Duration = Duration::from_millis(200);

/// How long an append waits for the group to have a leader it can reach before it fails.
const APPEND_PATIENCE: Duration = Duration::from_secs(60);

/// Where this worker stands in the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not in a generation (joining, rebalancing, or out of the group).
    Unknown,
    /// The group's leader: the config topic's writer.
    Leader,
    /// A follower; the leader's REST URL.
    Follower { leader_url: String },
}

/// A distributed worker's cluster state.
pub struct Cluster {
    /// The config topic.
    pub log: Arc<KafkaConfigLog>,
    /// The status topic (its generation follows the group's).
    pub status: Arc<KafkaStatusStore>,
    settings: DistributedSettings,
    role: watch::Sender<Role>,
    http: reqwest::Client,
    /// What `GET /admin/cluster` shows.
    view: Mutex<MembershipView>,
    /// On the leader: the REST URL of the worker each task was given to in its last
    /// assignment (where a request about a task is forwarded).
    task_owners: Arc<Mutex<BTreeMap<ConnectorTaskId, String>>>,
    /// On the leader: when it last stored a session key.
    key_written: Mutex<Option<Instant>>,
    /// Signatures of the internal requests taken within the signature window, with their
    /// times: a request is taken once (a captured one cannot be replayed).
    seen: Mutex<std::collections::VecDeque<(u64, String)>>,
}

/// This worker in its group, as `GET /admin/cluster` shows it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MembershipView {
    /// The group (`group.id`).
    pub group: String,
    /// This worker's advertised REST URL.
    pub url: String,
    /// The generation it last joined (-1: none).
    pub generation: i32,
    /// Whether it leads that generation.
    pub leader: bool,
    /// The leader's REST URL.
    pub leader_url: Option<String>,
    /// The connectors (instances) and tasks it runs.
    pub connectors: Vec<String>,
    pub tasks: Vec<String>,
}

/// Why an append did not go through: worth another try once the group settles, or not.
enum AppendError {
    Retry(String),
    Final(String),
}

impl Cluster {
    /// The cluster state over the opened topics.
    pub fn new(
        log: Arc<KafkaConfigLog>,
        status: Arc<KafkaStatusStore>,
        settings: DistributedSettings,
    ) -> Result<Arc<Self>, String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("cannot make the HTTP client for requests to the leader: {e}"))?;
        Ok(Arc::new(Self {
            log,
            status,
            view: Mutex::new(MembershipView {
                group: settings.group_id.clone(),
                generation: -1,
                ..MembershipView::default()
            }),
            role: watch::Sender::new(Role::Unknown),
            http,
            settings,
            task_owners: Arc::default(),
            key_written: Mutex::new(None),
            seen: Mutex::new(std::collections::VecDeque::new()),
        }))
    }

    /// The distributed settings.
    pub fn settings(&self) -> &DistributedSettings {
        &self.settings
    }

    /// This worker in its group now.
    pub fn membership(&self) -> MembershipView {
        lock(&self.view).clone()
    }

    /// Record what this worker runs in `generation` (-1: out of the group).
    fn show(&self, generation: i32, leader_url: Option<String>, work: &Work) {
        let mut view = lock(&self.view);
        view.generation = generation;
        view.leader = self.role() == Role::Leader;
        view.leader_url = leader_url;
        view.connectors = work.connectors.iter().cloned().collect();
        view.tasks = work.tasks.iter().map(|t| t.to_string()).collect();
    }

    /// On the leader: the REST URL of the worker task `id` runs on, as of the last assignment.
    pub fn owner_of(&self, id: &ConnectorTaskId) -> Option<String> {
        lock(&self.task_owners).get(id).cloned()
    }

    /// Send an operator's `POST` on to another worker (with the caller's `Authorization`
    /// header), returning its status and body.
    pub async fn forward_post(
        &self,
        url: &str,
        authorization: Option<&str>,
    ) -> Result<(u16, String), String> {
        let mut request = self.http.post(url);
        if let Some(auth) = authorization {
            request = request.header(reqwest::header::AUTHORIZATION, auth);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("cannot reach the worker at {url}: {e}"))?;
        let status = response.status().as_u16();
        Ok((status, response.text().await.unwrap_or_default()))
    }

    /// Where this worker stands now.
    pub fn role(&self) -> Role {
        self.role.borrow().clone()
    }

    /// The config topic's transactional id: one per cluster, so each new leader fences the one
    /// before.
    fn transactional_id(&self) -> String {
        format!("wasm-connect-cluster-{}", self.settings.group_id)
    }

    /// Append `records` through the leader: directly when this worker leads, else forwarded.
    /// While the group rebalances (or the leader changes) it waits and tries again, up to
    /// [`APPEND_PATIENCE`].
    async fn append(&self, records: Vec<ConfigRecord>) -> Result<Vec<ConfigEvent>, String> {
        let deadline = tokio::time::Instant::now() + APPEND_PATIENCE;
        let mut roles = self.role.subscribe();
        loop {
            let role = roles.borrow_and_update().clone();
            let outcome = match role {
                Role::Leader if self.log.is_writer() => {
                    match self
                        .log
                        .append_checked(records.clone(), |s| creation_check(s, &records))
                        .await
                    {
                        Ok(events) => Ok(events),
                        Err(e) if e.starts_with(CONFLICT) => Err(AppendError::Final(e)),
                        Err(e) => Err(AppendError::Retry(e)),
                    }
                }
                Role::Leader | Role::Unknown => Err(AppendError::Retry(
                    "the workers' group is rebalancing".into(),
                )),
                Role::Follower { leader_url } => self.forward(&leader_url, &records).await,
            };
            match outcome {
                Ok(events) => return Ok(events),
                Err(AppendError::Final(e)) => return Err(e),
                Err(AppendError::Retry(e)) => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(format!(
                            "{e} (tried for {} s; is the workers' group stable?)",
                            APPEND_PATIENCE.as_secs()
                        ));
                    }
                    tracing::debug!("an append to the config topic waits: {e}");
                    // Again when the role changes, or after a short while.
                    let _ = tokio::time::timeout(Duration::from_millis(500), roles.changed()).await;
                }
            }
        }
    }

    /// Send `records` to the leader at `leader_url` to append.
    async fn forward(
        &self,
        leader_url: &str,
        records: &[ConfigRecord],
    ) -> Result<Vec<ConfigEvent>, AppendError> {
        let Some(key) = self.log.session_key() else {
            return Err(AppendError::Retry(
                "the leader has not stored a session key yet".into(),
            ));
        };
        let body = serde_json::to_vec(&serde_json::json!({ "records": records }))
            .map_err(|e| AppendError::Final(e.to_string()))?;
        let timestamp = now_ms().to_string();
        let signature = sign(&key, "POST", APPEND_PATH, &timestamp, &body)
            .map_err(|e| AppendError::Final(format!("cannot sign the request: {e}")))?;
        let url = format!("{}{APPEND_PATH}", leader_url.trim_end_matches('/'));
        let response = self
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(TIMESTAMP_HEADER, &timestamp)
            .header(SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await
            .map_err(|e| AppendError::Retry(format!("cannot reach the leader at {url}: {e}")))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let message = || {
            serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
                .unwrap_or_else(|| text.clone())
        };
        match status.as_u16() {
            200 => {
                let offsets: Vec<u64> = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| serde_json::from_value(v.get("offsets")?.clone()).ok())
                    .ok_or_else(|| {
                        AppendError::Final(format!("the leader's answer is not readable: {text}"))
                    })?;
                if offsets.len() != records.len() {
                    return Err(AppendError::Final(format!(
                        "the leader answered {} offsets for {} records",
                        offsets.len(),
                        records.len()
                    )));
                }
                Ok(offsets
                    .into_iter()
                    .zip(records.iter().cloned())
                    .map(|(offset, record)| ConfigEvent { offset, record })
                    .collect())
            }
            // Not the leader (any more), or the session key changed: the group settles.
            403 | 503 => Err(AppendError::Retry(format!(
                "the leader at {leader_url} refused: {}",
                message()
            ))),
            409 => Err(AppendError::Final(format!("{CONFLICT}{}", message()))),
            _ => Err(AppendError::Final(message())),
        }
    }

    /// On the leader: append `body`'s records for a follower, once its signature checks out.
    /// Errors carry the HTTP status to answer.
    pub async fn append_forwarded(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<Vec<u64>, (u16, String)> {
        let Some(key) = self.log.session_key() else {
            return Err((503, "this worker has no session key yet".into()));
        };
        let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
            return Err((
                403,
                format!("{APPEND_PATH} is for the cluster's workers: the request is not signed"),
            ));
        };
        let age = timestamp
            .parse::<u64>()
            .map(|t| now_ms().abs_diff(t))
            .unwrap_or(u64::MAX);
        if age > SIGNATURE_WINDOW.as_millis() as u64 {
            return Err((
                403,
                "the request's signature is too old (or the workers' clocks differ by minutes)"
                    .into(),
            ));
        }
        let expected = sign(&key, "POST", APPEND_PATH, timestamp, body)
            .map_err(|e| (500, format!("cannot check the signature: {e}")))?;
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            expected.as_bytes(),
            signature.as_bytes(),
        )) {
            return Err((
                403,
                "the request's signature does not match the session key".into(),
            ));
        }
        if self.role() != Role::Leader || !self.log.is_writer() {
            return Err((503, "this worker is not the group's leader".into()));
        }
        {
            let now = now_ms();
            let window = SIGNATURE_WINDOW.as_millis() as u64;
            let mut seen = lock(&self.seen);
            while seen
                .front()
                .is_some_and(|(at, _)| now.saturating_sub(*at) > window)
            {
                seen.pop_front();
            }
            if seen.iter().any(|(_, s)| s == signature) {
                return Err((403, "this signed request was already taken".into()));
            }
            seen.push_back((now, signature.to_owned()));
        }
        #[derive(serde::Deserialize)]
        struct Body {
            records: Vec<ConfigRecord>,
        }
        let Body { records } = serde_json::from_slice(body)
            .map_err(|e| (400, format!("the records are not readable: {e}")))?;
        let events = self
            .log
            .append_checked(records.clone(), |s| creation_check(s, &records))
            .await
            .map_err(|e| match e.strip_prefix(CONFLICT) {
                Some(conflict) => (409, conflict.to_owned()),
                None => (500, e),
            })?;
        Ok(events.into_iter().map(|e| e.offset).collect())
    }

    /// Be a member of the group until `stop` turns true, running what the assignments give
    /// this worker through `herder`; `url` is this worker's advertised REST URL. Returns an
    /// error if the membership cannot go on (the group is another runtime's, the settings are
    /// refused).
    pub async fn run(
        self: Arc<Self>,
        herder: Arc<Herder>,
        member: MemberConfig,
        url: String,
        mut stop: watch::Receiver<bool>,
    ) -> Result<(), String> {
        let duty = Arc::new(Duty {
            log: Arc::clone(&self.log),
            url: url.clone(),
            running: Mutex::new(None),
            assignor: Mutex::new(Assignor::new(self.settings.scheduled_rebalance_max_delay)),
            task_owners: Arc::clone(&self.task_owners),
            last_completed: Mutex::new(None),
            configured: Mutex::new(BTreeMap::new()),
            epoch: Instant::now(),
        });
        lock(&self.view).url = url.clone();
        let mut group = GroupMember::start(member, Arc::clone(&duty) as Arc<dyn LeaderDuty>);
        let mut events = self.log.subscribe();
        let mut current = Work::default();
        let mut rejoin_at: Option<tokio::time::Instant> = None;
        // When the worker next compares the connectors with those of its last assignment: a
        // short while after a config event, so the records of one change make one rebalance.
        let mut recheck_at: Option<tokio::time::Instant> = None;
        // The connectors and their task counts as this worker had read them when its last
        // assignment came. Every worker reads the config topic, so every worker, not only the
        // leader, rejoins when they change (as Kafka Connect's do): the rebalance then waits
        // for no member's next heartbeat.
        let mut joined_with: BTreeMap<String, u32> = BTreeMap::new();
        let mut upkeep = tokio::time::interval(UPKEEP_INTERVAL);
        upkeep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        break;
                    }
                }
                event = group.next_event() => match event {
                    Some(Event::Joined(joined)) => {
                        rejoin_at = None;
                        let assignment = match decode_assignment(&joined.assignment) {
                            Ok(a) => a,
                            Err(e) => {
                                tracing::error!("the leader's assignment is not readable ({e}); running nothing and rejoining");
                                self.lose(&herder, &duty, &mut current).await;
                                rejoin_at = Some(tokio::time::Instant::now() + Duration::from_secs(1));
                                continue;
                            }
                        };
                        let leader = joined.leader_id == joined.member_id;
                        self.take_role(leader, &assignment).await;
                        if leader {
                            // Records read while this worker became leader may have changed
                            // the connectors its assignment was computed from.
                            recheck_at = Some(tokio::time::Instant::now() + RECHECK_DELAY);
                        }
                        if assignment.error == CONFIG_MISMATCH {
                            tracing::info!(offset = assignment.config_offset, "the leader has not read the config topic as far as this worker; rejoining once it has");
                            // The leader catches up meanwhile (its reader never stops).
                            rejoin_at = Some(tokio::time::Instant::now() + MISMATCH_DELAY);
                            continue;
                        }
                        if !self.read_to(assignment.config_offset).await {
                            tracing::warn!(offset = assignment.config_offset, "the config topic was not read as far as the assignment within {} s; rejoining instead of running it", super::follower::READ_TIMEOUT.as_secs());
                            rejoin_at = Some(tokio::time::Instant::now() + Duration::from_secs(1));
                            continue;
                        }
                        joined_with = configured(&self.log.snapshot());
                        self.status.set_generation(joined.generation);
                        current.remove(&assignment.revoked);
                        current.add(&assignment.assigned);
                        // Said before the work starts: a rejoin meanwhile (another rebalance)
                        // reports what this worker is about to run, not what it ran, so the
                        // leader never hands it to another member at the same time.
                        duty.completed(joined.generation, Assignment {
                            assigned: current.clone(),
                            revoked: Work::default(),
                            ..assignment.clone()
                        });
                        tracing::info!(
                            generation = joined.generation,
                            leader,
                            assigned = assignment.assigned.len(),
                            revoked = assignment.revoked.len(),
                            running = current.len(),
                            "joined the workers' group"
                        );
                        herder.assign(current.clone(), self.log.snapshot().offset).await;
                        self.show(joined.generation, Some(assignment.leader_url.clone()), &current);
                        if !assignment.revoked.is_empty() {
                            // What was revoked has stopped: the leader may give it away now.
                            group.rejoin();
                        } else if assignment.delay_ms > 0 {
                            rejoin_at = Some(tokio::time::Instant::now() + Duration::from_millis(assignment.delay_ms as u64));
                        }
                    }
                    Some(Event::Lost(why)) => {
                        tracing::warn!("out of the workers' group ({why}): stopping every connector and task here until it rejoins");
                        self.lose(&herder, &duty, &mut current).await;
                    }
                    Some(Event::Failed(e)) => {
                        self.lose(&herder, &duty, &mut current).await;
                        return Err(format!("the worker cannot be a member of group {}: {e}", self.settings.group_id));
                    }
                    None => {
                        self.lose(&herder, &duty, &mut current).await;
                        return Err("the group membership stopped".into());
                    }
                },
                () = async { tokio::time::sleep_until(rejoin_at.unwrap_or_else(tokio::time::Instant::now)).await }, if rejoin_at.is_some() => {
                    rejoin_at = None;
                    group.rejoin();
                }
                _ = upkeep.tick() => self.keep_leading().await,
                Some(_) = events.recv() => {
                    if self.role() != Role::Unknown && recheck_at.is_none() {
                        recheck_at = Some(tokio::time::Instant::now() + RECHECK_DELAY);
                    }
                }
                () = async { tokio::time::sleep_until(recheck_at.unwrap_or_else(tokio::time::Instant::now)).await }, if recheck_at.is_some() => {
                    recheck_at = None;
                    // A rebalance when the connectors or their task counts change: the leader
                    // compares them with those it last assigned, a follower with those it had
                    // read when its assignment came.
                    let changed = match self.role() {
                        Role::Leader => duty.config_changed(),
                        Role::Follower { .. } => configured(&self.log.snapshot()) != joined_with,
                        Role::Unknown => false,
                    };
                    if changed {
                        tracing::info!("the connectors or their task counts changed; rebalancing");
                        group.rejoin();
                    }
                }
            }
        }
        // Stopped by the owner (the worker is stopping, its work already stopped): leave, so
        // the others rebalance at once.
        self.role.send_replace(Role::Unknown);
        group.leave(Duration::from_secs(5)).await;
        Ok(())
    }

    /// Out of the group: run nothing, and stop writing.
    async fn lose(&self, herder: &Herder, duty: &Duty, current: &mut Work) {
        self.role.send_replace(Role::Unknown);
        self.log.stop_writing();
        *current = Work::default();
        duty.lost();
        herder.assign(Work::default(), 0).await;
        self.show(-1, None, current);
        // The member held the fence shut when it lost the group; with everything stopped,
        // sends may go out again once it is confirmed in a new generation.
        if let Some(fence) = herder.fence() {
            fence.release();
        }
    }

    /// Take the role the new generation gives this worker: the leader becomes the config
    /// topic's writer (fencing the one before) and keeps a session key on it.
    async fn take_role(&self, leader: bool, assignment: &Assignment) {
        if leader {
            let was_leader = self.role() == Role::Leader;
            self.role.send_replace(Role::Leader);
            if !was_leader {
                // A new leader writes a new key (the old leader's may be known to whoever
                // fenced it out).
                lock(&self.key_written).take();
            }
            self.keep_leading().await;
        } else {
            self.log.stop_writing();
            self.role.send_replace(Role::Follower {
                leader_url: assignment.leader_url.clone(),
            });
        }
    }

    /// Wait until this worker has read the config topic up to `offset` (bounded: the reader
    /// keeps up unless the broker does not answer, which the membership notices too).
    async fn read_to(&self, offset: i64) -> bool {
        let deadline = tokio::time::Instant::now() + super::follower::READ_TIMEOUT;
        while self.log.position() < offset {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// The leader's upkeep: be the config topic's writer (claimed again after a failure,
    /// fencing whoever held it), and keep a session key there that is no older than
    /// [`SESSION_KEY_TTL`].
    async fn keep_leading(&self) {
        if self.role() != Role::Leader {
            return;
        }
        if !self.log.is_writer() {
            let log = Arc::clone(&self.log);
            let id = self.transactional_id();
            let became = tokio::task::spawn_blocking(move || log.become_writer(&id))
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r);
            if let Err(e) = became {
                tracing::error!("leading the group, but {e}; trying again");
                return;
            }
            lock(&self.key_written).take();
        }
        let due = lock(&self.key_written).is_none_or(|at| at.elapsed() >= SESSION_KEY_TTL);
        if due {
            let mut key = [0u8; 32];
            let stored = match openssl::rand::rand_bytes(&mut key) {
                Ok(()) => self.log.write_session_key(&key).await,
                Err(e) => Err(format!("cannot make a session key: {e}")),
            };
            match stored {
                Ok(()) => *lock(&self.key_written) = Some(Instant::now()),
                Err(e) => tracing::error!("{e}; trying again"),
            }
        }
    }
}

/// Refuse (as a conflict) the creation of a connector `state` already has: a config with its
/// first target state, which only a creation writes, for a name that exists lost a race with
/// another worker's creation.
fn creation_check(state: &ConfigState, records: &[ConfigRecord]) -> Result<(), String> {
    for pair in records.windows(2) {
        if let [
            ConfigRecord::Connector { name, .. },
            ConfigRecord::Target { name: target, .. },
        ] = pair
            && name == target
            && state.connectors.contains_key(name)
        {
            return Err(format!("{CONFLICT}Connector {name} already exists"));
        }
    }
    Ok(())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The signature of a request between workers: base64 HMAC-SHA256 under `key` of its method,
/// path, timestamp and body.
fn sign(
    key: &[u8],
    method: &str,
    path: &str,
    timestamp: &str,
    body: &[u8],
) -> Result<String, String> {
    use base64::Engine;
    let key = openssl::pkey::PKey::hmac(key).map_err(|e| e.to_string())?;
    let mut signer = openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), &key)
        .map_err(|e| e.to_string())?;
    for part in [
        method.as_bytes(),
        b"\n",
        path.as_bytes(),
        b"\n",
        timestamp.as_bytes(),
        b"\n",
        body,
    ] {
        signer.update(part).map_err(|e| e.to_string())?;
    }
    let mac = signer.sign_to_vec().map_err(|e| e.to_string())?;
    Ok(base64::engine::general_purpose::STANDARD.encode(mac))
}

/// What the member asks of this worker: its join metadata, and as leader the assignment.
struct Duty {
    log: Arc<KafkaConfigLog>,
    url: String,
    /// Everything this worker runs, as of the last generation it completed.
    running: Mutex<Option<Assignment>>,
    assignor: Mutex<Assignor>,
    last_completed: Mutex<Option<i32>>,
    /// The connectors and task counts the last assignment (made here) was computed from.
    configured: Mutex<BTreeMap<String, u32>>,
    /// Where each task goes, as of the last assignment made here.
    task_owners: Arc<Mutex<BTreeMap<ConnectorTaskId, String>>>,
    epoch: Instant,
}

impl Duty {
    fn completed(&self, generation: i32, running: Assignment) {
        *lock(&self.running) = Some(running);
        *lock(&self.last_completed) = Some(generation);
    }

    fn lost(&self) {
        *lock(&self.running) = None;
        *lock(&self.last_completed) = None;
    }

    /// Whether the connectors or task counts differ from those of the last assignment made
    /// here.
    fn config_changed(&self) -> bool {
        configured(&self.log.snapshot()) != *lock(&self.configured)
    }
}

/// Every connector with its task count (0 until its split is stored): what the assignor
/// spreads.
fn configured(state: &ConfigState) -> BTreeMap<String, u32> {
    state
        .connectors
        .iter()
        .map(|(name, c)| (name.clone(), c.tasks.as_ref().map_or(0, |t| t.len() as u32)))
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LeaderDuty for Duty {
    fn metadata(&self) -> Vec<(String, Bytes)> {
        let state = WorkerState {
            url: self.url.clone(),
            config_offset: self.log.position(),
            running: lock(&self.running).clone(),
        };
        vec![(PROTOCOL_NAME.to_owned(), encode_metadata(&state))]
    }

    fn assign(
        &self,
        generation: i32,
        leader: &str,
        _protocol: &str,
        members: &[(String, Bytes)],
    ) -> Vec<(String, Bytes)> {
        let mut states = BTreeMap::new();
        for (member, metadata) in members {
            match decode_metadata(metadata) {
                Ok(state) => {
                    states.insert(member.clone(), state);
                }
                Err(e) => {
                    tracing::warn!(member = %member, "a member's join metadata is not readable ({e}); it is taken to run nothing");
                    states.insert(
                        member.clone(),
                        WorkerState {
                            url: String::new(),
                            config_offset: -1,
                            running: None,
                        },
                    );
                }
            }
        }
        // The state first, then the position: the position covers everything the state holds.
        let state = self.log.snapshot();
        let position = self.log.position();
        let ahead = states.values().map(|s| s.config_offset).max().unwrap_or(-1);
        let base = Assignment {
            error: NO_ERROR,
            leader: leader.to_owned(),
            leader_url: self.url.clone(),
            config_offset: position,
            assigned: Work::default(),
            revoked: Work::default(),
            delay_ms: 0,
        };
        if ahead > position {
            tracing::info!(
                read = position,
                member_read = ahead,
                "a member has read the config topic further than this leader; every member rejoins once the leader has caught up"
            );
            let mismatch = Assignment {
                error: CONFIG_MISMATCH,
                ..base
            };
            return members
                .iter()
                .map(|(m, _)| (m.clone(), encode_assignment(&mismatch)))
                .collect();
        }
        let configured = configured(&state);
        let running: BTreeMap<String, Work> = states
            .iter()
            .map(|(m, s)| {
                let work = s
                    .running
                    .as_ref()
                    .map(|a| a.assigned.clone())
                    .unwrap_or_default();
                (m.clone(), work)
            })
            .collect();
        let plan = lock(&self.assignor).assign(&Round {
            members: &running,
            configured: &configured,
            last_completed_generation: *lock(&self.last_completed),
            generation,
            now_ms: self.epoch.elapsed().as_millis() as u64,
        });
        *lock(&self.configured) = configured;
        let mut owners = BTreeMap::new();
        for (member, running) in &running {
            let mut work = running.clone();
            if let Some(revoked) = plan.revoked.get(member) {
                work.remove(revoked);
            }
            if let Some(assigned) = plan.assigned.get(member) {
                work.add(assigned);
            }
            let url = &states[member].url;
            for task in work.tasks {
                owners.insert(task, url.clone());
            }
        }
        *lock(&self.task_owners) = owners;
        let delay_ms = i32::try_from(plan.delay.as_millis()).unwrap_or(i32::MAX);
        members
            .iter()
            .map(|(member, _)| {
                let assignment = Assignment {
                    assigned: plan.assigned.get(member).cloned().unwrap_or_default(),
                    revoked: plan.revoked.get(member).cloned().unwrap_or_default(),
                    delay_ms,
                    ..base.clone()
                };
                (member.clone(), encode_assignment(&assignment))
            })
            .collect()
    }
}

/// The config log as a distributed worker's actors use it: read from the config topic,
/// appended through the group's leader.
pub struct ClusterLog(pub Arc<Cluster>);

impl ConfigLog for ClusterLog {
    fn read(&self) -> Result<ConfigState, String> {
        self.0.log.read()
    }

    fn current(&self) -> Result<ConfigState, String> {
        Ok(self.0.log.snapshot())
    }

    fn append(
        &self,
        records: Vec<ConfigRecord>,
    ) -> BoxFuture<'_, Result<Vec<ConfigEvent>, String>> {
        Box::pin(self.0.append(records))
    }

    fn subscribe(&self) -> mpsc::UnboundedReceiver<ConfigEvent> {
        self.0.log.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_covers_method_path_time_and_body() {
        let key = b"k".repeat(32);
        let base = sign(&key, "POST", APPEND_PATH, "1", b"{}").unwrap();
        assert_eq!(base, sign(&key, "POST", APPEND_PATH, "1", b"{}").unwrap());
        for other in [
            sign(&key, "PUT", APPEND_PATH, "1", b"{}"),
            sign(&key, "POST", "/other", "1", b"{}"),
            sign(&key, "POST", APPEND_PATH, "2", b"{}"),
            sign(&key, "POST", APPEND_PATH, "1", b"{ }"),
            sign(b"other", "POST", APPEND_PATH, "1", b"{}"),
        ] {
            assert_ne!(base, other.unwrap());
        }
    }
}
