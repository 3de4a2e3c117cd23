//! PostgreSQL column types as Kafka Connect types: each result column's type (by OID and type
//! modifier) becomes the Connect type Kafka Connect's JDBC source gives it, and each text value
//! the payload Connect's JSON converter writes for that type.
//!
//! | PostgreSQL | Connect schema | JSON payload |
//! |---|---|---|
//! | `int2`, `int4`, `int8` | `int16`, `int32`, `int64` | number |
//! | `float4`, `float8` | `float32`, `float64` | number (`NaN`, `±Infinity` as strings) |
//! | `numeric(p,s)` | `Decimal` (`bytes`, scale `s`); with `numeric.mapping=best_fit` an integer type for `s = 0`, `p ≤ 18`, else `float64` | base64 of the unscaled value; number |
//! | `numeric` (no scale) | `string` | the number's text, exactly |
//! | `bool` | `boolean` | `true`/`false` |
//! | `timestamp`, `timestamptz` | `Timestamp` (`int64`, ms since the epoch, UTC) | number |
//! | `date` | `Date` (`int32`, days since the epoch) | number |
//! | `time`, `timetz` | `Time` (`int32`, ms since midnight) | number |
//! | `bytea` | `bytes` | base64 |
//! | `json`, `jsonb`, `text`, `varchar`, `char`, `uuid`, everything else | `string` | the value's text |

use wasm_connect_postgres_wire::values;
use wasm_connect_sdk::serde_json::{Value, json};

/// How a column's values are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `int2`.
    Int16,
    /// `int4`.
    Int32,
    /// `int8`.
    Int64,
    /// `float4`.
    Float32,
    /// `float8`, and numerics mapped by best fit with a fraction.
    Float64,
    /// `numeric(p,s)`: a Connect Decimal of scale `s`.
    Decimal(u32),
    /// `bool`.
    Boolean,
    /// `timestamp` and `timestamptz`.
    Timestamp,
    /// `date`.
    Date,
    /// `time` and `timetz`.
    Time,
    /// `bytea`.
    Bytes,
    /// Everything else, as the server's text.
    Text,
}

/// How numerics map (`numeric.mapping`, as in Kafka Connect's JDBC source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumericMapping {
    /// `none`: every constrained numeric is a Decimal.
    Decimal,
    /// `best_fit`: integers for scale 0 and precision up to 18, `float64` otherwise.
    BestFit,
}

impl Kind {
    /// The kind of a column of type `oid` with type modifier `typmod`.
    pub fn of(oid: u32, typmod: i32, numerics: NumericMapping) -> Kind {
        match oid {
            21 => Kind::Int16,
            23 | 26 => Kind::Int32,
            20 => Kind::Int64,
            700 => Kind::Float32,
            701 => Kind::Float64,
            16 => Kind::Boolean,
            1114 | 1184 => Kind::Timestamp,
            1082 => Kind::Date,
            1083 | 1266 => Kind::Time,
            17 => Kind::Bytes,
            1700 if typmod >= 4 => {
                let precision = ((typmod - 4) >> 16) as u32;
                let scale = ((typmod - 4) & 0xffff) as u32;
                match numerics {
                    NumericMapping::Decimal => Kind::Decimal(scale),
                    NumericMapping::BestFit if scale == 0 && precision <= 4 => Kind::Int16,
                    NumericMapping::BestFit if scale == 0 && precision <= 9 => Kind::Int32,
                    NumericMapping::BestFit if scale == 0 && precision <= 18 => Kind::Int64,
                    NumericMapping::BestFit => Kind::Float64,
                }
            }
            _ => Kind::Text,
        }
    }

    /// The JSON payload of a text value of this kind; an error says what did not parse.
    pub fn payload(self, text: &str) -> Result<Value, String> {
        let bad = || format!("cannot read {text:?} as {self:?}");
        Ok(match self {
            Kind::Int16 | Kind::Int32 | Kind::Int64 => {
                Value::from(text.parse::<i64>().map_err(|_| bad())?)
            }
            Kind::Float32 | Kind::Float64 => match text.parse::<f64>() {
                Ok(f) if f.is_finite() => json!(f),
                // JSON has no NaN or infinities; Connect's converter would refuse them too.
                Ok(_) => Value::String(text.to_owned()),
                Err(_) => return Err(bad()),
            },
            Kind::Decimal(scale) => {
                let bytes = values::decimal_unscaled_bytes(text, scale).ok_or_else(|| {
                    format!("cannot carry {text:?} as a Decimal of scale {scale} (NaN and infinities have no Decimal form)")
                })?;
                Value::String(base64(&bytes))
            }
            Kind::Boolean => Value::Bool(match text {
                "t" | "true" => true,
                "f" | "false" => false,
                _ => return Err(bad()),
            }),
            Kind::Timestamp => {
                let micros = values::parse_timestamp_micros(text).ok_or_else(bad)?;
                Value::from(match micros {
                    i64::MAX | i64::MIN => micros,
                    _ => micros.div_euclid(1000),
                })
            }
            Kind::Date => Value::from(values::parse_date(text).ok_or_else(bad)?),
            Kind::Time => Value::from(values::parse_time_micros(text).ok_or_else(bad)? / 1000),
            Kind::Bytes => Value::String(base64(&values::parse_bytea_hex(text).ok_or_else(bad)?)),
            Kind::Text => Value::String(text.to_owned()),
        })
    }
}

