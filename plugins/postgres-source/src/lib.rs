//! `postgres-source`: reads the rows of PostgreSQL tables into Kafka, as Kafka Connect's JDBC
//! source connector does, over a socket the operator grants (`sandbox.net.connect`).
//!
//! The connector lists the tables of `schema.pattern` (filtered by `table.include.list` and
//! `table.exclude.list`) and splits them into contiguous groups, one per task (5 tables with
//! `tasks.max=3`: 2, 2 and 1); its `monitor` lists them again every `table.poll.interval.ms`
//! and asks for a new split when tables were added or dropped. Each task queries its tables in
//! turn with the configured `mode`, at most `batch.max.rows` rows a query, again at once while
//! queries come back full and after `poll.interval.ms` once they do not.
//!
//! A row becomes a record on `topic.prefix` + table name. Its key is the row's primary key (an
//! object of the key columns; null for a table without one), its value the row as an object,
//! each column in Kafka Connect's JSON form of the type Kafka Connect's JDBC source gives it
//! ([`columns`]). Its source partition is `{"protocol":"1","table":"database.schema.table"}` and
//! its offset what the mode needs to resume exactly: `{"incrementing": id}`,
//! `{"timestamp": ms, "timestamp_nanos": ns}` or both (the format of Kafka Connect's JDBC
//! source), so a restarted task, or a table that moved to another task, resumes where its
//! records were last committed.

mod columns;
mod settings;

use std::collections::VecDeque;
use std::time::Instant;

use wasm_connect_postgres_wire::connector::{self, db_error, validate_login};
use wasm_connect_postgres_wire::{Client, Error as DbError, QueryResult, quote_ident, values};
use wasm_connect_sdk::serde_json::{self, Value, json};
use wasm_connect_sdk::{
    Config, ConfigError, Connector, DataRef, Error, MonitorReport, Result, SourceBatch,
    SourceConnector, SourceRecordRef, SourceTask, Spec, export_source_connector, log, read_offsets,
    split_evenly,
};

use columns::Kind;
pub use settings::{Mode, Settings, TASK_TABLES};

/// A table, by schema and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TableName {
    /// Its schema.
    pub schema: String,
    /// Its name.
    pub table: String,
}

impl TableName {
    /// `"schema"."table"`, quoted for SQL.
    pub fn quoted(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.table))
    }

    /// `schema.table`.
    pub fn dotted(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

/// The open connection in `slot`, connecting first when there is none or it broke.
fn ensure<'a>(slot: &'a mut Option<Client>, settings: &Settings) -> Result<&'a mut Client> {
    connector::ensure(slot, &settings.login)
}

fn connect(settings: &Settings) -> Result<Client> {
    connector::connect(&settings.login)
}

/// The tables the connector reads, in name order.
fn list_tables(client: &mut Client, settings: &Settings) -> Result<Vec<TableName>> {
    let result = client
        .query(
            "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = $1 \
             AND has_table_privilege(c.oid, 'SELECT') ORDER BY 1, 2",
            &[Some(&settings.schema)],
        )
        .map_err(|e| db_error("cannot list the tables", &e))?;
    Ok(result
        .rows
        .into_iter()
        .filter_map(|row| {
            let mut row = row.into_iter();
            Some(TableName {
                schema: row.next()??,
                table: row.next()??,
            })
        })
        .filter(|t| settings.selects(&t.schema, &t.table))
        .collect())
}

/// The connector: lists the tables, splits them over tasks, watches for tables added or
/// dropped.
pub struct PostgresSource {
    settings: Settings,
    client: Option<Client>,
    /// The tables of the last split.
    split: Vec<TableName>,
}

impl PostgresSource {
    fn tables(&mut self) -> Result<Vec<TableName>> {
        let client = ensure(&mut self.client, &self.settings)?;
        list_tables(client, &self.settings)
    }
}

