//! The first-party connectors running in the sandbox: task splitting (and the host's
//! enforcement of tasks.max), reading and writing files within granted directories only,
//! resuming from stored offsets, and deterministic generated data.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use wasm_connect::sandbox::wit::types::{Data, PluginError, SinkRecord, TopicPartitionOffset};
use wasm_connect::sandbox::{
    CallError, ConnectorInstance, Grants, InstanceContext, OffsetReader, PutBatch, Sandbox,
    SinkTaskInstance, SourceTaskInstance, Tags,
};
use wasm_connect_tests::{config, get, load, plugin_file, sandbox, test_plugin_file};

/// Offsets served from a map, as the worker's offset store will.
struct FixedOffsets(HashMap<String, String>);

impl OffsetReader for FixedOffsets {
    fn offset(&self, partition: &str) -> Option<String> {
        self.0.get(partition).cloned()
    }
}

fn context(connector_config: &[(String, String)], task: Option<u32>) -> InstanceContext {
    let mut ctx = InstanceContext::bare("test-connector");
    ctx.tags = Tags {
        connector: "test-connector".into(),
        task,
    };
    ctx.grants = Grants::from_config(connector_config).expect("valid grants");
    ctx
}

/// A connector instance of `plugin`, created with `cfg`.
async fn connector(sandbox: &Sandbox, plugin: &str, cfg: &[(String, String)]) -> ConnectorInstance {
    let plugin = load(sandbox, &plugin_file(plugin)).await;
    let mut instance = ConnectorInstance::new(
        sandbox,
        &plugin.component,
        plugin.world,
        plugin.contract,
        &context(cfg, None),
    )
    .await
    .unwrap();
    instance.create(&cfg.to_vec()).await.unwrap();
    instance
}

async fn source_task(
    sandbox: &Sandbox,
    plugin: &str,
    ctx: &InstanceContext,
    cfg: &[(String, String)],
) -> Result<SourceTaskInstance, CallError> {
    let plugin = load(sandbox, &plugin_file(plugin)).await;
    SourceTaskInstance::create(
        sandbox,
        &plugin.component,
        plugin.contract,
        ctx,
        &cfg.to_vec(),
    )
    .await
    .unwrap()
}

fn text(data: &Option<Data>) -> String {
    match data {
        Some(Data::Text(s)) | Some(Data::Json(s)) => s.clone(),
        other => panic!("expected text, got {other:?}"),
    }
}

/// `count` files with `lines` lines each in a new temporary directory.
fn files(count: usize, lines: usize) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let paths = (0..count)
        .map(|i| {
            let path = dir.path().join(format!("in-{i}.txt"));
            let body: String = (0..lines).map(|l| format!("file {i} line {l}\n")).collect();
            std::fs::write(&path, body).unwrap();
            path.display().to_string()
        })
        .collect();
    (dir, paths)
}

fn task_files(task_config: &[(String, String)]) -> Vec<String> {
    serde_json::from_str(get(task_config, "file-source.task.files").unwrap()).unwrap()
}

#[tokio::test]
async fn file_source_splits_five_files_over_three_tasks_as_2_2_1() {
    let sandbox = sandbox();
    let (dir, paths) = files(5, 1);
    let cfg = config(&[
        ("topic", "lines".to_owned()),
        ("files", paths.join(",")),
        ("sandbox.fs.read", dir.path().display().to_string()),
    ]);
    let mut instance = connector(&sandbox, "file-source", &cfg).await;
    let tasks = instance.task_configs(3).await.unwrap();
    let split: Vec<Vec<String>> = tasks.iter().map(|t| task_files(t)).collect();
    assert_eq!(
        split.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![2, 2, 1],
        "{split:?}"
    );
    assert_eq!(split.concat(), paths, "every file exactly once, in order");
}

#[tokio::test]
async fn file_source_runs_fewer_tasks_when_work_does_not_split_further() {
    let sandbox = sandbox();
    let (dir, paths) = files(3, 1);
    // The directory form: every file in it.
    let cfg = config(&[
        ("topic", "lines".to_owned()),
        ("directory", dir.path().display().to_string()),
        ("sandbox.fs.read", dir.path().display().to_string()),
    ]);
    let mut instance = connector(&sandbox, "file-source", &cfg).await;
    let tasks = instance.task_configs(10).await.unwrap();
    assert_eq!(tasks.len(), 3);
    let all: Vec<String> = tasks.iter().flat_map(|t| task_files(t)).collect();
    assert_eq!(all, paths);
}

