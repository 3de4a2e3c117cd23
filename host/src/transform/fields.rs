//! The transforms that reshape a key or value: InsertField, ReplaceField, MaskField,
//! ValueToKey, ExtractField, HoistField, Flatten, SetSchemaMetadata. Each follows its Kafka
//! Connect class line by line (`connect/transforms`), including what it throws; a struct's new
//! schema is kept for the next record with the same schema, as Connect's schema caches do.

use std::sync::Arc;

use super::data::{Field, Schema, SchemaRef, Struct, TIMESTAMP, Type, Value};
use super::java;
use super::options::{OptionDef, OptionError, Options};
use super::record::{Record, SchemaCache, TransformError};
use super::{Target, Transform};

/// `replace.null.with.default`, which most of them take.
pub const REPLACE_NULL: OptionDef = OptionDef {
    name: "replace.null.with.default",
    ty: "BOOLEAN",
    default: Some("true"),
    required: false,
    doc: "Whether a null field with a default value becomes the default (true) or stays null.",
};

/// `Requirements.requireMap`.
pub fn require_map<'v>(
    value: &'v Value,
    purpose: &str,
) -> Result<&'v Vec<(Value, Value)>, TransformError> {
    match value {
        Value::Map(entries) => Ok(entries),
        other => Err(TransformError::data(format!(
            "Only Map objects supported in absence of schema for [{purpose}], found: {}",
            other.java_class()
        ))),
    }
}

/// `Requirements.requireStruct`.
pub fn require_struct<'v>(value: &'v Value, purpose: &str) -> Result<&'v Struct, TransformError> {
    match value {
        Value::Struct(s) => Ok(s),
        other => Err(TransformError::data(format!(
            "Only Struct objects supported for [{purpose}], found: {}",
            other.java_class()
        ))),
    }
}

/// `Schema.field(name)` on a schema that must be a struct's.
fn struct_field<'s>(schema: &'s Schema, name: &str) -> Result<Option<&'s Field>, TransformError> {
    if schema.kind != Type::Struct {
        return Err(TransformError::data(
            "Cannot look up fields on non-struct type",
        ));
    }
    Ok(schema.field(name))
}

/// `SchemaBuilder.field(name, schema)`: a field added to a struct schema being built.
pub fn add_field(schema: &mut Schema, name: &str, field: SchemaRef) -> Result<(), TransformError> {
    if schema.field(name).is_some() {
        return Err(TransformError {
            kind: "SchemaBuilderException",
            message: format!("Cannot create field because of field name duplication {name}"),
        });
    }
    schema.fields.push(Field {
        name: name.to_owned(),
        schema: field,
    });
    Ok(())
}

fn put_error(e: String) -> TransformError {
    TransformError::data(e)
}

/// The last input schema and the schema made from it (Connect's per-transform schema cache;
/// schemas from the chain's [`SchemaCache`] are shared, so the pointer comparison hits).
#[derive(Default)]
pub struct LastSchema(Option<(SchemaRef, SchemaRef)>);

impl LastSchema {
    /// The schema made from `input`, built by `build` when `input` is new.
    pub fn get(
        &mut self,
        input: &SchemaRef,
        build: impl FnOnce(&Schema) -> Result<Schema, TransformError>,
    ) -> Result<SchemaRef, TransformError> {
        if let Some((i, o)) = &self.0
            && (Arc::ptr_eq(i, input) || **i == **input)
        {
            return Ok(Arc::clone(o));
        }
        let output = Arc::new(build(input)?);
        self.0 = Some((Arc::clone(input), Arc::clone(&output)));
        Ok(output)
    }
}

/// A struct's values, moved out, a null replaced by its field's default when `with_default`
/// (`Struct.get` for every field; `getWithoutDefault` otherwise).
fn into_fields(value: Struct, with_default: bool) -> Vec<Value> {
    let mut values = value.values;
    if with_default {
        for (v, field) in values.iter_mut().zip(&value.schema.fields) {
            if v.is_null()
                && let Some(default) = &field.schema.default
            {
                *v = default.clone();
            }
        }
    }
    values
}

/// The side's schema and value, moved out of the record (parsed first); the caller sets the
/// side again.
fn take(
    record: &mut Record<'_>,
    target: Target,
    cache: &mut SchemaCache,
) -> Result<(Option<SchemaRef>, Value), TransformError> {
    target.side(record).take(cache)
}

// ---------------------------------------------------------------------------------------------

/// An `InsertField` field spec: a name, `!` for required, `?` (the default) for optional.
#[derive(Clone)]
struct Insertion {
    name: String,
    optional: bool,
}

