//! The config topic's records in Kafka Connect's format (`KafkaConfigBackingStore`): string
//! keys, JSON values without a schema envelope, so Kafka Connect's tools (and an operator with a
//! console consumer) read them as they read Connect's:
//!
//! | key | value |
//! |---|---|
//! | `connector-<name>` | `{"properties":{...}}`; a tombstone removes the connector |
//! | `task-<name>-<i>` | `{"properties":{...}}` |
//! | `commit-<name>` | `{"tasks":N}` (plus `"wasm-connect.build"`: the plugin build that split) |
//! | `target-state-<name>` | `{"state":"STARTED"\|"PAUSED","state.v2":"STARTED"\|"PAUSED"\|"STOPPED"}` |
//! | `restart-connector-<name>` | `{"include-tasks":bool,"only-failed":bool}` (KIP-745) |
//!
//! [`encode`] turns one [`ConfigRecord`] into the Kafka records that store it, in order;
//! [`Reader`] turns the records read back into [`ConfigRecord`]s. Invariant (Connect's): task
//! configs take effect only when their commit record is read, and only if the records of every
//! task `0..N` came before it; a connector's split is never seen half written.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::storage::{ConfigRecord, Pairs, TargetState};

/// One Kafka record of the config topic: its key and value (`None`: a tombstone).
pub type KafkaRecord = (String, Option<Vec<u8>>);

const CONNECTOR: &str = "connector-";
const TASK: &str = "task-";
const COMMIT: &str = "commit-";
const TARGET: &str = "target-state-";
const RESTART: &str = "restart-connector-";
/// Our field in a commit record: the content hash of the plugin build that made the split.
const BUILD: &str = "wasm-connect.build";

/// The Kafka records that store `record`, in the order they must be written.
pub fn encode(record: &ConfigRecord) -> Vec<KafkaRecord> {
    let json = |v: Value| Some(v.to_string().into_bytes());
    let properties = |pairs: &Pairs| {
        let map: Map<String, Value> = pairs
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        json!({ "properties": map })
    };
    match record {
        ConfigRecord::Connector { name, config } => {
            vec![(format!("{CONNECTOR}{name}"), json(properties(config)))]
        }
        ConfigRecord::Removed { name } => vec![
            (format!("{CONNECTOR}{name}"), None),
            (format!("{TARGET}{name}"), None),
        ],
        ConfigRecord::Tasks {
            name,
            configs,
            build,
        } => {
            let mut records: Vec<KafkaRecord> = configs
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("{TASK}{name}-{i}"), json(properties(c))))
                .collect();
            let mut commit = json!({ "tasks": configs.len() });
            if let Some(build) = build {
                commit[BUILD] = Value::String(build.clone());
            }
            records.push((format!("{COMMIT}{name}"), json(commit)));
            records
        }
        ConfigRecord::Target { name, state } => {
            // Workers that know no STOPPED read `state`: PAUSED is the nearest.
            let (v1, v2) = match state {
                TargetState::Running => ("STARTED", "STARTED"),
                TargetState::Paused => ("PAUSED", "PAUSED"),
                TargetState::Stopped => ("PAUSED", "STOPPED"),
            };
            vec![(
                format!("{TARGET}{name}"),
                json(json!({ "state": v1, "state.v2": v2 })),
            )]
        }
        ConfigRecord::Restart {
            name,
            include_tasks,
            only_failed,
        } => vec![(
            format!("{RESTART}{name}"),
            json(json!({ "include-tasks": include_tasks, "only-failed": only_failed })),
        )],
    }
}

/// Reads the config topic's records in offset order into [`ConfigRecord`]s.
#[derive(Debug, Default)]
pub struct Reader {
    /// Task configs read but not yet committed, by connector and task.
    deferred: BTreeMap<String, BTreeMap<u32, Pairs>>,
    /// Connectors whose config is known (a commit for any other is left over from a removed
    /// connector).
    connectors: std::collections::BTreeSet<String>,
}

/// A record that could not be read: its key and why. It is skipped; the caller logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub key: String,
    pub why: String,
}

