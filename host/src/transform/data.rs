//! Kafka Connect's data model (`org.apache.kafka.connect.data`), as far as single message
//! transforms see it: schemas, and values shaped as the Java objects Connect hands them.
//!
//! Values mirror Java's classes, not schema types, because Connect's transforms decide by class
//! in schemaless data (`Cast` infers a type from `Long` or `String`, `TimestampConverter` from
//! `java.util.Date`): a `Date` logical value is [`Value::Date`] (milliseconds, like
//! `java.util.Date`), a `Decimal` is [`Value::Decimal`] (`BigDecimal`), whatever schema they sit
//! under.

use std::sync::Arc;

/// A schema type (`Schema.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
    Bytes,
    Array,
    Map,
    Struct,
}

impl Type {
    /// The name in JsonConverter's schema JSON (`int8`, ..., `struct`).
    pub fn json_name(self) -> &'static str {
        match self {
            Type::Int8 => "int8",
            Type::Int16 => "int16",
            Type::Int32 => "int32",
            Type::Int64 => "int64",
            Type::Float32 => "float",
            Type::Float64 => "double",
            Type::Boolean => "boolean",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::Array => "array",
            Type::Map => "map",
            Type::Struct => "struct",
        }
    }

    /// The type named `name` in JsonConverter's schema JSON.
    pub fn from_json_name(name: &str) -> Option<Type> {
        Some(match name {
            "int8" => Type::Int8,
            "int16" => Type::Int16,
            "int32" => Type::Int32,
            "int64" => Type::Int64,
            "float" => Type::Float32,
            "double" => Type::Float64,
            "boolean" => Type::Boolean,
            "string" => Type::String,
            "bytes" => Type::Bytes,
            "array" => Type::Array,
            "map" => Type::Map,
            "struct" => Type::Struct,
            _ => return None,
        })
    }

    /// Java's enum name (`INT8`, ..., `STRUCT`), as Connect's messages print it.
    pub fn java_name(self) -> &'static str {
        match self {
            Type::Int8 => "INT8",
            Type::Int16 => "INT16",
            Type::Int32 => "INT32",
            Type::Int64 => "INT64",
            Type::Float32 => "FLOAT32",
            Type::Float64 => "FLOAT64",
            Type::Boolean => "BOOLEAN",
            Type::String => "STRING",
            Type::Bytes => "BYTES",
            Type::Array => "ARRAY",
            Type::Map => "MAP",
            Type::Struct => "STRUCT",
        }
    }

    /// The type of a `Schema.Type` name, case-insensitive (Cast's spec).
    pub fn from_java_name(name: &str) -> Option<Type> {
        Some(match name.to_ascii_uppercase().as_str() {
            "INT8" => Type::Int8,
            "INT16" => Type::Int16,
            "INT32" => Type::Int32,
            "INT64" => Type::Int64,
            "FLOAT32" => Type::Float32,
            "FLOAT64" => Type::Float64,
            "BOOLEAN" => Type::Boolean,
            "STRING" => Type::String,
            "BYTES" => Type::Bytes,
            "ARRAY" => Type::Array,
            "MAP" => Type::Map,
            "STRUCT" => Type::Struct,
            _ => return None,
        })
    }
}

/// Logical type names.
pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
/// Days since the epoch, as int32.
pub const DATE: &str = "org.apache.kafka.connect.data.Date";
/// Milliseconds since midnight, as int32.
pub const TIME: &str = "org.apache.kafka.connect.data.Time";
/// Milliseconds since the epoch, as int64.
pub const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
/// The `Decimal` schema parameter holding the scale.
pub const SCALE: &str = "scale";

/// A shared schema.
pub type SchemaRef = Arc<Schema>;

/// A Connect schema (`ConnectSchema`). Equality is structural, as Java's `ConnectSchema.equals`.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub kind: Type,
    pub optional: bool,
    pub default: Option<Value>,
    pub name: Option<String>,
    pub version: Option<i32>,
    pub doc: Option<String>,
    /// In order; `None` when the schema has none (Java's `null`).
    pub parameters: Option<Vec<(String, String)>>,
    /// A struct's fields, in order.
    pub fields: Vec<Field>,
    /// A map's key schema.
    pub key: Option<SchemaRef>,
    /// A map's value schema or an array's element schema.
    pub value: Option<SchemaRef>,
}

/// A struct field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub schema: SchemaRef,
}