impl Insertion {
    fn parse(spec: Option<&str>) -> Option<Insertion> {
        let spec = spec?;
        Some(if let Some(name) = spec.strip_suffix('?') {
            Insertion {
                name: name.to_owned(),
                optional: true,
            }
        } else if let Some(name) = spec.strip_suffix('!') {
            Insertion {
                name: name.to_owned(),
                optional: false,
            }
        } else {
            Insertion {
                name: spec.to_owned(),
                optional: true,
            }
        })
    }
}

/// InsertField: topic, partition, offset, timestamp or a static value into a struct or map.
pub struct InsertField {
    target: Target,
    topic: Option<Insertion>,
    partition: Option<Insertion>,
    offset: Option<Insertion>,
    timestamp: Option<Insertion>,
    static_field: Option<Insertion>,
    static_value: Option<String>,
    with_default: bool,
    schemas: LastSchema,
}

/// InsertField's options.
pub const INSERT_FIELD: &[OptionDef] = &[
    OptionDef {
        name: "topic.field",
        ty: "STRING",
        default: None,
        required: false,
        doc: "Field name for the Kafka topic; suffix ! for a required field, ? (the default) for an optional one.",
    },
    OptionDef {
        name: "partition.field",
        ty: "STRING",
        default: None,
        required: false,
        doc: "Field name for the Kafka partition (! or ? as above).",
    },
    OptionDef {
        name: "offset.field",
        ty: "STRING",
        default: None,
        required: false,
        doc: "Field name for the Kafka offset, sink connectors only (! or ? as above).",
    },
    OptionDef {
        name: "timestamp.field",
        ty: "STRING",
        default: None,
        required: false,
        doc: "Field name for the record timestamp (! or ? as above).",
    },
    OptionDef {
        name: "static.field",
        ty: "STRING",
        default: None,
        required: false,
        doc: "Field name for a static value (! or ? as above).",
    },
    OptionDef {
        name: "static.value",
        ty: "STRING",
        default: None,
        required: false,
        doc: "The static field's value.",
    },
    REPLACE_NULL,
];

impl InsertField {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        let t = Self {
            target,
            topic: Insertion::parse(options.string("topic.field")),
            partition: Insertion::parse(options.string("partition.field")),
            offset: Insertion::parse(options.string("offset.field")),
            timestamp: Insertion::parse(options.string("timestamp.field")),
            static_field: Insertion::parse(options.string("static.field")),
            static_value: options.string("static.value").map(str::to_owned),
            with_default: options.boolean(REPLACE_NULL.name, true)?,
            schemas: LastSchema::default(),
        };
        if t.topic.is_none()
            && t.partition.is_none()
            && t.offset.is_none()
            && t.timestamp.is_none()
            && t.static_field.is_none()
        {
            return Err(OptionError::new(
                "topic.field",
                "No field insertion configured: set at least one of topic.field, partition.field, offset.field, timestamp.field, static.field",
            ));
        }
        if t.static_field.is_some() && t.static_value.is_none() {
            return Err(OptionError::new(
                "static.value",
                "No value specified for static field: set static.value",
            ));
        }
        Ok(t)
    }

    fn updated_schema(&self, schema: &Schema) -> Result<Schema, TransformError> {
        let mut out = schema.basics(Type::Struct);
        for field in &schema.fields {
            add_field(&mut out, &field.name, Arc::clone(&field.schema))?;
        }
        let simple = |kind: Type, optional: bool| Arc::new(Schema::of(kind).optional(optional));
        if let Some(f) = &self.topic {
            add_field(&mut out, &f.name, simple(Type::String, f.optional))?;
        }
        if let Some(f) = &self.partition {
            add_field(&mut out, &f.name, simple(Type::Int32, f.optional))?;
        }
        if let Some(f) = &self.offset {
            add_field(&mut out, &f.name, simple(Type::Int64, f.optional))?;
        }
        if let Some(f) = &self.timestamp {
            let schema = Schema::logical(Type::Int64, TIMESTAMP).optional(f.optional);
            add_field(&mut out, &f.name, Arc::new(schema))?;
        }
        if let Some(f) = &self.static_field {
            add_field(&mut out, &f.name, simple(Type::String, f.optional))?;
        }
        Ok(out)
    }
}

const PURPOSE_INSERT: &str = "field insertion";

fn require_sink_offset(record: &Record<'_>, purpose: &str) -> Result<i64, TransformError> {
    record.offset.ok_or_else(|| {
        TransformError::data(format!(
            "Only SinkRecord supported for [{purpose}], found: org.apache.kafka.connect.source.SourceRecord"
        ))
    })
}

