//! One member of a group, as a tokio task: it finds the group coordinator, joins (offering the
//! owner's protocols and metadata), computes the assignments when the broker makes it leader
//! (through the owner's [`LeaderDuty`]), syncs, and heartbeats until a rebalance, a request to
//! rejoin, or a request to leave. Its owner hears [`Event`]s.
//!
//! Membership rules, as Kafka's classic protocol has them:
//! - A JoinGroup answered `MEMBER_ID_REQUIRED` is sent again at once with the id the broker
//!   gave; `UNKNOWN_MEMBER_ID` starts again with no id.
//! - A heartbeat answered `REBALANCE_IN_PROGRESS` means rejoin (the work keeps running: the
//!   protocol is cooperative, the leader revokes what must move).
//! - The member is out of the group, and says so with [`Event::Lost`] (its owner stops all its
//!   work, which the leader gives to others), when the coordinator no longer knows it
//!   (`UNKNOWN_MEMBER_ID`, `ILLEGAL_GENERATION`), or when no heartbeat has succeeded for the
//!   session timeout: whatever the reason (the coordinator unreachable, or this process paused
//!   and resumed), the coordinator has by then expelled it. The age of the last successful
//!   heartbeat is checked before every heartbeat, so a member resumed after a long pause says
//!   `Lost` before anything else.
//! - Errors that retrying cannot fix (authorization, another protocol in the group, settings)
//!   end with [`Event::Failed`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::wire::{Connection, describe_code};
use super::{Fence, GroupError, GroupSecurity};
use crate::backoff::Backoff;

// Kafka error codes the member acts on.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const UNKNOWN_MEMBER_ID: i16 = 25;
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;

/// How the member joins and how long it waits.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    /// `host:port` of brokers to find the coordinator through.
    pub bootstrap: Vec<String>,
    pub security: GroupSecurity,
    pub group_id: String,
    /// The client id the broker logs.
    pub client_id: String,
    /// The group's protocol type (`connect`).
    pub protocol_type: String,
    /// Without a heartbeat for this long, the coordinator expels the member
    /// (`session.timeout.ms`).
    pub session_timeout: Duration,
    /// How long the coordinator waits for every member to rejoin in a rebalance
    /// (`rebalance.timeout.ms`).
    pub rebalance_timeout: Duration,
    /// Between heartbeats (`heartbeat.interval.ms`).
    pub heartbeat_interval: Duration,
    /// A request other than JoinGroup gets an answer within this, or the connection is
    /// dropped and the coordinator found again.
    pub request_timeout: Duration,
    /// Kept open while the coordinator cannot have expelled this member (see [`Fence`]).
    pub fence: Option<Arc<Fence>>,
}

/// What the member asks of its owner.
pub trait LeaderDuty: Send + Sync + 'static {
    /// The protocols to offer, best first, each with this member's metadata under it; asked
    /// at every join, so the metadata is current.
    fn metadata(&self) -> Vec<(String, Bytes)>;

    /// As leader of `generation`: every member's assignment (by member id) from every member's
    /// metadata (`members`, this one's included) under the `protocol` the broker chose.
    fn assign(
        &self,
        generation: i32,
        leader: &str,
        protocol: &str,
        members: &[(String, Bytes)],
    ) -> Vec<(String, Bytes)>;
}

/// The member joined a generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub generation: i32,
    pub member_id: String,
    pub leader_id: String,
    /// The protocol the broker chose.
    pub protocol: String,
    /// The leader's assignment for this member.
    pub assignment: Bytes,
}

/// What the member tells its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Joined a generation, with this member's assignment.
    Joined(JoinedMember),
    /// Out of the group, for the reason given: stop all work now (the leader gives it to
    /// others). The member rejoins by itself.
    Lost(String),
    /// Cannot go on; the member has stopped.
    Failed(GroupError),
}

enum Command {
    Rejoin,
    Leave,
}

/// The owner's handle on a running member.
pub struct GroupMember {
    commands: mpsc::UnboundedSender<Command>,
    events: mpsc::UnboundedReceiver<Event>,
    task: tokio::task::JoinHandle<()>,
}