impl Schema {
    /// A schema of `kind` with nothing else set (required, no name): `SchemaBuilder.type(kind)`.
    pub fn of(kind: Type) -> Schema {
        Schema {
            kind,
            optional: false,
            default: None,
            name: None,
            version: None,
            doc: None,
            parameters: None,
            fields: Vec::new(),
            key: None,
            value: None,
        }
    }

    /// This schema made optional.
    pub fn optional(mut self, optional: bool) -> Schema {
        self.optional = optional;
        self
    }

    /// A logical type's schema (`Timestamp.builder()` and the like: version 1).
    pub fn logical(kind: Type, name: &str) -> Schema {
        Schema {
            name: Some(name.to_owned()),
            version: Some(1),
            ..Schema::of(kind)
        }
    }

    /// `SchemaUtil.copySchemaBasics(self, builder of kind)`: name, version, doc and parameters
    /// kept; optional and default not.
    pub fn basics(&self, kind: Type) -> Schema {
        Schema {
            name: self.name.clone(),
            version: self.version,
            doc: self.doc.clone(),
            parameters: self.parameters.clone(),
            ..Schema::of(kind)
        }
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The index of the field named `name`.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// A parameter's value.
    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters
            .as_ref()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether this is the logical type `name`.
    pub fn is_logical(&self, name: &str) -> bool {
        self.name.as_deref() == Some(name)
    }

    /// How Java's `Schema.toString()` prints it in messages (ConnectSchema's form).
    pub fn describe(&self) -> String {
        match &self.name {
            Some(name) => format!("Schema{{{name}:{}}}", self.kind.java_name()),
            None => format!("Schema{{{}}}", self.kind.java_name()),
        }
    }
}

/// A struct value: its schema and one value per field, in the schema's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Struct {
    pub schema: SchemaRef,
    pub values: Vec<Value>,
}

impl Struct {
    /// A struct of `schema` with every field null.
    pub fn new(schema: SchemaRef) -> Struct {
        let values = vec![Value::Null; schema.fields.len()];
        Struct { schema, values }
    }

    /// `Struct.get(field)`: the value, or the field's default when it is null.
    pub fn get(&self, index: usize) -> &Value {
        match &self.values[index] {
            Value::Null => self.schema.fields[index]
                .schema
                .default
                .as_ref()
                .unwrap_or(&Value::Null),
            value => value,
        }
    }

    /// `Struct.get` (`with_default`) or `getWithoutDefault` of field `index`, copied
    /// (`replace.null.with.default`).
    pub fn value(&self, index: usize, with_default: bool) -> Value {
        if with_default {
            self.get(index).clone()
        } else {
            self.values[index].clone()
        }
    }

    /// `Struct.get` (`with_default`) or `getWithoutDefault`, by field name; `None`: no such
    /// field.
    pub fn get_named(&self, name: &str, with_default: bool) -> Option<&Value> {
        let index = self.schema.field_index(name)?;
        Some(if with_default {
            self.get(index)
        } else {
            &self.values[index]
        })
    }

    /// `Struct.put(field, value)`: the value is checked against the field's schema, as Java's
    /// `ConnectSchema.validateValue`.
    pub fn put(&mut self, index: usize, value: Value) -> Result<(), String> {
        let field = &self.schema.fields[index];
        validate(&field.schema, &value)
            .map_err(|e| format!("{e} for field: \"{}\"", field.name))?;
        self.values[index] = value;
        Ok(())
    }

    /// `put` by field name.
    pub fn put_named(&mut self, name: &str, value: Value) -> Result<(), String> {
        let index = self
            .schema
            .field_index(name)
            .ok_or_else(|| format!("{name} is not a valid field name"))?;
        self.put(index, value)
    }
}

/// A key, value or field value, shaped as the Java object Connect would hold.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Boolean(bool),
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float32(f32),
    Float64(f64),
    String(String),
    Bytes(Vec<u8>),
    Array(Vec<Value>),
    /// Entries in order (a Java `Map`; schemaless maps have `String` keys).
    Map(Vec<(Value, Value)>),
    Struct(Struct),
    /// A `java.util.Date`: milliseconds since the epoch (the Date, Time and Timestamp logical
    /// types).
    Date(i64),
    /// A `BigDecimal`: unscaled value and scale.
    Decimal(i128, i32),
}

