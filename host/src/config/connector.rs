//! A connector's configuration: the keys the worker interprets (`name`, `connector.class`,
//! `tasks.max`, converters, sandbox grants and limits) plus everything for the plugin, checked
//! against the plugin's config definitions before anything runs.

use std::path::Path;

use super::file::{self, Pairs};
use crate::config_keys::{CONNECTOR_CLASS, NAME, TASKS_MAX};
use crate::plugin::{ConfigKey, PluginSpec};

/// `connector.plugin.version` (Kafka Connect KIP-891): pin a plugin version.
pub const PLUGIN_VERSION: &str = "connector.plugin.version";

/// One problem with one key of a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key (empty for the config as a whole).
    pub key: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl Problem {
    /// A problem with `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

/// Join problems into one message that starts with where the config came from.
pub fn describe(origin: &str, problems: &[Problem]) -> String {
    let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
    format!("{origin}: {}", list.join("; "))
}

/// A connector config with its worker-level keys read out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorConfig {
    /// The connector's unique name (`name`).
    pub name: String,
    /// The plugin's spec name (`connector.class`).
    pub plugin: String,
    /// A pinned plugin version (`connector.plugin.version`).
    pub plugin_version: Option<String>,
    /// The most tasks to run (`tasks.max`, default 1).
    pub tasks_max: u32,
    /// Every key as given, worker keys included (plugins ignore what they do not know).
    pub pairs: Pairs,
}

impl ConnectorConfig {
    /// Read a connector config file (`.properties`, `.json` or `.toml`).
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let pairs = file::read(path)?;
        Self::from_pairs(pairs).map_err(|p| describe(&path.display().to_string(), &p))
    }

    /// Read the worker-level keys out of `pairs`.
    pub fn from_pairs(pairs: Pairs) -> Result<Self, Vec<Problem>> {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.trim())
        };
        let mut problems = Vec::new();
        let name = match get(NAME) {
            Some(n) if !n.is_empty() && !n.contains('/') => n.to_owned(),
            Some(n) if n.contains('/') => {
                problems.push(Problem::new(NAME, format!("{n:?} must not contain '/'")));
                String::new()
            }
            _ => {
                problems.push(Problem::new(
                    NAME,
                    "is required: give the connector a unique name",
                ));
                String::new()
            }
        };
        let plugin = match get(CONNECTOR_CLASS) {
            Some(c) if !c.is_empty() => c.to_owned(),
            _ => {
                problems.push(Problem::new(
                    CONNECTOR_CLASS,
                    "is required: name the plugin to run (see `wasm-connect plugins list`)",
                ));
                String::new()
            }
        };
        let tasks_max = match get(TASKS_MAX) {
            None => 1,
            Some(raw) => match raw.parse::<u32>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    problems.push(Problem::new(
                        TASKS_MAX,
                        format!("{raw:?} is not a positive integer"),
                    ));
                    1
                }
            },
        };
        let plugin_version = get(PLUGIN_VERSION)
            .filter(|v| !v.trim().is_empty())
            .map(str::to_owned);
        if let Some(Err(e)) = plugin_version
            .as_deref()
            .map(crate::registry::VersionSpec::parse)
        {
            problems.push(Problem::new(PLUGIN_VERSION, e));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Self {
            name,
            plugin,
            plugin_version,
            tasks_max,
            pairs,
        })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Check the plugin's keys against its spec: required keys present, values of the declared
    /// type, allowed values. Returns the config with defaults filled in for absent keys.
    pub fn apply_spec(&self, spec: &PluginSpec) -> Result<Pairs, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut pairs = self.pairs.clone();
        for key in &spec.config {
            match self.get(&key.name) {
                Some(value) => {
                    if let Err(message) = check_value(key, value) {
                        problems.push(Problem::new(&key.name, message));
                    }
                }
                None => match &key.default {
                    Some(default) => pairs.push((key.name.clone(), default.clone())),
                    None if key.required => problems.push(Problem::new(
                        &key.name,
                        format!("is required by {}: {}", spec.name, key.documentation),
                    )),
                    None => {}
                },
            }
        }
        if problems.is_empty() {
            Ok(pairs)
        } else {
            Err(problems)
        }
    }
}

/// Whether `value` is a valid value of `key`'s type and allowed values.
fn check_value(key: &ConfigKey, value: &str) -> Result<(), String> {
    let trimmed = value.trim();
    let ok = match key.ty {
        "INT" => trimmed.parse::<i32>().is_ok(),
        "LONG" => trimmed.parse::<i64>().is_ok(),
        "DOUBLE" => trimmed.parse::<f64>().is_ok(),
        "BOOLEAN" => trimmed.eq_ignore_ascii_case("true") || trimmed.eq_ignore_ascii_case("false"),
        _ => true,
    };
    if !ok {
        return Err(format!("{value:?} is not a valid {}", key.ty));
    }
    if !key.allowed_values.is_empty() && !key.allowed_values.iter().any(|a| a == trimmed) {
        return Err(format!(
            "{value:?} is not one of the allowed values: {}",
            key.allowed_values.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::Kind;

    fn pairs(items: &[(&str, &str)]) -> Pairs {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn spec() -> PluginSpec {
        let key = |name: &str,
                   ty: &'static str,
                   default: Option<&str>,
                   required: bool,
                   allowed: &[&str]| ConfigKey {
            name: name.into(),
            ty,
            default: default.map(Into::into),
            required,
            importance: "HIGH",
            documentation: format!("the {name}"),
            allowed_values: allowed.iter().map(|a| (*a).to_owned()).collect(),
        };
        PluginSpec {
            name: "p".into(),
            version: "1.0.0".into(),
            kind: Kind::Source,
            description: String::new(),
            config: vec![
                key("topic", "STRING", None, true, &[]),
                key("count", "LONG", Some("-1"), false, &[]),
                key("mode", "STRING", Some("a"), false, &["a", "b"]),
            ],
        }
    }

    #[test]
    fn worker_keys_are_read_and_checked() {
        let c = ConnectorConfig::from_pairs(pairs(&[
            ("name", "n"),
            ("connector.class", "p"),
            ("tasks.max", "3"),
        ]))
        .unwrap();
        assert_eq!(
            (c.name.as_str(), c.plugin.as_str(), c.tasks_max),
            ("n", "p", 3)
        );
        let problems = ConnectorConfig::from_pairs(pairs(&[("tasks.max", "zero")])).unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, vec!["name", "connector.class", "tasks.max"]);
        assert!(problems[2].message.contains("\"zero\""));
    }

    #[test]
    fn spec_checks_fill_defaults_and_name_bad_keys() {
        let ok = ConnectorConfig::from_pairs(pairs(&[
            ("name", "n"),
            ("connector.class", "p"),
            ("topic", "t"),
        ]))
        .unwrap();
        let filled = ok.apply_spec(&spec()).unwrap();
        assert!(filled.contains(&("count".to_owned(), "-1".to_owned())));
        let bad = ConnectorConfig::from_pairs(pairs(&[
            ("name", "n"),
            ("connector.class", "p"),
            ("count", "many"),
            ("mode", "c"),
        ]))
        .unwrap();
        let problems = bad.apply_spec(&spec()).unwrap_err();
        let text: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|t| t.starts_with("topic: is required")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with("count: \"many\" is not a valid LONG")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("mode: \"c\" is not one of the allowed values: a, b")),
            "{text:?}"
        );
    }
}
