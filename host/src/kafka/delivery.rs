//! Where a record's delivery report goes: the opaque pointer librdkafka carries with each
//! record. A record sent on its own carries its own boxed [`AckTarget`]. The records of one
//! batch call share one allocation instead (a box per record, the channel-sender clone in it,
//! and freeing both on librdkafka's delivery thread cost every record), and their successes go
//! back to the task in one message, that allocation itself, once the last of them is reported;
//! a failure goes at once, on its own.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rdkafka::util::IntoOpaque;
use tokio::sync::mpsc;

use super::producer::{Ack, AckTarget, DeliveryError, Report};
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
    /// Report the delivery (a task that already ended has dropped its receiver: nothing to
    /// tell it). A batch record's success is only noted, for its batch's one message.
    pub fn report(self, error: Option<Box<DeliveryError>>) {
        match self {
            Target::Single(target) => {
                let _ = target.tx.send(Report::One(Ack {
                    record: target.record,
                    bytes: target.bytes,
                    dlq: target.dlq,
                    error,
                }));
            }
            Target::Slot(slot) => {
                // SAFETY: a slot comes from `Shared::opaque` for a record librdkafka took; its
                // batch holds one reference for each such record until its report, so both
                // are alive here, and this report is that record's only one.
                let batch = unsafe {
                    let slot = &*slot;
                    match error {
                        None => slot.delivered.store(true, Ordering::Relaxed),
                        Some(error) => {
                            let _ = (*slot.batch).tx.send(Report::One(Ack {
                                record: slot.record,
                                bytes: slot.bytes,
                                dlq: false,
                                error: Some(error),
                            }));
                        }
                    }
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
    /// Set by a successful report; read once the batch's last reference is released (the
    /// release's ordering makes every report's store visible).
    delivered: AtomicBool,
    batch: *const Shared,
}

/// The delivery targets of one batch call, in one allocation: one reference for each record
/// librdkafka took, plus one for the caller while it hands the batch over. The last reference
/// released sends it to the task as [`Delivered`] (or frees it, when none was delivered).
pub struct Shared {
    tx: mpsc::UnboundedSender<Report>,
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
        tx: &mpsc::UnboundedSender<Report>,
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
                delivered: AtomicBool::new(false),
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
    /// Release `n` references to `batch`; if they were the last, send the batch to its task
    /// when any of its records was delivered, else free it.
    ///
    /// # Safety
    /// The caller holds `n` of `batch`'s references, and does not use them again.
    unsafe fn release(batch: *const Shared, n: usize) {
        // SAFETY: the caller's references keep the batch alive until the subtraction.
        let before = unsafe { (*batch).references.fetch_sub(n, Ordering::AcqRel) };
        if before == n {
            // SAFETY: no references remain; the batch came from `Box::into_raw` in `new`.
            let shared = unsafe { Box::from_raw(batch.cast_mut()) };
            let delivered = Delivered(shared);
            if delivered.records().next().is_some() {
                let tx = delivered.0.tx.clone();
                let _ = tx.send(Report::Delivered(delivered));
            }
        }
    }
}

/// The delivered records of one batch call: what [`Report::Delivered`] carries.
pub struct Delivered(Box<Shared>);

// SAFETY: once delivered, the batch has no other owner: its slots' pointers back to it are
// never followed again (librdkafka has reported every record it took).
unsafe impl Send for Delivered {}

impl Delivered {
    /// Each delivered record and its size, in the order they were sent.
    pub fn records(&self) -> impl Iterator<Item = (Submitted, usize)> + '_ {
        self.0
            .slots
            .iter()
            .filter(|slot| slot.delivered.load(Ordering::Relaxed))
            .map(|slot| (slot.record, slot.bytes))
    }
}

impl std::fmt::Debug for Delivered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivered")
            .field("records", &self.records().count())
            .finish()
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

    /// Report `seqs` (indices into `opaques`) as librdkafka does, once per taken record.
    fn report(opaques: &[*mut c_void], seqs: &[usize], error: Option<&str>) {
        for &i in seqs {
            // SAFETY: each opaque is reported once, as librdkafka does.
            let target = unsafe { Target::from_ptr(opaques[i]) };
            target.report(error.map(|message| {
                Box::new(DeliveryError {
                    message: message.to_owned(),
                    rejected: None,
                })
            }));
        }
    }

    #[test]
    fn a_batch_reports_its_delivered_records_once_after_the_last_report() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let batch = Batch::new(&tx, (0..4).map(record));
        let opaques: Vec<_> = (0..4).map(|i| batch.opaque(i)).collect();
        // Record 1 was refused: no report will come for it.
        batch.hand_over(1);
        report(&opaques, &[3], None);
        // A failure goes at once, on its own.
        report(&opaques, &[2], Some("timed out"));
        let Ok(Report::One(failed)) = rx.try_recv() else {
            panic!("the failure first, on its own")
        };
        assert_eq!((failed.record.seq, failed.bytes), (2, 20));
        assert_eq!(
            failed.error.map(|e| e.message).as_deref(),
            Some("timed out")
        );
        assert!(
            rx.try_recv().is_err(),
            "no success reported before the last"
        );
        report(&opaques, &[0], None);
        let Ok(Report::Delivered(delivered)) = rx.try_recv() else {
            panic!("the batch's successes, once the last record is reported")
        };
        let got: Vec<_> = delivered
            .records()
            .map(|(r, bytes)| (r.seq, bytes))
            .collect();
        assert_eq!(got, vec![(0, 0), (3, 30)]);
        assert!(rx.try_recv().is_err(), "one message for the batch");
    }

    #[test]
    fn a_batch_with_no_delivered_record_sends_nothing() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let batch = Batch::new(&tx, (0..2).map(record));
        let opaques: Vec<_> = (0..2).map(|i| batch.opaque(i)).collect();
        batch.hand_over(0);
        report(&opaques, &[0, 1], Some("unreachable"));
        let reports: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(reports.len(), 2, "{reports:?}");
        assert!(
            reports
                .iter()
                .all(|r| matches!(r, Report::One(a) if a.error.is_some()))
        );
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
        let Ok(Report::One(ack)) = rx.try_recv() else {
            panic!("a report of its own")
        };
        assert_eq!(
            (ack.record.partition, ack.record.seq, ack.dlq),
            (3, 9, true)
        );
    }

    #[test]
    fn a_batch_whose_records_were_all_refused_is_freed_by_the_caller() {
        let (tx, mut rx) = mpsc::unbounded_channel::<Report>();
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