impl GroupMember {
    /// Start a member of `config.group_id`; it joins at once.
    pub fn start(config: MemberConfig, duty: Arc<dyn LeaderDuty>) -> Self {
        let (commands, inbox) = mpsc::unbounded_channel();
        let (events_tx, events) = mpsc::unbounded_channel();
        let member = Member {
            config,
            duty,
            inbox,
            events: events_tx,
            coordinator: None,
            member_id: String::new(),
            generation: -1,
            holding: false,
            last_ok: Instant::now(),
            rejoin_requested: false,
        };
        let task = tokio::spawn(member.run());
        Self {
            commands,
            events,
            task,
        }
    }

    /// The next event; `None` once the member has stopped.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// Rejoin now (the owner's metadata changed, or it finished stopping revoked work).
    pub fn rejoin(&self) {
        let _ = self.commands.send(Command::Rejoin);
    }

    /// Leave the group (the coordinator rebalances the others at once instead of waiting for
    /// the session to expire), within `timeout`.
    pub async fn leave(mut self, timeout: Duration) {
        let _ = self.commands.send(Command::Leave);
        // Dropped (aborted) after this, finished or not.
        let _ = tokio::time::timeout(timeout, &mut self.task).await;
    }
}

/// Dropped without [`GroupMember::leave`]: the member stops at once, without a LeaveGroup,
/// as a process that dies does; the coordinator expels it after the session timeout.
impl Drop for GroupMember {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why the heartbeat loop ended.
enum Next {
    Rejoin,
    Lost(String),
    Leave,
}

/// Why a join failed.
enum JoinError {
    /// Try again after a backoff (the coordinator moved or is loading; the connection broke).
    Retry(GroupError),
    /// The owner asked to leave meanwhile.
    Leave,
    /// Cannot go on.
    Fatal(GroupError),
}

struct Member {
    config: MemberConfig,
    duty: Arc<dyn LeaderDuty>,
    inbox: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<Event>,
    /// The connection to the coordinator, once found; dropped after any error on it.
    coordinator: Option<Connection>,
    member_id: String,
    generation: i32,
    /// Whether the owner runs work of a generation (from `Joined` until `Lost`).
    holding: bool,
    /// When the coordinator last confirmed the membership (a sync or a heartbeat).
    last_ok: Instant,
    /// The owner asked to rejoin while a request was out.
    rejoin_requested: bool,
}

impl Member {
    async fn run(mut self) {
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let mut attempt = 0;
        loop {
            self.check_session();
            match self.join().await {
                Ok(joined) => {
                    attempt = 0;
                    self.holding = true;
                    let _ = self.events.send(Event::Joined(joined));
                    match self.heartbeat_until_rejoin().await {
                        Next::Rejoin => {}
                        Next::Lost(reason) => self.lose(reason),
                        Next::Leave => return self.leave().await,
                    }
                }
                Err(JoinError::Leave) => return self.leave().await,
                Err(JoinError::Fatal(e)) => {
                    if self.holding {
                        self.lose(e.to_string());
                    }
                    let _ = self.events.send(Event::Failed(e));
                    return;
                }
                Err(JoinError::Retry(e)) => {
                    let delay = backoff.delay(attempt);
                    attempt = attempt.saturating_add(1);
                    tracing::warn!(group = %self.config.group_id, "cannot join the group yet: {e}; retrying in {delay:?}");
                    self.coordinator = None;
                    tokio::select! {
                        command = self.inbox.recv() => match command {
                            Some(Command::Rejoin) => {}
                            Some(Command::Leave) | None => return self.leave().await,
                        },
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    /// Out of the group after holding work past the session timeout without a confirmation.
    fn check_session(&mut self) {
        if self.holding && self.last_ok.elapsed() > self.config.session_timeout {
            let reason = format!(
                "no heartbeat reached the group coordinator for {} ms (session.timeout.ms is {}): the group has moved this worker's work elsewhere",
                self.last_ok.elapsed().as_millis(),
                self.config.session_timeout.as_millis()
            );
            self.lose(reason);
        }
    }

    /// A request sent at `sent` was answered as a member in good standing: the coordinator
    /// keeps this member at least until `sent` plus the session timeout.
    fn confirmed(&mut self, sent: Instant) {
        self.last_ok = Instant::now();
        if let Some(fence) = &self.config.fence {
            fence.open_until((sent + self.config.session_timeout).into_std());
        }
    }

    fn close_fence(&self) {
        if let Some(fence) = &self.config.fence {
            fence.close();
        }
    }

    fn lose(&mut self, reason: String) {
        self.close_fence();
        self.generation = -1;
        if self.holding {
            // Shut until the owner has stopped the work (it releases the fence).
            if let Some(fence) = &self.config.fence {
                fence.hold();
            }
            self.holding = false;
            let _ = self.events.send(Event::Lost(reason));
        }
    }

    async fn find_coordinator(&self) -> Result<Connection, JoinError> {
        let config = &self.config;
        let mut last = None;
        for addr in &config.bootstrap {
            let mut conn = match Connection::open(
                addr,
                &config.security,
                &config.client_id,
                config.request_timeout,
            )
            .await
            {
                Ok(conn) => conn,
                Err(e @ (GroupError::Auth { .. } | GroupError::Config(_))) => {
                    return Err(JoinError::Fatal(e));
                }
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            let group = StrBytes::from_string(config.group_id.clone());
            // Version 4 asks for a list of keys; earlier versions for one.
            let batched = conn
                .version_of::<FindCoordinatorRequest>()
                .is_ok_and(|v| v >= 4);
            let request = if batched {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![group])
            } else {
                FindCoordinatorRequest::default().with_key(group)
            };
            let (response, version) = match conn.send(&request, config.request_timeout).await {
                Ok(answer) => answer,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            let (code, host, port) = if version >= 4 {
                match response.coordinators.first() {
                    Some(c) => (c.error_code, c.host.to_string(), c.port),
                    None => (COORDINATOR_NOT_AVAILABLE, String::new(), 0),
                }
            } else {
                (
                    response.error_code,
                    response.host.to_string(),
                    response.port,
                )
            };
            if code != 0 {
                return Err(self.classify(code, "FindCoordinator"));
            }
            let coordinator = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            return Connection::open(
                &coordinator,
                &config.security,
                &config.client_id,
                config.request_timeout,
            )
            .await
            .map_err(JoinError::Retry);
        }
        Err(JoinError::Retry(last.unwrap_or_else(|| {
            GroupError::Config("no bootstrap.servers to find the group coordinator through".into())
        })))
    }

    /// What an error code in a group response means for the member.
    fn classify(&self, code: i16, api: &str) -> JoinError {
        let what = format!(
            "{api} for group {} answered {}",
            self.config.group_id,
            describe_code(code)
        );
        match code {
            COORDINATOR_LOAD_IN_PROGRESS
            | COORDINATOR_NOT_AVAILABLE
            | NOT_COORDINATOR
            | REBALANCE_IN_PROGRESS
            | UNKNOWN_MEMBER_ID
            | ILLEGAL_GENERATION => JoinError::Retry(GroupError::Refused { what }),
            INCONSISTENT_GROUP_PROTOCOL => JoinError::Fatal(GroupError::Refused {
                what: format!(
                    "{what}: group {} has members speaking another protocol (Kafka Connect workers, or consumers, with the same group.id?); give this cluster its own group.id",
                    self.config.group_id
                ),
            }),
            _ => JoinError::Fatal(GroupError::Refused {
                what: format!("{what} (check the principal's ACLs on the group and the group.id)"),
            }),
        }
    }

    /// Send `request` to the coordinator (found first if need be) and wait for its answer. A
    /// request to leave meanwhile abandons it (the connection with it); a request to rejoin is
    /// remembered for after it. Any failure drops the connection.
    async fn call<R: kafka_protocol::protocol::Request>(
        &mut self,
        request: R,
        timeout: Duration,
    ) -> Result<R::Response, JoinError> {
        if self.coordinator.is_none() {
            let found = self.find_coordinator().await?;
            self.coordinator = Some(found);
        }
        let Some(conn) = self.coordinator.as_mut() else {
            return Err(JoinError::Retry(GroupError::Refused {
                what: "no group coordinator".into(),
            }));
        };
        let inbox = &mut self.inbox;
        let rejoin = &mut self.rejoin_requested;
        let outcome = {
            let send = conn.send(&request, timeout);
            tokio::pin!(send);
            loop {
                tokio::select! {
                    outcome = &mut send => break Some(outcome),
                    command = inbox.recv() => match command {
                        Some(Command::Rejoin) => *rejoin = true,
                        Some(Command::Leave) | None => break None,
                    },
                }
            }
        };
        match outcome {
            Some(Ok((response, _))) => Ok(response),
            Some(Err(e)) => {
                self.coordinator = None;
                Err(JoinError::Retry(e))
            }
            None => {
                self.coordinator = None;
                Err(JoinError::Leave)
            }
        }
    }

    /// JoinGroup then SyncGroup.
    async fn join(&mut self) -> Result<JoinedMember, JoinError> {
        // This join is the rejoin asked for.
        self.rejoin_requested = false;
        let group = GroupId(StrBytes::from_string(self.config.group_id.clone()));
        let protocols: Vec<JoinGroupRequestProtocol> = self
            .duty
            .metadata()
            .into_iter()
            .map(|(name, metadata)| {
                JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_string(name))
                    .with_metadata(metadata)
            })
            .collect();
        // The coordinator answers once every member has rejoined or the rebalance timeout
        // passed.
        let join_timeout = self.config.rebalance_timeout + self.config.request_timeout;
        let response = loop {
            let request = JoinGroupRequest::default()
                .with_group_id(group.clone())
                .with_session_timeout_ms(millis_i32(self.config.session_timeout))
                .with_rebalance_timeout_ms(millis_i32(self.config.rebalance_timeout))
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_protocol_type(StrBytes::from_string(self.config.protocol_type.clone()))
                .with_protocols(protocols.clone());
            let response = self.call(request, join_timeout).await?;
            match response.error_code {
                0 => break response,
                MEMBER_ID_REQUIRED => self.member_id = response.member_id.to_string(),
                UNKNOWN_MEMBER_ID => {
                    self.member_id.clear();
                    self.lose(format!(
                        "the group coordinator no longer knows member {}",
                        response.member_id
                    ));
                    return Err(self.classify(UNKNOWN_MEMBER_ID, "JoinGroup"));
                }
                code => {
                    if matches!(code, NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE) {
                        self.coordinator = None;
                    }
                    return Err(self.classify(code, "JoinGroup"));
                }
            }
        };
        self.member_id = response.member_id.to_string();
        self.generation = response.generation_id;
        let leader = response.leader.to_string();
        let protocol = response
            .protocol_name
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let assignments = if leader == self.member_id {
            let members: Vec<(String, Bytes)> = response
                .members
                .iter()
                .map(|m| (m.member_id.to_string(), m.metadata.clone()))
                .collect();
            self.duty
                .assign(self.generation, &leader, &protocol, &members)
                .into_iter()
                .map(|(member, bytes)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(member))
                        .with_assignment(bytes)
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut sync = SyncGroupRequest::default()
            .with_group_id(group)
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_assignments(assignments);
        // Version 5 names the protocol (the coordinator checks it).
        if self
            .coordinator
            .as_ref()
            .and_then(|c| c.version_of::<SyncGroupRequest>().ok())
            .is_some_and(|v| v >= 5)
        {
            sync = sync
                .with_protocol_type(Some(StrBytes::from_string(
                    self.config.protocol_type.clone(),
                )))
                .with_protocol_name(Some(StrBytes::from_string(protocol.clone())));
        }
        let sync_sent = Instant::now();
        let response = self.call(sync, join_timeout).await?;
        if response.error_code != 0 {
            if matches!(response.error_code, UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION) {
                if response.error_code == UNKNOWN_MEMBER_ID {
                    self.member_id.clear();
                }
                self.lose(format!(
                    "the group coordinator refused this member's sync: {}",
                    describe_code(response.error_code)
                ));
            }
            return Err(self.classify(response.error_code, "SyncGroup"));
        }
        self.confirmed(sync_sent);
        Ok(JoinedMember {
            generation: self.generation,
            member_id: self.member_id.clone(),
            leader_id: leader,
            protocol,
            assignment: response.assignment,
        })
    }

    async fn heartbeat_until_rejoin(&mut self) -> Next {
        let mut next = Instant::now() + self.config.heartbeat_interval;
        loop {
            tokio::select! {
                command = self.inbox.recv() => match command {
                    Some(Command::Rejoin) => return Next::Rejoin,
                    Some(Command::Leave) | None => return Next::Leave,
                },
                () = tokio::time::sleep_until(next) => {}
            }
            next = Instant::now() + self.config.heartbeat_interval;
            // Before anything else: a member that could not confirm its membership for the
            // session timeout (or was paused that long) is out.
            if self.last_ok.elapsed() > self.config.session_timeout {
                return Next::Lost(format!(
                    "no heartbeat reached the group coordinator for {} ms (session.timeout.ms is {}): the group has moved this worker's work elsewhere",
                    self.last_ok.elapsed().as_millis(),
                    self.config.session_timeout.as_millis()
                ));
            }
            let request = HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(self.config.group_id.clone())))
                .with_generation_id(self.generation)
                .with_member_id(StrBytes::from_string(self.member_id.clone()));
            let timeout = self.config.request_timeout.min(self.config.session_timeout);
            let sent = Instant::now();
            let outcome = self.call(request, timeout).await;
            if self.rejoin_requested {
                return Next::Rejoin;
            }
            match outcome {
                Ok(response) => match response.error_code {
                    0 => self.confirmed(sent),
                    REBALANCE_IN_PROGRESS => {
                        self.confirmed(sent);
                        return Next::Rejoin;
                    }
                    UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION => {
                        if response.error_code == UNKNOWN_MEMBER_ID {
                            self.member_id.clear();
                        }
                        return Next::Lost(format!(
                            "the group coordinator expelled this member ({}): its work moves elsewhere",
                            describe_code(response.error_code)
                        ));
                    }
                    code => {
                        tracing::warn!(group = %self.config.group_id, "heartbeat answered {}; finding the coordinator again", describe_code(code));
                        self.coordinator = None;
                    }
                },
                Err(JoinError::Leave) => return Next::Leave,
                Err(JoinError::Retry(e) | JoinError::Fatal(e)) => {
                    tracing::warn!(group = %self.config.group_id, "heartbeat failed: {e}");
                    self.coordinator = None;
                }
            }
        }
    }

    /// LeaveGroup, best effort: the coordinator would expel the member after the session
    /// timeout anyway.
    async fn leave(mut self) {
        self.close_fence();
        if self.member_id.is_empty() {
            return;
        }
        self.holding = false;
        let timeout = self.config.request_timeout;
        let group = GroupId(StrBytes::from_string(self.config.group_id.clone()));
        let member = StrBytes::from_string(self.member_id.clone());
        let left = async {
            let mut conn = match self.coordinator.take() {
                Some(conn) => conn,
                None => self.find_coordinator().await.map_err(|_| ())?,
            };
            // Version 5 gives a reason (the coordinator logs it).
            let reason = conn
                .version_of::<LeaveGroupRequest>()
                .is_ok_and(|v| v >= 5)
                .then(|| StrBytes::from_static_str("the worker is stopping"));
            let request = LeaveGroupRequest::default()
                .with_group_id(group)
                .with_members(vec![
                    MemberIdentity::default()
                        .with_member_id(member)
                        .with_reason(reason),
                ]);
            conn.send(&request, timeout).await.map_err(|_| ())
        };
        match tokio::time::timeout(timeout, left).await {
            Ok(Ok((response, _))) if response.error_code == 0 => {
                tracing::info!(group = %self.config.group_id, member = %self.member_id, "left the group");
            }
            _ => {
                tracing::warn!(group = %self.config.group_id, "could not leave the group; the coordinator expels this member after session.timeout.ms");
            }
        }
    }
}

fn millis_i32(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}
