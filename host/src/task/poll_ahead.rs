//! A source task's plugin instance on a tokio task of its own, asked for its next batch while
//! the worker is still sending the last one: the plugin's `poll` then runs on one core while
//! the producer path runs on another (profiled: the two shared one thread, and the plugin's
//! own work was a third of it with `datagen`). Requests are served in order, so a `commit`
//! never overtakes a `poll` asked for before it.
//!
//! The instances are served on a runtime of their own. A task woken by another task of the
//! same tokio runtime waits in that thread's next-task slot until the waker yields, and the
//! task loop does not yield while it sends, so on one runtime the two would still take turns.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::{Control, control};

use crate::sandbox::instance::SourcePosition;
use crate::sandbox::{CallError, Polled, SourceTaskInstance};

enum Request {
    Poll {
        max_records: u32,
        reply: oneshot::Sender<Result<Polled, CallError>>,
    },
    Commit {
        positions: Vec<SourcePosition>,
        reply: oneshot::Sender<Result<(), CallError>>,
    },
}

/// A batch asked for and not yet taken.
pub struct PendingPoll(oneshot::Receiver<Result<Polled, CallError>>);

/// The plugin side of a source task. Dropping it abandons the instance (see
/// [`PollAhead::abandon`]).
pub struct PollAhead {
    requests: mpsc::UnboundedSender<Request>,
    served: JoinHandle<SourceTaskInstance>,
    abandoned: bool,
}

impl Drop for PollAhead {
    fn drop(&mut self) {
        // A runner that ends (or is aborted) takes its instance with it, whatever it is doing.
        self.served.abort();
    }
}

impl PollAhead {
    /// Move `instance` onto its own tokio task.
    pub fn spawn(mut instance: SourceTaskInstance) -> Self {
        let (requests, mut incoming) = mpsc::unbounded_channel();
        let served = runtime().spawn(async move {
            while let Some(request) = incoming.recv().await {
                // A dropped reply (the task stopped) is not an error here.
                match request {
                    Request::Poll { max_records, reply } => {
                        let _ = reply.send(instance.poll_batch(max_records).await);
                    }
                    Request::Commit { positions, reply } => {
                        let _ = reply.send(instance.commit(&positions).await);
                    }
                }
            }
            instance
        });
        PollAhead {
            requests,
            served,
            abandoned: false,
        }
    }

    /// Give up on the instance, whatever it is doing: its serving task is cancelled, which
    /// drops the call in progress (wasmtime unwinds the guest at its next suspension point,
    /// at most an epoch tick away) and the instance with it. Later requests fail at once.
    pub fn abandon(&mut self) {
        self.served.abort();
        self.abandoned = true;
    }

    /// Whether [`PollAhead::abandon`] was called.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned
    }

    /// Ask for up to `max_records` records; the plugin starts on them at once.
    pub fn poll(&self, max_records: u32) -> PendingPoll {
        let (reply, pending) = oneshot::channel();
        // If the serving task is gone, the dropped reply reports it when the poll is taken.
        let _ = self.requests.send(Request::Poll { max_records, reply });
        PendingPoll(pending)
    }

    /// Tell the plugin these positions are durably recorded (after any poll asked for first).
    pub async fn commit(&self, positions: Vec<SourcePosition>) -> Result<(), CallError> {
        let (reply, done) = oneshot::channel();
        let _ = self.requests.send(Request::Commit { positions, reply });
        done.await.unwrap_or_else(|_| Err(gone("commit")))
    }

    /// Wait for what was asked, then stop the plugin, all within `grace`
    /// (`task.shutdown.graceful.timeout.ms`); past it the instance is abandoned. The source
    /// loop takes (and sends) a batch polled ahead before it stops; one left untaken, when the
    /// task fails, is dropped unsent, its offsets never committed.
    pub async fn stop(mut self, grace: Duration) -> Result<(), CallError> {
        if self.abandoned {
            return Ok(());
        }
        let (closed, _) = mpsc::unbounded_channel();
        drop(std::mem::replace(&mut self.requests, closed));
        let stopping = async { served(&mut self.served).await?.stop().await };
        match tokio::time::timeout(grace, stopping).await {
            Ok(stopped) => stopped,
            Err(_) => {
                self.abandon();
                Err(late_stop(grace))
            }
        }
    }
}

impl PendingPoll {
    /// The batch, once the plugin returned it.
    pub async fn take(self) -> Result<Polled, CallError> {
        self.0.await.unwrap_or_else(|_| Err(gone("poll")))
    }
}

/// The instance back from its serving task, once every request is answered (the task ends when
/// its request channel closes).
pub(super) async fn served<I>(task: &mut JoinHandle<I>) -> Result<I, CallError> {
    task.await.map_err(|e| CallError::Lost {
        function: "stop",
        message: e.to_string(),
    })
}

/// The error of a plugin that did not stop within the shutdown grace period.
pub(super) fn late_stop(grace: Duration) -> CallError {
    CallError::Abandoned {
        function: "stop",
        message: format!(
            "the plugin did not stop within {} ms (task.shutdown.graceful.timeout.ms); its instance was abandoned",
            grace.as_millis()
        ),
    }
}

/// Wait for `answer` from a plugin; once the task is told to stop, wait at most `grace` more.
/// `None`: the grace period passed without an answer (the caller abandons the instance).
pub(crate) async fn answer_or_stop<T>(
    answer: impl Future<Output = T>,
    stop: &watch::Receiver<Control>,
    grace: Duration,
) -> Option<T> {
    tokio::pin!(answer);
    let mut stop = stop.clone();
    loop {
        if control(&stop) == Control::Stop {
            return tokio::time::timeout(grace, answer).await.ok();
        }
        tokio::select! {
            biased;
            out = &mut answer => return Some(out),
            changed = stop.changed() => if changed.is_err() {
                return tokio::time::timeout(grace, answer).await.ok();
            },
        }
    }
}

/// The serving task ended without an answer: it panicked (a worker bug, not the plugin's).
pub(super) fn gone(function: &'static str) -> CallError {
    CallError::Lost {
        function,
        message: "its task ended without answering".to_owned(),
    }
}

/// The runtime plugin instances are served on: one thread per core, started on first use; the
/// caller's runtime if it cannot be built.
pub(super) fn runtime() -> Handle {
    static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();
    let built = RUNTIME.get_or_init(|| {
        Builder::new_multi_thread()
            .thread_name("plugin")
            .enable_all()
            .build()
            .inspect_err(|e| {
                tracing::warn!("cannot start the plugin runtime ({e}); plugins share the worker's")
            })
            .ok()
    });
    match built {
        Some(runtime) => runtime.handle().clone(),
        None => Handle::current(),
    }
}
