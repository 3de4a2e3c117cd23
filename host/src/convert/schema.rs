//! Kafka Connect schemas inferred from a JSON document, for the json converter's envelope,
//! written as Kafka Connect's JsonConverter writes a schema: `type`, then `fields` (a struct's,
//! each with its `field` name last) or `items` (an array's), then `optional`.

use serde_json::Value;

/// Append the Connect schema of `value` (optional if `optional`) to `out`.
pub fn write(value: &Value, optional: bool, out: &mut Vec<u8>) {
    let type_name = match value {
        // A null says nothing of its type: an optional string, as before.
        Value::Null => {
            out.extend_from_slice(br#"{"type":"string","optional":true}"#);
            return;
        }
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "double",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "struct",
    };
    out.extend_from_slice(br#"{"type":""#);
    out.extend_from_slice(type_name.as_bytes());
    out.push(b'"');
    match value {
        Value::Array(items) => {
            out.extend_from_slice(br#","items":"#);
            match items.first() {
                Some(item) => write(item, true, out),
                None => out.extend_from_slice(br#"{"type":"string","optional":true}"#),
            }
        }
        Value::Object(fields) => {
            out.extend_from_slice(br#","fields":["#);
            for (i, (name, field)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(field, field.is_null(), out);
                // Replace the closing brace with the field's name.
                out.pop();
                out.extend_from_slice(br#","field":"#);
                // Writing a string into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *out, name);
                out.push(b'}');
            }
            out.push(b']');
        }
        _ => {}
    }
    out.extend_from_slice(br#","optional":"#);
    out.extend_from_slice(if optional { b"true" } else { b"false" });
    out.push(b'}');
}
