//! `postgres-sink`: writes records into PostgreSQL tables, as Kafka Connect's JDBC sink
//! connector does, over a socket the operator grants (`sandbox.net.connect`).
//!
//! Each record becomes a row of the table `table.name.format` names for its topic. Its columns
//! are the fields of the value's Kafka Connect schema (the worker's `json` converter with
//! `schemas.enable=true` hands the plugin each envelope's schema, contract 0.4.0) and, by
//! `pk.mode`, the key's fields or the record's Kafka coordinates. `insert.mode` writes rows
//! with `INSERT`, `INSERT ... ON CONFLICT DO UPDATE` (upsert) or `UPDATE`; with
//! `delete.enabled` a tombstone deletes its key's row. `auto.create` creates a missing table
//! and `auto.evolve` adds missing columns, from the schema ([`schema`]).
//!
//! A `put` is one transaction: tables are created or evolved first (each in its own
//! transaction, so a retry finds them), then the rows are written in statements of up to
//! `batch.size` rows, each under a savepoint. When a statement fails for its data (a
//! constraint, a value of the wrong type), its rows are written again one by one, each under
//! its own savepoint: the rows that fail are reported as failed records (so
//! `errors.tolerance=all` sends exactly those to the dead-letter queue) and the others are
//! written. A connection error rolls the transaction back and asks the worker to deliver the
//! batch again (retriable); with `insert.mode=upsert` a batch written twice changes nothing.
//! The default `flush` is right: a batch is committed before `put` returns.

pub mod schema;
mod settings;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use wasm_connect_postgres_wire::connector::{connect, db_error, validate_login};
use wasm_connect_postgres_wire::{Client, Error as DbError, Statement, quote_ident};
use wasm_connect_sdk::serde_json::{self, Value};
use wasm_connect_sdk::{
    Config, ConfigError, Connector, Error, RecordFailure, Result, SinkConnector, SinkRecordRef,
    SinkRecords, SinkTask, Spec, export_sink_connector,
};

use schema::{Field, FieldType, Shape};
pub use settings::{InsertMode, PkMode, Settings};

/// PostgreSQL accepts at most this many parameters in one statement.
const MAX_PARAMS: usize = 65_535;

/// The connector: checks its config and the login; every task writes whatever it is given.
pub struct PostgresSink;

impl Connector for PostgresSink {
    fn spec() -> Spec {
        settings::spec()
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        let settings = match Settings::from_config(config) {
            Ok(s) => s,
            Err(errors) => return errors,
        };
        // Log in now, so a wrong URL, password or grant is reported at creation.
        match validate_login(&settings.login) {
            Ok(client) => {
                client.close();
                Vec::new()
            }
            Err(e) => vec![e],
        }
    }

    fn create(config: &Config) -> Result<Self> {
        Settings::from_config(config).map_err(Error::InvalidConfig)?;
        Ok(PostgresSink)
    }

    fn task_configs(&mut self, config: &Config, max_tasks: u32) -> Result<Vec<Config>> {
        // Every task writes the partitions the worker assigns it: the same config for each.
        Ok(vec![config.clone(); max_tasks.max(1) as usize])
    }
}

impl SinkConnector for PostgresSink {
    type Task = PostgresSinkTask;
}

/// A table, as `schema.table` (schema optional) quoted for SQL.
fn qualified(schema: &Option<String>, table: &str) -> String {
    match schema {
        Some(schema) => format!("{}.{}", quote_ident(schema), quote_ident(table)),
        None => quote_ident(table),
    }
}

/// Where a column's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// A field of the key struct.
    KeyField(String),
    /// The whole (primitive) key.
    Key,
    /// A field of the value struct.
    ValueField(String),
    /// The record's topic, partition or offset.
    Topic,
    Partition,
    Offset,
}

#[derive(Debug, Clone)]
struct Column {
    name: String,
    ty: FieldType,
    optional: bool,
    source: Source,
}

/// How the records of one topic with one pair of schemas become rows.
#[derive(Debug)]
struct Layout {
    /// The table, quoted.
    table: String,
    columns: Vec<Column>,
    /// Indexes in `columns` of the primary key's columns.
    pk: Vec<usize>,
}

/// What a layout is made from: the topic, the key's schema and the value's schema.
type LayoutKey = (String, Option<String>, Option<String>);

/// What one record asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Delete,
}

/// One record's row, ready to write.
struct Row {
    /// The record's index in the batch.
    index: u32,
    layout: Rc<Layout>,
    op: Op,
    values: Vec<Option<String>>,
}