impl Transform for InsertField {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        if self.target.side(record).is_null() {
            return Ok(true);
        }
        let topic = self.topic.as_ref().map(|_| record.topic.to_string());
        let partition = record.partition;
        let timestamp = record.timestamp;
        let offset = self
            .offset
            .as_ref()
            .map(|_| require_sink_offset(record, PURPOSE_INSERT));
        let (schema, value) = take(record, self.target, cache)?;
        if schema.is_none() {
            let mut map = require_map(&value, PURPOSE_INSERT)?.clone();
            if let (Some(f), Some(topic)) = (&self.topic, topic) {
                Value::map_put(&mut map, &f.name, Value::String(topic));
            }
            if let (Some(f), Some(p)) = (&self.partition, partition) {
                Value::map_put(&mut map, &f.name, Value::Int32(p));
            }
            if let (Some(f), Some(o)) = (&self.offset, offset) {
                Value::map_put(&mut map, &f.name, Value::Int64(o?));
            }
            if let (Some(f), Some(t)) = (&self.timestamp, timestamp) {
                Value::map_put(&mut map, &f.name, Value::Int64(t));
            }
            if let (Some(f), Some(v)) = (&self.static_field, &self.static_value) {
                Value::map_put(&mut map, &f.name, Value::String(v.clone()));
            }
            self.target.side(record).set(None, Value::Map(map));
            return Ok(true);
        }
        let original = require_struct(&value, PURPOSE_INSERT)?;
        let updated = {
            let mut schemas = std::mem::take(&mut self.schemas);
            let this = &*self;
            let out = schemas.get(&original.schema, |s| this.updated_schema(s));
            self.schemas = schemas;
            out?
        };
        // The original's fields come first in the new schema, each with its own schema: moved
        // over as they are (the checks `put` makes hold already).
        let copied = original.values.len();
        let Value::Struct(original) = value else {
            return Err(TransformError::data("worker bug: not a struct"));
        };
        let mut out = Struct::new(Arc::clone(&updated));
        for (index, v) in into_fields(original, self.with_default)
            .into_iter()
            .enumerate()
            .take(copied)
        {
            out.values[index] = v;
        }
        if let (Some(f), Some(topic)) = (&self.topic, topic) {
            out.put_named(&f.name, Value::String(topic))
                .map_err(put_error)?;
        }
        if let (Some(f), Some(p)) = (&self.partition, partition) {
            out.put_named(&f.name, Value::Int32(p)).map_err(put_error)?;
        }
        if let (Some(f), Some(o)) = (&self.offset, offset) {
            out.put_named(&f.name, Value::Int64(o?))
                .map_err(put_error)?;
        }
        if let (Some(f), Some(t)) = (&self.timestamp, timestamp) {
            out.put_named(&f.name, Value::Date(t)).map_err(put_error)?;
        }
        if let (Some(f), Some(v)) = (&self.static_field, &self.static_value) {
            out.put_named(&f.name, Value::String(v.clone()))
                .map_err(put_error)?;
        }
        self.target
            .side(record)
            .set(Some(updated), Value::Struct(out));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// ReplaceField: keep, drop and rename fields.
pub struct ReplaceField {
    target: Target,
    exclude: Vec<String>,
    include: Vec<String>,
    renames: Vec<(String, String)>,
    with_default: bool,
    schemas: LastSchema,
}

/// ReplaceField's options.
pub const REPLACE_FIELD: &[OptionDef] = &[
    OptionDef {
        name: "exclude",
        ty: "LIST",
        default: Some(""),
        required: false,
        doc: "Fields to exclude. This takes precedence over the fields to include.",
    },
    OptionDef {
        name: "include",
        ty: "LIST",
        default: Some(""),
        required: false,
        doc: "Fields to include. If specified, only these fields will be used.",
    },
    OptionDef {
        name: "renames",
        ty: "LIST",
        default: Some(""),
        required: false,
        doc: "Field rename mappings, colon-delimited pairs: foo:bar,abc:xyz.",
    },
    REPLACE_NULL,
];

impl ReplaceField {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        let exclude = options.list("exclude").unwrap_or_default();
        let include = options.list("include").unwrap_or_default();
        let mut renames = Vec::new();
        for mapping in options.list("renames").unwrap_or_default() {
            let parts = java_split(&mapping, ':');
            if parts.len() != 2 {
                return Err(OptionError::new(
                    "renames",
                    format!(
                        "Invalid rename mapping: {mapping}; write old:new pairs separated by commas"
                    ),
                ));
            }
            renames.retain(|(from, _): &(String, String)| *from != parts[0]);
            renames.push((parts[0].clone(), parts[1].clone()));
        }
        Ok(Self {
            target,
            exclude,
            include,
            renames,
            with_default: options.boolean(REPLACE_NULL.name, true)?,
            schemas: LastSchema::default(),
        })
    }

    fn keep(&self, name: &str) -> bool {
        !self.exclude.iter().any(|e| e == name)
            && (self.include.is_empty() || self.include.iter().any(|i| i == name))
    }

    fn renamed<'n>(&'n self, name: &'n str) -> &'n str {
        self.renames
            .iter()
            .find(|(from, _)| from == name)
            .map_or(name, |(_, to)| to)
    }

