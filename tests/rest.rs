//! The REST API over real HTTP against a running worker on the real broker: every endpoint,
//! the error cases, authentication, persistence, pause/resume/stop with offsets, and the CLI
//! client against the same worker.

use std::fs;
use std::process::Command;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use wasm_connect::rest::{ENDPOINTS, UNKNOWN_ENDPOINT};
use wasm_connect_tests::kafka::{consume, create_topic, unique_topic};
use wasm_connect_tests::worker::{Worker, eventually, lines, write_properties};
use wasm_connect_tests::{kafka, repo_root, test_plugin_file, wasm_connect_bin};

struct Api {
    base: String,
    http: reqwest::Client,
    auth: Option<String>,
}

impl Api {
    fn new(base: String) -> Self {
        Self {
            base,
            http: reqwest::Client::new(),
            auth: None,
        }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(auth) = &self.auth {
            request = request.header("Authorization", auth);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn raw(&self, method: Method, path: &str, body: &str) -> (StatusCode, Value) {
        let response = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        let status = response.status();
        (
            status,
            serde_json::from_str(&response.text().await.unwrap()).unwrap_or(Value::Null),
        )
    }
}

fn worker_settings() -> Vec<(&'static str, String)> {
    kafka::worker_settings(300)
}

fn assert_error(status: StatusCode, body: &Value, expected: StatusCode, needle: &str) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["error_code"], expected.as_u16(), "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(needle),
        "{message:?} should contain {needle:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_endpoint_over_http_with_its_error_cases() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let output = dir.path().join("out");
    fs::create_dir_all(&input).unwrap();
    fs::create_dir_all(&output).unwrap();
    let mut expected = Vec::new();
    for f in 0..5 {
        let body: Vec<String> = (0..40).map(|l| format!("f{f} line{l}")).collect();
        fs::write(input.join(format!("f{f}.txt")), body.join("\n") + "\n").unwrap();
        expected.extend(body);
    }
    let topic = unique_topic("rest");
    create_topic(&topic, 1).await;
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[]);
    let api = Api::new(worker.rest_url(Duration::from_secs(120)));

