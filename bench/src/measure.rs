//! Process memory from `/proc`, wall-clock helpers and the summary statistics of repetitions.

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
    }
}