    fn reverse_renamed<'n>(&'n self, name: &'n str) -> &'n str {
        self.renames
            .iter()
            .rev()
            .find(|(_, to)| to == name)
            .map_or(name, |(from, _)| from)
    }
}

/// Java's `String.split(sep)`: trailing empty strings removed.
pub fn java_split(text: &str, sep: char) -> Vec<String> {
    let mut parts: Vec<String> = text.split(sep).map(str::to_owned).collect();
    while parts.len() > 1 && parts.last().is_some_and(String::is_empty) {
        parts.pop();
    }
    if parts.len() == 1 && parts[0].is_empty() && !text.is_empty() {
        parts.clear();
    }
    parts
}

impl Transform for ReplaceField {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        const PURPOSE: &str = "field replacement";
        if self.target.side(record).is_null() {
            return Ok(true);
        }
        let (schema, value) = take(record, self.target, cache)?;
        if schema.is_none() {
            let map = require_map(&value, PURPOSE)?;
            let mut out = Vec::with_capacity(map.len());
            for (k, v) in map {
                let Value::String(name) = k else { continue };
                if self.keep(name) {
                    Value::map_put(&mut out, self.renamed(name), v.clone());
                }
            }
            self.target.side(record).set(None, Value::Map(out));
            return Ok(true);
        }
        let original = require_struct(&value, PURPOSE)?;
        let updated = {
            let mut schemas = std::mem::take(&mut self.schemas);
            let this = &*self;
            let out = schemas.get(&original.schema, |s| {
                let mut out = s.basics(Type::Struct);
                for field in &s.fields {
                    if this.keep(&field.name) {
                        add_field(
                            &mut out,
                            this.renamed(&field.name),
                            Arc::clone(&field.schema),
                        )?;
                    }
                }
                Ok(out)
            });
            self.schemas = schemas;
            out?
        };
        let original_schema = Arc::clone(&original.schema);
        let Value::Struct(original) = value else {
            return Err(TransformError::data("worker bug: not a struct"));
        };
        let mut values: Vec<Option<Value>> = into_fields(original, self.with_default)
            .into_iter()
            .map(Some)
            .collect();
        let mut out = Struct::new(Arc::clone(&updated));
        for (index, field) in updated.fields.iter().enumerate() {
            let from = self.reverse_renamed(&field.name);
            let v = original_schema
                .field_index(from)
                .and_then(|i| values[i].take())
                .ok_or_else(|| TransformError::data(format!("{from} is not a valid field name")))?;
            out.put(index, v).map_err(put_error)?;
        }
        self.target
            .side(record)
            .set(Some(updated), Value::Struct(out));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// MaskField: fields replaced by their type's empty value, or a replacement.
pub struct MaskField {
    target: Target,
    fields: Vec<String>,
    replacement: Option<String>,
    with_default: bool,
}

/// MaskField's options.
pub const MASK_FIELD: &[OptionDef] = &[
    OptionDef {
        name: "fields",
        ty: "LIST",
        default: None,
        required: true,
        doc: "Names of fields to mask.",
    },
    OptionDef {
        name: "replacement",
        ty: "STRING",
        default: None,
        required: false,
        doc: "Custom replacement applied to all the fields' values (numeric or non-empty string values only).",
    },
    REPLACE_NULL,
];

impl MaskField {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        let fields = options.required_list("fields")?;
        let replacement = options.string("replacement").map(str::to_owned);
        if replacement.as_deref() == Some("") {
            return Err(OptionError::new(
                "replacement",
                "Invalid value  for configuration replacement: String must be non-empty",
            ));
        }
        Ok(Self {
            target,
            fields,
            replacement,
            with_default: options.boolean(REPLACE_NULL.name, true)?,
        })
    }

