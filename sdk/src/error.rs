//! The error a plugin returns; its variant tells the worker what to do next.

use std::fmt;

/// A problem with one configuration key, written for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending key (empty for a problem with the config as a whole).
    pub key: String,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl ConfigError {
    /// A problem with `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why a plugin call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A passing problem: the worker repeats the same call after a backoff.
    Retriable(String),
    /// The task cannot go on: the worker fails it and shows the message in its status.
    Fatal(String),
    /// The configuration is wrong: retrying does not help until the operator changes it.
    InvalidConfig(Vec<ConfigError>),
}

impl Error {
    /// A [`Error::Retriable`] error.
    pub fn retriable(message: impl fmt::Display) -> Self {
        Self::Retriable(message.to_string())
    }

    /// A [`Error::Fatal`] error.
    pub fn fatal(message: impl fmt::Display) -> Self {
        Self::Fatal(message.to_string())
    }
}

impl From<ConfigError> for Error {
    fn from(error: ConfigError) -> Self {
        Self::InvalidConfig(vec![error])
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Retriable(m) => write!(f, "retriable: {m}"),
            Self::Fatal(m) => write!(f, "fatal: {m}"),
            Self::InvalidConfig(errors) => {
                f.write_str("invalid config: ")?;
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}

/// The result of a plugin call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<ConfigError> for crate::bindings::wit::ConfigError {
    fn from(e: ConfigError) -> Self {
        Self {
            key: e.key,
            message: e.message,
        }
    }
}

impl From<crate::bindings::wit::ConfigError> for ConfigError {
    fn from(e: crate::bindings::wit::ConfigError) -> Self {
        Self {
            key: e.key,
            message: e.message,
        }
    }
}

impl From<Error> for crate::bindings::wit::PluginError {
    fn from(e: Error) -> Self {
        match e {
            Error::Retriable(m) => Self::Retriable(m),
            Error::Fatal(m) => Self::Fatal(m),
            Error::InvalidConfig(errors) => {
                Self::InvalidConfig(errors.into_iter().map(Into::into).collect())
            }
        }
    }
}
