//! Kafka Connect's JsonConverter between JSON and the data model: schemas in its schema JSON
//! (`asConnectSchema` / `asJsonSchema`), payloads with a schema or without (`convertToConnect` /
//! `convertToJson`, `replace.null.with.default` and `decimal.format=BASE64` as its defaults).
//! Messages are Connect's, so a record a transform fails reads the same in both workers.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map as JsonMap, Value as Json};

use super::data::{
    DATE, DECIMAL, Field, SCALE, Schema, SchemaRef, Struct, TIME, TIMESTAMP, Type, Value,
};

const MILLIS_PER_DAY: i64 = 24 * 60 * 60 * 1000;

/// A schema from JsonConverter's schema JSON.
pub fn schema_from_json(json: &Json) -> Result<Schema, String> {
    let Json::Object(object) = json else {
        return Err(format!(
            "Schema must be an object, found {}",
            node_type(json)
        ));
    };
    let kind = match object.get("type") {
        Some(Json::String(name)) => {
            Type::from_json_name(name).ok_or_else(|| format!("Unknown schema type: {name}"))?
        }
        _ => return Err("Schema must contain 'type' field".to_owned()),
    };
    let mut schema = Schema::of(kind);
    match kind {
        Type::Struct => {
            let Some(Json::Array(fields)) = object.get("fields") else {
                return Err("Struct schema's \"fields\" argument is not an array.".to_owned());
            };
            for field in fields {
                let Some(Json::String(name)) = field.get("field") else {
                    return Err("Struct schema's field name not specified properly".to_owned());
                };
                schema.fields.push(Field {
                    name: name.clone(),
                    schema: Arc::new(schema_from_json(field)?),
                });
            }
        }
        Type::Array => {
            let items = object
                .get("items")
                .filter(|v| !v.is_null())
                .ok_or("Array schema did not specify the element type")?;
            schema.value = Some(Arc::new(schema_from_json(items)?));
        }
        Type::Map => {
            let keys = object
                .get("keys")
                .filter(|v| !v.is_null())
                .ok_or("Map schema did not specify the key type")?;
            let values = object
                .get("values")
                .filter(|v| !v.is_null())
                .ok_or("Map schema did not specify the value type")?;
            schema.key = Some(Arc::new(schema_from_json(keys)?));
            schema.value = Some(Arc::new(schema_from_json(values)?));
        }
        _ => {}
    }
    schema.optional = matches!(object.get("optional"), Some(Json::Bool(true)));
    if let Some(Json::String(name)) = object.get("name") {
        schema.name = Some(name.clone());
    }
    if let Some(Json::Number(version)) = object.get("version")
        && let Some(version) = version.as_i64()
    {
        schema.version = Some(version as i32);
    }
    if let Some(Json::String(doc)) = object.get("doc") {
        schema.doc = Some(doc.clone());
    }
    match object.get("parameters") {
        Some(Json::Object(params)) => {
            let mut parameters = Vec::with_capacity(params.len());
            for (k, v) in params {
                let Json::String(v) = v else {
                    return Err("Schema parameters must have string values.".to_owned());
                };
                parameters.push((k.clone(), v.clone()));
            }
            schema.parameters = Some(parameters);
        }
        Some(Json::Null) | None => {}
        Some(_) => return Err("Schema parameters must be a JSON object.".to_owned()),
    }
    if let Some(default) = object.get("default").filter(|d| !d.is_null()) {
        let this = Arc::new(schema.clone());
        schema.default = Some(to_connect(Some(&this), default)?);
    }
    Ok(schema)
}

