//! The plugin directory: loaded on start, and followed while running (files added, replaced,
//! removed) with broken files reported and skipped.

use std::path::Path;
use std::time::Duration;

use wasm_connect::registry::Registry;
use wasm_connect_tests::{plugin_file, sandbox};

/// Copy `from` to `to` the way an operator's deploy tool would: write aside, rename in place.
fn deploy(from: &Path, to: &Path) {
    let tmp = to.with_extension("partial");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

/// Wait (up to 30 s) until the registry satisfies `done`.
async fn eventually(registry: &Registry, what: &str, done: impl Fn(&Registry) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done(registry) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn names(registry: &Registry) -> Vec<String> {
    registry
        .plugins()
        .iter()
        .map(|p| p.spec.name.clone())
        .collect()
}

#[tokio::test]
async fn loads_every_file_and_skips_broken_ones() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["datagen", "file-source", "file-sink"] {
        deploy(&plugin_file(name), &dir.path().join(format!("{name}.wasm")));
    }
    std::fs::write(
        dir.path().join("broken.wasm"),
        b"\0asm\x0d\x00\x01\x00garbage",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.txt"), b"not a plugin, not a .wasm").unwrap();

    let registry = Registry::new(sandbox(), dir.path());
    let report = registry.scan().await.unwrap();
    assert_eq!(report.added.len(), 3);
    assert_eq!(
        names(&registry),
        vec!["datagen", "file-sink", "file-source"]
    );
    let failures = registry.failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].path, dir.path().join("broken.wasm"));

    let found = registry.find("datagen", None).unwrap();
    assert_eq!(found.spec.version, "0.1.0");
    assert!(registry.find("datagen", Some("0.1.0")).is_some());
    assert!(registry.find("datagen", Some("9.9.9")).is_none());
    assert!(registry.find("nope", None).is_none());

    // Nothing changed: a second scan reports nothing.
    let again = registry.scan().await.unwrap();
    assert!(!again.changed() && again.failed.is_empty());
}

#[tokio::test]
async fn a_missing_directory_is_a_clear_error() {
    let registry = Registry::new(sandbox(), "/no/such/plugin/dir");
    let err = registry.scan().await.unwrap_err();
    assert!(
        err.contains("/no/such/plugin/dir") && err.contains("plugin.path"),
        "{err}"
    );
}

#[tokio::test]
async fn follows_files_added_replaced_and_removed_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::new(sandbox(), dir.path());
    registry.scan().await.unwrap();
    assert!(registry.plugins().is_empty());
    let mut changes = registry.subscribe();
    let watcher = registry.watch(Duration::from_millis(100));

    // Added.
    let slot = dir.path().join("connector.wasm");
    deploy(&plugin_file("datagen"), &slot);
    eventually(&registry, "datagen to appear", |r| {
        r.find("datagen", None).is_some()
    })
    .await;
    assert!(changes.has_changed().unwrap());
    changes.mark_unchanged();

    // Replaced in place by another plugin.
    deploy(&plugin_file("file-sink"), &slot);
    eventually(&registry, "datagen replaced by file-sink", |r| {
        r.find("file-sink", None).is_some() && r.find("datagen", None).is_none()
    })
    .await;
    assert!(changes.has_changed().unwrap());

    // A broken file next to it is reported and does not disturb the others.
    std::fs::write(
        dir.path().join("half.wasm"),
        &std::fs::read(plugin_file("datagen")).unwrap()[..1000],
    )
    .unwrap();
    eventually(&registry, "the broken file to be reported", |r| {
        r.failures().len() == 1
    })
    .await;
    assert_eq!(names(&registry), vec!["file-sink"]);

    // The broken file is fixed by a complete copy.
    deploy(&plugin_file("datagen"), &dir.path().join("half.wasm"));
    eventually(&registry, "the fixed file to load", |r| {
        r.failures().is_empty() && r.find("datagen", None).is_some()
    })
    .await;

    // Removed.
    std::fs::remove_file(&slot).unwrap();
    eventually(&registry, "file-sink to disappear", |r| {
        r.find("file-sink", None).is_none()
    })
    .await;
    assert_eq!(names(&registry), vec!["datagen"]);
    watcher.abort();
}
