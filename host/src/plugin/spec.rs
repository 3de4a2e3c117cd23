//! A plugin's self-description in host terms (serialisable for the CLI and the REST API).

use serde::Serialize;

use crate::sandbox::wit::types;

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginSpec {
    pub name: String,
    pub version: String,
    pub kind: Kind,
    pub description: String,
    pub config: Vec<ConfigKey>,
}

/// Source or sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Source,
    Sink,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Source => "source",
            Kind::Sink => "sink",
        })
    }
}

/// One configuration key of a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigKey {
    pub name: String,
    /// Kafka Connect's type names: STRING, INT, LONG, DOUBLE, BOOLEAN, LIST, PASSWORD.
    #[serde(rename = "type")]
    pub ty: &'static str,
    pub default: Option<String>,
    pub required: bool,
    /// HIGH, MEDIUM or LOW.
    pub importance: &'static str,
    pub documentation: String,
    pub allowed_values: Vec<String>,
}

impl From<types::ConnectorSpec> for PluginSpec {
    fn from(spec: types::ConnectorSpec) -> Self {
        Self {
            name: spec.name,
            version: spec.version,
            kind: match spec.kind {
                types::ConnectorKind::Source => Kind::Source,
                types::ConnectorKind::Sink => Kind::Sink,
            },
            description: spec.description,
            config: spec.config_defs.into_iter().map(ConfigKey::from).collect(),
        }
    }
}

impl From<types::ConfigDef> for ConfigKey {
    fn from(def: types::ConfigDef) -> Self {
        use types::{ConfigType as T, Importance as I};
        Self {
            name: def.name,
            ty: match def.type_ {
                T::String => "STRING",
                T::Int => "INT",
                T::Long => "LONG",
                T::Double => "DOUBLE",
                T::Boolean => "BOOLEAN",
                T::List => "LIST",
                T::Password => "PASSWORD",
            },
            default: def.default_value,
            required: def.required,
            importance: match def.importance {
                I::High => "HIGH",
                I::Medium => "MEDIUM",
                I::Low => "LOW",
            },
            documentation: def.documentation,
            allowed_values: def.allowed_values,
        }
    }
}
