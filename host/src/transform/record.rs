//! The record a transform chain works on: Connect's `ConnectRecord` fields, with the key and
//! value kept as they came (borrowed from the polled batch or the converter's output) until a
//! transform asks for their structure, and written back only if one changed them. A chain of
//! routing, header and predicate transforms never parses a key or value.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use super::data::{Schema, SchemaRef, Type, Value};
use super::json;
use crate::sandbox::DataRef;
use crate::sandbox::wit::types::Data;

/// A header: key and value bytes (`None`: null), as Kafka stores them.
pub type Header<'a> = (Cow<'a, str>, Option<Cow<'a, [u8]>>);

/// One record in a chain.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    pub topic: Cow<'a, str>,
    pub partition: Option<i32>,
    /// The record's offset: sink records only (InsertField's `offset.field`).
    pub offset: Option<i64>,
    pub timestamp: Option<i64>,
    pub key: Side<'a>,
    pub value: Side<'a>,
    pub headers: Vec<Header<'a>>,
}

/// A key or value.
#[derive(Debug, Clone)]
pub enum Side<'a> {
    /// As given: the data (`None`: null) and its schema (JsonConverter's schema JSON), if any.
    /// Text or bytes without a schema are a string or bytes under an implied schema, optional
    /// when `optional` (see [`Side::raw`] and [`Side::polled`]).
    Raw {
        data: Option<DataRef<'a>>,
        schema: Option<&'a str>,
        optional: bool,
    },
    /// In the data model (a transform read or changed it).
    Parsed {
        schema: Option<SchemaRef>,
        value: Value,
    },
    /// Written back after a change ([`Side::write`]).
    Written {
        data: Option<Data>,
        /// Shared by the records written with the same schema.
        schema: Option<Arc<str>>,
    },
}

/// A transform's failure: Connect's exception class and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformError {
    /// `DataException`, `IllegalArgumentException`, ...
    pub kind: &'static str,
    pub message: String,
}

impl TransformError {
    /// A `DataException`, what Connect's transforms throw for data they cannot handle.
    pub fn data(message: impl Into<String>) -> Self {
        Self {
            kind: "DataException",
            message: message.into(),
        }
    }
}

impl std::fmt::Display for TransformError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// The last schema texts parsed and their schemas, and the last schemas written and their
/// texts: the records of a batch mostly share their schemas, which are then parsed once and
/// written once.
#[derive(Debug, Default)]
pub struct SchemaCache {
    entries: Vec<(String, SchemaRef)>,
    written: Vec<(SchemaRef, Arc<str>)>,
}

const CACHED_SCHEMAS: usize = 8;

impl SchemaCache {
    /// `schema`'s JsonConverter text.
    fn text(&mut self, schema: &SchemaRef) -> Result<Arc<str>, TransformError> {
        if let Some((_, text)) = self
            .written
            .iter()
            .find(|(s, _)| Arc::ptr_eq(s, schema) || **s == **schema)
        {
            return Ok(Arc::clone(text));
        }
        let text: Arc<str> = json::schema_to_json(schema)
            .map_err(TransformError::data)?
            .to_string()
            .into();
        if self.written.len() == CACHED_SCHEMAS {
            self.written.remove(0);
        }
        self.written.push((Arc::clone(schema), Arc::clone(&text)));
        Ok(text)
    }

    fn get(&mut self, text: &str) -> Result<SchemaRef, TransformError> {
        if let Some((_, schema)) = self.entries.iter().find(|(t, _)| t == text) {
            return Ok(Arc::clone(schema));
        }
        let schema = Arc::new(parse_schema(text)?);
        if self.entries.len() == CACHED_SCHEMAS {
            self.entries.remove(0);
        }
        self.entries.push((text.to_owned(), Arc::clone(&schema)));
        Ok(schema)
    }
}

fn parse_schema(text: &str) -> Result<Schema, TransformError> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| TransformError::data(format!("the schema is not JSON: {e}")))?;
    json::schema_from_json(&json).map_err(TransformError::data)
}

