//! `http-sink` in a real worker against a real HTTPS server this test starts (hyper and rustls,
//! with the test CA's certificate for `localhost`), with failures injected: a 500, a 429 with
//! `Retry-After`, a dropped connection, and a 400 for every request holding one bad record.
//! Every good record is delivered once, the bad one lands in the dead-letter queue, and a
//! connector that does not trust the server's CA fails with a message that says so.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use wasm_connect_tests::kafka::{self, consume, create_topic, produce, unique_topic};
use wasm_connect_tests::plugins_with;
use wasm_connect_tests::rest::{create, task_status};
use wasm_connect_tests::worker::Worker;

/// The record the server refuses (400) wherever it is.
const BAD: i64 = 17;
/// How many records the test sends.
const COUNT: i64 = 60;

/// A failure the server answers with, instead of accepting a request.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Status500,
    /// 429 with `Retry-After` in seconds.
    TooMany(u64),
    /// Close the connection without an answer.
    Drop,
}

#[derive(Default)]
struct State {
    /// Faults for the next requests, in order.
    plan: VecDeque<Fault>,
    /// The `n` of every record accepted, in arrival order.
    accepted: Vec<i64>,
    /// When the 429 was answered, and when the next request came.
    too_many_at: Option<Instant>,
    after_too_many: Option<Instant>,
    requests: usize,
}

async fn handle(
    state: Arc<Mutex<State>>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let body = request
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    let mut s = state.lock().unwrap();
    s.requests += 1;
    if s.too_many_at.is_some() && s.after_too_many.is_none() {
        s.after_too_many = Some(Instant::now());
    }
    let answer = |status: u16, text: &str| {
        Response::builder()
            .status(status)
            .body(Full::new(Bytes::from(text.to_owned())))
            .unwrap()
    };
    match s.plan.pop_front() {
        Some(Fault::Status500) => return Ok(answer(500, "boom")),
        Some(Fault::TooMany(seconds)) => {
            s.too_many_at = Some(Instant::now());
            let mut response = answer(429, "slow down");
            response
                .headers_mut()
                .insert("retry-after", seconds.to_string().parse().unwrap());
            return Ok(response);
        }
        // An error from the service makes hyper close the connection unanswered.
        Some(Fault::Drop) => return Err(std::io::Error::other("dropped on purpose")),
        None => {}
    }
    let Ok(Value::Array(records)) = serde_json::from_slice::<Value>(&body) else {
        return Ok(answer(400, "not a JSON array"));
    };
    let ns: Vec<i64> = records.iter().filter_map(|r| r["n"].as_i64()).collect();
    if ns.contains(&BAD) {
        return Ok(answer(400, &format!("record n={BAD} is invalid")));
    }
    s.accepted.extend(ns);
    Ok(answer(200, "ok"))
}

/// Serve HTTPS on a free port of 127.0.0.1 with the certificate in `tls` (the test CA's, for
/// localhost), until the test ends, on a thread and runtime of its own (the test's own thread
/// blocks in Kafka consumers).
fn serve(tls: &Path, state: Arc<Mutex<State>>) -> SocketAddr {
    let tls = tls.to_owned();
    let (sent, addr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let (addr, serving) = listen(&tls, state).await;
            let _ = sent.send(addr);
            serving.await
        })
    });
    addr.recv().unwrap()
}