/// The layout of the previous record of the current `put`, by where its schemas' text lies in
/// the batch: the host writes a schema equal to the record before's as the same span, so a run
/// of records with one schema finds its layout without comparing the schemas' text. Valid only
/// within one `put` (the batch's bytes do not move while it runs; the next batch may put other
/// text at the same addresses), so `put` clears it at its start.
struct LastLayout {
    topic: String,
    key: Option<(usize, usize)>,
    value: Option<(usize, usize)>,
    layout: Rc<Layout>,
}

/// Where a text lies: its address and length.
fn address(text: Option<&str>) -> Option<(usize, usize)> {
    text.map(|t| (t.as_ptr() as usize, t.len()))
}

/// One task: writes each batch in one transaction.
pub struct PostgresSinkTask {
    settings: Settings,
    client: Option<Client>,
    /// Layouts by (topic, key schema, value schema).
    layouts: Vec<(LayoutKey, Rc<Layout>)>,
    /// The layout of the previous record of this `put`.
    last: Option<LastLayout>,
    /// The columns of the tables this task has seen (by quoted name).
    tables: HashMap<String, HashSet<String>>,
}

impl SinkTask for PostgresSinkTask {
    fn create(config: Config) -> Result<Self> {
        let settings = Settings::from_config(&config).map_err(Error::InvalidConfig)?;
        let mut task = PostgresSinkTask {
            settings,
            client: None,
            layouts: Vec::new(),
            last: None,
            tables: HashMap::new(),
        };
        task.client()?;
        Ok(task)
    }

    fn put(&mut self, records: &SinkRecords) -> Result<Vec<RecordFailure>> {
        let mut failures = Vec::new();
        let mut rows = Vec::with_capacity(records.len());
        self.last = None;
        for record in records {
            match self.row(&record) {
                Ok(Some(row)) => rows.push(row),
                Ok(None) => {}
                Err(RowError::Record(message)) => failures.push(RecordFailure {
                    index: record.index(),
                    message,
                }),
                Err(RowError::Task(e)) => return Err(e),
            }
        }
        self.last = None;
        if rows.is_empty() {
            return Ok(failures);
        }
        let result = self.write(&rows, &mut failures);
        if result.is_err()
            && let Some(client) = self.client.as_mut()
            && client.in_transaction()
        {
            let _ = client.simple_query("ROLLBACK");
        }
        result?;
        failures.sort_by_key(|f| f.index);
        Ok(failures)
    }

    fn stop(&mut self) {
        if let Some(client) = self.client.take() {
            client.close();
        }
    }
}

/// Why a record has no row.
enum RowError {
    /// This record cannot be written (reported as a failed record).
    Record(String),
    /// The task cannot go on (a missing table or column, the database unreachable).
    Task(Error),
}

impl From<Error> for RowError {
    fn from(e: Error) -> Self {
        RowError::Task(e)
    }
}

impl PostgresSinkTask {
    /// The open connection, in a UTC session (so timestamps are read as the UTC they are).
    fn client(&mut self) -> Result<&mut Client> {
        if self.client.as_ref().is_none_or(Client::is_broken) {
            let mut client = connect(&self.settings.login)?;
            client
                .simple_query("SET TIME ZONE 'UTC'")
                .map_err(|e| db_error("cannot set the session's time zone", &e))?;
            self.client = Some(client);
        }
        self.client
            .as_mut()
            .ok_or_else(|| Error::retriable("no connection to the database"))
    }

    /// The row of `record`; `None` for a tombstone that is not to delete anything.
    fn row(&mut self, record: &SinkRecordRef<'_>) -> std::result::Result<Option<Row>, RowError> {
        let record_error = |m: String| RowError::Record(m);
        let Some(value) = record.value() else {
            if !self.settings.delete_enabled {
                return Ok(None);
            }
            let layout = self.layout(record.topic(), record.key_schema(), None)?;
            let key =
                parse_json(record.key().map(|k| k.as_bytes()), "key").map_err(record_error)?;
            let values = layout
                .pk
                .iter()
                .map(|&i| column_value(&layout.columns[i], record, &key, &Value::Null))
                .collect::<std::result::Result<Vec<_>, String>>()
                .map_err(record_error)?;
            return Ok(Some(Row {
                index: record.index(),
                layout,
                op: Op::Delete,
                values,
            }));
        };
        let Some(value_schema) = record.value_schema() else {
            return Err(record_error(
                "the record has no value schema: postgres-sink needs Kafka Connect schemas (value.converter=org.apache.kafka.connect.json.JsonConverter with value.converter.schemas.enable=true, and records written with schemas)".to_owned(),
            ));
        };
        let layout = self.layout(record.topic(), record.key_schema(), Some(value_schema))?;
        let value = parse_json(Some(value.as_bytes()), "value").map_err(record_error)?;
        let key = parse_json(record.key().map(|k| k.as_bytes()), "key").map_err(record_error)?;
        let values = layout
            .columns
            .iter()
            .map(|c| column_value(c, record, &key, &value))
            .collect::<std::result::Result<Vec<_>, String>>()
            .map_err(record_error)?;
        Ok(Some(Row {
            index: record.index(),
            layout,
            op: Op::Write,
            values,
        }))
    }