/// The schema of text or bytes without one: a string or bytes, optional if `optional`. One
/// shared schema each, so the transforms' schema caches recognise it by pointer.
fn implied_schema(data: &DataRef<'_>, optional: bool) -> Option<SchemaRef> {
    static IMPLIED: OnceLock<[SchemaRef; 4]> = OnceLock::new();
    let [string, optional_string, bytes, optional_bytes] = IMPLIED.get_or_init(|| {
        [
            Arc::new(Schema::of(Type::String)),
            Arc::new(Schema::of(Type::String).optional(true)),
            Arc::new(Schema::of(Type::Bytes)),
            Arc::new(Schema::of(Type::Bytes).optional(true)),
        ]
    });
    let schema = match (data, optional) {
        (DataRef::Text(_), false) => string,
        (DataRef::Text(_), true) => optional_string,
        (DataRef::Bytes(_), false) => bytes,
        (DataRef::Bytes(_), true) => optional_bytes,
        (DataRef::Json(_), _) => return None,
    };
    Some(Arc::clone(schema))
}

impl<'a> Side<'a> {
    /// A consumed key or value as a converter gave it: text and bytes without a schema have
    /// the optional string or bytes schema of Kafka Connect's string and byte array
    /// converters.
    pub fn raw(data: Option<DataRef<'a>>, schema: Option<&'a str>) -> Self {
        Side::Raw {
            data,
            schema,
            optional: true,
        }
    }

    /// A key or value a source plugin polled: text and bytes without a schema have the
    /// required schema the json converter writes for them (as Kafka Connect's own sources,
    /// `FileStreamSource` among them, give `STRING_SCHEMA`).
    pub fn polled(data: Option<DataRef<'a>>, schema: Option<&'a str>) -> Self {
        Side::Raw {
            data,
            schema,
            optional: false,
        }
    }

    /// Whether it is null (Connect's `key() == null` / `value() == null`), without parsing.
    pub fn is_null(&self) -> bool {
        match self {
            Side::Raw { data, .. } => data.is_none(),
            Side::Parsed { value, .. } => value.is_null(),
            Side::Written { data, .. } => data.is_none(),
        }
    }

    /// Parse it into the data model (once), with `cache` for its schema.
    pub fn parse(&mut self, cache: &mut SchemaCache) -> Result<(), TransformError> {
        let parsed = match self {
            Side::Parsed { .. } => return Ok(()),
            Side::Raw {
                data,
                schema,
                optional,
            } => parse_data(*data, *schema, *optional, cache)?,
            Side::Written { data, schema } => parse_data(
                data.as_ref().map(DataRef::from),
                schema.as_deref(),
                true,
                cache,
            )?,
        };
        *self = Side::Parsed {
            schema: parsed.0,
            value: parsed.1,
        };
        Ok(())
    }

    /// The schema and value (parsed now if need be, without a cache).
    pub fn get(&mut self) -> Result<(Option<&SchemaRef>, &Value), TransformError> {
        self.parse(&mut SchemaCache::default())?;
        match self {
            Side::Parsed { schema, value } => Ok((schema.as_ref(), value)),
            _ => Err(TransformError::data("worker bug: a side not parsed")),
        }
    }

    /// Parse it (with `cache`) and move its schema and value out, leaving a null: for a
    /// transform that replaces the side (it sets it again, or the record is failed).
    pub fn take(
        &mut self,
        cache: &mut SchemaCache,
    ) -> Result<(Option<SchemaRef>, Value), TransformError> {
        self.parse(cache)?;
        match std::mem::replace(
            self,
            Side::Parsed {
                schema: None,
                value: Value::Null,
            },
        ) {
            Side::Parsed { schema, value } => Ok((schema, value)),
            _ => Err(TransformError::data("worker bug: a side not parsed")),
        }
    }

    /// Replace it.
    pub fn set(&mut self, schema: Option<SchemaRef>, value: Value) {
        *self = Side::Parsed { schema, value };
    }

