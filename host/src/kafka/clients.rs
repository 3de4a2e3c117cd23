//! The Kafka client settings of a worker, parsed once: the keys every client takes (the security
//! family: `security.protocol`, `ssl.*`, `sasl.*`), each client kind's own (`producer.`,
//! `consumer.`, `admin.`, which override them), and per connector the overrides that
//! `connector.client.config.override.policy` allows (KIP-458).
//!
//! Kafka Connect hands a worker's top-level security keys to its own internal clients only, so
//! its users repeat them under `producer.` and `consumer.`; here they apply to every client the
//! worker makes, and prefixed keys override them (a Connect file with both works unchanged).
//! Each kind's settings are translated to librdkafka's terms ([`super::security`]) and checked
//! by librdkafka itself when the worker config is read, so a bad key stops the start with its
//! name, not the first client to be created.

use rdkafka::ClientConfig;
use rdkafka::error::KafkaError;

use super::security::{self, Setting, Translated};
use crate::config::connector::Problem;

/// Worker key: which client settings a connector config may override.
pub const OVERRIDE_POLICY: &str = "connector.client.config.override.policy";

/// Which of a worker's clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    /// Source records, dead-letter queues.
    Producer,
    /// Sink tasks, consumer group offsets.
    Consumer,
    /// Topic creation, group deletion.
    Admin,
}

impl ClientKind {
    /// Every kind.
    pub const ALL: [ClientKind; 3] = [Self::Producer, Self::Consumer, Self::Admin];

    /// The worker config's prefix for this kind (`producer.`).
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Producer => "producer.",
            Self::Consumer => "consumer.",
            Self::Admin => "admin.",
        }
    }

    /// A connector config's prefix for this kind's overrides (`producer.override.`).
    pub fn override_prefix(self) -> &'static str {
        match self {
            Self::Producer => "producer.override.",
            Self::Consumer => "consumer.override.",
            Self::Admin => "admin.override.",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What connector configs may override (KIP-458), Kafka Connect's names and meanings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OverridePolicy {
    /// No overrides.
    None,
    /// Only who the client is: `security.protocol`, `sasl.jaas.config`, `sasl.mechanism`.
    Principal,
    /// Any client setting (Kafka Connect's default since 3.0), but those the worker sets for
    /// delivery guarantees.
    #[default]
    All,
}

impl OverridePolicy {
    /// The keys [`OverridePolicy::Principal`] allows.
    pub const PRINCIPAL_KEYS: &[&str] =
        &["security.protocol", "sasl.jaas.config", "sasl.mechanism"];

    /// Read Kafka Connect's class names (`org.apache.kafka.connect.connector.policy.
    /// AllConnectorClientConfigOverridePolicy`) or the short names `None`, `Principal`, `All`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let name = raw.trim();
        let short = name
            .strip_prefix("org.apache.kafka.connect.connector.policy.")
            .and_then(|c| c.strip_suffix("ConnectorClientConfigOverridePolicy"))
            .unwrap_or(name);
        match short.to_ascii_lowercase().as_str() {
            "none" => Ok(Self::None),
            "principal" => Ok(Self::Principal),
            "all" => Ok(Self::All),
            _ => Err(format!(
                "{raw:?} is not None, Principal or All (or Kafka Connect's class for one of them)"
            )),
        }
    }
}

/// Client keys the worker sets itself because delivery depends on them: no config may
/// override them. With the reason, for the message.
const WORKER_OWNED: &[(&str, &str)] = &[
    (
        "enable.auto.commit",
        "the worker commits a sink's offsets itself, after its task has flushed them; automatic commits would mark records done that the task never stored",
    ),
    (
        "enable.auto.offset.store",
        "the worker stores a sink's offsets itself, after its task has flushed them",
    ),
    (
        "group.instance.id",
        "is set by the worker for each sink task (wasm-connect-<connector>-<task>-<worker instance>), so that a task restarted after a crash rejoins its group at once; one value for every consumer would fence all but one of them",
    ),
    (
        "group.id",
        "is connect-<connector name>, as in Kafka Connect: the worker reads and resets a sink's offsets through that group",
    ),
    (
        "bootstrap.servers",
        "is the worker's bootstrap.servers for every client: a connector's offsets, status and dead-letter queue live on that cluster",
    ),
];

/// Whether `key` (no prefix) belongs to the settings every client takes.
pub fn is_common_key(key: &str) -> bool {
    key == "security.protocol" || key.starts_with("ssl.") || key.starts_with("sasl.")
}

/// Whether connector key `key` overrides a client setting (`producer.override.*`, ...).
pub fn is_override_key(key: &str) -> bool {
    ClientKind::ALL
        .iter()
        .any(|k| key.starts_with(k.override_prefix()))
}

/// A worker's Kafka client settings, parsed once.
#[derive(Debug, Clone, Default)]
pub struct ClientSettings {
    /// The keys every client takes.
    common: Vec<Setting>,
    /// Each kind's own keys, prefix removed.
    kinds: [Vec<Setting>; 3],
    /// Each kind's settings in librdkafka's terms.
    resolved: [Translated; 3],
    policy: OverridePolicy,
}

