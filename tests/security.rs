//! Secured Kafka against the real broker's SASL_SSL and SSL listeners (`scripts/kafka`): a
//! pipeline (datagen → topic → file-sink) over SASL_SSL with SCRAM-SHA-512 and over mutual
//! TLS. A wrong password and an untrusted CA each show in the statuses and the log as what
//! they are, no secret reaches the log, and once the config is fixed the pipeline finishes with
//! nothing lost; so does a connector's own client (KIP-458 overrides) that cannot
//! authenticate. OAUTHBEARER tokens come from a real token endpoint and are checked by the
//! broker against the signing key. Every compression type is written by a source (a
//! per-connector producer override) and read back by an independent consumer, and the
//! broker's own log tool says each topic's batches are stored with that codec.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use wasm_connect_tests::kafka::{self, consume, create_topic, unique_topic};
use wasm_connect_tests::plugins_with;
use wasm_connect_tests::rest::{block, create, get};
use wasm_connect_tests::worker::{Worker, eventually, lines};

const COUNT: usize = 2000;

/// Whether both connectors' statuses (connector or task trace) carry `needle`.
fn statuses_say(url: &str, needle: &str) -> bool {
    ["source", "sink"].iter().all(|name| {
        block(get(url, &format!("/connectors/{name}/status")))
            .to_string()
            .contains(needle)
    })
}

/// Distinct lines the sink wrote.
fn written(out: &Path) -> BTreeSet<String> {
    lines(&out.join("out.txt")).into_iter().collect()
}

/// A source and a sink over the worker's (secured) clients: `COUNT` records through `topic`
/// into `out/out.txt`.
async fn create_pipeline(url: &str, topic: &str, out: &Path) {
    let source = json!({"connector.class": "datagen", "topic": topic, "count": COUNT.to_string(),
        "value.converter": "string"});
    let sink = json!({"connector.class": "file-sink", "topics": topic,
        "file": out.join("out.txt").display().to_string(),
        "sandbox.fs.write": out.display().to_string(), "value.converter": "string"});
    assert_eq!(create(url, "source", source).await, StatusCode::CREATED);
    assert_eq!(create(url, "sink", sink).await, StatusCode::CREATED);
}

/// Wait until the sink has written all `COUNT` records (after a config was fixed).
fn all_written_once_fixed(url: &str, out: &Path, worker: &Worker) {
    let done = eventually(Duration::from_secs(120), || written(out).len() == COUNT);
    assert!(
        done,
        "{} of {COUNT} records reached the sink once the config was fixed: {}\n{}",
        written(out).len(),
        block(get(url, "/connectors/sink/status")),
        worker.log_text()
    );
}

/// Exactly `COUNT` records in `topic` and lines in the sink's file: nothing was delivered
/// under the bad settings, and nothing lost or written twice since.
fn exactly_count_once(topic: &str, out: &Path) {
    let records = consume(topic, COUNT + 1, Duration::from_secs(10));
    assert_eq!(records.len(), COUNT, "records in {topic}");
    assert_eq!(
        lines(&out.join("out.txt")).len(),
        COUNT,
        "no line written twice"
    );
}

