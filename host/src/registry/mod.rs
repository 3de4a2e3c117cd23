//! The plugin registry: every `.wasm` file in the plugin directory (`plugin.path`), loaded on
//! start and kept current while the worker runs. Files that are added, replaced or removed are
//! noticed by a periodic scan; a broken file is reported and skipped, never fatal. Plugins are
//! addressed by the name and version their `spec()` returns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio::sync::{Mutex, watch};

use futures::StreamExt;

use crate::plugin::{LoadError, Plugin};
use crate::sandbox::{Limits, Sandbox};

/// Files loaded at once by a scan: each waits on its own plugin's `spec()` (under the
/// wall-clock deadline), so one file that hangs delays neither the others nor the scan
/// beyond that deadline.
const CONCURRENT_LOADS: usize = 8;

/// What one scan changed.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// Plugins from files not seen before.
    pub added: Vec<Arc<Plugin>>,
    /// Plugins from files whose content changed.
    pub replaced: Vec<Arc<Plugin>>,
    /// Files that disappeared (and held a plugin).
    pub removed: Vec<PathBuf>,
    /// Files that could not be loaded in this scan.
    pub failed: Vec<LoadError>,
}

impl ScanReport {
    /// Whether the set of available plugins changed.
    pub fn changed(&self) -> bool {
        !(self.added.is_empty() && self.replaced.is_empty() && self.removed.is_empty())
    }
}

/// Identifies one version of a file's content without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            inode,
        }
    }
}

struct Entry {
    stamp: Stamp,
    loaded: Result<Arc<Plugin>, LoadError>,
}

/// The set of plugins in one directory.
pub struct Registry {
    sandbox: Arc<Sandbox>,
    dir: PathBuf,
    /// The worker's default limits, which a plugin's `spec()` runs under when it is loaded.
    limits: Limits,
    files: RwLock<BTreeMap<PathBuf, Entry>>,
    scanning: Mutex<()>,
    generation: watch::Sender<u64>,
}

impl Registry {
    /// A registry of the plugins in `dir`; empty until the first [`Registry::scan`].
    pub fn new(sandbox: Arc<Sandbox>, dir: impl Into<PathBuf>) -> Arc<Self> {
        Self::with_limits(sandbox, dir, Limits::default())
    }

    /// [`Registry::new`], loading plugins under the worker's `limits`.
    pub fn with_limits(
        sandbox: Arc<Sandbox>,
        dir: impl Into<PathBuf>,
        limits: Limits,
    ) -> Arc<Self> {
        Arc::new(Self {
            sandbox,
            dir: dir.into(),
            limits,
            files: RwLock::new(BTreeMap::new()),
            scanning: Mutex::new(()),
            generation: watch::channel(0).0,
        })
    }

    /// Whether the plugin directory can be listed; the error names `plugin.path` and the
    /// directory.
    pub fn check_dir(&self) -> Result<(), String> {
        list_wasm_files(&self.dir).map(drop)
    }

