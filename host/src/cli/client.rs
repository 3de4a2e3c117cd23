//! `wasm-connect connectors ...` and `wasm-connect plugins list --url`: a client of a running
//! worker's REST API (any Kafka Connect compatible worker, in fact). Tables for people, `--json`
//! for scripts; a failed request exits non-zero with the worker's message.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::table;

/// How to reach the worker.
#[derive(Debug, Clone, Args)]
pub struct Remote {
    /// The worker's REST API.
    #[arg(
        long,
        global = true,
        env = "WASM_CONNECT_URL",
        default_value = "http://127.0.0.1:8083"
    )]
    pub url: String,
    /// A bearer token for the REST API.
    #[arg(
        long,
        global = true,
        env = "WASM_CONNECT_REST_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Basic-auth credentials, `user:password`.
    #[arg(
        long,
        global = true,
        env = "WASM_CONNECT_REST_BASIC",
        hide_env_values = true
    )]
    pub user: Option<String>,
    /// Print the worker's JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// For an https:// URL: a PEM file of CA certificates to trust besides the system's (a
    /// worker whose certificate a private CA signed).
    #[arg(long, global = true, env = "WASM_CONNECT_CA_FILE")]
    pub cacert: Option<PathBuf>,
}

/// `connectors` subcommands.
#[derive(Debug, Subcommand)]
pub enum ConnectorsCommand {
    /// Every connector with its state and tasks.
    List,
    /// A connector's config and tasks.
    Get { name: String },
    /// Create a connector from a config file (.properties, .json or .toml).
    Create {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Start it from the offsets the worker (or cluster) at this URL keeps for a connector
        /// of the same name, which must be STOPPED there: how a connector moves from a
        /// standalone worker to a distributed cluster, or back, without replaying. It is
        /// created STOPPED, given those offsets, then resumed. The same credentials are used
        /// for both URLs.
        #[arg(long, value_name = "URL")]
        offsets_from: Option<String>,
    },
    /// Replace a connector's config with a file's (creates it if missing).
    Update {
        name: String,
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
    /// Delete a connector.
    Delete { name: String },
    /// Pause a connector's tasks.
    Pause { name: String },
    /// Resume a paused or stopped connector.
    Resume { name: String },
    /// Stop a connector's tasks, keeping its config.
    Stop { name: String },
    /// Restart a connector (and its tasks).
    Restart {
        name: String,
        #[arg(long)]
        include_tasks: bool,
        #[arg(long)]
        only_failed: bool,
    },
    /// A connector's and its tasks' states.
    Status { name: String },
    /// A connector's task configs.
    Tasks { name: String },
    /// A connector's offsets.
    #[command(subcommand)]
    Offsets(OffsetsCommand),
}

/// `connectors offsets` subcommands.
#[derive(Debug, Subcommand)]
pub enum OffsetsCommand {
    /// Show the offsets.
    Get { name: String },
    /// Forget the offsets (the connector must be stopped).
    Reset { name: String },
    /// Set offsets from a JSON file `{"offsets": [...]}` (the connector must be stopped).
    Set {
        name: String,
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
}

struct Client {
    http: reqwest::Client,
    remote: Remote,
}

impl Client {
    fn new(remote: Remote) -> anyhow::Result<Self> {
        // HTTPS with rustls: the system's CAs, and the --cacert file's.
        let mut builder = reqwest::Client::builder().use_rustls_tls();
        if let Some(path) = &remote.cacert {
            let pem = std::fs::read(path)
                .with_context(|| format!("--cacert: cannot read {}", path.display()))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("--cacert: {} holds no PEM certificate", path.display()))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().context("cannot set up the HTTP client")?;
        Ok(Self { http, remote })
    }

    /// Send a request; a non-2xx answer is an error carrying the worker's message.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Option<Value>> {
        let url = format!("{}{path}", self.remote.url.trim_end_matches('/'));
        let mut request = self.http.request(method, &url);
        if let Some(token) = &self.remote.token {
            request = request.bearer_auth(token);
        } else if let Some(user) = &self.remote.user {
            let (u, p) = user.split_once(':').unwrap_or((user, ""));
            request = request.basic_auth(u, Some(p));
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                // reqwest's chain says what failed; a certificate problem is not "not running".
                let chain = format!("{:#}", anyhow::Error::new(e));
                let hint = if chain.contains("certificate") || chain.contains("UnknownIssuer") {
                    "the worker's certificate is not trusted: pass --cacert FILE (or set WASM_CONNECT_CA_FILE) with the CA that signed it"
                } else {
                    "is it running? --url"
                };
                anyhow::bail!(
                    "cannot reach the worker at {} ({hint}): {chain}",
                    self.remote.url
                );
            }
        };
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let value: Option<Value> = if text.trim().is_empty() {
            None
        } else {
            serde_json::from_str(&text).ok()
        };
        if !status.is_success() {
            let message = value
                .as_ref()
                .and_then(|v| v["message"].as_str().map(str::to_owned))
                .unwrap_or(text);
            bail!("{status}: {message}");
        }
        Ok(value)
    }