    /// The layout of a record of `topic` with these schemas, made (and its table made ready)
    /// the first time.
    fn layout(
        &mut self,
        topic: &str,
        key_schema: Option<&str>,
        value_schema: Option<&str>,
    ) -> std::result::Result<Rc<Layout>, RowError> {
        let (key, value) = (address(key_schema), address(value_schema));
        if let Some(last) = &self.last
            && last.key == key
            && last.value == value
            && last.topic == topic
        {
            return Ok(last.layout.clone());
        }
        let layout = self.find_layout(topic, key_schema, value_schema)?;
        self.last = Some(LastLayout {
            topic: topic.to_owned(),
            key,
            value,
            layout: layout.clone(),
        });
        Ok(layout)
    }

    /// The layout of a record of `topic` with these schemas, from those seen before or made.
    fn find_layout(
        &mut self,
        topic: &str,
        key_schema: Option<&str>,
        value_schema: Option<&str>,
    ) -> std::result::Result<Rc<Layout>, RowError> {
        let found = self.layouts.iter().find(|((t, k, v), _)| {
            t == topic && k.as_deref() == key_schema && v.as_deref() == value_schema
        });
        if let Some((_, layout)) = found {
            return Ok(layout.clone());
        }
        let layout = Rc::new(self.new_layout(topic, key_schema, value_schema)?);
        if value_schema.is_some() {
            self.prepare_table(&layout)?;
        }
        // Schemas change rarely; a task that sees many keeps the recent ones.
        if self.layouts.len() >= 64 {
            self.layouts.remove(0);
        }
        self.layouts.push((
            (
                topic.to_owned(),
                key_schema.map(str::to_owned),
                value_schema.map(str::to_owned),
            ),
            layout.clone(),
        ));
        Ok(layout)
    }

    fn new_layout(
        &self,
        topic: &str,
        key_schema: Option<&str>,
        value_schema: Option<&str>,
    ) -> std::result::Result<Layout, RowError> {
        let record_error = |m: String| RowError::Record(m);
        let s = &self.settings;
        let (schema, table) = s.table(topic);
        let mut columns = Vec::new();
        let mut pk = Vec::new();
        match s.pk_mode {
            PkMode::None | PkMode::RecordValue => {}
            PkMode::Kafka => {
                let names = if s.pk_fields.len() == 3 {
                    s.pk_fields.clone()
                } else {
                    ["__connect_topic", "__connect_partition", "__connect_offset"]
                        .map(str::to_owned)
                        .to_vec()
                };
                let types = [FieldType::String, FieldType::Int32, FieldType::Int64];
                let sources = [Source::Topic, Source::Partition, Source::Offset];
                for ((name, ty), source) in names.into_iter().zip(types).zip(sources) {
                    pk.push(columns.len());
                    columns.push(Column {
                        name,
                        ty,
                        optional: false,
                        source,
                    });
                }
            }
            PkMode::RecordKey => {
                let key_schema = key_schema.ok_or_else(|| {
                    record_error("pk.mode=record_key, but the record's key has no schema (key.converter=org.apache.kafka.connect.json.JsonConverter with key.converter.schemas.enable=true)".to_owned())
                })?;
                match schema::parse(key_schema).map_err(record_error)? {
                    Shape::Struct(fields) => {
                        for field in fields {
                            if s.pk_fields.is_empty() || s.pk_fields.contains(&field.name) {
                                pk.push(columns.len());
                                columns.push(column(field.clone(), Source::KeyField(field.name)));
                            }
                        }
                        if pk.is_empty() {
                            return Err(record_error(format!(
                                "none of pk.fields {:?} is a field of the record's key",
                                s.pk_fields
                            )));
                        }
                    }
                    Shape::Primitive(ty, _) => {
                        let [name] = s.pk_fields.as_slice() else {
                            return Err(record_error("the record's key is a primitive value: name its column with exactly one entry in pk.fields".to_owned()));
                        };
                        pk.push(0);
                        columns.push(Column {
                            name: name.clone(),
                            ty,
                            optional: false,
                            source: Source::Key,
                        });
                    }
                }
            }
        }
        if let Some(value_schema) = value_schema {
            let Shape::Struct(fields) = schema::parse(value_schema).map_err(record_error)? else {
                return Err(record_error(
                    "the record's value is not a struct: postgres-sink writes the fields of a struct as columns".to_owned(),
                ));
            };
            for field in fields {
                // A field the key already gave (the id in both) is the key's.
                if columns.iter().any(|c| c.name == field.name) {
                    continue;
                }
                if s.pk_mode == PkMode::RecordValue
                    && (s.pk_fields.is_empty() || s.pk_fields.contains(&field.name))
                {
                    pk.push(columns.len());
                }
                columns.push(column(field.clone(), Source::ValueField(field.name)));
            }
            if s.pk_mode == PkMode::RecordValue
                && let Some(missing) = s
                    .pk_fields
                    .iter()
                    .find(|f| !columns.iter().any(|c| c.name == **f))
            {
                return Err(record_error(format!(
                    "pk.fields names {missing:?}, which is not a field of the record's value"
                )));
            }
        }
        Ok(Layout {
            table: qualified(&schema, &table),
            columns,
            pk,
        })
    }

