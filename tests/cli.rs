//! The `wasm-connect plugins` commands, run as the real binary.

use std::process::{Command, Output};

use wasm_connect_tests::{plugin_dir, plugin_file, wasm_connect_bin};

fn run(args: &[&str]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    Command::new(wasm_connect_bin())
        .args(args)
        .env("WASM_CONNECT_CACHE_DIR", cache.path())
        .env_remove("WASM_CONNECT_PLUGIN_PATH")
        .output()
        .expect("run wasm-connect")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn plugins_list_shows_name_version_kind_and_file() {
    let dir = plugin_dir();
    let out = stdout(&run(&["plugins", "list", "--dir", dir.to_str().unwrap()]));
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("NAME")
            && lines[0].contains("VERSION")
            && lines[0].contains("KIND")
            && lines[0].contains("FILE"),
        "{out}"
    );
    let datagen = lines
        .iter()
        .find(|l| l.starts_with("datagen "))
        .expect(&out);
    assert!(
        datagen.contains("0.1.0") && datagen.contains("source") && datagen.contains("datagen.wasm"),
        "{datagen}"
    );
    let sink = lines
        .iter()
        .find(|l| l.starts_with("file-sink "))
        .expect(&out);
    assert!(sink.contains("sink"), "{sink}");
}

#[test]
fn plugins_list_json_and_skipped_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(plugin_file("datagen"), dir.path().join("datagen.wasm")).unwrap();
    std::fs::write(dir.path().join("junk.wasm"), b"junk").unwrap();
    let out = stdout(&run(&[
        "plugins",
        "list",
        "--json",
        "--dir",
        dir.path().to_str().unwrap(),
    ]));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["plugins"][0]["name"], "datagen");
    assert_eq!(json["plugins"][0]["kind"], "source");
    assert_eq!(json["plugins"][0]["contract"], "wasm-connect:plugin@0.4.0");
    assert!(
        json["skipped"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("junk.wasm")
    );

    let human = stdout(&run(&[
        "plugins",
        "list",
        "--dir",
        dir.path().to_str().unwrap(),
    ]));
    assert!(
        human.contains("Skipped 1 file(s)") && human.contains("junk.wasm"),
        "{human}"
    );
}

#[test]
fn plugins_inspect_shows_every_config_key() {
    let dir = plugin_dir();
    let out = stdout(&run(&[
        "plugins",
        "inspect",
        "datagen",
        "--dir",
        dir.to_str().unwrap(),
    ]));
    assert!(out.starts_with("datagen 0.1.0 (source)"), "{out}");
    assert!(
        out.contains("topic  (STRING, required, importance HIGH)"),
        "{out}"
    );
    assert!(out.contains("count  (LONG, default -1"), "{out}");
    assert!(out.contains("allowed: sequence, none"), "{out}");
    assert!(out.contains("Its imports may ask for"), "{out}");
    // A plugin that opens sockets says so, with the grant it needs.
    let out = stdout(&run(&[
        "plugins",
        "inspect",
        "postgres-source",
        "--dir",
        dir.to_str().unwrap(),
    ]));
    assert!(
        out.contains("TCP connections: wasi:sockets/tcp (granted by sandbox.net.connect)"),
        "{out}"
    );

    // By file, as JSON.
    let file = plugin_file("file-sink");
    let out = stdout(&run(&[
        "plugins",
        "inspect",
        file.to_str().unwrap(),
        "--json",
    ]));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["name"], "file-sink");
    let file_key = json["config"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "file")
        .unwrap();
    assert_eq!(file_key["required"], true);
    assert_eq!(file_key["type"], "STRING");
    assert!(
        file_key["documentation"]
            .as_str()
            .unwrap()
            .contains("sandbox.fs.write")
    );
}

#[test]
fn plugins_inspect_errors_name_the_problem() {
    let dir = plugin_dir();
    let out = run(&[
        "plugins",
        "inspect",
        "no-such-plugin",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no plugin named no-such-plugin") && err.contains("datagen@0.1.0"),
        "{err}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let broken = tmp.path().join("broken.wasm");
    std::fs::write(&broken, b"\0asm\x01\0\0\0").unwrap();
    let out = run(&["plugins", "inspect", broken.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(broken.to_str().unwrap()) && err.contains("core WebAssembly module"),
        "{err}"
    );

    let out = run(&["plugins", "list", "--dir", "/no/such/dir"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/dir"));
}