/// JsonConverter's schema JSON of `schema`.
pub fn schema_to_json(schema: &Schema) -> Result<Json, String> {
    let mut object = JsonMap::new();
    object.insert("type".into(), Json::String(schema.kind.json_name().into()));
    match schema.kind {
        Type::Array => {
            let items = schema.value.as_deref().map(schema_to_json).transpose()?;
            object.insert("items".into(), items.unwrap_or(Json::Null));
        }
        Type::Map => {
            let keys = schema.key.as_deref().map(schema_to_json).transpose()?;
            let values = schema.value.as_deref().map(schema_to_json).transpose()?;
            object.insert("keys".into(), keys.unwrap_or(Json::Null));
            object.insert("values".into(), values.unwrap_or(Json::Null));
        }
        Type::Struct => {
            let mut fields = Vec::with_capacity(schema.fields.len());
            for field in &schema.fields {
                let mut json = schema_to_json(&field.schema)?;
                if let Json::Object(o) = &mut json {
                    o.insert("field".into(), Json::String(field.name.clone()));
                }
                fields.push(json);
            }
            object.insert("fields".into(), Json::Array(fields));
        }
        _ => {}
    }
    object.insert("optional".into(), Json::Bool(schema.optional));
    if let Some(name) = &schema.name {
        object.insert("name".into(), Json::String(name.clone()));
    }
    if let Some(version) = schema.version {
        object.insert("version".into(), Json::from(version));
    }
    if let Some(doc) = &schema.doc {
        object.insert("doc".into(), Json::String(doc.clone()));
    }
    if let Some(parameters) = &schema.parameters {
        let params = parameters
            .iter()
            .map(|(k, v)| (k.clone(), Json::String(v.clone())))
            .collect();
        object.insert("parameters".into(), Json::Object(params));
    }
    if let Some(default) = &schema.default {
        object.insert("default".into(), to_json(Some(schema), default)?);
    }
    Ok(Json::Object(object))
}

fn node_type(json: &Json) -> &'static str {
    match json {
        Json::Null => "NULL",
        Json::Bool(_) => "BOOLEAN",
        Json::Number(_) => "NUMBER",
        Json::String(_) => "STRING",
        Json::Array(_) => "ARRAY",
        Json::Object(_) => "OBJECT",
    }
}

/// Jackson's `intValue()`/`longValue()` of a node (0 for what is not a number).
fn long_value(json: &Json) -> i64 {
    match json {
        Json::Number(n) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|u| u as i64))
            .unwrap_or_else(|| n.as_f64().map_or(0, |f| f as i64)),
        _ => 0,
    }
}

fn int_value(json: &Json) -> i32 {
    match json {
        Json::Number(n) if n.is_f64() => n.as_f64().map_or(0, |f| f as i32),
        _ => long_value(json) as i32,
    }
}

