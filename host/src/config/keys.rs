//! Every configuration key the worker itself interprets, in one table: its name, how its value
//! is read, its default, what it means, where it may be set (worker config, connector config or
//! both: a worker default a connector may override) and whether a plugin may define it.
//!
//! The table is the single source of truth for defaults (`Limits`, `RunnerSettings`,
//! `RestartPolicy` and the worker's own settings start from it), for how the numeric and
//! boolean keys are read ([`read_number`], [`read_bool`]: the key's kind decides what it takes
//! and the error says so), for the unknown-key warning of
//! the worker config, for the keys a plugin's spec may not define, and for
//! `docs/configuration.md` (a test checks that every key is documented there with this
//! default).

/// How a key's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer above zero.
    PositiveInteger,
    /// An integer of zero or more.
    Count,
    /// An integer of at least this much.
    AtLeast(u64),
    /// A whole number (some keys take -1 or 0 to mean something).
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A comma-separated list.
    List,
    /// Anything else (names, addresses, paths, classes, expressions).
    Text,
}

impl Kind {
    /// `raw` read as a number of this kind; the error says what was given and what the kind
    /// takes (the caller names the key).
    pub fn number(self, raw: &str) -> Result<u64, String> {
        let n = raw.trim().parse::<u64>().ok();
        let (min, takes) = match self {
            Kind::PositiveInteger => (1, "a positive integer".to_owned()),
            Kind::Count => (0, "a non-negative integer".to_owned()),
            Kind::AtLeast(min) => (min, format!("an integer >= {min}")),
            other => return Err(format!("is read as {other:?}, not as a number")),
        };
        n.filter(|n| *n >= min)
            .ok_or_else(|| format!("{raw:?} is not {takes}"))
    }

    /// `raw` read as `true` or `false` (any case).
    pub fn boolean(raw: &str) -> Result<bool, String> {
        match raw.trim() {
            v if v.eq_ignore_ascii_case("true") => Ok(true),
            v if v.eq_ignore_ascii_case("false") => Ok(false),
            _ => Err(format!("{raw:?} must be true or false")),
        }
    }
}

/// How the value of key `name` is read (`Text` for a key the worker does not interpret).
pub fn kind(name: &str) -> Kind {
    key(name).map_or(Kind::Text, |k| k.kind)
}

/// `raw`, the value given for key `name`, read as the number the key's kind takes; the error
/// names the key.
pub fn read_number(name: &str, raw: &str) -> Result<u64, String> {
    kind(name).number(raw).map_err(|e| format!("{name}: {e}"))
}

/// `raw`, the value given for the boolean key `name`; the error names the key.
pub fn read_bool(name: &str, raw: &str) -> Result<bool, String> {
    Kind::boolean(raw).map_err(|e| format!("{name}: {e}"))
}

/// A key's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDefault {
    /// No default: unset means "none" (or the key is required).
    None,
    /// This value.
    Value(&'static str),
    /// Worked out when the worker starts; the text says from what.
    Computed(&'static str),
}

/// Where a key may be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The worker config only.
    Worker,
    /// A connector config only.
    Connector,
    /// The worker config sets the default, a connector config may override it.
    Both,
    /// The worker config of distributed mode only (`standalone` says it ignores them).
    Distributed,
}

/// One key the worker interprets.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The key.
    pub name: &'static str,
    /// How its value is read.
    pub kind: Kind,
    /// Its default.
    pub default: KeyDefault,
    /// What it means, in one line (docs/configuration.md says more).
    pub doc: &'static str,
    /// Where it may be set.
    pub scope: Scope,
}

impl Key {
    /// Whether a plugin's spec may not define this key: every key a connector config gives the
    /// worker is the operator's alone (a plugin default for `sandbox.fs.write` would grant the
    /// plugin a directory), except the topics, which plugins describe for their users.
    pub fn reserved(&self) -> bool {
        !matches!(self.scope, Scope::Worker | Scope::Distributed)
            && !matches!(
                self.name,
                "topic" | "topics" | "topics.regex" | "topic.prefix"
            )
    }
}