    fn masked(&self, value: &Value) -> Result<Value, TransformError> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        match &self.replacement {
            None => Ok(match value {
                Value::Boolean(_) => Value::Boolean(false),
                Value::Int8(_) => Value::Int8(0),
                Value::Int16(_) => Value::Int16(0),
                Value::Int32(_) => Value::Int32(0),
                Value::Int64(_) => Value::Int64(0),
                Value::Float32(_) => Value::Float32(0.0),
                Value::Float64(_) => Value::Float64(0.0),
                Value::Decimal(..) => Value::Decimal(0, 0),
                Value::Date(_) => Value::Date(0),
                Value::String(_) => Value::String(String::new()),
                Value::Array(_) => Value::Array(Vec::new()),
                Value::Map(_) => Value::Map(Vec::new()),
                other => {
                    return Err(TransformError::data(format!(
                        "Cannot mask value of type: class {}",
                        other.java_class()
                    )));
                }
            }),
            Some(r) => {
                let number = || {
                    TransformError::data(format!(
                        "Unable to convert {r} (class java.lang.String) to number"
                    ))
                };
                let integer = || -> Result<i64, TransformError> {
                    java::parse_integer::<i64>(r)
                        .or_else(|| java::parse_double(r).map(|d| d as i64))
                        .ok_or_else(number)
                };
                Ok(match value {
                    Value::Int8(_) => Value::Int8(integer()? as i8),
                    Value::Int16(_) => Value::Int16(integer()? as i16),
                    Value::Int32(_) => Value::Int32(integer()? as i32),
                    Value::Int64(_) => Value::Int64(integer()?),
                    Value::Float32(_) => {
                        Value::Float32(java::parse_double(r).ok_or_else(number)? as f32)
                    }
                    Value::Float64(_) => Value::Float64(java::parse_double(r).ok_or_else(number)?),
                    Value::String(_) => Value::String(r.clone()),
                    Value::Decimal(..) => {
                        let (u, s) = super::json::parse_decimal(r).ok_or_else(number)?;
                        Value::Decimal(u, s)
                    }
                    other => {
                        return Err(TransformError::data(format!(
                            "Cannot mask value of type class {} with custom replacement.",
                            other.java_class()
                        )));
                    }
                })
            }
        }
    }
}

impl Transform for MaskField {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        const PURPOSE: &str = "mask fields";
        let (schema, value) = take(record, self.target, cache)?;
        if schema.is_none() {
            let map = require_map(&value, PURPOSE)?;
            let mut out = map.clone();
            for field in &self.fields {
                let masked = self.masked(Value::map_get(map, field).unwrap_or(&Value::Null))?;
                Value::map_put(&mut out, field, masked);
            }
            self.target.side(record).set(None, Value::Map(out));
            return Ok(true);
        }
        let original = require_struct(&value, PURPOSE)?;
        let mut out = Struct::new(Arc::clone(&original.schema));
        for (index, field) in original.schema.fields.iter().enumerate() {
            let v = original.value(index, self.with_default);
            let v = if self.fields.contains(&field.name) {
                self.masked(&v)?
            } else {
                v
            };
            out.put(index, v).map_err(put_error)?;
        }
        self.target.side(record).set(schema, Value::Struct(out));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// ValueToKey: a key made of fields of the value.
pub struct ValueToKey {
    fields: Vec<String>,
    with_default: bool,
    schemas: LastSchema,
}

/// ValueToKey's options.
pub const VALUE_TO_KEY: &[OptionDef] = &[
    OptionDef {
        name: "fields",
        ty: "LIST",
        default: None,
        required: true,
        doc: "Field names on the record value to extract as the record key.",
    },
    REPLACE_NULL,
];

impl ValueToKey {
    /// Configured from `options`.
    pub fn new(options: &Options) -> Result<Self, OptionError> {
        let fields = options.required_list("fields")?;
        Ok(Self {
            fields,
            with_default: options.boolean(REPLACE_NULL.name, true)?,
            schemas: LastSchema::default(),
        })
    }
}

impl Transform for ValueToKey {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        const PURPOSE: &str = "copying fields from value to key";
        record.value.parse(cache)?;
        let (schema, value) = record.value.get()?;
        if schema.is_none() {
            let map = require_map(value, PURPOSE)?;
            let mut key = Vec::with_capacity(self.fields.len());
            for field in &self.fields {
                let v = Value::map_get(map, field).cloned().unwrap_or(Value::Null);
                Value::map_put(&mut key, field, v);
            }
            record.key.set(None, Value::Map(key));
            return Ok(true);
        }
        let original = require_struct(value, PURPOSE)?;
        let fields = &self.fields;
        let key_schema = self.schemas.get(&original.schema, |s| {
            let mut out = Schema::of(Type::Struct);
            for name in fields {
                let field = s
                    .field(name)
                    .ok_or_else(|| TransformError::data(format!("Field does not exist: {name}")))?;
                add_field(&mut out, name, Arc::clone(&field.schema))?;
            }
            Ok(out)
        })?;
        let mut key = Struct::new(Arc::clone(&key_schema));
        for (index, name) in self.fields.iter().enumerate() {
            let v = original
                .get_named(name, self.with_default)
                .cloned()
                .unwrap_or(Value::Null);
            key.put(index, v).map_err(put_error)?;
        }
        record.key.set(Some(key_schema), Value::Struct(key));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// A field path (`field.syntax.version`: V1 one name, V2 dotted with backtick quoting).
#[derive(Debug, Clone)]
pub struct FieldPath {
    steps: Vec<String>,
}

impl FieldPath {
    /// `new SingleFieldPath(text, version)`.
    pub fn new(text: &str, v2: bool) -> Result<FieldPath, String> {
        if !v2 {
            return Ok(FieldPath {
                steps: vec![text.to_owned()],
            });
        }
        let chars: Vec<char> = text.chars().collect();
        let mut steps = Vec::new();
        let mut i = 0;
        let incomplete = |at: usize| {
            format!(
                "Incomplete backtick pair in path: [{text}], consider adding a backslash before backtick at position {at} to escape it"
            )
        };
        while i < chars.len() {
            if chars[i] != '`' {
                let start = i;
                match chars[i..].iter().position(|&c| c == '.') {
                    Some(dot) => {
                        steps.push(chars[start..start + dot].iter().collect());
                        i = start + dot + 1;
                    }
                    None => {
                        steps.push(chars[start..].iter().collect());
                        i = chars.len();
                    }
                }
            } else {
                let backtick_at = i;
                i += 1;
                let mut field = String::new();
                let mut start = i;
                loop {
                    let Some(offset) = chars[i..].iter().position(|&c| c == '`') else {
                        return Err(incomplete(backtick_at));
                    };
                    i += offset;
                    let escaped = chars[i - 1] == '\\';
                    if i >= chars.len() - 1 {
                        if escaped {
                            return Err(incomplete(backtick_at));
                        }
                        field.extend(&chars[start..i]);
                        steps.push(std::mem::take(&mut field));
                        i += 1;
                        break;
                    }
                    if chars[i + 1] != '.' {
                        i += 1;
                        continue;
                    }
                    if escaped {
                        field.extend(&chars[start..i - 1]);
                        field.push('`');
                        i += 1;
                        start = i;
                        continue;
                    }
                    field.extend(&chars[start..i]);
                    steps.push(std::mem::take(&mut field));
                    i += 2;
                    break;
                }
            }
        }
        if text.ends_with('.') {
            steps.push(String::new());
        }
        Ok(FieldPath { steps })
    }

