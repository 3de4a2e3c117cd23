//! Where a record's delivery report goes: the opaque pointer librdkafka carries with each
//! record. A record sent on its own carries its own boxed [`AckTarget`]. The records of one
//! batch call share one allocation instead (profiled: the box per record, the channel-sender
//! clone in it, and freeing both on librdkafka's delivery thread were a tenth of a source
//! task's CPU).

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use rdkafka::util::IntoOpaque;
use tokio::sync::mpsc;

use super::producer::{Ack, AckTarget, DeliveryError};
use crate::offsets::Submitted;

/// The low pointer bit that marks a [`Slot`] of a [`Shared`] batch (both types are aligned to
/// at least 8 bytes, so a real pointer never has it).
const SLOT_TAG: usize = 1;

/// A record's delivery target, as librdkafka carries it.
pub enum Target {
    /// A record sent on its own.
    Single(Box<AckTarget>),
    /// A record of a batch: its slot in the batch's shared allocation.
    Slot(*const Slot),
}

// SAFETY: a slot is only read, and its batch's channel sender is `Send + Sync`; the batch is
// freed once, by whichever thread drops its last reference (see `Shared`).
unsafe impl Send for Target {}
// SAFETY: as above.
unsafe impl Sync for Target {}

impl IntoOpaque for Target {
    fn into_ptr(self) -> *mut c_void {
        match self {
            Target::Single(target) => Box::into_raw(target).cast(),
            Target::Slot(slot) => (slot as usize | SLOT_TAG) as *mut c_void,
        }
    }

    unsafe fn from_ptr(ptr: *mut c_void) -> Self {
        let bits = ptr as usize;
        if bits & SLOT_TAG == SLOT_TAG {
            Target::Slot((bits & !SLOT_TAG) as *const Slot)
        } else {
            // SAFETY: untagged pointers come from `into_ptr` of a `Single`, and librdkafka
            // hands each record's opaque back once.
            Target::Single(unsafe { Box::from_raw(ptr.cast()) })
        }
    }
}

impl Target {
    /// Send the delivery report (a task that already ended has dropped its receiver: nothing
    /// to tell it).
    pub fn report(self, error: Option<Box<DeliveryError>>) {
        match self {
            Target::Single(target) => {
                let _ = target.tx.send(Ack {
                    record: target.record,
                    bytes: target.bytes,
                    dlq: target.dlq,
                    error,
                });
            }
            Target::Slot(slot) => {
                // SAFETY: a slot comes from `Shared::opaque` for a record librdkafka took; its
                // batch holds one reference for each such record until its report, so both
                // are alive here, and this report is that record's only one.
                let batch = unsafe {
                    let slot = &*slot;
                    let _ = (*slot.batch).tx.send(Ack {
                        record: slot.record,
                        bytes: slot.bytes,
                        dlq: false,
                        error,
                    });
                    slot.batch
                };
                // SAFETY: this record's reference is released here, once, and neither it nor
                // its slot is used after.
                unsafe { Shared::release(batch, 1) };
            }
        }
    }
}

/// One record of a batch: what its report carries.
pub struct Slot {
    record: Submitted,
    bytes: usize,
    batch: *const Shared,
}

/// The delivery targets of one batch call, in one allocation: one reference for each record
/// librdkafka took, plus one for the caller while it hands the batch over. The last reference
/// released frees it.
pub struct Shared {
    tx: mpsc::UnboundedSender<Ack>,
    slots: Box<[Slot]>,
    references: AtomicUsize,
}

/// The caller's hold on a [`Shared`] batch while librdkafka takes its records.
pub struct Batch {
    shared: *const Shared,
    len: usize,
}