/// A connector's client settings where it overrides the worker's; `None` for a kind it does
/// not override (its clients are the worker's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectorClients {
    overrides: [Option<Translated>; 3],
}

impl ConnectorClients {
    /// The connector's own settings for `kind`, if it overrides any.
    pub fn get(&self, kind: ClientKind) -> Option<&Translated> {
        self.overrides[kind.index()].as_ref()
    }
}

impl ClientSettings {
    /// Read the client keys of a worker config; every problem is reported, each naming the key
    /// as written.
    pub fn from_worker(pairs: &[(String, String)]) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut settings = Self::default();
        for (key, value) in pairs {
            if is_common_key(key) {
                settings.common.push(Setting::plain(key, value));
            }
            for kind in ClientKind::ALL {
                if let Some(bare) = key.strip_prefix(kind.prefix()) {
                    if let Some((_, why)) = WORKER_OWNED.iter().find(|(k, _)| *k == bare) {
                        problems.push(Problem::new(key, format!("{why}. Remove it")));
                        continue;
                    }
                    settings.kinds[kind.index()].push(Setting {
                        key: bare.to_owned(),
                        value: value.clone(),
                        origin: key.clone(),
                    });
                }
            }
            if key == OVERRIDE_POLICY {
                match OverridePolicy::parse(value) {
                    Ok(p) => settings.policy = p,
                    Err(e) => problems.push(Problem::new(key, e)),
                }
            }
        }
        for kind in ClientKind::ALL {
            let layers: Vec<Setting> = settings
                .common
                .iter()
                .chain(&settings.kinds[kind.index()])
                .cloned()
                .collect();
            match resolve(&layers) {
                Ok(t) => settings.resolved[kind.index()] = t,
                Err(p) => {
                    // The common keys' problems would repeat for every kind.
                    for problem in p {
                        if !problems.contains(&problem) {
                            problems.push(problem);
                        }
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(settings)
        } else {
            Err(problems)
        }
    }

    /// `kind`'s settings in librdkafka's terms, to apply over the client's own defaults.
    pub fn librdkafka(&self, kind: ClientKind) -> &[(String, String)] {
        &self.resolved[kind.index()].pairs
    }

    /// `kind`'s settings in librdkafka's terms, with who the client authenticates as.
    pub fn translated(&self, kind: ClientKind) -> &Translated {
        &self.resolved[kind.index()]
    }

    /// What connector configs may override.
    pub fn policy(&self) -> OverridePolicy {
        self.policy
    }

    /// Whether any client uses something but PLAINTEXT.
    pub fn secured(&self) -> bool {
        self.resolved
            .iter()
            .any(|t| t.get("security.protocol").is_some_and(|p| p != "plaintext"))
    }

    /// The notes of translating the worker's settings (keys dropped as Java-only, and the
    /// like), once each, for the log.
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = Vec::new();
        for t in &self.resolved {
            for n in &t.notes {
                if !notes.contains(n) {
                    notes.push(n.clone());
                }
            }
        }
        notes
    }

    /// A connector's client overrides (`producer.override.*`, `consumer.override.*`,
    /// `admin.override.*`), checked against the override policy and translated over the
    /// worker's settings. Every problem is reported, each naming the key as written.
    pub fn for_connector(
        &self,
        connector: &[(String, String)],
    ) -> Result<ConnectorClients, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut clients = ConnectorClients::default();
        for kind in ClientKind::ALL {
            let mut overrides = Vec::new();
            for (key, value) in connector {
                let Some(bare) = key.strip_prefix(kind.override_prefix()) else {
                    continue;
                };
                if let Some((_, why)) = WORKER_OWNED.iter().find(|(k, _)| *k == bare) {
                    problems.push(Problem::new(key, format!("cannot be overridden: {why}")));
                    continue;
                }
                let allowed = match self.policy {
                    OverridePolicy::None => false,
                    OverridePolicy::Principal => OverridePolicy::PRINCIPAL_KEYS.contains(&bare),
                    OverridePolicy::All => true,
                };
                if !allowed {
                    let what = match self.policy {
                        OverridePolicy::Principal => format!(
                            "Principal, which allows only {}",
                            OverridePolicy::PRINCIPAL_KEYS.join(", ")
                        ),
                        _ => "None".to_owned(),
                    };
                    problems.push(Problem::new(
                        key,
                        format!(
                            "is not allowed by this worker's {OVERRIDE_POLICY} ({what}); remove it, or ask the worker's operator to allow it"
                        ),
                    ));
                    continue;
                }
                overrides.push(Setting {
                    key: bare.to_owned(),
                    value: value.clone(),
                    origin: key.clone(),
                });
            }
            if overrides.is_empty() {
                continue;
            }
            let layers: Vec<Setting> = self
                .common
                .iter()
                .chain(&self.kinds[kind.index()])
                .chain(&overrides)
                .cloned()
                .collect();
            match resolve(&layers) {
                Ok(t) => clients.overrides[kind.index()] = Some(t),
                Err(p) => problems.extend(p),
            }
        }
        if problems.is_empty() {
            Ok(clients)
        } else {
            Err(problems)
        }
    }
}

