//! What workers tell each other through the group coordinator: each member's join metadata
//! (its REST URL, how far it has read the config topic, and what it runs) and the leader's
//! assignment to each member (what to start, what to stop, when to rejoin).
//!
//! The byte layouts are Kafka Connect's incremental cooperative ones
//! (`IncrementalCooperativeConnectProtocol`, versions 1 and 2: Kafka protocol primitives,
//! big-endian, no tags), so Kafka's own tools can read the group; the protocol *name* is ours
//! ([`PROTOCOL_NAME`]), so a Java worker that joins the group by mistake is refused by the
//! broker (no common protocol) instead of mixing two runtimes' assignments.
//!
//! Invariants: decoding never panics on any input (the bytes come from other processes through
//! the broker); a missing trailing field takes its default, as Connect's tolerant schemas do, so
//! a shorter (older) layout still reads; a task id of `-1` in an assignment entry means the
//! connector instance itself.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::storage::ConnectorTaskId;

/// The group's protocol type, as Kafka Connect's.
pub const PROTOCOL_TYPE: &str = "connect";

/// The protocol name wasm-connect workers offer. The metadata under it is Connect's `sessioned`
/// layout (version 2).
pub const PROTOCOL_NAME: &str = "wasm-connect-v1";

/// The metadata and assignment version written.
const VERSION: i16 = 2;

/// In an assignment entry's task list: the connector instance itself.
const CONNECTOR_TASK: i32 = -1;

/// An assignment's error code: none.
pub const NO_ERROR: i16 = 0;

/// An assignment's error code: the leader had not read the config topic as far as a member
/// had; every member rejoins once the leader has caught up (Kafka Connect's `CONFIG_MISMATCH`).
pub const CONFIG_MISMATCH: i16 = 1;

/// A set of connectors (their instances) and tasks: what a worker runs, is given or gives up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Work {
    pub connectors: BTreeSet<String>,
    pub tasks: BTreeSet<ConnectorTaskId>,
}

impl Work {
    /// Nothing.
    pub fn is_empty(&self) -> bool {
        self.connectors.is_empty() && self.tasks.is_empty()
    }

    /// How many connectors and tasks in all.
    pub fn len(&self) -> usize {
        self.connectors.len() + self.tasks.len()
    }

    /// Add everything `other` holds.
    pub fn add(&mut self, other: &Work) {
        self.connectors.extend(other.connectors.iter().cloned());
        self.tasks.extend(other.tasks.iter().cloned());
    }

    /// Remove everything `other` holds.
    pub fn remove(&mut self, other: &Work) {
        self.connectors.retain(|c| !other.connectors.contains(c));
        self.tasks.retain(|t| !other.tasks.contains(t));
    }
}

/// One member's join metadata: Connect's `ExtendedWorkerState`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerState {
    /// The member's advertised REST URL (where followers forward requests to a leader).
    pub url: String,
    /// The config topic offset the member has read up to (the next offset to read; -1 when
    /// it has read nothing).
    pub config_offset: i64,
    /// What it runs now: its last assignment, all of it (not only the last increment), or
    /// `None` when it runs nothing it was assigned (first join, or after it fenced itself).
    pub running: Option<Assignment>,
}

/// The leader's assignment to one member: Connect's `ExtendedAssignment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// [`NO_ERROR`] or [`CONFIG_MISMATCH`].
    pub error: i16,
    /// The leader's member id and REST URL.
    pub leader: String,
    pub leader_url: String,
    /// The config topic offset the assignment was computed at: a member starts the work only
    /// once it has read the config topic exactly this far.
    pub config_offset: i64,
    /// What to start (only what is new to this member, except in a [`WorkerState`], where it
    /// is everything the member runs).
    pub assigned: Work,
    /// What to stop before anything else (it moves elsewhere next round).
    pub revoked: Work,
    /// When non-zero: rejoin after this many milliseconds (work that a departed member held
    /// waits for it this long).
    pub delay_ms: i32,
}

impl Assignment {
    /// Whether the leader refused to assign (see [`CONFIG_MISMATCH`]).
    pub fn failed(&self) -> bool {
        self.error != NO_ERROR
    }
}

