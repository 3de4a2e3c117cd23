//! One transform's or predicate's options (the keys under `transforms.<alias>.`), read as
//! Kafka Connect's `ConfigDef` reads them: lists split on commas and trimmed, booleans
//! `true`/`false` in any case, integers in range. Every option a transform reads is declared
//! with its doc, so a key nobody reads is reported instead of ignored.

use std::collections::BTreeMap;

/// One option's problem: the option (without the alias prefix) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    pub option: String,
    pub message: String,
}

impl OptionError {
    /// A problem with `option`.
    pub fn new(option: &str, message: impl Into<String>) -> Self {
        Self {
            option: option.to_owned(),
            message: message.into(),
        }
    }
}

/// An option a transform or predicate takes: its name, type and meaning (what the docs and
/// `GET /connector-plugins/.../config` show).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionDef {
    pub name: &'static str,
    /// `STRING`, `LIST`, `BOOLEAN`, `INT`.
    pub ty: &'static str,
    /// The default, as text (`None`: required or no default).
    pub default: Option<&'static str>,
    pub required: bool,
    pub doc: &'static str,
}

/// The options given to one transform or predicate.
#[derive(Debug, Clone, Default)]
pub struct Options {
    values: BTreeMap<String, String>,
}

impl Options {
    /// Options from `(option, value)` pairs.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        Self {
            values: pairs.into_iter().collect(),
        }
    }

    /// Every option given that `defs` does not declare.
    pub fn unknown(&self, defs: &[OptionDef]) -> Vec<OptionError> {
        self.values
            .keys()
            .filter(|k| !defs.iter().any(|d| d.name == k.as_str()))
            .map(|k| {
                let known: Vec<&str> = defs.iter().map(|d| d.name).collect();
                OptionError::new(
                    k,
                    if known.is_empty() {
                        "is not an option of this transform, which takes none; remove it".to_owned()
                    } else {
                        format!(
                            "is not an option of this transform (it takes {}); remove it or fix its name",
                            known.join(", ")
                        )
                    },
                )
            })
            .collect()
    }

    /// A string option; `None` when not given.
    pub fn string(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// A required string option.
    pub fn required(&self, name: &str) -> Result<&str, OptionError> {
        self.string(name).ok_or_else(|| {
            OptionError::new(
                name,
                format!("Missing required configuration \"{name}\" which has no default value."),
            )
        })
    }

    /// A `LIST` option: comma-separated, each item trimmed; an empty value is an empty list.
    /// A repeated item counts once, as Kafka Connect 4.x reads lists (KIP-1161).
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        self.string(name).map(|v| {
            let mut out: Vec<String> = Vec::new();
            for item in split_list(v) {
                if !out.contains(&item) {
                    out.push(item);
                }
            }
            out
        })
    }

    /// A required, non-empty list.
    pub fn required_list(&self, name: &str) -> Result<Vec<String>, OptionError> {
        self.required(name)?;
        let list = self.list(name).unwrap_or_default();
        if list.is_empty() {
            return Err(OptionError::new(
                name,
                format!("Invalid value [] for configuration {name}: Empty list"),
            ));
        }
        Ok(list)
    }

    /// A `BOOLEAN` option (`true`/`false` in any case), `default` when not given.
    pub fn boolean(&self, name: &str, default: bool) -> Result<bool, OptionError> {
        match self.string(name).map(str::trim) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(OptionError::new(
                name,
                format!(
                    "Invalid value {v} for configuration {name}: Expected value to be either true or false"
                ),
            )),
        }
    }

    /// An `INT` option; `None` when not given.
    pub fn int(&self, name: &str) -> Result<Option<i32>, OptionError> {
        match self.string(name).map(str::trim) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                OptionError::new(
                    name,
                    format!("Invalid value {v} for configuration {name}: Not a number of type INT"),
                )
            }),
        }
    }

    /// A string option that must be one of `allowed`, `default` when not given.
    pub fn one_of<'a>(
        &'a self,
        name: &str,
        allowed: &[&str],
        default: Option<&'a str>,
    ) -> Result<&'a str, OptionError> {
        let value = match (self.string(name), default) {
            (Some(v), _) => v,
            (None, Some(d)) => d,
            (None, None) => return self.required(name),
        };
        if allowed.contains(&value) {
            Ok(value)
        } else {
            Err(OptionError::new(
                name,
                format!(
                    "Invalid value {value} for configuration {name}: String must be one of: {}",
                    allowed.join(", ")
                ),
            ))
        }
    }
}

/// Split a `LIST` value as `ConfigDef` does.
pub fn split_list(value: &str) -> Vec<String> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Vec::new();
    }
    trimmed.split(',').map(|s| s.trim().to_owned()).collect()
}
