//! Cast and TimestampConverter: values converted between types, as Kafka Connect's classes do
//! (Java's narrowing casts, its number parsers and printers, `SimpleDateFormat` in UTC).

use std::sync::Arc;

use super::data::{DATE, Schema, SchemaRef, Struct, TIME, TIMESTAMP, Type, Value};
use super::fields::{LastSchema, REPLACE_NULL, require_map, require_struct};
use super::java::{self, DateFormat};
use super::options::{OptionDef, OptionError, Options};
use super::record::{Record, SchemaCache, TransformError};
use super::{Target, Transform};

const MILLIS_PER_DAY: i64 = 86_400_000;

/// Cast: fields, or the whole key or value, cast to another primitive type.
pub struct Cast {
    target: Target,
    /// Field casts, or one entry with no field for the whole value.
    casts: Vec<(Option<String>, Type)>,
    with_default: bool,
    schemas: LastSchema,
}

/// Cast's options.
pub const CAST: &[OptionDef] = &[
    OptionDef {
        name: "spec",
        ty: "LIST",
        default: None,
        required: true,
        doc: "field1:type,field2:type to cast fields of a struct or map, or a single type to cast the whole value. Types: int8, int16, int32, int64, float32, float64, boolean, string.",
    },
    REPLACE_NULL,
];

const OUTPUT_TYPES: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]";
const INPUT_TYPES: &str = "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING, BYTES]";

fn output_type(text: &str) -> Result<Type, OptionError> {
    let kind = Type::from_java_name(text.trim()).ok_or_else(|| {
        OptionError::new(
            "spec",
            format!("Invalid type found in casting spec: {}", text.trim()),
        )
    })?;
    match kind {
        Type::Bytes | Type::Array | Type::Map | Type::Struct => Err(OptionError::new(
            "spec",
            format!(
                "Cast transformation does not support casting to {}; supported types are {OUTPUT_TYPES}",
                kind.java_name()
            ),
        )),
        kind => Ok(kind),
    }
}

impl Cast {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        let spec = options
            .required_list("spec")
            .map_err(|_| OptionError::new("spec", "Must specify at least one field to cast."))?;
        let mut casts: Vec<(Option<String>, Type)> = Vec::new();
        let mut whole = false;
        for mapping in &spec {
            let parts = super::fields::java_split(mapping, ':');
            match parts.as_slice() {
                [kind] => {
                    whole = true;
                    casts.retain(|(f, _)| f.is_some());
                    casts.push((None, output_type(kind)?));
                }
                [field, kind] => {
                    let field = field.trim().to_owned();
                    let kind = output_type(kind)?;
                    casts.retain(|(f, _)| f.as_deref() != Some(field.as_str()));
                    casts.push((Some(field), kind));
                }
                _ => {
                    return Err(OptionError::new(
                        "spec",
                        format!(
                            "Invalid rename mapping: {mapping}; write field:type or a single type"
                        ),
                    ));
                }
            }
        }
        if whole && spec.len() > 1 {
            return Err(OptionError::new(
                "spec",
                "Cast transformations that specify a type to cast the entire value to may ony specify a single cast in their spec",
            ));
        }
        Ok(Self {
            target,
            casts,
            with_default: options.boolean(REPLACE_NULL.name, true)?,
            schemas: LastSchema::default(),
        })
    }

    fn whole(&self) -> Option<Type> {
        match self.casts.as_slice() {
            [(None, kind)] => Some(*kind),
            _ => None,
        }
    }

    fn cast_for(&self, field: &str) -> Option<Type> {
        self.casts
            .iter()
            .find(|(f, _)| f.as_deref() == Some(field))
            .map(|(_, k)| *k)
    }

    fn updated_schema(&self, schema: &Schema) -> Result<Schema, TransformError> {
        let mut out = match self.whole() {
            Some(kind) => schema.basics(kind),
            None => {
                let mut out = schema.basics(Type::Struct);
                for field in &schema.fields {
                    let field_schema = match self.cast_for(&field.name) {
                        Some(kind) => {
                            let mut cast = Schema::of(kind).optional(field.schema.optional);
                            if let Some(default) = &field.schema.default {
                                cast.default =
                                    Some(cast_value(Some(&field.schema), default, kind)?);
                            }
                            Arc::new(cast)
                        }
                        None => Arc::clone(&field.schema),
                    };
                    super::fields::add_field(&mut out, &field.name, field_schema)?;
                }
                out
            }
        };
        out.optional = schema.optional;
        if let Some(default) = &schema.default {
            out.default = Some(cast_value(Some(schema), default, out.kind)?);
        }
        Ok(out)
    }
}