    /// The plugin directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The sandbox plugins are compiled and run in.
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// Bring the registry up to date with the directory. Fails only when the directory itself
    /// cannot be read; a bad file is recorded in the report and in [`Registry::failures`].
    pub async fn scan(&self) -> Result<ScanReport, String> {
        let _one_at_a_time = self.scanning.lock().await;
        let present = list_wasm_files(&self.dir)?;
        let mut report = ScanReport::default();

        let known: Vec<(PathBuf, Stamp, Option<String>)> = self
            .read()
            .iter()
            .map(|(p, e)| {
                let sha = e.loaded.as_ref().ok().map(|p| p.sha256.clone());
                (p.clone(), e.stamp.clone(), sha)
            })
            .collect();

        let to_load: Vec<(PathBuf, Stamp)> = present
            .iter()
            .filter(|(path, stamp)| !known.iter().any(|(p, s, _)| p == path && s == stamp))
            .cloned()
            .collect();
        // Loaded concurrently, each entered as soon as it is done.
        let (sandbox, limits) = (Arc::clone(&self.sandbox), self.limits);
        let mut loading = futures::stream::iter(to_load)
            .map(move |(path, stamp)| load_one(Arc::clone(&sandbox), path, stamp, limits))
            .buffer_unordered(CONCURRENT_LOADS);
        while let Some((path, stamp, loaded)) = loading.next().await {
            let (path, stamp) = (&path, &stamp);
            let previous = known.iter().find(|(p, _, _)| p == path);
            let previous_sha = previous.and_then(|(_, _, sha)| sha.clone());
            match &loaded {
                Ok(plugin) if previous_sha.as_deref() == Some(plugin.sha256.as_str()) => {}
                Ok(plugin) => {
                    tracing::info!(
                        plugin = %plugin.spec.name,
                        version = %plugin.spec.version,
                        kind = %plugin.spec.kind,
                        file = %path.display(),
                        origin = ?plugin.origin,
                        contract = %plugin.contract,
                        "{} plugin",
                        if previous.is_some() { "replaced" } else { "loaded" }
                    );
                    if plugin.contract < crate::plugin::contract::VERSION {
                        tracing::warn!(
                            plugin = %plugin.spec.name,
                            file = %path.display(),
                            "built for contract {}@{}: it runs, but its records cross the sandbox boundary one allocation per field (slower); rebuild it with a current wasm-connect-sdk ({}@{})",
                            crate::plugin::contract::PACKAGE,
                            plugin.contract,
                            crate::plugin::contract::PACKAGE,
                            crate::plugin::contract::VERSION
                        );
                    }
                    if previous.is_some() {
                        report.replaced.push(plugin.clone());
                    } else {
                        report.added.push(plugin.clone());
                    }
                }
                Err(error) => {
                    tracing::warn!("skipping plugin file: {error}");
                    if previous_sha.is_some() {
                        report.removed.push(path.clone());
                    }
                    report.failed.push(error.clone());
                }
            }
            self.write().insert(
                path.clone(),
                Entry {
                    stamp: stamp.clone(),
                    loaded,
                },
            );
        }

        for (path, _, sha) in &known {
            if !present.iter().any(|(p, _)| p == path) {
                self.write().remove(path);
                if sha.is_some() {
                    tracing::info!(file = %path.display(), "plugin file removed");
                    report.removed.push(path.clone());
                }
            }
        }

        if report.changed() {
            self.generation.send_modify(|g| *g += 1);
        }
        Ok(report)
    }

