//! `wasm-connect distributed WORKER-CONFIG`: run a worker of a distributed cluster, Kafka
//! Connect's distributed shape. Connectors are created over the REST API of any worker; the
//! workers of one `group.id` share them, their configs, offsets and statuses living on the
//! cluster's topics.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::standalone::{stop_all, wait_for_signal};
use crate::config::WorkerConfig;
use crate::distributed::protocol::PROTOCOL_TYPE;
use crate::distributed::settings::DistributedSettings;
use crate::herder::Herder;
use crate::kafka::clients::ClientKind;
use crate::kafka::group::{GroupSecurity, MemberConfig};
use crate::rest;

/// Arguments of `distributed`.
#[derive(Debug, Args)]
pub struct DistributedArgs {
    /// The worker config (.properties or .toml), with group.id and the three storage topics.
    pub worker_config: PathBuf,
}

/// How long one request to the group coordinator may take.
const GROUP_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) async fn run(args: DistributedArgs) -> anyhow::Result<ExitCode> {
    let (worker, (rest, settings)) = WorkerConfig::from_file_with(&args.worker_config, |pairs| {
        let rest = rest::RestConfig::from_pairs(pairs);
        let settings = DistributedSettings::from_pairs(pairs);
        match (rest, settings) {
            (Ok(r), Ok(s)) => Ok((r, s)),
            (r, s) => Err([r.err(), s.err()].into_iter().flatten().flatten().collect()),
        }
    })
    .map_err(anyhow::Error::msg)?;
    let security = GroupSecurity::from_librdkafka(worker.clients.librdkafka(ClientKind::Consumer))
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.worker_config.display()))?;
    let bootstrap: Vec<String> = worker
        .bootstrap_servers
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let member = MemberConfig {
        bootstrap,
        security,
        group_id: settings.group_id.clone(),
        client_id: format!("wasm-connect-{}", worker.worker_id),
        protocol_type: PROTOCOL_TYPE.to_owned(),
        session_timeout: settings.session_timeout,
        rebalance_timeout: settings.rebalance_timeout,
        heartbeat_interval: settings.heartbeat_interval,
        request_timeout: GROUP_REQUEST_TIMEOUT,
        fence: None,
    };
    let advertised = (
        settings.advertised_host.clone(),
        settings.advertised_port,
        settings.advertised_listener.clone(),
    );
    let signal = wait_for_signal();
    tokio::pin!(signal);
    let herder = tokio::select! {
        started = Herder::start_distributed(worker, settings) => started.map_err(anyhow::Error::msg)?,
        _ = &mut signal => {
            println!("stopped while starting.");
            return Ok(ExitCode::SUCCESS);
        }
    };
    let Some(cluster) = herder.cluster().cloned() else {
        anyhow::bail!("worker bug: a distributed worker without its cluster");
    };
    let member = MemberConfig {
        fence: herder.fence(),
        ..member
    };
    let servers = rest::serve(herder.clone(), rest)
        .await
        .map_err(anyhow::Error::msg)?;
    let url = advertised_url(&servers, &advertised)?;
    println!("REST API listening at {url}; loading plugins...");
    let loaded = tokio::select! {
        loaded = herder.load() => Some(loaded),
        _ = &mut signal => None,
    };
    let mut membership = None;
    let (stop, stopping) = tokio::sync::watch::channel(false);
    if let Some(loaded) = loaded {
        loaded.map_err(anyhow::Error::msg)?;
        let group = cluster.settings().group_id.clone();
        membership = Some(tokio::spawn(cluster.run(
            herder.clone(),
            member,
            url.clone(),
            stopping,
        )));
        println!(
            "wasm-connect is running in distributed mode (REST API at {url}, group {group}, Kafka at {}). Press Ctrl-C to stop.",
            herder.bootstrap()
        );
        let failed = tokio::select! {
            _ = &mut signal => None,
            ended = async {
                match membership.as_mut() {
                    Some(m) => m.await,
                    None => std::future::pending().await,
                }
            } => Some(ended),
        };
        if let Some(ended) = failed {
            let why = match ended {
                Ok(Err(e)) => e,
                Ok(Ok(())) => "the group membership ended".into(),
                Err(e) => format!("the group membership stopped: {e}"),
            };
            eprintln!("error: {why}; stopping");
            herder.shutdown().await;
            return Ok(ExitCode::FAILURE);
        }
    }
    println!("stopping: flushing offsets...");
    let failed = stop_all(&herder, &servers).await;
    // Only now, with this worker's tasks stopped, may others take them: leave the group.
    let _ = stop.send(true);
    if let Some(m) = membership {
        let _ = tokio::time::timeout(Duration::from_secs(10), m).await;
    }
    println!("stopped.");
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The REST URL other workers reach this one at: `rest.advertised.*` where given, else the
/// listener's (the machine's host name for a wildcard address).
fn advertised_url(
    servers: &[rest::Serving],
    (host, port, listener): &(Option<String>, Option<u16>, Option<String>),
) -> anyhow::Result<String> {
    let serving = match listener {
        Some(scheme) => servers
            .iter()
            .find(|s| s.url.starts_with(&format!("{scheme}://")))
            .ok_or_else(|| {
                anyhow::anyhow!("rest.advertised.listener: no {scheme} listener in listeners")
            })?,
        None => servers
            .first()
            .ok_or_else(|| anyhow::anyhow!("listeners: the REST API listens nowhere"))?,
    };
    let parsed = url::Url::parse(&serving.url)?;
    let bound_host = parsed.host_str().unwrap_or("localhost").to_owned();
    let host = match host {
        Some(h) => h.clone(),
        None if bound_host == "0.0.0.0" || bound_host == "[::]" => {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_else(|_| "localhost".into())
        }
        None => bound_host,
    };
    let port = port.or(parsed.port()).unwrap_or(8083);
    Ok(format!("{}://{host}:{port}", parsed.scheme()))
}