impl Connector for PostgresSource {
    fn spec() -> Spec {
        settings::spec()
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        let settings = match Settings::from_config(config) {
            Ok(s) => s,
            Err(errors) => return errors,
        };
        // Log in and look at the tables now, so a wrong URL, password, grant, table or column
        // is reported at creation rather than by a failing task.
        let mut client = match validate_login(&settings.login) {
            Ok(c) => c,
            Err(e) => return vec![e],
        };
        let tables = match list_tables(&mut client, &settings) {
            Ok(t) => t,
            Err(e) => return vec![ConfigError::new("connection.url", e.to_string())],
        };
        let mut errors = Vec::new();
        for wanted in &settings.include {
            if !tables
                .iter()
                .any(|t| t.table == *wanted || t.dotted() == *wanted)
            {
                errors.push(ConfigError::new(
                    "table.include.list",
                    format!(
                        "{wanted:?} is not a table of schema {:?} that {} may read",
                        settings.schema, settings.login.user
                    ),
                ));
            }
        }
        for table in &tables {
            if let Err(e) = TableReader::describe(&mut client, &settings, table.clone()) {
                errors.push(e);
            }
        }
        client.close();
        errors
    }

    fn create(config: &Config) -> Result<Self> {
        let settings = Settings::from_config(config).map_err(Error::InvalidConfig)?;
        Ok(Self {
            settings,
            client: None,
            split: Vec::new(),
        })
    }

    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        let tables = self.tables()?;
        if tables.is_empty() {
            log::warn(&format!(
                "schema {:?} has no table to read (of those {} may read, after table.include.list and table.exclude.list); the connector runs no task until one appears",
                self.settings.schema, self.settings.login.user
            ));
        }
        let configs = split_evenly(&tables, max_tasks as usize)
            .into_iter()
            .map(|group| {
                let names: Vec<String> = group.iter().map(TableName::dotted).collect();
                config.clone().with(
                    TASK_TABLES,
                    serde_json::to_string(&names).unwrap_or_default(),
                )
            })
            .collect();
        self.split = tables;
        Ok(configs)
    }

    fn monitor(&mut self, _config: &Config) -> Result<MonitorReport> {
        let next = MonitorReport::unchanged().next_call_in(self.settings.table_poll_interval);
        let tables = match self.tables() {
            Ok(t) => t,
            Err(e) => {
                // The database is unreachable for now: the tasks say so; look again later.
                self.client = None;
                return Err(Error::retriable(e.to_string()));
            }
        };
        if tables == self.split {
            return Ok(next);
        }
        log::info(&format!(
            "the tables changed ({} now, {} in the running split); asking for a new split",
            tables.len(),
            self.split.len()
        ));
        Ok(MonitorReport {
            reconfigure: true,
            ..next
        })
    }

    fn stop(&mut self) {
        if let Some(client) = self.client.take() {
            client.close();
        }
    }
}

impl SourceConnector for PostgresSource {
    type Task = PostgresSourceTask;
}

/// Where a table's reading stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Position {
    /// The last incrementing id read.
    id: Option<i64>,
    /// The last timestamp read, in microseconds since the epoch (UTC).
    micros: Option<i64>,
    /// Bulk mode: which pass over the table this is.
    pass: u64,
}

impl Position {
    /// The text of [`Position::offset`] written into `out` (cleared first), without building
    /// the object: keys in name order, as the object's text has them.
    fn write_offset(&self, mode: Mode, out: &mut String) {
        out.clear();
        out.push('{');
        let field = |out: &mut String, name: &str, n: i64| {
            if out.len() > 1 {
                out.push(',');
            }
            out.push('"');
            out.push_str(name);
            out.push_str("\":");
            out.push_str(columns::itoa(n, &mut [0; 20]));
        };
        if let (true, Some(id)) = (mode.increments(), self.id) {
            field(out, "incrementing", id);
        }
        if mode == Mode::Bulk {
            // (Passes count from 0 and stay far below i64::MAX.)
            field(out, "pass", self.pass.min(i64::MAX as u64) as i64);
        }
        if let (true, Some(micros)) = (mode.timestamps(), self.micros) {
            field(out, "timestamp", micros.div_euclid(1000));
            field(out, "timestamp_nanos", micros.rem_euclid(1_000_000) * 1000);
        }
        out.push('}');
    }

