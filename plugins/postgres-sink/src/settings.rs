//! The connector's configuration, with Kafka Connect JDBC sink's key names, checked once:
//! every problem names its key.

use wasm_connect_postgres_wire::Config as Login;
use wasm_connect_postgres_wire::connector::{self, connection_keys};
use wasm_connect_sdk::{Config, ConfigDef, ConfigError, ConfigType, Importance, Spec};

/// How records are written (`insert.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertMode {
    /// `INSERT`: a row whose key exists is a failed record.
    Insert,
    /// `INSERT ... ON CONFLICT (key) DO UPDATE`: written again, a record changes nothing.
    Upsert,
    /// `UPDATE ... WHERE key`: rows that do not exist are not created.
    Update,
}

/// Where a row's primary key comes from (`pk.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PkMode {
    /// No key: every record is a new row (`insert.mode=insert` only).
    None,
    /// The record's Kafka coordinates: `__connect_topic`, `__connect_partition`,
    /// `__connect_offset`.
    Kafka,
    /// The record key: its struct's fields, or a primitive key as the one field in `pk.fields`.
    RecordKey,
    /// Fields of the record value named by `pk.fields` (all of them when empty).
    RecordValue,
}

/// Everything the connector and its tasks read from their config.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where and as whom to connect.
    pub login: Login,
    /// The table a topic's records go to: `${topic}` is replaced by the topic's name.
    pub table_format: String,
    /// How records are written.
    pub insert_mode: InsertMode,
    /// Where the primary key comes from.
    pub pk_mode: PkMode,
    /// The key's column names (see [`PkMode`]).
    pub pk_fields: Vec<String>,
    /// Create a missing table from the records' schemas.
    pub auto_create: bool,
    /// Add columns for fields the table lacks.
    pub auto_evolve: bool,
    /// The most rows one statement writes.
    pub batch_size: usize,
    /// Tombstones (null values) delete the row with their key.
    pub delete_enabled: bool,
}

/// The plugin's spec: every key, documented.
pub fn spec() -> Spec {
    let key = |name, ty, doc| ConfigDef::new(name, ty, doc);
    connection_keys(Spec::new(
        "postgres-sink",
        env!("CARGO_PKG_VERSION"),
        "Writes records into PostgreSQL tables (insert, upsert or update; deletes from tombstones; tables created and evolved from the records' schemas), Kafka Connect JDBC sink style",
    ))
    .config(
        key(
            "table.name.format",
            ConfigType::String,
            "The table a topic's records are written to: ${topic} stands for the topic's name; schema.table names a schema.",
        )
        .default("${topic}")
        .importance(Importance::Medium),
    )
    .config(
        key(
            "insert.mode",
            ConfigType::String,
            "insert (a row whose key exists is a failed record), upsert (INSERT ... ON CONFLICT on the primary key DO UPDATE: redelivered records change nothing) or update (UPDATE on the primary key; missing rows are not created).",
        )
        .default("insert")
        .allowed(&["insert", "upsert", "update"])
        .importance(Importance::High),
    )
    .config(
        key(
            "pk.mode",
            ConfigType::String,
            "Where the primary key comes from: none, kafka (columns __connect_topic, __connect_partition, __connect_offset), record_key (the key's fields; a primitive key is the one column named in pk.fields) or record_value (the value's fields named in pk.fields, all when empty).",
        )
        .default("none")
        .allowed(&["none", "kafka", "record_key", "record_value"])
        .importance(Importance::High),
    )
    .config(
        key(
            "pk.fields",
            ConfigType::List,
            "The primary key's fields (see pk.mode); empty: all fields of the key (record_key) or value (record_value).",
        )
        .default(""),
    )
    .config(
        key(
            "auto.create",
            ConfigType::Boolean,
            "Create a missing table (CREATE TABLE) from the records' schemas: one column per field, NOT NULL where the field is not optional, the primary key from pk.mode.",
        )
        .default("false"),
    )
    .config(
        key(
            "auto.evolve",
            ConfigType::Boolean,
            "Add a nullable column (ALTER TABLE ... ADD COLUMN) for each field of a record's schema the table lacks; without it such a record fails the task.",
        )
        .default("false"),
    )
    .config(
        key(
            "batch.size",
            ConfigType::Int,
            "The most rows one statement writes (fewer when the statement would pass more than 65535 values).",
        )
        .default(3000),
    )
    .config(
        key(
            "delete.enabled",
            ConfigType::Boolean,
            "Tombstones (null values) delete the row with their key (needs pk.mode=record_key). Without it tombstones are skipped.",
        )
        .default("false"),
    )
}

