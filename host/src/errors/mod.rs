//! Record-level error handling with Kafka Connect's `errors.*` settings: whether a bad record
//! fails the task or is skipped (`errors.tolerance`), how long failed record writes are retried,
//! logging, and the dead-letter queue. Unlike Kafka Connect, the DLQ works in both directions:
//! source records that cannot be converted or that Kafka rejects, and sink records that cannot
//! be converted or that the plugin's `put` reports as failed.
//!
//! - [`policy`]: the settings, parsed from the operator's connector config.
//! - [`report`]: what a task does with one failed record (count, log, DLQ).
//! - [`dlq`]: the dead-letter record and its `__connect.errors.*` context headers.

pub mod dlq;
pub mod policy;
pub mod report;

pub use policy::ErrorPolicy;
pub use report::{ErrorCounts, ErrorReporter, Handled, RecordError, Stage};
