//! Bad worker and connector configs: the worker refuses to start and says which file, key and
//! value are wrong, and what to do.

use std::fs;
use std::process::Command;

use wasm_connect_tests::{kafka, plugin_dir, wasm_connect_bin};

fn standalone(dir: &std::path::Path, worker: &str, connectors: &[(&str, &str)]) -> (bool, String) {
    let worker_file = dir.join("worker.properties");
    fs::write(&worker_file, worker).unwrap();
    let mut cmd = Command::new(wasm_connect_bin());
    cmd.arg("standalone").arg(&worker_file);
    for (name, text) in connectors {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        cmd.arg(path);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn base_worker(dir: &std::path::Path) -> String {
    // Any free port: REST listens before connector files are checked (they need the plugins),
    // and these tests run side by side.
    format!(
        "bootstrap.servers={}\nplugin.path={}\ndata.dir={}\nlisteners=http://127.0.0.1:0\n",
        kafka::bootstrap(),
        plugin_dir().display(),
        dir.join("data").display()
    )
}

#[test]
fn bad_worker_values_name_the_file_key_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = standalone(
        dir.path(),
        "offset.flush.interval.ms=soon\nvalue.converter=avro\n",
        &[],
    );
    assert!(!ok);
    assert!(err.contains("worker.properties"), "{err}");
    assert!(
        err.contains("offset.flush.interval.ms: \"soon\" is not a positive integer"),
        "{err}"
    );
    assert!(
        err.contains("value.converter: unknown converter \"avro\""),
        "{err}"
    );
}

#[test]
fn a_missing_plugin_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = standalone(
        dir.path(),
        &format!(
            "bootstrap.servers=127.0.0.1:1\nplugin.path=/no/such/plugins\ndata.dir={}\n",
            dir.path().join("data").display()
        ),
        &[],
    );
    assert!(!ok);
    assert!(
        err.contains("/no/such/plugins") && err.contains("plugin.path"),
        "{err}"
    );
}

#[test]
fn an_unknown_plugin_lists_the_available_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = standalone(
        dir.path(),
        &base_worker(dir.path()),
        &[("c.properties", "name=c\nconnector.class=FileStreamSource\n")],
    );
    assert!(!ok);
    assert!(err.contains("c.properties"), "{err}");
    assert!(
        err.contains("connector.class: no plugin named FileStreamSource"),
        "{err}"
    );
    assert!(err.contains("datagen@0.1.0"), "{err}");
}

#[test]
fn missing_and_mistyped_connector_keys_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = standalone(
        dir.path(),
        &base_worker(dir.path()),
        &[(
            "d.properties",
            "name=d\nconnector.class=datagen\ncount=lots\nkey.type=uuid\n",
        )],
    );
    assert!(!ok);
    assert!(err.contains("d.properties"), "{err}");
    assert!(err.contains("topic: is required by datagen"), "{err}");
    assert!(err.contains("count: \"lots\" is not a valid LONG"), "{err}");
    assert!(
        err.contains("key.type: \"uuid\" is not one of the allowed values: sequence, none"),
        "{err}"
    );
}

#[test]
fn connector_files_without_name_or_class_and_bad_formats() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = standalone(
        dir.path(),
        &base_worker(dir.path()),
        &[("e.properties", "tasks.max=0\n")],
    );
    assert!(!ok);
    assert!(err.contains("e.properties"), "{err}");
    assert!(err.contains("name: is required"), "{err}");
    assert!(err.contains("connector.class: is required"), "{err}");
    assert!(
        err.contains("tasks.max: \"0\" is not a positive integer"),
        "{err}"
    );

    let (ok, err) = standalone(
        dir.path(),
        &base_worker(dir.path()),
        &[("f.json", "{\"name\": \"f\", ")],
    );
    assert!(!ok);
    assert!(
        err.contains("f.json") && err.contains("invalid JSON"),
        "{err}"
    );

    let (ok, err) = standalone(
        dir.path(),
        &base_worker(dir.path()),
        &[("g.yaml", "name: g")],
    );
    assert!(!ok);
    assert!(
        err.contains("g.yaml") && err.contains("unknown config format"),
        "{err}"
    );
}

#[test]
fn a_sink_without_topics_and_a_bad_grant_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, err) = standalone(
        dir.path(),
        &base_worker(dir.path()),
        &[(
            "s.properties",
            "name=s\nconnector.class=file-sink\nfile=/tmp/x.txt\nsandbox.fs.write=relative/dir\n",
        )],
    );
    assert!(!ok);
    assert!(err.contains("s.properties"), "{err}");
    assert!(
        err.contains("topics: a sink connector needs topics"),
        "{err}"
    );
    assert!(
        err.contains("sandbox.fs.write: \"relative/dir\" is not an absolute path"),
        "{err}"
    );
}

#[test]
fn every_key_in_the_key_table_is_documented_with_its_default() {
    use wasm_connect::config::keys::{KEYS, KeyDefault, Scope};
    let docs =
        fs::read_to_string(wasm_connect_tests::repo_root().join("docs/configuration.md")).unwrap();
    for key in KEYS {
        if key.scope == Scope::Connector {
            // The connector keys' table: the key appears in a row's first column.
            let listed = docs.lines().any(|l| {
                l.starts_with("| ")
                    && l.split(" | ")
                        .next()
                        .is_some_and(|first| first.contains(&format!("`{}`", key.name)))
            });
            assert!(
                listed,
                "docs/configuration.md lists no connector key {}",
                key.name
            );
            continue;
        }
        let row = docs
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", key.name)))
            .unwrap_or_else(|| panic!("docs/configuration.md has no row for {}", key.name));
        if let KeyDefault::Value(default) = key.default {
            assert!(
                row.contains(&format!("`{default}`")),
                "the documented default of {} is not {default}: {row}",
                key.name
            );
        }
    }
}

#[test]
fn a_second_worker_on_a_data_directory_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let settings = [
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugin_dir().display().to_string()),
    ];
    let first_dir = dir.path().join("first");
    fs::create_dir_all(&first_dir).unwrap();
    let mut first = wasm_connect_tests::worker::Worker::start(&first_dir, &settings, &[]);
    first.rest_url(std::time::Duration::from_secs(120));
    // The same data directory (the support worker uses <dir>/data).
    let second_dir = dir.path().join("second");
    fs::create_dir_all(&second_dir).unwrap();
    let (ok, err) = standalone(&second_dir, &base_worker(&first_dir), &[]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("is in use by another wasm-connect worker") && err.contains("data.dir"),
        "{err}"
    );
    let (status, log) = first.stop();
    assert!(status.success(), "the first worker runs on: {log}");
    // Once it is gone, the directory is free again.
    let mut again = wasm_connect_tests::worker::Worker::start(&first_dir, &settings, &[]);
    again.rest_url(std::time::Duration::from_secs(120));
    let (status, log) = again.stop();
    assert!(status.success(), "{log}");
}
