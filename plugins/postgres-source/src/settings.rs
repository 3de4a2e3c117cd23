//! The connector's configuration, with Kafka Connect JDBC source's key names, checked once:
//! every problem names its key.

use std::time::Duration;

use wasm_connect_postgres_wire::Config as Login;
use wasm_connect_postgres_wire::connector::{self, connection_keys};
use wasm_connect_sdk::{Config, ConfigDef, ConfigError, ConfigType, Importance, Spec};

use crate::columns::NumericMapping;

/// The task config key holding the task's tables (a JSON array of `schema.table` names).
pub const TASK_TABLES: &str = "postgres-source.task.tables";

/// How rows are found (`mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every row, every `poll.interval.ms`.
    Bulk,
    /// Rows whose incrementing column is above the last one seen.
    Incrementing,
    /// Rows whose timestamp is after the last one seen.
    Timestamp,
    /// Rows after the last (timestamp, incrementing id) seen.
    TimestampIncrementing,
}

impl Mode {
    /// Whether the mode reads an incrementing column.
    pub fn increments(self) -> bool {
        matches!(self, Mode::Incrementing | Mode::TimestampIncrementing)
    }

    /// Whether the mode reads timestamp columns.
    pub fn timestamps(self) -> bool {
        matches!(self, Mode::Timestamp | Mode::TimestampIncrementing)
    }
}

/// Everything the connector and its tasks read from their config.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where and as whom to connect.
    pub login: Login,
    /// The schema whose tables are read.
    pub schema: String,
    /// Tables to read (`table` or `schema.table`); empty: every table of the schema.
    pub include: Vec<String>,
    /// Tables to leave out.
    pub exclude: Vec<String>,
    /// How new rows are found.
    pub mode: Mode,
    /// The incrementing column (modes `incrementing`, `timestamp+incrementing`).
    pub incrementing_column: String,
    /// The timestamp columns, first non-null wins (modes `timestamp`, `timestamp+incrementing`).
    pub timestamp_columns: Vec<String>,
    /// How often each table is queried once it has no more new rows.
    pub poll_interval: Duration,
    /// The most rows one query returns.
    pub batch_max_rows: u32,
    /// A table's topic is this plus the table's name.
    pub topic_prefix: String,
    /// How often the connector looks for tables added or dropped.
    pub table_poll_interval: Duration,
    /// Rows are read only once their timestamp is this much older than the database's clock.
    pub timestamp_delay: Duration,
    /// How numerics map.
    pub numerics: NumericMapping,
}

/// The plugin's spec: every key, documented.
pub fn spec() -> Spec {
    let key = |name, ty, doc| ConfigDef::new(name, ty, doc);
    connection_keys(Spec::new(
        "postgres-source",
        env!("CARGO_PKG_VERSION"),
        "Reads the rows of PostgreSQL tables into topics (bulk, incrementing, timestamp or timestamp+incrementing), Kafka Connect JDBC source style",
    ))
    .config(
        key(
            "mode",
            ConfigType::String,
            "How new rows are found: bulk (every row, each poll), incrementing (rows whose incrementing.column.name is above the last seen), timestamp (rows whose timestamp.column.name is after the last seen) or timestamp+incrementing (both: exact even when rows share a timestamp).",
        )
        .required()
        .allowed(&["bulk", "incrementing", "timestamp", "timestamp+incrementing"])
        .importance(Importance::High),
    )
    .config(
        key(
            "topic.prefix",
            ConfigType::String,
            "Each table's rows go to the topic named by this prefix followed by the table's name.",
        )
        .required()
        .importance(Importance::High),
    )
    .config(
        key(
            "table.include.list",
            ConfigType::List,
            "The tables to read (table or schema.table names); empty reads every table of schema.pattern. table.whitelist is accepted as its older name.",
        )
        .default(""),
    )
    .config(
        key(
            "table.exclude.list",
            ConfigType::List,
            "Tables not to read. table.blacklist is accepted as its older name.",
        )
        .default(""),
    )
    .config(key("table.whitelist", ConfigType::List, "Older name of table.include.list.").default(""))
    .config(key("table.blacklist", ConfigType::List, "Older name of table.exclude.list.").default(""))
    .config(
        key(
            "schema.pattern",
            ConfigType::String,
            "The schema whose tables are read (an exact name).",
        )
        .default("public"),
    )
    .config(
        key(
            "incrementing.column.name",
            ConfigType::String,
            "The strictly increasing integer column of modes incrementing and timestamp+incrementing (usually the primary key).",
        )
        .default(""),
    )
    .config(
        key(
            "timestamp.column.name",
            ConfigType::List,
            "The timestamp column(s) of modes timestamp and timestamp+incrementing; with several, the first that is not null counts.",
        )
        .default(""),
    )
    .config(
        key(
            "poll.interval.ms",
            ConfigType::Int,
            "How often a table is queried for new rows once the last query returned fewer than batch.max.rows.",
        )
        .default(5000),
    )
    .config(key("batch.max.rows", ConfigType::Int, "The most rows one query returns.").default(100))
    .config(
        key(
            "table.poll.interval.ms",
            ConfigType::Long,
            "How often the connector looks for tables added or dropped (and then splits the tables over the tasks again).",
        )
        .default(60000),
    )
    .config(
        key(
            "timestamp.delay.interval.ms",
            ConfigType::Long,
            "Rows are read only once their timestamp is this much older than the database's clock, so that transactions still open when a row's timestamp was taken have committed.",
        )
        .default(0),
    )
    .config(
        key(
            "numeric.mapping",
            ConfigType::String,
            "How numeric(p,s) columns map: none (a Decimal of scale s) or best_fit (an integer type when s is 0 and p at most 18, else a double).",
        )
        .default("none")
        .allowed(&["none", "best_fit"]),
    )
}

