//! The standalone offset store: every connector's committed source offsets in one JSON file in
//! the data directory, keyed like Kafka Connect (`["<connector>", {<source partition>}]`).
//! Each write replaces the file atomically (temp file, fsync, rename, fsync of the directory),
//! so a crash at any moment leaves either the old or the new file, never a torn one.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::sandbox::OffsetReader;

/// The file's format version.
const FORMAT: u64 = 1;

/// Committed source offsets of all connectors, persisted in one file.
pub struct FileOffsetStore {
    path: PathBuf,
    /// Canonical key text -> offset.
    offsets: Mutex<BTreeMap<String, Value>>,
}

/// The Kafka Connect key of a source partition: `["connector", {partition}]`, as canonical JSON
/// text (object keys sorted), so equal partitions always make the same key.
pub fn key(connector: &str, partition: &Value) -> String {
    json!([connector, partition]).to_string()
}

impl FileOffsetStore {
    /// Open the store in `path`, reading what is there. An unreadable file is an error that names
    /// it; a missing one is an empty store.
    pub fn open(path: impl Into<PathBuf>) -> Result<Arc<Self>, String> {
        let path = path.into();
        let offsets = match fs::read(&path) {
            Ok(bytes) => parse(&bytes).map_err(|e| {
                format!(
                    "the offset file {} is not readable ({e}); move it away to start from no offsets",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(format!("cannot read the offset file {}: {e}", path.display())),
        };
        Ok(Arc::new(Self {
            path,
            offsets: Mutex::new(offsets),
        }))
    }

    /// Record `offsets` (source partition, offset; both JSON text) of `connector` and persist
    /// the whole store before returning. Unparseable JSON from a plugin is reported, not stored.
    pub fn commit(&self, connector: &str, offsets: &[(String, String)]) -> Result<(), String> {
        let mut parsed = Vec::with_capacity(offsets.len());
        for (partition, offset) in offsets {
            let p: Value = serde_json::from_str(partition)
                .map_err(|e| format!("source partition {partition:?} is not JSON: {e}"))?;
            let o: Value = serde_json::from_str(offset)
                .map_err(|e| format!("source offset {offset:?} is not JSON: {e}"))?;
            parsed.push((key(connector, &p), o));
        }
        let mut all = self.lock();
        let before = all.clone();
        all.extend(parsed);
        if let Err(e) = persist(&self.path, &all) {
            *all = before;
            return Err(format!(
                "cannot write the offset file {}: {e}",
                self.path.display()
            ));
        }
        Ok(())
    }

    /// Every (source partition, offset) of `connector`.
    pub fn offsets_of(&self, connector: &str) -> Vec<(Value, Value)> {
        self.lock()
            .iter()
            .filter_map(|(k, v)| {
                let key: Value = serde_json::from_str(k).ok()?;
                (key[0].as_str() == Some(connector)).then(|| (key[1].clone(), v.clone()))
            })
            .collect()
    }

    /// Set (`Some`) or remove (`None`) offsets of `connector`'s source partitions, persisted.
    pub fn alter(&self, connector: &str, changes: &[(Value, Option<Value>)]) -> Result<(), String> {
        let mut all = self.lock();
        let before = all.clone();
        for (partition, offset) in changes {
            let k = key(connector, partition);
            match offset {
                Some(o) => {
                    all.insert(k, o.clone());
                }
                None => {
                    all.remove(&k);
                }
            }
        }
        if let Err(e) = persist(&self.path, &all) {
            *all = before;
            return Err(format!(
                "cannot write the offset file {}: {e}",
                self.path.display()
            ));
        }
        Ok(())
    }

    /// Remove every offset of `connector`, persisted.
    pub fn reset(&self, connector: &str) -> Result<(), String> {
        let partitions: Vec<(Value, Option<Value>)> = self
            .offsets_of(connector)
            .into_iter()
            .map(|(p, _)| (p, None))
            .collect();
        self.alter(connector, &partitions)
    }

    /// A reader of `connector`'s offsets for its plugin instances.
    pub fn reader(self: &Arc<Self>, connector: &str) -> Arc<dyn OffsetReader> {
        Arc::new(ConnectorOffsets {
            store: Arc::clone(self),
            connector: connector.to_owned(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Value>> {
        self.offsets.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct ConnectorOffsets {
    store: Arc<FileOffsetStore>,
    connector: String,
}

impl OffsetReader for ConnectorOffsets {
    fn read(&self, source_partitions: &[String]) -> Vec<Option<String>> {
        let all = self.store.lock();
        source_partitions
            .iter()
            .map(|p| {
                let partition: Value = serde_json::from_str(p).ok()?;
                all.get(&key(&self.connector, &partition))
                    .map(Value::to_string)
            })
            .collect()
    }
}

fn parse(bytes: &[u8]) -> Result<BTreeMap<String, Value>, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if doc["format"].as_u64() != Some(FORMAT) {
        return Err(format!("unknown format {}", doc["format"]));
    }
    let entries = doc["offsets"].as_array().ok_or("no offsets list")?;
    entries
        .iter()
        .map(|e| {
            let key = e
                .get("key")
                .filter(|k| k.is_array())
                .ok_or("an entry without key")?;
            Ok((
                key.to_string(),
                e.get("value").cloned().unwrap_or(Value::Null),
            ))
        })
        .collect()
}

fn persist(path: &Path, offsets: &BTreeMap<String, Value>) -> std::io::Result<()> {
    let entries: Vec<Value> = offsets
        .iter()
        .map(|(k, v)| {
            let key: Value = serde_json::from_str(k).unwrap_or(Value::Null);
            json!({"key": key, "value": v})
        })
        .collect();
    let doc = json!({"format": FORMAT, "offsets": entries});
    write_atomically(path, &serde_json::to_vec_pretty(&doc)?)
}

/// Replace `path` with `bytes` so that a crash leaves the old or the new content, never a mix.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_survive_reopening_and_match_by_json_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("offsets.json");
        let store = FileOffsetStore::open(&path).unwrap();
        store
            .commit(
                "a",
                &[(r#"{"file":"/x","n":1}"#.into(), r#"{"position":10}"#.into())],
            )
            .unwrap();
        store
            .commit(
                "b",
                &[(r#"{"file":"/x"}"#.into(), r#"{"position":99}"#.into())],
            )
            .unwrap();
        store
            .commit(
                "a",
                &[(
                    r#"{"n":1, "file":"/x"}"#.into(),
                    r#"{"position":20}"#.into(),
                )],
            )
            .unwrap();

        let reopened = FileOffsetStore::open(&path).unwrap();
        let reader = reopened.reader("a");
        assert_eq!(
            reader.read(&[
                r#"{ "n": 1, "file": "/x" }"#.into(),
                r#"{"file":"/y"}"#.into()
            ]),
            vec![Some(r#"{"position":20}"#.into()), None]
        );
        assert_eq!(
            reopened.offsets_of("b"),
            vec![(json!({"file":"/x"}), json!({"position":99}))]
        );
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""a","#) || text.contains("\"a\""), "{text}");
    }

    #[test]
    fn a_corrupt_file_is_named_and_bad_json_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("offsets.json");
        fs::write(&path, b"{\"format\": 1, \"offs").unwrap();
        let err = FileOffsetStore::open(&path).err().unwrap();
        assert!(err.contains(&path.display().to_string()), "{err}");
        let store = FileOffsetStore::open(dir.path().join("fresh.json")).unwrap();
        assert!(
            store
                .commit("a", &[("not json".into(), "{}".into())])
                .is_err()
        );
        assert!(store.offsets_of("a").is_empty());
    }
}
