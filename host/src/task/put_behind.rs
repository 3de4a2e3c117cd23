//! A sink task's plugin instance on a tokio task of its own (on the plugin runtime, as for
//! sources: see `poll_ahead`), so the worker can consume and convert the next batch while the
//! plugin writes the last one (sharing one thread, the two bounded the sink).
//! Requests are served in order: an `open`, `close` or `flush` never overtakes a `put` asked
//! for before it.

use std::time::Duration;

use tokio::sync::{oneshot, watch};

use super::Control;
use super::poll_ahead::{Served, gone};
use crate::sandbox::wit::types::{RecordFailure, TopicPartition, TopicPartitionOffset};
use crate::sandbox::{CallError, PutBatch, SinkTaskInstance};

/// A batch handed back with what `put` said about it.
type PutReply = (PutBatch, Result<Vec<RecordFailure>, CallError>);

enum Request {
    Put {
        // Boxed: a batch is much larger than the other requests.
        batch: Box<PutBatch>,
        reply: oneshot::Sender<PutReply>,
    },
    Open {
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Result<(), CallError>>,
    },
    Close {
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Result<(), CallError>>,
    },
    Flush {
        offsets: Vec<TopicPartitionOffset>,
        reply: oneshot::Sender<Result<Vec<TopicPartitionOffset>, CallError>>,
    },
}

/// A `put` asked for and not yet answered.
pub struct PendingPut(oneshot::Receiver<PutReply>);

/// The plugin side of a sink task. Dropping it abandons the instance.
pub struct PutBehind {
    served: Served<Request, SinkTaskInstance>,
}

impl PutBehind {
    /// Move `instance` onto its own tokio task. Once `stop` says stop, every call waited on
    /// gets at most `grace` more.
    pub fn spawn(
        instance: SinkTaskInstance,
        stop: watch::Receiver<Control>,
        grace: Duration,
    ) -> Self {
        let served = Served::spawn(
            instance,
            (stop, grace),
            |mut instance: SinkTaskInstance, request| {
                // A dropped reply (the task stopped) is not an error here.
                async move {
                    match request {
                        Request::Put { batch, reply } => {
                            let outcome = instance.put(&batch).await;
                            let _ = reply.send((*batch, outcome));
                        }
                        Request::Open { partitions, reply } => {
                            let _ = reply.send(instance.open(&partitions).await);
                        }
                        Request::Close { partitions, reply } => {
                            let _ = reply.send(instance.close(&partitions).await);
                        }
                        Request::Flush { offsets, reply } => {
                            let _ = reply.send(instance.flush(&offsets).await);
                        }
                    }
                    instance
                }
            },
        );
        PutBehind { served }
    }

    /// Give up on the instance, whatever it is doing (see `poll_ahead::Served::abandon`).
    pub fn abandon(&mut self) {
        self.served.abandon();
    }

    /// Whether [`PutBehind::abandon`] was called.
    pub fn is_abandoned(&self) -> bool {
        self.served.is_abandoned()
    }

    /// Hand `batch` to the plugin; it starts on it once what was asked before is done.
    pub fn put(&self, batch: PutBatch) -> PendingPut {
        let (reply, pending) = oneshot::channel();
        self.served.send(Request::Put {
            batch: Box::new(batch),
            reply,
        });
        PendingPut(pending)
    }

    /// Partitions assigned to the task.
    pub async fn open(&mut self, partitions: Vec<TopicPartition>) -> Result<(), CallError> {
        let (reply, done) = oneshot::channel();
        self.served.send(Request::Open { partitions, reply });
        self.served.answer("open", done).await
    }

    /// Partitions taken away from the task.
    pub async fn close(&mut self, partitions: Vec<TopicPartition>) -> Result<(), CallError> {
        let (reply, done) = oneshot::channel();
        self.served.send(Request::Close { partitions, reply });
        self.served.answer("close", done).await
    }

    /// Make everything put so far durable; returns the offsets safe to commit.
    pub async fn flush(
        &mut self,
        offsets: Vec<TopicPartitionOffset>,
    ) -> Result<Vec<TopicPartitionOffset>, CallError> {
        let (reply, done) = oneshot::channel();
        self.served.send(Request::Flush { offsets, reply });
        self.served.answer("flush", done).await
    }

    /// Wait for what was asked, then stop the plugin, all within `grace`
    /// (`task.shutdown.graceful.timeout.ms`); past it the instance is abandoned.
    pub async fn stop(self, grace: Duration) -> Result<(), CallError> {
        self.served.stop(grace, SinkTaskInstance::stop).await
    }
}

impl PendingPut {
    /// The batch back, with the plugin's answer; `Err` if the serving task ended without one
    /// (the batch is then lost: nothing of it was committed).
    pub async fn take(self) -> Result<PutReply, CallError> {
        self.0.await.map_err(|_| gone("put"))
    }
}
