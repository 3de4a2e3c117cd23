//! Kafka Connect schemas inferred from a JSON value, for the json converter's envelope.

use serde_json::{Value, json};

use crate::sandbox::wit::types::Data;

/// The Connect schema of `payload`, which came from `data`.
pub fn infer(data: &Data, payload: &Value) -> Value {
    match data {
        Data::Bytes(_) => json!({"type": "bytes", "optional": false}),
        Data::Text(_) => json!({"type": "string", "optional": false}),
        Data::Json(_) => of_value(payload, false),
    }
}

fn of_value(value: &Value, optional: bool) -> Value {
    match value {
        Value::Null => json!({"type": "string", "optional": true}),
        Value::Bool(_) => json!({"type": "boolean", "optional": optional}),
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            json!({"type": "int64", "optional": optional})
        }
        Value::Number(_) => json!({"type": "double", "optional": optional}),
        Value::String(_) => json!({"type": "string", "optional": optional}),
        Value::Array(items) => {
            let items = items.first().map_or_else(
                || json!({"type": "string", "optional": true}),
                |i| of_value(i, true),
            );
            json!({"type": "array", "items": items, "optional": optional})
        }
        Value::Object(fields) => {
            let fields: Vec<Value> = fields
                .iter()
                .map(|(name, v)| {
                    let mut field = of_value(v, v.is_null());
                    if let Value::Object(map) = &mut field {
                        let mut with_name = serde_json::Map::new();
                        with_name.insert("field".into(), Value::String(name.clone()));
                        with_name.extend(std::mem::take(map));
                        *map = with_name;
                    }
                    field
                })
                .collect();
            json!({"type": "struct", "fields": fields, "optional": optional})
        }
    }
}