impl Settings {
    /// The settings of `config`, or every problem with it.
    pub fn from_config(config: &Config) -> Result<Settings, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let login = connector::login(config, &mut errors);
        let mode = match config.get("mode").unwrap_or_default() {
            "bulk" => Mode::Bulk,
            "incrementing" => Mode::Incrementing,
            "timestamp" => Mode::Timestamp,
            "timestamp+incrementing" => Mode::TimestampIncrementing,
            other => {
                errors.push(ConfigError::new(
                    "mode",
                    format!("{other:?} is not a mode; use bulk, incrementing, timestamp or timestamp+incrementing"),
                ));
                Mode::Bulk
            }
        };
        let incrementing_column = config.string_or("incrementing.column.name", "");
        if mode.increments() && incrementing_column.is_empty() {
            errors.push(ConfigError::new(
                "incrementing.column.name",
                format!("is required with mode {}", mode_name(mode)),
            ));
        }
        let timestamp_columns = config.list("timestamp.column.name");
        if mode.timestamps() && timestamp_columns.is_empty() {
            errors.push(ConfigError::new(
                "timestamp.column.name",
                format!("is required with mode {}", mode_name(mode)),
            ));
        }
        let mut number = |key: &str, default: u64, min: u64| -> u64 {
            match config.parse_or::<u64>(key, default) {
                Ok(n) if n >= min => n,
                Ok(n) => {
                    errors.push(ConfigError::new(
                        key,
                        format!("is {n}; it must be at least {min}"),
                    ));
                    default
                }
                Err(e) => {
                    errors.push(e);
                    default
                }
            }
        };
        let poll_interval = Duration::from_millis(number("poll.interval.ms", 5000, 1));
        let batch_max_rows = number("batch.max.rows", 100, 1).min(u64::from(u32::MAX)) as u32;
        let table_poll_interval =
            Duration::from_millis(number("table.poll.interval.ms", 60000, 100));
        let timestamp_delay = Duration::from_millis(number("timestamp.delay.interval.ms", 0, 0));
        let numerics = match config.get("numeric.mapping").unwrap_or("none") {
            "best_fit" => NumericMapping::BestFit,
            _ => NumericMapping::Decimal,
        };
        let topic_prefix = config.string_or("topic.prefix", "");
        let mut include = config.list("table.include.list");
        include.extend(config.list("table.whitelist"));
        let mut exclude = config.list("table.exclude.list");
        exclude.extend(config.list("table.blacklist"));
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Settings {
            login,
            schema: config.string_or("schema.pattern", "public"),
            include,
            exclude,
            mode,
            incrementing_column,
            timestamp_columns,
            poll_interval,
            batch_max_rows,
            topic_prefix,
            table_poll_interval,
            timestamp_delay,
            numerics,
        })
    }

    /// Whether the table `schema.table` is to be read.
    pub fn selects(&self, schema: &str, table: &str) -> bool {
        let qualified = format!("{schema}.{table}");
        let named = |list: &[String]| list.iter().any(|t| t == table || *t == qualified);
        (self.include.is_empty() || named(&self.include)) && !named(&self.exclude)
    }
}

/// The mode's name as configured.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Bulk => "bulk",
        Mode::Incrementing => "incrementing",
        Mode::Timestamp => "timestamp",
        Mode::TimestampIncrementing => "timestamp+incrementing",
    }
}
