//! The tansu broker (SQLite storage in the data directory) run inside the worker process.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tansu_broker::broker::Broker;
use tansu_broker::coordinator::group::administrator::Controller;
use tansu_storage::StorageContainer;
use tokio::task::JoinHandle;
use url::Url;

/// A running embedded broker; stopped when dropped.
pub struct EmbeddedBroker {
    bootstrap: String,
    task: JoinHandle<()>,
}

/// The cluster id of every embedded broker (there is only ever one node).
const CLUSTER_ID: &str = "wasm-connect-embedded";

impl EmbeddedBroker {
    /// Start a broker listening on `listener` (`host:port`) that stores its data in
    /// `<data_dir>/broker.db`, and wait until it accepts connections.
    pub async fn start(data_dir: &Path, listener: &str) -> Result<Self, String> {
        let url = Url::parse(&format!("tcp://{listener}"))
            .map_err(|e| format!("embedded.broker.listener: {listener:?} is not host:port: {e}"))?;
        let storage = storage_url(&data_dir.join("broker.db"))?;
        let broker = Broker::<Controller<StorageContainer>, StorageContainer>::builder()
            .node_id(1)
            .cluster_id(CLUSTER_ID)
            .incarnation_id(uuid::Uuid::new_v4())
            .advertised_listener(url.clone())
            .listener(url)
            .storage(storage)
            .silent(true)
            .build()
            .await
            .map_err(|e| {
                format!(
                    "cannot start the embedded broker with storage in {}: {e}",
                    data_dir.display()
                )
            })?;
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let mut broker = broker;
            if let Err(e) = broker.serve(started.into()).await {
                tracing::error!("the embedded broker stopped: {e}");
            }
        });
        let me = Self {
            bootstrap: listener.to_owned(),
            task,
        };
        me.wait_until_listening().await?;
        tracing::info!(
            "embedded Kafka broker listening on {listener} (data in {}); point Kafka tools at bootstrap.servers={listener}",
            data_dir.display()
        );
        Ok(me)
    }

    /// The address clients connect to.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    async fn wait_until_listening(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.task.is_finished() {
                return Err(format!(
                    "the embedded broker could not listen on {}; is the port in use? set embedded.broker.listener or bootstrap.servers",
                    self.bootstrap
                ));
            }
            if tokio::net::TcpStream::connect(&self.bootstrap)
                .await
                .is_ok()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "the embedded broker did not start listening on {} within 30 s",
                    self.bootstrap
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The `sqlite://` URL tansu needs for `db`. Tansu opens `<cwd>/<host>/<path>`; a URL with an
/// empty host and a path that starts with `//` makes that path absolute again (joining an
/// absolute path replaces the base), so any location works, relative or absolute.
pub(crate) fn storage_url(db: &Path) -> Result<Url, String> {
    let absolute: PathBuf = if db.is_absolute() {
        db.to_owned()
    } else {
        std::env::current_dir()
            .map_err(|e| format!("cannot resolve {}: {e}", db.display()))?
            .join(db)
    };
    let text = absolute.to_str().ok_or_else(|| {
        format!(
            "the data directory {} is not valid UTF-8",
            absolute.display()
        )
    })?;
    let url = Url::parse(&format!("sqlite:///{text}"))
        .map_err(|e| format!("cannot make a storage URL of {text}: {e}"))?;
    // Tansu uses the URL's path without percent-decoding it.
    if url.path() != format!("/{text}") {
        return Err(format!(
            "data.dir: the embedded broker cannot store in {text} (its path has characters such as spaces that URLs escape); choose a plainer data.dir"
        ));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What tansu does with the URL (tansu-storage `lite.rs`).
    fn tansu_path(url: &Url) -> PathBuf {
        let mut path = std::env::current_dir().unwrap();
        if let Some(domain) = url.domain() {
            path.push(domain);
        }
        if let Some(relative) = url.path().strip_prefix('/') {
            path.push(relative);
        } else {
            path.push(url.path());
        }
        path
    }

    #[test]
    fn storage_urls_resolve_to_the_intended_file() {
        let abs = Path::new("/tmp/some-dir/data/broker.db");
        assert_eq!(tansu_path(&storage_url(abs).unwrap()), abs);
        let err = storage_url(Path::new("/tmp/some dir/broker.db")).unwrap_err();
        assert!(err.starts_with("data.dir:"), "{err}");
        let rel = Path::new("data/broker.db");
        assert_eq!(
            tansu_path(&storage_url(rel).unwrap()),
            std::env::current_dir().unwrap().join(rel)
        );
    }
}
