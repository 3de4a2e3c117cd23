//! Guest stdout/stderr, turned into tracing events tagged with the connector and task, within
//! a per-instance line budget so a plugin printing in a loop cannot flood the worker's log.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

use super::state::Tags;

/// Lines longer than this are split, so a plugin cannot grow the buffer without bound.
const MAX_LINE: usize = 16 * 1024;

/// Which stream; stdout lines log at `info`, stderr lines at `warn`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// How many lines an instance may log (stdout, stderr and the `log` import together): a token
/// bucket refilled at `per_second`, holding at most ten seconds' worth. Lines over the budget are
/// dropped and counted; the count is logged before the next line that fits.
#[derive(Debug)]
pub struct LogBudget {
    per_second: f64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
    suppressed: u64,
}

impl LogBudget {
    /// A full budget of `per_second` lines a second.
    pub fn new(per_second: u32) -> Arc<Self> {
        let per_second = f64::from(per_second.max(1));
        Arc::new(Self {
            per_second,
            state: Mutex::new(Bucket {
                tokens: per_second * 10.0,
                refilled: Instant::now(),
                suppressed: 0,
            }),
        })
    }

    /// `None` when the line must be dropped; else how many lines were dropped before it.
    pub(crate) fn admit(&self) -> Option<u64> {
        let mut bucket = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(bucket.refilled).as_secs_f64() * self.per_second;
        bucket.tokens = (bucket.tokens + refill).min(self.per_second * 10.0);
        bucket.refilled = now;
        if bucket.tokens < 1.0 {
            bucket.suppressed += 1;
            return None;
        }
        bucket.tokens -= 1.0;
        Some(std::mem::take(&mut bucket.suppressed))
    }

    /// Admit one line of `tags`' instance, first logging how many were dropped before it.
    pub(crate) fn admit_line(&self, tags: &Tags) -> bool {
        match self.admit() {
            None => false,
            Some(0) => true,
            Some(dropped) => {
                tracing::warn!(target: "plugin", connector = %tags.connector, task = %tags.task_label(), "{dropped} lines of plugin output were dropped: over the limit of {} lines a second (sandbox.log.lines.per.second)", self.per_second);
                true
            }
        }
    }
}

/// A WASI output stream that forwards each line to the host's logs.
#[derive(Clone)]
pub(crate) struct LogStream {
    pub(crate) tags: Tags,
    pub(crate) stream: Stream,
    pub(crate) budget: Arc<LogBudget>,
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            out: self.clone(),
            line: Vec::new(),
        })
    }
}

struct LineWriter {
    out: LogStream,
    line: Vec<u8>,
}

impl LineWriter {
    fn emit(&mut self) {
        if !self.out.budget.admit_line(&self.out.tags) {
            self.line.clear();
            return;
        }
        let text = String::from_utf8_lossy(&self.line);
        let text = text.trim_end_matches('\r');
        let tags = &self.out.tags;
        match self.out.stream {
            Stream::Stdout => {
                tracing::info!(target: "plugin", connector = %tags.connector, task = %tags.task_label(), stream = "stdout", "{text}")
            }
            Stream::Stderr => {
                tracing::warn!(target: "plugin", connector = %tags.connector, task = %tags.task_label(), stream = "stderr", "{text}")
            }
        }
        self.line.clear();
    }
}

impl AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        for &byte in buf {
            if byte == b'\n' {
                self.emit();
            } else {
                self.line.push(byte);
                if self.line.len() >= MAX_LINE {
                    self.emit();
                }
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.line.is_empty() {
            self.emit();
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.emit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_drops_lines_over_it_and_counts_them() {
        let budget = LogBudget::new(1);
        // A full bucket holds ten seconds' worth.
        for _ in 0..10 {
            assert_eq!(budget.admit(), Some(0));
        }
        assert_eq!(budget.admit(), None);
        assert_eq!(budget.admit(), None);
        budget.state.lock().unwrap().refilled -= std::time::Duration::from_secs(1);
        assert_eq!(
            budget.admit(),
            Some(2),
            "the dropped count comes with the next line"
        );
    }
}
