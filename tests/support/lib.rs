//! Shared helpers of the integration tests: the real plugins (built on demand), the real
//! binary, temporary directories and small config builders.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use wasm_connect::plugin::Plugin;
use wasm_connect::sandbox::Sandbox;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_owned()
}

/// Build every plugin (once per test process) with the project's own script.
pub fn build_plugins() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let output = Command::new(repo_root().join("scripts/build-plugins"))
            .output()
            .expect("run scripts/build-plugins");
        assert!(
            output.status.success(),
            "scripts/build-plugins failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    });
}

/// The directory of first-party plugins, built.
pub fn plugin_dir() -> PathBuf {
    build_plugins();
    repo_root().join("dist/plugins")
}

/// A first-party plugin file (`datagen`, `file-source`, `file-sink`), built.
pub fn plugin_file(name: &str) -> PathBuf {
    plugin_dir().join(format!("{name}.wasm"))
}

/// A plugin written for the tests (`tests/plugins/<name>`), built.
pub fn test_plugin_file(name: &str) -> PathBuf {
    build_plugins();
    repo_root().join(format!("dist/test-plugins/{name}.wasm"))
}

/// A plugin directory under `dir` holding copies of the named first-party and test plugins.
pub fn plugins_with(dir: &Path, first_party: &[&str], test: &[&str]) -> PathBuf {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).expect("plugin dir");
    let files = first_party
        .iter()
        .map(|n| (n, plugin_file(n)))
        .chain(test.iter().map(|n| (n, test_plugin_file(n))));
    for (name, file) in files {
        std::fs::copy(&file, plugins.join(format!("{name}.wasm")))
            .unwrap_or_else(|e| panic!("copy {}: {e}", file.display()));
    }
    plugins
}

/// A sandbox without a compile cache.
pub fn sandbox() -> Arc<Sandbox> {
    Sandbox::new(None).expect("create sandbox")
}

/// Load a plugin file, panicking with the load error.
pub async fn load(sandbox: &Sandbox, path: &Path) -> Arc<Plugin> {
    match Plugin::load(sandbox, path).await {
        Ok(plugin) => plugin,
        Err(e) => panic!("{e}"),
    }
}

/// A config from `(key, value)` pairs.
pub fn config<K: ToString, V: ToString>(pairs: &[(K, V)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The value of `key` in `config`.
pub fn get<'a>(config: &'a [(String, String)], key: &str) -> Option<&'a str> {
    config
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Kafka Connect's jars (fetched once by `bench/kafka-connect`), the reference where the tests
/// compare with Kafka Connect itself.
pub fn connect_libs() -> PathBuf {
    let out = Command::new(repo_root().join("bench/kafka-connect"))
        .arg("fetch")
        .output()
        .expect("run bench/kafka-connect fetch");
    assert!(
        out.status.success(),
        "bench/kafka-connect fetch failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The `wasm-connect` binary, (re)built once per test process so that `cargo test -p
/// wasm-connect-tests` never runs a stale binary.
pub fn wasm_connect_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "wasm-connect",
                "--bin",
                "wasm-connect",
            ])
            .current_dir(repo_root())
            // `cargo test` sets it to this crate's directory; ring's build script watches it,
            // so a build that inherited it would rebuild ring and all above it, and the next
            // plain `cargo build` again.
            .env_remove("CARGO_MANIFEST_DIR")
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building the wasm-connect binary failed");
        let exe = std::env::current_exe().expect("test executable path");
        // target/<profile>/deps/<test> -> target/<profile>/wasm-connect
        exe.parent()
            .and_then(Path::parent)
            .map(|dir| dir.join("wasm-connect"))
            .expect("target directory")
    })
    .clone()
}

pub mod cluster;
pub mod kafka;
pub mod postgres;
pub mod rest;
pub mod worker;
