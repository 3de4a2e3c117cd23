//! When a failed task (or a connector whose task split failed retriably) is tried again: the
//! policy is a setting, read with the worker config and each connector's overrides, so it lives
//! below the worker (`config/restart.rs`); the runner and the connector actor use it from here.

pub use crate::config::restart::{
    RESTART_BACKOFF_INITIAL_MS, RESTART_BACKOFF_MAX_MS, RESTART_MAX_ATTEMPTS, RESTART_WINDOW_MS,
    RestartPolicy,
};
