//! `wasm-connect standalone WORKER-CONFIG CONNECTOR-CONFIG...`: run a worker in this process,
//! Kafka Connect's standalone shape.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::config::{ConnectorConfig, WorkerConfig};
use crate::herder::{Herder, report_progress};
use crate::rest;

/// Arguments of `standalone`.
#[derive(Debug, Args)]
pub struct StandaloneArgs {
    /// The worker config (.properties or .toml).
    pub worker_config: PathBuf,
    /// Connector configs (.properties, .json or .toml), started in order.
    pub connector_configs: Vec<PathBuf>,
    /// Print each connector's record count and rate every N seconds (0: never).
    #[arg(long, default_value_t = 0)]
    pub progress: u64,
}

pub(super) async fn run(args: StandaloneArgs) -> anyhow::Result<ExitCode> {
    // The REST API reads its own keys (listeners, TLS, credentials) from the worker file, and
    // its problems are reported with the rest of the file's.
    let (worker, rest) = WorkerConfig::from_file_with(&args.worker_config, |pairs| {
        warn_distributed_keys(pairs);
        rest::RestConfig::from_pairs(pairs)
    })
    .map_err(anyhow::Error::msg)?;
    // Read every connector file before starting anything, so a typo fails fast.
    let connectors = args
        .connector_configs
        .iter()
        .map(|p| ConnectorConfig::from_file(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    // Signals are heard from here on: a worker stopped while it starts stops at once.
    let signal = wait_for_signal();
    tokio::pin!(signal);
    let herder = tokio::select! {
        started = Herder::start(worker) => started.map_err(anyhow::Error::msg)?,
        _ = &mut signal => {
            println!("stopped while starting.");
            return Ok(ExitCode::SUCCESS);
        }
    };
    // REST answers while the plugins load; changes wait for the load.
    let servers = rest::serve(herder.clone(), rest)
        .await
        .map_err(anyhow::Error::msg)?;
    let urls = servers
        .iter()
        .map(|s| s.url.as_str())
        .collect::<Vec<_>>()
        .join(" and ");
    println!("REST API listening at {urls}; loading plugins...");
    let loaded = async {
        herder.load().await.map_err(anyhow::Error::msg)?;
        // Files on the command line are (re)applied over what an earlier run stored.
        for (config, path) in connectors.into_iter().zip(&args.connector_configs) {
            let name = config.name.clone();
            herder
                .put_config(config)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            tracing::info!(connector = %name, file = %path.display(), "connector started");
        }
        anyhow::Ok(())
    };
    let interrupted = tokio::select! {
        loaded = loaded => { loaded?; false }
        _ = &mut signal => true,
    };
    if !interrupted {
        println!(
            "wasm-connect is running (Kafka at {}, REST API at {urls}, data in {}). Press Ctrl-C to stop.",
            herder.bootstrap(),
            herder.data_dir().display()
        );
    }
    let progress = (args.progress > 0)
        .then(|| report_progress(herder.clone(), Duration::from_secs(args.progress)));
    if !interrupted {
        signal.await;
    }
    println!("stopping: flushing offsets...");
    if let Some(p) = progress {
        p.abort();
    }
    let failed = stop_all(&herder, &servers).await;
    println!("stopped.");
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Stop serving REST and stop every task (flushing offsets), printing each connector's record
/// count; returns how many tasks had failed.
pub(super) async fn stop_all(herder: &Herder, servers: &[rest::Serving]) -> usize {
    for server in servers {
        server.task.abort();
    }
    let mut failed = 0;
    for (name, done, failed_tasks) in herder.shutdown().await {
        failed += failed_tasks;
        println!("{name}: {done} records in this run");
    }
    failed
}

pub(super) async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("cannot listen for SIGTERM: {e}");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// Distributed mode's keys (a Kafka Connect distributed worker file given to `standalone`) do
/// nothing here: say so rather than ignore them silently.
fn warn_distributed_keys(pairs: &[(String, String)]) {
    use crate::config::keys::{Scope, key};
    let given: Vec<&str> = pairs
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| key(k).is_some_and(|k| k.scope == Scope::Distributed))
        .collect();
    if !given.is_empty() {
        tracing::warn!(
            "{} configure distributed mode; standalone ignores them (connectors and offsets stay in data.dir)",
            given.join(", ")
        );
    }
}