    /// Write a parsed side back as data and schema text, as JsonConverter would give them to
    /// a plugin: strings as text, bytes as bytes, the rest as JSON; a null with a schema
    /// default becomes the default. `cache` keeps the schemas' texts.
    pub fn write(&mut self, cache: &mut SchemaCache) -> Result<(), TransformError> {
        let Side::Parsed { schema, value } = self else {
            return Ok(());
        };
        let schema_text = schema.as_ref().map(|s| cache.text(s)).transpose()?;
        let json = |schema: Option<&Schema>, value: &Value| {
            let mut out = Vec::with_capacity(64);
            json::write_json(schema, value, &mut out).map_err(TransformError::data)?;
            // The writer writes UTF-8 only.
            String::from_utf8(out).map_err(|e| TransformError::data(e.to_string()))
        };
        let data = match (schema.as_deref(), &mut *value) {
            // A null is a null (a tombstone for a value), whatever its schema says, unless the
            // schema has a default, which JsonConverter would write instead.
            (_, Value::Null) => match schema.as_deref().and_then(|s| s.default.as_ref()) {
                Some(default) => Some(Data::Json(json(schema.as_deref(), default)?)),
                None => None,
            },
            (Some(s), Value::String(_)) | (Some(s), Value::Bytes(_))
                if !matches!(s.kind, Type::String | Type::Bytes) || s.name.is_some() =>
            {
                Some(Data::Json(json(Some(s), &*value)?))
            }
            (_, Value::String(text)) => Some(Data::Text(std::mem::take(text))),
            (_, Value::Bytes(bytes)) => Some(Data::Bytes(std::mem::take(bytes))),
            (schema, value) => Some(Data::Json(json(schema, &*value)?)),
        };
        *self = Side::Written {
            data,
            schema: schema_text,
        };
        Ok(())
    }

    /// The data to send and its schema text, borrowed (after [`Side::write`]).
    pub fn data_ref(&self) -> (Option<DataRef<'_>>, Option<&str>) {
        match self {
            Side::Raw { data, schema, .. } => (*data, *schema),
            Side::Written { data, schema } => (data.as_ref().map(DataRef::from), schema.as_deref()),
            // Not written: callers write every side first.
            Side::Parsed { .. } => (None, None),
        }
    }

    /// The side as JsonConverter (schemas enabled) would write it: `{"schema", "payload"}`,
    /// or `None` for a null without a schema (tests compare this with Kafka Connect's).
    pub fn to_envelope(&mut self) -> Result<Option<serde_json::Value>, TransformError> {
        let (schema, value) = self.get()?;
        if schema.is_none() && value.is_null() {
            return Ok(None);
        }
        let payload = json::to_json(schema.map(|s| &**s), value).map_err(TransformError::data)?;
        let schema = schema
            .map(|s| json::schema_to_json(s))
            .transpose()
            .map_err(TransformError::data)?;
        Ok(Some(serde_json::json!({
            "schema": schema.unwrap_or(serde_json::Value::Null),
            "payload": payload,
        })))
    }
}

/// The data model of plugin data and its schema text: with a schema, JsonConverter's reading
/// of the data as JSON under it; without, text and bytes as the string and byte array
/// converters give them and JSON as schemaless data.
fn parse_data(
    data: Option<DataRef<'_>>,
    schema: Option<&str>,
    optional: bool,
    cache: &mut SchemaCache,
) -> Result<(Option<SchemaRef>, Value), TransformError> {
    let Some(data) = data else {
        return Ok((schema.map(|s| cache.get(s)).transpose()?, Value::Null));
    };
    // Text and bytes without a schema need no JSON.
    match (data, schema) {
        (DataRef::Text(text), None) => {
            return Ok((
                implied_schema(&data, optional),
                Value::String(text.to_owned()),
            ));
        }
        (DataRef::Bytes(bytes), None) => {
            return Ok((
                implied_schema(&data, optional),
                Value::Bytes(bytes.to_vec()),
            ));
        }
        _ => {}
    }
    let json = match data {
        DataRef::Json(text) => serde_json::from_str(text)
            .map_err(|e| TransformError::data(format!("the data is not JSON: {e}")))?,
        DataRef::Text(text) => serde_json::Value::String(text.to_owned()),
        DataRef::Bytes(bytes) => {
            use base64::Engine as _;
            serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
        }
    };
    let schema = schema.map(|text| cache.get(text)).transpose()?;
    let value = json::to_connect(schema.as_ref(), &json).map_err(TransformError::data)?;
    Ok((schema, value))
}
