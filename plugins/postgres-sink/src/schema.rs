//! Kafka Connect schemas (JSON text, as the JsonConverter writes them) as PostgreSQL columns,
//! and a payload's values as the text of statement parameters.
//!
//! | Connect schema | PostgreSQL column | parameter text |
//! |---|---|---|
//! | `int8`, `int16`, `int32`, `int64` | `SMALLINT`, `SMALLINT`, `INTEGER`, `BIGINT` | the number |
//! | `float`, `double` | `REAL`, `DOUBLE PRECISION` | the number (`NaN`, `Infinity` as given) |
//! | `boolean` | `BOOLEAN` | `true`/`false` |
//! | `string` | `TEXT` | the text |
//! | `bytes` | `BYTEA` | `\x` hex of the base64 payload |
//! | `Decimal` (scale `s`) | `NUMERIC` | the decimal of the base64 unscaled bytes (or a number) |
//! | `Date` | `DATE` | from days since the epoch |
//! | `Time` | `TIME` | from milliseconds since midnight |
//! | `Timestamp` | `TIMESTAMP` | from milliseconds since the epoch (UTC) |
//! | `struct`, `array`, `map` | `JSONB` | the value as JSON |

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use wasm_connect_postgres_wire::values;
use wasm_connect_sdk::serde_json::{self, Value};

/// A field's type, as far as a column needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
    Bytes,
    /// `org.apache.kafka.connect.data.Decimal` of this scale.
    Decimal(u32),
    Date,
    Time,
    Timestamp,
    /// Structs, arrays and maps, kept as JSON.
    Json,
}

/// One field of a struct schema (or a primitive schema's only value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: FieldType,
    pub optional: bool,
}

/// A parsed schema: the fields of a struct, or `None` for a primitive schema's one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A struct: its fields, in order.
    Struct(Vec<Field>),
    /// A primitive (or nested) value; its column name comes from `pk.fields`.
    Primitive(FieldType, bool),
}

