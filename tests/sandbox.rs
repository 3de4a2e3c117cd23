//! The sandbox around a task: its output lands in the worker's logs tagged with connector and
//! task, and the default limits stop a runaway call and a memory hog without harming the host.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasm_connect::sandbox::{CallError, InstanceContext, Limits, SourceTaskInstance, Tags};
use wasm_connect_tests::{config, load, sandbox, test_plugin_file};

/// A log sink shared with the global subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn captured_logs() -> Captured {
    static LOGS: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Captured::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        logs
    })
    .clone()
}

async fn task(mode: &str, limits: Limits, task_id: u32) -> SourceTaskInstance {
    let sandbox = sandbox();
    let plugin = load(&sandbox, &test_plugin_file("misbehave")).await;
    let mut ctx = InstanceContext::bare("noisy");
    ctx.tags = Tags {
        connector: "noisy".into(),
        task: Some(task_id),
    };
    ctx.limits = limits;
    SourceTaskInstance::create(
        &sandbox,
        &plugin.component,
        plugin.contract,
        &ctx,
        &config(&[("mode", mode)]),
    )
    .await
    .unwrap()
    .unwrap()
}

#[tokio::test]
async fn guest_output_and_log_calls_reach_the_host_log_tagged() {
    let logs = captured_logs();
    let mut task = task("log", Limits::default(), 3).await;
    task.poll(10).await.unwrap();
    task.stop().await.unwrap();
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    for (level, message) in [
        ("INFO", "hello through the log import"),
        ("INFO", "hello through stdout"),
        ("WARN", "hello through stderr"),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(message))
            .unwrap_or_else(|| panic!("no log line with {message:?} in:\n{text}"));
        assert!(line.contains(level), "{line}");
        assert!(
            line.contains("connector=noisy") && line.contains("task=task-3"),
            "{line}"
        );
    }
}

#[tokio::test]
async fn a_call_that_never_returns_traps_at_its_deadline() {
    let limits = Limits {
        call_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let mut task = task("spin", limits, 0).await;
    let started = Instant::now();
    let err = task.poll(10).await.unwrap_err();
    assert!(matches!(err, CallError::Trap { .. }), "{err:?}");
    assert!(err.to_string().contains("CPU deadline of 300 ms"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the deadline stopped it"
    );
    // The instance is poisoned, not reused.
    let again = task.poll(10).await.unwrap_err();
    assert!(matches!(again, CallError::Poisoned { .. }), "{again:?}");
}

#[tokio::test]
async fn time_spent_waiting_in_host_calls_does_not_count_against_the_deadline() {
    let limits = Limits {
        call_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let sandbox = sandbox();
    let plugin = load(&sandbox, &test_plugin_file("misbehave")).await;
    let mut ctx = InstanceContext::bare("sleepy");
    ctx.limits = limits;
    let mut task = SourceTaskInstance::create(
        &sandbox,
        &plugin.component,
        plugin.contract,
        &ctx,
        &config(&[("mode", "sleep"), ("sleep.ms", "1500")]),
    )
    .await
    .unwrap()
    .unwrap();
    let started = Instant::now();
    // Sleeping is a wait in a WASI host call: seven times the CPU deadline, yet no trap.
    assert_eq!(task.poll(10).await.unwrap().len(), 0);
    assert!(started.elapsed() >= Duration::from_millis(1500));
}

#[tokio::test]
async fn a_memory_hog_traps_at_its_memory_limit() {
    let limits = Limits {
        memory_bytes: 32 * 1024 * 1024,
        ..Limits::default()
    };
    let mut task = task("alloc", limits, 0).await;
    let err = task.poll(10).await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, CallError::Trap { .. }), "{err:?}");
    assert!(
        message.contains("over its limit of 33554432 bytes"),
        "{message}"
    );
}

#[tokio::test]
async fn a_panic_is_a_trap_with_the_panic_message_in_the_logs() {
    let logs = captured_logs();
    let mut task = task("panic", Limits::default(), 7).await;
    let err = task.poll(10).await.unwrap_err();
    assert!(
        matches!(
            err,
            CallError::Trap {
                function: "poll",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("unreachable"), "{err}");
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("misbehave panicked on purpose"))
        .unwrap_or_else(|| panic!("the panic message is not in the logs:\n{text}"));
    assert!(
        line.contains("connector=noisy") && line.contains("task=task-7"),
        "{line}"
    );
}