impl Settings {
    /// The settings of `config`, or every problem with it.
    pub fn from_config(config: &Config) -> Result<Settings, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let login = connector::login(config, &mut errors);
        let insert_mode = match config.get("insert.mode").unwrap_or("insert") {
            "insert" => InsertMode::Insert,
            "upsert" => InsertMode::Upsert,
            "update" => InsertMode::Update,
            other => {
                errors.push(ConfigError::new(
                    "insert.mode",
                    format!("{other:?} is not a mode; use insert, upsert or update"),
                ));
                InsertMode::Insert
            }
        };
        let pk_mode = match config.get("pk.mode").unwrap_or("none") {
            "none" => PkMode::None,
            "kafka" => PkMode::Kafka,
            "record_key" => PkMode::RecordKey,
            "record_value" => PkMode::RecordValue,
            other => {
                errors.push(ConfigError::new(
                    "pk.mode",
                    format!("{other:?} is not a mode; use none, kafka, record_key or record_value"),
                ));
                PkMode::None
            }
        };
        let pk_fields = config.list("pk.fields");
        if pk_mode == PkMode::None && insert_mode != InsertMode::Insert {
            errors.push(ConfigError::new(
                "pk.mode",
                "is none, but insert.mode upsert and update need a primary key: set pk.mode to record_key, record_value or kafka",
            ));
        }
        if pk_mode == PkMode::Kafka && !pk_fields.is_empty() && pk_fields.len() != 3 {
            errors.push(ConfigError::new(
                "pk.fields",
                "with pk.mode=kafka names the three columns for topic, partition and offset, or is empty for __connect_topic, __connect_partition, __connect_offset",
            ));
        }
        let mut flag = |key: &str| match config.bool_or(key, false) {
            Ok(b) => b,
            Err(e) => {
                errors.push(e);
                false
            }
        };
        let auto_create = flag("auto.create");
        let auto_evolve = flag("auto.evolve");
        let delete_enabled = flag("delete.enabled");
        if delete_enabled && pk_mode != PkMode::RecordKey {
            errors.push(ConfigError::new(
                "delete.enabled",
                "needs pk.mode=record_key: a tombstone has only its key to say which row to delete",
            ));
        }
        let batch_size = match config.parse_or::<u32>("batch.size", 3000) {
            Ok(0) => {
                errors.push(ConfigError::new(
                    "batch.size",
                    "is 0; it must be at least 1",
                ));
                1
            }
            Ok(n) => n as usize,
            Err(e) => {
                errors.push(e);
                1
            }
        };
        let table_format = config.string_or("table.name.format", "${topic}");
        if table_format.trim().is_empty() {
            errors.push(ConfigError::new(
                "table.name.format",
                "is empty; write a table name, with ${topic} for the topic's name",
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Settings {
            login,
            table_format,
            insert_mode,
            pk_mode,
            pk_fields,
            auto_create,
            auto_evolve,
            batch_size,
            delete_enabled,
        })
    }

    /// The table (schema, name) the records of `topic` are written to.
    pub fn table(&self, topic: &str) -> (Option<String>, String) {
        let name = self.table_format.replace("${topic}", topic);
        match name.split_once('.') {
            Some((schema, table)) => (Some(schema.to_owned()), table.to_owned()),
            None => (None, name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let mut config = Config::new().with("connection.url", "jdbc:postgresql://db:5432/shop");
        config.set("connection.user", "connect");
        for (k, v) in pairs {
            config.set(*k, *v);
        }
        config
    }

    fn errors(pairs: &[(&str, &str)]) -> Vec<String> {
        match Settings::from_config(&config(pairs)) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.into_iter().map(|e| e.key).collect(),
        }
    }

    #[test]
    fn bad_combinations_name_their_key() {
        assert_eq!(errors(&[("insert.mode", "upsert")]), vec!["pk.mode"]);
        assert_eq!(
            errors(&[("delete.enabled", "true"), ("pk.mode", "record_value")]),
            vec!["delete.enabled"]
        );
        assert_eq!(errors(&[("batch.size", "0")]), vec!["batch.size"]);
        assert_eq!(errors(&[("insert.mode", "merge")]), vec!["insert.mode"]);
        assert!(errors(&[("insert.mode", "upsert"), ("pk.mode", "record_key")]).is_empty());
    }

    #[test]
    fn the_table_name_comes_from_the_topic() {
        let settings =
            Settings::from_config(&config(&[("table.name.format", "sales.${topic}_copy")]))
                .unwrap();
        assert_eq!(
            settings.table("orders"),
            (Some("sales".to_owned()), "orders_copy".to_owned())
        );
    }
}
