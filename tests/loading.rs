//! Loading plugin files: the first-party plugins and their specs, the clear rejection of files
//! that are not plugins of this contract, and the compile cache.

use std::path::Path;

use wasm_connect::plugin::{Kind, Plugin, World};
use wasm_connect::sandbox::{Origin, Sandbox};
use wasm_connect_tests::{load, plugin_file, sandbox};

#[tokio::test]
async fn first_party_plugins_load_with_their_specs() {
    let sandbox = sandbox();

    let datagen = load(&sandbox, &plugin_file("datagen")).await;
    assert_eq!(datagen.spec.name, "datagen");
    assert_eq!(datagen.spec.kind, Kind::Source);
    assert_eq!(datagen.world, World::Source);
    assert_eq!(datagen.contract.to_string(), "0.4.0");
    let topic = datagen
        .spec
        .config
        .iter()
        .find(|k| k.name == "topic")
        .unwrap();
    assert!(topic.required);
    assert_eq!(topic.ty, "STRING");
    let count = datagen
        .spec
        .config
        .iter()
        .find(|k| k.name == "count")
        .unwrap();
    assert_eq!((count.ty, count.default.as_deref()), ("LONG", Some("-1")));

    let source = load(&sandbox, &plugin_file("file-source")).await;
    assert_eq!(
        (source.spec.name.as_str(), source.spec.kind),
        ("file-source", Kind::Source)
    );
    let tail = source
        .spec
        .config
        .iter()
        .find(|k| k.name == "tail")
        .unwrap();
    assert_eq!(
        (tail.ty, tail.default.as_deref()),
        ("BOOLEAN", Some("true"))
    );

    let sink = load(&sandbox, &plugin_file("file-sink")).await;
    assert_eq!(
        (sink.spec.name.as_str(), sink.spec.kind),
        ("file-sink", Kind::Sink)
    );
    assert_eq!(sink.world, World::Sink);
    assert!(
        sink.spec
            .config
            .iter()
            .any(|k| k.name == "file" && k.required)
    );
}

/// Load `bytes` from a file called `name` and return the error message, which must name the file.
async fn rejection(name: &str, bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    let err = Plugin::load(&sandbox(), &path).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains(&path.display().to_string()),
        "the message must name the file: {message}"
    );
    message
}

#[tokio::test]
async fn rejects_a_core_module() {
    let module = wat::parse_str("(module (func (export \"poll\")))").unwrap();
    let message = rejection("core.wasm", &module).await;
    assert!(
        message.contains("core WebAssembly module, not a component"),
        "{message}"
    );
    assert!(message.contains("wasm32-wasip2"), "{message}");
}

#[tokio::test]
async fn rejects_a_truncated_file() {
    let bytes = std::fs::read(plugin_file("datagen")).unwrap();
    let message = rejection("datagen.wasm", &bytes[..bytes.len() / 2]).await;
    assert!(message.contains("truncated"), "{message}");

    let message = rejection("tiny.wasm", &bytes[..6]).await;
    assert!(message.contains("too short"), "{message}");
}

#[tokio::test]
async fn rejects_files_that_are_not_webassembly() {
    let message = rejection("notes.wasm", b"this is not a component at all").await;
    assert!(message.contains("not a WebAssembly file"), "{message}");
}

#[tokio::test]
async fn rejects_a_component_of_another_world() {
    let other = wat::parse_str(
        r#"(component
            (core module $m (func (export "run") (result i32) i32.const 0))
            (core instance $i (instantiate $m))
            (func $run (result (result)) (canon lift (core func $i "run")))
            (instance $cli (export "run" (func $run)))
            (export "wasi:cli/run@0.2.0" (instance $cli))
        )"#,
    )
    .unwrap();
    let message = rejection("other.wasm", &other).await;
    assert!(
        message.contains("does not implement a wasm-connect:plugin world"),
        "{message}"
    );
    assert!(message.contains("wasi:cli/run@0.2.0"), "{message}");
}

#[tokio::test]
async fn rejects_a_newer_contract_version() {
    let newer = wat::parse_str(
        r#"(component
            (instance $c)
            (instance $s)
            (export "wasm-connect:plugin/connector@1.0.0" (instance $c))
            (export "wasm-connect:plugin/source@1.0.0" (instance $s))
        )"#,
    )
    .unwrap();
    let message = rejection("future.wasm", &newer).await;
    assert!(message.contains("wasm-connect:plugin@1.0.0"), "{message}");
    assert!(message.contains("newer than"), "{message}");
    assert!(message.contains("upgrade wasm-connect"), "{message}");
}

#[tokio::test]
async fn second_load_comes_from_the_compile_cache() {
    let cache = tempfile::tempdir().unwrap();
    let file = plugin_file("file-sink");

    let first = Sandbox::new(Some(cache.path().to_owned())).unwrap();
    let plugin = load(&first, &file).await;
    assert_eq!(plugin.origin, Origin::Compiled);
    assert_eq!(first.compilations(), 1);
    let entries = std::fs::read_dir(cache.path()).unwrap().count();
    assert_eq!(entries, 1, "one compiled artifact is stored");

    // A new sandbox over the same directory is what a restarted worker sees.
    let restarted = Sandbox::new(Some(cache.path().to_owned())).unwrap();
    let plugin = load(&restarted, &file).await;
    assert_eq!(plugin.origin, Origin::Cached);
    assert_eq!(
        restarted.compilations(),
        0,
        "the second load must not compile"
    );
    assert_eq!(plugin.spec.name, "file-sink");

    // Different bytes are a different entry, never a stale hit.
    let other = load(&restarted, &plugin_file("datagen")).await;
    assert_eq!(other.origin, Origin::Compiled);
    assert_eq!(restarted.compilations(), 1);
}

#[tokio::test]
async fn a_corrupt_cache_entry_is_discarded_and_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let file = plugin_file("datagen");
    let first = Sandbox::new(Some(cache.path().to_owned())).unwrap();
    load(&first, &file).await;
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&entry, b"garbage").unwrap();

    let restarted = Sandbox::new(Some(cache.path().to_owned())).unwrap();
    let plugin = load(&restarted, Path::new(&file)).await;
    assert_eq!(plugin.origin, Origin::Compiled);
    assert_eq!(plugin.spec.name, "datagen");
}