    /// Scan every `interval` until the returned task is aborted, so the registry follows the
    /// directory without a restart.
    pub fn watch(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let registry = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                if let Err(e) = registry.scan().await {
                    tracing::warn!("cannot scan the plugin directory: {e}");
                }
            }
        })
    }

    /// A receiver that sees a new value whenever the set of plugins changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Every usable plugin, ordered by name, then version, then file.
    pub fn plugins(&self) -> Vec<Arc<Plugin>> {
        let mut plugins: Vec<Arc<Plugin>> = self
            .read()
            .values()
            .filter_map(|e| e.loaded.as_ref().ok().cloned())
            .collect();
        plugins.sort_by(|a, b| {
            (&a.spec.name, version_key(&a.spec.version), &a.path).cmp(&(
                &b.spec.name,
                version_key(&b.spec.version),
                &b.path,
            ))
        });
        plugins
    }

    /// The files that could not be loaded, with the reason.
    pub fn failures(&self) -> Vec<LoadError> {
        self.read()
            .values()
            .filter_map(|e| e.loaded.as_ref().err().cloned())
            .collect()
    }

    /// The plugin called `name` at `version` (an exact version, or a range in KIP-891's syntax
    /// such as `[1.0,2.0)`), its highest matching version, or its highest version when `version`
    /// is `None`. When two files hold the same name and version, the first by path wins.
    pub fn find(&self, name: &str, version: Option<&str>) -> Option<Arc<Plugin>> {
        let wanted = match version.map(VersionSpec::parse) {
            None => VersionSpec::Any,
            Some(Ok(spec)) => spec,
            Some(Err(_)) => return None,
        };
        self.plugins()
            .into_iter()
            .filter(|p| p.spec.name == name && wanted.matches(&p.spec.version))
            .max_by(|a, b| {
                version_key(&a.spec.version)
                    .cmp(&version_key(&b.spec.version))
                    .then_with(|| b.path.cmp(&a.path))
            })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<PathBuf, Entry>> {
        self.files.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<PathBuf, Entry>> {
        self.files.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Which versions of a plugin a connector accepts (`connector.plugin.version`, KIP-891): any,
/// one exact version, or a range with inclusive `[` `]` or exclusive `(` `)` bounds, either of
/// which may be left out (`[1.0,)`, `(,2.0)`). Versions compare as SemVer, missing components
/// padded (see `VersionKey`): `1.0` is `1.0.0`, as Kafka Connect's Maven versions compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSpec {
    /// The highest version present.
    Any,
    /// This version exactly.
    Exact(String),
    /// Versions between the bounds: `(version, inclusive)`.
    Range {
        low: Option<(String, bool)>,
        high: Option<(String, bool)>,
    },
}

impl VersionSpec {
    /// Parse `connector.plugin.version`; the error says what is wrong and shows the syntax.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let syntax = "a version (1.2.0) or a range such as [1.0,2.0), (1.0,] or [1.2.0]";
        if text.is_empty() {
            return Ok(VersionSpec::Any);
        }
        let Some(open) = text.chars().next().filter(|c| matches!(c, '[' | '(')) else {
            if text.contains([',', '[', ']', '(', ')']) {
                return Err(format!("{text:?} is not {syntax}"));
            }
            return Ok(VersionSpec::Exact(text.to_owned()));
        };
        let Some(close) = text.chars().last().filter(|c| matches!(c, ']' | ')')) else {
            return Err(format!(
                "{text:?} does not end with ] or ); expected {syntax}"
            ));
        };
        let inner = &text[1..text.len() - 1];
        let bound = |v: &str, inclusive: bool| {
            let v = v.trim();
            (!v.is_empty()).then(|| (v.to_owned(), inclusive))
        };
        match inner.split_once(',') {
            None if open == '[' && close == ']' && !inner.trim().is_empty() => {
                Ok(VersionSpec::Exact(inner.trim().to_owned()))
            }
            None => Err(format!("{text:?} is not {syntax}")),
            Some((low, high)) if !high.contains(',') => Ok(VersionSpec::Range {
                low: bound(low, open == '['),
                high: bound(high, close == ']'),
            }),
            Some(_) => Err(format!(
                "{text:?} has more than two bounds; expected {syntax}"
            )),
        }
    }

    /// Whether `version` is accepted.
    pub fn matches(&self, version: &str) -> bool {
        match self {
            VersionSpec::Any => true,
            VersionSpec::Exact(v) => version_key(v) == version_key(version),
            VersionSpec::Range { low, high } => {
                let key = version_key(version);
                let above = low.as_ref().is_none_or(|(v, inclusive)| {
                    let low = version_key(v);
                    key > low || (*inclusive && key == low)
                });
                let below = high.as_ref().is_none_or(|(v, inclusive)| {
                    let high = version_key(v);
                    key < high || (*inclusive && key == high)
                });
                above && below
            }
        }
    }
}

/// A plugin version as the registry orders and matches it.
///
/// Versions are read as SemVer (the `semver` crate) after padding what Kafka Connect users
/// leave out: `2` is `2.0.0`, `1.0` is `1.0.0`, `1.0-rc1` is `1.0.0-rc1`. So `0.10.0` is
/// after `0.9.0`, a pre-release is before its release (`0.1.0-build.a` before `0.1.0`;
/// pre-release identifiers compare as SemVer says: `rc.10` after `rc.9`), and build metadata
/// (`+...`) is ignored. A version that is not SemVer even padded (`2.5.0.Final`, `latest`) is
/// compared as text, after every SemVer version: such a scheme has no order we could trust,
/// and the text at least keeps it stable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum VersionKey {
    /// A SemVer version, build metadata cleared (SemVer precedence). Declared first: below
    /// every `Text`.
    SemVer(semver::Version),
    /// Anything else, trimmed.
    Text(String),
}

fn version_key(version: &str) -> VersionKey {
    let version = version.trim();
    // The release part ends where a pre-release (`-`) or build metadata (`+`) begins.
    let core_end = version.find(['-', '+']).unwrap_or(version.len());
    let (core, tail) = version.split_at(core_end);
    let missing = 2usize.saturating_sub(core.matches('.').count());
    let padded = format!("{core}{}{tail}", ".0".repeat(missing));
    match semver::Version::parse(&padded) {
        Ok(mut v) => {
            v.build = semver::BuildMetadata::EMPTY;
            VersionKey::SemVer(v)
        }
        Err(_) => VersionKey::Text(version.to_owned()),
    }
}

