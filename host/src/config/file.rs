//! Reading a config file in any of the accepted formats into flat `key = value` pairs:
//! Kafka Connect's `.properties` and `.json` (as `{"name":..,"config":{..}}` or a flat object),
//! and our own `.toml` (nested tables flatten to dotted keys: `[tasks] max = 3` is `tasks.max`).

use std::path::Path;

use super::properties;

/// Flat configuration pairs, in file order.
pub type Pairs = Vec<(String, String)>;

/// The value of `key` in `pairs`, trimmed: the last one given wins, as in a properties file.
pub fn last<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.trim())
}

/// Pairs from string literals, for unit tests.
#[cfg(test)]
pub(crate) fn pairs_of(items: &[(&str, &str)]) -> Pairs {
    items
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Read `path`, choosing the format by extension. Errors name the file and what is wrong.
pub fn read(path: &Path) -> Result<Pairs, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read the file: {e}", path.display()))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let parsed = match ext {
        "properties" | "conf" => properties::parse(&text),
        "json" => from_json(&text),
        "toml" => from_toml(&text),
        _ => Err(format!(
            "unknown config format {ext:?}; use .properties or .json (Kafka Connect's formats) or .toml"
        )),
    };
    parsed.map_err(|e| format!("{}: {e}", path.display()))
}

/// Kafka Connect's JSON: `{"name": "x", "config": {...}}` or a flat object of keys.
pub fn from_json(text: &str) -> Result<Pairs, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let serde_json::Value::Object(mut top) = value else {
        return Err("expected a JSON object".to_owned());
    };
    let mut pairs = Pairs::new();
    if let Some(config) = top.remove("config") {
        let serde_json::Value::Object(config) = config else {
            return Err("\"config\" must be an object of string values".to_owned());
        };
        if let Some(name) = top.remove("name") {
            pairs.push(("name".to_owned(), json_scalar("name", &name)?));
        }
        top = config;
    }
    for (key, value) in &top {
        let value = json_scalar(key, value)?;
        match pairs.iter_mut().find(|(k, _)| k == key) {
            Some(existing) => existing.1 = value,
            None => pairs.push((key.clone(), value)),
        }
    }
    Ok(pairs)
}

fn json_scalar(key: &str, value: &serde_json::Value) -> Result<String, String> {
    match value {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        serde_json::Value::Bool(b) => Ok(b.to_string()),
        serde_json::Value::Array(items) => items
            .iter()
            .map(|i| json_scalar(key, i))
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.join(",")),
        serde_json::Value::Null => Err(format!("{key}: null is not a value; leave the key out")),
        serde_json::Value::Object(_) => Err(format!(
            "{key}: nested objects are not config values; use dotted keys"
        )),
    }
}

/// TOML with nested tables flattened to dotted keys.
pub fn from_toml(text: &str) -> Result<Pairs, String> {
    let table: toml::Table = text.parse().map_err(|e| format!("invalid TOML: {e}"))?;
    let mut pairs = Pairs::new();
    flatten_toml("", &table, &mut pairs)?;
    Ok(pairs)
}

fn flatten_toml(prefix: &str, table: &toml::Table, out: &mut Pairs) -> Result<(), String> {
    for (key, value) in table {
        let key = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => flatten_toml(&key, inner, out)?,
            other => out.push((key.clone(), toml_scalar(&key, other)?)),
        }
    }
    Ok(())
}

fn toml_scalar(key: &str, value: &toml::Value) -> Result<String, String> {
    Ok(match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(items) => items
            .iter()
            .map(|i| toml_scalar(key, i))
            .collect::<Result<Vec<_>, _>>()?
            .join(","),
        toml::Value::Table(_) => {
            return Err(format!("{key}: tables inside arrays are not config values"));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(pairs: &'a Pairs, key: &str) -> Option<&'a str> {
        pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn json_in_both_kafka_connect_shapes() {
        let wrapped = from_json(
            r#"{"name":"a","config":{"connector.class":"datagen","tasks.max":3,"x":true}}"#,
        )
        .unwrap();
        assert_eq!(get(&wrapped, "name"), Some("a"));
        assert_eq!(get(&wrapped, "tasks.max"), Some("3"));
        assert_eq!(get(&wrapped, "x"), Some("true"));
        let flat = from_json(r#"{"name":"a","connector.class":"datagen"}"#).unwrap();
        assert_eq!(get(&flat, "connector.class"), Some("datagen"));
        assert!(from_json(r#"{"name": null}"#).unwrap_err().contains("name"));
        assert!(from_json("[1]").is_err());
    }

    #[test]
    fn toml_tables_flatten_to_dotted_keys() {
        let pairs = from_toml("name = \"a\"\n\"connector.class\" = \"datagen\"\nfiles = [\"/a\", \"/b\"]\n[tasks]\nmax = 2\n").unwrap();
        assert_eq!(get(&pairs, "tasks.max"), Some("2"));
        assert_eq!(get(&pairs, "connector.class"), Some("datagen"));
        assert_eq!(get(&pairs, "files"), Some("/a,/b"));
        assert!(from_toml("name = ").unwrap_err().contains("invalid TOML"));
    }
}