/// Bytes that are not what the protocol says: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed Connect group data: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// Encode `state` as join metadata.
pub fn encode_metadata(state: &WorkerState) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(VERSION);
    put_string(&mut buf, &state.url);
    buf.put_i64(state.config_offset);
    match &state.running {
        Some(assignment) => {
            let bytes = encode_assignment(assignment);
            buf.put_i32(len_i32(bytes.len()));
            buf.put_slice(&bytes);
        }
        None => buf.put_i32(-1),
    }
    buf.freeze()
}

/// Decode join metadata (any version: a version-0 member has no `running`).
pub fn decode_metadata(mut bytes: &[u8]) -> Result<WorkerState, DecodeError> {
    let buf = &mut bytes;
    let version = get_i16(buf, "version")?;
    if version < 0 {
        return Err(DecodeError(format!("metadata version {version}")));
    }
    let url = get_string(buf, "url")?;
    let config_offset = get_i64(buf, "config-offset")?;
    let running = if buf.has_remaining() {
        match get_nullable_bytes(buf, "allocation")? {
            Some(inner) => Some(decode_assignment(&inner)?),
            None => None,
        }
    } else {
        None
    };
    Ok(WorkerState {
        url,
        config_offset,
        running,
    })
}

/// Encode `assignment` for SyncGroup.
pub fn encode_assignment(assignment: &Assignment) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(VERSION);
    buf.put_i16(assignment.error);
    put_string(&mut buf, &assignment.leader);
    put_string(&mut buf, &assignment.leader_url);
    buf.put_i64(assignment.config_offset);
    put_work(&mut buf, &assignment.assigned);
    put_work(&mut buf, &assignment.revoked);
    buf.put_i32(assignment.delay_ms);
    buf.freeze()
}

/// Decode an assignment (any version: version 0 has no `revoked` and no `delay`).
pub fn decode_assignment(mut bytes: &[u8]) -> Result<Assignment, DecodeError> {
    let buf = &mut bytes;
    let version = get_i16(buf, "version")?;
    if version < 0 {
        return Err(DecodeError(format!("assignment version {version}")));
    }
    let error = get_i16(buf, "error")?;
    let leader = get_string(buf, "leader")?;
    let leader_url = get_string(buf, "leader-url")?;
    let config_offset = get_i64(buf, "config-offset")?;
    let assigned = get_work(buf, "assignment")?;
    let revoked = get_work(buf, "revoked")?;
    let delay_ms = if buf.remaining() >= 4 {
        buf.get_i32()
    } else {
        0
    };
    Ok(Assignment {
        error,
        leader,
        leader_url,
        config_offset,
        assigned,
        revoked,
        delay_ms,
    })
}

fn len_i32(len: usize) -> i32 {
    i32::try_from(len).unwrap_or(i32::MAX)
}

fn put_string(buf: &mut BytesMut, s: &str) {
    // Names and URLs are far below 32 KiB; a longer one is cut rather than made unreadable.
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    buf.put_i16(bytes.len() as i16);
    buf.put_slice(bytes);
}

/// Connectors and tasks as Connect groups them: one entry per connector name, its task ids,
/// `-1` for the connector itself.
fn put_work(buf: &mut BytesMut, work: &Work) {
    let mut grouped: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for connector in &work.connectors {
        grouped
            .entry(connector.as_str())
            .or_default()
            .push(CONNECTOR_TASK);
    }
    for task in &work.tasks {
        grouped
            .entry(task.connector.as_str())
            .or_default()
            .push(i32::try_from(task.task).unwrap_or(i32::MAX));
    }
    buf.put_i32(len_i32(grouped.len()));
    for (connector, ids) in grouped {
        put_string(buf, connector);
        buf.put_i32(len_i32(ids.len()));
        for id in ids {
            buf.put_i32(id);
        }
    }
}

fn need(buf: &&[u8], n: usize, field: &str) -> Result<(), DecodeError> {
    if buf.remaining() < n {
        return Err(DecodeError(format!(
            "{field}: {n} bytes needed, {} left",
            buf.remaining()
        )));
    }
    Ok(())
}

