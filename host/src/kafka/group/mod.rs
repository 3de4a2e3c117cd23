//! Kafka's classic group membership protocol, spoken by the worker itself: FindCoordinator,
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup, with a protocol type and assignment of the
//! caller's choosing. librdkafka joins groups only as a consumer with its own assignors, so
//! distributed mode's membership (Kafka Connect's `WorkerGroupMember`) cannot go through it.
//!
//! - `wire`: one connection to one broker (TCP, TLS, SASL, framing, API versions).
//! - `auth`: the connection's security settings, from the worker's client settings, and SASL
//!   authentication (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
//! - `member`: the member's state machine (find the coordinator, join, sync, heartbeat,
//!   leave), which hands the leader's duty (computing assignments) to the caller.

pub mod auth;
pub mod fence;
pub mod member;
pub mod wire;

pub use auth::GroupSecurity;
pub use fence::Fence;
pub use member::{Event, GroupMember, JoinedMember, LeaderDuty, MemberConfig};

/// What went wrong talking to the group coordinator, with the broker and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupError {
    /// The broker could not be reached, or the connection broke.
    Io { addr: String, what: String },
    /// The TLS handshake failed.
    Tls { addr: String, what: String },
    /// SASL authentication failed.
    Auth { addr: String, what: String },
    /// The broker said something this client cannot use.
    Protocol { addr: String, what: String },
    /// The broker answered a group request with an error that needs the caller's attention
    /// (not one the member handles itself by rejoining).
    Refused { what: String },
    /// The settings cannot be used for this connection.
    Config(String),
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupError::Io { addr, what } => write!(f, "Kafka broker {addr}: {what}"),
            GroupError::Tls { addr, what } => write!(
                f,
                "Kafka broker {addr}: TLS handshake failed: {what} (check ssl.truststore.* / ssl.ca.location and that the listener speaks TLS)"
            ),
            GroupError::Auth { addr, what } => write!(
                f,
                "Kafka broker {addr}: SASL authentication failed: {what} (check sasl.mechanism and sasl.jaas.config)"
            ),
            GroupError::Protocol { addr, what } => write!(f, "Kafka broker {addr} {what}"),
            GroupError::Refused { what } => write!(f, "{what}"),
            GroupError::Config(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for GroupError {}