impl Value {
    /// Whether it is null.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The Java class name Connect's messages print for it (`nullSafeClassName`).
    pub fn java_class(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Boolean(_) => "java.lang.Boolean",
            Value::Int8(_) => "java.lang.Byte",
            Value::Int16(_) => "java.lang.Short",
            Value::Int32(_) => "java.lang.Integer",
            Value::Int64(_) => "java.lang.Long",
            Value::Float32(_) => "java.lang.Float",
            Value::Float64(_) => "java.lang.Double",
            Value::String(_) => "java.lang.String",
            Value::Bytes(_) => "[B",
            Value::Array(_) => "java.util.ArrayList",
            Value::Map(_) => "java.util.HashMap",
            Value::Struct(_) => "org.apache.kafka.connect.data.Struct",
            Value::Date(_) => "java.util.Date",
            Value::Decimal(..) => "java.math.BigDecimal",
        }
    }

    /// `ConnectSchema.schemaType(value.getClass())`: the type a schemaless value has; `None`
    /// for classes without one (`Date`, `BigDecimal`).
    pub fn schemaless_type(&self) -> Option<Type> {
        Some(match self {
            Value::Null | Value::Date(_) | Value::Decimal(..) => return None,
            Value::Boolean(_) => Type::Boolean,
            Value::Int8(_) => Type::Int8,
            Value::Int16(_) => Type::Int16,
            Value::Int32(_) => Type::Int32,
            Value::Int64(_) => Type::Int64,
            Value::Float32(_) => Type::Float32,
            Value::Float64(_) => Type::Float64,
            Value::String(_) => Type::String,
            Value::Bytes(_) => Type::Bytes,
            Value::Array(_) => Type::Array,
            Value::Map(_) => Type::Map,
            Value::Struct(_) => Type::Struct,
        })
    }

    /// A schemaless map's entry for `key`.
    pub fn map_get<'v>(entries: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
        entries
            .iter()
            .find(|(k, _)| matches!(k, Value::String(s) if s == key))
            .map(|(_, v)| v)
    }

    /// Java's `map.put(key, value)` on a schemaless map: replaced in place, else appended.
    pub fn map_put(entries: &mut Vec<(Value, Value)>, key: &str, value: Value) {
        match entries
            .iter_mut()
            .find(|(k, _)| matches!(k, Value::String(s) if s == key))
        {
            Some(entry) => entry.1 = value,
            None => entries.push((Value::String(key.to_owned()), value)),
        }
    }

    /// Java's `map.remove(key)`.
    pub fn map_remove(entries: &mut Vec<(Value, Value)>, key: &str) {
        entries.retain(|(k, _)| !matches!(k, Value::String(s) if s == key));
    }
}

/// `ConnectSchema.validateValue(schema, value)`: whether `value` may stand under `schema`.
pub fn validate(schema: &Schema, value: &Value) -> Result<(), String> {
    if value.is_null() {
        return if schema.optional || schema.default.is_some() {
            Ok(())
        } else {
            Err("Invalid value: null used for required field".to_owned())
        };
    }
    let logical_ok = match schema.name.as_deref() {
        Some(DECIMAL) => Some(matches!(value, Value::Decimal(..))),
        Some(DATE | TIME | TIMESTAMP) => Some(matches!(value, Value::Date(_))),
        _ => None,
    };
    let ok = match logical_ok {
        Some(ok) => ok,
        None => matches!(
            (schema.kind, value),
            (Type::Int8, Value::Int8(_))
                | (Type::Int16, Value::Int16(_))
                | (Type::Int32, Value::Int32(_))
                | (Type::Int64, Value::Int64(_))
                | (Type::Float32, Value::Float32(_))
                | (Type::Float64, Value::Float64(_))
                | (Type::Boolean, Value::Boolean(_))
                | (Type::String, Value::String(_))
                | (Type::Bytes, Value::Bytes(_))
                | (Type::Array, Value::Array(_))
                | (Type::Map, Value::Map(_))
                | (Type::Struct, Value::Struct(_))
        ),
    };
    if !ok {
        return Err(format!(
            "Invalid Java object for schema {} with type {}: class {}",
            schema.describe(),
            schema.kind.java_name(),
            value.java_class()
        ));
    }
    match value {
        Value::Struct(s) if !same_schema(&s.schema, schema) => Err(format!(
            "Struct schemas do not match. for schema {}",
            schema.describe()
        )),
        Value::Array(items) => {
            let Some(element) = &schema.value else {
                return Ok(());
            };
            items.iter().try_for_each(|item| validate(element, item))
        }
        Value::Map(entries) => {
            for (k, v) in entries {
                if let Some(key) = &schema.key {
                    validate(key, k)?;
                }
                if let Some(val) = &schema.value {
                    validate(val, v)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether `a` is `b`: the same schema object, or equal ones.
pub fn same_schema(a: &SchemaRef, b: &Schema) -> bool {
    std::ptr::eq(&**a, b) || **a == *b
}