impl Transform for Cast {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        const PURPOSE: &str = "cast types";
        if self.target.side(record).is_null() {
            return Ok(true);
        }
        let (schema, value) = self.target.side(record).take(cache)?;
        let Some(schema) = schema else {
            let out = match self.whole() {
                Some(kind) => cast_value(None, &value, kind)?,
                None => {
                    let map = require_map(&value, PURPOSE)?;
                    let mut out = map.clone();
                    for (field, kind) in &self.casts {
                        let Some(field) = field else { continue };
                        let v = Value::map_get(map, field).unwrap_or(&Value::Null);
                        Value::map_put(&mut out, field, cast_value(None, v, *kind)?);
                    }
                    Value::Map(out)
                }
            };
            self.target.side(record).set(None, out);
            return Ok(true);
        };
        let updated = {
            let mut schemas = std::mem::take(&mut self.schemas);
            let this = &*self;
            let out = schemas.get(&schema, |s| this.updated_schema(s));
            self.schemas = schemas;
            out?
        };
        if let Some(kind) = self.whole() {
            let out = cast_value(Some(&schema), &value, kind)?;
            self.target.side(record).set(Some(updated), out);
            return Ok(true);
        }
        let original = require_struct(&value, PURPOSE)?;
        let mut out = Struct::new(Arc::clone(&updated));
        for (index, field) in original.schema.fields.iter().enumerate() {
            let v = original.value(index, self.with_default);
            let v = match self.cast_for(&field.name) {
                Some(kind) => cast_value(Some(&field.schema), &v, kind)?,
                None => v,
            };
            let at = updated.field_index(&field.name).unwrap_or(index);
            out.put(at, v).map_err(TransformError::data)?;
        }
        self.target
            .side(record)
            .set(Some(updated), Value::Struct(out));
        Ok(true)
    }
}

