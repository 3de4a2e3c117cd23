//! Source offsets: the durable store (standalone: a file) and the tracking of which offsets
//! Kafka has acknowledged far enough to commit.

pub mod store;
pub mod tracker;

pub use store::FileOffsetStore;
pub use tracker::{Submitted, SubmittedRecords};
