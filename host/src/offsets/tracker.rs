//! Which source offsets may be committed: a record's offset becomes committable only once Kafka
//! acknowledged it and every earlier record of the same source partition (acks may arrive out
//! of order across Kafka partitions).
//!
//! This sits on the source hot path (one submit and one ack per record), so a record costs no
//! allocation: each partition keeps its pending offsets back to back in one text buffer, and
//! numbers its records so an acknowledgement finds its record by subtraction.

use std::collections::{HashMap, VecDeque};

/// Identifies a submitted record: its source partition's slot and its sequence number within
/// that partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    pub partition: u32,
    pub seq: u64,
}

/// A record not yet committable: where its offset lies in the partition's text.
struct Pending {
    /// Position of the offset in the partition's text, counted from the partition's first
    /// record (see `Partition::text_base`).
    start: usize,
    len: usize,
    acked: bool,
}

/// Buffered offset text is compacted once this many bytes before the oldest pending record
/// are dead (and they are over half the buffer), so compaction stays amortised O(1).
const COMPACT_BYTES: usize = 64 * 1024;

struct Partition {
    /// The source partition as the plugin wrote it (JSON text).
    name: String,
    pending: VecDeque<Pending>,
    /// The sequence number of `pending[0]`.
    front_seq: u64,
    /// The offsets of `pending`, back to back (and possibly some already committable before
    /// them).
    text: String,
    /// The absolute position of `text[0]`: positions count from the partition's first byte
    /// ever buffered, so compaction moves no `Pending`.
    text_base: usize,
    /// The newest offset whose records are all acknowledged, not yet taken by `committable`;
    /// a reused buffer, valid when `has_ready`.
    ready: String,
    has_ready: bool,
}

impl Partition {
    fn new(name: &str) -> Self {
        Partition {
            name: name.to_owned(),
            pending: VecDeque::new(),
            front_seq: 0,
            text: String::new(),
            text_base: 0,
            ready: String::new(),
            has_ready: false,
        }
    }

    fn offset(&self, pending: &Pending) -> &str {
        let start = pending.start - self.text_base;
        &self.text[start..start + pending.len]
    }

    fn pending_mut(&mut self, seq: u64) -> Option<&mut Pending> {
        let index = usize::try_from(seq.checked_sub(self.front_seq)?).ok()?;
        self.pending.get_mut(index)
    }

    /// Drop the text no pending record needs any more.
    fn compact(&mut self) {
        match self.pending.front() {
            None => {
                self.text_base += self.text.len();
                self.text.clear();
            }
            Some(front) => {
                let dead = front.start - self.text_base;
                if dead >= COMPACT_BYTES && dead * 2 >= self.text.len() {
                    self.text.drain(..dead);
                    self.text_base = front.start;
                }
            }
        }
    }
}

/// Records sent and not yet committable, per source partition.
#[derive(Default)]
pub struct SubmittedRecords {
    slots: HashMap<String, u32>,
    /// The slot of the last submit: consecutive records mostly share a source partition, and
    /// comparing one string is cheaper than hashing it.
    last_slot: Option<u32>,
    partitions: Vec<Partition>,
    unacked: usize,
}

impl SubmittedRecords {
    /// Whether a record of source partition `partition` may be submitted while at most `max`
    /// partitions are tracked: a known partition always, a new one while there is room. The
    /// tracker never forgets a partition, so this bounds its memory.
    pub fn admits(&self, partition: &str, max: usize) -> bool {
        self.partitions.len() < max || self.slots.contains_key(partition)
    }

    /// How many source partitions are tracked.
    pub fn partitions(&self) -> usize {
        self.partitions.len()
    }

    /// Remember a record about to be sent.
    pub fn submit(&mut self, partition: &str, offset: &str) -> Submitted {
        let last = self
            .last_slot
            .filter(|&slot| self.partitions[slot as usize].name == partition);
        let slot = match last.or_else(|| self.slots.get(partition).copied()) {
            Some(slot) => slot,
            None => {
                let slot = self.partitions.len() as u32;
                self.partitions.push(Partition::new(partition));
                self.slots.insert(partition.to_owned(), slot);
                slot
            }
        };
        self.last_slot = Some(slot);
        self.unacked += 1;
        let p = &mut self.partitions[slot as usize];
        let seq = p.front_seq + p.pending.len() as u64;
        p.pending.push_back(Pending {
            start: p.text_base + p.text.len(),
            len: offset.len(),
            acked: false,
        });
        p.text.push_str(offset);
        Submitted {
            partition: slot,
            seq,
        }
    }