/// Cast's `castValueToType`.
fn cast_value(
    schema: Option<&Schema>,
    value: &Value,
    target: Type,
) -> Result<Value, TransformError> {
    if value.is_null() {
        return Ok(Value::Null);
    }
    let inferred = match schema {
        Some(s) => s.kind,
        None => value.schemaless_type().ok_or_else(|| {
            TransformError::data(format!(
                "Cast transformation was passed a value of type class {} which is not supported by Connect's data API",
                value.java_class()
            ))
        })?,
    };
    if matches!(inferred, Type::Array | Type::Map | Type::Struct) {
        return Err(TransformError::data(format!(
            "Cast transformation does not support casting from {}; supported types are {INPUT_TYPES}",
            inferred.java_name()
        )));
    }
    // Logical values go as their encoded form, except to strings.
    let mut value = value.clone();
    if let Some(s) = schema
        && target != Type::String
        && let Value::Date(millis) = value
    {
        value = match s.name.as_deref() {
            Some(DATE) => Value::Int32(millis.div_euclid(MILLIS_PER_DAY) as i32),
            Some(TIME) => Value::Int32(millis as i32),
            Some(TIMESTAMP) => Value::Int64(millis),
            _ => value,
        };
    }
    let range = || {
        TransformError::data(format!(
            "Value ({}) was out of range for requested data type",
            java::to_java_string(&value)
        ))
    };
    let unexpected = || {
        TransformError::data(format!(
            "Unexpected type in Cast transformation: class {}",
            value.java_class()
        ))
    };
    // Java's Number.xxxValue(): integers truncate, floats convert through int or long.
    let as_long = |v: &Value| -> Option<i64> {
        Some(match v {
            Value::Int8(x) => i64::from(*x),
            Value::Int16(x) => i64::from(*x),
            Value::Int32(x) => i64::from(*x),
            Value::Int64(x) => *x,
            Value::Float32(x) => *x as i64,
            Value::Float64(x) => *x as i64,
            Value::Decimal(u, s) => java::decimal_to_i64(*u, *s),
            _ => return None,
        })
    };
    let as_int = |v: &Value| -> Option<i32> {
        Some(match v {
            Value::Float32(x) => *x as i32,
            Value::Float64(x) => *x as i32,
            other => as_long(other)? as i32,
        })
    };
    let as_double = |v: &Value| -> Option<f64> {
        Some(match v {
            Value::Int8(x) => f64::from(*x),
            Value::Int16(x) => f64::from(*x),
            Value::Int32(x) => f64::from(*x),
            Value::Int64(x) => *x as f64,
            Value::Float32(x) => f64::from(*x),
            Value::Float64(x) => *x,
            Value::Decimal(u, s) => java::decimal_to_f64(*u, *s),
            _ => return None,
        })
    };
    let as_float = |v: &Value| -> Option<f32> {
        Some(match v {
            Value::Int64(x) => *x as f32,
            Value::Int32(x) => *x as f32,
            other => as_double(other)? as f32,
        })
    };
    let truth = |b: bool| i64::from(b);
    Ok(match target {
        Type::Int8 | Type::Int16 | Type::Int32 | Type::Int64 => {
            let n: i64 = match &value {
                Value::Boolean(b) => truth(*b),
                Value::String(s) => match target {
                    Type::Int8 => i64::from(java::parse_integer::<i8>(s).ok_or_else(range)?),
                    Type::Int16 => i64::from(java::parse_integer::<i16>(s).ok_or_else(range)?),
                    Type::Int32 => i64::from(java::parse_integer::<i32>(s).ok_or_else(range)?),
                    _ => java::parse_integer::<i64>(s).ok_or_else(range)?,
                },
                other => match target {
                    Type::Int64 => as_long(other).ok_or_else(unexpected)?,
                    _ => i64::from(as_int(other).ok_or_else(unexpected)?),
                },
            };
            match target {
                Type::Int8 => Value::Int8(n as i8),
                Type::Int16 => Value::Int16(n as i16),
                Type::Int32 => Value::Int32(n as i32),
                _ => Value::Int64(n),
            }
        }
        Type::Float32 => Value::Float32(match &value {
            Value::Boolean(b) => truth(*b) as f32,
            Value::String(s) => java::parse_double(s).ok_or_else(range)? as f32,
            other => as_float(other).ok_or_else(unexpected)?,
        }),
        Type::Float64 => Value::Float64(match &value {
            Value::Boolean(b) => truth(*b) as f64,
            Value::String(s) => java::parse_double(s).ok_or_else(range)?,
            other => as_double(other).ok_or_else(unexpected)?,
        }),
        Type::Boolean => Value::Boolean(match &value {
            Value::Boolean(b) => *b,
            Value::String(s) => java::parse_boolean(s),
            other => as_long(other).ok_or_else(unexpected)? != 0,
        }),
        Type::String => Value::String(java::to_java_string(&value)),
        other => {
            return Err(TransformError::data(format!(
                "{} is not supported in the Cast transformation.",
                other.java_name()
            )));
        }
    })
}

// ---------------------------------------------------------------------------------------------

/// TimestampConverter's representations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repr {
    String,
    Unix,
    Date,
    Time,
    Timestamp,
}

/// TimestampConverter: a field, or the whole key or value, between timestamp representations.
pub struct TimestampConverter {
    target: Target,
    field: String,
    to: Repr,
    format: Option<DateFormat>,
    precision: &'static str,
    with_default: bool,
    schemas: LastSchema,
}

