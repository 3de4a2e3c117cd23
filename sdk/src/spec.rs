//! What a plugin says about itself: name, version, description and its configuration keys.

use crate::bindings::wit;

pub use wit::{ConfigType, Importance};

/// A plugin's self-description; the worker adds the kind (source or sink) from the world.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The name operators use as `connector.class`.
    pub name: String,
    /// The plugin's own semver version.
    pub version: String,
    /// One line for `plugins list`.
    pub description: String,
    /// Every configuration key the connector understands.
    pub config_defs: Vec<ConfigDef>,
}

impl Spec {
    /// A spec with no configuration keys yet.
    pub fn new(name: &str, version: &str, description: &str) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            description: description.to_owned(),
            config_defs: Vec::new(),
        }
    }

    /// Add a configuration key.
    pub fn config(mut self, def: ConfigDef) -> Self {
        self.config_defs.push(def);
        self
    }
}

/// One configuration key; build with [`ConfigDef::new`] and the chained setters.
#[derive(Debug, Clone)]
pub struct ConfigDef {
    name: String,
    ty: ConfigType,
    default: Option<String>,
    required: bool,
    importance: Importance,
    documentation: String,
    allowed: Vec<String>,
}

impl ConfigDef {
    /// An optional key of type `ty` without default, of medium importance.
    pub fn new(name: &str, ty: ConfigType, documentation: &str) -> Self {
        Self {
            name: name.to_owned(),
            ty,
            default: None,
            required: false,
            importance: Importance::Medium,
            documentation: documentation.to_owned(),
            allowed: Vec::new(),
        }
    }

    /// The key must be present (the worker rejects configs without it).
    pub fn required(mut self) -> Self {
        self.required = true;
        self.importance = Importance::High;
        self
    }

    /// The value used when the key is absent.
    pub fn default(mut self, value: impl ToString) -> Self {
        self.default = Some(value.to_string());
        self
    }

    /// How much an operator should care.
    pub fn importance(mut self, importance: Importance) -> Self {
        self.importance = importance;
        self
    }

    /// The only values accepted.
    pub fn allowed(mut self, values: &[&str]) -> Self {
        self.allowed = values.iter().map(|v| (*v).to_owned()).collect();
        self
    }
}

impl From<ConfigDef> for wit::ConfigDef {
    fn from(d: ConfigDef) -> Self {
        Self {
            name: d.name,
            type_: d.ty,
            default_value: d.default,
            required: d.required,
            importance: d.importance,
            documentation: d.documentation,
            allowed_values: d.allowed,
        }
    }
}

impl Spec {
    pub(crate) fn into_wit(self, kind: wit::ConnectorKind) -> wit::ConnectorSpec {
        wit::ConnectorSpec {
            name: self.name,
            version: self.version,
            kind,
            description: self.description,
            config_defs: self.config_defs.into_iter().map(Into::into).collect(),
        }
    }
}