    /// Kafka acknowledged a record. Unknown or repeated acks are ignored.
    pub fn ack(&mut self, record: Submitted) {
        let Some(p) = self.partitions.get_mut(record.partition as usize) else {
            return;
        };
        match p.pending_mut(record.seq) {
            Some(pending) if !pending.acked => pending.acked = true,
            _ => return,
        }
        self.unacked -= 1;
        let mut newest = None;
        while p.pending.front().is_some_and(|f| f.acked) {
            newest = p.pending.pop_front();
            p.front_seq += 1;
        }
        if let Some(done) = newest {
            let start = done.start - p.text_base;
            p.ready.clear();
            p.ready.push_str(&p.text[start..start + done.len]);
            p.has_ready = true;
            p.compact();
        }
    }

    /// The source partition and offset of a record not yet acknowledged.
    pub fn position(&self, record: Submitted) -> Option<(String, String)> {
        let p = self.partitions.get(record.partition as usize)?;
        let index = usize::try_from(record.seq.checked_sub(p.front_seq)?).ok()?;
        let pending = p.pending.get(index)?;
        Some((p.name.clone(), p.offset(pending).to_owned()))
    }

    /// Records sent but not acknowledged.
    pub fn in_flight(&self) -> usize {
        self.unacked
    }

    /// The offsets that advanced since the last call: (source partition, offset).
    pub fn take_committable(&mut self) -> Vec<(String, String)> {
        self.partitions
            .iter_mut()
            .filter_map(|p| {
                std::mem::take(&mut p.has_ready).then(|| (p.name.clone(), p.ready.clone()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_waits_for_every_earlier_record_of_its_partition() {
        let mut t = SubmittedRecords::default();
        let a1 = t.submit("A", "1");
        let b1 = t.submit("B", "1");
        let a2 = t.submit("A", "2");
        let a3 = t.submit("A", "3");
        assert_eq!(t.in_flight(), 4);

        assert_eq!(t.position(a2), Some(("A".into(), "2".into())));
        t.ack(a3);
        t.ack(b1);
        assert_eq!(t.take_committable(), vec![("B".into(), "1".into())]);
        t.ack(a1);
        assert_eq!(t.take_committable(), vec![("A".into(), "1".into())]);
        assert!(t.take_committable().is_empty(), "taken once");
        t.ack(a2);
        t.ack(a2);
        assert_eq!(t.take_committable(), vec![("A".into(), "3".into())]);
        assert_eq!(t.in_flight(), 0);
        assert_eq!(
            t.position(a2),
            None,
            "acknowledged records have no position"
        );
    }

    #[test]
    fn unknown_and_stale_acks_change_nothing() {
        let mut t = SubmittedRecords::default();
        let a1 = t.submit("A", "1");
        t.ack(Submitted {
            partition: 7,
            seq: 0,
        });
        t.ack(Submitted {
            partition: a1.partition,
            seq: a1.seq + 5,
        });
        assert_eq!(t.in_flight(), 1);
        t.ack(a1);
        t.ack(a1);
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.take_committable(), vec![("A".into(), "1".into())]);
    }

    /// Many records through one partition, acknowledged in a shuffled order within windows:
    /// the buffered text is compacted on the way, and every committable offset is the newest
    /// one with nothing older outstanding.
    #[test]
    fn offsets_stay_right_while_the_text_buffer_is_compacted() {
        let mut t = SubmittedRecords::default();
        let window = 1000;
        let mut next = 0u64;
        let mut submitted = VecDeque::new();
        for round in 0..300u64 {
            for _ in 0..window {
                let offset = format!("{{\"seq\":{next},\"pad\":\"{}\"}}", "x".repeat(40));
                submitted.push_back((next, t.submit("P", &offset)));
                next += 1;
            }
            // Acknowledge all but the newest half window, odd ones first.
            let older = submitted.len() - window / 2;
            let half: Vec<_> = submitted.drain(..older).collect();
            for (_, s) in half.iter().filter(|(n, _)| n % 2 == 1) {
                t.ack(*s);
            }
            for (_, s) in half.iter().filter(|(n, _)| n % 2 == 0) {
                t.ack(*s);
            }
            let newest = half.last().map(|(n, _)| *n).unwrap_or_default();
            let committable = t.take_committable();
            assert_eq!(committable.len(), 1, "round {round}");
            assert!(
                committable[0]
                    .1
                    .starts_with(&format!("{{\"seq\":{newest},")),
                "round {round}: {:?}",
                committable[0].1
            );
            if let Some((n, s)) = submitted.front() {
                assert!(
                    t.position(*s)
                        .is_some_and(|(_, o)| o.starts_with(&format!("{{\"seq\":{n},"))),
                    "round {round}"
                );
            }
        }
        let p = &t.partitions[0];
        assert!(
            p.text.len() < 2 * COMPACT_BYTES + 3 * window * 60,
            "compacted: {} bytes buffered",
            p.text.len()
        );
    }
}