    /// Make the layout's table exist with every column (creating or evolving it as allowed),
    /// each change in a transaction of its own.
    fn prepare_table(&mut self, layout: &Layout) -> Result<()> {
        let (auto_create, auto_evolve) = (self.settings.auto_create, self.settings.auto_evolve);
        if !self.tables.contains_key(&layout.table) {
            let existing = self.table_columns(&layout.table)?;
            let existing = match existing {
                Some(columns) => columns,
                None if auto_create => {
                    let mut defs: Vec<String> = layout
                        .columns
                        .iter()
                        .map(|c| {
                            let not_null = if c.optional { "" } else { " NOT NULL" };
                            format!("{} {}{not_null}", quote_ident(&c.name), c.ty.sql_type())
                        })
                        .collect();
                    if !layout.pk.is_empty() {
                        let pk: Vec<String> = layout
                            .pk
                            .iter()
                            .map(|&i| quote_ident(&layout.columns[i].name))
                            .collect();
                        defs.push(format!("PRIMARY KEY ({})", pk.join(", ")));
                    }
                    let sql = format!(
                        "CREATE TABLE IF NOT EXISTS {} ({})",
                        layout.table,
                        defs.join(", ")
                    );
                    self.client()?.simple_query(&sql).map_err(|e| {
                        db_error(&format!("cannot create table {}", layout.table), &e)
                    })?;
                    self.table_columns(&layout.table)?.unwrap_or_default()
                }
                None => {
                    return Err(Error::fatal(format!(
                        "table {} does not exist; create it, or set auto.create=true",
                        layout.table
                    )));
                }
            };
            self.tables.insert(layout.table.clone(), existing);
        }
        let missing: Vec<&Column> = layout
            .columns
            .iter()
            .filter(|c| !self.tables[&layout.table].contains(&c.name))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = missing.iter().map(|c| c.name.as_str()).collect();
        if !auto_evolve {
            return Err(Error::fatal(format!(
                "table {} has no column {} for fields of the records; add them, or set auto.evolve=true",
                layout.table,
                names.join(", ")
            )));
        }
        let adds: Vec<String> = missing
            .iter()
            .map(|c| {
                format!(
                    "ADD COLUMN IF NOT EXISTS {} {}",
                    quote_ident(&c.name),
                    c.ty.sql_type()
                )
            })
            .collect();
        let sql = format!("ALTER TABLE {} {}", layout.table, adds.join(", "));
        self.client()?
            .simple_query(&sql)
            .map_err(|e| db_error(&format!("cannot add columns to {}", layout.table), &e))?;
        let table = layout.table.clone();
        let added: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        if let Some(columns) = self.tables.get_mut(&table) {
            columns.extend(added);
        }
        Ok(())
    }