/// Run a worker with `bad` settings until the statuses say `expected`; then again with `good`
/// settings (same data directory) until the pipeline is done. Checks that nothing was lost or
/// written twice, and that no `secrets` reached either log.
async fn fails_clearly_then_recovers(
    name: &str,
    bad: Vec<(&'static str, String)>,
    good: Vec<(&'static str, String)>,
    expected: &str,
    secrets: &[&str],
) {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen", "file-sink"], &[]);
    let topic = unique_topic(name);
    create_topic(&topic, 1).await;
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let common = [
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "500".to_owned()),
    ];
    let with = |settings: Vec<(&'static str, String)>| {
        let mut all = settings;
        all.extend(common.iter().cloned());
        all
    };

    let mut worker = Worker::start(dir.path(), &with(bad), &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    create_pipeline(&url, &topic, &out).await;
    let shown = eventually(Duration::from_secs(90), || statuses_say(&url, expected));
    assert!(
        shown,
        "the statuses say {expected:?}: {}\n{}\n{}",
        block(get(&url, "/connectors/source/status")),
        block(get(&url, "/connectors/sink/status")),
        worker.log_text()
    );
    let (_, bad_log) = worker.stop();
    assert!(
        bad_log.contains(expected),
        "the log says it too:\n{bad_log}"
    );
    assert!(written(&out).is_empty(), "nothing passed meanwhile");

    let mut worker = Worker::start(dir.path(), &with(good), &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    all_written_once_fixed(&url, &out, &worker);
    assert!(
        !statuses_say(&url, expected),
        "the failure is gone from the statuses"
    );
    let (status, good_log) = worker.stop();
    assert!(status.success(), "{good_log}");
    exactly_count_once(&topic, &out);
    for secret in secrets {
        assert!(
            !bad_log.contains(secret) && !good_log.contains(secret),
            "a secret reached the log"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn scram_over_sasl_ssl_a_wrong_password_says_so_and_the_fixed_config_loses_nothing() {
    let env = kafka::secured();
    let tls = PathBuf::from(&env["TLS_DIR"]);
    let settings = |password: &str| -> Vec<(&'static str, String)> {
        vec![
            ("bootstrap.servers", env["SASL_SSL"].clone()),
            ("security.protocol", "SASL_SSL".into()),
            ("sasl.mechanism", "SCRAM-SHA-512".into()),
            (
                "sasl.jaas.config",
                format!(
                    r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{password}";"#,
                    env["SASL_USER"]
                ),
            ),
            // A Java PKCS12 trust store made by keytool, as Kafka Connect users have them.
            (
                "ssl.truststore.location",
                tls.join("truststore.p12").display().to_string(),
            ),
            ("ssl.truststore.type", "PKCS12".into()),
            (
                "ssl.truststore.password",
                env["TRUST_STORE_PASSWORD"].clone(),
            ),
        ]
    };
    let expected = format!(
        "authentication failed for user {} (SCRAM-SHA-512)",
        env["SASL_USER"]
    );
    fails_clearly_then_recovers(
        "scram",
        settings("not-the-password"),
        settings(&env["SASL_PASSWORD"]),
        &expected,
        &["not-the-password", &env["SASL_PASSWORD"]],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_an_untrusted_ca_says_so_and_the_fixed_config_loses_nothing() {
    let env = kafka::secured();
    let tls = PathBuf::from(&env["TLS_DIR"]);
    let settings = |ca: &str| -> Vec<(&'static str, String)> {
        vec![
            ("bootstrap.servers", env["SSL"].clone()),
            ("security.protocol", "SSL".into()),
            // PEM, found by its content (Java's default type would be JKS).
            (
                "ssl.truststore.location",
                tls.join(ca).display().to_string(),
            ),
            (
                "ssl.keystore.location",
                tls.join("client-keystore.p12").display().to_string(),
            ),
            ("ssl.keystore.type", "PKCS12".into()),
            (
                "ssl.keystore.password",
                env["CLIENT_STORE_PASSWORD"].clone(),
            ),
        ]
    };
    fails_clearly_then_recovers(
        "mtls",
        settings("other-ca.pem"),
        settings("ca.pem"),
        "certificate not trusted",
        &[&env["CLIENT_STORE_PASSWORD"]],
    )
    .await;
}

/// Run `COUNT` records from datagen through a topic into file-sink over a worker with
/// `settings`, and check they all arrive.
async fn pipeline_completes(name: &str, settings: &[(String, String)]) {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen", "file-sink"], &[]);
    let topic = unique_topic(name);
    create_topic(&topic, 1).await;
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut all: Vec<(&str, String)> = settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    all.push(("plugin.path", plugins.display().to_string()));
    let mut worker = Worker::start(dir.path(), &all, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    create_pipeline(&url, &topic, &out).await;
    let done = eventually(Duration::from_secs(120), || written(&out).len() == COUNT);
    assert!(
        done,
        "{} of {COUNT} records reached the sink: {}\n{}",
        written(&out).len(),
        block(get(&url, "/connectors/sink/status")),
        worker.log_text()
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_with_pem_stores_written_the_kafka_connect_way() {
    // Kafka Connect's habit: the security keys at the top for the worker's own clients, and
    // repeated under producer. and consumer. for the tasks' clients. Both are read.
    let env = kafka::secured();
    let tls = PathBuf::from(&env["TLS_DIR"]);
    let ca = tls.join("ca.pem").display().to_string();
    let keystore = tls.join("client-keystore.pem").display().to_string();
    let security = [
        ("security.protocol", "SSL"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", &ca),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", &keystore),
    ];
    let mut settings = vec![("bootstrap.servers".to_owned(), env["SSL"].clone())];
    for prefix in ["", "producer.", "consumer."] {
        for (key, value) in security {
            settings.push((format!("{prefix}{key}"), value.to_owned()));
        }
    }
    pipeline_completes("mtls-pem", &settings).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oauthbearer_for_the_worker_and_plain_for_the_consumer_alone() {
    // The worker-level keys reach every client; consumer.-prefixed ones override them for the
    // sink's consumer only. Both mechanisms on the broker's SASL_PLAINTEXT listener.
    let env = kafka::secured();
    let settings = [
        ("bootstrap.servers", env["SASL_PLAINTEXT"].clone()),
        ("security.protocol", "SASL_PLAINTEXT".into()),
        ("sasl.mechanism", "OAUTHBEARER".into()),
        (
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="connect";"#.into(),
        ),
        ("consumer.sasl.mechanism", "PLAIN".into()),
        (
            "consumer.sasl.jaas.config",
            format!(
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="{}" password="{}";"#,
                env["SASL_USER"], env["SASL_PASSWORD"]
            ),
        ),
    ]
    .map(|(k, v)| (k.to_owned(), v));
    pipeline_completes("oauth-plain", &settings).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connector_s_own_client_that_cannot_authenticate_says_so_in_its_task_status() {
    // The worker's clients authenticate (so its probe finds the cluster answering); the
    // connectors' own clients (KIP-458 overrides) use a wrong SCRAM password. Each task's
    // status and the log say so; fixing the config through REST loses nothing.
    let env = kafka::secured();
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen", "file-sink"], &[]);
    let topic = unique_topic("own-client");
    create_topic(&topic, 1).await;
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let plain = format!(
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="{}" password="{}";"#,
        env["SASL_USER"], env["SASL_PASSWORD"]
    );
    let settings = [
        ("bootstrap.servers", env["SASL_PLAINTEXT"].clone()),
        ("security.protocol", "SASL_PLAINTEXT".into()),
        ("sasl.mechanism", "PLAIN".into()),
        ("sasl.jaas.config", plain),
        ("connector.client.config.override.policy", "All".into()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "500".into()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let scram = |password: &str| {
        format!(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{password}";"#,
            env["SASL_USER"]
        )
    };
    let configs = |password: &str| {
        (
            json!({"connector.class": "datagen", "topic": topic, "count": COUNT.to_string(),
                "value.converter": "string",
                "producer.override.sasl.mechanism": "SCRAM-SHA-512",
                "producer.override.sasl.jaas.config": scram(password)}),
            json!({"connector.class": "file-sink", "topics": topic,
                "file": out.join("out.txt").display().to_string(),
                "sandbox.fs.write": out.display().to_string(), "value.converter": "string",
                "consumer.override.sasl.mechanism": "SCRAM-SHA-512",
                "consumer.override.sasl.jaas.config": scram(password)}),
        )
    };
    let (source, sink) = configs("not-the-password");
    assert_eq!(create(&url, "source", source).await, StatusCode::CREATED);
    assert_eq!(create(&url, "sink", sink).await, StatusCode::CREATED);
    let says = |name: &str, keys: &str| {
        let trace = block(get(&url, &format!("/connectors/{name}/tasks/0/status")))["trace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        trace.contains(&format!(
            "the connector's own Kafka client ({keys}): authentication failed for user {} (SCRAM-SHA-512)",
            env["SASL_USER"]
        ))
    };
    let shown = eventually(Duration::from_secs(90), || {
        says("source", "producer.override.*") && says("sink", "consumer.override.*")
    });
    assert!(
        shown,
        "each task's status names its own client's failure: {}\n{}\n{}",
        block(get(&url, "/connectors/source/status")),
        block(get(&url, "/connectors/sink/status")),
        worker.log_text()
    );
    for name in ["source", "sink"] {
        let status = block(get(&url, &format!("/connectors/{name}/status")));
        assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    }
    assert!(
        worker
            .log_text()
            .contains("connector source task 0: the connector's own Kafka client (producer.override.*): authentication failed"),
        "the log says it, naming the task:\n{}",
        worker.log_text()
    );
    assert!(written(&out).is_empty(), "nothing passed meanwhile");

    let (source, sink) = configs(&env["SASL_PASSWORD"]);
    let client = reqwest::Client::new();
    for (name, config) in [("source", source), ("sink", sink)] {
        let response = client
            .put(format!("{url}/connectors/{name}/config"))
            .json(&config)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "PUT {name}");
    }
    all_written_once_fixed(&url, &out, &worker);
    assert!(
        !says("source", "producer.override.*") && !says("sink", "consumer.override.*"),
        "the failure is gone from the statuses"
    );
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
    assert!(!log.contains("not-the-password"), "no password in the log");
    exactly_count_once(&topic, &out);
}

/// A real OAuth 2 token endpoint on 127.0.0.1 (RFC 6749's client credentials grant, as an
/// identity provider serves it): the client `id` with secret `secret` gets `token`; any other
/// caller gets 401 `invalid_client`. Every request is kept.
struct TokenEndpoint {
    url: String,
    requests: Arc<Mutex<Vec<TokenRequest>>>,
}

/// One request a [`TokenEndpoint`] answered.
#[derive(Debug, Clone)]
struct TokenRequest {
    /// `POST /oauth2/token HTTP/1.1`, say.
    line: String,
    /// Whether it carried the client's credentials (HTTP Basic, RFC 6749 §2.3.1).
    authenticated: bool,
    /// The form it posted.
    body: String,
}

impl TokenEndpoint {
    fn start(token: &str, id: &str, secret: &str) -> Self {
        use base64::Engine;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/oauth2/token", listener.local_addr().unwrap());
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
        );
        let granted = json!({"access_token": token.trim(), "token_type": "Bearer",
            "expires_in": 3600})
        .to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(request) = read_token_request(&mut stream, &basic) else {
                    continue;
                };
                let (status, body) = if request.authenticated
                    && request.body.contains("grant_type=client_credentials")
                {
                    ("200 OK", granted.clone())
                } else {
                    (
                        "401 Unauthorized",
                        r#"{"error":"invalid_client"}"#.to_owned(),
                    )
                };
                seen.lock().unwrap().push(request);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        TokenEndpoint { url, requests }
    }

    fn requests(&self) -> Vec<TokenRequest> {
        self.requests.lock().unwrap().clone()
    }
}

/// Read one HTTP/1.1 request (head, then as many body bytes as Content-Length says).
fn read_token_request(stream: &mut std::net::TcpStream, basic: &str) -> Option<TokenRequest> {
    use std::io::{BufRead, BufReader, Read};
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let (mut length, mut authenticated) = (0usize, false);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse().ok()?;
        } else if name.eq_ignore_ascii_case("authorization") {
            authenticated = value.trim() == basic;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(TokenRequest {
        line: line.trim_end().to_owned(),
        authenticated,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Kafka Connect's settings for OAUTHBEARER tokens from a token endpoint (KIP-768).
fn oidc_settings(
    env: &BTreeMap<String, String>,
    endpoint: &str,
    secret: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("bootstrap.servers", env["OAUTH"].clone()),
        ("security.protocol", "SASL_PLAINTEXT".into()),
        ("sasl.mechanism", "OAUTHBEARER".into()),
        (
            "sasl.login.callback.handler.class",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler".into(),
        ),
        ("sasl.oauthbearer.token.endpoint.url", endpoint.to_owned()),
        (
            "sasl.jaas.config",
            format!(
                r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="connect-worker" clientSecret="{secret}" scope="kafka";"#
            ),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn oauthbearer_tokens_from_a_token_endpoint_a_wrong_client_secret_says_so() {
    // The broker's OAUTH listener checks each token's signature against the test key's JWKS,
    // its issuer and its audience, as with a real identity provider.
    let env = kafka::secured();
    let tls = PathBuf::from(&env["TLS_DIR"]);
    let token = std::fs::read_to_string(tls.join("oauth-token.jwt")).unwrap();
    let endpoint = TokenEndpoint::start(&token, "connect-worker", "client-secret-1");
    fails_clearly_then_recovers(
        "oidc",
        oidc_settings(&env, &endpoint.url, "not-the-client-secret"),
        oidc_settings(&env, &endpoint.url, "client-secret-1"),
        "authentication failed for user connect-worker (OAUTHBEARER)",
        &["not-the-client-secret", "client-secret-1", token.trim()],
    )
    .await;
    let requests = endpoint.requests();
    assert!(
        requests.iter().any(|r| !r.authenticated) && requests.iter().any(|r| r.authenticated),
        "the worker asked the token endpoint, with the wrong secret and then the right one: {requests:?}"
    );
    for request in &requests {
        assert!(
            request.line.starts_with("POST /oauth2/token ")
                && request.body.contains("grant_type=client_credentials")
                && request.body.contains("scope=kafka"),
            "a client credentials grant with the configured scope: {request:?}"
        );
    }

    // The broker does check the tokens: one signed by another key under the same key id is
    // refused, to a client that fetched it from an endpoint the same way.
    let forged = std::fs::read_to_string(tls.join("oauth-token-forged.jwt")).unwrap();
    let forger = TokenEndpoint::start(&forged, "connect-worker", "client-secret-1");
    let mut config = rdkafka::ClientConfig::new();
    for (key, value) in [
        ("bootstrap.servers", env["OAUTH"].as_str()),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.oauthbearer.method", "oidc"),
        ("sasl.oauthbearer.client.id", "connect-worker"),
        ("sasl.oauthbearer.client.secret", "client-secret-1"),
        ("sasl.oauthbearer.token.endpoint.url", forger.url.as_str()),
    ] {
        config.set(key, value);
    }
    let consumer: rdkafka::consumer::BaseConsumer = config.create().unwrap();
    let refused =
        rdkafka::consumer::Consumer::fetch_metadata(&consumer, None, Duration::from_secs(10));
    assert!(
        refused.is_err(),
        "the broker refuses a forged token: {:?}",
        refused.map(|m| m.brokers().len())
    );
    assert!(
        forger.requests().iter().any(|r| r.authenticated),
        "the forged token was fetched and offered"
    );
}

/// The codec the broker stored `topic`'s first batches with, per its DumpLogSegments tool.
fn stored_codecs(env: &BTreeMap<String, String>, topic: &str) -> BTreeSet<String> {
    let segment = Path::new(&env["LOG_DIR"])
        .join(format!("{topic}-0"))
        .join("00000000000000000000.log");
    let output = Command::new("java")
        .args(["-Xmx256m", "-cp"])
        .arg(format!("{}/*", env["KAFKA_LIBS"]))
        .args(["org.apache.kafka.tools.DumpLogSegments", "--files"])
        .arg(&segment)
        .output()
        .expect("run DumpLogSegments");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "DumpLogSegments failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    text.split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] == "compresscodec:")
        .map(|w| w[1].to_ascii_lowercase())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_compression_type_is_written_and_read_back() {
    let env = kafka::secured();
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["datagen"], &[]);
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    let mut topics = BTreeMap::new();
    for codec in codecs {
        let topic = unique_topic(&format!("compressed-{codec}"));
        create_topic(&topic, 1).await;
        topics.insert(codec, topic);
    }
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    for (codec, topic) in &topics {
        let config = json!({"connector.class": "datagen", "topic": topic, "count": "500",
            "value.size": "300", "value.converter": "string",
            "producer.override.compression.type": codec});
        assert_eq!(
            create(&url, &format!("source-{codec}"), config).await,
            StatusCode::CREATED
        );
    }
    for (codec, topic) in &topics {
        let records = consume(topic, 500, Duration::from_secs(60));
        assert_eq!(records.len(), 500, "{codec}: {}", worker.log_text());
        assert!(
            records
                .iter()
                .all(|r| r.value.as_ref().is_some_and(|v| v.len() >= 300)),
            "{codec}: the values read back whole"
        );
        let stored = stored_codecs(&env, topic);
        assert_eq!(
            stored,
            BTreeSet::from([codec.to_string()]),
            "{codec}: the broker stored the batches with the producer's codec"
        );
    }
    let (status, log) = worker.stop();
    assert!(status.success(), "{log}");
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn config_provider_secrets_reach_the_plugin_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &[], &["misbehave"]);
    let secrets = dir.path().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    let stamp = uuid::Uuid::new_v4().simple().to_string();
    let file_secret = format!("file-secret-{stamp}");
    let dir_secret = format!("directory-secret-{stamp}");
    let env_secret = format!("env-secret-{stamp}");
    let props = secrets.join("db.properties");
    std::fs::write(&props, format!("password={file_secret}\n")).unwrap();
    std::fs::write(secrets.join("token"), &dir_secret).unwrap();
    let placeholders = [
        (
            "file",
            format!("${{file:{}:password}}", props.display()),
            file_secret.clone(),
        ),
        (
            "directory",
            format!("${{directory:{}:token}}", secrets.display()),
            dir_secret.clone(),
        ),
        (
            "env",
            "${env:WASM_CONNECT_TEST_SECRET}".to_owned(),
            env_secret.clone(),
        ),
    ];
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "200".to_owned()),
        ("config.providers", "file,directory,env".to_owned()),
        (
            "config.providers.file.class",
            "org.apache.kafka.common.config.provider.FileConfigProvider".to_owned(),
        ),
        (
            "config.providers.directory.class",
            "org.apache.kafka.common.config.provider.DirectoryConfigProvider".to_owned(),
        ),
        (
            "config.providers.env.class",
            "org.apache.kafka.common.config.provider.EnvVarConfigProvider".to_owned(),
        ),
        (
            "config.providers.env.param.allowlist.pattern",
            "WASM_CONNECT_TEST_.*".to_owned(),
        ),
    ];
    let mut worker = Worker::start_with_env(
        dir.path(),
        &settings,
        &[],
        &[("WASM_CONNECT_TEST_SECRET", env_secret.as_str())],
    );
    let url = worker.rest_url(Duration::from_secs(120));
    let client = reqwest::Client::new();
    let mut topics = BTreeMap::new();
    for (provider, placeholder, _) in &placeholders {
        let topic = unique_topic(&format!("secret-{provider}"));
        create_topic(&topic, 1).await;
        let config = json!({"connector.class": "misbehave", "mode": "echo-secret",
            "topic": topic, "secret": placeholder, "value.converter": "string",
            "task.restart.max.attempts": "0"});
        assert_eq!(
            create(&url, provider, config.clone()).await,
            StatusCode::CREATED
        );
        // Validation sees the resolved config too, and says nothing of it.
        let mut validate = config;
        validate["name"] = json!(provider);
        let answer = client
            .put(format!("{url}/connector-plugins/misbehave/config/validate"))
            .json(&validate)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        topics.insert(*provider, (topic, answer));
    }
    for (provider, placeholder, secret) in &placeholders {
        let (topic, validated) = &topics[provider];
        // The plugin got the value: it wrote it as a record.
        let records = consume(topic, 1, Duration::from_secs(60));
        assert_eq!(
            records.first().map(|r| r.text()),
            Some(secret.clone()),
            "{provider}: {}",
            worker.log_text()
        );
        let failed = wasm_connect_tests::rest::wait_for_state(
            &url,
            provider,
            "FAILED",
            Duration::from_secs(60),
        );
        let trace = failed["trace"].as_str().unwrap_or_default();
        assert!(
            trace.contains("cannot log in with [redacted]"),
            "{provider}: the plugin's error is redacted: {failed}"
        );
        let config = get(&url, &format!("/connectors/{provider}/config")).await;
        assert_eq!(config["secret"], json!(placeholder), "{provider}: {config}");
        let tasks = get(&url, &format!("/connectors/{provider}/tasks")).await;
        assert_eq!(
            tasks[0]["config"]["secret"],
            json!(placeholder),
            "{provider}: {tasks}"
        );
        let mut shown = vec![
            validated.clone(),
            failed.to_string(),
            config.to_string(),
            tasks.to_string(),
        ];
        for path in [
            format!("/connectors/{provider}"),
            "/connectors?expand=info&expand=status".to_owned(),
        ] {
            shown.push(get(&url, &path).await.to_string());
        }
        for text in &shown {
            assert!(!text.contains(secret.as_str()), "{provider}: shown: {text}");
        }
    }
    let log = worker.log_text();
    for stream in [
        "the secret is [redacted]",
        "stdout: the secret is [redacted]",
        "stderr: the secret is [redacted]",
    ] {
        assert!(
            log.contains(stream),
            "the plugin's lines are logged, redacted: {stream}\n{log}"
        );
    }

    // A connector's own errors that quote the secret: a split that fails (retried) and a
    // monitor that fails (fatal). Their statuses and log lines show it redacted.
    let (_, file_placeholder, file_value) = &placeholders[0];
    for (name, mode) in [
        ("split-secret", "split-fails"),
        ("monitor-secret", "monitor-fails"),
    ] {
        let config = json!({"connector.class": "misbehave", "mode": mode, "fail.times": "1000000",
            "topic": unique_topic(name), "secret": file_placeholder,
            "connector.monitor.interval.ms": "200"});
        assert_eq!(create(&url, name, config).await, StatusCode::CREATED);
    }
    for (name, says) in [
        (
            "split-secret",
            "fails on purpose (fail.times 1000000) with [redacted]",
        ),
        (
            "monitor-secret",
            "monitor call 1 fails on purpose with [redacted]",
        ),
    ] {
        let mut status = serde_json::Value::Null;
        let shown = eventually(Duration::from_secs(60), || {
            status = block(get(&url, &format!("/connectors/{name}/status")));
            status["connector"]["trace"]
                .as_str()
                .is_some_and(|t| t.contains(says))
        });
        assert!(shown, "{name}: the error, redacted: {status}");
        assert!(
            !status.to_string().contains(file_value.as_str()),
            "{name}: {status}"
        );
    }
    let log = worker.log_text();
    assert!(
        log.contains("fails on purpose (fail.times 1000000) with [redacted]")
            && log.contains("monitor call 1 fails on purpose with [redacted]"),
        "the connectors' errors are logged, redacted:\n{log}"
    );

    // A rotated secret: the next start of the task reads it again.
    let rotated = format!("rotated-secret-{stamp}");
    std::fs::write(&props, format!("password={rotated}\n")).unwrap();
    let restart = client
        .post(format!("{url}/connectors/file/restart?includeTasks=true"))
        .send()
        .await
        .unwrap();
    assert!(restart.status().is_success(), "{}", restart.status());
    let records = consume(&topics["file"].0, 2, Duration::from_secs(60));
    assert_eq!(
        records.get(1).map(|r| r.text()),
        Some(rotated.clone()),
        "the restarted task read the rotated secret: {}",
        worker.log_text()
    );
    let (_, log) = worker.stop();
    for (_, _, secret) in &placeholders {
        assert!(!log.contains(secret.as_str()), "a secret reached the log");
        let holding = files_holding(&dir.path().join("data"), secret);
        assert!(holding.is_empty(), "state files hold a secret: {holding:?}");
    }
    assert!(
        !log.contains(rotated.as_str()),
        "the rotated secret reached the log"
    );
}

/// The worker's REST URLs, in `listeners` order, once it runs.
fn rest_urls(worker: &mut Worker) -> Vec<String> {
    worker
        .rest_url(Duration::from_secs(120))
        .split(" and ")
        .map(str::to_owned)
        .collect()
}

/// An HTTPS client that trusts only the CA in `ca_pem` (and presents `identity`, if given).
fn https_client(ca_pem: &Path, identity: Option<&Path>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(ca_pem).unwrap()).unwrap();
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca);
    if let Some(pem) = identity {
        builder =
            builder.identity(reqwest::Identity::from_pem(&std::fs::read(pem).unwrap()).unwrap());
    }
    builder.build().unwrap()
}

/// `https://localhost:PORT` for a listener URL (the test certificate names localhost).
fn on_localhost(url: &str) -> String {
    let port = url.rsplit(':').next().unwrap();
    format!("https://localhost:{port}")
}

#[tokio::test(flavor = "multi_thread")]
async fn https_beside_http_with_a_verified_certificate_and_health_open_to_probes() {
    let env = kafka::secured();
    let tls = PathBuf::from(&env["TLS_DIR"]);
    let dir = tempfile::tempdir().unwrap();
    let token = format!("token-{}", uuid::Uuid::new_v4().simple());
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{token}\n")).unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        // HTTPS on every interface: allowed, because callers must authenticate.
        (
            "listeners",
            "http://127.0.0.1:0, https://0.0.0.0:0".to_owned(),
        ),
        (
            "listeners.https.ssl.keystore.location",
            tls.join("broker-keystore.pem").display().to_string(),
        ),
        ("listeners.https.ssl.keystore.type", "PEM".to_owned()),
        ("rest.auth.token.file", tokens.display().to_string()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let urls = rest_urls(&mut worker);
    assert_eq!(urls.len(), 2, "{urls:?}");
    assert!(urls[0].starts_with("http://127.0.0.1:"), "{urls:?}");
    assert!(urls[1].starts_with("https://0.0.0.0:"), "{urls:?}");
    let https = on_localhost(&urls[1]);
    let client = https_client(&tls.join("ca.pem"), None);

    // The certificate verifies against the test CA; the API answers over it.
    let root = client
        .get(format!("{https}/"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("HTTPS with the certificate verified");
    assert_eq!(root.status(), StatusCode::OK);
    let root: serde_json::Value = root.json().await.unwrap();
    assert_eq!(root["version"], env!("CARGO_PKG_VERSION"), "{root}");
    // A client that trusts another CA refuses the worker's certificate.
    let stranger = https_client(&tls.join("other-ca.pem"), None);
    let refused = stranger.get(format!("{https}/health")).send().await;
    assert!(
        refused.is_err(),
        "a client trusting another CA must not connect: {refused:?}"
    );

    // Only /health itself is open: not a path that merely looks like it.
    for path in ["//health", "/health/../connectors", "/%68ealth"] {
        let answer = client.get(format!("{https}{path}")).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    // Health answers without credentials on both listeners (Kubernetes probes send none);
    // everything else still wants them.
    for (client, base) in [
        (&client, https.as_str()),
        (&reqwest::Client::new(), urls[0].as_str()),
    ] {
        let health = client.get(format!("{base}/health")).send().await.unwrap();
        assert_eq!(health.status(), StatusCode::OK, "{base}");
        let body: serde_json::Value = health.json().await.unwrap();
        assert_eq!(body["status"], "healthy", "{body}");
        let anonymous = client
            .get(format!("{base}/connectors"))
            .send()
            .await
            .unwrap();
        assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED, "{base}");
        let ready = client
            .get(format!("{base}/health/ready"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            ready.status(),
            StatusCode::UNAUTHORIZED,
            "readiness says why; it needs credentials"
        );
        let authorised = client
            .get(format!("{base}/connectors"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(authorised.status(), StatusCode::OK, "{base}");
    }
    // The command-line client over HTTPS, trusting the test CA.
    let cli = Command::new(wasm_connect_tests::wasm_connect_bin())
        .args(["connectors", "list", "--json", "--url", &https, "--cacert"])
        .arg(tls.join("ca.pem"))
        .env("WASM_CONNECT_REST_TOKEN", &token)
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&cli.stdout).trim(),
        "{}",
        "no connectors"
    );
    let (_, log) = worker.stop();
    assert!(!log.contains(&token), "the token never reaches the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn https_with_required_client_certificates_and_a_listener_config_that_cannot_serve() {
    let env = kafka::secured();
    let tls = PathBuf::from(&env["TLS_DIR"]);
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "a-token-nobody-sends\n").unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        // HTTPS on every interface requiring client certificates, beside plain HTTP (which
        // needs the credentials: every request but /health).
        (
            "listeners",
            "https://0.0.0.0:0,http://127.0.0.1:0".to_owned(),
        ),
        (
            "listeners.https.ssl.keystore.location",
            tls.join("broker-keystore.pem").display().to_string(),
        ),
        (
            "listeners.https.ssl.truststore.location",
            tls.join("truststore.p12").display().to_string(),
        ),
        ("listeners.https.ssl.truststore.type", "PKCS12".to_owned()),
        (
            "listeners.https.ssl.truststore.password",
            env["TRUST_STORE_PASSWORD"].clone(),
        ),
        ("listeners.https.ssl.client.auth", "required".to_owned()),
        ("rest.auth.token.file", tokens.display().to_string()),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let urls = rest_urls(&mut worker);
    let https = on_localhost(&urls[0]);
    // A client certificate signed by the trusted CA is the caller's credential: no token, and a
    // Host that is not this machine, and the API answers.
    let trusted = https_client(&tls.join("ca.pem"), Some(&tls.join("client-keystore.pem")));
    let listed = trusted
        .get(format!("{https}/connectors"))
        .header("host", "connect.example:8443")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), StatusCode::OK);
    // Without one, no request gets an answer.
    let anonymous = https_client(&tls.join("ca.pem"), None);
    let refused = anonymous.get(format!("{https}/connectors")).send().await;
    assert!(
        refused.is_err(),
        "no client certificate, no connection: {refused:?}"
    );
    // The HTTP listener has no certificates to go by: the token, or 401.
    let plain = reqwest::get(format!("{}/connectors", urls[1]))
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::UNAUTHORIZED);
    worker.stop();

    // An HTTPS listener without a key store, and one whose store is JKS: the worker does not
    // start, and says which key to fix and how.
    for (extra, expected) in [
        (
            vec![],
            "listeners.https.ssl.keystore.location: an https:// listener needs the server's key and certificate",
        ),
        (
            vec![(
                "listeners.https.ssl.keystore.location",
                tls.join("truststore.jks").display().to_string(),
            )],
            "keytool -importkeystore",
        ),
    ] {
        let bad = tempfile::tempdir().unwrap();
        let mut settings = vec![
            ("bootstrap.servers", kafka::bootstrap()),
            ("listeners", "https://127.0.0.1:0".to_owned()),
            ("listeners.https.ssl.client.auth", "none".to_owned()),
        ];
        settings.extend(extra);
        let worker = Worker::start(bad.path(), &settings, &[]);
        let (status, log) = worker.wait(Duration::from_secs(60));
        assert!(!status.success(), "{log}");
        assert!(log.contains(expected), "{expected:?} in:\n{log}");
    }
}