    fn split(&self) -> (&[String], &str) {
        match self.steps.split_last() {
            Some((last, rest)) => (rest, last),
            None => (&[], ""),
        }
    }

    /// `fieldFrom(schema)`.
    fn field_from<'s>(&self, schema: &'s Schema) -> Result<Option<&'s Field>, TransformError> {
        let (parents, last) = self.split();
        let mut current = schema;
        for step in parents {
            match struct_field(current, step)? {
                Some(f) => current = &f.schema,
                None => return Ok(None),
            }
        }
        struct_field(current, last)
    }

    /// `valueFrom(struct, withDefault)`.
    fn value_from_struct(
        &self,
        value: &Struct,
        with_default: bool,
    ) -> Result<Value, TransformError> {
        let (parents, last) = self.split();
        let mut current = value;
        for step in parents {
            let Some(sub) = current.get_named(step, true) else {
                return Ok(Value::Null);
            };
            match sub {
                Value::Null => return Ok(Value::Null),
                other => current = require_struct(other, "nested field access")?,
            }
        }
        Ok(current
            .get_named(last, with_default)
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// `valueFrom(map)`.
    fn value_from_map(&self, map: &[(Value, Value)]) -> Result<Value, TransformError> {
        let (parents, last) = self.split();
        let mut current = map;
        for step in parents {
            match Value::map_get(current, step) {
                None | Some(Value::Null) => return Ok(Value::Null),
                Some(other) => current = require_map(other, "nested field access")?,
            }
        }
        Ok(Value::map_get(current, last)
            .cloned()
            .unwrap_or(Value::Null))
    }
}

/// ExtractField: the key or value replaced by one of its fields.
pub struct ExtractField {
    target: Target,
    original: String,
    path: FieldPath,
    with_default: bool,
}

/// ExtractField's options.
pub const EXTRACT_FIELD: &[OptionDef] = &[
    OptionDef {
        name: "field",
        ty: "STRING",
        default: None,
        required: true,
        doc: "Field name to extract.",
    },
    OptionDef {
        name: "field.syntax.version",
        ty: "STRING",
        default: Some("V1"),
        required: false,
        doc: "V1: the field is a name at the root; V2: a dotted path into nested structs and maps, `backticks` around names that hold dots.",
    },
    REPLACE_NULL,
];

impl ExtractField {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        let original = options.required("field")?.to_owned();
        let version = options.string("field.syntax.version").unwrap_or("V1");
        let v2 = match version.to_ascii_uppercase().as_str() {
            "V1" => false,
            "V2" => true,
            _ => {
                return Err(OptionError::new(
                    "field.syntax.version",
                    format!(
                        "Invalid value {version} for configuration field.syntax.version: String must be one of (case insensitive): V1, V2"
                    ),
                ));
            }
        };
        let path = FieldPath::new(&original, v2).map_err(|m| OptionError::new("field", m))?;
        Ok(Self {
            target,
            original,
            path,
            with_default: options.boolean(REPLACE_NULL.name, true)?,
        })
    }
}

impl Transform for ExtractField {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        const PURPOSE: &str = "field extraction";
        let (schema, value) = take(record, self.target, cache)?;
        let Some(schema) = schema else {
            let out = match &value {
                Value::Null => Value::Null,
                other => self.path.value_from_map(require_map(other, PURPOSE)?)?,
            };
            self.target.side(record).set(None, out);
            return Ok(true);
        };
        let original = match &value {
            Value::Null => None,
            other => Some(require_struct(other, PURPOSE)?),
        };
        let field = self
            .path
            .field_from(&schema)?
            .ok_or_else(|| TransformError {
                kind: "IllegalArgumentException",
                message: format!("Unknown field: {}", self.original),
            })?;
        let out = match original {
            None => Value::Null,
            Some(s) => self.path.value_from_struct(s, self.with_default)?,
        };
        let field_schema = Arc::clone(&field.schema);
        self.target.side(record).set(Some(field_schema), out);
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// HoistField: the key or value wrapped in a struct or map of one field.
pub struct HoistField {
    target: Target,
    field: String,
    schemas: LastSchema,
}

/// HoistField's options.
pub const HOIST_FIELD: &[OptionDef] = &[OptionDef {
    name: "field",
    ty: "STRING",
    default: None,
    required: true,
    doc: "Field name for the single field of the resulting struct or map.",
}];

impl HoistField {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        Ok(Self {
            target,
            field: options.required("field")?.to_owned(),
            schemas: LastSchema::default(),
        })
    }
}

impl Transform for HoistField {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        let (schema, value) = take(record, self.target, cache)?;
        let Some(schema) = schema else {
            let map = vec![(Value::String(self.field.clone()), value)];
            self.target.side(record).set(None, Value::Map(map));
            return Ok(true);
        };
        let name = &self.field;
        let updated = self.schemas.get(&schema, |s| {
            let mut out = Schema::of(Type::Struct);
            add_field(&mut out, name, Arc::new(s.clone()))?;
            Ok(out)
        })?;
        let mut out = Struct::new(Arc::clone(&updated));
        out.put(0, value).map_err(put_error)?;
        self.target
            .side(record)
            .set(Some(updated), Value::Struct(out));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// Flatten: nested structs and maps flattened into one level, names joined by a delimiter.
pub struct Flatten {
    target: Target,
    delimiter: String,
    schemas: LastSchema,
}

/// Flatten's options.
pub const FLATTEN: &[OptionDef] = &[OptionDef {
    name: "delimiter",
    ty: "STRING",
    default: Some("."),
    required: false,
    doc: "Delimiter between field names when generating the flattened fields' names.",
}];

impl Flatten {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        Ok(Self {
            target,
            delimiter: options.string("delimiter").unwrap_or(".").to_owned(),
            schemas: LastSchema::default(),
        })
    }