/// TimestampConverter's options.
pub const TIMESTAMP_CONVERTER: &[OptionDef] = &[
    OptionDef {
        name: "field",
        ty: "STRING",
        default: Some(""),
        required: false,
        doc: "The field containing the timestamp, or empty if the entire value is a timestamp.",
    },
    OptionDef {
        name: "target.type",
        ty: "STRING",
        default: None,
        required: true,
        doc: "The desired timestamp representation: string, unix, Date, Time, or Timestamp.",
    },
    OptionDef {
        name: "format",
        ty: "STRING",
        default: Some(""),
        required: false,
        doc: "A java.text.SimpleDateFormat pattern (UTC): the output when target.type=string, and how input strings are parsed.",
    },
    OptionDef {
        name: "unix.precision",
        ty: "STRING",
        default: Some("milliseconds"),
        required: false,
        doc: "The precision of unix timestamps, in and out: seconds, milliseconds, microseconds, or nanoseconds.",
    },
    REPLACE_NULL,
];

const PRECISIONS: &[&str] = &["nanoseconds", "microseconds", "milliseconds", "seconds"];

impl TimestampConverter {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        let to = match options.one_of(
            "target.type",
            &["string", "unix", "Date", "Time", "Timestamp"],
            None,
        )? {
            "string" => Repr::String,
            "unix" => Repr::Unix,
            "Date" => Repr::Date,
            "Time" => Repr::Time,
            _ => Repr::Timestamp,
        };
        let pattern = options.string("format").unwrap_or("");
        if to == Repr::String && pattern.trim().is_empty() {
            return Err(OptionError::new(
                "format",
                "TimestampConverter requires format option to be specified when using string timestamps",
            ));
        }
        let format = if pattern.trim().is_empty() {
            None
        } else {
            Some(DateFormat::new(pattern).map_err(|e| {
                OptionError::new(
                    "format",
                    format!("TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: {pattern} ({e})"),
                )
            })?)
        };
        let precision = options.one_of("unix.precision", PRECISIONS, Some("milliseconds"))?;
        let precision = PRECISIONS
            .iter()
            .find(|p| **p == precision)
            .copied()
            .unwrap_or("milliseconds");
        Ok(Self {
            target,
            field: options.string("field").unwrap_or("").to_owned(),
            to,
            format,
            precision,
            with_default: options.boolean(REPLACE_NULL.name, true)?,
            schemas: LastSchema::default(),
        })
    }

    fn type_schema(&self, optional: bool) -> Schema {
        match self.to {
            Repr::String => Schema::of(Type::String),
            Repr::Unix => Schema::of(Type::Int64),
            Repr::Date => Schema::logical(Type::Int32, DATE),
            Repr::Time => Schema::logical(Type::Int32, TIME),
            Repr::Timestamp => Schema::logical(Type::Int64, TIMESTAMP),
        }
        .optional(optional)
    }

    /// `convertTimestamp(value, from)`; `from` `None`: inferred from the value.
    fn convert(&self, value: &Value, from: Option<Repr>) -> Result<Value, TransformError> {
        if value.is_null() {
            return Ok(Value::Null);
        }
        let from = match from {
            Some(f) => f,
            None => match value {
                Value::Date(_) => Repr::Timestamp,
                Value::Int64(_) => Repr::Unix,
                Value::String(_) => Repr::String,
                other => {
                    return Err(TransformError::data(format!(
                        "TimestampConverter does not support class {} objects as timestamps",
                        other.java_class()
                    )));
                }
            },
        };
        let millis = match from {
            Repr::String => {
                let Value::String(text) = value else {
                    return Err(TransformError::data(format!(
                        "Expected string timestamp to be a String, but found class {}",
                        value.java_class()
                    )));
                };
                let format = self.format.as_ref().ok_or_else(|| TransformError {
                    kind: "NullPointerException",
                    message: "no format to parse string timestamps with: set format".to_owned(),
                })?;
                format.parse(text).ok_or_else(|| {
                    TransformError::data(format!(
                        "Could not parse timestamp: value ({text}) does not match pattern ({})",
                        format.pattern()
                    ))
                })?
            }
            Repr::Unix => {
                let Value::Int64(n) = value else {
                    return Err(TransformError::data(format!(
                        "Expected Unix timestamp to be a Long, but found class {}",
                        value.java_class()
                    )));
                };
                match self.precision {
                    "seconds" => n.saturating_mul(1000),
                    "microseconds" => n / 1000,
                    "nanoseconds" => n / 1_000_000,
                    _ => *n,
                }
            }
            repr => {
                let Value::Date(millis) = value else {
                    let name = match repr {
                        Repr::Date => "Date",
                        Repr::Time => "Time",
                        _ => "Timestamp",
                    };
                    return Err(TransformError::data(format!(
                        "Expected {name} to be a java.util.Date, but found class {}",
                        value.java_class()
                    )));
                };
                *millis
            }
        };
        Ok(match self.to {
            Repr::String => Value::String(
                self.format
                    .as_ref()
                    .map_or_else(String::new, |f| f.format(millis)),
            ),
            Repr::Unix => Value::Int64(match self.precision {
                "seconds" => millis / 1000,
                "microseconds" => millis.saturating_mul(1000),
                "nanoseconds" => millis.saturating_mul(1_000_000),
                _ => millis,
            }),
            Repr::Date => Value::Date(
                millis
                    .checked_sub(millis.rem_euclid(MILLIS_PER_DAY))
                    .ok_or_else(|| {
                        TransformError::data(format!("{millis} ms is out of range for a Date"))
                    })?,
            ),
            Repr::Time => Value::Date(millis.rem_euclid(MILLIS_PER_DAY)),
            Repr::Timestamp => Value::Date(millis),
        })
    }
}

