//! Distributed mode: workers that form a group through Kafka's group coordinator, share their
//! state through Kafka topics, and split connectors and tasks among themselves (Kafka Connect's
//! `distributed` package). Built in steps; what is here so far:
//!
//! - `protocol`: the members' join metadata and the leader's assignments, in Kafka Connect's
//!   incremental cooperative layouts under a protocol name of our own.
//! - `assignor`: the leader's incremental cooperative assignment, a pure function with its
//!   memory across rounds.

pub mod assignor;
pub mod protocol;
