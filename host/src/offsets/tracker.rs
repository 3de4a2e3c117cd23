//! Which source offsets may be committed: a record's offset becomes committable only once Kafka
//! acknowledged it and every earlier record of the same source partition (acks may arrive out
//! of order across Kafka partitions).

use std::collections::{HashMap, VecDeque};

/// Identifies a submitted record: its source partition's slot and its sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    pub partition: u32,
    pub seq: u64,
}

struct Pending {
    seq: u64,
    offset: String,
    acked: bool,
}

struct Partition {
    /// The source partition as the plugin wrote it (JSON text).
    name: String,
    pending: VecDeque<Pending>,
    /// The newest offset whose records are all acknowledged, not yet taken by `committable`.
    ready: Option<String>,
}

/// Records sent and not yet committable, per source partition.
#[derive(Default)]
pub struct SubmittedRecords {
    slots: HashMap<String, u32>,
    /// The slot of the last submit: consecutive records mostly share a source partition, and
    /// comparing one string is cheaper than hashing it.
    last_slot: Option<u32>,
    partitions: Vec<Partition>,
    next_seq: u64,
    unacked: usize,
}

impl SubmittedRecords {
    /// Remember a record about to be sent.
    pub fn submit(&mut self, partition: &str, offset: String) -> Submitted {
        let last = self
            .last_slot
            .filter(|&slot| self.partitions[slot as usize].name == partition);
        let slot = match last.or_else(|| self.slots.get(partition).copied()) {
            Some(slot) => slot,
            None => {
                let slot = self.partitions.len() as u32;
                self.partitions.push(Partition {
                    name: partition.to_owned(),
                    pending: VecDeque::new(),
                    ready: None,
                });
                self.slots.insert(partition.to_owned(), slot);
                slot
            }
        };
        self.last_slot = Some(slot);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.unacked += 1;
        self.partitions[slot as usize].pending.push_back(Pending {
            seq,
            offset,
            acked: false,
        });
        Submitted {
            partition: slot,
            seq,
        }
    }

    /// Kafka acknowledged a record. Unknown or repeated acks are ignored.
    pub fn ack(&mut self, record: Submitted) {
        let Some(partition) = self.partitions.get_mut(record.partition as usize) else {
            return;
        };
        let Ok(index) = partition
            .pending
            .binary_search_by_key(&record.seq, |p| p.seq)
        else {
            return;
        };
        let pending = &mut partition.pending[index];
        if pending.acked {
            return;
        }
        pending.acked = true;
        self.unacked -= 1;
        while partition.pending.front().is_some_and(|p| p.acked) {
            if let Some(done) = partition.pending.pop_front() {
                partition.ready = Some(done.offset);
            }
        }
    }

    /// The source partition and offset of a record not yet acknowledged.
    pub fn position(&self, record: Submitted) -> Option<(String, String)> {
        let partition = self.partitions.get(record.partition as usize)?;
        let index = partition
            .pending
            .binary_search_by_key(&record.seq, |p| p.seq)
            .ok()?;
        Some((
            partition.name.clone(),
            partition.pending[index].offset.clone(),
        ))
    }

    /// Records sent but not acknowledged.
    pub fn in_flight(&self) -> usize {
        self.unacked
    }

    /// The offsets that advanced since the last call: (source partition, offset).
    pub fn take_committable(&mut self) -> Vec<(String, String)> {
        self.partitions
            .iter_mut()
            .filter_map(|p| p.ready.take().map(|offset| (p.name.clone(), offset)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_waits_for_every_earlier_record_of_its_partition() {
        let mut t = SubmittedRecords::default();
        let a1 = t.submit("A", "1".into());
        let b1 = t.submit("B", "1".into());
        let a2 = t.submit("A", "2".into());
        let a3 = t.submit("A", "3".into());
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
    }
}