#[tokio::test]
async fn datagen_splits_into_tasks_max_tasks() {
    let sandbox = sandbox();
    let cfg = config(&[("topic", "t"), ("count", "10")]);
    let mut instance = connector(&sandbox, "datagen", &cfg).await;
    let tasks = instance.task_configs(4).await.unwrap();
    assert_eq!(tasks.len(), 4);
    let indexes: Vec<&str> = tasks
        .iter()
        .map(|t| get(t, "datagen.task.index").unwrap())
        .collect();
    assert_eq!(indexes, vec!["0", "1", "2", "3"]);
}

#[tokio::test]
async fn the_host_refuses_more_task_configs_than_tasks_max() {
    let sandbox = sandbox();
    let plugin = load(&sandbox, &test_plugin_file("too-many-tasks")).await;
    let cfg = config(&[("name", "greedy")]);
    let mut instance = ConnectorInstance::new(
        &sandbox,
        &plugin.component,
        plugin.world,
        plugin.contract,
        &context(&cfg, None),
    )
    .await
    .unwrap();
    instance.create(&cfg).await.unwrap();
    let err = instance.task_configs(2).await.unwrap_err();
    assert!(matches!(err, CallError::Contract { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("3 task configs") && message.contains("tasks.max is 2"),
        "{message}"
    );
}

#[tokio::test]
async fn file_source_cannot_read_a_path_it_was_not_granted() {
    let sandbox = sandbox();
    let (dir, paths) = files(1, 3);
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("secret.txt");
    std::fs::write(&secret, "top secret\n").unwrap();
    let granted = dir.path().display().to_string();

    let attempts = [
        // No grant at all.
        (paths[0].clone(), None),
        // A file outside the only granted directory.
        ("/etc/passwd".to_owned(), Some(granted.clone())),
        (secret.display().to_string(), Some(granted.clone())),
        // Escaping the granted directory with `..`.
        (
            format!(
                "{granted}/../{}/secret.txt",
                secret_dir.path().file_name().unwrap().to_str().unwrap()
            ),
            Some(granted.clone()),
        ),
    ];
    for (file, grant) in attempts {
        let mut cfg = config(&[
            ("topic", "t".to_owned()),
            (
                "file-source.task.files",
                serde_json::to_string(&[&file]).unwrap(),
            ),
        ]);
        if let Some(grant) = &grant {
            cfg.push(("sandbox.fs.read".into(), grant.clone()));
        }
        let ctx = context(&cfg, Some(0));
        let outcome = source_task(&sandbox, "file-source", &ctx, &cfg).await;
        match outcome {
            Err(CallError::Plugin {
                error: PluginError::InvalidConfig(errors),
                ..
            }) => {
                let message = &errors[0].message;
                assert!(
                    message.contains(&file) && message.contains("sandbox.fs.read"),
                    "{message}"
                );
            }
            Ok(mut task) => {
                let records = task.poll(100).await.unwrap_or_default();
                panic!(
                    "reading {file} with grant {grant:?} must fail, got {} records",
                    records.len()
                );
            }
            Err(other) => panic!("unexpected error for {file}: {other}"),
        }
    }
}

#[tokio::test]
async fn a_symlink_out_of_the_granted_directory_is_not_followed() {
    let sandbox = sandbox();
    let granted = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "top secret\n").unwrap();
    let link = granted.path().join("link.txt");
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), &link).unwrap();
    let cfg = config(&[
        ("topic", "t".to_owned()),
        (
            "file-source.task.files",
            serde_json::to_string(&[link.display().to_string()]).unwrap(),
        ),
        ("sandbox.fs.read", granted.path().display().to_string()),
        ("tail", "false".to_owned()),
    ]);
    let ctx = context(&cfg, Some(0));
    match source_task(&sandbox, "file-source", &ctx, &cfg).await {
        Err(CallError::Plugin { .. }) => {}
        Ok(mut task) => {
            let records = task.poll(100).await;
            assert!(
                !matches!(&records, Ok(r) if r.iter().any(|r| text(&r.value).contains("secret"))),
                "the secret leaked: {records:?}"
            );
        }
        Err(other) => panic!("unexpected: {other}"),
    }
}

