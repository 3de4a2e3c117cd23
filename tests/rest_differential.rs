//! The REST API against Apache Kafka Connect itself. A Kafka Connect standalone worker (its own
//! jars, `bench/kafka-connect fetch`) and a wasm-connect worker run on the same broker, and one
//! sequence of requests goes to both: every endpoint, the error cases third-party clients hit,
//! odd-but-legal inputs. For each exchange the status code, the `Location` header (host masked),
//! the content type and the JSON body's shape are compared: keys, value types, and the values of
//! keys whose value is the meaning (`state`, `type`, `error_code`, `status`). Values that
//! legitimately differ (versions, worker ids, a plugin's own config keys) are masked by
//! comparing shapes only. Every difference found must be one [`KNOWN`] lists, and `docs/rest.md`
//! lists each with its reason; a difference that goes away must leave the list too.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{self, create_topic, unique_topic};
use wasm_connect_tests::rest::block;
use wasm_connect_tests::worker::{Worker, eventually};
use wasm_connect_tests::{connect_libs, repo_root};

/// Differences that stay, each `(exchange label, what differs)` as [`compare`] words it;
/// `docs/rest.md` (*Differences from Kafka Connect*) gives the reasons.
const KNOWN: &[(&str, &str)] = &[
    // Kafka Connect's own error responses for paths, methods and media types it rejects carry a
    // JSON body without saying so; ours say `application/json`.
    (
        "DELETE /connectors",
        "Content-Type: Kafka Connect None, wasm-connect Some(\"application/json\")",
    ),
    (
        "GET /nope",
        "Content-Type: Kafka Connect None, wasm-connect Some(\"application/json\")",
    ),
    (
        "POST /connectors (not JSON)",
        "Content-Type: Kafka Connect None, wasm-connect Some(\"application/json\")",
    ),
    // Our definitions say which values a key allows.
    (
        "GET /connector-plugins/{plugin}/config",
        "body/*/allowed_values: only in wasm-connect",
    ),
    // No header converters.
    (
        "GET /connector-plugins?connectorsOnly=False",
        "body/*/type: Kafka Connect \"=converter|=header_converter|=predicate|=sink|=source|=transformation\", wasm-connect \"=converter|=predicate|=sink|=source|=transformation\"",
    ),
    // Where Kafka Connect answers 500 for a bad request (a Java exception escaping), we answer
    // what the request deserves.
    (
        "POST /connectors (malformed JSON)",
        "status: Kafka Connect 500, wasm-connect 400",
    ),
    (
        "POST /connectors (malformed JSON)",
        "body/error_code: Kafka Connect \"=500\", wasm-connect \"=400\"",
    ),
    (
        "POST /connectors (no config)",
        "status: Kafka Connect 500, wasm-connect 400",
    ),
    (
        "POST /connectors (no config)",
        "body/error_code: Kafka Connect \"=500\", wasm-connect \"=400\"",
    ),
    (
        "POST /connectors/missing/restart",
        "status: Kafka Connect 500, wasm-connect 404",
    ),
    (
        "POST /connectors/missing/restart",
        "body/error_code: Kafka Connect \"=500\", wasm-connect \"=404\"",
    ),
    // Kafka Connect answers 404 for a level that does not exist; it is a bad request.
    (
        "PUT /admin/loggers/root (bad level)",
        "status: Kafka Connect 404, wasm-connect 400",
    ),
    (
        "PUT /admin/loggers/root (bad level)",
        "body/error_code: Kafka Connect \"=404\", wasm-connect \"=400\"",
    ),
];

/// One side of the comparison.
struct Side {
    name: &'static str,
    base: String,
    http: reqwest::Client,
    /// The source connector's config (the same file, a topic of its own).
    source: Value,
    /// The sink connector's config.
    sink: Value,
    /// The source plugin's name in `/connector-plugins/{plugin}/...`.
    plugin: &'static str,
}

/// What an exchange answered, as compared.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The `Location` header's path (scheme and authority masked).
    location: Option<String>,
    /// The media type, parameters dropped.
    content_type: Option<String>,
    body: Value,
}