    // Root and health.
    let (status, root) = api.call(Method::GET, "/", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(root["version"], "0.1.0");
    assert!(root["kafka_cluster_id"].is_string(), "{root}");
    let (status, health) = api.call(Method::GET, "/health", None).await;
    assert_eq!(
        (status, health["status"].as_str()),
        (StatusCode::OK, Some("healthy"))
    );
    assert_eq!(
        api.call(Method::GET, "/connectors", None).await.1,
        json!([])
    );

    // Create a source over 5 files with tasks.max=3.
    let source_config = json!({
        "connector.class": "file-source", "tasks.max": "3", "topic": topic,
        "directory": input.display().to_string(), "sandbox.fs.read": input.display().to_string(),
        "value.converter": "string",
    });
    let (status, created) = api
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "src", "config": source_config})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["name"], "src");
    assert_eq!(created["type"], "source");
    assert_eq!(created["tasks"].as_array().unwrap().len(), 3);
    let (status, body) = api
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "src", "config": source_config})),
        )
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "already exists");
    let (status, body) = api
        .raw(Method::POST, "/connectors", "{\"name\": \"broken\", ")
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "Invalid JSON");
    let (status, body) = api
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "bad", "config": {"connector.class": "datagen", "count": "many"}})),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "topic: is required");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("count: \"many\" is not a valid LONG"),
        "{body}"
    );
    let (status, body) = api
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "x", "config": {"connector.class": "nope"}})),
        )
        .await;
    assert_error(
        status,
        &body,
        StatusCode::BAD_REQUEST,
        "no plugin named nope",
    );

    // Tasks: 2/2/1 files.
    let (_, tasks) = api.call(Method::GET, "/connectors/src/tasks", None).await;
    let split: Vec<usize> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            serde_json::from_str::<Vec<String>>(
                t["config"]["file-source.task.files"].as_str().unwrap(),
            )
            .unwrap()
            .len()
        })
        .collect();
    assert_eq!(split, vec![2, 2, 1]);
    assert_eq!(tasks[2]["id"], json!({"connector": "src", "task": 2}));

    // A sink writing everything to a file.
    let out_file = output.join("all.txt");
    let sink_config = json!({
        "connector.class": "file-sink", "topics": topic, "file": out_file.display().to_string(),
        "sandbox.fs.write": output.display().to_string(), "value.converter": "string",
    });
    let (status, _) = api
        .call(
            Method::PUT,
            "/connectors/sink/config",
            Some(sink_config.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(
        eventually(Duration::from_secs(60), || lines(&out_file).len()
            >= expected.len()),
        "{}",
        worker.log_text()
    );

    // Status and expand.
    let (_, status_body) = api.call(Method::GET, "/connectors/src/status", None).await;
    assert_eq!(status_body["connector"]["state"], "RUNNING");
    assert!(
        status_body["connector"]["worker_id"]
            .as_str()
            .unwrap()
            .contains(':')
    );
    assert_eq!(status_body["tasks"].as_array().unwrap().len(), 3);
    assert!(
        status_body["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["state"] == "RUNNING")
    );
    let (_, expanded) = api
        .call(Method::GET, "/connectors?expand=status&expand=info", None)
        .await;
    assert_eq!(expanded["src"]["status"]["type"], "source");
    assert_eq!(expanded["sink"]["info"]["config"]["topics"], topic);
    let (_, task) = api
        .call(Method::GET, "/connectors/src/tasks/1/status", None)
        .await;
    assert_eq!(
        (task["id"].as_u64(), task["state"].as_str()),
        (Some(1), Some("RUNNING"))
    );
    let (status, body) = api
        .call(Method::GET, "/connectors/src/tasks/9/status", None)
        .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "Task src-9 not found");
    let (_, metrics) = api
        .call(Method::GET, "/connectors/src/tasks/1/metrics", None)
        .await;
    assert_eq!(metrics["state"], "RUNNING", "{metrics}");
    assert_eq!(metrics["errors"]["total_record_errors"], 0, "{metrics}");
    assert!(metrics["records_in"].is_u64(), "{metrics}");
    let (status, body) = api
        .call(Method::GET, "/connectors/src/tasks/9/metrics", None)
        .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "Task src-9 not found");
    let (status, body) = api.call(Method::GET, "/connectors/ghost", None).await;
    assert_error(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "Connector ghost not found",
    );

    // Restarts: 204 for the connector alone, 202 with a status when tasks are included.
    assert_eq!(
        api.call(Method::POST, "/connectors/src/tasks/0/restart", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        api.call(Method::POST, "/connectors/src/restart", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let (status, body) = api
        .call(
            Method::POST,
            "/connectors/src/restart?includeTasks=true&onlyFailed=false",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(body["name"], "src");

    // Re-split with PUT /config: tasks.max 3 -> 1; appended lines still arrive exactly once.
    let mut one_task = source_config.clone();
    one_task["tasks.max"] = json!("1");
    let (status, info) = api
        .call(Method::PUT, "/connectors/src/config", Some(one_task))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(info["tasks"].as_array().unwrap().len(), 1);
    let more: Vec<String> = (0..30).map(|l| format!("f3 more{l}")).collect();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(input.join("f3.txt"))
        .unwrap();
    use std::io::Write;
    writeln!(f, "{}", more.join("\n")).unwrap();
    expected.extend(more);
    assert!(
        eventually(Duration::from_secs(60), || lines(&out_file).len()
            >= expected.len()),
        "{}",
        worker.log_text()
    );
    std::thread::sleep(Duration::from_secs(2));
    let mut got = lines(&out_file);
    got.sort();
    expected.sort();
    assert_eq!(
        got, expected,
        "no line lost or duplicated across the re-split"
    );

    // Config: GET, PATCH with null removing a key.
    let (_, config) = api.call(Method::GET, "/connectors/sink/config", None).await;
    assert_eq!(config["file"], out_file.display().to_string());
    let (status, patched) = api
        .call(
            Method::PATCH,
            "/connectors/sink/config",
            Some(json!({"value.converter": null, "tasks.max": "2"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert!(patched["config"].get("value.converter").is_none());
    assert_eq!(patched["config"]["tasks.max"], "2");
    let (status, body) = api
        .call(
            Method::PUT,
            "/connectors/sink/config",
            Some(json!({"name": "other", "connector.class": "file-sink"})),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "doesn't match");

    // Topics.
    let (_, topics) = api.call(Method::GET, "/connectors/src/topics", None).await;
    assert_eq!(topics["src"]["topics"], json!([topic]));
    assert_eq!(
        api.call(Method::PUT, "/connectors/src/topics/reset", None)
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        api.call(Method::GET, "/connectors/src/topics", None)
            .await
            .1["src"]["topics"],
        json!([])
    );

    // Offsets: readable while running; changes need STOPPED.
    let (_, offsets) = api.call(Method::GET, "/connectors/src/offsets", None).await;
    let positions = offsets["offsets"].as_array().unwrap();
    assert_eq!(positions.len(), 5, "{offsets}");
    assert!(
        positions
            .iter()
            .all(|o| o["partition"]["file"].is_string() && o["offset"]["position"].is_u64())
    );
    let (_, sink_offsets) = api
        .call(Method::GET, "/connectors/sink/offsets", None)
        .await;
    assert_eq!(
        sink_offsets["offsets"][0]["partition"],
        json!({"kafka_topic": topic, "kafka_partition": 0})
    );
    assert!(
        sink_offsets["offsets"][0]["offset"]["kafka_offset"]
            .as_i64()
            .unwrap()
            > 0
    );
    let (status, body) = api
        .call(Method::DELETE, "/connectors/src/offsets", None)
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "STOPPED");
    assert_eq!(
        api.call(Method::PUT, "/connectors/sink/stop", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (status, body) = api
        .call(Method::PATCH, "/connectors/sink/offsets", Some(json!({"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, sink_offsets) = api
        .call(Method::GET, "/connectors/sink/offsets", None)
        .await;
    assert_eq!(sink_offsets["offsets"][0]["offset"]["kafka_offset"], 5);
    let (status, body) = api
        .call(Method::DELETE, "/connectors/sink/offsets", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        api.call(Method::GET, "/connectors/sink/offsets", None)
            .await
            .1,
        json!({"offsets": []})
    );

    // Plugins and validation.
    let (_, plugins) = api.call(Method::GET, "/connector-plugins", None).await;
    assert!(
        plugins
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["class"] == "datagen" && p["type"] == "source")
    );
    let (_, all) = api
        .call(Method::GET, "/connector-plugins?connectorsOnly=false", None)
        .await;
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "converter")
    );
    let (_, defs) = api
        .call(Method::GET, "/connector-plugins/datagen/config", None)
        .await;
    let topic_def = defs
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "topic")
        .unwrap();
    assert_eq!(
        (topic_def["type"].as_str(), topic_def["required"].as_bool()),
        (Some("STRING"), Some(true))
    );
    let (status, body) = api
        .call(Method::GET, "/connector-plugins/nope/config", None)
        .await;
    assert_error(
        status,
        &body,
        StatusCode::NOT_FOUND,
        "Unknown connector plugin nope",
    );
    let (status, result) = api
        .call(
            Method::PUT,
            "/connector-plugins/datagen/config/validate",
            Some(json!({"connector.class": "datagen", "name": "v", "count": "many"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(result["error_count"], 2, "{result}");
    let count = result["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["value"]["name"] == "count")
        .unwrap();
    assert!(
        count["value"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("not a valid LONG")
    );
    assert_eq!(count["definition"]["type"], "LONG");
    let (_, ok) = api
        .call(
            Method::PUT,
            "/connector-plugins/datagen/config/validate",
            Some(json!({"name": "v", "topic": "t"})),
        )
        .await;
    assert_eq!(ok["error_count"], 0, "{ok}");
    // Transforms: listed as Kafka Connect lists them, their options shown, and a bad chain's
    // every problem reported under its key.
    for (class, kind) in [
        (
            "org.apache.kafka.connect.transforms.RegexRouter",
            "transformation",
        ),
        (
            "org.apache.kafka.connect.transforms.InsertField$Value",
            "transformation",
        ),
        (
            "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
            "predicate",
        ),
    ] {
        assert!(
            all.as_array()
                .unwrap()
                .iter()
                .any(|p| p["class"] == class && p["type"] == kind),
            "{class} in {all}"
        );
    }
    let (status, defs) = api
        .call(
            Method::GET,
            "/connector-plugins/org.apache.kafka.connect.transforms.RegexRouter/config",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = defs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert_eq!(names, ["regex", "replacement"], "{defs}");
    let (_, bad) = api
        .call(
            Method::PUT,
            "/connector-plugins/datagen/config/validate",
            Some(
                json!({"name": "v", "topic": "t", "transforms": "route,mask,nope",
                "transforms.route.type": "RegexRouter", "transforms.route.regex": "(",
                "transforms.route.replacement": "x",
                "transforms.mask.type": "MaskField$Value", "transforms.mask.predicate": "p",
                "transforms.nope.type": "com.example.Nope"}),
            ),
        )
        .await;
    let errors_of = |key: &str| -> Vec<String> {
        bad["configs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["value"]["name"] == key)
            .flat_map(|c| c["value"]["errors"].as_array().unwrap().clone())
            .map(|e| e.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(bad["error_count"], 4, "{bad}");
    assert!(
        errors_of("transforms.route.regex")[0].contains("Invalid regex"),
        "{bad}"
    );
    assert!(
        errors_of("transforms.mask.fields")[0].contains("Missing required"),
        "{bad}"
    );
    assert!(
        errors_of("transforms.mask.predicate")[0].contains("`predicates` does not list"),
        "{bad}"
    );
    assert!(
        errors_of("transforms.nope.type")[0].contains("unknown transform"),
        "{bad}"
    );
    let group = bad["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["value"]["name"] == "transforms.route.regex")
        .unwrap()["definition"]["group"]
        .clone();
    assert_eq!(group, "Transforms: route");
    // Without a name the connector's own checks stop early; the transforms are still checked.
    let (_, nameless) = api
        .call(
            Method::PUT,
            "/connector-plugins/datagen/config/validate",
            Some(json!({"transforms": "a", "transforms.a.type": "Nope"})),
        )
        .await;
    assert!(
        nameless["configs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["value"]["name"] == "transforms.a.type"
                && !c["value"]["errors"].as_array().unwrap().is_empty()),
        "{nameless}"
    );
    // The plugin's validate runs with the config's grants: a directory it may not list is an
    // error of `directory` now, not a failed create later.
    let dir = input.display().to_string();
    let file_source = |grant: bool| {
        let mut config = json!({"name": "v", "topic": "t", "directory": dir});
        if grant {
            config["sandbox.fs.read"] = json!(dir);
        }
        config
    };
    let (_, refused) = api
        .call(
            Method::PUT,
            "/connector-plugins/file-source/config/validate",
            Some(file_source(false)),
        )
        .await;
    assert_eq!(refused["error_count"], 1, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("is it granted with sandbox.fs.read"),
        "{refused}"
    );
    let (_, ok) = api
        .call(
            Method::PUT,
            "/connector-plugins/file-source/config/validate",
            Some(file_source(true)),
        )
        .await;
    assert_eq!(ok["error_count"], 0, "{ok}");

    // Loggers really change the log level.
    let (_, loggers) = api.call(Method::GET, "/admin/loggers", None).await;
    assert_eq!(loggers["root"]["level"], "WARN");
    assert_eq!(loggers["wasm_connect"]["level"], "INFO");
    assert!(!worker.log_text().contains("flushed source offsets"));
    let (status, affected) = api
        .call(
            Method::PUT,
            "/admin/loggers/wasm_connect::task",
            Some(json!({"level": "DEBUG"})),
        )
        .await;
    assert_eq!(
        (status, affected),
        (StatusCode::OK, json!(["wasm_connect::task"]))
    );
    let (_, level) = api
        .call(
            Method::GET,
            "/admin/loggers/wasm_connect::task::source",
            None,
        )
        .await;
    assert_eq!(level["level"], "DEBUG");
    assert!(level["last_modified"].is_u64());
    let more: Vec<String> = (0..5).map(|l| format!("f0 late{l}")).collect();
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(input.join("f0.txt"))
        .unwrap();
    writeln!(f, "{}", more.join("\n")).unwrap();
    assert!(
        eventually(Duration::from_secs(30), || worker
            .log_text()
            .contains("flushed source offsets")),
        "debug logs appear"
    );
    let (status, body) = api
        .call(
            Method::PUT,
            "/admin/loggers/root",
            Some(json!({"level": "LOUD"})),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid log level");

    // Every documented endpoint is routed (never the unknown-endpoint 404 or a 405).
    for (method, path) in ENDPOINTS {
        let path = path
            .replace("{name}", "src")
            .replace("{task}", "0")
            .replace("{plugin}", "datagen")
            .replace("{logger}", "root");
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let (status, body) = api.call(method.clone(), &path, Some(json!({}))).await;
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert!(
            body["message"] != UNKNOWN_ENDPOINT,
            "{method} {path} is not routed"
        );
    }
    let (status, body) = api.call(Method::GET, "/nope", None).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, UNKNOWN_ENDPOINT);
    let (status, _) = api.call(Method::POST, "/health", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    // Delete.
    assert_eq!(
        api.call(Method::DELETE, "/connectors/sink", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (status, body) = api.call(Method::DELETE, "/connectors/sink", None).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "not found");
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// What clients written for Apache Kafka Connect send (Python's capitalised booleans, Debezium's
/// trailing slashes, odd task ids, big bodies, names with control characters) is answered as
/// Kafka Connect answers it, every error in its JSON body.
#[tokio::test(flavor = "multi_thread")]
async fn third_party_clients_are_answered_as_kafka_connect_answers_them() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("compat");
    create_topic(&topic, 1).await;
    let mut settings = worker_settings();
    settings.push(("rest.request.max.bytes", "4096".to_owned()));
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let api = Api::new(worker.rest_url(Duration::from_secs(120)));
    let http = reqwest::Client::new();

    // GET / names the commit the worker was built from (a build with WASM_CONNECT_COMMIT set
    // names that; one outside git says unknown).
    let (_, root) = api.call(Method::GET, "/", None).await;
    let head = Command::new("git")
        .args(["rev-parse", "--short=16", "HEAD"])
        .current_dir(repo_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let expected = std::env::var("WASM_CONNECT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or(head)
        .unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(root["commit"].as_str(), Some(expected.as_str()), "{root}");

    // Health answers a probe whatever its Host; the rest refuses a foreign Host without
    // credentials.
    for (path, expected) in [
        ("/health", StatusCode::OK),
        ("/connectors", StatusCode::FORBIDDEN),
    ] {
        let answer = http
            .get(format!("{}{path}", api.base))
            .header("host", "attacker.example")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), expected, "{path}");
    }

    // POST with a trailing slash creates, and the 201 says where the connector is.
    let config = json!({"connector.class": "datagen", "topic": topic, "count": "10",
        "value.converter": "string"});
    let created = http
        .post(format!("{}/connectors/", api.base))
        .json(&json!({"name": "compat", "config": config}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(
        created.headers()["location"].to_str().unwrap(),
        format!("{}/connectors/compat", api.base)
    );
    let (status, info) = api.call(Method::GET, "/connectors/compat/", None).await;
    assert_eq!(
        (status, info["name"].as_str()),
        (StatusCode::OK, Some("compat"))
    );
    // PUT .../config creates with a Location (the name percent-encoded), then updates without.
    let put = |name: &'static str| {
        http.put(format!("{}/connectors/{name}/config", api.base))
            .json(&config)
            .send()
    };
    let first = put("two%20words").await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(
        first.headers()["location"].to_str().unwrap(),
        format!("{}/connectors/two%20words", api.base)
    );
    let again = put("two%20words").await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert!(again.headers().get("location").is_none());

    // Booleans in query strings are read as Java reads them: never a rejection.
    let (status, body) = api
        .call(
            Method::POST,
            "/connectors/compat/restart?includeTasks=True&onlyFailed=False",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["name"], "compat", "{body}");
    // Kafka Connect's restart plan: what is restarted says so.
    assert_eq!(body["connector"]["state"], "RESTARTING", "{body}");
    assert_eq!(body["tasks"][0]["state"], "RESTARTING", "{body}");
    let (status, _) = api
        .call(
            Method::POST,
            "/connectors/compat/restart?includeTasks=FALSE&onlyFailed=nope",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, plugins) = api
        .call(Method::GET, "/connector-plugins?connectorsOnly=False", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        plugins
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "converter"),
        "{plugins}"
    );
    let (_, plugins) = api
        .call(Method::GET, "/connector-plugins?connectorsOnly=TRUE", None)
        .await;
    assert!(
        !plugins
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "converter"),
        "{plugins}"
    );

    // Task ids that name no task are 404s.
    for task in ["-1", "x", "99"] {
        let (status, body) = api
            .call(
                Method::GET,
                &format!("/connectors/compat/tasks/{task}/status"),
                None,
            )
            .await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "not found");
    }

    // A body over rest.request.max.bytes: 413, in Connect's error body.
    let mut big = config.clone();
    big["padding"] = json!("x".repeat(5000));
    let (status, body) = api
        .call(Method::PUT, "/connectors/compat/config", Some(big))
        .await;
    assert_error(
        status,
        &body,
        StatusCode::PAYLOAD_TOO_LARGE,
        "rest.request.max.bytes",
    );

    // Control characters in a name would let a caller forge log lines: refused.
    let (status, body) = api
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "forged\nERROR line", "config": config})),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "control characters");
    let (status, body) = api
        .call(
            Method::PUT,
            "/connectors/tab%09name/config",
            Some(config.clone()),
        )
        .await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "control characters");
    assert_eq!(
        api.call(Method::GET, "/connectors", None).await.1,
        json!(["compat", "two words"])
    );

    // The framework's own rejections carry the JSON body too: a path that is not UTF-8, an
    // unknown method, a body that is not JSON.
    let (status, body) = api.call(Method::GET, "/connectors/%FF/status", None).await;
    assert_eq!(body["error_code"], status.as_u16(), "{status} {body}");
    assert!(status.is_client_error(), "{status}");
    let (status, body) = api.call(Method::PATCH, "/connectors", None).await;
    assert_error(status, &body, StatusCode::METHOD_NOT_ALLOWED, "");
    let response = http
        .post(format!("{}/connectors", api.base))
        .body("name=x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error_code"], 415, "{body}");

    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// Datagen seqs of task 0 seen in `topic`.
fn seqs(topic: &str, at_least: usize) -> Vec<u64> {
    consume(topic, at_least, Duration::from_secs(10))
        .iter()
        .map(|r| {
            let v: Value = serde_json::from_slice(r.value.as_ref().unwrap()).unwrap();
            v["payload"]["seq"].as_u64().unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn pause_resume_stop_and_offset_reset_replay() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("pause");
    create_topic(&topic, 1).await;
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[]);
    let api = Api::new(worker.rest_url(Duration::from_secs(120)));
    let config = json!({"connector.class": "datagen", "topic": topic, "rate": "400"});
    let (status, _) = api
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "gen", "config": config})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(eventually(Duration::from_secs(60), || consume(
        &topic,
        300,
        Duration::from_secs(1)
    )
    .len()
        >= 300));

    assert_eq!(
        api.call(Method::PUT, "/connectors/gen/pause", None).await.0,
        StatusCode::ACCEPTED
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (_, status) = api.call(Method::GET, "/connectors/gen/status", None).await;
    assert_eq!(
        (
            status["connector"]["state"].as_str(),
            status["tasks"][0]["state"].as_str()
        ),
        (Some("PAUSED"), Some("PAUSED"))
    );
    let paused_at = consume(&topic, usize::MAX, Duration::from_secs(2)).len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        consume(&topic, usize::MAX, Duration::from_secs(2)).len(),
        paused_at,
        "nothing produced while paused"
    );

    assert_eq!(
        api.call(Method::PUT, "/connectors/gen/resume", None)
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert!(eventually(Duration::from_secs(30), || consume(
        &topic,
        paused_at + 200,
        Duration::from_secs(1)
    )
    .len()
        >= paused_at + 200));
    let mut seen = seqs(&topic, paused_at + 200);
    seen.sort();
    let n = seen.len() as u64;
    assert_eq!(
        seen,
        (0..n).collect::<Vec<_>>(),
        "resume continued from the same offset: no gap, no repeat"
    );

    assert_eq!(
        api.call(Method::PUT, "/connectors/gen/stop", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (_, status) = api.call(Method::GET, "/connectors/gen/status", None).await;
    assert_eq!(status["connector"]["state"], "STOPPED");
    assert_eq!(status["tasks"], json!([]), "stop releases the tasks");
    assert_eq!(
        api.call(Method::GET, "/connectors/gen/tasks", None).await.1,
        json!([])
    );
    let (_, offsets) = api.call(Method::GET, "/connectors/gen/offsets", None).await;
    let stored_seq = offsets["offsets"][0]["offset"]["seq"].as_u64().unwrap();
    assert!(
        stored_seq + 1 >= n,
        "the stop flushed the offsets ({stored_seq} vs {n})"
    );

    let (status, _) = api
        .call(Method::DELETE, "/connectors/gen/offsets", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        api.call(Method::GET, "/connectors/gen/offsets", None)
            .await
            .1,
        json!({"offsets": []})
    );
    let before = consume(&topic, usize::MAX, Duration::from_secs(2)).len();
    assert_eq!(
        api.call(Method::PUT, "/connectors/gen/resume", None)
            .await
            .0,
        StatusCode::ACCEPTED
    );
    assert!(eventually(Duration::from_secs(30), || consume(
        &topic,
        before + 50,
        Duration::from_secs(1)
    )
    .len()
        >= before + 50));
    let zeros = seqs(&topic, before + 50)
        .iter()
        .filter(|s| **s == 0)
        .count();
    assert_eq!(
        zeros, 2,
        "after the reset the connector replays from the start"
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn connectors_survive_a_restart_and_passwords_are_never_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    fs::create_dir_all(&plugins).unwrap();
    fs::copy(
        test_plugin_file("flaky-sink"),
        plugins.join("flaky-sink.wasm"),
    )
    .unwrap();
    let mut settings = worker_settings();
    settings.push(("plugin.path", plugins.display().to_string()));
    let out = dir.path().join("out");
    fs::create_dir_all(&out).unwrap();
    let topic = unique_topic("secret");
    create_topic(&topic, 1).await;

    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let api = Api::new(worker.rest_url(Duration::from_secs(120)));
    let config = json!({
        "connector.class": "flaky-sink", "topics": topic, "file": out.join("x.txt").display().to_string(),
        "sandbox.fs.write": out.display().to_string(), "fail.times": "0", "secret": "hunter2",
    });
    let (status, created) = api
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "s", "config": config, "initial_state": "PAUSED"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    for path in [
        "/connectors/s",
        "/connectors/s/config",
        "/connectors/s/tasks",
        "/connectors/s/status",
        "/connectors?expand=info",
    ] {
        let (_, body) = api.call(Method::GET, path, None).await;
        assert!(
            !body.to_string().contains("hunter2"),
            "{path} echoed the password: {body}"
        );
    }
    assert_eq!(
        api.call(Method::GET, "/connectors/s/config", None).await.1["secret"],
        "[hidden]"
    );
    let (_, validated) = api
        .call(
            Method::PUT,
            "/connector-plugins/flaky-sink/config/validate",
            Some(json!({"name": "v", "file": "/tmp/v", "secret": "hunter2"})),
        )
        .await;
    assert!(
        !validated.to_string().contains("hunter2"),
        "validate echoed the password: {validated}"
    );
    let (_, log) = worker.stop();
    assert!(!log.contains("hunter2"), "the password is in the logs");

    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let api = Api::new(worker.rest_url(Duration::from_secs(120)));
    let (_, status) = api.call(Method::GET, "/connectors/s/status", None).await;
    assert_eq!(status["connector"]["state"], "PAUSED", "{status}");
    let stored = fs::read_to_string(dir.path().join("data/connectors.json")).unwrap();
    assert!(stored.contains("PAUSED"));
    worker.stop();

    // The plugin disappears: the connector is kept, FAILED with the reason, config intact.
    fs::remove_file(plugins.join("flaky-sink.wasm")).unwrap();
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let api = Api::new(worker.rest_url(Duration::from_secs(120)));
    let (_, status) = api.call(Method::GET, "/connectors/s/status", None).await;
    assert_eq!(status["connector"]["state"], "FAILED", "{status}");
    assert!(
        status["connector"]["trace"]
            .as_str()
            .unwrap()
            .contains("no plugin named flaky-sink"),
        "{status}"
    );
    let (_, failed_config) = api.call(Method::GET, "/connectors/s/config", None).await;
    assert_eq!(failed_config["topics"], topic);
    assert_eq!(
        failed_config["secret"], "[hidden]",
        "secrets stay hidden without the plugin"
    );
    worker.stop();

    // It comes back with the plugin.
    fs::copy(
        test_plugin_file("flaky-sink"),
        plugins.join("flaky-sink.wasm"),
    )
    .unwrap();
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let api = Api::new(worker.rest_url(Duration::from_secs(120)));
    assert_eq!(
        api.call(Method::GET, "/connectors/s/status", None).await.1["connector"]["state"],
        "PAUSED"
    );
    worker.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn authentication_is_enforced_and_required_off_loopback() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("tokens"), "s3cret-token\n").unwrap();
    fs::write(dir.path().join("users"), "admin:pa55\n").unwrap();
    let mut settings = worker_settings();
    settings.push((
        "rest.auth.token.file",
        dir.path().join("tokens").display().to_string(),
    ));
    settings.push((
        "rest.auth.basic.file",
        dir.path().join("users").display().to_string(),
    ));
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let mut api = Api::new(worker.rest_url(Duration::from_secs(120)));
    let (status, body) = api.call(Method::GET, "/connectors", None).await;
    assert_error(
        status,
        &body,
        StatusCode::UNAUTHORIZED,
        "Authentication required",
    );
    api.auth = Some("Bearer wrong".into());
    let (status, body) = api.call(Method::GET, "/connectors", None).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "not valid");
    api.auth = Some("Bearer s3cret-token".into());
    assert_eq!(
        api.call(Method::GET, "/connectors", None).await.0,
        StatusCode::OK
    );
    api.auth = Some(format!("Basic {}", base64_of("admin:pa55")));
    assert_eq!(
        api.call(Method::GET, "/connectors", None).await.0,
        StatusCode::OK
    );
    api.auth = Some(format!("Basic {}", base64_of("admin:nope")));
    assert_eq!(
        api.call(Method::GET, "/connectors", None).await.0,
        StatusCode::FORBIDDEN
    );
    worker.stop();

    let other = tempfile::tempdir().unwrap();
    let mut open = worker_settings();
    open.push(("listeners", "http://0.0.0.0:0".into()));
    let (status, log) = Worker::start(other.path(), &open, &[]).wait(Duration::from_secs(60));
    assert!(!status.success());
    assert!(
        log.contains("refusing to serve the REST API on http://0.0.0.0:0 without authentication"),
        "{log}"
    );
}

fn base64_of(text: &str) -> String {
    use std::fmt::Write;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                let _ = out.write_char('=');
            }
        }
    }
    out
}

fn cli(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(wasm_connect_bin())
        .args(args)
        .arg("--url")
        .arg(url)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_client_drives_a_running_worker() {
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_topic("cli");
    create_topic(&topic, 1).await;
    let mut worker = Worker::start(dir.path(), &worker_settings(), &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let file = dir.path().join("gen.properties");
    write_properties(
        &file,
        &[
            ("name", "gen".into()),
            ("connector.class", "datagen".into()),
            ("topic", topic.clone()),
            ("rate", "100".into()),
            ("tasks.max", "2".into()),
        ],
    );

    let (ok, out, err) = cli(
        &url,
        &["connectors", "create", "-f", file.to_str().unwrap()],
    );
    assert!(ok, "{err}");
    assert!(out.contains("created connector gen"), "{out}");
    let (ok, _, err) = cli(
        &url,
        &["connectors", "create", "-f", file.to_str().unwrap()],
    );
    assert!(
        !ok && err.contains("409") && err.contains("already exists"),
        "{err}"
    );

    let (_, out, _) = cli(&url, &["connectors", "list"]);
    assert!(
        out.lines().any(|l| l.starts_with("gen")
            && l.contains("source")
            && l.contains("RUNNING")
            && l.contains('2')),
        "{out}"
    );
    let (_, out, _) = cli(&url, &["connectors", "list", "--json"]);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["gen"]["status"]["connector"]["state"], "RUNNING");
    let (_, out, _) = cli(&url, &["connectors", "get", "gen"]);
    assert!(
        out.contains("gen (source, 2 task(s))") && out.contains(&topic),
        "{out}"
    );
    let (_, out, _) = cli(&url, &["connectors", "status", "gen"]);
    assert!(out.contains("task 1") && out.contains("RUNNING"), "{out}");
    let (_, out, _) = cli(&url, &["connectors", "tasks", "gen"]);
    assert!(out.contains("datagen.task.index"), "{out}");

    write_properties(
        &file,
        &[
            ("name", "gen".into()),
            ("connector.class", "datagen".into()),
            ("topic", topic.clone()),
            ("rate", "100".into()),
            ("tasks.max", "1".into()),
        ],
    );
    let (ok, out, err) = cli(
        &url,
        &["connectors", "update", "gen", "-f", file.to_str().unwrap()],
    );
    assert!(ok && out.contains("updated connector gen"), "{err}");
    for (verb, word) in [
        ("pause", "paused"),
        ("resume", "resumed"),
        ("stop", "stopped"),
    ] {
        let (ok, out, err) = cli(&url, &["connectors", verb, "gen"]);
        assert!(ok && out.contains(word), "{verb}: {err}");
    }
    let (_, out, _) = cli(&url, &["connectors", "offsets", "get", "gen"]);
    assert!(
        out.contains("PARTITION") && out.contains("\"seq\""),
        "{out}"
    );
    let offsets_file = dir.path().join("offsets.json");
    fs::write(
        &offsets_file,
        r#"{"offsets": [{"partition": {"task": 0, "tasks": 1}, "offset": {"seq": 41}}]}"#,
    )
    .unwrap();
    let (ok, out, err) = cli(
        &url,
        &[
            "connectors",
            "offsets",
            "set",
            "gen",
            "-f",
            offsets_file.to_str().unwrap(),
        ],
    );
    assert!(ok && out.contains("altered successfully"), "{err}");
    let (_, out, _) = cli(&url, &["connectors", "offsets", "get", "gen", "--json"]);
    assert!(out.contains("41"), "{out}");
    let (ok, out, _) = cli(&url, &["connectors", "offsets", "reset", "gen"]);
    assert!(ok && out.contains("reset successfully"), "{out}");
    let (ok, out, err) = cli(&url, &["connectors", "restart", "gen", "--include-tasks"]);
    assert!(ok && out.contains("gen (source)"), "{out}{err}");
    let (_, out, _) = cli(&url, &["plugins", "list"]);
    assert!(out.contains("datagen") && out.contains("source"), "{out}");
    let (ok, out, _) = cli(&url, &["connectors", "delete", "gen"]);
    assert!(ok && out.contains("deleted connector gen"), "{out}");
    let (ok, _, err) = cli(&url, &["connectors", "status", "gen"]);
    assert!(
        !ok && err.contains("404") && err.contains("not found"),
        "{err}"
    );
    let (ok, _, err) = cli("http://127.0.0.1:1", &["connectors", "list"]);
    assert!(!ok && err.contains("cannot reach the worker"), "{err}");
    worker.stop();
}

#[test]
fn the_rest_reference_documents_exactly_the_endpoints() {
    let docs = fs::read_to_string(repo_root().join("docs/rest.md")).unwrap();
    let documented: Vec<(String, String)> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .filter_map(|h| h.split_once(' '))
        .map(|(m, p)| (m.to_owned(), p.trim().to_owned()))
        .collect();
    let routed: Vec<(String, String)> = ENDPOINTS
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(
        documented, routed,
        "docs/rest.md headings must list ENDPOINTS, in order"
    );
    // Every endpoint section has a curl example and a response.
    for section in docs.split("\n### ").skip(1) {
        assert!(
            section.contains("curl "),
            "no curl example in: {}",
            section.lines().next().unwrap()
        );
        assert!(
            section.contains("Response"),
            "no response in: {}",
            section.lines().next().unwrap()
        );
    }
}