#[tokio::test]
async fn file_source_reads_granted_files_resumes_and_tails() {
    let sandbox = sandbox();
    let (dir, paths) = files(2, 3);
    let task_cfg = config(&[
        ("topic", "t".to_owned()),
        (
            "file-source.task.files",
            serde_json::to_string(&paths).unwrap(),
        ),
        ("sandbox.fs.read", dir.path().display().to_string()),
    ]);

    // From the start: every line of both files.
    let ctx = context(&task_cfg, Some(0));
    let mut task = source_task(&sandbox, "file-source", &ctx, &task_cfg)
        .await
        .unwrap();
    let records = task.poll(100).await.unwrap();
    let mut lines: Vec<String> = records.iter().map(|r| text(&r.value)).collect();
    lines.sort();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[0], "file 0 line 0");
    let first = records
        .iter()
        .find(|r| text(&r.value) == "file 1 line 0")
        .unwrap();
    let partition: serde_json::Value = serde_json::from_str(&first.source_partition).unwrap();
    assert_eq!(partition, serde_json::json!({"file": paths[1]}));
    let offset: serde_json::Value = serde_json::from_str(&first.source_offset).unwrap();
    assert_eq!(
        offset,
        serde_json::json!({"position": "file 1 line 0\n".len()})
    );

    // Tail: appended lines show up; an unfinished line waits for its newline.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&paths[0])
        .unwrap();
    write!(f, "appended\nunfinish").unwrap();
    let more = task.poll(100).await.unwrap();
    assert_eq!(
        more.iter().map(|r| text(&r.value)).collect::<Vec<_>>(),
        vec!["appended"]
    );
    writeln!(f, "ed").unwrap();
    let more = task.poll(100).await.unwrap();
    assert_eq!(
        more.iter().map(|r| text(&r.value)).collect::<Vec<_>>(),
        vec!["unfinished"]
    );
    assert!(task.poll(100).await.unwrap().is_empty());
    task.stop().await.unwrap();

    // Resume mid-file from a stored offset: after the second line of file 0.
    let position = "file 0 line 0\nfile 0 line 1\n".len();
    let mut stored = HashMap::new();
    stored.insert(
        serde_json::json!({"file": paths[0]}).to_string(),
        serde_json::json!({"position": position}).to_string(),
    );
    let mut ctx = context(&task_cfg, Some(0));
    ctx.offsets = Arc::new(FixedOffsets(stored));
    let mut task = source_task(&sandbox, "file-source", &ctx, &task_cfg)
        .await
        .unwrap();
    let records = task.poll(100).await.unwrap();
    let from_file0: Vec<String> = records
        .iter()
        .map(|r| text(&r.value))
        .filter(|l| !l.starts_with("file 1"))
        .collect();
    assert_eq!(from_file0, vec!["file 0 line 2", "appended", "unfinished"]);
}

#[tokio::test]
async fn file_source_without_tail_emits_a_final_line_without_newline() {
    let sandbox = sandbox();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("last.txt");
    std::fs::write(&path, "one\ntwo").unwrap();
    let cfg = config(&[
        ("topic", "t".to_owned()),
        ("tail", "false".to_owned()),
        (
            "file-source.task.files",
            serde_json::to_string(&[path.display().to_string()]).unwrap(),
        ),
        ("sandbox.fs.read", dir.path().display().to_string()),
    ]);
    let mut task = source_task(&sandbox, "file-source", &context(&cfg, Some(0)), &cfg)
        .await
        .unwrap();
    let lines: Vec<String> = task
        .poll(10)
        .await
        .unwrap()
        .iter()
        .map(|r| text(&r.value))
        .collect();
    assert_eq!(lines, vec!["one", "two"]);
}

