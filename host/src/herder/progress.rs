//! Periodic progress lines (records and records/s per connector) for people watching a run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Herder;

/// Print one line per connector every `every` until the task is aborted.
pub fn report_progress(herder: Arc<Herder>, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last: HashMap<String, (u64, Instant)> = HashMap::new();
        let mut ticker = tokio::time::interval(every);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            for (status, total) in herder.statuses().await {
                let failed = status
                    .tasks
                    .iter()
                    .filter(|t| t.state.state == "FAILED")
                    .count();
                let connector = ProgressView {
                    name: status.name,
                    kind: status.kind,
                    tasks: status.tasks.len(),
                };
                let now = Instant::now();
                let (before, since) = last
                    .get(&connector.name)
                    .copied()
                    .unwrap_or((0, now - every));
                if total == before && last.contains_key(&connector.name) && failed == 0 {
                    continue;
                }
                let rate = (total - before.min(total)) as f64
                    / now.duration_since(since).as_secs_f64().max(0.001);
                let verb = if connector.kind == "sink" {
                    "written"
                } else {
                    "produced"
                };
                let failed = if failed > 0 {
                    format!(", {failed} task(s) FAILED")
                } else {
                    String::new()
                };
                println!(
                    "{}: {total} records {verb} ({rate:.0}/s, {} task(s){failed})",
                    connector.name, connector.tasks
                );
                last.insert(connector.name, (total, now));
            }
        }
    })
}

struct ProgressView {
    name: String,
    kind: &'static str,
    tasks: usize,
}
