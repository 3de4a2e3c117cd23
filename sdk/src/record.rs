//! Records and positions that cross the boundary. Their constructors (`SourceRecord::new` and
//! the `with_*` setters, `Data::as_bytes`) live next to the generated types.

pub use crate::bindings::wit::{
    Data, Header, RecordFailure, SinkRecord, SourcePosition, SourceRecord, TopicPartition,
    TopicPartitionOffset,
};
