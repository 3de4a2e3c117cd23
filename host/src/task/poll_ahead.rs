//! A source task's plugin instance on a tokio task of its own, asked for its next batch while
//! the worker is still sending the last one: the plugin's `poll` then runs on one core while
//! the producer path runs on another (sharing one thread, each waited for the other). Requests
//! are served in order, so a `commit`
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

/// An instance served on its own task of the plugin runtime, with the channel its requests
/// go through. Dropping it abandons the instance.
pub(super) struct Served<R, I> {
    requests: Option<mpsc::UnboundedSender<R>>,
    task: JoinHandle<I>,
    abandoned: bool,
    /// The task's control and `task.shutdown.graceful.timeout.ms`: once the task is told to
    /// stop, a call waited on gets at most this much longer, whichever call it is.
    stop: (watch::Receiver<Control>, Duration),
}

impl<R, I> Drop for Served<R, I> {
    fn drop(&mut self) {
        // A runner that ends (or is aborted) takes its instance with it, whatever it is doing.
        self.task.abort();
    }
}

impl<R: Send + 'static, I: Send + 'static> Served<R, I> {
    /// Serve `instance` on the plugin runtime: `serve` answers each request in order and
    /// hands the instance back.
    pub(super) fn spawn<F>(
        instance: I,
        stop: (watch::Receiver<Control>, Duration),
        serve: impl Fn(I, R) -> F + Send + 'static,
    ) -> Self
    where
        F: Future<Output = I> + Send,
    {
        let (requests, mut incoming) = mpsc::unbounded_channel();
        let task = runtime().spawn(async move {
            let mut instance = instance;
            while let Some(request) = incoming.recv().await {
                instance = serve(instance, request).await;
            }
            instance
        });
        Served {
            requests: Some(requests),
            task,
            abandoned: false,
            stop,
        }
    }

    /// Wait for `answer`, the reply to a `function` request: as long as it takes while the
    /// task runs, and at most the shutdown grace once it is told to stop. Past that the
    /// instance is abandoned and the call fails with `Abandoned`.
    pub(super) async fn answer<T>(
        &mut self,
        function: &'static str,
        answer: oneshot::Receiver<Result<T, CallError>>,
    ) -> Result<T, CallError> {
        let (stop, grace) = (self.stop.0.clone(), self.stop.1);
        match answer_or_stop(answer, &stop, grace).await {
            Some(Ok(outcome)) => outcome,
            Some(Err(_)) => Err(gone(function)),
            None => {
                self.abandon();
                Err(CallError::Abandoned {
                    function,
                    message: format!(
                        "{function} did not return within {} ms of the stop request (task.shutdown.graceful.timeout.ms); the plugin instance was abandoned",
                        grace.as_millis()
                    ),
                })
            }
        }
    }

    /// Queue `request`; if the serving task is gone, its dropped reply reports it.
    pub(super) fn send(&self, request: R) {
        if let Some(requests) = &self.requests {
            let _ = requests.send(request);
        }
    }

    /// Give up on the instance, whatever it is doing: its serving task is cancelled, which
    /// drops the call in progress (wasmtime unwinds the guest at its next suspension point,
    /// at most an epoch tick away) and the instance with it. Later requests fail at once.
    pub(super) fn abandon(&mut self) {
        self.task.abort();
        self.abandoned = true;
    }

    /// Whether [`Served::abandon`] was called.
    pub(super) fn is_abandoned(&self) -> bool {
        self.abandoned
    }

    /// Wait for what was asked, then `stop` the instance, all within `grace`
    /// (`task.shutdown.graceful.timeout.ms`); past it the instance is abandoned.
    pub(super) async fn stop<F>(
        mut self,
        grace: Duration,
        stop: impl FnOnce(I) -> F,
    ) -> Result<(), CallError>
    where
        F: Future<Output = Result<(), CallError>>,
    {
        if self.abandoned {
            return Ok(());
        }
        // The serving task ends once its request channel closes.
        self.requests = None;
        let stopping = async { stop(served(&mut self.task).await?).await };
        match tokio::time::timeout(grace, stopping).await {
            Ok(stopped) => stopped,
            Err(_) => {
                self.abandon();
                Err(late_stop(grace))
            }
        }
    }
}

/// The plugin side of a source task. Dropping it abandons the instance.
pub struct PollAhead {
    served: Served<Request, SourceTaskInstance>,
}

impl PollAhead {
    /// Move `instance` onto its own tokio task. Once `stop` says stop, every call waited on
    /// gets at most `grace` more.
    pub fn spawn(
        instance: SourceTaskInstance,
        stop: watch::Receiver<Control>,
        grace: Duration,
    ) -> Self {
        let served = Served::spawn(
            instance,
            (stop, grace),
            |mut instance: SourceTaskInstance, request| {
                // A dropped reply (the task stopped) is not an error here.
                async move {
                    match request {
                        Request::Poll { max_records, reply } => {
                            let _ = reply.send(instance.poll_batch(max_records).await);
                        }
                        Request::Commit { positions, reply } => {
                            let _ = reply.send(instance.commit(&positions).await);
                        }
                    }
                    instance
                }
            },
        );
        PollAhead { served }
    }

    /// Give up on the instance, whatever it is doing (see [`Served::abandon`]).
    pub fn abandon(&mut self) {
        self.served.abandon();
    }

    /// Whether [`PollAhead::abandon`] was called.
    pub fn is_abandoned(&self) -> bool {
        self.served.is_abandoned()
    }

    /// Ask for up to `max_records` records; the plugin starts on them at once.
    pub fn poll(&self, max_records: u32) -> PendingPoll {
        let (reply, pending) = oneshot::channel();
        self.served.send(Request::Poll { max_records, reply });
        PendingPoll(pending)
    }

    /// Tell the plugin these positions are durably recorded (after any poll asked for first).
    pub async fn commit(&mut self, positions: Vec<SourcePosition>) -> Result<(), CallError> {
        let (reply, done) = oneshot::channel();
        self.served.send(Request::Commit { positions, reply });
        self.served.answer("commit", done).await
    }

    /// Wait for what was asked, then stop the plugin, all within `grace`
    /// (`task.shutdown.graceful.timeout.ms`); past it the instance is abandoned. The source
    /// loop takes (and sends) a batch polled ahead before it stops; one left untaken, when the
    /// task fails, is dropped unsent, its offsets never committed.
    pub async fn stop(self, grace: Duration) -> Result<(), CallError> {
        self.served.stop(grace, SourceTaskInstance::stop).await
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
///
/// Shared by every worker in the process, and left so: it is an executor, not state (each
/// served instance is a task of its own that its owner cancels), and one thread per core for
/// all of them is what the cores can run; a runtime per worker would only add threads.
pub(crate) fn runtime() -> Handle {
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