/// Families of connector keys the worker interprets beyond the table's (converter settings),
/// reserved like the table's own.
pub const RESERVED_PREFIXES: &[&str] = &[
    "sandbox.",
    "task.restart.",
    "errors.",
    "transforms",
    "predicates",
    "key.converter",
    "value.converter",
    "topic.creation.",
    "producer.override.",
    "consumer.override.",
    "admin.override.",
];

/// The prefix of the HTTPS REST listener's own TLS keys (Kafka Connect's
/// `listeners.https.ssl.*`): worker keys under it are known, though the table lists none of them.
pub const HTTPS_LISTENER_PREFIX: &str = "listeners.https.";

/// Whether a plugin's spec may not define `name`.
pub fn is_reserved(name: &str) -> bool {
    KEYS.iter().any(|k| k.name == name && k.reserved())
        || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The key named `name`, if the worker interprets it.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The fixed defaults of the keys in `scope` (and those of `Both`), as config pairs: what the
/// settings types start from.
pub fn defaults() -> Vec<(String, String)> {
    KEYS.iter()
        .filter_map(|k| match k.default {
            KeyDefault::Value(v) => Some((k.name.to_owned(), v.to_owned())),
            _ => None,
        })
        .collect()
}

/// The fixed default of `name` as a number. The table's defaults are static data that a unit
/// test parses, so an unknown or non-numeric one is a bug in the table, not input.
pub fn number(name: &str) -> u64 {
    match key(name).map(|k| k.default) {
        Some(KeyDefault::Value(v)) => v
            .parse()
            .unwrap_or_else(|_| panic!("the default of {name} in the key table is not a number")),
        _ => panic!("{name} has no fixed default in the key table"),
    }
}

/// Every key the worker interprets.
pub const KEYS: &[Key] = &[
    Key {
        name: "group.id",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The Kafka group the workers of one distributed cluster join (required).",
        scope: Scope::Distributed,
    },
    Key {
        name: "config.storage.topic",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The topic the cluster's connector configs, task configs and target states are kept in (required; one partition, compacted).",
        scope: Scope::Distributed,
    },
    Key {
        name: "offset.storage.topic",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The topic source connectors' offsets are kept in (required; compacted).",
        scope: Scope::Distributed,
    },
    Key {
        name: "status.storage.topic",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The topic connector and task statuses are kept in (required; compacted).",
        scope: Scope::Distributed,
    },
    Key {
        name: "config.storage.replication.factor",
        kind: Kind::Integer,
        default: KeyDefault::Value("3"),
        doc: "Replication factor of the config topic when the worker creates it (-1: the broker's default).",
        scope: Scope::Distributed,
    },
    Key {
        name: "offset.storage.replication.factor",
        kind: Kind::Integer,
        default: KeyDefault::Value("3"),
        doc: "Replication factor of the offsets topic when the worker creates it (-1: the broker's default).",
        scope: Scope::Distributed,
    },
    Key {
        name: "status.storage.replication.factor",
        kind: Kind::Integer,
        default: KeyDefault::Value("3"),
        doc: "Replication factor of the status topic when the worker creates it (-1: the broker's default).",
        scope: Scope::Distributed,
    },
    Key {
        name: "offset.storage.partitions",
        kind: Kind::Integer,
        default: KeyDefault::Value("25"),
        doc: "Partitions of the offsets topic when the worker creates it (-1: the broker's default).",
        scope: Scope::Distributed,
    },
    Key {
        name: "status.storage.partitions",
        kind: Kind::Integer,
        default: KeyDefault::Value("5"),
        doc: "Partitions of the status topic when the worker creates it (-1: the broker's default).",
        scope: Scope::Distributed,
    },
    Key {
        name: "session.timeout.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("10000"),
        doc: "A worker not heard from for this long leaves the group; a worker that cannot reach the coordinator this long stops its work.",
        scope: Scope::Distributed,
    },
    Key {
        name: "heartbeat.interval.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("3000"),
        doc: "How often a worker heartbeats to the group coordinator; below session.timeout.ms.",
        scope: Scope::Distributed,
    },
    Key {
        name: "rebalance.timeout.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("60000"),
        doc: "How long the coordinator waits for every worker to rejoin in a rebalance.",
        scope: Scope::Distributed,
    },
    Key {
        name: "scheduled.rebalance.max.delay.ms",
        kind: Kind::Count,
        default: KeyDefault::Value("300000"),
        doc: "How long the work of a departed worker waits for it to come back before it moves.",
        scope: Scope::Distributed,
    },
    Key {
        name: "rest.advertised.host.name",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The host name other workers reach this worker's REST API at (default: the listener's host, or this machine's name).",
        scope: Scope::Distributed,
    },
    Key {
        name: "rest.advertised.port",
        kind: Kind::PositiveInteger,
        default: KeyDefault::None,
        doc: "The port other workers reach this worker's REST API at (default: the listener's).",
        scope: Scope::Distributed,
    },
    Key {
        name: "rest.advertised.listener",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "Which listener (`http` or `https`) other workers use (default: the first).",
        scope: Scope::Distributed,
    },
    Key {
        name: "name",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The connector's unique name (required).",
        scope: Scope::Connector,
    },
    Key {
        name: "connector.class",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The plugin that implements the connector: its spec name (required).",
        scope: Scope::Connector,
    },
    Key {
        name: "connector.plugin.version",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "Which installed version of the plugin to run: a version or a KIP-891 range (default: the highest).",
        scope: Scope::Connector,
    },
    Key {
        name: "tasks.max",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("1"),
        doc: "The most tasks the connector may run.",
        scope: Scope::Connector,
    },
    Key {
        name: "bootstrap.servers",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "Kafka brokers, host:port[,host:port]. Without it the worker starts an embedded broker.",
        scope: Scope::Worker,
    },
    Key {
        name: "plugin.path",
        kind: Kind::Text,
        default: KeyDefault::Value("dist/plugins"),
        doc: "Directory of connector plugins (.wasm); watched for changes.",
        scope: Scope::Worker,
    },
    Key {
        name: "data.dir",
        kind: Kind::Text,
        default: KeyDefault::Value("wasm-connect-data"),
        doc: "Directory for offsets, connector state, the compile cache and the embedded broker.",
        scope: Scope::Worker,
    },
    Key {
        name: "offset.flush.interval.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("10000"),
        doc: "How often source offsets are flushed and sink offsets committed.",
        scope: Scope::Worker,
    },
    Key {
        name: "key.converter",
        kind: Kind::Text,
        default: KeyDefault::Value("string"),
        doc: "Default key converter: string, json or bytes (Kafka Connect class names work too).",
        scope: Scope::Both,
    },
    Key {
        name: "value.converter",
        kind: Kind::Text,
        default: KeyDefault::Value("json"),
        doc: "Default value converter: string, json or bytes.",
        scope: Scope::Both,
    },
    Key {
        name: "key.converter.schemas.enable",
        kind: Kind::Boolean,
        default: KeyDefault::Value("true"),
        doc: "For the json converter: wrap keys in a {schema, payload} envelope.",
        scope: Scope::Both,
    },
    Key {
        name: "value.converter.schemas.enable",
        kind: Kind::Boolean,
        default: KeyDefault::Value("true"),
        doc: "For the json converter: wrap values in a {schema, payload} envelope.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.memory.max.bytes",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("268435456"),
        doc: "Default linear memory limit of a plugin instance.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.memory.reservation.bytes",
        kind: Kind::AtLeast(64 * 1024),
        default: KeyDefault::Computed("sandbox.memory.max.bytes"),
        doc: "Address space reserved per instance for its linear memory; no connector's memory limit may exceed it. 4294967296 or more: no bounds checks in plugin code (fastest), at 4 GiB of address space per instance.",
        scope: Scope::Worker,
    },
    Key {
        name: "sandbox.call.timeout.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("10000"),
        doc: "Default CPU time limit of one call into a plugin.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.call.wall.timeout.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("30000"),
        doc: "Default wall-clock deadline of one poll, put, commit, open, close or create call; past it the call and its instance are abandoned and the task fails.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.flush.wall.timeout.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("60000"),
        doc: "Default wall-clock deadline of one flush or stop call.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.config.wall.timeout.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("30000"),
        doc: "Default wall-clock deadline of one spec, validate or task-configs call (also when a plugin file is loaded).",
        scope: Scope::Both,
    },
    Key {
        name: "tasks.max.per.worker",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Computed("from the machine"),
        doc: "Most task instances this worker runs; beyond it connectors are refused. Default: the smaller of RAM / 1 MiB and (vm.max_map_count - 4096) / 4.",
        scope: Scope::Worker,
    },
    Key {
        name: "tasks.max.per.connector",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Computed("1000"),
        doc: "Most tasks one connector may ask for (tasks.max); default 1000, or tasks.max.per.worker if lower.",
        scope: Scope::Worker,
    },
    Key {
        name: "sandbox.memory.budget.bytes",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Computed("4 x RAM"),
        doc: "Sum of the memory limits (sandbox.memory.max.bytes) of every task instance; beyond it connectors are refused.",
        scope: Scope::Worker,
    },
    Key {
        name: "sandbox.files.budget",
        kind: Kind::Count,
        default: KeyDefault::Computed("open-file limit - reserve"),
        doc: "Sum of the handle limits (sandbox.handles.max) of every task instance with a directory grant; beyond it such connectors are refused. Default: the open-file limit less a quarter of it (at least 256) kept for the worker.",
        scope: Scope::Worker,
    },
    Key {
        name: "sandbox.log.lines.per.second",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("100"),
        doc: "Default output lines (stdout, stderr, log) a plugin instance may write per second.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.log.bytes.per.second",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("65536"),
        doc: "Default bytes of output (all lines together) a plugin instance may write per second, in bursts of ten seconds' worth.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.log.message.max.bytes",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("8192"),
        doc: "Default longest log message or output line of a plugin; longer ones are cut, with a marker saying how much.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.handles.max",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("256"),
        doc: "Default most handles (open files, directory streams, streams, pollables) one plugin instance may hold.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.call.copy.max.bytes",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("134217728"),
        doc: "Default most bytes the worker copies out of a plugin in one crossing: a call's result, or the arguments of one call the plugin makes to the worker (and what offsets.read answers); each string and list is counted each time it is referenced.",
        scope: Scope::Both,
    },
    Key {
        name: "source.poll.max.records",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("2000"),
        doc: "Most records asked of a source task per poll.",
        scope: Scope::Both,
    },
    Key {
        name: "source.max.in.flight.records",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("20000"),
        doc: "Most records a source task may have sent but not acknowledged.",
        scope: Scope::Both,
    },
    Key {
        name: "source.max.in.flight.bytes",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("67108864"),
        doc: "Most bytes a source task may have sent but not acknowledged.",
        scope: Scope::Both,
    },
    Key {
        name: "sink.batch.max.records",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("2000"),
        doc: "Most records handed to a sink task per put.",
        scope: Scope::Both,
    },
    // librdkafka's default `message.max.bytes`: a larger record could not be produced.
    Key {
        name: "sandbox.record.max.bytes",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("1000000"),
        doc: "Largest record (key, value and headers) allowed across the plugin boundary.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.record.max.headers",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("1000"),
        doc: "Most header entries one record from a source plugin may carry.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.batch.max.bytes",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("67108864"),
        doc: "Most bytes one polled batch may expand to on the host (shared spans and headers counted each time a record uses them).",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.source.offset.max.bytes",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("16384"),
        doc: "Longest source partition or source offset (JSON text) of one record.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.source.partitions.max",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("10000"),
        doc: "Most distinct source partitions one source task may track; a connector may have offsets stored for this many per task.",
        scope: Scope::Both,
    },
    Key {
        name: "sandbox.topics.max",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("1000"),
        doc: "Most distinct topics one source connector may write to (and so create) since its active topics were last reset.",
        scope: Scope::Both,
    },
    Key {
        name: "connector.monitor.interval.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("5000"),
        doc: "How often a running connector's monitor is called (contract 0.3.0 on).",
        scope: Scope::Both,
    },
    Key {
        name: "topic.creation.enable",
        kind: Kind::Boolean,
        default: KeyDefault::Value("true"),
        doc: "Create missing topics of source connectors (KIP-158 settings in the connector).",
        scope: Scope::Worker,
    },
    Key {
        name: "topic.creation.default.partitions",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("1"),
        doc: "Partitions of a created topic unless the connector says otherwise.",
        scope: Scope::Both,
    },
    Key {
        name: "topic.creation.default.replication.factor",
        kind: Kind::Integer,
        default: KeyDefault::Value("-1"),
        doc: "Replication of a created topic unless the connector says otherwise (-1: broker default).",
        scope: Scope::Both,
    },
    Key {
        name: "plugin.scan.interval.ms",
        kind: Kind::AtLeast(10),
        default: KeyDefault::Value("2000"),
        doc: "How often the plugin directory is checked for changes.",
        scope: Scope::Worker,
    },
    Key {
        name: "embedded.broker.listener",
        kind: Kind::Text,
        default: KeyDefault::Value("127.0.0.1:9092"),
        doc: "Where the embedded broker listens (only without bootstrap.servers).",
        scope: Scope::Worker,
    },
    Key {
        name: "worker.id",
        kind: Kind::Text,
        default: KeyDefault::Computed("hostname:pid"),
        doc: "This worker's id in statuses.",
        scope: Scope::Worker,
    },
    Key {
        name: "task.shutdown.graceful.timeout.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("5000"),
        doc: "How long a stopping task's plugin may take to finish its call in progress and stop; past it the instance is abandoned (offsets of acknowledged records are still written).",
        scope: Scope::Worker,
    },
    Key {
        name: "task.restart.max.attempts",
        kind: Kind::Count,
        default: KeyDefault::Value("5"),
        doc: "Restarts of a failed task within the window before it stays FAILED.",
        scope: Scope::Both,
    },
    Key {
        name: "task.restart.window.ms",
        kind: Kind::Count,
        default: KeyDefault::Value("600000"),
        doc: "The window in which restarts are counted.",
        scope: Scope::Both,
    },
    Key {
        name: "task.restart.backoff.initial.ms",
        kind: Kind::Count,
        default: KeyDefault::Value("1000"),
        doc: "Wait before the first restart; doubles per restart.",
        scope: Scope::Both,
    },
    Key {
        name: "task.restart.backoff.max.ms",
        kind: Kind::Count,
        default: KeyDefault::Value("60000"),
        doc: "Longest wait between restarts.",
        scope: Scope::Both,
    },
    Key {
        name: "security.protocol",
        kind: Kind::Text,
        default: KeyDefault::Value("PLAINTEXT"),
        doc: "How every Kafka client connects: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
        scope: Scope::Worker,
    },
    Key {
        name: "config.providers",
        kind: Kind::List,
        default: KeyDefault::None,
        doc: "Config providers for ${provider:path:key} placeholders: file, env, directory.",
        scope: Scope::Worker,
    },
    Key {
        name: "connector.client.config.override.policy",
        kind: Kind::Text,
        default: KeyDefault::Value("All"),
        doc: "Which client settings connector configs may override: None, Principal or All.",
        scope: Scope::Worker,
    },
    Key {
        name: "listeners",
        kind: Kind::Text,
        default: KeyDefault::Value("http://127.0.0.1:8083"),
        doc: "Where the REST API listens: http://host:port and/or https://host:port, comma-separated (HTTPS takes listeners.https.ssl.*).",
        scope: Scope::Worker,
    },
    Key {
        name: "rest.request.max.bytes",
        kind: Kind::AtLeast(1024),
        default: KeyDefault::Value("2097152"),
        doc: "The largest request body the REST API reads; larger ones are answered 413.",
        scope: Scope::Worker,
    },
    Key {
        name: "rest.auth.token.file",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "File of bearer tokens the REST API accepts.",
        scope: Scope::Worker,
    },
    Key {
        name: "rest.auth.basic.file",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "File of user:password lines the REST API accepts.",
        scope: Scope::Worker,
    },
    Key {
        name: "topic",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "A source connector's default topic, and a topic it may write to.",
        scope: Scope::Connector,
    },
    Key {
        name: "topic.prefix",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The prefix of the topics a connector names per table (JDBC source style): a source connector may write to every topic starting with it.",
        scope: Scope::Connector,
    },
    Key {
        name: "topics",
        kind: Kind::List,
        default: KeyDefault::None,
        doc: "What a sink connector consumes (or topics a source connector may write to).",
        scope: Scope::Connector,
    },
    Key {
        name: "topics.regex",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "What a sink connector consumes: every topic the expression matches.",
        scope: Scope::Connector,
    },
    Key {
        name: "sandbox.fs.read",
        kind: Kind::List,
        default: KeyDefault::None,
        doc: "Absolute host directories the plugin may read.",
        scope: Scope::Connector,
    },
    Key {
        name: "sandbox.fs.write",
        kind: Kind::List,
        default: KeyDefault::None,
        doc: "Absolute host directories the plugin may read and write.",
        scope: Scope::Connector,
    },
    Key {
        name: "sandbox.net.connect",
        kind: Kind::List,
        default: KeyDefault::None,
        doc: "TCP peers the plugin may connect to (host:port, *.domain:port, address:port, CIDR:port); the only names it may look up.",
        scope: Scope::Connector,
    },
    Key {
        name: "sandbox.http.allow",
        kind: Kind::List,
        default: KeyDefault::None,
        doc: "URL prefixes (scheme://host[:port][/path/]) the plugin may send HTTP requests to.",
        scope: Scope::Connector,
    },
    Key {
        name: "sandbox.http.tls.ca.location",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "A PEM file of CA certificates the plugin's HTTPS requests trust besides the system's roots (a private CA).",
        scope: Scope::Connector,
    },
    Key {
        name: "sandbox.topics.write",
        kind: Kind::List,
        default: KeyDefault::None,
        doc: "Topics a source connector may write to besides topic and topics.",
        scope: Scope::Connector,
    },
    Key {
        name: "sandbox.topics.write.regex",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "A regular expression of further topics a source connector may write to.",
        scope: Scope::Connector,
    },
    Key {
        name: "transforms",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "Aliases of the connector's transforms, in order (transforms.<alias>.type and options).",
        scope: Scope::Connector,
    },
    Key {
        name: "predicates",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "Aliases of the predicates transforms may name (predicates.<alias>.type and options).",
        scope: Scope::Connector,
    },
    Key {
        name: "errors.tolerance",
        kind: Kind::Text,
        default: KeyDefault::Value("none"),
        doc: "none: a record error fails the task; all: it is skipped (and dead-lettered).",
        scope: Scope::Connector,
    },
    Key {
        name: "errors.retry.timeout",
        kind: Kind::Integer,
        default: KeyDefault::Value("0"),
        doc: "How long a retriable operation is retried, in ms (-1: forever).",
        scope: Scope::Connector,
    },
    Key {
        name: "errors.retry.delay.max.ms",
        kind: Kind::PositiveInteger,
        default: KeyDefault::Value("60000"),
        doc: "Longest wait between retries.",
        scope: Scope::Connector,
    },
    Key {
        name: "errors.log.enable",
        kind: Kind::Boolean,
        default: KeyDefault::Value("false"),
        doc: "Log every record error.",
        scope: Scope::Connector,
    },
    Key {
        name: "errors.log.include.messages",
        kind: Kind::Boolean,
        default: KeyDefault::Value("false"),
        doc: "Include the record in the logged error.",
        scope: Scope::Connector,
    },
    Key {
        name: "errors.deadletterqueue.topic.name",
        kind: Kind::Text,
        default: KeyDefault::None,
        doc: "The dead-letter queue topic (with errors.tolerance=all).",
        scope: Scope::Connector,
    },
    Key {
        name: "errors.deadletterqueue.context.headers.enable",
        kind: Kind::Boolean,
        default: KeyDefault::Value("false"),
        doc: "Add __connect.errors.* headers to dead-lettered records.",
        scope: Scope::Connector,
    },
    Key {
        name: "errors.deadletterqueue.topic.replication.factor",
        kind: Kind::Integer,
        default: KeyDefault::Value("-1"),
        doc: "Replication of the dead-letter topic when the worker creates it.",
        scope: Scope::Connector,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_booleans_are_read_as_their_key_kind_with_errors_that_name_the_key() {
        assert_eq!(read_number("tasks.max", " 3 "), Ok(3));
        assert_eq!(
            read_number("tasks.max", "0"),
            Err(r#"tasks.max: "0" is not a positive integer"#.to_owned())
        );
        assert_eq!(read_number("task.restart.max.attempts", "0"), Ok(0));
        assert_eq!(
            read_number("task.restart.max.attempts", "-1"),
            Err(r#"task.restart.max.attempts: "-1" is not a non-negative integer"#.to_owned())
        );
        assert_eq!(
            read_number("plugin.scan.interval.ms", "9"),
            Err(r#"plugin.scan.interval.ms: "9" is not an integer >= 10"#.to_owned())
        );
        assert_eq!(read_number("plugin.scan.interval.ms", "10"), Ok(10));
        assert!(read_number("connector.class", "1").is_err());
        assert_eq!(read_bool("errors.log.enable", "TRUE"), Ok(true));
        assert_eq!(
            read_bool("errors.log.enable", "yes"),
            Err(r#"errors.log.enable: "yes" must be true or false"#.to_owned())
        );
    }

    #[test]
    fn every_key_is_listed_once_and_its_default_reads_as_its_kind() {
        let mut seen = std::collections::HashSet::new();
        for key in KEYS {
            assert!(seen.insert(key.name), "{} is listed twice", key.name);
            if let KeyDefault::Value(v) = key.default {
                let ok = match key.kind {
                    Kind::PositiveInteger | Kind::Count | Kind::AtLeast(_) => {
                        key.kind.number(v).is_ok()
                    }
                    Kind::Integer => v.parse::<i64>().is_ok(),
                    Kind::Boolean => v == "true" || v == "false",
                    Kind::List | Kind::Text => true,
                };
                assert!(
                    ok,
                    "the default of {} ({v}) is not a {:?}",
                    key.name, key.kind
                );
            }
        }
    }

    #[test]
    fn every_key_the_worker_names_elsewhere_is_in_the_table() {
        use crate::config_keys::*;
        let named = [
            FS_READ,
            FS_WRITE,
            NET_CONNECT,
            HTTP_ALLOW,
            HTTP_TLS_CA,
            MEMORY_MAX_BYTES,
            CALL_TIMEOUT_MS,
            CALL_WALL_TIMEOUT_MS,
            FLUSH_WALL_TIMEOUT_MS,
            CONFIG_WALL_TIMEOUT_MS,
            LOG_BYTES_PER_SECOND,
            LOG_MESSAGE_MAX_BYTES,
            HANDLES_MAX,
            CALL_COPY_MAX_BYTES,
            LOG_LINES_PER_SECOND,
            TOPICS_WRITE,
            TOPICS_WRITE_REGEX,
            NAME,
            CONNECTOR_CLASS,
            TASKS_MAX,
            crate::config::restart::RESTART_MAX_ATTEMPTS,
            crate::config::restart::RESTART_WINDOW_MS,
            crate::config::restart::RESTART_BACKOFF_INITIAL_MS,
            crate::config::restart::RESTART_BACKOFF_MAX_MS,
            crate::config::worker::MEMORY_RESERVATION,
            crate::config::capacity::TASKS_PER_WORKER,
            crate::config::capacity::TASKS_PER_CONNECTOR,
            crate::config::capacity::MEMORY_BUDGET,
            crate::config::capacity::FILES_BUDGET,
        ];
        // The subsystems above `config/` check their own keys against the table (task
        // settings, error policy), so this module names none of theirs.
        for name in named {
            assert!(key(name).is_some(), "{name} is not in the key table");
        }
    }

    #[test]
    fn the_operator_s_keys_are_reserved_and_topics_are_not() {
        for name in [
            "name",
            "tasks.max",
            "sandbox.fs.write",
            "connector.monitor.interval.ms",
            "source.poll.max.records",
            "errors.tolerance",
            "value.converter.schemas.enable",
            "task.restart.max.attempts",
        ] {
            assert!(is_reserved(name), "{name}");
        }
        for name in ["topic", "topics", "topic.prefix", "file", "listeners"] {
            assert!(!is_reserved(name), "{name}");
        }
    }
}