/// A request body.
enum Body {
    None,
    Json(Value),
    /// Sent as given with this content type.
    Raw(&'static str, &'static str),
}

impl Side {
    async fn send(&self, method: &Method, path: &str, body: &Body) -> Answer {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        match body {
            Body::None => {}
            Body::Json(v) => request = request.json(v),
            Body::Raw(text, content_type) => {
                request = request.header("content-type", *content_type).body(*text)
            }
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {method} {path}: {e}", self.name));
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let location = header("location").map(|l| match l.split_once("://") {
            Some((_, rest)) => rest[rest.find('/').unwrap_or(rest.len())..].to_owned(),
            None => l,
        });
        let content_type = header("content-type").map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(if text.is_empty() {
            Value::Null
        } else {
            json!({"<not JSON>": "text"})
        });
        Answer {
            status,
            location,
            content_type,
            body,
        }
    }

    /// Wait until `GET path` satisfies `done`.
    fn until(&self, path: &str, done: impl Fn(&Value) -> bool) {
        let mut last = Value::Null;
        let ok = eventually(Duration::from_secs(60), || {
            last = block(self.send(&Method::GET, path, &Body::None)).body;
            done(&last)
        });
        assert!(ok, "{}: GET {path} never got there: {last}", self.name);
    }

    /// Wait until connector `name` and its first task are in `state`.
    fn until_state(&self, name: &str, state: &str) {
        self.until(&format!("/connectors/{name}/status"), |s| {
            s["connector"]["state"] == state && s["tasks"][0]["state"] == state
        });
    }
}

/// Keys whose values are compared, not only their types.
const MEANINGFUL: &[&str] = &["state", "type", "error_code", "status"];

/// The shape of `value` at `path`: objects keep their keys (or, at a path in `maps`, become
/// `{"<map>": merged shape of the values}`), arrays become the merged shape of their elements,
/// scalars their type, or `=value` under a [`MEANINGFUL`] key (unless the path is under a
/// `~`-prefixed entry of `maps`: a plugin's own definitions, whose types are its own). `null`
/// and empty arrays match anything.
fn shape(value: &Value, path: &str, maps: &[&str]) -> Value {
    let key = path.rsplit('/').next().unwrap_or("");
    let loose = maps
        .iter()
        .filter_map(|m| m.strip_prefix('~'))
        .any(|prefix| path.starts_with(prefix));
    let meaningful = MEANINGFUL.contains(&key) && !loose;
    match value {
        Value::Null => Value::Null,
        Value::Bool(_) => json!("bool"),
        Value::Number(n) if meaningful => json!(format!("={n}")),
        Value::Number(_) => json!("number"),
        Value::String(s) if meaningful => json!(format!("={s}")),
        Value::String(_) => json!("string"),
        Value::Array(items) => {
            let merged = items
                .iter()
                .map(|item| shape(item, &format!("{path}/*"), maps))
                .reduce(|a, b| merge(&a, &b));
            match merged {
                Some(m) => json!([m]),
                None => json!([]),
            }
        }
        Value::Object(fields) if maps.contains(&path) => {
            let merged = fields
                .values()
                .map(|v| shape(v, &format!("{path}/*"), maps))
                .reduce(|a, b| merge(&a, &b))
                .unwrap_or(Value::Null);
            json!({ "<map>": merged })
        }
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), shape(v, &format!("{path}/{k}"), maps)))
                .collect(),
        ),
    }
}

/// Two shapes as one: objects by the union of keys, differing scalars as `a|b`.
fn merge(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Null, x) | (x, Value::Null) => x.clone(),
        (Value::Object(x), Value::Object(y)) => {
            let mut out = x.clone();
            for (k, v) in y {
                let merged = out.get(k).map_or_else(|| v.clone(), |e| merge(e, v));
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(x), Value::Array(y)) => match (x.first(), y.first()) {
            (Some(p), Some(q)) => json!([merge(p, q)]),
            (Some(p), None) | (None, Some(p)) => json!([p]),
            (None, None) => json!([]),
        },
        (Value::String(x), Value::String(y)) if x != y => {
            let set: BTreeSet<&str> = x.split('|').chain(y.split('|')).collect();
            json!(set.into_iter().collect::<Vec<_>>().join("|"))
        }
        (x, _) => x.clone(),
    }
}