fn get_i16(buf: &mut &[u8], field: &str) -> Result<i16, DecodeError> {
    need(buf, 2, field)?;
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut &[u8], field: &str) -> Result<i32, DecodeError> {
    need(buf, 4, field)?;
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut &[u8], field: &str) -> Result<i64, DecodeError> {
    need(buf, 8, field)?;
    Ok(buf.get_i64())
}

fn get_string(buf: &mut &[u8], field: &str) -> Result<String, DecodeError> {
    let len = get_i16(buf, field)?;
    let len = usize::try_from(len).map_err(|_| DecodeError(format!("{field}: length {len}")))?;
    need(buf, len, field)?;
    let s = std::str::from_utf8(&buf[..len])
        .map_err(|e| DecodeError(format!("{field}: {e}")))?
        .to_owned();
    buf.advance(len);
    Ok(s)
}

fn get_nullable_bytes(buf: &mut &[u8], field: &str) -> Result<Option<Vec<u8>>, DecodeError> {
    let len = get_i32(buf, field)?;
    if len < 0 {
        return Ok(None);
    }
    let len = len as usize;
    need(buf, len, field)?;
    let bytes = buf[..len].to_vec();
    buf.advance(len);
    Ok(Some(bytes))
}

/// An array count, checked against what is left (each element takes at least `min` bytes), so
/// a hostile count cannot make the reader allocate without bound.
fn get_count(buf: &mut &[u8], min: usize, field: &str) -> Result<Option<usize>, DecodeError> {
    let count = get_i32(buf, field)?;
    if count < 0 {
        return Ok(None);
    }
    let count = count as usize;
    if count.saturating_mul(min) > buf.remaining() {
        return Err(DecodeError(format!(
            "{field}: {count} entries do not fit in {} bytes",
            buf.remaining()
        )));
    }
    Ok(Some(count))
}

