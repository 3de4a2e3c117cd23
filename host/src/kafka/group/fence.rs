//! Self-fencing: until when this worker may send records for the work the group gave it.
//!
//! The group coordinator expels a member whose heartbeats stopped for the session timeout and
//! gives its work to others. A worker that was paused (SIGSTOP, a long GC-like stall, a
//! partition) and continues does not know at once; its tasks would go on producing for work
//! that now runs elsewhere. So the member keeps a deadline: the time its last confirmed
//! heartbeat was *sent* plus the session timeout, which is no later than when the coordinator
//! can expel it. Producers check it before every send and wait while it has passed; the member
//! meanwhile finds out whether it is still in the group (it reopens the fence) or not (the
//! worker stops the tasks, whose waiting sends are dropped with them, uncommitted).
//!
//! When the member learns it is out of the group it also holds the fence shut until its owner
//! has stopped the work it ran ([`Fence::release`]): a quick rejoin must not let the sends of
//! tasks still stopping go out.
//!
//! Invariant: the fence is open only while the coordinator cannot yet have expelled the member,
//! and never while work of a lost membership is still stopping.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often a closed fence is looked at again by a waiting sender.
const RECHECK: Duration = Duration::from_millis(20);

/// Until when sends may go out.
#[derive(Debug)]
pub struct Fence {
    epoch: Instant,
    /// Microseconds since `epoch` until which the fence is open (0: closed).
    until_us: AtomicU64,
    /// Shut whatever the deadline says, until released.
    held: AtomicBool,
}

impl Default for Fence {
    fn default() -> Self {
        Self::new()
    }
}

impl Fence {
    /// A closed fence (nothing is sent until the member has joined).
    pub fn new() -> Self {
        Self {
            epoch: Instant::now(),
            until_us: AtomicU64::new(0),
            held: AtomicBool::new(false),
        }
    }

    /// Open until `until`.
    pub fn open_until(&self, until: Instant) {
        let us = until.saturating_duration_since(self.epoch).as_micros() as u64;
        self.until_us.store(us, Ordering::Release);
    }

    /// Close now.
    pub fn close(&self) {
        self.until_us.store(0, Ordering::Release);
    }

    /// Hold it shut (the membership was lost) until [`Fence::release`].
    pub fn hold(&self) {
        self.held.store(true, Ordering::Release);
        self.close();
    }

    /// The work of the lost membership has stopped: the deadline alone decides again.
    pub fn release(&self) {
        self.held.store(false, Ordering::Release);
    }

    /// Whether sends may go out now.
    pub fn is_open(&self) -> bool {
        !self.held.load(Ordering::Acquire)
            && (self.epoch.elapsed().as_micros() as u64) < self.until_us.load(Ordering::Acquire)
    }

    /// Wait until sends may go out.
    pub async fn wait_open(&self) {
        let mut logged = false;
        while !self.is_open() {
            if !logged {
                tracing::info!(
                    "sends wait: this worker has not confirmed its group membership within the session timeout"
                );
                logged = true;
            }
            tokio::time::sleep(RECHECK).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_only_until_the_deadline() {
        let fence = Fence::new();
        assert!(!fence.is_open(), "closed until opened");
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert!(fence.is_open());
        fence.open_until(Instant::now() - Duration::from_millis(1));
        assert!(!fence.is_open(), "a deadline passed closes it");
        fence.open_until(Instant::now() + Duration::from_secs(60));
        fence.close();
        assert!(!fence.is_open());
        // Held: a confirmation does not open it until released.
        fence.hold();
        fence.open_until(Instant::now() + Duration::from_secs(60));
        assert!(!fence.is_open(), "held");
        fence.release();
        assert!(fence.is_open());
    }
}