fn double_value(json: &Json) -> f64 {
    match json {
        Json::Number(n) => n.as_f64().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// JsonConverter's `convertToConnect`: the value `json` holds under `schema` (`None`:
/// schemaless).
pub fn to_connect(schema: Option<&SchemaRef>, json: &Json) -> Result<Value, String> {
    let Some(schema) = schema else {
        return Ok(match json {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Boolean(*b),
            Json::Number(n) if n.is_f64() => Value::Float64(double_value(json)),
            Json::Number(_) => Value::Int64(long_value(json)),
            Json::String(s) => Value::String(s.clone()),
            Json::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|i| to_connect(None, i))
                    .collect::<Result<_, _>>()?,
            ),
            Json::Object(fields) => Value::Map(
                fields
                    .iter()
                    .map(|(k, v)| Ok((Value::String(k.clone()), to_connect(None, v)?)))
                    .collect::<Result<_, String>>()?,
            ),
        });
    };
    if json.is_null() {
        if let Some(default) = &schema.default {
            return Ok(default.clone());
        }
        if schema.optional {
            return Ok(Value::Null);
        }
        return Err(format!(
            "Invalid null value for required {} field",
            schema.kind.java_name()
        ));
    }
    match schema.name.as_deref() {
        Some(DECIMAL) => {
            return match json {
                Json::Number(n) => parse_decimal(&n.to_string())
                    .ok_or_else(|| format!("Invalid decimal {n}"))
                    .map(|(u, s)| Value::Decimal(u, s)),
                Json::String(text) => {
                    let bytes = BASE64
                        .decode(text)
                        .map_err(|_| "Invalid bytes for Decimal field".to_owned())?;
                    decimal_from_bytes(schema, &bytes)
                }
                other => Err(format!(
                    "Invalid type for Decimal, underlying representation should be numeric or bytes but was {}",
                    node_type(other)
                )),
            };
        }
        Some(DATE) => {
            return match json {
                Json::Number(n) if n.as_i64().is_some_and(|v| i32::try_from(v).is_ok()) => {
                    Ok(Value::Date(long_value(json) * MILLIS_PER_DAY))
                }
                other => Err(format!(
                    "Invalid type for Date, underlying representation should be integer but was {}",
                    node_type(other)
                )),
            };
        }
        Some(TIME) => {
            return match json {
                Json::Number(n) if n.as_i64().is_some_and(|v| i32::try_from(v).is_ok()) => {
                    let millis = long_value(json);
                    if !(0..MILLIS_PER_DAY).contains(&millis) {
                        return Err("Time values must use number of milliseconds greater than 0 and less than 86400000".to_owned());
                    }
                    Ok(Value::Date(millis))
                }
                other => Err(format!(
                    "Invalid type for Time, underlying representation should be integer but was {}",
                    node_type(other)
                )),
            };
        }
        Some(TIMESTAMP) => {
            return match json {
                Json::Number(n) if !n.is_f64() => Ok(Value::Date(long_value(json))),
                other => Err(format!(
                    "Invalid type for Timestamp, underlying representation should be integral but was {}",
                    node_type(other)
                )),
            };
        }
        _ => {}
    }
    Ok(match schema.kind {
        Type::Boolean => Value::Boolean(matches!(json, Json::Bool(true))),
        Type::Int8 => Value::Int8(int_value(json) as i8),
        Type::Int16 => Value::Int16(int_value(json) as i16),
        Type::Int32 => Value::Int32(int_value(json)),
        Type::Int64 => Value::Int64(long_value(json)),
        Type::Float32 => Value::Float32(double_value(json) as f32),
        Type::Float64 => Value::Float64(double_value(json)),
        Type::String => match json {
            Json::String(s) => Value::String(s.clone()),
            _ => Value::Null,
        },
        Type::Bytes => match json {
            Json::String(s) => Value::Bytes(
                BASE64
                    .decode(s)
                    .map_err(|_| "Invalid bytes field".to_owned())?,
            ),
            _ => Value::Null,
        },
        Type::Array => {
            let Json::Array(items) = json else {
                return Ok(Value::Array(Vec::new()));
            };
            let element = schema.value.as_ref();
            Value::Array(
                items
                    .iter()
                    .map(|i| to_connect(element, i))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Map => {
            let key_schema = schema.key.as_ref();
            let value_schema = schema.value.as_ref();
            let mut entries = Vec::new();
            if key_schema.is_none_or(|k| k.kind == Type::String) {
                let Json::Object(fields) = json else {
                    return Err(format!(
                        "Maps with string fields should be encoded as JSON objects, but found {}",
                        node_type(json)
                    ));
                };
                for (k, v) in fields {
                    entries.push((Value::String(k.clone()), to_connect(value_schema, v)?));
                }
            } else {
                let Json::Array(pairs) = json else {
                    return Err(format!(
                        "Maps with non-string fields should be encoded as JSON array of tuples, but found {}",
                        node_type(json)
                    ));
                };
                for pair in pairs {
                    match pair {
                        Json::Array(kv) if kv.len() == 2 => entries.push((
                            to_connect(key_schema, &kv[0])?,
                            to_connect(value_schema, &kv[1])?,
                        )),
                        Json::Array(kv) => {
                            return Err(format!(
                                "Found invalid map entry, expected length 2 but found :{}",
                                kv.len()
                            ));
                        }
                        other => {
                            return Err(format!(
                                "Found invalid map entry instead of array tuple: {}",
                                node_type(other)
                            ));
                        }
                    }
                }
            }
            Value::Map(entries)
        }
        Type::Struct => {
            let Json::Object(fields) = json else {
                return Err(format!(
                    "Structs should be encoded as JSON objects, but found {}",
                    node_type(json)
                ));
            };
            let mut result = Struct::new(Arc::clone(schema));
            for (index, field) in schema.fields.iter().enumerate() {
                let json = fields.get(&field.name).unwrap_or(&Json::Null);
                let value = to_connect(Some(&field.schema), json)?;
                result.put(index, value)?;
            }
            Value::Struct(result)
        }
    })
}

/// JsonConverter's `convertToJson`: `value` under `schema` (`None`: schemaless) as a JSON
/// document (built from [`write_json`], which the task loops use).
pub fn to_json(schema: Option<&Schema>, value: &Value) -> Result<Json, String> {
    let mut out = Vec::new();
    write_json(schema, value, &mut out)?;
    serde_json::from_slice(&out).map_err(|e| format!("worker bug: wrote invalid JSON: {e}"))
}

/// A float as Java's Jackson writes it: the number (its own shortest digits: a `float` is not
/// widened to the double's digits), or for NaN and the infinities the strings Jackson writes.
fn write_float(value: f64, shortest: &str, out: &mut Vec<u8>) {
    if value.is_finite() {
        let value: f64 = shortest.parse().unwrap_or(value);
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, &value);
    } else if value.is_nan() {
        out.extend_from_slice(b"\"NaN\"");
    } else if value > 0.0 {
        out.extend_from_slice(b"\"Infinity\"");
    } else {
        out.extend_from_slice(b"\"-Infinity\"");
    }
}

fn write_str(text: &str, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

fn write_int(value: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(value.to_string().as_bytes());
}

/// JsonConverter's `convertToJson`, written as compact JSON text to `out`: `value` under
/// `schema` (`None`: schemaless); a null with a default is the default, a required null fails.
pub fn write_json(schema: Option<&Schema>, value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    if value.is_null() {
        let Some(schema) = schema else {
            out.extend_from_slice(b"null");
            return Ok(());
        };
        if let Some(default) = &schema.default {
            return write_json(Some(schema), default, out);
        }
        if schema.optional {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        return Err(
            "Conversion error: null value for field that is required and has no default value"
                .to_owned(),
        );
    }
    if let Some(schema) = schema {
        match schema.name.as_deref() {
            Some(DECIMAL) => {
                let Value::Decimal(unscaled, scale) = value else {
                    return Err(format!(
                        "Invalid type for Decimal, expected BigDecimal but was class {}",
                        value.java_class()
                    ));
                };
                if *scale != decimal_scale(schema)? {
                    return Err(
                        "BigDecimal has mismatching scale value for given Decimal schema"
                            .to_owned(),
                    );
                }
                write_str(&BASE64.encode(decimal_bytes(*unscaled)), out);
                return Ok(());
            }
            Some(name @ (DATE | TIME | TIMESTAMP)) => {
                let Value::Date(millis) = value else {
                    let short = name.rsplit('.').next().unwrap_or(name);
                    return Err(format!(
                        "Invalid type for {short}, expected Date but was class {}",
                        value.java_class()
                    ));
                };
                let encoded = match name {
                    DATE => {
                        if millis % MILLIS_PER_DAY != 0 {
                            return Err("Kafka Connect Date type should not have any time fields set to non-zero values.".to_owned());
                        }
                        millis / MILLIS_PER_DAY
                    }
                    TIME => {
                        if !(0..MILLIS_PER_DAY).contains(millis) {
                            return Err("Kafka Connect Time type should not have any date fields set to non-zero values.".to_owned());
                        }
                        *millis
                    }
                    _ => *millis,
                };
                write_int(encoded, out);
                return Ok(());
            }
            _ => {}
        }
    }
    let kind = match schema {
        Some(schema) => schema.kind,
        None => value.schemaless_type().ok_or_else(|| {
            format!(
                "Java class class {} does not have corresponding schema type.",
                value.java_class()
            )
        })?,
    };
    match (kind, value) {
        (Type::Int8, Value::Int8(v)) => write_int(i64::from(*v), out),
        (Type::Int16, Value::Int16(v)) => write_int(i64::from(*v), out),
        (Type::Int32, Value::Int32(v)) => write_int(i64::from(*v), out),
        (Type::Int64, Value::Int64(v)) => write_int(*v, out),
        (Type::Float32, Value::Float32(v)) => write_float(f64::from(*v), &v.to_string(), out),
        (Type::Float64, Value::Float64(v)) => write_float(*v, &v.to_string(), out),
        (Type::Boolean, Value::Boolean(v)) => {
            out.extend_from_slice(if *v { b"true" } else { b"false" })
        }
        (Type::String, Value::String(v)) => write_str(v, out),
        (Type::Bytes, Value::Bytes(v)) => write_str(&BASE64.encode(v), out),
        (Type::Bytes, _) => {
            return Err(format!(
                "Invalid type for bytes type: class {}",
                value.java_class()
            ));
        }
        (Type::Array, Value::Array(items)) => {
            let element = schema.and_then(|s| s.value.as_deref());
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(element, item, out)?;
            }
            out.push(b']');
        }
        (Type::Map, Value::Map(entries)) => {
            let object_mode = match schema {
                None => entries.iter().all(|(k, _)| matches!(k, Value::String(_))),
                Some(s) => s.key.as_deref().is_some_and(|k| k.kind == Type::String),
            };
            let key_schema = schema.and_then(|s| s.key.as_deref());
            let value_schema = schema.and_then(|s| s.value.as_deref());
            out.push(if object_mode { b'{' } else { b'[' });
            let mut key = Vec::new();
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if object_mode {
                    // Jackson's `asText()` of the key's JSON: a string's text, else the JSON.
                    key.clear();
                    write_json(key_schema, k, &mut key)?;
                    if key.first() == Some(&b'"') {
                        out.extend_from_slice(&key);
                    } else {
                        write_str(&String::from_utf8_lossy(&key), out);
                    }
                    out.push(b':');
                    write_json(value_schema, v, out)?;
                } else {
                    out.push(b'[');
                    write_json(key_schema, k, out)?;
                    out.push(b',');
                    write_json(value_schema, v, out)?;
                    out.push(b']');
                }
            }
            out.push(if object_mode { b'}' } else { b']' });
        }
        (Type::Struct, Value::Struct(s)) => {
            if schema.is_none_or(|schema| !super::data::same_schema(&s.schema, schema)) {
                return Err("Mismatching schema.".to_owned());
            }
            out.push(b'{');
            for (i, (field, v)) in s.schema.fields.iter().zip(&s.values).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(&field.name, out);
                out.push(b':');
                write_json(Some(&field.schema), v, out)?;
            }
            out.push(b'}');
        }
        _ => {
            let name = schema.map_or("unknown schema", |s| s.kind.java_name());
            return Err(format!(
                "Invalid type for {name}: class {}",
                value.java_class()
            ));
        }
    }
    Ok(())
}

