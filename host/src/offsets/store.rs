//! The standalone offset store: every connector's committed source offsets in one JSON file in
//! the data directory, keyed like Kafka Connect (`["<connector>", {<source partition>}]`).
//! Each write replaces the file atomically (temp file, fsync, rename, fsync of the directory),
//! so a crash at any moment leaves either the old or the new file, never a torn one.
//!
//! Commits are grouped: while one write is in progress, the commits that arrive merge into
//! memory and the next write carries all of them. A thousand tasks flushing every second cost a
//! few writes a second, not a thousand (each write is the whole file and two fsyncs).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// The file's format version.
const FORMAT: u64 = 1;

/// Committed source offsets of all connectors, persisted in one file.
pub struct FileOffsetStore {
    /// Itself, for async commits that hand the write to a blocking thread.
    me: std::sync::Weak<FileOffsetStore>,
    path: PathBuf,
    /// The offsets as committed, and their version.
    state: Mutex<State>,
    /// Held while the file is written (lock order: `writer`, then `state`); the version the
    /// file holds.
    writer: Mutex<u64>,
    /// Blocking threads that async commits may hold at once: one writing, one to write next.
    waiting: tokio::sync::Semaphore,
}

/// The store's content in memory.
struct State {
    /// Canonical key text -> offset.
    offsets: BTreeMap<String, Value>,
    /// Bumped by every change, so a commit can tell whether a write carried it.
    version: u64,
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
        Ok(Arc::new_cyclic(|me| Self {
            me: me.clone(),
            path,
            state: Mutex::new(State {
                offsets,
                version: 0,
            }),
            writer: Mutex::new(0),
            waiting: tokio::sync::Semaphore::new(2),
        }))
    }

    /// Record `offsets` (source partition, offset; both JSON text) of `connector` and return once
    /// the file holds them (written by this call or by one running concurrently). Unparseable
    /// JSON from a plugin is reported, not stored.
    pub fn commit(&self, connector: &str, offsets: &[(String, String)]) -> Result<(), String> {
        let version = self.record(connector, offsets, usize::MAX)?;
        self.write_through(version)
    }

    /// [`commit`](Self::commit) from async code: the offsets join memory at once, then the
    /// wait for the file takes one of a few blocking threads. A thousand tasks flushing at the
    /// same moment wait as futures, not as a thousand threads of the blocking pool.
    ///
    /// A commit that would give `connector` offsets for more than `max_partitions` source
    /// partitions in all is refused whole (`sandbox.source.partitions.max`), so no connector
    /// can grow the store, and the file rewritten at every flush, without bound.
    pub async fn commit_async(
        self: &Arc<Self>,
        connector: &str,
        offsets: &[(String, String)],
        max_partitions: usize,
    ) -> Result<(), String> {
        let version = self.record(connector, offsets, max_partitions)?;
        let _permit = self
            .waiting
            .acquire()
            .await
            .map_err(|e| format!("offset store closed: {e}"))?;
        let store = Arc::clone(self);
        tokio::task::spawn_blocking(move || store.write_through(version))
            .await
            .map_err(|e| format!("offset flush task failed: {e}"))?
    }

    /// Merge `offsets` of `connector` into memory; the version that holds them.
    fn record(
        &self,
        connector: &str,
        offsets: &[(String, String)],
        max_partitions: usize,
    ) -> Result<u64, String> {
        let parsed = super::parse_commit(connector, offsets)?;
        let mut state = self.lock();
        let new = parsed
            .iter()
            .filter(|(k, _)| !state.offsets.contains_key(k))
            .count();
        if new > 0 && max_partitions != usize::MAX {
            // Every key of a connector starts with `["<connector>",`.
            let prefix = json!([connector]).to_string();
            let prefix = format!("{},", &prefix[..prefix.len() - 1]);
            let stored = state
                .offsets
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(&prefix))
                .count();
            super::check_partition_limit(connector, stored, new, max_partitions)?;
        }
        state.offsets.extend(parsed);
        state.version += 1;
        Ok(state.version)
    }

    /// Return once the file holds `version` or a later one, writing it unless a write that
    /// started meanwhile already did. A failed write leaves the change in memory (it is
    /// acknowledged data, so resuming from it loses nothing) and the next write retries it.
    fn write_through(&self, version: u64) -> Result<(), String> {
        let mut written = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if *written >= version {
            return Ok(());
        }
        let (snapshot, newest) = {
            let state = self.lock();
            (state.offsets.clone(), state.version)
        };
        self.persist(&snapshot)?;
        *written = newest;
        Ok(())
    }

    /// Every (source partition, offset) of `connector`.
    pub fn offsets_of(&self, connector: &str) -> Vec<(Value, Value)> {
        self.lock()
            .offsets
            .iter()
            .filter_map(|(k, v)| {
                let key: Value = serde_json::from_str(k).ok()?;
                (key[0].as_str() == Some(connector)).then(|| (key[1].clone(), v.clone()))
            })
            .collect()
    }

    /// Set (`Some`) or remove (`None`) offsets of `connector`'s source partitions, persisted.
    /// On failure nothing changes.
    pub fn alter(&self, connector: &str, changes: &[(Value, Option<Value>)]) -> Result<(), String> {
        let mut written = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut state = self.lock();
        let before = state.offsets.clone();
        for (partition, offset) in changes {
            let k = key(connector, partition);
            match offset {
                Some(o) => {
                    state.offsets.insert(k, o.clone());
                }
                None => {
                    state.offsets.remove(&k);
                }
            }
        }
        if let Err(e) = self.persist(&state.offsets) {
            state.offsets = before;
            return Err(e);
        }
        state.version += 1;
        *written = state.version;
        Ok(())
    }

    /// Write `offsets` as the whole file; the error names it.
    fn persist(&self, offsets: &BTreeMap<String, Value>) -> Result<(), String> {
        persist(&self.path, offsets)
            .map_err(|e| format!("cannot write the offset file {}: {e}", self.path.display()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This store as an `Arc`, for work that outlives the borrow (a blocking write).
    fn strong(&self) -> Result<Arc<Self>, String> {
        self.me
            .upgrade()
            .ok_or_else(|| "the offset store is closed".to_owned())
    }
}

impl super::OffsetStore for FileOffsetStore {
    fn commit<'a>(
        &'a self,
        connector: &'a str,
        offsets: &'a [(String, String)],
        max_partitions: usize,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let store = self.strong()?;
            store.commit_async(connector, offsets, max_partitions).await
        })
    }

    fn offset(&self, connector: &str, partition: &Value) -> Option<Value> {
        self.lock().offsets.get(&key(connector, partition)).cloned()
    }

    fn offsets_of(&self, connector: &str) -> Vec<(Value, Value)> {
        FileOffsetStore::offsets_of(self, connector)
    }

    fn alter<'a>(
        &'a self,
        connector: &'a str,
        changes: &'a [(Value, Option<Value>)],
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let store = self.strong()?;
            let (connector, changes) = (connector.to_owned(), changes.to_vec());
            // The file is written and synced: off the async threads.
            tokio::task::spawn_blocking(move || {
                FileOffsetStore::alter(&store, &connector, &changes)
            })
            .await
            .map_err(|e| format!("the offset store's writer failed: {e}"))?
        })
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
        let store: Arc<dyn super::super::OffsetStore> = reopened.clone();
        let reader = super::super::reader(&store, "a");
        assert_eq!(
            reader.offset(r#"{ "n": 1, "file": "/x" }"#),
            Some(r#"{"position":20}"#.into())
        );
        assert_eq!(reader.offset(r#"{"file":"/y"}"#), None);
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

    #[test]
    fn concurrent_commits_all_reach_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("offsets.json");
        let store = FileOffsetStore::open(&path).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    for n in 0..25 {
                        store
                            .commit(
                                "c",
                                &[(format!(r#"{{"t":{t}}}"#), format!(r#"{{"n":{n}}}"#))],
                            )
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut offsets = FileOffsetStore::open(&path).unwrap().offsets_of("c");
        offsets.sort_by_key(|(p, _)| p["t"].as_u64());
        let expected: Vec<_> = (0..8)
            .map(|t| (json!({"t": t}), json!({"n": 24})))
            .collect();
        assert_eq!(offsets, expected);
    }

    #[test]
    fn a_failed_write_is_reported_and_the_next_write_carries_the_change() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("data");
        let path = blocked.join("offsets.json");
        let store = FileOffsetStore::open(&path).unwrap();
        // The store's directory becomes a file: writes fail until it is a directory again.
        fs::write(&blocked, b"").unwrap();
        let err = store
            .commit("c", &[(r#"{"p":1}"#.into(), r#"{"n":1}"#.into())])
            .unwrap_err();
        assert!(err.contains(&path.display().to_string()), "{err}");

        fs::remove_file(&blocked).unwrap();
        store
            .commit("c", &[(r#"{"p":2}"#.into(), r#"{"n":2}"#.into())])
            .unwrap();
        let mut offsets = FileOffsetStore::open(&path).unwrap().offsets_of("c");
        offsets.sort_by_key(|(p, _)| p["p"].as_u64());
        assert_eq!(
            offsets,
            vec![
                (json!({"p": 1}), json!({"n": 1})),
                (json!({"p": 2}), json!({"n": 2}))
            ]
        );
    }

    #[test]
    fn a_failed_alter_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("data");
        let store = FileOffsetStore::open(blocked.join("offsets.json")).unwrap();
        fs::write(&blocked, b"").unwrap();
        assert!(
            store
                .alter("c", &[(json!({"p": 1}), Some(json!({"n": 1})))])
                .is_err()
        );
        assert!(store.offsets_of("c").is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_async_commits_at_once_all_reach_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("offsets.json");
        let store = FileOffsetStore::open(&path).unwrap();
        let commits: Vec<_> = (0..300)
            .map(|t| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    store
                        .commit_async(
                            "c",
                            &[(format!(r#"{{"t":{t}}}"#), r#"{"n":1}"#.into())],
                            usize::MAX,
                        )
                        .await
                })
            })
            .collect();
        for commit in commits {
            commit.await.unwrap().unwrap();
        }
        assert_eq!(
            FileOffsetStore::open(&path).unwrap().offsets_of("c").len(),
            300
        );
    }

    #[tokio::test]
    async fn a_connector_cannot_store_more_partitions_than_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileOffsetStore::open(dir.path().join("offsets.json")).unwrap();
        let p = |n: u32| (format!(r#"{{"p":{n}}}"#), r#"{"n":1}"#.to_owned());
        store.commit_async("c", &[p(1), p(2)], 3).await.unwrap();
        // Another connector's partitions do not count; known partitions always fit.
        store
            .commit_async("c2", &[p(1), p(2), p(3)], 3)
            .await
            .unwrap();
        store
            .commit_async("c", &[p(1), p(2), p(3)], 3)
            .await
            .unwrap();
        let err = store.commit_async("c", &[p(4)], 3).await.unwrap_err();
        assert!(
            err.contains("3 source partitions") && err.contains("sandbox.source.partitions.max"),
            "{err}"
        );
        assert_eq!(
            store.offsets_of("c").len(),
            3,
            "nothing of a refused commit is kept"
        );
    }
}