/// Parse a schema's JSON text.
pub fn parse(text: &str) -> Result<Shape, String> {
    let schema: Value =
        serde_json::from_str(text).map_err(|e| format!("the record's schema is not JSON ({e})"))?;
    let optional = schema["optional"].as_bool().unwrap_or(false);
    if schema["type"] == "struct" {
        let fields = schema["fields"]
            .as_array()
            .ok_or("the record's struct schema has no \"fields\" list")?;
        let fields = fields
            .iter()
            .map(|f| {
                let name = f["field"]
                    .as_str()
                    .ok_or("a field of the record's schema has no \"field\" name")?;
                Ok(Field {
                    name: name.to_owned(),
                    ty: field_type(f)?,
                    optional: f["optional"].as_bool().unwrap_or(false),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Shape::Struct(fields))
    } else {
        Ok(Shape::Primitive(field_type(&schema)?, optional))
    }
}

fn field_type(schema: &Value) -> Result<FieldType, String> {
    let ty = schema["type"]
        .as_str()
        .ok_or("a schema without a string \"type\"")?;
    Ok(match (schema["name"].as_str(), ty) {
        (Some("org.apache.kafka.connect.data.Decimal"), _) => {
            let scale = &schema["parameters"]["scale"];
            let scale = scale
                .as_str()
                .and_then(|s| s.parse().ok())
                .or_else(|| scale.as_u64().and_then(|s| u32::try_from(s).ok()))
                .ok_or("a Decimal schema without its \"scale\" parameter")?;
            FieldType::Decimal(scale)
        }
        (Some("org.apache.kafka.connect.data.Date"), _) => FieldType::Date,
        (Some("org.apache.kafka.connect.data.Time"), _) => FieldType::Time,
        (Some("org.apache.kafka.connect.data.Timestamp"), _) => FieldType::Timestamp,
        (_, "int8") => FieldType::Int8,
        (_, "int16") => FieldType::Int16,
        (_, "int32") => FieldType::Int32,
        (_, "int64") => FieldType::Int64,
        (_, "float") => FieldType::Float32,
        (_, "double") => FieldType::Float64,
        (_, "boolean") => FieldType::Boolean,
        (_, "string") => FieldType::String,
        (_, "bytes") => FieldType::Bytes,
        (_, "struct" | "array" | "map") => FieldType::Json,
        (_, other) => return Err(format!("a field of unknown Connect type {other:?}")),
    })
}

impl FieldType {
    /// The column type `auto.create` and `auto.evolve` give the field (Kafka Connect JDBC's
    /// PostgreSQL dialect's choice).
    pub fn sql_type(self) -> &'static str {
        match self {
            FieldType::Int8 | FieldType::Int16 => "SMALLINT",
            FieldType::Int32 => "INTEGER",
            FieldType::Int64 => "BIGINT",
            FieldType::Float32 => "REAL",
            FieldType::Float64 => "DOUBLE PRECISION",
            FieldType::Boolean => "BOOLEAN",
            FieldType::String => "TEXT",
            FieldType::Bytes => "BYTEA",
            FieldType::Decimal(_) => "NUMERIC",
            FieldType::Date => "DATE",
            FieldType::Time => "TIME",
            FieldType::Timestamp => "TIMESTAMP",
            FieldType::Json => "JSONB",
        }
    }

    /// The parameter text of a payload value of this type (`None`: SQL NULL); an error says
    /// what does not fit.
    pub fn param(self, value: &Value) -> Result<Option<String>, String> {
        if value.is_null() {
            return Ok(None);
        }
        let bad = || format!("{value} is not a {self:?} payload");
        let int = || value.as_i64().ok_or_else(bad);
        Ok(Some(match self {
            FieldType::Int8 | FieldType::Int16 | FieldType::Int32 | FieldType::Int64 => {
                int()?.to_string()
            }
            FieldType::Float32 | FieldType::Float64 => match value {
                Value::Number(n) => n.to_string(),
                Value::String(s) if matches!(s.as_str(), "NaN" | "Infinity" | "-Infinity") => {
                    s.clone()
                }
                _ => return Err(bad()),
            },
            FieldType::Boolean => value.as_bool().ok_or_else(bad)?.to_string(),
            FieldType::String => value.as_str().ok_or_else(bad)?.to_owned(),
            FieldType::Bytes => values::format_bytea_hex(&decode(value)?),
            FieldType::Decimal(scale) => match value {
                Value::Number(n) => n.to_string(),
                _ => values::decimal_from_unscaled_bytes(&decode(value)?, scale),
            },
            FieldType::Date => values::format_date(int()?),
            FieldType::Time => {
                let ms = int()?;
                if !(0..86_400_000).contains(&ms) {
                    return Err(format!("{ms} ms is not a time of day"));
                }
                format!(
                    "{:02}:{:02}:{:02}.{:03}",
                    ms / 3_600_000,
                    ms / 60_000 % 60,
                    ms / 1000 % 60,
                    ms % 1000
                )
            }
            FieldType::Timestamp => {
                let ms = int()?;
                values::format_timestamp_micros(ms.checked_mul(1000).ok_or_else(bad)?)
            }
            FieldType::Json => value.to_string(),
        }))
    }
}

/// The bytes of a base64 payload.
fn decode(value: &Value) -> Result<Vec<u8>, String> {
    let text = value
        .as_str()
        .ok_or_else(|| format!("{value} is not base64 text"))?;
    BASE64
        .decode(text)
        .map_err(|e| format!("{text:?} is not base64 ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_connect_sdk::json;

    #[test]
    fn schemas_become_columns() {
        let shape = parse(
            r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},"field":"price"},{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"at"}],"optional":false,"name":"orders"}"#,
        )
        .unwrap();
        let Shape::Struct(fields) = shape else {
            panic!("a struct")
        };
        let types: Vec<(&str, &str, bool)> = fields
            .iter()
            .map(|f| (f.name.as_str(), f.ty.sql_type(), f.optional))
            .collect();
        assert_eq!(
            types,
            vec![
                ("id", "INTEGER", false),
                ("price", "NUMERIC", true),
                ("at", "TIMESTAMP", true)
            ]
        );
        assert_eq!(
            parse(r#"{"type":"int64","optional":false}"#).unwrap(),
            Shape::Primitive(FieldType::Int64, false)
        );
        assert!(parse(r#"{"type":"uuid"}"#).unwrap_err().contains("uuid"));
    }

    #[test]
    fn payloads_become_parameter_text() {
        let p = |ty: FieldType, v: Value| ty.param(&v).unwrap();
        assert_eq!(p(FieldType::Int64, json!(-7)), Some("-7".to_owned()));
        // 12.50 at scale 2: unscaled 1250 = 0x04E2.
        assert_eq!(
            p(FieldType::Decimal(2), json!("BOI=")),
            Some("12.50".to_owned())
        );
        assert_eq!(
            p(FieldType::Date, json!(19782)),
            Some("2024-02-29".to_owned())
        );
        assert_eq!(
            p(FieldType::Time, json!(45_296_789)),
            Some("12:34:56.789".to_owned())
        );
        assert_eq!(
            p(FieldType::Timestamp, json!(1_709_251_199_123_i64)),
            Some("2024-02-29 23:59:59.123000".to_owned())
        );
        assert_eq!(
            p(FieldType::Bytes, json!("AP8=")),
            Some("\\x00ff".to_owned())
        );
        assert_eq!(
            p(FieldType::Json, json!({"a": [1]})),
            Some(r#"{"a":[1]}"#.to_owned())
        );
        assert_eq!(p(FieldType::String, Value::Null), None);
        assert!(FieldType::Int32.param(&json!("x")).is_err());
        assert!(FieldType::Time.param(&json!(90_000_000)).is_err());
    }
}