#[tokio::test]
async fn datagen_is_deterministic_keyed_and_resumes_from_its_offset() {
    let sandbox = sandbox();
    let base = config(&[
        ("topic", "t"),
        ("count", "10"),
        ("seed", "42"),
        ("value.size", "80"),
    ]);
    let mut instance = connector(&sandbox, "datagen", &base).await;
    let tasks = instance.task_configs(2).await.unwrap();

    let mut keys = Vec::new();
    let mut first_values = Vec::new();
    for (i, task_cfg) in tasks.iter().enumerate() {
        let ctx = context(task_cfg, Some(i as u32));
        let mut task = source_task(&sandbox, "datagen", &ctx, task_cfg)
            .await
            .unwrap();
        let records = task.poll(100).await.unwrap();
        assert_eq!(records.len(), 5, "10 records split over 2 tasks");
        assert!(
            task.poll(100).await.unwrap().is_empty(),
            "the count is a total"
        );
        for r in &records {
            keys.push(text(&r.key).parse::<u64>().unwrap());
            let value: serde_json::Value = serde_json::from_str(&text(&r.value)).unwrap();
            assert_eq!(value["task"], i as u64);
            assert_eq!(text(&r.value).len(), 80);
        }
        first_values.push(text(&records[0].value));
    }
    keys.sort();
    assert_eq!(
        keys,
        (0..10).collect::<Vec<_>>(),
        "disjoint key spaces cover every id once"
    );

    // Same config, same records.
    let ctx = context(&tasks[0], Some(0));
    let mut again = source_task(&sandbox, "datagen", &ctx, &tasks[0])
        .await
        .unwrap();
    assert_eq!(
        text(&again.poll(1).await.unwrap()[0].value),
        first_values[0]
    );

    // Resume after seq 2 of task 0: continues with seq 3.
    let mut stored = HashMap::new();
    stored.insert(
        serde_json::json!({"task": 0, "tasks": 2}).to_string(),
        serde_json::json!({"seq": 2}).to_string(),
    );
    let mut ctx = context(&tasks[0], Some(0));
    ctx.offsets = Arc::new(FixedOffsets(stored));
    let mut resumed = source_task(&sandbox, "datagen", &ctx, &tasks[0])
        .await
        .unwrap();
    let records = resumed.poll(100).await.unwrap();
    let seqs: Vec<u64> = records
        .iter()
        .map(|r| {
            serde_json::from_str::<serde_json::Value>(&r.source_offset).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, vec![3, 4]);
}

#[tokio::test]
async fn the_host_refuses_more_records_than_asked_for() {
    // datagen honours max-records; the check is the host's, so ask for fewer than it has and
    // verify the batch is capped rather than trusted.
    let sandbox = sandbox();
    let cfg = config(&[
        ("topic", "t"),
        ("datagen.task.index", "0"),
        ("datagen.task.count", "1"),
    ]);
    let mut task = source_task(&sandbox, "datagen", &context(&cfg, Some(0)), &cfg)
        .await
        .unwrap();
    assert_eq!(task.poll(7).await.unwrap().len(), 7);
}

fn sink_record(topic: &str, partition: i32, offset: i64, value: &str) -> SinkRecord {
    SinkRecord {
        topic: topic.into(),
        partition,
        offset,
        key: None,
        value: Some(Data::Text(value.into())),
        headers: Vec::new(),
        timestamp: None,
    }
}

async fn sink_task(
    sandbox: &Sandbox,
    cfg: &[(String, String)],
) -> Result<SinkTaskInstance, CallError> {
    let plugin = load(sandbox, &plugin_file("file-sink")).await;
    SinkTaskInstance::create(
        sandbox,
        &plugin.component,
        plugin.contract,
        &context(cfg, Some(0)),
        &cfg.to_vec(),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn file_sink_writes_lines_and_returns_flushed_offsets() {
    let sandbox = sandbox();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out-{topic}-{partition}.txt");
    let cfg = config(&[
        ("file", out.display().to_string()),
        ("sandbox.fs.write", dir.path().display().to_string()),
    ]);
    let mut task = sink_task(&sandbox, &cfg).await.unwrap();
    let batch = vec![
        sink_record("a", 0, 0, "first"),
        sink_record("a", 1, 0, "other partition"),
        sink_record("a", 0, 1, "second"),
    ];
    let batch = PutBatch::from_records(&batch).unwrap();
    assert!(task.put(&batch).await.unwrap().is_empty());
    let offsets = vec![
        TopicPartitionOffset {
            topic: "a".into(),
            partition: 0,
            offset: 2,
        },
        TopicPartitionOffset {
            topic: "a".into(),
            partition: 1,
            offset: 1,
        },
    ];
    assert_eq!(task.flush(&offsets).await.unwrap(), offsets);
    let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).unwrap();
    assert_eq!(read("out-a-0.txt"), "first\nsecond\n");
    assert_eq!(read("out-a-1.txt"), "other partition\n");
    task.stop().await.unwrap();
}

#[tokio::test]
async fn file_sink_cannot_write_outside_its_grant() {
    let sandbox = sandbox();
    let granted = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("out.txt");
    for grant in [
        ("sandbox.fs.write", granted.path()),
        ("sandbox.fs.read", elsewhere.path()),
    ] {
        let cfg = config(&[
            ("file".to_owned(), target.display().to_string()),
            (grant.0.to_owned(), grant.1.display().to_string()),
        ]);
        let mut task = sink_task(&sandbox, &cfg).await.unwrap();
        let batch = PutBatch::from_records(&[sink_record("a", 0, 0, "x")]).unwrap();
        let err = task.put(&batch).await.unwrap_err();
        assert!(err.to_string().contains("sandbox.fs.write"), "{err}");
        assert!(!Path::new(&target).exists(), "nothing may be written");
    }
}