impl Batch {
    /// Targets for `records` (each a submitted record and its size), reporting to `tx`.
    pub fn new(
        tx: &mpsc::UnboundedSender<Ack>,
        records: impl ExactSizeIterator<Item = (Submitted, usize)>,
    ) -> Self {
        let len = records.len();
        let shared = Box::into_raw(Box::new(Shared {
            tx: tx.clone(),
            slots: Box::new([]),
            // Every record may be taken; `hand_over` returns those that were not.
            references: AtomicUsize::new(len + 1),
        }));
        let slots = records
            .map(|(record, bytes)| Slot {
                record,
                bytes,
                batch: shared,
            })
            .collect();
        // SAFETY: `shared` is not shared yet: this is its only pointer.
        unsafe { (*shared).slots = slots };
        Batch { shared, len }
    }

    /// The opaque pointer for record `index` (`< len`), for librdkafka to carry.
    pub fn opaque(&self, index: usize) -> *mut c_void {
        assert!(index < self.len, "slot {index} of a batch of {}", self.len);
        // SAFETY: the caller's reference keeps the batch alive; its slots are never moved.
        let slot = unsafe { (*self.shared).slots.as_ptr().add(index) };
        Target::Slot(slot).into_ptr()
    }

    /// librdkafka took all but `refused` of the records: drop their references and the
    /// caller's own. The records it took keep the batch alive until their reports.
    pub fn hand_over(self, refused: usize) {
        debug_assert!(refused <= self.len);
        // SAFETY: the refused records' references and the caller's are released once, here.
        unsafe { Shared::release(self.shared, refused + 1) };
    }
}

impl Shared {
    /// Release `n` references to `batch`, and free it if they were the last.
    ///
    /// # Safety
    /// The caller holds `n` of `batch`'s references, and does not use them again.
    unsafe fn release(batch: *const Shared, n: usize) {
        // SAFETY: the caller's references keep the batch alive until the subtraction.
        let before = unsafe { (*batch).references.fetch_sub(n, Ordering::AcqRel) };
        if before == n {
            // SAFETY: no references remain; the batch came from `Box::into_raw` in `new`.
            drop(unsafe { Box::from_raw(batch.cast_mut()) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u32) -> (Submitted, usize) {
        let submitted = Submitted {
            partition: 0,
            seq: seq.into(),
        };
        (submitted, seq as usize * 10)
    }

    #[test]
    fn each_taken_record_reports_once_to_its_task() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let batch = Batch::new(&tx, (0..3).map(record));
        let opaques: Vec<_> = (0..3).map(|i| batch.opaque(i)).collect();
        // Record 1 was refused: no report will come for it.
        batch.hand_over(1);
        for &i in &[2, 0] {
            // SAFETY: as librdkafka does, once per taken record.
            let target = unsafe { Target::from_ptr(opaques[i]) };
            target.report(None);
        }
        let acks: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        let got: Vec<_> = acks
            .iter()
            .map(|a| (a.record.seq, a.bytes, a.dlq))
            .collect();
        assert_eq!(got, vec![(2, 20, false), (0, 0, false)]);
    }

    #[test]
    fn a_single_target_round_trips_through_the_opaque_pointer() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let target = AckTarget {
            tx,
            record: Submitted {
                partition: 3,
                seq: 9,
            },
            bytes: 5,
            dlq: true,
        };
        let ptr = Target::Single(Box::new(target)).into_ptr();
        // SAFETY: from `into_ptr` above, once.
        unsafe { Target::from_ptr(ptr) }.report(None);
        let ack = rx.try_recv().expect("a report");
        assert_eq!(
            (ack.record.partition, ack.record.seq, ack.dlq),
            (3, 9, true)
        );
    }

    #[test]
    fn a_batch_whose_records_were_all_refused_is_freed_by_the_caller() {
        let (tx, mut rx) = mpsc::unbounded_channel::<Ack>();
        let batch = Batch::new(&tx, (0..2).map(record));
        batch.hand_over(2);
        // The batch held a sender clone: once it is freed, dropping ours closes the channel.
        drop(tx);
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }
}