    fn print(&self, value: &Option<Value>, human: impl FnOnce(&Value) -> String) {
        match value {
            Some(v) if self.remote.json => {
                println!("{}", serde_json::to_string_pretty(v).unwrap_or_default())
            }
            Some(v) => print!("{}", human(v)),
            None => {}
        }
    }
}

fn read_config(file: &std::path::Path) -> anyhow::Result<serde_json::Map<String, Value>> {
    let pairs = crate::config::file::read(file).map_err(anyhow::Error::msg)?;
    Ok(pairs
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect())
}

fn status_table(status: &Value) -> String {
    let mut rows = vec![vec![
        "connector".to_owned(),
        status["connector"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        status["connector"]["worker_id"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        status["connector"]["trace"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
    ]];
    for t in status["tasks"].as_array().into_iter().flatten() {
        rows.push(vec![
            format!("task {}", t["id"]),
            t["state"].as_str().unwrap_or("").to_owned(),
            t["worker_id"].as_str().unwrap_or("").to_owned(),
            t["trace"].as_str().unwrap_or("").to_owned(),
        ]);
    }
    format!(
        "{} ({})\n{}",
        status["name"].as_str().unwrap_or(""),
        status["type"].as_str().unwrap_or(""),
        table::render(&["INSTANCE", "STATE", "WORKER", "TRACE"], &rows)
    )
}

fn config_table(config: &Value) -> String {
    let rows: Vec<Vec<String>> = config
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            vec![
                k.clone(),
                v.as_str().map_or_else(|| v.to_string(), str::to_owned),
            ]
        })
        .collect();
    table::render(&["KEY", "VALUE"], &rows)
}

/// Run a `connectors` command.
pub async fn connectors(command: ConnectorsCommand, remote: Remote) -> anyhow::Result<ExitCode> {
    use reqwest::Method;
    let client = Client::new(remote)?;
    let c = |name: &str| format!("/connectors/{}", crate::rest::path_segment(name));
    match command {
        ConnectorsCommand::List => {
            let value = client
                .call(Method::GET, "/connectors?expand=status", None)
                .await?;
            client.print(&value, |v| {
                let rows: Vec<Vec<String>> = v
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, item)| {
                        let s = &item["status"];
                        let tasks = s["tasks"].as_array().map_or(0, Vec::len);
                        let failed = s["tasks"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|t| t["state"] == "FAILED")
                            .count();
                        vec![
                            name.clone(),
                            s["type"].as_str().unwrap_or("").to_owned(),
                            s["connector"]["state"].as_str().unwrap_or("").to_owned(),
                            if failed > 0 {
                                format!("{tasks} ({failed} failed)")
                            } else {
                                tasks.to_string()
                            },
                        ]
                    })
                    .collect();
                if rows.is_empty() {
                    "No connectors.\n".to_owned()
                } else {
                    table::render(&["NAME", "TYPE", "STATE", "TASKS"], &rows)
                }
            });
        }
        ConnectorsCommand::Get { name } => {
            let value = client.call(Method::GET, &c(&name), None).await?;
            client.print(&value, |v| {
                format!(
                    "{} ({}, {} task(s))\n{}",
                    v["name"].as_str().unwrap_or(""),
                    v["type"].as_str().unwrap_or(""),
                    v["tasks"].as_array().map_or(0, Vec::len),
                    config_table(&v["config"])
                )
            });
        }
        ConnectorsCommand::Create { file, offsets_from } => {
            let config = read_config(&file)?;
            let name = config
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .context("the config file has no `name`")?;
            if let Some(from) = offsets_from {
                let source = Client::new(Remote {
                    url: from.clone(),
                    ..client.remote.clone()
                })?;
                return move_connector(&client, &source, &name, config)
                    .await
                    .with_context(|| format!("--offsets-from {from}"));
            }
            let value = client
                .call(
                    Method::POST,
                    "/connectors",
                    Some(json!({"name": name, "config": config})),
                )
                .await?;
            client.print(&value, |v| {
                format!("created connector {}\n", v["name"].as_str().unwrap_or(""))
            });
        }
        ConnectorsCommand::Update { name, file } => {
            let config = read_config(&file)?;
            let value = client
                .call(
                    Method::PUT,
                    &format!("{}/config", c(&name)),
                    Some(Value::Object(config)),
                )
                .await?;
            client.print(&value, |v| {
                format!("updated connector {}\n", v["name"].as_str().unwrap_or(""))
            });
        }
        ConnectorsCommand::Delete { name } => {
            client.call(Method::DELETE, &c(&name), None).await?;
            if !client.remote.json {
                println!("deleted connector {name}");
            }
        }
        ConnectorsCommand::Pause { name } => {
            simple(
                &client,
                Method::PUT,
                &format!("{}/pause", c(&name)),
                &format!("paused {name}"),
            )
            .await?
        }
        ConnectorsCommand::Resume { name } => {
            simple(
                &client,
                Method::PUT,
                &format!("{}/resume", c(&name)),
                &format!("resumed {name}"),
            )
            .await?
        }
        ConnectorsCommand::Stop { name } => {
            simple(
                &client,
                Method::PUT,
                &format!("{}/stop", c(&name)),
                &format!("stopped {name}"),
            )
            .await?
        }
        ConnectorsCommand::Restart {
            name,
            include_tasks,
            only_failed,
        } => {
            let path = format!(
                "{}/restart?includeTasks={include_tasks}&onlyFailed={only_failed}",
                c(&name)
            );
            let value = client.call(Method::POST, &path, None).await?;
            match &value {
                Some(_) => client.print(&value, status_table),
                None if !client.remote.json => println!("restarted {name}"),
                None => {}
            }
        }
        ConnectorsCommand::Status { name } => {
            let value = client
                .call(Method::GET, &format!("{}/status", c(&name)), None)
                .await?;
            client.print(&value, status_table);
        }
        ConnectorsCommand::Tasks { name } => {
            let value = client
                .call(Method::GET, &format!("{}/tasks", c(&name)), None)
                .await?;
            client.print(&value, |v| {
                let mut out = String::new();
                for t in v.as_array().into_iter().flatten() {
                    out.push_str(&format!("task {}\n", t["id"]["task"]));
                    out.push_str(&config_table(&t["config"]));
                }
                out
            });
        }
        ConnectorsCommand::Offsets(OffsetsCommand::Get { name }) => {
            let value = client
                .call(Method::GET, &format!("{}/offsets", c(&name)), None)
                .await?;
            client.print(&value, |v| {
                let rows: Vec<Vec<String>> = v["offsets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|o| vec![o["partition"].to_string(), o["offset"].to_string()])
                    .collect();
                table::render(&["PARTITION", "OFFSET"], &rows)
            });
        }
        ConnectorsCommand::Offsets(OffsetsCommand::Reset { name }) => {
            let value = client
                .call(Method::DELETE, &format!("{}/offsets", c(&name)), None)
                .await?;
            client.print(&value, |v| {
                format!("{}\n", v["message"].as_str().unwrap_or(""))
            });
        }
        ConnectorsCommand::Offsets(OffsetsCommand::Set { name, file }) => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let body: Value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", file.display()))?;
            let value = client
                .call(Method::PATCH, &format!("{}/offsets", c(&name)), Some(body))
                .await?;
            client.print(&value, |v| {
                format!("{}\n", v["message"].as_str().unwrap_or(""))
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Create connector `name` with `config` on `target`, starting from the offsets `source` keeps
/// for its connector of that name (which must be STOPPED there, so nothing is produced twice).
async fn move_connector(
    target: &Client,
    source: &Client,
    name: &str,
    config: serde_json::Map<String, Value>,
) -> anyhow::Result<ExitCode> {
    use reqwest::Method;
    let path = format!("/connectors/{}", crate::rest::path_segment(name));
    let status = source
        .call(Method::GET, &format!("{path}/status"), None)
        .await?
        .unwrap_or_default();
    let state = status["connector"]["state"].as_str().unwrap_or("");
    if state != "STOPPED" {
        bail!(
            "connector {name} is {state} there; stop it first (wasm-connect connectors --url {} stop {name}) so that its offsets are final",
            source.remote.url
        );
    }
    let offsets = source
        .call(Method::GET, &format!("{path}/offsets"), None)
        .await?
        .unwrap_or_default();
    let count = offsets["offsets"].as_array().map_or(0, Vec::len);
    target
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": name, "config": config, "initial_state": "STOPPED"})),
        )
        .await?;
    if count > 0 {
        target
            .call(Method::PATCH, &format!("{path}/offsets"), Some(offsets))
            .await
            .context("the connector was created STOPPED, but its offsets were not set; set them with `connectors offsets set`, then resume it")?;
    }
    target
        .call(Method::PUT, &format!("{path}/resume"), None)
        .await?;
    target.print(&Some(json!({"name": name, "offsets": count})), |_| {
        format!(
            "created connector {name} from the offsets of {count} source partitions at {}, and resumed it; delete it there once you no longer need it\n",
            source.remote.url
        )
    });
    Ok(ExitCode::SUCCESS)
}

/// `plugins list --url`: the worker's plugins.
pub async fn remote_plugins(remote: Remote) -> anyhow::Result<ExitCode> {
    let client = Client::new(remote)?;
    let value = client
        .call(reqwest::Method::GET, "/connector-plugins", None)
        .await?;
    client.print(&value, |v| {
        let rows: Vec<Vec<String>> = v
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                ["class", "version", "type"]
                    .iter()
                    .map(|k| p[*k].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .collect();
        table::render(&["NAME", "VERSION", "KIND"], &rows)
    });
    Ok(ExitCode::SUCCESS)
}

async fn simple(
    client: &Client,
    method: reqwest::Method,
    path: &str,
    done: &str,
) -> anyhow::Result<()> {
    client.call(method, path, None).await?;
    if !client.remote.json {
        println!("{done}");
    }
    Ok(())
}
