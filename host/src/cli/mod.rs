//! The `wasm-connect` command line.

mod client;
mod distributed;
mod plugins;
mod standalone;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A Kafka Connect worker whose connectors are WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "wasm-connect", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Where the `plugins` commands cache compiled plugins. A worker keeps its own cache in its
/// data directory (`<data.dir>/compiled`), so these are not worker options.
#[derive(Debug, clap::Args)]
pub struct CacheArgs {
    /// Where compiled plugins are cached [default: $XDG_CACHE_HOME/wasm-connect or ~/.cache/wasm-connect].
    #[arg(long, global = true, env = "WASM_CONNECT_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Compile plugins every time instead of using the compile cache.
    #[arg(long, global = true)]
    pub no_cache: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Look at the plugins in a plugin directory.
    Plugins {
        #[command(subcommand)]
        command: plugins::PluginsCommand,
        #[command(flatten)]
        cache: CacheArgs,
    },
    /// Run a worker with the given connectors in this process (Kafka Connect's standalone mode).
    Standalone(standalone::StandaloneArgs),
    /// Run a worker of a distributed cluster: workers with the same group.id share the
    /// connectors, created over any worker's REST API (Kafka Connect's distributed mode).
    Distributed(distributed::DistributedArgs),
    /// Manage the connectors of a running worker over its REST API.
    Connectors {
        #[command(subcommand)]
        command: client::ConnectorsCommand,
        #[command(flatten)]
        remote: client::Remote,
    },
}

impl Cli {
    /// Run the command; the exit code says whether it worked.
    pub async fn run(self) -> ExitCode {
        let result = match self.command {
            Command::Plugins { command, cache } => {
                let cache_dir = if cache.no_cache {
                    None
                } else {
                    cache.cache_dir.or_else(default_cache_dir)
                };
                plugins::run(command, cache_dir).await
            }
            Command::Standalone(args) => standalone::run(args).await,
            Command::Distributed(args) => distributed::run(args).await,
            Command::Connectors { command, remote } => client::connectors(command, remote).await,
        };
        match result {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        }
    }
}

/// `$XDG_CACHE_HOME/wasm-connect`, else `~/.cache/wasm-connect`.
fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("wasm-connect"))
}
