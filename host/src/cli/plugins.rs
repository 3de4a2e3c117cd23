//! `wasm-connect plugins list|inspect`: what is in a plugin directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::json;

use super::table;
use crate::plugin::{ConfigKey, Plugin, contract};
use crate::registry::Registry;
use crate::sandbox::Sandbox;

/// The plugin directory used when `--dir` is not given.
const DEFAULT_DIR: &str = "dist/plugins";

/// `plugins` subcommands.
#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// List the plugins in a directory (name, version, kind, file), or with --url those of a
    /// running worker.
    List {
        /// The plugin directory (Kafka Connect's plugin.path).
        #[arg(long, env = "WASM_CONNECT_PLUGIN_PATH", default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// Ask the worker at this REST URL instead of reading a directory.
        #[arg(long, conflicts_with = "dir")]
        url: Option<String>,
        /// A bearer token for --url.
        #[arg(long, env = "WASM_CONNECT_REST_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show a plugin's full spec: every configuration key with type, default and documentation.
    Inspect {
        /// A .wasm file, or a plugin name (optionally `name@version`) in the plugin directory.
        plugin: String,
        /// The plugin directory searched when PLUGIN is a name.
        #[arg(long, env = "WASM_CONNECT_PLUGIN_PATH", default_value = DEFAULT_DIR)]
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub(super) async fn run(
    command: PluginsCommand,
    cache_dir: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let sandbox = Sandbox::new(cache_dir)?;
    match command {
        PluginsCommand::List {
            url: Some(url),
            token,
            json,
            ..
        } => {
            super::client::remote_plugins(super::client::Remote {
                url,
                token,
                user: None,
                json,
                cacert: std::env::var_os("WASM_CONNECT_CA_FILE").map(Into::into),
            })
            .await
        }
        PluginsCommand::List { dir, json, .. } => list(sandbox, &dir, json).await,
        PluginsCommand::Inspect { plugin, dir, json } => {
            inspect(sandbox, &plugin, &dir, json).await
        }
    }
}

async fn list(sandbox: Arc<Sandbox>, dir: &Path, as_json: bool) -> anyhow::Result<ExitCode> {
    let registry = Registry::new(sandbox, dir);
    registry.scan().await.map_err(anyhow::Error::msg)?;
    let plugins = registry.plugins();
    let failures = registry.failures();
    if as_json {
        let out = json!({
            "plugins": plugins.iter().map(|p| summary_json(p)).collect::<Vec<_>>(),
            "skipped": failures.iter().map(|f| json!({"file": f.path, "reason": f.reason})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let rows: Vec<Vec<String>> = plugins
            .iter()
            .map(|p| {
                vec![
                    p.spec.name.clone(),
                    p.spec.version.clone(),
                    p.spec.kind.to_string(),
                    p.path.display().to_string(),
                ]
            })
            .collect();
        if rows.is_empty() {
            println!("No plugins in {}.", dir.display());
        } else {
            print!(
                "{}",
                table::render(&["NAME", "VERSION", "KIND", "FILE"], &rows)
            );
        }
        if !failures.is_empty() {
            println!("\nSkipped {} file(s):", failures.len());
            for f in &failures {
                println!("  {}: {}", f.path.display(), f.reason);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn inspect(
    sandbox: Arc<Sandbox>,
    which: &str,
    dir: &Path,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let as_file = Path::new(which);
    let plugin = if which.ends_with(".wasm") || as_file.is_file() {
        Plugin::load(&sandbox, as_file).await?
    } else {
        let (name, version) = match which.split_once('@') {
            Some((n, v)) => (n, Some(v)),
            None => (which, None),
        };
        let registry = Registry::new(sandbox, dir);
        registry.scan().await.map_err(anyhow::Error::msg)?;
        match registry.find(name, version) {
            Some(p) => p,
            None => {
                let known: Vec<String> = registry
                    .plugins()
                    .iter()
                    .map(|p| format!("{}@{}", p.spec.name, p.spec.version))
                    .collect();
                bail!(
                    "no plugin named {which} in {} (available: {})",
                    dir.display(),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                );
            }
        }
    };
    if as_json {
        let mut out = summary_json(&plugin);
        out["config"] = serde_json::to_value(&plugin.spec.config).context("serialising spec")?;
        out["asks_for"] = json!(plugin.asks);
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", describe(&plugin));
    }
    Ok(ExitCode::SUCCESS)
}

fn summary_json(p: &Plugin) -> serde_json::Value {
    json!({
        "name": p.spec.name,
        "version": p.spec.version,
        "kind": p.spec.kind,
        "description": p.spec.description,
        "file": p.path,
        "sha256": p.sha256,
        "contract": format!("{}@{}", contract::PACKAGE, p.contract),
    })
}

fn describe(p: &Plugin) -> String {
    let mut out = format!(
        "{} {} ({})\n  {}\n  file:     {}\n  contract: {}@{}\n\nConfiguration:\n",
        p.spec.name,
        p.spec.version,
        p.spec.kind,
        p.spec.description,
        p.path.display(),
        contract::PACKAGE,
        p.contract
    );
    if p.spec.config.is_empty() {
        out.push_str("  (no configuration keys)\n");
    }
    for key in &p.spec.config {
        out.push_str(&describe_key(key));
    }
    out.push_str("\nIts imports may ask for (each only where the connector's config grants it):\n");
    if p.asks.is_empty() {
        out.push_str("  nothing beyond the contract\n");
    }
    for what in &p.asks {
        out.push_str(&format!("  {what}\n"));
    }
    out
}

fn describe_key(key: &ConfigKey) -> String {
    let mut facts = vec![key.ty.to_owned()];
    if key.required {
        facts.push("required".to_owned());
    }
    if let Some(default) = &key.default {
        facts.push(format!("default {default}"));
    }
    facts.push(format!("importance {}", key.importance));
    let mut out = format!("  {}  ({})\n", key.name, facts.join(", "));
    if !key.documentation.is_empty() {
        out.push_str(&format!("      {}\n", key.documentation));
    }
    if !key.allowed_values.is_empty() {
        out.push_str(&format!(
            "      allowed: {}\n",
            key.allowed_values.join(", ")
        ));
    }
    out
}
