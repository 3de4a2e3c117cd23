//! Guest stdout/stderr, turned into tracing events tagged with the connector and task, within
//! a per-instance budget of lines and bytes so a plugin printing in a loop cannot flood the
//! worker's log; a line or message over `sandbox.log.message.max.bytes` is cut, with a marker.

use std::borrow::Cow;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

use super::state::Tags;

/// Which stream; stdout lines log at `info`, stderr lines at `warn`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// How much an instance may log (stdout, stderr and the `log` import together): two token
/// buckets, lines and bytes, refilled at their rate a second and holding at most ten seconds'
/// worth. A line that either bucket cannot pay for is dropped and counted; the count is logged
/// before the next line that fits. Each line is at most `message_max` bytes (longer ones are
/// cut before they are counted or logged).
#[derive(Debug)]
pub struct LogBudget {
    lines_per_second: f64,
    bytes_per_second: f64,
    message_max: usize,
    /// Values redacted from every line (resolved config provider placeholders).
    secrets: Arc<Vec<String>>,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    lines: f64,
    bytes: f64,
    refilled: Instant,
    suppressed: u64,
}

impl LogBudget {
    /// A full budget of `lines_per_second` lines and `bytes_per_second` bytes a second, lines
    /// of at most `message_max` bytes.
    #[cfg(test)]
    pub fn new(lines_per_second: u32, bytes_per_second: u32, message_max: usize) -> Arc<Self> {
        Self::with_secrets(
            lines_per_second,
            bytes_per_second,
            message_max,
            Arc::default(),
        )
    }

    /// [`LogBudget::new`], redacting `secrets` from every line ([`LogBudget::redact`]).
    pub fn with_secrets(
        lines_per_second: u32,
        bytes_per_second: u32,
        message_max: usize,
        secrets: Arc<Vec<String>>,
    ) -> Arc<Self> {
        let lines_per_second = f64::from(lines_per_second.max(1));
        let bytes_per_second = f64::from(bytes_per_second.max(1));
        Arc::new(Self {
            lines_per_second,
            bytes_per_second,
            message_max: message_max.max(1),
            secrets,
            state: Mutex::new(Bucket {
                lines: lines_per_second * 10.0,
                bytes: bytes_per_second * 10.0,
                refilled: Instant::now(),
                suppressed: 0,
            }),
        })
    }

    /// `None` when a line of `bytes` must be dropped; else how many lines were dropped before
    /// it.
    pub(crate) fn admit(&self, bytes: usize) -> Option<u64> {
        let mut bucket = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.lines =
            (bucket.lines + elapsed * self.lines_per_second).min(self.lines_per_second * 10.0);
        bucket.bytes =
            (bucket.bytes + elapsed * self.bytes_per_second).min(self.bytes_per_second * 10.0);
        bucket.refilled = now;
        let cost = bytes as f64;
        if bucket.lines < 1.0 || bucket.bytes < cost {
            bucket.suppressed += 1;
            return None;
        }
        bucket.lines -= 1.0;
        bucket.bytes -= cost;
        Some(std::mem::take(&mut bucket.suppressed))
    }

    /// `line` with every secret in it replaced (before [`LogBudget::cut`], so a cut cannot
    /// leave part of one).
    pub(crate) fn redact<'m>(&self, line: &'m str) -> Cow<'m, str> {
        if self.secrets.iter().any(|s| line.contains(s.as_str())) {
            let mut out = line.to_owned();
            for secret in self.secrets.iter() {
                out = out.replace(secret.as_str(), crate::config::providers::REDACTED);
            }
            Cow::Owned(out)
        } else {
            Cow::Borrowed(line)
        }
    }

    /// `message`, cut to the longest line allowed (at a character boundary) with a marker
    /// saying how much was left out; `total` is its whole length when the caller already cut it.
    pub(crate) fn cut<'m>(&self, message: &'m str, total: usize) -> Cow<'m, str> {
        if total <= self.message_max && message.len() <= self.message_max {
            return Cow::Borrowed(message);
        }
        let mut end = message.len().min(self.message_max);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        Cow::Owned(format!(
            "{} [cut: {} of {total} bytes not logged (sandbox.log.message.max.bytes)]",
            &message[..end],
            total - end
        ))
    }

    /// Admit one line of `bytes` of `tags`' instance, first logging how many were dropped
    /// before it.
    pub(crate) fn admit_line(&self, tags: &Tags, bytes: usize) -> bool {
        match self.admit(bytes) {
            None => false,
            Some(0) => true,
            Some(dropped) => {
                tracing::warn!(target: "plugin", connector = %tags.connector, task = %tags.task_label(), "{dropped} lines of plugin output were dropped: over the limit of {} lines or {} bytes a second (sandbox.log.lines.per.second, sandbox.log.bytes.per.second)", self.lines_per_second, self.bytes_per_second);
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
            overflow: 0,
        })
    }
}

struct LineWriter {
    out: LogStream,
    /// The line so far, at most `sandbox.log.message.max.bytes`.
    line: Vec<u8>,
    /// Bytes of the line beyond that, counted and dropped.
    overflow: usize,
}

impl LineWriter {
    fn emit(&mut self) {
        let total = self.line.len() + std::mem::take(&mut self.overflow);
        let budget = &self.out.budget;
        let text = String::from_utf8_lossy(&self.line);
        let text = budget.redact(text.trim_end_matches('\r'));
        let text = budget.cut(&text, total);
        if !budget.admit_line(&self.out.tags, text.len()) {
            self.line.clear();
            return;
        }
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
        let max = self.out.budget.message_max;
        for &byte in buf {
            if byte == b'\n' {
                self.emit();
            } else if self.line.len() < max {
                self.line.push(byte);
            } else {
                self.overflow += 1;
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
        let budget = LogBudget::new(1, 1000, 100);
        // A full bucket holds ten seconds' worth.
        for _ in 0..10 {
            assert_eq!(budget.admit(10), Some(0));
        }
        assert_eq!(budget.admit(10), None);
        assert_eq!(budget.admit(10), None);
        budget.state.lock().unwrap().refilled -= std::time::Duration::from_secs(1);
        assert_eq!(
            budget.admit(10),
            Some(2),
            "the dropped count comes with the next line"
        );
    }

    #[test]
    fn bytes_are_budgeted_too() {
        let budget = LogBudget::new(1000, 100, 100);
        // Ten seconds' worth of bytes: 1000.
        for _ in 0..10 {
            assert_eq!(budget.admit(100), Some(0));
        }
        assert_eq!(budget.admit(100), None, "lines remain but bytes do not");
        assert_eq!(budget.admit(0), Some(1));
    }

    #[test]
    fn long_messages_are_cut_with_a_marker() {
        let budget = LogBudget::new(1, 1, 4);
        assert_eq!(budget.cut("abcd", 4), "abcd");
        let cut = budget.cut("abcdefgh", 8);
        assert!(
            cut.starts_with("abcd [cut: 4 of 8 bytes not logged"),
            "{cut}"
        );
        // Never inside a character.
        assert!(budget.cut("ééé", 6).starts_with("éé [cut: 2 of 6"));
        // A line cut by the writer already reports its whole length.
        assert!(budget.cut("abcd", 1000).contains("996 of 1000"));
    }
}