    /// The columns of `table`, or `None` when it does not exist.
    fn table_columns(&mut self, table: &str) -> Result<Option<HashSet<String>>> {
        let client = self.client()?;
        let exists = client
            .query("SELECT to_regclass($1) IS NOT NULL", &[Some(table)])
            .map_err(|e| db_error(&format!("cannot look up table {table}"), &e))?;
        if exists
            .rows
            .first()
            .and_then(|r| r.first())
            .cloned()
            .flatten()
            .as_deref()
            != Some("t")
        {
            return Ok(None);
        }
        let columns = client
            .query(
                "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped",
                &[Some(table)],
            )
            .map_err(|e| db_error(&format!("cannot read the columns of {table}"), &e))?;
        Ok(Some(
            columns
                .rows
                .into_iter()
                .filter_map(|r| r.into_iter().next().flatten())
                .collect(),
        ))
    }

    /// Write `rows` in one transaction; records that fail for their data go to `failures`.
    fn write(&mut self, rows: &[Row], failures: &mut Vec<RecordFailure>) -> Result<()> {
        let batch_size = self.settings.batch_size;
        let mode = self.settings.insert_mode;
        let client = self.client()?;
        client
            .simple_query("BEGIN")
            .map_err(|e| db_error("cannot begin a transaction", &e))?;
        let mut start = 0;
        while start < rows.len() {
            let end = group_end(rows, start, batch_size, mode);
            write_group(client, &rows[start..end], mode, failures)?;
            start = end;
        }
        client
            .simple_query("COMMIT")
            .map_err(|e| db_error("cannot commit", &e))?;
        Ok(())
    }
}

fn column(field: Field, source: Source) -> Column {
    Column {
        name: field.name,
        ty: field.ty,
        optional: field.optional,
        source,
    }
}

fn parse_json(bytes: Option<&[u8]>, what: &str) -> std::result::Result<Value, String> {
    match bytes {
        None => Ok(Value::Null),
        Some(bytes) => serde_json::from_slice(bytes)
            .or_else(|_| {
                // A text key or value (the converter made a string of it).
                std::str::from_utf8(bytes).map(|s| Value::String(s.to_owned()))
            })
            .map_err(|e| format!("the record's {what} is neither JSON nor text ({e})")),
    }
}

/// The parameter text of `column` for `record`.
fn column_value(
    column: &Column,
    record: &SinkRecordRef<'_>,
    key: &Value,
    value: &Value,
) -> std::result::Result<Option<String>, String> {
    let field = |object: &Value, name: &str| object.get(name).cloned().unwrap_or(Value::Null);
    let payload = match &column.source {
        Source::Topic => return Ok(Some(record.topic().to_owned())),
        Source::Partition => return Ok(Some(record.partition().to_string())),
        Source::Offset => return Ok(Some(record.offset().to_string())),
        Source::Key => key.clone(),
        Source::KeyField(name) => field(key, name),
        Source::ValueField(name) => field(value, name),
    };
    column
        .ty
        .param(&payload)
        .map_err(|e| format!("column {}: {e}", column.name))
}

/// Where the statement that starts with `rows[start]` ends: rows of the same layout and
/// operation, at most `batch_size` and `MAX_PARAMS` values, and (upserts) no key twice, which
/// one `INSERT ... ON CONFLICT` cannot take.
fn group_end(rows: &[Row], start: usize, batch_size: usize, mode: InsertMode) -> usize {
    let first = &rows[start];
    let per_row = first.values.len().max(1);
    let limit = batch_size.min(MAX_PARAMS / per_row).max(1);
    let mut keys = HashSet::new();
    let mut end = start;
    while end < rows.len() && end - start < limit {
        let row = &rows[end];
        if !Rc::ptr_eq(&row.layout, &first.layout) || row.op != first.op {
            break;
        }
        if mode == InsertMode::Upsert && row.op == Op::Write {
            let key: Vec<&Option<String>> = row.layout.pk.iter().map(|&i| &row.values[i]).collect();
            if !keys.insert(key) {
                break;
            }
        }
        end += 1;
    }
    end
}

