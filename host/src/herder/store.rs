//! Connector configs and target states persisted in the data directory (`connectors.json`),
//! replaced atomically on every change, so connectors created over REST survive a restart.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::offsets::store::write_atomically;

/// What the operator asked a connector to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TargetState {
    Running,
    Paused,
    Stopped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    config: BTreeMap<String, String>,
    target_state: TargetState,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    connectors: BTreeMap<String, Stored>,
}

/// The persisted connectors.
#[derive(Clone)]
pub struct ConfigStore {
    path: PathBuf,
}

/// One persisted connector: config pairs and target state.
pub type Persisted = (Vec<(String, String)>, TargetState);

impl ConfigStore {
    /// The store in `path`.
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// Every persisted connector by name; an unreadable file is an error naming it.
    pub fn load(&self) -> Result<BTreeMap<String, Persisted>, String> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(format!("cannot read {}: {e}", self.path.display())),
        };
        let file: File = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{} is not readable ({e}); move it away to start without stored connectors",
                self.path.display()
            )
        })?;
        Ok(file
            .connectors
            .into_iter()
            .map(|(name, s)| (name, (s.config.into_iter().collect(), s.target_state)))
            .collect())
    }

    /// Replace the file with `connectors`.
    pub fn save<'a>(
        &self,
        connectors: impl Iterator<Item = (&'a String, &'a [(String, String)], TargetState)>,
    ) -> Result<(), String> {
        let file = File {
            connectors: connectors
                .map(|(name, config, target_state)| {
                    (
                        name.clone(),
                        Stored {
                            config: config.iter().cloned().collect(),
                            target_state,
                        },
                    )
                })
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        write_atomically(&self.path, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}