/// A (nullable, possibly missing) array of connector entries.
fn get_work(buf: &mut &[u8], field: &str) -> Result<Work, DecodeError> {
    let mut work = Work::default();
    if !buf.has_remaining() {
        return Ok(work);
    }
    let Some(entries) = get_count(buf, 6, field)? else {
        return Ok(work);
    };
    for _ in 0..entries {
        let connector = get_string(buf, field)?;
        let ids = get_count(buf, 4, field)?.unwrap_or(0);
        for _ in 0..ids {
            match get_i32(buf, field)? {
                CONNECTOR_TASK => {
                    work.connectors.insert(connector.clone());
                }
                id => {
                    let id = u32::try_from(id)
                        .map_err(|_| DecodeError(format!("{field}: task id {id}")))?;
                    work.tasks.insert(ConnectorTaskId::new(&connector, id));
                }
            }
        }
    }
    Ok(work)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(connectors: &[&str], tasks: &[(&str, u32)]) -> Work {
        Work {
            connectors: connectors.iter().map(|c| c.to_string()).collect(),
            tasks: tasks
                .iter()
                .map(|(c, t)| ConnectorTaskId::new(c, *t))
                .collect(),
        }
    }

    /// The layout Kafka Connect documents and writes: version 1, leader `m1`, a connector and
    /// its task 0, nothing revoked, no delay.
    #[test]
    fn an_assignment_reads_as_connect_writes_it() {
        let url = b"http://w1:8083/";
        let mut bytes = vec![0, 1, 0, 0, 0, 2, b'm', b'1', 0, 15];
        bytes.extend_from_slice(url);
        bytes.extend_from_slice(&7i64.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 1, 0, 2, b'c', b'1', 0, 0, 0, 2]);
        bytes.extend_from_slice(&(-1i32).to_be_bytes());
        bytes.extend_from_slice(&0i32.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        let assignment = decode_assignment(&bytes).unwrap();
        assert_eq!(
            assignment,
            Assignment {
                error: NO_ERROR,
                leader: "m1".into(),
                leader_url: "http://w1:8083/".into(),
                config_offset: 7,
                assigned: work(&["c1"], &[("c1", 0)]),
                revoked: Work::default(),
                delay_ms: 0,
            }
        );
        // Written back as version 2, otherwise byte for byte the same.
        let mut ours = encode_assignment(&assignment).to_vec();
        assert_eq!(ours[..2], [0, 2]);
        ours[1] = 1;
        assert_eq!(ours, bytes);
    }

    #[test]
    fn metadata_reads_as_connect_writes_it_and_round_trips() {
        // Connect's version 1 metadata without an allocation.
        let mut bytes = vec![0, 1, 0, 15];
        bytes.extend_from_slice(b"http://w1:8083/");
        bytes.extend_from_slice(&7i64.to_be_bytes());
        bytes.extend_from_slice(&(-1i32).to_be_bytes());
        let state = decode_metadata(&bytes).unwrap();
        assert_eq!(
            state,
            WorkerState {
                url: "http://w1:8083/".into(),
                config_offset: 7,
                running: None,
            }
        );
        // Version 0: no allocation at all.
        let v0 = [&[0u8, 0][..], &bytes[2..bytes.len() - 4]].concat();
        assert_eq!(decode_metadata(&v0).unwrap(), state);
        let running = WorkerState {
            running: Some(Assignment {
                error: NO_ERROR,
                leader: "m1".into(),
                leader_url: "http://w1:8083/".into(),
                config_offset: 9,
                assigned: work(&["a", "b-c"], &[("a", 0), ("a", 2), ("z", 11)]),
                revoked: work(&[], &[("a", 1)]),
                delay_ms: 5000,
            }),
            ..state
        };
        assert_eq!(
            decode_metadata(&encode_metadata(&running)).unwrap(),
            running
        );
    }

    #[test]
    fn a_version_0_assignment_has_no_revocations_or_delay() {
        let full = Assignment {
            error: CONFIG_MISMATCH,
            leader: "m".into(),
            leader_url: "u".into(),
            config_offset: 3,
            assigned: work(&["c"], &[("c", 1)]),
            revoked: Work::default(),
            delay_ms: 0,
        };
        let bytes = encode_assignment(&full);
        // Cut after the assignment array: what version 0 writes.
        let v0 = &bytes[..bytes.len() - 8];
        let decoded = decode_assignment(v0).unwrap();
        assert_eq!(decoded, full);
        assert!(decoded.failed());
    }

    #[test]
    fn malformed_bytes_are_errors_never_panics() {
        let good = encode_metadata(&WorkerState {
            url: "http://w:1/".into(),
            config_offset: 1,
            running: Some(Assignment {
                error: 0,
                leader: "l".into(),
                leader_url: "u".into(),
                config_offset: 1,
                assigned: work(&["c"], &[("c", 0)]),
                revoked: work(&[], &[("c", 1)]),
                delay_ms: 0,
            }),
        });
        // Every truncation either reads (a missing trailing field takes its default) or fails.
        for cut in 0..good.len() {
            let _ = decode_metadata(&good[..cut]);
        }
        assert!(decode_metadata(&good[..3]).is_err());
        // A count far beyond the bytes left is refused before anything is allocated.
        let mut hostile = vec![0, 1, 0, 0, 0, 1, b'l', 0, 0];
        hostile.extend_from_slice(&0i64.to_be_bytes());
        hostile.extend_from_slice(&i32::MAX.to_be_bytes());
        let refused = decode_assignment(&hostile).unwrap_err();
        assert!(refused.0.contains("do not fit"), "{refused}");
        // Negative task ids other than -1, bad UTF-8, negative versions.
        let mut bad_task = vec![0, 1, 0, 0, 0, 0, 0, 0];
        bad_task.extend_from_slice(&0i64.to_be_bytes());
        bad_task.extend_from_slice(&[0, 0, 0, 1, 0, 1, b'c', 0, 0, 0, 1]);
        bad_task.extend_from_slice(&(-7i32).to_be_bytes());
        assert!(decode_assignment(&bad_task).is_err());
        assert!(decode_metadata(&[0, 1, 0, 1, 0xff]).is_err());
        assert!(decode_metadata(&[0xff, 0xff]).is_err());
    }
}
