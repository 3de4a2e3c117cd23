//! The on-disk compile cache: a compiled component is stored under the SHA-256 of the `.wasm`
//! file and the engine's compatibility hash, so a restart (or another load of the same bytes)
//! skips compilation, and a worker upgrade or a changed engine config never reuses stale code.
//!
//! Only files this cache wrote are ever deserialized: the directory is created private (0700)
//! and entries are written under a temporary name and renamed into place when complete.

use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Whether a component came out of the compiler or out of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Compiled now (and stored in the cache when there is one).
    Compiled,
    /// Loaded from the cache without compiling.
    Cached,
}

/// A directory of compiled components, or no cache at all.
pub struct CompileCache {
    dir: Option<PathBuf>,
    compilations: AtomicU64,
}

impl CompileCache {
    /// A cache in `dir` (created if missing), or none.
    pub fn new(dir: Option<PathBuf>) -> std::io::Result<Self> {
        if let Some(dir) = &dir {
            create_private_dir(dir)?;
        }
        Ok(Self {
            dir,
            compilations: AtomicU64::new(0),
        })
    }

    /// How many components this cache had to compile since it was created.
    pub fn compilations(&self) -> u64 {
        self.compilations.load(Ordering::Relaxed)
    }

    /// The component for `bytes` (whose SHA-256 is `sha256`), from the cache when possible.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        sha256: &str,
    ) -> wasmtime::Result<(Component, Origin)> {
        let entry = self
            .dir
            .as_ref()
            .map(|d| d.join(entry_name(engine, sha256)));
        if let Some(entry) = entry.as_deref().filter(|e| e.is_file()) {
            // SAFETY: the entry is in the worker's private cache directory and was written by
            // `store` below from `Component::serialize` output of an engine with the same
            // compatibility hash (part of the file name).
            match unsafe { Component::deserialize_file(engine, entry) } {
                Ok(component) => return Ok((component, Origin::Cached)),
                Err(e) => {
                    tracing::warn!(cache_entry = %entry.display(), "discarding unreadable compile cache entry: {e}");
                    let _ = fs::remove_file(entry);
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        self.compilations.fetch_add(1, Ordering::Relaxed);
        if let Some(entry) = entry
            && let Err(e) = store(&component, &entry)
        {
            tracing::warn!(cache_entry = %entry.display(), "cannot write compile cache entry: {e}");
        }
        Ok((component, Origin::Compiled))
    }
}

/// The hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn entry_name(engine: &Engine, sha256: &str) -> String {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{sha256}-{:016x}.cwasm", hasher.finish())
}

fn store(component: &Component, entry: &Path) -> anyhow::Result<()> {
    let bytes = component.serialize().map_err(anyhow::Error::from)?;
    let dir = entry
        .parent()
        .ok_or_else(|| anyhow::anyhow!("cache entry has no parent directory"))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(entry)?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