/// The scale a `Decimal` schema declares.
pub fn decimal_scale(schema: &Schema) -> Result<i32, String> {
    schema
        .parameter(SCALE)
        .ok_or("Invalid Decimal schema: scale parameter not found.")?
        .parse()
        .map_err(|_| "Invalid Decimal schema: scale parameter is not an integer.".to_owned())
}

/// `Decimal.toLogical`: the big-endian two's complement `bytes` at the schema's scale.
fn decimal_from_bytes(schema: &Schema, bytes: &[u8]) -> Result<Value, String> {
    let scale = decimal_scale(schema)?;
    if bytes.is_empty() || bytes.len() > 16 {
        return Err(format!(
            "Decimal of {} bytes is not supported (at most 16)",
            bytes.len()
        ));
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut full = [fill; 16];
    full[16 - bytes.len()..].copy_from_slice(bytes);
    Ok(Value::Decimal(i128::from_be_bytes(full), scale))
}

/// `BigInteger.toByteArray()`: the shortest big-endian two's complement form.
pub fn decimal_bytes(unscaled: i128) -> Vec<u8> {
    let bytes = unscaled.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        let redundant = (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

/// A decimal number's text (`-12.340`, `1E+3`) as unscaled value and scale (`new
/// BigDecimal(text)`).
pub fn parse_decimal(text: &str) -> Option<(i128, i32)> {
    let text = text.trim();
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (negative, digits) = match mantissa.as_bytes().first()? {
        b'-' => (true, &mantissa[1..]),
        b'+' => (false, &mantissa[1..]),
        _ => (false, mantissa),
    };
    let (int, frac) = match digits.find('.') {
        Some(at) => (&digits[..at], &digits[at + 1..]),
        None => (digits, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut unscaled: i128 = 0;
    for c in int.bytes().chain(frac.bytes()) {
        if !c.is_ascii_digit() {
            return None;
        }
        unscaled = unscaled
            .checked_mul(10)?
            .checked_add(i128::from(c - b'0'))?;
    }
    let scale = i32::try_from(frac.len()).ok()?.checked_sub(exponent)?;
    Some((if negative { -unscaled } else { unscaled }, scale))
}
