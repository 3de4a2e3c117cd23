//! The one exponential backoff of the worker, with random jitter: task restarts, a connector's
//! retried split (both under `task.restart.backoff.*`), and retriable plugin and Kafka errors
//! inside a task's loop (100 ms doubling to 10 s) all wait [`Backoff::delay`].
//!
//! Why a few lines over `fastrand` rather than a retry crate: every caller keeps its own attempt
//! count (restarts are counted within a window, a sink's retries end at a deadline, a stop
//! request cuts any wait short) and asks "how long before attempt n?". Retry crates such as
//! `backon` hand out an iterator of delays, or run the retried call themselves, and their jitter
//! (`backon`'s adds up to the whole delay again) would change the ranges the worker documents.
//! `fastrand` is already in the build (through `tempfile`), and its generator is per thread,
//! seeded from the operating system, so no two workers (or tasks) share one.

use std::time::Duration;

/// The share of a delay that jitter may add: up to a quarter more, so the restarts of many tasks
/// that failed together (a broker went away) spread out instead of arriving together.
pub const JITTER: f64 = 0.25;

/// Doubling delays from `initial` up to `max`, each plus up to [`JITTER`] of itself, random.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first retry (attempt 0), before jitter.
    pub initial: Duration,
    /// The longest delay before jitter.
    pub max: Duration,
}

impl Backoff {
    /// Delays doubling from `initial` up to `max`.
    pub const fn new(initial: Duration, max: Duration) -> Self {
        Self { initial, max }
    }

    /// The delay before attempt `attempt` without jitter (0 is the first retry):
    /// `initial × 2^attempt`, at most `max`.
    pub fn base(&self, attempt: u32) -> Duration {
        // 2^20 × any initial delay worth waiting is past every maximum; capping the exponent
        // keeps the shift defined.
        self.initial
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.max)
    }

    /// The delay before attempt `attempt` (0 is the first retry): [`Self::base`] plus a random
    /// share of it below [`JITTER`], so from `base` up to (not including) `base × 1.25`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let base = self.base(attempt);
        base.saturating_add(base.mul_f64(fastrand::f64() * JITTER))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_maximum() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
        let bases: Vec<u128> = (0..10).map(|n| b.base(n).as_millis()).collect();
        assert_eq!(
            bases,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
        );
        assert_eq!(b.base(u32::MAX), Duration::from_secs(10));
        let huge = Backoff::new(Duration::MAX, Duration::MAX);
        assert_eq!(
            huge.base(30),
            Duration::MAX,
            "saturates instead of overflowing"
        );
        assert_eq!(huge.delay(30), Duration::MAX);
    }

    #[test]
    fn jitter_adds_up_to_a_quarter_and_varies() {
        let b = Backoff::new(Duration::from_millis(1000), Duration::from_secs(60));
        let delays: Vec<Duration> = (0..200).map(|_| b.delay(2)).collect();
        for d in &delays {
            assert!(
                *d >= Duration::from_millis(4000) && *d < Duration::from_millis(5000),
                "{d:?}"
            );
        }
        let distinct: std::collections::HashSet<_> = delays.iter().collect();
        assert!(distinct.len() > 100, "jitter is random: {distinct:?}");
        let zero = Backoff::new(Duration::ZERO, Duration::ZERO);
        assert_eq!(zero.delay(3), Duration::ZERO);
    }
}