    fn name(&self, prefix: &str, name: &str) -> String {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}{}{name}", self.delimiter)
        }
    }

    fn flatten_map(
        &self,
        map: &[(Value, Value)],
        prefix: &str,
        out: &mut Vec<(Value, Value)>,
    ) -> Result<(), TransformError> {
        for (k, v) in map {
            let key = match k {
                Value::String(s) => s.clone(),
                other => java::to_java_string(other),
            };
            let name = self.name(prefix, &key);
            if v.is_null() {
                Value::map_put(out, &name, Value::Null);
                continue;
            }
            match v.schemaless_type() {
                None => {
                    return Err(TransformError::data(format!(
                        "Flatten transformation was passed a value of type class {} which is not supported by Connect's data API",
                        v.java_class()
                    )));
                }
                Some(Type::Map) => self.flatten_map(require_map(v, "flattening")?, &name, out)?,
                Some(Type::Struct) => {
                    return Err(TransformError::data(format!(
                        "Flatten transformation does not support class {} for record without schemas (for field {name}).",
                        v.java_class()
                    )));
                }
                Some(_) => Value::map_put(out, &name, v.clone()),
            }
        }
        Ok(())
    }

    fn flatten_schema(
        &self,
        schema: &Schema,
        prefix: &str,
        out: &mut Schema,
        optional: bool,
        parent_default: Option<&Struct>,
    ) -> Result<(), TransformError> {
        for (index, field) in schema.fields.iter().enumerate() {
            let name = self.name(prefix, &field.name);
            let field_optional = optional || field.schema.optional;
            let default = match (&field.schema.default, parent_default) {
                (Some(d), _) => Some(d.clone()),
                (None, Some(parent)) => match parent.get(index) {
                    Value::Null => None,
                    v => Some(v.clone()),
                },
                (None, None) => None,
            };
            match field.schema.kind {
                Type::Map => {
                    return Err(TransformError::data(format!(
                        "Flatten transformation does not support MAP for record with schemas (for field {name})."
                    )));
                }
                Type::Struct => {
                    let default = match default {
                        Some(Value::Struct(s)) => Some(s),
                        _ => None,
                    };
                    self.flatten_schema(
                        &field.schema,
                        &name,
                        out,
                        field_optional,
                        default.as_ref(),
                    )?;
                }
                kind => {
                    let mut flat = field.schema.basics(kind);
                    if kind == Type::Array {
                        flat.value = field.schema.value.clone();
                    }
                    flat.optional = field_optional;
                    flat.default = default;
                    add_field(out, &name, Arc::new(flat))?;
                }
            }
        }
        Ok(())
    }

    fn flatten_struct(
        &self,
        value: &Struct,
        prefix: &str,
        out: &mut Struct,
    ) -> Result<(), TransformError> {
        for (index, field) in value.schema.fields.iter().enumerate() {
            let name = self.name(prefix, &field.name);
            match field.schema.kind {
                Type::Struct => match value.get(index) {
                    Value::Struct(inner) => self.flatten_struct(inner, &name, out)?,
                    _ => continue,
                },
                Type::Map => {
                    return Err(TransformError::data(format!(
                        "Flatten transformation does not support MAP for record with schemas (for field {name})."
                    )));
                }
                _ => out
                    .put_named(&name, value.get(index).clone())
                    .map_err(put_error)?,
            }
        }
        Ok(())
    }
}