impl Kind {
    /// The Kafka Connect schema of a field of this kind, as the JsonConverter writes it
    /// (`type`, `optional`, then a logical type's `name`, `version` and `parameters`), with the
    /// field's name last.
    pub fn field_schema(self, field: &str, optional: bool) -> String {
        let (ty, logical) = match self {
            Kind::Int16 => ("int16", None),
            Kind::Int32 => ("int32", None),
            Kind::Int64 => ("int64", None),
            Kind::Float32 => ("float", None),
            Kind::Float64 => ("double", None),
            Kind::Decimal(_) => ("bytes", Some("org.apache.kafka.connect.data.Decimal")),
            Kind::Boolean => ("boolean", None),
            Kind::Timestamp => ("int64", Some("org.apache.kafka.connect.data.Timestamp")),
            Kind::Date => ("int32", Some("org.apache.kafka.connect.data.Date")),
            Kind::Time => ("int32", Some("org.apache.kafka.connect.data.Time")),
            Kind::Bytes => ("bytes", None),
            Kind::Text => ("string", None),
        };
        let mut out = format!(r#"{{"type":"{ty}","optional":{optional}"#);
        if let Some(name) = logical {
            out.push_str(&format!(r#","name":"{name}","version":1"#));
        }
        if let Kind::Decimal(scale) = self {
            out.push_str(&format!(r#","parameters":{{"scale":"{scale}"}}"#));
        }
        out.push_str(r#","field":"#);
        out.push_str(&Value::String(field.to_owned()).to_string());
        out.push('}');
        out
    }
}

/// A struct schema of `fields` (each from [`Kind::field_schema`]) named `name` (none if
/// `None`), as the JsonConverter writes it.
pub fn struct_schema(fields: &[String], name: Option<&str>) -> String {
    let mut out = String::from(r#"{"type":"struct","fields":["#);
    out.push_str(&fields.join(","));
    out.push_str(r#"],"optional":false"#);
    if let Some(name) = name {
        out.push_str(r#","name":"#);
        out.push_str(&Value::String(name.to_owned()).to_string());
    }
    out.push('}');
    out
}

/// Standard base64 with padding (what Connect's JSON converter writes for bytes).
pub fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    base64_into(bytes, &mut out);
    out
}

/// [`base64`], appended to `out`.
pub fn base64_into(bytes: &[u8], out: &mut String) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.reserve(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
}

/// `text` as a JSON string appended to `out`, escaped exactly as `serde_json` writes it (`"`
/// and `\\`, the short forms `\b \t \n \f \r`, other control characters as `\u00xx`), so
/// the records are the same bytes whichever way they were made.
pub fn json_string_into(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut start = 0;
    for (i, byte) in text.bytes().enumerate() {
        let short = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0c => "\\f",
            b'\r' => "\\r",
            0..0x20 => "",
            _ => continue,
        };
        out.push_str(&text[start..i]);
        if short.is_empty() {
            out.push_str("\\u00");
            out.push(HEX[usize::from(byte >> 4)] as char);
            out.push(HEX[usize::from(byte & 15)] as char);
        } else {
            out.push_str(short);
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

impl Kind {
    /// The JSON payload of a text value of this kind, appended to `out`: the text of
    /// [`Kind::payload`]'s value, written without building it for the common kinds.
    pub fn write_payload(self, text: &str, out: &mut String) -> Result<(), String> {
        let bad = || format!("cannot read {text:?} as {self:?}");
        match self {
            Kind::Int16 | Kind::Int32 | Kind::Int64 => {
                let n: i64 = text.parse().map_err(|_| bad())?;
                out.push_str(itoa(n, &mut [0; 20]));
            }
            Kind::Decimal(scale) => {
                let bytes = values::decimal_unscaled_bytes(text, scale).ok_or_else(|| {
                    format!("cannot carry {text:?} as a Decimal of scale {scale} (NaN and infinities have no Decimal form)")
                })?;
                out.push('"');
                base64_into(&bytes, out);
                out.push('"');
            }
            Kind::Boolean => out.push_str(match text {
                "t" | "true" => "true",
                "f" | "false" => "false",
                _ => return Err(bad()),
            }),
            Kind::Timestamp => {
                let micros = values::parse_timestamp_micros(text).ok_or_else(bad)?;
                let ms = match micros {
                    i64::MAX | i64::MIN => micros,
                    _ => micros.div_euclid(1000),
                };
                out.push_str(itoa(ms, &mut [0; 20]));
            }
            Kind::Text => json_string_into(text, out),
            _ => out.push_str(&self.payload(text)?.to_string()),
        }
        Ok(())
    }
}

/// `n` in decimal, written into `buf` (without the formatting machinery: this is per value).
pub fn itoa(n: i64, buf: &mut [u8; 20]) -> &str {
    let mut rest = n.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        // i64::MIN has 19 digits: there is room for the sign.
        at -= 1;
        buf[at] = b'-';
    }
    std::str::from_utf8(&buf[at..]).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_map_as_kafka_connect_s_jdbc_source_maps_them() {
        let numeric = |p: i32, s: i32| ((p << 16) | s) + 4;
        assert_eq!(
            Kind::of(1700, numeric(10, 2), NumericMapping::Decimal),
            Kind::Decimal(2)
        );
        assert_eq!(Kind::of(1700, -1, NumericMapping::Decimal), Kind::Text);
        assert_eq!(
            Kind::of(1700, numeric(9, 0), NumericMapping::BestFit),
            Kind::Int32
        );
        assert_eq!(
            Kind::of(1700, numeric(18, 0), NumericMapping::BestFit),
            Kind::Int64
        );
        assert_eq!(
            Kind::of(1700, numeric(19, 0), NumericMapping::BestFit),
            Kind::Float64
        );
        assert_eq!(
            Kind::of(1700, numeric(10, 2), NumericMapping::BestFit),
            Kind::Float64
        );
        assert_eq!(
            Kind::of(3802, -1, NumericMapping::Decimal),
            Kind::Text,
            "jsonb"
        );
        assert_eq!(Kind::Decimal(2).payload("-1.50").unwrap(), json!("/2o="));
        assert_eq!(
            Kind::Timestamp
                .payload("1970-01-01 00:00:01.999999")
                .unwrap(),
            json!(1999)
        );
        assert_eq!(
            Kind::Timestamp.payload("1969-12-31 23:59:59.9995").unwrap(),
            json!(-1)
        );
        assert_eq!(Kind::Date.payload("1970-01-02").unwrap(), json!(1));
        assert_eq!(Kind::Time.payload("00:00:01.5").unwrap(), json!(1500));
        assert_eq!(Kind::Bytes.payload("\\x00ff").unwrap(), json!("AP8="));
        assert_eq!(Kind::Boolean.payload("t").unwrap(), json!(true));
        assert_eq!(Kind::Float64.payload("NaN").unwrap(), json!("NaN"));
        assert!(Kind::Int32.payload("x").is_err());
    }

    #[test]
    fn schemas_are_written_as_the_json_converter_writes_them() {
        assert_eq!(
            Kind::Int32.field_schema("id", false),
            r#"{"type":"int32","optional":false,"field":"id"}"#
        );
        assert_eq!(
            Kind::Decimal(2).field_schema("price", true),
            r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},"field":"price"}"#
        );
        assert_eq!(
            Kind::Timestamp.field_schema("at", true),
            r#"{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"at"}"#
        );
        let schema = struct_schema(&[Kind::Text.field_schema("a\"b", true)], Some("users"));
        assert_eq!(
            schema,
            r#"{"type":"struct","fields":[{"type":"string","optional":true,"field":"a\"b"}],"optional":false,"name":"users"}"#
        );
        let parsed: Value = wasm_connect_sdk::serde_json::from_str(&schema).unwrap();
        assert_eq!(parsed["fields"][0]["field"], "a\"b");
    }

    #[test]
    fn written_payloads_are_serde_json_s_text() {
        let cases: &[(Kind, &str)] = &[
            (Kind::Int16, "-32768"),
            (Kind::Int32, "0"),
            (Kind::Int64, "-9223372036854775808"),
            (Kind::Int64, "9223372036854775807"),
            (Kind::Decimal(2), "-1234.50"),
            (Kind::Boolean, "t"),
            (Kind::Boolean, "f"),
            (Kind::Timestamp, "2026-12-07 21:06:11.123456"),
            (Kind::Timestamp, "1969-12-31 23:59:59.9995"),
            (Kind::Timestamp, "infinity"),
            (Kind::Text, "plain"),
            (
                Kind::Text,
                "q\"b\\ \u{8}\t\n\u{c}\r\u{1}\u{1f}\u{7f} é 😀 /",
            ),
            (Kind::Float64, "1.5"),
            (Kind::Date, "2026-12-07"),
        ];
        for &(kind, text) in cases {
            let mut out = String::from("[");
            kind.write_payload(text, &mut out).unwrap();
            assert_eq!(
                out[1..],
                kind.payload(text).unwrap().to_string(),
                "{kind:?} {text:?}"
            );
        }
        for (kind, text) in [
            (Kind::Int32, "x"),
            (Kind::Boolean, "yes"),
            (Kind::Decimal(2), "NaN"),
        ] {
            assert!(kind.write_payload(text, &mut String::new()).is_err());
        }
    }

    #[test]
    fn base64_pads_as_java_s_encoder() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }
}