impl Reader {
    /// The next record of the topic: what it stores, if it completes anything.
    pub fn read(
        &mut self,
        key: &str,
        value: Option<&[u8]>,
    ) -> Result<Option<ConfigRecord>, Skipped> {
        let skip = |why: String| Skipped {
            key: key.to_owned(),
            why,
        };
        let parsed = match value {
            None => None,
            Some(bytes) => Some(
                serde_json::from_slice::<Value>(bytes)
                    .map_err(|e| skip(format!("the value is not JSON: {e}")))?,
            ),
        };
        if let Some(name) = key.strip_prefix(TARGET) {
            let Some(value) = parsed else {
                // A removed target state: the connector runs, if it is still there.
                return Ok(self
                    .connectors
                    .contains(name)
                    .then(|| ConfigRecord::Target {
                        name: name.to_owned(),
                        state: TargetState::Running,
                    }));
            };
            let state = value
                .get("state.v2")
                .or_else(|| value.get("state"))
                .and_then(Value::as_str)
                .ok_or_else(|| skip("no state".into()))?;
            let state = match state {
                "STARTED" => TargetState::Running,
                "PAUSED" => TargetState::Paused,
                "STOPPED" => TargetState::Stopped,
                other => return Err(skip(format!("unknown state {other:?}"))),
            };
            return Ok(Some(ConfigRecord::Target {
                name: name.to_owned(),
                state,
            }));
        }
        if let Some(name) = key.strip_prefix(RESTART) {
            // A tombstone clears a request already acted on (compaction's business).
            let Some(value) = parsed else {
                return Ok(None);
            };
            let flag = |k: &str| value.get(k).and_then(Value::as_bool).unwrap_or(false);
            return Ok(self
                .connectors
                .contains(name)
                .then(|| ConfigRecord::Restart {
                    name: name.to_owned(),
                    include_tasks: flag("include-tasks"),
                    only_failed: flag("only-failed"),
                }));
        }
        if let Some(name) = key.strip_prefix(CONNECTOR) {
            return Ok(Some(match parsed {
                None => {
                    self.connectors.remove(name);
                    self.deferred.remove(name);
                    ConfigRecord::Removed {
                        name: name.to_owned(),
                    }
                }
                Some(value) => {
                    self.connectors.insert(name.to_owned());
                    ConfigRecord::Connector {
                        name: name.to_owned(),
                        config: properties(&value).map_err(skip)?,
                    }
                }
            }));
        }
        if let Some(rest) = key.strip_prefix(COMMIT) {
            let value = parsed.ok_or_else(|| skip("a commit tombstone".into()))?;
            let count = value
                .get("tasks")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| skip("no task count".into()))?;
            let build = value.get(BUILD).and_then(Value::as_str).map(str::to_owned);
            let mut deferred = self.deferred.remove(rest).unwrap_or_default();
            if !self.connectors.contains(rest) {
                return Ok(None);
            }
            let mut configs = Vec::with_capacity(count as usize);
            for task in 0..count {
                match deferred.remove(&task) {
                    Some(config) => configs.push(config),
                    None => {
                        return Err(skip(format!(
                            "the commit of {count} task configs of connector {rest} came without the config of task {task} (a writer failed midway); the connector keeps the split it had until it is split again"
                        )));
                    }
                }
            }
            return Ok(Some(ConfigRecord::Tasks {
                name: rest.to_owned(),
                configs,
                build,
            }));
        }
        if let Some(rest) = key.strip_prefix(TASK) {
            // `task-<name>-<i>`: names may contain dashes; the number is after the last.
            let (name, task) = rest
                .rsplit_once('-')
                .and_then(|(n, t)| t.parse::<u32>().ok().map(|t| (n, t)))
                .ok_or_else(|| skip("not task-<connector>-<number>".into()))?;
            let value = parsed.ok_or_else(|| skip("a task config tombstone".into()))?;
            self.deferred
                .entry(name.to_owned())
                .or_default()
                .insert(task, properties(&value).map_err(skip)?);
            return Ok(None);
        }
        // Connect's other records (session keys, logger levels, task count records) are not
        // ours to act on.
        Ok(None)
    }
}

