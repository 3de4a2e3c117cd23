//! Guest stdout/stderr, turned into tracing events tagged with the connector and task.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

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

/// A WASI output stream that forwards each line to the host's logs.
#[derive(Clone)]
pub(crate) struct LogStream {
    pub(crate) tags: Tags,
    pub(crate) stream: Stream,
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
