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
            for connector in herder.status().await {
                let total: u64 = connector.tasks.iter().map(|t| t.done()).sum();
                let failed = connector
                    .tasks
                    .iter()
                    .filter(|t| t.state().name() == "FAILED")
                    .count();
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
                let verb = match connector.kind {
                    crate::plugin::World::Source => "produced",
                    crate::plugin::World::Sink => "written",
                };
                let failed = if failed > 0 {
                    format!(", {failed} task(s) FAILED")
                } else {
                    String::new()
                };
                println!(
                    "{}: {total} records {verb} ({rate:.0}/s, {} task(s){failed})",
                    connector.name,
                    connector.tasks.len()
                );
                last.insert(connector.name, (total, now));
            }
        }
    })
}