/// The statements that write `rows` (one layout, one operation): one multi-row `INSERT` for
/// inserts and upserts, one statement per row for updates and deletes (pipelined).
fn statements(rows: &[Row], mode: InsertMode) -> Vec<(String, Vec<Option<&str>>)> {
    let layout = &rows[0].layout;
    let names: Vec<String> = layout
        .columns
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect();
    let pk: Vec<&String> = layout.pk.iter().map(|&i| &names[i]).collect();
    let where_pk = |offset: usize| -> String {
        pk.iter()
            .enumerate()
            .map(|(j, c)| format!("{c} = ${}", offset + j + 1))
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    match (rows[0].op, mode) {
        (Op::Delete, _) => rows
            .iter()
            .map(|r| {
                let sql = format!("DELETE FROM {} WHERE {}", layout.table, where_pk(0));
                (sql, r.values.iter().map(Option::as_deref).collect())
            })
            .collect(),
        (Op::Write, InsertMode::Update) => {
            let others: Vec<usize> = (0..names.len())
                .filter(|i| !layout.pk.contains(i))
                .collect();
            if others.is_empty() {
                return Vec::new();
            }
            let set: Vec<String> = others
                .iter()
                .enumerate()
                .map(|(j, &i)| format!("{} = ${}", names[i], j + 1))
                .collect();
            let sql = format!(
                "UPDATE {} SET {} WHERE {}",
                layout.table,
                set.join(", "),
                where_pk(others.len())
            );
            rows.iter()
                .map(|r| {
                    let params = others
                        .iter()
                        .chain(&layout.pk)
                        .map(|&i| r.values[i].as_deref())
                        .collect();
                    (sql.clone(), params)
                })
                .collect()
        }
        (Op::Write, _) => {
            let width = names.len();
            let tuples: Vec<String> = (0..rows.len())
                .map(|r| {
                    let params: Vec<String> =
                        (1..=width).map(|c| format!("${}", r * width + c)).collect();
                    format!("({})", params.join(", "))
                })
                .collect();
            let mut sql = format!(
                "INSERT INTO {} ({}) VALUES {}",
                layout.table,
                names.join(", "),
                tuples.join(", ")
            );
            if mode == InsertMode::Upsert {
                let updates: Vec<String> = (0..width)
                    .filter(|i| !layout.pk.contains(i))
                    .map(|i| format!("{0} = EXCLUDED.{0}", names[i]))
                    .collect();
                let pk_list: Vec<&str> = pk.iter().map(|s| s.as_str()).collect();
                if updates.is_empty() {
                    sql.push_str(&format!(" ON CONFLICT ({}) DO NOTHING", pk_list.join(", ")));
                } else {
                    sql.push_str(&format!(
                        " ON CONFLICT ({}) DO UPDATE SET {}",
                        pk_list.join(", "),
                        updates.join(", ")
                    ));
                }
            }
            let params = rows
                .iter()
                .flat_map(|r| r.values.iter().map(Option::as_deref))
                .collect();
            vec![(sql, params)]
        }
    }
}

/// Run `statements` between `SAVEPOINT name` and its release, in one round trip: `Ok(None)`
/// when all succeeded, `Ok(Some(error))` when one failed for its data (the savepoint is rolled
/// back), `Err` when the connection or transaction cannot go on.
fn under_savepoint(
    client: &mut Client,
    name: &str,
    statements: &[(String, Vec<Option<&str>>)],
) -> Result<Option<String>> {
    let savepoint = format!("SAVEPOINT {name}");
    let release = format!("RELEASE SAVEPOINT {name}");
    let mut pipeline = vec![Statement {
        sql: &savepoint,
        params: &[],
    }];
    for (sql, params) in statements {
        pipeline.push(Statement { sql, params });
    }
    pipeline.push(Statement {
        sql: &release,
        params: &[],
    });
    let results = client
        .pipeline(&pipeline)
        .map_err(|e| db_error("cannot write the records", &e))?;
    let Some(failed) = results.into_iter().find_map(|r| r.err()) else {
        return Ok(None);
    };
    let failed = DbError::Db(Box::new(failed));
    if failed.is_transient() {
        return Err(db_error("cannot write the records", &failed));
    }
    client
        .simple_query(&format!("ROLLBACK TO SAVEPOINT {name}"))
        .map_err(|e| db_error("cannot roll back a failed statement", &e))?;
    Ok(Some(failed.to_string()))
}

/// Write one group; when it fails for its data, write its rows one by one and report those
/// that fail.
fn write_group(
    client: &mut Client,
    rows: &[Row],
    mode: InsertMode,
    failures: &mut Vec<RecordFailure>,
) -> Result<()> {
    let all = statements(rows, mode);
    if all.is_empty() || under_savepoint(client, "batch", &all)?.is_none() {
        return Ok(());
    }
    for row in rows {
        let one = statements(std::slice::from_ref(row), mode);
        if let Some(message) = under_savepoint(client, "record", &one)? {
            failures.push(RecordFailure {
                index: row.index,
                message: format!("{}: {message}", row.layout.table),
            });
        }
    }
    Ok(())
}

export_sink_connector!(PostgresSink);