fn properties(value: &Value) -> Result<Pairs, String> {
    let map = value
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| "no \"properties\" object".to_owned())?;
    Ok(map
        .iter()
        // Connect allows null values; they mean "not set".
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k.clone(), s.clone())),
            Value::Null => None,
            other => Some((k.clone(), other.to_string())),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::file::pairs_of as pairs;

    fn read_all(reader: &mut Reader, records: &[KafkaRecord]) -> Vec<ConfigRecord> {
        records
            .iter()
            .filter_map(|(k, v)| reader.read(k, v.as_deref()).unwrap())
            .collect()
    }

    #[test]
    fn every_record_reads_back_as_written() {
        let written = vec![
            ConfigRecord::Connector {
                name: "my-source".into(),
                config: pairs(&[("connector.class", "datagen"), ("tasks.max", "2")]),
            },
            ConfigRecord::Target {
                name: "my-source".into(),
                state: TargetState::Stopped,
            },
            ConfigRecord::Tasks {
                name: "my-source".into(),
                configs: vec![pairs(&[("t", "0")]), pairs(&[("t", "1")])],
                build: Some("abc".into()),
            },
            ConfigRecord::Restart {
                name: "my-source".into(),
                include_tasks: true,
                only_failed: false,
            },
            ConfigRecord::Removed {
                name: "my-source".into(),
            },
        ];
        let mut reader = Reader::default();
        let records: Vec<KafkaRecord> = written.iter().flat_map(encode).collect();
        // A removal writes two tombstones; the second (target state) reads as nothing.
        assert_eq!(read_all(&mut reader, &records), written);
    }

    #[test]
    fn records_are_kafka_connects() {
        let records = encode(&ConfigRecord::Tasks {
            name: "a-b".into(),
            configs: vec![pairs(&[("k", "v")])],
            build: None,
        });
        let text: Vec<(String, String)> = records
            .iter()
            .map(|(k, v)| (k.clone(), String::from_utf8(v.clone().unwrap()).unwrap()))
            .collect();
        assert_eq!(
            text,
            [
                ("task-a-b-0".into(), r#"{"properties":{"k":"v"}}"#.into()),
                ("commit-a-b".into(), r#"{"tasks":1}"#.into()),
            ]
        );
        let target = encode(&ConfigRecord::Target {
            name: "c".into(),
            state: TargetState::Paused,
        });
        assert_eq!(
            String::from_utf8(target[0].1.clone().unwrap()).unwrap(),
            r#"{"state":"PAUSED","state.v2":"PAUSED"}"#
        );
    }

    #[test]
    fn task_configs_count_only_once_committed_and_complete() {
        let mut reader = Reader::default();
        let connector = encode(&ConfigRecord::Connector {
            name: "c".into(),
            config: pairs(&[("x", "1")]),
        });
        read_all(&mut reader, &connector);
        // Task records without their commit (a writer died midway): nothing yet.
        assert_eq!(
            reader.read("task-c-0", Some(br#"{"properties":{"t":"0"}}"#)),
            Ok(None)
        );
        // A commit of two with only task 0 read: refused, the split as it was stays.
        let refused = reader
            .read("commit-c", Some(br#"{"tasks":2}"#))
            .unwrap_err();
        assert!(
            refused.why.contains("without the config of task 1"),
            "{refused:?}"
        );
        // Written again, whole: it counts.
        let records = encode(&ConfigRecord::Tasks {
            name: "c".into(),
            configs: vec![pairs(&[("t", "0")]), pairs(&[("t", "1")])],
            build: None,
        });
        assert_eq!(read_all(&mut reader, &records).len(), 1);
        // Left over from a removed connector: ignored.
        reader.read("connector-c", None).unwrap();
        assert_eq!(
            reader.read("task-c-0", Some(br#"{"properties":{}}"#)),
            Ok(None)
        );
        assert_eq!(reader.read("commit-c", Some(br#"{"tasks":1}"#)), Ok(None));
    }

    #[test]
    fn what_connect_writes_reads_and_what_is_not_ours_is_left_alone() {
        let mut reader = Reader::default();
        // Connect writes STOPPED as state PAUSED for old workers and state.v2 STOPPED.
        let read = reader
            .read(
                "target-state-c",
                Some(br#"{"state":"PAUSED","state.v2":"STOPPED"}"#),
            )
            .unwrap();
        assert_eq!(
            read,
            Some(ConfigRecord::Target {
                name: "c".into(),
                state: TargetState::Stopped
            })
        );
        // Old Connect: state only.
        let read = reader
            .read("target-state-c", Some(br#"{"state":"STARTED"}"#))
            .unwrap();
        assert!(matches!(
            read,
            Some(ConfigRecord::Target {
                state: TargetState::Running,
                ..
            })
        ));
        // Null values in properties are unset keys.
        let read = reader
            .read("connector-c", Some(br#"{"properties":{"a":"1","b":null}}"#))
            .unwrap();
        assert_eq!(
            read,
            Some(ConfigRecord::Connector {
                name: "c".into(),
                config: pairs(&[("a", "1")])
            })
        );
        // Connect's restart request, as Connect writes it.
        assert_eq!(
            reader.read(
                "restart-connector-c",
                Some(br#"{"include-tasks":true,"only-failed":true}"#)
            ),
            Ok(Some(ConfigRecord::Restart {
                name: "c".into(),
                include_tasks: true,
                only_failed: true
            }))
        );
        for key in [
            "session-key",
            "restart-connector-unknown",
            "tasks-fencing-c",
            "logger-cluster-x",
        ] {
            assert_eq!(reader.read(key, Some(b"{}")), Ok(None), "{key}");
        }
        assert!(reader.read("connector-c", Some(b"not json")).is_err());
        assert!(
            reader
                .read("task-c-x", Some(br#"{"properties":{}}"#))
                .is_err()
        );
    }
}