impl Transform for Flatten {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        const PURPOSE: &str = "flattening";
        if self.target.side(record).is_null() {
            return Ok(true);
        }
        let (schema, value) = take(record, self.target, cache)?;
        let Some(schema) = schema else {
            let map = require_map(&value, PURPOSE)?;
            let mut out = Vec::with_capacity(map.len());
            self.flatten_map(map, "", &mut out)?;
            self.target.side(record).set(None, Value::Map(out));
            return Ok(true);
        };
        let original = require_struct(&value, PURPOSE)?;
        let updated = {
            let mut schemas = std::mem::take(&mut self.schemas);
            let this = &*self;
            let out = schemas.get(&schema, |s| {
                let mut out = s.basics(Type::Struct);
                let default = match &s.default {
                    Some(Value::Struct(d)) => Some(d),
                    _ => None,
                };
                this.flatten_schema(s, "", &mut out, s.optional, default)?;
                Ok(out)
            });
            self.schemas = schemas;
            out?
        };
        let mut out = Struct::new(Arc::clone(&updated));
        self.flatten_struct(original, "", &mut out)?;
        self.target
            .side(record)
            .set(Some(updated), Value::Struct(out));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// SetSchemaMetadata: the key's or value's schema name and version replaced.
pub struct SetSchemaMetadata {
    target: Target,
    name: Option<String>,
    version: Option<i32>,
    with_default: bool,
}

/// SetSchemaMetadata's options.
pub const SET_SCHEMA_METADATA: &[OptionDef] = &[
    OptionDef {
        name: "schema.name",
        ty: "STRING",
        default: None,
        required: false,
        doc: "Schema name to set.",
    },
    OptionDef {
        name: "schema.version",
        ty: "INT",
        default: None,
        required: false,
        doc: "Schema version to set.",
    },
    REPLACE_NULL,
];

impl SetSchemaMetadata {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        let name = options.string("schema.name").map(str::to_owned);
        let version = options.int("schema.version")?;
        if name.is_none() && version.is_none() {
            return Err(OptionError::new(
                "schema.name",
                "Neither schema name nor version configured: set schema.name, schema.version or both",
            ));
        }
        Ok(Self {
            target,
            name,
            version,
            with_default: options.boolean(REPLACE_NULL.name, true)?,
        })
    }
}

impl Transform for SetSchemaMetadata {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        let (schema, value) = take(record, self.target, cache)?;
        let Some(schema) = schema else {
            if value.is_null() {
                return Ok(true);
            }
            return Err(TransformError::data(
                "Schema required for [updating schema metadata]",
            ));
        };
        // Connect builds the new schema with the old one's field list, which only a struct
        // schema has.
        if schema.kind != Type::Struct {
            return Err(TransformError::data(
                "Cannot list fields on non-struct type",
            ));
        }
        let mut updated = (*schema).clone();
        if let Some(name) = &self.name {
            updated.name = Some(name.clone());
        }
        if let Some(version) = self.version {
            updated.version = Some(version);
        }
        let updated = Arc::new(updated);
        let value = match value {
            Value::Struct(original) => {
                let mut out = Struct::new(Arc::clone(&updated));
                for index in 0..updated.fields.len() {
                    out.put(index, original.value(index, self.with_default))
                        .map_err(put_error)?;
                }
                Value::Struct(out)
            }
            other => other,
        };
        self.target.side(record).set(Some(updated), value);
        Ok(true)
    }
}