    /// The offset, in Kafka Connect JDBC source's form.
    #[cfg(test)]
    fn offset(&self, mode: Mode) -> Value {
        let mut offset = serde_json::Map::new();
        if mode == Mode::Bulk {
            offset.insert("pass".into(), json!(self.pass));
        }
        if let (true, Some(micros)) = (mode.timestamps(), self.micros) {
            offset.insert("timestamp".into(), json!(micros.div_euclid(1000)));
            offset.insert(
                "timestamp_nanos".into(),
                json!(micros.rem_euclid(1_000_000) * 1000),
            );
        }
        if let (true, Some(id)) = (mode.increments(), self.id) {
            offset.insert("incrementing".into(), json!(id));
        }
        Value::Object(offset)
    }

    /// The position an offset records.
    fn from_offset(offset: &Value) -> Position {
        let micros = offset["timestamp"].as_i64().map(|ms| {
            let nanos = offset["timestamp_nanos"]
                .as_i64()
                .unwrap_or(ms.rem_euclid(1000) * 1_000_000);
            ms.div_euclid(1000) * 1_000_000 + nanos / 1000
        });
        Position {
            id: offset["incrementing"].as_i64(),
            micros,
            pass: offset["pass"].as_u64().unwrap_or(0),
        }
    }
}

/// A column of a table being read.
#[derive(Debug, Clone)]
struct ColumnInfo {
    name: String,
    kind: Kind,
    /// Whether the column may hold nulls (its field is optional).
    optional: bool,
}

/// One table of a task.
struct TableReader {
    name: TableName,
    topic: String,
    partition: Value,
    /// `partition` as JSON text, serialized once rather than per record.
    partition_text: String,
    columns: Vec<ColumnInfo>,
    /// The Kafka Connect schema of the records' values: a struct named after the table.
    value_schema: String,
    /// The Kafka Connect schema of the records' keys (a struct of the primary key's columns).
    key_schema: String,
    /// Indexes (in `columns`) of the primary key's columns, in key order.
    key: Vec<usize>,
    /// The value's fields in the order its payload lists them (the schema's: the table's
    /// column order, as Kafka Connect's JsonConverter writes a struct), each with its `"name":`
    /// text.
    value_fields: Vec<(usize, String)>,
    /// The key's fields likewise (the primary key's order).
    key_fields: Vec<(usize, String)>,
    /// Index of the incrementing column.
    id_column: Option<usize>,
    /// Indexes of the timestamp columns, in order of preference.
    ts_columns: Vec<usize>,
    position: Position,
    /// Rows read but not yet returned, with the position after each.
    pending: VecDeque<(Vec<Option<String>>, Position)>,
    /// Bulk mode: the `ctid` the current pass has read up to.
    bulk_after: Option<String>,
    next_query: Instant,
}

