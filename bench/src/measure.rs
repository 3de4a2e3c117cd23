//! Process memory and CPU time from `/proc`, wall-clock helpers, and the statistics of
//! repetitions: summaries, and confidence intervals of paired ratios.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// A `/proc/<pid>/status` field in KiB (`VmHWM`: peak resident set; `VmRSS`: current).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// CPU time (user + system, all threads) process `pid` has used so far, in seconds: fields 14
/// and 15 of `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2, the command name, is in parentheses and may hold spaces: count after it.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (the state).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / ticks_per_second())
}

/// The kernel's clock ticks per second for `/proc` CPU times (`getconf CLK_TCK`; 100 when that
/// cannot be asked).
fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|t: &f64| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// Milliseconds since the epoch (the clock record timestamps use).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Median and spread of one metric over repetitions.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Summary {
    /// The summary of `values` (`None` when there are none).
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mid = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[mid]
        } else {
            (sorted[mid - 1] + sorted[mid]) / 2.0
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            runs: values.len(),
        })
    }
}

/// A ratio between two systems over paired repetitions: the geometric mean of the per-pair
/// ratios, and its 95 % bootstrap confidence interval (percentile method).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct RatioCi {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub pairs: usize,
}

/// Resamples per interval: enough that the 2.5 % and 97.5 % points move by well under 1 %.
const RESAMPLES: usize = 10_000;

impl RatioCi {
    /// The interval of `ratios` (one per paired repetition; `None` when there are none or one is
    /// not a positive number). The resampling uses a fixed seed, so a report is reproducible
    /// from its data. With few pairs the interval is narrower than the truth (a bootstrap cannot
    /// see more spread than its sample holds): the report says how many pairs each rests on.
    pub fn of(ratios: &[f64]) -> Option<Self> {
        if ratios.is_empty() || ratios.iter().any(|r| !r.is_finite() || *r <= 0.0) {
            return None;
        }
        let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
        let n = logs.len();
        let mean = logs.iter().sum::<f64>() / n as f64;
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let mut means: Vec<f64> = (0..RESAMPLES)
            .map(|_| (0..n).map(|_| logs[rng.below(n)]).sum::<f64>() / n as f64)
            .collect();
        means.sort_by(f64::total_cmp);
        let at = |q: f64| means[((RESAMPLES as f64 * q) as usize).min(RESAMPLES - 1)];
        Some(Self {
            estimate: mean.exp(),
            low: at(0.025).exp(),
            high: at(0.975).exp(),
            pairs: n,
        })
    }

    /// Whether the whole interval is at or above `target`: a target is met only then.
    pub fn clears(&self, target: f64) -> bool {
        self.low >= target
    }
}

/// A small deterministic generator for the bootstrap (quality far beyond what resampling a
/// handful of values needs).
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.runs), (2.0, 1.0, 3.0, 3));
        assert_eq!(Summary::of(&[1.0, 2.0, 3.0, 10.0]).unwrap().median, 2.5);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn reads_this_process() {
        assert!(status_kib(std::process::id(), "VmHWM:").unwrap_or(0) > 0);
        let before = cpu_seconds(std::process::id()).expect("own CPU time");
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = cpu_seconds(std::process::id()).expect("own CPU time");
        assert!(after - before >= 0.1, "{before} → {after}");
    }

    #[test]
    fn ratio_intervals_hold_the_estimate_and_widen_with_spread() {
        let tight = RatioCi::of(&[1.0, 1.01, 0.99, 1.0, 1.0]).unwrap();
        let loose = RatioCi::of(&[0.7, 1.3, 0.8, 1.2, 1.0]).unwrap();
        for ci in [tight, loose] {
            assert!(ci.low <= ci.estimate && ci.estimate <= ci.high, "{ci:?}");
            assert_eq!(ci.pairs, 5);
        }
        assert!(loose.high - loose.low > 5.0 * (tight.high - tight.low));
        // The geometric mean: 2 and 0.5 balance.
        assert!((RatioCi::of(&[2.0, 0.5]).unwrap().estimate - 1.0).abs() < 1e-12);
        assert!(loose.clears(0.7) && !loose.clears(0.9));
        let one = RatioCi::of(&[1.5]).unwrap();
        assert!((one.low - 1.5).abs() < 1e-12 && (one.high - 1.5).abs() < 1e-12);
        assert!(RatioCi::of(&[]).is_none() && RatioCi::of(&[1.0, 0.0]).is_none());
    }
}