/// Translate `layers` and have librdkafka check the result.
fn resolve(layers: &[Setting]) -> Result<Translated, Vec<Problem>> {
    let translated = security::translate(layers)?;
    let mut config = ClientConfig::new();
    for (k, v) in &translated.pairs {
        config.set(k, v);
    }
    match config.create_native_config() {
        Ok(_) => Ok(translated),
        Err(e) => {
            let (key, message) = describe_config_error(&e);
            // The key as the operator wrote it, if it came through unchanged.
            let origin = layers
                .iter()
                .rev()
                .find(|s| s.key == key)
                .map_or(key, |s| s.origin.clone());
            Err(vec![Problem::new(origin, message)])
        }
    }
}

/// The key and message of librdkafka's refusal of a setting, without the value where the key
/// holds a secret.
pub fn describe_config_error(error: &KafkaError) -> (String, String) {
    match error {
        KafkaError::ClientConfig(_, description, key, _) => {
            let message = if security::is_secret(key) {
                "librdkafka refuses this value".to_owned()
            } else {
                format!("librdkafka refuses it: {description}")
            };
            (key.clone(), message)
        }
        other => (String::new(), other.to_string()),
    }
}

/// Create a client from `config`, with an error that names `what` and shows no secret.
pub fn create<C, X>(config: &ClientConfig, context: X, what: &str) -> Result<C, String>
where
    C: rdkafka::config::FromClientConfigAndContext<X>,
    X: rdkafka::ClientContext,
{
    config.create_with_context(context).map_err(|e| match e {
        KafkaError::ClientConfig(..) => {
            let (key, message) = describe_config_error(&e);
            format!("cannot create the Kafka {what}: {key}: {message}")
        }
        other => format!("cannot create the Kafka {what}: {other}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::file::pairs_of as pairs;

    fn get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn worker_keys_reach_every_client_and_prefixed_keys_override_them() {
        let jaas = |user: &str| {
            format!(
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="pw";"#
            )
        };
        let c = ClientSettings::from_worker(&pairs(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", jaas("worker").as_str()),
            ("consumer.sasl.jaas.config", jaas("reader").as_str()),
            ("producer.linger.ms", "20"),
        ]))
        .unwrap();
        let p = c.librdkafka(ClientKind::Producer);
        assert_eq!(get(p, "sasl.username"), Some("worker"));
        assert_eq!(get(p, "linger.ms"), Some("20"));
        assert_eq!(get(p, "security.protocol"), Some("sasl_ssl"));
        let consumer = c.librdkafka(ClientKind::Consumer);
        assert_eq!(get(consumer, "sasl.username"), Some("reader"));
        assert_eq!(get(consumer, "linger.ms"), None);
        assert_eq!(
            get(c.librdkafka(ClientKind::Admin), "sasl.username"),
            Some("worker")
        );
        assert!(c.secured());
        assert_eq!(c.policy(), OverridePolicy::All);
    }

    #[test]
    fn librdkafka_checks_the_keys_once_and_secrets_stay_out_of_messages() {
        let problems =
            ClientSettings::from_worker(&pairs(&[("producer.no.such.key", "1")])).unwrap_err();
        assert_eq!(problems[0].key, "producer.no.such.key");
        assert!(
            problems[0].message.contains("librdkafka refuses it"),
            "{problems:?}"
        );
        let problems =
            ClientSettings::from_worker(&pairs(&[("consumer.enable.auto.commit", "true")]))
                .unwrap_err();
        assert!(
            problems[0]
                .message
                .contains("commits a sink's offsets itself")
        );
    }

    #[test]
    fn connector_overrides_follow_the_policy() {
        let worker = |policy: &str| {
            ClientSettings::from_worker(&pairs(&[(OVERRIDE_POLICY, policy)])).unwrap()
        };
        let connector = pairs(&[
            ("producer.override.compression.type", "zstd"),
            ("consumer.override.security.protocol", "SSL"),
        ]);
        let all = worker("All").for_connector(&connector).unwrap();
        assert_eq!(
            all.get(ClientKind::Producer)
                .and_then(|t| t.get("compression.type")),
            Some("zstd")
        );
        assert_eq!(all.get(ClientKind::Admin), None);
        let principal = worker(
            "org.apache.kafka.connect.connector.policy.PrincipalConnectorClientConfigOverridePolicy",
        )
        .for_connector(&connector)
        .unwrap_err();
        assert_eq!(principal.len(), 1);
        assert_eq!(principal[0].key, "producer.override.compression.type");
        assert!(
            principal[0]
                .message
                .contains("Principal, which allows only")
        );
        let none = worker("None").for_connector(&connector).unwrap_err();
        assert_eq!(none.len(), 2);
        let owned = worker("All")
            .for_connector(&pairs(&[("consumer.override.group.id", "mine")]))
            .unwrap_err();
        assert!(owned[0].message.starts_with("cannot be overridden: "));
        assert!(OverridePolicy::parse("Some").is_err());
    }
}