/// The `.wasm` regular files directly in `dir`, with their stamps.
/// Load one file (owned arguments, so the scan's stream of loads borrows nothing).
async fn load_one(
    sandbox: Arc<Sandbox>,
    path: PathBuf,
    stamp: Stamp,
    limits: Limits,
) -> (PathBuf, Stamp, Result<Arc<Plugin>, LoadError>) {
    let loaded = Plugin::load_within(&sandbox, &path, limits).await;
    (path, stamp, loaded)
}

fn list_wasm_files(dir: &Path) -> Result<Vec<(PathBuf, Stamp)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        format!(
            "cannot read the plugin directory {}: {e}; set plugin.path (or --dir) to a directory of .wasm files",
            dir.display()
        )
    })?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("wasm") {
            continue;
        }
        // Follows symlinks, so a linked plugin counts as the file it points to.
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => files.push((path, Stamp::of(&meta))),
            _ => {}
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::{VersionSpec, version_key};

    #[test]
    fn versions_order_numerically() {
        assert!(version_key("0.10.0") > version_key("0.9.0"));
        assert!(version_key("1.0.0") > version_key("0.99.99"));
        assert!(version_key("1.0.0") > version_key("1.0.0-rc1"));
        assert!(version_key("1.0.0-rc2") > version_key("1.0.0-rc1"));
        assert!(version_key("1.0.0-rc.10") > version_key("1.0.0-rc.9"));
    }

    #[test]
    fn short_versions_are_padded_and_the_rest_compare_as_text_last() {
        assert_eq!(version_key("1.0"), version_key("1.0.0"));
        assert_eq!(version_key("2"), version_key("2.0.0"));
        assert_eq!(version_key(" 1.2 "), version_key("1.2.0"));
        assert_eq!(version_key("1.0-rc1"), version_key("1.0.0-rc1"));
        assert!(version_key("10") > version_key("9.9"));
        assert!(version_key("0.1.0-build.a") < version_key("0.1.0"));
        assert!(version_key("0.1.0-build.a") > version_key("0.0.9"));
        assert!(version_key("0.1.0-build.b") > version_key("0.1.0-build.a"));
        assert_eq!(version_key("1.0.0+build.5"), version_key("1.0.0"));
        // Not SemVer even padded: text, after every SemVer version, in text order.
        assert!(version_key("2.5.0.Final") > version_key("99.0.0"));
        assert!(version_key("latest") > version_key("2.5.0.Final"));
        assert!(
            version_key("01.0.0") > version_key("1.0.0"),
            "a leading zero is not SemVer"
        );
    }

    #[test]
    fn version_specs_follow_kip_891() {
        let spec = |t: &str| VersionSpec::parse(t).unwrap();
        assert!(spec("1.2.0").matches("1.2.0") && !spec("1.2.0").matches("1.2.1"));
        assert!(spec("[1.2.0]").matches("1.2.0") && !spec("[1.2.0]").matches("1.3.0"));
        let range = spec("[1.0,2.0)");
        assert!(range.matches("1.0") && range.matches("1.9.9") && range.matches("1.10.0"));
        assert!(!range.matches("2.0") && !range.matches("0.9"));
        assert!(spec("(1.0,]").matches("3.0") && !spec("(1.0,]").matches("1.0"));
        assert!(spec("(,2.0]").matches("2.0") && spec("(,2.0]").matches("0.1"));
        assert_eq!(spec(" "), VersionSpec::Any);
        // Short versions, in specs and in plugins, are padded.
        assert!(spec("1.0").matches("1.0.0") && spec("[1.0.0]").matches("1.0"));
        assert!(spec("[1,2)").matches("1.5") && !spec("[1,2)").matches("2.0.0"));
        let pre = spec("[0.1.0-build.a,0.1.0]");
        assert!(pre.matches("0.1.0-build.a") && pre.matches("0.1.0-build.b"));
        assert!(pre.matches("0.1.0") && !pre.matches("0.1.1") && !pre.matches("0.0.9"));
        // A pre-release is below its release, so a range up to the release takes it.
        assert!(spec("[1.0,2.0)").matches("2.0.0-rc1"));
        assert!(spec("[2.0.0-rc1,)").matches("2.0.0") && !spec("(2.0,)").matches("2.0.0-rc1"));
        for bad in ["[1.0,2.0", "1.0,2.0", "[1,2,3]", "()", "[,"] {
            let err = VersionSpec::parse(bad).unwrap_err();
            assert!(err.contains("[1.0,2.0)"), "{bad}: {err}");
        }
    }
}