impl TableReader {
    /// Read the table's columns and key, and check the mode's columns; errors name the key.
    fn describe(
        client: &mut Client,
        settings: &Settings,
        name: TableName,
    ) -> std::result::Result<TableReader, ConfigError> {
        let sql_error = |e: DbError| {
            ConfigError::new(
                "table.include.list",
                format!("cannot read the columns of {}: {e}", name.dotted()),
            )
        };
        let qualified = name.quoted();
        let columns = client
            .query(
                "SELECT a.attname, a.atttypid, a.atttypmod, a.attnotnull FROM pg_catalog.pg_attribute a \
                 WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                &[Some(&qualified)],
            )
            .map_err(sql_error)?;
        let columns: Vec<ColumnInfo> = columns
            .rows
            .iter()
            .filter_map(|row| {
                let oid: u32 = row.get(1)?.as_deref()?.parse().ok()?;
                let typmod: i32 = row.get(2)?.as_deref()?.parse().ok()?;
                Some(ColumnInfo {
                    name: row.first()?.clone()?,
                    kind: Kind::of(oid, typmod, settings.numerics),
                    optional: row.get(3)?.as_deref() != Some("t"),
                })
            })
            .collect();
        let key = client
            .query(
                "SELECT a.attname FROM pg_catalog.pg_index i \
                 JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
                 WHERE i.indrelid = $1::regclass AND i.indisprimary \
                 ORDER BY array_position(i.indkey::int2[], a.attnum)",
                &[Some(&qualified)],
            )
            .map_err(sql_error)?;
        let index = |column: &str| columns.iter().position(|c| c.name == column);
        let key: Vec<usize> = key
            .rows
            .iter()
            .filter_map(|row| index(row.first()?.as_deref()?))
            .collect();
        let id_column = if settings.mode.increments() {
            let column = &settings.incrementing_column;
            let i = index(column).ok_or_else(|| {
                ConfigError::new(
                    "incrementing.column.name",
                    format!("table {} has no column {column:?}", name.dotted()),
                )
            })?;
            if !matches!(columns[i].kind, Kind::Int16 | Kind::Int32 | Kind::Int64) {
                return Err(ConfigError::new(
                    "incrementing.column.name",
                    format!(
                        "column {column:?} of table {} is not an integer column ({:?}); the incrementing column must be smallint, integer or bigint",
                        name.dotted(),
                        columns[i].kind
                    ),
                ));
            }
            Some(i)
        } else {
            None
        };
        let mut ts_columns = Vec::new();
        if settings.mode.timestamps() {
            for column in &settings.timestamp_columns {
                let i = index(column).ok_or_else(|| {
                    ConfigError::new(
                        "timestamp.column.name",
                        format!("table {} has no column {column:?}", name.dotted()),
                    )
                })?;
                if columns[i].kind != Kind::Timestamp {
                    return Err(ConfigError::new(
                        "timestamp.column.name",
                        format!(
                            "column {column:?} of table {} is not a timestamp or timestamptz column",
                            name.dotted()
                        ),
                    ));
                }
                ts_columns.push(i);
            }
        }
        let database = &settings.login.dbname;
        let partition = json!({"protocol": "1", "table": format!("{database}.{}", name.dotted())});
        let field = |c: &ColumnInfo| c.kind.field_schema(&c.name, c.optional);
        let value_fields: Vec<String> = columns.iter().map(field).collect();
        // As Kafka Connect's JDBC source names it: after the table.
        let value_schema = columns::struct_schema(&value_fields, Some(&name.table));
        let key_fields: Vec<String> = key.iter().map(|i| field(&columns[*i])).collect();
        let key_schema = columns::struct_schema(&key_fields, None);
        let payload_fields = |indexes: &mut dyn Iterator<Item = usize>| -> Vec<(usize, String)> {
            indexes
                .map(|i| {
                    let mut name = String::new();
                    columns::json_string_into(&columns[i].name, &mut name);
                    name.push(':');
                    (i, name)
                })
                .collect()
        };
        let value_fields = payload_fields(&mut (0..columns.len()));
        let key_fields = payload_fields(&mut key.iter().copied());
        Ok(TableReader {
            topic: format!("{}{}", settings.topic_prefix, name.table),
            partition_text: partition.to_string(),
            partition,
            name,
            columns,
            value_schema,
            key_schema,
            key,
            value_fields,
            key_fields,
            id_column,
            ts_columns,
            position: Position::default(),
            pending: VecDeque::new(),
            bulk_after: None,
            next_query: Instant::now(),
        })
    }

    /// The SQL expression of the row's timestamp: the first timestamp column that is not null.
    fn ts_expression(&self) -> String {
        let quoted: Vec<String> = self
            .ts_columns
            .iter()
            .map(|i| quote_ident(&self.columns[*i].name))
            .collect();
        if quoted.len() == 1 {
            quoted[0].clone()
        } else {
            format!("COALESCE({})", quoted.join(", "))
        }
    }