/// Where two shapes differ, as `path: connect <x>, wasm-connect <y>` lines.
fn diff(connect: &Value, ours: &Value, path: &str, out: &mut Vec<String>) {
    match (connect, ours) {
        (Value::Null, _) | (_, Value::Null) => {}
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(x, y, &format!("{path}/{k}"), out),
                    (Some(_), None) => out.push(format!("{path}/{k}: missing in wasm-connect")),
                    (None, Some(_)) => out.push(format!("{path}/{k}: only in wasm-connect")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if let (Some(x), Some(y)) = (a.first(), b.first()) {
                diff(x, y, &format!("{path}/*"), out);
            }
        }
        (a, b) if a != b => out.push(format!("{path}: Kafka Connect {a}, wasm-connect {b}")),
        _ => {}
    }
}

/// Compare one exchange's answers; the differences, each prefixed with `label`.
fn compare(label: &str, connect: &Answer, ours: &Answer, maps: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    if connect.status != ours.status {
        out.push(format!(
            "status: Kafka Connect {}, wasm-connect {}",
            connect.status, ours.status
        ));
    }
    if connect.location != ours.location {
        out.push(format!(
            "Location: Kafka Connect {:?}, wasm-connect {:?}",
            connect.location, ours.location
        ));
    }
    // A body-less answer (204) may or may not name a type.
    if connect.body != Value::Null && connect.content_type != ours.content_type {
        out.push(format!(
            "Content-Type: Kafka Connect {:?}, wasm-connect {:?}",
            connect.content_type, ours.content_type
        ));
    }
    diff(
        &shape(&connect.body, "", maps),
        &shape(&ours.body, "", maps),
        "body",
        &mut out,
    );
    out.into_iter().map(|d| format!("{label}: {d}")).collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A Kafka Connect standalone worker, killed on drop.
struct KafkaConnect {
    child: Child,
    log: PathBuf,
}

impl Drop for KafkaConnect {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_kafka_connect(dir: &Path, port: u16) -> KafkaConnect {
    let libs = connect_libs();
    let worker = dir.join("connect-standalone.properties");
    fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\noffset.storage.file.filename={}\noffset.flush.interval.ms=1000\nkey.converter=org.apache.kafka.connect.json.JsonConverter\nvalue.converter=org.apache.kafka.connect.json.JsonConverter\nlisteners=http://127.0.0.1:{port}\n",
            kafka::bootstrap(),
            dir.join("connect.offsets").display()
        ),
    )
    .unwrap();
    let log4j = dir.join("log4j2.properties");
    fs::write(
        &log4j,
        "rootLogger.level = warn\nrootLogger.appenderRef.out.ref = out\nappender.out.type = Console\nappender.out.name = out\nappender.out.layout.type = PatternLayout\nappender.out.layout.pattern = %d %p %c %m%n\n",
    )
    .unwrap();
    let log = dir.join("kafka-connect.log");
    let out = fs::File::create(&log).unwrap();
    let child = Command::new("java")
        .args(["-Xmx512m", "-XX:+UseSerialGC"])
        .arg(format!("-Dlog4j2.configurationFile={}", log4j.display()))
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg("org.apache.kafka.connect.cli.ConnectStandalone")
        .arg(&worker)
        .current_dir(dir)
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("start java (Kafka Connect)");
    KafkaConnect { child, log }
}

/// One step of the sequence: sent to both sides, with the side's own path and body.
struct Step {
    label: String,
    method: Method,
    path: String,
    body: Body,
    maps: Vec<&'static str>,
}