async fn listen(
    tls: &Path,
    state: Arc<Mutex<State>>,
) -> (SocketAddr, impl std::future::Future<Output = ()>) {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(tls.join("broker.crt"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(tls.join("broker.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, state) = (acceptor.clone(), state.clone());
            tokio::spawn(async move {
                // A client that does not trust the certificate ends the handshake: nothing to serve.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |request| handle(state.clone(), request));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    };
    (addr, serving)
}

/// The trace of connector `name`'s task 0 once it has failed (within a minute).
async fn failed_trace(url: &str, name: &str, worker: &Worker) -> String {
    let started = Instant::now();
    loop {
        let status = task_status(url, name, 0).await;
        if status["state"] == "FAILED" {
            return status["trace"].as_str().unwrap_or_default().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{status}\n{}",
            worker.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn good_records_arrive_once_through_failures_and_the_refused_one_is_dead_lettered() {
    let tls = std::path::PathBuf::from(&kafka::secured()["TLS_DIR"]);
    let state = Arc::new(Mutex::new(State {
        plan: VecDeque::from([Fault::Status500, Fault::TooMany(2), Fault::Drop]),
        ..State::default()
    }));
    let addr = serve(&tls, state.clone());
    let endpoint = format!("https://localhost:{}/ingest", addr.port());
    let topic = unique_topic("http-sink");
    let dlq = unique_topic("http-sink-dlq");
    create_topic(&topic, 1).await;
    let values: Vec<Vec<u8>> = (0..COUNT)
        .map(|n| {
            json!({"n": n, "text": format!("record {n}")})
                .to_string()
                .into_bytes()
        })
        .collect();
    produce(&topic, &values);
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_with(dir.path(), &["http-sink"], &[]);
    let secrets = dir.path().join("api.properties");
    std::fs::write(&secrets, "token=s3cret-token\n").unwrap();
    let settings = vec![
        ("bootstrap.servers", kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("config.providers", "file".to_owned()),
        (
            "config.providers.file.class",
            "org.apache.kafka.common.config.provider.FileConfigProvider".to_owned(),
        ),
    ];
    let mut worker = Worker::start(dir.path(), &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    let config = |trusted: bool, topics: &str| {
        let mut config = json!({
            "connector.class": "http-sink",
            "topics": topics,
            "http.url": endpoint,
            "http.headers": format!("Authorization: Bearer ${{file:{}:token}}", secrets.display()),
            "batch.max.records": "10",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.context.headers.enable": "true",
            "sandbox.http.allow": format!("https://localhost:{}/ingest", addr.port()),
        });
        if trusted {
            config["sandbox.http.tls.ca.location"] =
                json!(tls.join("ca.pem").display().to_string());
        }
        config
    };
    assert_eq!(
        create(&url, "http", config(true, &topic)).await,
        reqwest::StatusCode::CREATED
    );
    let dead = consume(&dlq, 1, Duration::from_secs(90));
    assert_eq!(dead.len(), 1, "{}", worker.log_text());
    let dead_value: Value = serde_json::from_slice(dead[0].value.as_deref().unwrap()).unwrap();
    assert_eq!(dead_value["n"], BAD);
    let message = dead[0]
        .header("__connect.errors.exception.message")
        .unwrap_or_default();
    assert!(
        message.contains("400") && message.contains("is invalid"),
        "{message}"
    );
    let expected: Vec<i64> = (0..COUNT).filter(|n| *n != BAD).collect();
    let started = Instant::now();
    loop {
        let mut accepted = state.lock().unwrap().accepted.clone();
        accepted.sort_unstable();
        if accepted.len() >= expected.len() {
            assert_eq!(accepted, expected, "every good record once");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "accepted {} of {}\n{}",
            accepted.len(),
            expected.len(),
            worker.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    {
        let s = state.lock().unwrap();
        assert!(s.plan.is_empty(), "every fault was served");
        let waited = s.after_too_many.unwrap() - s.too_many_at.unwrap();
        assert!(
            waited >= Duration::from_secs(2),
            "the request after a 429 with Retry-After: 2 came {waited:?} later"
        );
    }
    // Without the test CA the server's certificate does not verify: the task fails, saying so.
    let other = unique_topic("http-sink-untrusted");
    create_topic(&other, 1).await;
    produce(&other, &values[..1]);
    assert_eq!(
        create(&url, "untrusted", config(false, &other)).await,
        reqwest::StatusCode::CREATED
    );
    let trace = failed_trace(&url, "untrusted", &worker).await;
    assert!(
        trace.contains("TLS") && trace.contains("sandbox.http.tls.ca.location"),
        "{trace}"
    );
    // A URL outside the grant: refused by the worker, and the task fails at once (retrying
    // cannot cure it), saying what to grant.
    let mut ungranted = config(true, &other);
    ungranted["sandbox.http.allow"] = json!(format!("https://localhost:{}/elsewhere", addr.port()));
    assert_eq!(
        create(&url, "ungranted", ungranted).await,
        reqwest::StatusCode::CREATED
    );
    let trace = failed_trace(&url, "ungranted", &worker).await;
    assert!(
        trace.contains("refused a request") && trace.contains("sandbox.http.allow"),
        "{trace}"
    );
    assert!(
        !worker.log_text().contains("s3cret-token"),
        "the header's secret is never logged"
    );
    worker.stop();
}