    fn select_list(&self) -> String {
        self.columns
            .iter()
            .map(|c| quote_ident(&c.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Query the next rows into `pending`; returns whether the query came back full.
    fn query(
        &mut self,
        client: &mut Client,
        settings: &Settings,
    ) -> std::result::Result<bool, DbError> {
        let limit = settings.batch_max_rows;
        let table = self.name.quoted();
        let columns = self.select_list();
        let delay = format!("{} milliseconds", settings.timestamp_delay.as_millis());
        let ts = self.ts_expression();
        let id = self
            .id_column
            .map(|i| quote_ident(&self.columns[i].name))
            .unwrap_or_default();
        let last_ts = self.position.micros.map(values::format_timestamp_micros);
        let last_id = self.position.id.map(|i| i.to_string());
        let result: QueryResult = match settings.mode {
            Mode::Bulk => {
                let after = self
                    .bulk_after
                    .clone()
                    .unwrap_or_else(|| "(0,0)".to_owned());
                let mut result = client.query(
                    &format!(
                        "SELECT ctid::text, {columns} FROM {table} WHERE ctid > $1::tid ORDER BY ctid LIMIT {limit}"
                    ),
                    &[Some(&after)],
                )?;
                // The first column is the row's ctid: where the next query of this pass starts.
                self.bulk_after = result
                    .rows
                    .last()
                    .and_then(|r| r.first().cloned().flatten());
                for row in &mut result.rows {
                    row.remove(0);
                }
                result
            }
            Mode::Incrementing => match &last_id {
                Some(last) => client.query(
                    &format!(
                        "SELECT {columns} FROM {table} WHERE {id} > $1 ORDER BY {id} LIMIT {limit}"
                    ),
                    &[Some(last)],
                )?,
                None => client.query(
                    &format!("SELECT {columns} FROM {table} ORDER BY {id} LIMIT {limit}"),
                    &[],
                )?,
            },
            Mode::Timestamp => {
                let bound = format!("{ts} < CURRENT_TIMESTAMP - $1::interval");
                let result = match &last_ts {
                    Some(last) => client.query(
                        &format!("SELECT {columns} FROM {table} WHERE {ts} > $2 AND {bound} ORDER BY {ts} LIMIT {limit}"),
                        &[Some(&delay), Some(last)],
                    )?,
                    None => client.query(
                        &format!("SELECT {columns} FROM {table} WHERE {bound} ORDER BY {ts} LIMIT {limit}"),
                        &[Some(&delay)],
                    )?,
                };
                self.whole_timestamps(client, result, &columns, &table, &ts, limit)?
            }
            Mode::TimestampIncrementing => {
                let bound = format!("{ts} < CURRENT_TIMESTAMP - $1::interval");
                match (&last_ts, &last_id) {
                    (Some(last), Some(last_id)) => client.query(
                        &format!(
                            "SELECT {columns} FROM {table} WHERE ({ts} > $2 OR ({ts} = $2 AND {id} > $3)) AND {bound} ORDER BY {ts}, {id} LIMIT {limit}"
                        ),
                        &[Some(&delay), Some(last), Some(last_id)],
                    )?,
                    _ => client.query(
                        &format!("SELECT {columns} FROM {table} WHERE {bound} ORDER BY {ts}, {id} LIMIT {limit}"),
                        &[Some(&delay)],
                    )?,
                }
            }
        };
        let full = result.rows.len() as u64 >= u64::from(limit);
        if settings.mode == Mode::Bulk && !full {
            // The pass is complete: the next one starts from the beginning after the interval.
            self.bulk_after = None;
        }
        let mut position = self.position;
        for row in result.rows {
            if let Some(i) = self.id_column {
                position.id = row[i]
                    .as_deref()
                    .and_then(|v| v.parse().ok())
                    .or(position.id);
            }
            if let Some(micros) = self.row_micros(&row) {
                position.micros = Some(micros);
            }
            self.pending.push_back((row, position));
        }
        if settings.mode == Mode::Bulk && !full {
            position.pass += 1;
            if let Some(last) = self.pending.back_mut() {
                last.1 = position;
            }
        }
        self.position = position;
        Ok(full)
    }

    /// Timestamp mode without an id cannot tell apart rows that share a timestamp: a full
    /// batch must not end in the middle of such a group. Its trailing rows sharing the last
    /// timestamp are dropped (the next query reads them again), or, when the whole batch shares
    /// one timestamp, every row with that timestamp is read.
    fn whole_timestamps(
        &self,
        client: &mut Client,
        mut result: QueryResult,
        columns: &str,
        table: &str,
        ts: &str,
        limit: u32,
    ) -> std::result::Result<QueryResult, DbError> {
        if (result.rows.len() as u64) < u64::from(limit) {
            return Ok(result);
        }
        let last = result.rows.last().and_then(|r| self.row_micros(r));
        let first = result.rows.first().and_then(|r| self.row_micros(r));
        if first == last {
            let Some(micros) = last else {
                return Ok(result);
            };
            return client.query(
                &format!("SELECT {columns} FROM {table} WHERE {ts} = $1"),
                &[Some(&values::format_timestamp_micros(micros))],
            );
        }
        while result.rows.last().and_then(|r| self.row_micros(r)) == last {
            result.rows.pop();
        }
        Ok(result)
    }

    fn row_micros(&self, row: &[Option<String>]) -> Option<i64> {
        self.ts_columns
            .iter()
            .find_map(|i| row[*i].as_deref())
            .and_then(values::parse_timestamp_micros)
    }

    /// Add the record of a row to `batch`, its texts made in `texts`.
    fn push_record(
        &self,
        row: &[Option<String>],
        position: &Position,
        mode: Mode,
        texts: &mut Texts,
        batch: &mut SourceBatch,
    ) -> Result<()> {
        let object = |fields: &[(usize, String)], out: &mut String| -> Result<()> {
            out.clear();
            out.push('{');
            for (n, (i, name)) in fields.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(name);
                match &row[*i] {
                    None => out.push_str("null"),
                    Some(text) => self.columns[*i]
                        .kind
                        .write_payload(text, out)
                        .map_err(|e| {
                            Error::fatal(format!(
                                "table {}, column {}: {e}",
                                self.name.dotted(),
                                self.columns[*i].name
                            ))
                        })?,
                }
            }
            out.push('}');
            Ok(())
        };
        object(&self.value_fields, &mut texts.value)?;
        position.write_offset(mode, &mut texts.offset);
        let mut record = SourceRecordRef::new(
            &self.partition_text,
            &texts.offset,
            DataRef::Json(&texts.value),
        )
        .with_topic(&self.topic)
        .with_value_schema(&self.value_schema);
        if !self.key.is_empty() {
            object(&self.key_fields, &mut texts.key)?;
            record = record
                .with_key(DataRef::Json(&texts.key))
                .with_key_schema(&self.key_schema);
        }
        batch.push_ref(record)
    }
}

/// The texts of the record being made, kept from record to record so that their buffers are
/// reused.
#[derive(Default)]
struct Texts {
    value: String,
    key: String,
    offset: String,
}

/// One task: reads its tables in turn.
pub struct PostgresSourceTask {
    settings: Settings,
    client: Option<Client>,
    tables: Vec<TableReader>,
    /// The table the next poll starts with (so that every table gets its turn).
    turn: usize,
    texts: Texts,
}

impl SourceTask for PostgresSourceTask {
    fn create(config: Config) -> Result<Self> {
        let settings = Settings::from_config(&config).map_err(Error::InvalidConfig)?;
        let names: Vec<String> = serde_json::from_str(config.get(TASK_TABLES).unwrap_or("[]"))
            .map_err(|e| {
                Error::fatal(format!("{TASK_TABLES} is not a JSON list of tables: {e}"))
            })?;
        let mut client = connect(&settings)?;
        let mut tables = Vec::new();
        for name in names {
            let (schema, table) = name.split_once('.').ok_or_else(|| {
                Error::fatal(format!("{TASK_TABLES}: {name:?} is not schema.table"))
            })?;
            let name = TableName {
                schema: schema.to_owned(),
                table: table.to_owned(),
            };
            tables.push(TableReader::describe(&mut client, &settings, name).map_err(Error::from)?);
        }
        let partitions: Vec<Value> = tables.iter().map(|t| t.partition.clone()).collect();
        for (table, offset) in tables.iter_mut().zip(read_offsets(&partitions)) {
            if let Some(offset) = offset {
                table.position = Position::from_offset(&offset);
                if settings.mode == Mode::Bulk {
                    // A bulk pass in progress is not resumed: the next pass starts now.
                    table.position.pass += 1;
                }
            }
        }
        Ok(Self {
            settings,
            client: Some(client),
            tables,
            turn: 0,
            texts: Texts::default(),
        })
    }

    fn poll_into(&mut self, max_records: u32, batch: &mut SourceBatch) -> Result<()> {
        let mut records = 0;
        let count = self.tables.len();
        for step in 0..count {
            if records >= max_records {
                break;
            }
            let i = (self.turn + step) % count;
            if self.tables[i].pending.is_empty() && Instant::now() >= self.tables[i].next_query {
                let settings = &self.settings;
                let client = ensure(&mut self.client, settings)?;
                let table = &mut self.tables[i];
                let outcome = table.query(client, settings);
                match outcome {
                    Ok(full) => {
                        table.next_query = if full {
                            Instant::now()
                        } else {
                            Instant::now() + settings.poll_interval
                        };
                    }
                    Err(e) if e.sqlstate() == Some("42P01") => {
                        // Dropped: the connector's monitor will split without it.
                        log::warn(&format!(
                            "table {} is gone ({e}); skipping it until the connector splits the tables again",
                            table.name.dotted()
                        ));
                        table.next_query = Instant::now() + settings.table_poll_interval;
                    }
                    Err(e) => {
                        if matches!(e, DbError::Io(_) | DbError::Protocol(_)) {
                            self.client = None;
                        }
                        return Err(db_error(
                            &format!("cannot read table {}", table.name.dotted()),
                            &e,
                        ));
                    }
                }
            }
            let mode = self.settings.mode;
            let table = &mut self.tables[i];
            while records < max_records {
                let Some((row, position)) = table.pending.pop_front() else {
                    break;
                };
                table.push_record(&row, &position, mode, &mut self.texts, batch)?;
                records += 1;
            }
        }
        self.turn = (self.turn + 1) % count.max(1);
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(client) = self.client.take() {
            client.close();
        }
    }
}

export_source_connector!(PostgresSource);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_tables_over_three_tasks_split_two_two_one() {
        let tables = ["users", "orders", "products", "inventory", "audit_log"];
        let sizes: Vec<usize> = split_evenly(&tables, 3).iter().map(|g| g.len()).collect();
        assert_eq!(sizes, vec![2, 2, 1]);
        assert_eq!(split_evenly(&tables[..3], 10).len(), 3);
        assert!(split_evenly::<&str>(&[], 3).is_empty());
    }

    #[test]
    fn written_offsets_are_the_offsets_text() {
        let positions = [
            Position::default(),
            Position {
                id: Some(-3),
                micros: Some(-1_500),
                pass: 7,
            },
            Position {
                id: Some(i64::MAX),
                micros: Some(1_765_000_000_123_456),
                pass: 0,
            },
        ];
        let mut out = String::new();
        for position in positions {
            for mode in [
                Mode::Bulk,
                Mode::Incrementing,
                Mode::Timestamp,
                Mode::TimestampIncrementing,
            ] {
                position.write_offset(mode, &mut out);
                assert_eq!(
                    out,
                    position.offset(mode).to_string(),
                    "{position:?} {mode:?}"
                );
            }
        }
    }

    #[test]
    fn offsets_have_kafka_connect_s_form_and_read_back() {
        let position = Position {
            id: Some(42),
            micros: Some(1_709_251_199_123_456),
            pass: 0,
        };
        let offset = position.offset(Mode::TimestampIncrementing);
        assert_eq!(
            offset,
            json!({"timestamp": 1_709_251_199_123i64, "timestamp_nanos": 123_456_000, "incrementing": 42})
        );
        assert_eq!(Position::from_offset(&offset), position);
        assert_eq!(
            position.offset(Mode::Incrementing),
            json!({"incrementing": 42})
        );
    }
}
