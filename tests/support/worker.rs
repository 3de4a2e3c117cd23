//! Running the real `wasm-connect standalone` binary: configs written to files, logs captured,
//! stopped politely (SIGTERM) or killed (SIGKILL).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::{plugin_dir, wasm_connect_bin};

/// Write `pairs` as a `.properties` file.
pub fn write_properties(path: &Path, pairs: &[(&str, String)]) {
    let text: String = pairs.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    fs::write(path, text).expect("write properties");
}

/// A worker process.
pub struct Worker {
    child: Child,
    /// Combined stdout and stderr.
    pub log: PathBuf,
}

impl Worker {
    /// Start `standalone` in `dir` (its working directory) with a worker config (plugin dir, data
    /// dir and `worker` pairs; later pairs win) and the given connector config files.
    pub fn start(dir: &Path, worker: &[(&str, String)], connectors: &[PathBuf]) -> Worker {
        Self::start_with_env(dir, worker, connectors, &[])
    }

    /// [`Worker::start`] with extra environment variables for the worker process.
    pub fn start_with_env(
        dir: &Path,
        worker: &[(&str, String)],
        connectors: &[PathBuf],
        env: &[(&str, &str)],
    ) -> Worker {
        Self::spawn(dir, "standalone", worker, connectors, env)
    }

    /// Start `distributed` in `dir` with a worker config (plugin dir, data dir and `worker`
    /// pairs, which name the group and its topics).
    pub fn start_distributed(dir: &Path, worker: &[(&str, String)]) -> Worker {
        Self::spawn(dir, "distributed", worker, &[], &[])
    }

    fn spawn(
        dir: &Path,
        mode: &str,
        worker: &[(&str, String)],
        connectors: &[PathBuf],
        env: &[(&str, &str)],
    ) -> Worker {
        let worker_file = dir.join("worker.properties");
        let mut pairs: Vec<(&str, String)> = vec![
            ("plugin.path", plugin_dir().display().to_string()),
            ("data.dir", dir.join("data").display().to_string()),
            // Any free port, so workers of parallel tests never collide.
            ("listeners", "http://127.0.0.1:0".to_owned()),
        ];
        pairs.extend(worker.iter().cloned());
        write_properties(&worker_file, &pairs);
        let log = dir.join(format!("worker-{}.log", uuid_like()));
        let out = fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = Command::new(wasm_connect_bin())
            .current_dir(dir)
            .arg(mode)
            .arg(&worker_file)
            .args(connectors)
            .env(
                "RUST_LOG",
                "warn,wasm_connect=info,plugin=info,tansu_storage=off",
            )
            .envs(env.iter().copied())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("start wasm-connect");
        Worker { child, log }
    }

    /// The worker's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The REST API's base URL as soon as it listens (before plugins are loaded).
    pub fn early_rest_url(&mut self, timeout: Duration) -> String {
        self.wait_for_log("REST API listening at ", timeout);
        address_after(&self.log_text(), "REST API listening at ", ';')
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until the log contains `needle`, panicking (with the log) after `timeout` or if the
    /// worker exits first.
    pub fn wait_for_log(&mut self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.log_text().contains(needle) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the worker exited ({status}) before logging {needle:?}:\n{}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {needle:?} in:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The REST API's base URL, once the worker says it is running.
    pub fn rest_url(&mut self, timeout: Duration) -> String {
        self.wait_for_log("wasm-connect is running", timeout);
        address_after(&self.log_text(), "REST API at ", ',')
    }

    /// Send the process signal `signal` (`STOP`, `CONT`, ...).
    pub fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status();
    }

    /// SIGTERM, then wait for the exit.
    pub fn stop(mut self) -> (ExitStatus, String) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let status = wait_with_timeout(&mut self.child, Duration::from_secs(90));
        (status, self.log_text())
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log_text()
    }

    /// Wait for the worker to exit on its own.
    pub fn wait(mut self, timeout: Duration) -> (ExitStatus, String) {
        let status = wait_with_timeout(&mut self.child, timeout);
        (status, self.log_text())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text in `log` after the first `marker`, up to `end`.
fn address_after(log: &str, marker: &str, end: char) -> String {
    let start = log
        .find(marker)
        .unwrap_or_else(|| panic!("the log names the REST address after {marker:?}"))
        + marker.len();
    let rest = &log[start..];
    rest[..rest.find(end).unwrap_or(rest.len())]
        .trim()
        .to_owned()
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// A worker on the test broker with `first_party` and `test` plugins, offsets flushed every
/// 200 ms; and its REST URL.
pub fn start_with_plugins(dir: &Path, first_party: &[&str], test: &[&str]) -> (Worker, String) {
    let plugins = crate::plugins_with(dir, first_party, test);
    let settings = vec![
        ("bootstrap.servers", crate::kafka::bootstrap()),
        ("plugin.path", plugins.display().to_string()),
        ("offset.flush.interval.ms", "200".to_owned()),
    ];
    let mut worker = Worker::start(dir, &settings, &[]);
    let url = worker.rest_url(Duration::from_secs(120));
    (worker, url)
}

/// Poll `check` every 100 ms until it returns true or `timeout` passes; returns the last result.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The lines of a text file (none when it does not exist yet).
pub fn lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}