fn step(label: &str, method: Method, path: &str, body: Body, maps: &[&'static str]) -> Step {
    Step {
        label: label.to_owned(),
        method,
        path: path.to_owned(),
        body,
        maps: maps.to_vec(),
    }
}

/// Send `steps` to both sides in order; the differences.
async fn run(steps: Vec<(Step, Step)>, connect: &Side, ours: &Side) -> Vec<String> {
    let mut found = Vec::new();
    for (theirs, mine) in steps {
        let a = connect
            .send(&theirs.method, &theirs.path, &theirs.body)
            .await;
        let b = ours.send(&mine.method, &mine.path, &mine.body).await;
        if a.status >= 400 {
            assert_eq!(
                a.body["error_code"], a.status,
                "{}: Kafka Connect's error body",
                theirs.label
            );
        }
        if b.status >= 400 {
            assert_eq!(
                b.body["error_code"], b.status,
                "{}: our error body {}",
                mine.label, b.body
            );
        }
        found.extend(compare(&theirs.label, &a, &b, &theirs.maps));
    }
    found
}

/// The same step on both sides (`{plugin}` in the path is each side's source plugin, and a body
/// built per side).
fn both(
    label: &str,
    method: Method,
    path: &str,
    body: &dyn Fn(&Side) -> Body,
    maps: &[&'static str],
    connect: &Side,
    ours: &Side,
) -> (Step, Step) {
    let of = |side: &Side| {
        step(
            label,
            method.clone(),
            &path.replace("{plugin}", side.plugin),
            body(side),
            maps,
        )
    };
    (of(connect), of(ours))
}

fn config_with(config: &Value, extra: &[(&str, &str)]) -> Value {
    let mut config = config.clone();
    for (k, v) in extra {
        config[*k] = json!(v);
    }
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_requests_get_the_same_answers_as_from_kafka_connect() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    fs::create_dir_all(&input).unwrap();
    let file = input.join("lines.txt");
    fs::write(&file, "one\ntwo\nthree\n").unwrap();
    let output = dir.path().join("output");
    fs::create_dir_all(&output).unwrap();
    let topics: Vec<String> = (0..4)
        .map(|i| unique_topic(&format!("differential{i}")))
        .collect();
    for t in &topics {
        create_topic(t, 1).await;
    }

    let port = free_port();
    let connect_dir = dir.path().join("connect");
    fs::create_dir_all(&connect_dir).unwrap();
    let kafka_connect = start_kafka_connect(&connect_dir, port);
    let ours_dir = dir.path().join("wasm-connect");
    fs::create_dir_all(&ours_dir).unwrap();
    let mut worker = Worker::start(&ours_dir, &kafka::worker_settings(1000), &[]);
    let ours_base = worker.rest_url(Duration::from_secs(120));

    let connect = Side {
        name: "Kafka Connect",
        base: format!("http://127.0.0.1:{port}"),
        http: reqwest::Client::new(),
        source: json!({"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": file.display().to_string(), "topic": topics[0], "tasks.max": "1"}),
        sink: json!({"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": output.join("connect.txt").display().to_string(), "topics": topics[0],
            "tasks.max": "1"}),
        plugin: "FileStreamSourceConnector",
    };
    let ours = Side {
        name: "wasm-connect",
        base: ours_base,
        http: reqwest::Client::new(),
        source: json!({"connector.class": "file-source", "files": file.display().to_string(),
            "topic": topics[1], "tasks.max": "1", "sandbox.fs.read": input.display().to_string()}),
        sink: json!({"connector.class": "file-sink",
            "file": output.join("ours.txt").display().to_string(), "topics": topics[1],
            "tasks.max": "1", "sandbox.fs.write": output.display().to_string()}),
        plugin: "file-source",
    };
    // Kafka Connect answers once its herder has started.
    let started = eventually(Duration::from_secs(120), || {
        block(async {
            match connect
                .http
                .get(format!("{}/health", connect.base))
                .send()
                .await
            {
                Ok(r) => r.status() == reqwest::StatusCode::OK,
                Err(_) => false,
            }
        })
    });
    assert!(
        started,
        "Kafka Connect did not start:\n{}",
        fs::read_to_string(&kafka_connect.log).unwrap_or_default()
    );

    let none = &|_: &Side| Body::None;
    let b =
        |label: &str,
         method: Method,
         path: &str,
         body: &dyn Fn(&Side) -> Body,
         maps: &[&'static str]| { both(label, method, path, body, maps, &connect, &ours) };
    let get = Method::GET;
    let mut found = Vec::new();

    // The worker, empty.
    let steps = vec![
        b("GET /", get.clone(), "/", none, &[]),
        b("GET /health", get.clone(), "/health", none, &[]),
        b(
            "GET /connectors (none)",
            get.clone(),
            "/connectors",
            none,
            &[],
        ),
        b(
            "GET /connectors?expand=status (none)",
            get.clone(),
            "/connectors?expand=status",
            none,
            &[""],
        ),
        // Create, with Debezium's trailing slash.
        b(
            "POST /connectors/",
            Method::POST,
            "/connectors/",
            &|s| Body::Json(json!({"name": "source", "config": s.source})),
            &["/config"],
        ),
        b(
            "POST /connectors (exists)",
            Method::POST,
            "/connectors",
            &|s| Body::Json(json!({"name": "source", "config": s.source})),
            &[],
        ),
        b(
            "POST /connectors (malformed JSON)",
            Method::POST,
            "/connectors",
            &|_| Body::Raw("{\"name\": ", "application/json"),
            &[],
        ),
        b(
            "POST /connectors (not JSON)",
            Method::POST,
            "/connectors",
            &|_| Body::Raw("name=x", "application/x-www-form-urlencoded"),
            &[],
        ),
        b(
            "POST /connectors (name with a newline)",
            Method::POST,
            "/connectors",
            &|s| Body::Json(json!({"name": "forged\nline", "config": s.source})),
            &[],
        ),
        b(
            "POST /connectors (no config)",
            Method::POST,
            "/connectors",
            &|_| Body::Json(json!({"name": "empty"})),
            &[],
        ),
    ];
    found.extend(run(steps, &connect, &ours).await);
    connect.until_state("source", "RUNNING");
    ours.until_state("source", "RUNNING");

    let steps = vec![
        b(
            "GET /connectors/{name}",
            get.clone(),
            "/connectors/source",
            none,
            &["/config"],
        ),
        b(
            "GET /connectors/{name}/",
            get.clone(),
            "/connectors/source/",
            none,
            &["/config"],
        ),
        b(
            "GET /connectors/{name}/config",
            get.clone(),
            "/connectors/source/config",
            none,
            &[""],
        ),
        b(
            "GET /connectors/{name}/status",
            get.clone(),
            "/connectors/source/status",
            none,
            &[],
        ),
        b(
            "GET /connectors/{name}/tasks",
            get.clone(),
            "/connectors/source/tasks",
            none,
            &["/*/config"],
        ),
        b(
            "GET /connectors/{name}/tasks/0/status",
            get.clone(),
            "/connectors/source/tasks/0/status",
            none,
            &[],
        ),
        b(
            "GET /connectors/{name}/tasks/-1/status",
            get.clone(),
            "/connectors/source/tasks/-1/status",
            none,
            &[],
        ),
        b(
            "GET /connectors/{name}/tasks/7/status",
            get.clone(),
            "/connectors/source/tasks/7/status",
            none,
            &[],
        ),
        b(
            "GET /connectors/missing",
            get.clone(),
            "/connectors/missing",
            none,
            &[],
        ),
        b(
            "GET /connectors/missing/status",
            get.clone(),
            "/connectors/missing/status",
            none,
            &[],
        ),
        b(
            "GET /connectors?expand=status&expand=info",
            get.clone(),
            "/connectors?expand=status&expand=info",
            none,
            &["", "/*/info/config", "/*/info/tasks"],
        ),
        b(
            "GET /connectors/{name}/topics",
            get.clone(),
            "/connectors/source/topics",
            none,
            &[],
        ),
        b(
            "POST /connectors/{name}/restart?includeTasks=True&onlyFailed=False",
            Method::POST,
            "/connectors/source/restart?includeTasks=True&onlyFailed=False",
            none,
            &[],
        ),
    ];
    found.extend(run(steps, &connect, &ours).await);
    connect.until_state("source", "RUNNING");
    ours.until_state("source", "RUNNING");
    let steps = vec![
        b(
            "POST /connectors/{name}/restart",
            Method::POST,
            "/connectors/source/restart",
            none,
            &[],
        ),
        b(
            "POST /connectors/{name}/restart?onlyFailed=TRUE",
            Method::POST,
            "/connectors/source/restart?includeTasks=true&onlyFailed=TRUE",
            none,
            &[],
        ),
        b(
            "POST /connectors/{name}/tasks/0/restart",
            Method::POST,
            "/connectors/source/tasks/0/restart",
            none,
            &[],
        ),
        b(
            "POST /connectors/missing/restart",
            Method::POST,
            "/connectors/missing/restart",
            none,
            &[],
        ),
        b(
            "PUT /connectors/{name}/pause",
            Method::PUT,
            "/connectors/source/pause",
            none,
            &[],
        ),
    ];
    found.extend(run(steps, &connect, &ours).await);
    connect.until_state("source", "PAUSED");
    ours.until_state("source", "PAUSED");
    let steps = vec![
        b(
            "GET /connectors/{name}/status (paused)",
            get.clone(),
            "/connectors/source/status",
            none,
            &[],
        ),
        b(
            "PUT /connectors/{name}/resume",
            Method::PUT,
            "/connectors/source/resume",
            none,
            &[],
        ),
        // Update, then create with PUT (Location), then PATCH.
        b(
            "PUT /connectors/{name}/config (update)",
            Method::PUT,
            "/connectors/source/config",
            &|s| Body::Json(config_with(&s.source, &[("tasks.max", "1")])),
            &["/config"],
        ),
        b(
            "PUT /connectors/{name}/config (create)",
            Method::PUT,
            "/connectors/sink/config",
            &|s| Body::Json(s.sink.clone()),
            &["/config"],
        ),
        b(
            "PUT /connectors/{name}/config (name differs)",
            Method::PUT,
            "/connectors/sink/config",
            &|s| Body::Json(config_with(&s.sink, &[("name", "other")])),
            &[],
        ),
        b(
            "PATCH /connectors/{name}/config",
            Method::PATCH,
            "/connectors/sink/config",
            &|_| Body::Json(json!({"errors.log.enable": "true"})),
            &["/config"],
        ),
        b(
            "PUT /connectors/{name}/topics/reset",
            Method::PUT,
            "/connectors/source/topics/reset",
            none,
            &[],
        ),
        b(
            "PUT /connectors/{name}/stop",
            Method::PUT,
            "/connectors/source/stop",
            none,
            &[],
        ),
    ];
    found.extend(run(steps, &connect, &ours).await);
    connect.until("/connectors/source/status", |s| {
        s["connector"]["state"] == "STOPPED"
    });
    ours.until("/connectors/source/status", |s| {
        s["connector"]["state"] == "STOPPED"
    });
    let offset_maps: &[&'static str] = &["/offsets/*/partition", "/offsets/*/offset"];
    let steps = vec![
        b(
            "GET /connectors/{name}/status (stopped)",
            get.clone(),
            "/connectors/source/status",
            none,
            &[],
        ),
        b(
            "GET /connectors/{name}/offsets",
            get.clone(),
            "/connectors/source/offsets",
            none,
            offset_maps,
        ),
        b(
            "PATCH /connectors/{name}/offsets (no entries)",
            Method::PATCH,
            "/connectors/source/offsets",
            &|_| Body::Json(json!({"offsets": []})),
            &[],
        ),
        b(
            "DELETE /connectors/{name}/offsets",
            Method::DELETE,
            "/connectors/source/offsets",
            none,
            &[],
        ),
        b(
            "GET /connectors/{name}/offsets (reset)",
            get.clone(),
            "/connectors/source/offsets",
            none,
            offset_maps,
        ),
        // Plugins.
        b(
            "GET /connector-plugins",
            get.clone(),
            "/connector-plugins",
            none,
            &[],
        ),
        b(
            "GET /connector-plugins?connectorsOnly=False",
            get.clone(),
            "/connector-plugins?connectorsOnly=False",
            none,
            &[],
        ),
        b(
            "GET /connector-plugins/{plugin}/config",
            get.clone(),
            "/connector-plugins/{plugin}/config",
            none,
            &["~/*"],
        ),
        b(
            "GET /connector-plugins/missing/config",
            get.clone(),
            "/connector-plugins/missing/config",
            none,
            &[],
        ),
        b(
            "PUT /connector-plugins/{plugin}/config/validate",
            Method::PUT,
            "/connector-plugins/{plugin}/config/validate",
            &|s| {
                Body::Json(config_with(
                    &s.source,
                    &[("name", "v"), ("tasks.max", "zero")],
                ))
            },
            &["~/configs"],
        ),
        b(
            "PUT /connector-plugins/missing/config/validate",
            Method::PUT,
            "/connector-plugins/missing/config/validate",
            &|s| Body::Json(config_with(&s.source, &[("name", "v")])),
            &[],
        ),
        // Loggers.
        b(
            "GET /admin/loggers",
            get.clone(),
            "/admin/loggers",
            none,
            &[""],
        ),
        b(
            "GET /admin/loggers/root",
            get.clone(),
            "/admin/loggers/root",
            none,
            &[],
        ),
        b(
            "PUT /admin/loggers/root",
            Method::PUT,
            "/admin/loggers/root",
            &|_| Body::Json(json!({"level": "WARN"})),
            &[],
        ),
        b(
            "PUT /admin/loggers/root (bad level)",
            Method::PUT,
            "/admin/loggers/root",
            &|_| Body::Json(json!({"level": "LOUD"})),
            &[],
        ),
        // What is no endpoint.
        b("GET /nope", get.clone(), "/nope", none, &[]),
        b(
            "DELETE /connectors",
            Method::DELETE,
            "/connectors",
            none,
            &[],
        ),
        // Delete.
        b(
            "DELETE /connectors/{name}",
            Method::DELETE,
            "/connectors/sink",
            none,
            &[],
        ),
        b(
            "DELETE /connectors/{name} (gone)",
            Method::DELETE,
            "/connectors/sink",
            none,
            &[],
        ),
    ];
    found.extend(run(steps, &connect, &ours).await);

    let known: BTreeSet<String> = KNOWN.iter().map(|(l, d)| format!("{l}: {d}")).collect();
    let found: BTreeSet<String> = found.into_iter().collect();
    let unexplained: Vec<&String> = found.difference(&known).collect();
    let gone: Vec<&String> = known.difference(&found).collect();
    assert!(
        unexplained.is_empty() && gone.is_empty(),
        "differences from Kafka Connect not in KNOWN (fix them, or list them here and in docs/rest.md with the reason):\n{}\n\nKNOWN differences no longer found (remove them):\n{}",
        unexplained
            .iter()
            .map(|d| d.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        gone.iter()
            .map(|d| d.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
    );
    // Every known difference is explained in the reference.
    let docs = fs::read_to_string(repo_root().join("docs/rest.md")).unwrap();
    for (label, _) in KNOWN {
        assert!(
            docs.contains(&format!("`{label}`")),
            "docs/rest.md does not explain the difference in `{label}`"
        );
    }
    drop(kafka_connect);
    worker.stop();
}

#[test]
fn shapes_mask_values_but_not_structure() {
    let maps = ["/config"];
    let a = json!({"name": "x", "config": {"file": "/a", "topic": "t"}, "tasks": [{"connector": "x", "task": 0}], "type": "source"});
    let b = json!({"name": "y", "config": {"files": "/b"}, "tasks": [{"connector": "y", "task": 3}], "type": "source"});
    let mut out = Vec::new();
    diff(
        &shape(&a, "", &maps),
        &shape(&b, "", &maps),
        "body",
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    let c = json!({"name": "y", "config": {"files": "/b"}, "tasks": [{"connector": "y"}], "type": "sink"});
    diff(
        &shape(&a, "", &maps),
        &shape(&c, "", &maps),
        "body",
        &mut out,
    );
    assert_eq!(
        out,
        vec![
            "body/tasks/*/task: missing in wasm-connect".to_owned(),
            "body/type: Kafka Connect \"=source\", wasm-connect \"=sink\"".to_owned()
        ]
    );
}