/// `timestampTypeFromSchema`.
fn repr_of(schema: &Schema) -> Result<Repr, TransformError> {
    match schema.name.as_deref() {
        Some(TIMESTAMP) => return Ok(Repr::Timestamp),
        Some(DATE) => return Ok(Repr::Date),
        Some(TIME) => return Ok(Repr::Time),
        _ => {}
    }
    match schema.kind {
        Type::String => Ok(Repr::String),
        Type::Int64 => Ok(Repr::Unix),
        _ => Err(TransformError {
            kind: "ConnectException",
            message: format!(
                "Schema {} does not correspond to a known timestamp type format",
                schema.describe()
            ),
        }),
    }
}

impl Transform for TimestampConverter {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        const PURPOSE: &str = "converting timestamp formats";
        let (schema, value): (Option<SchemaRef>, Value) = self.target.side(record).take(cache)?;
        let Some(schema) = schema else {
            let out = if value.is_null() || self.field.is_empty() {
                self.convert(&value, None)?
            } else {
                let map = require_map(&value, PURPOSE)?;
                let mut out = map.clone();
                let v = Value::map_get(map, &self.field).unwrap_or(&Value::Null);
                Value::map_put(&mut out, &self.field, self.convert(v, None)?);
                Value::Map(out)
            };
            self.target.side(record).set(None, out);
            return Ok(true);
        };
        if self.field.is_empty() {
            let from = repr_of(&schema)?;
            let out = self.convert(&value, Some(from))?;
            let updated = Arc::new(self.type_schema(schema.optional));
            self.target.side(record).set(Some(updated), out);
            return Ok(true);
        }
        let original = match &value {
            Value::Null => None,
            other => Some(require_struct(other, PURPOSE)?),
        };
        let updated = {
            let mut schemas = std::mem::take(&mut self.schemas);
            let this = &*self;
            let out = schemas.get(&schema, |s| {
                let mut out = s.basics(Type::Struct);
                for field in &s.fields {
                    let field_schema = if field.name == this.field {
                        Arc::new(this.type_schema(field.schema.optional))
                    } else {
                        Arc::clone(&field.schema)
                    };
                    super::fields::add_field(&mut out, &field.name, field_schema)?;
                }
                out.optional = s.optional;
                Ok(out)
            });
            self.schemas = schemas;
            out?
        };
        let Some(original) = original else {
            self.target.side(record).set(Some(updated), Value::Null);
            return Ok(true);
        };
        let mut out = Struct::new(Arc::clone(&updated));
        for (index, field) in original.schema.fields.iter().enumerate() {
            let v = original.value(index, self.with_default);
            let v = if field.name == self.field {
                self.convert(&v, Some(repr_of(&field.schema)?))?
            } else {
                v
            };
            out.put_named(&field.name, v)
                .map_err(TransformError::data)?;
        }
        self.target
            .side(record)
            .set(Some(updated), Value::Struct(out));
        Ok(true)
    }
}
