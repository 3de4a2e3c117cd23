//! A connector or task configuration, with typed getters whose errors name the key.

use crate::error::ConfigError;

/// A configuration: `key = value` text pairs, as the operator wrote them.
///
/// The worker has already checked it against the plugin's [`crate::ConfigDef`]s (required keys,
/// types, allowed values) and filled in defaults, so the getters here fail only for keys the
/// plugin did not declare or for checks beyond the type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    entries: Vec<(String, String)>,
}

impl Config {
    /// An empty configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// The raw value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key`, or an error naming the key when it is absent.
    pub fn string(&self, key: &str) -> Result<String, ConfigError> {
        self.get(key)
            .map(str::to_owned)
            .ok_or_else(|| ConfigError::new(key, "is required but missing"))
    }

    /// The value of `key`, or `default` when it is absent.
    pub fn string_or(&self, key: &str, default: &str) -> String {
        self.get(key).unwrap_or(default).to_owned()
    }

    /// `key` parsed as a number of type `T`, or `default` when absent; an error names the key
    /// and the bad value.
    pub fn parse_or<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(key) {
            None => Ok(default),
            Some(raw) => parse(key, raw),
        }
    }

    /// `key` parsed as `T`; an error names the key when it is absent or does not parse.
    pub fn parse<T: std::str::FromStr>(&self, key: &str) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        parse(key, &self.string(key)?)
    }

    /// `key` as a boolean (`true`/`false`, any case), or `default` when absent.
    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(raw) if raw.trim().eq_ignore_ascii_case("true") => Ok(true),
            Some(raw) if raw.trim().eq_ignore_ascii_case("false") => Ok(false),
            Some(raw) => Err(ConfigError::new(
                key,
                format!("must be true or false, got {raw:?}"),
            )),
        }
    }

    /// `key` as a comma-separated list (items trimmed, empty items dropped); empty when absent.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.get(key)
            .map(|raw| {
                raw.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Set `key` to `value`, replacing an earlier value; for building task configs.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        let key = key.into();
        let value = value.into();
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key, value)),
        }
        self
    }

    /// A copy with `key` set to `value`.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set(key, value);
        self
    }

    /// Every `(key, value)` pair, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

fn parse<T: std::str::FromStr>(key: &str, raw: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    raw.trim()
        .parse()
        .map_err(|e| ConfigError::new(key, format!("invalid value {raw:?}: {e}")))
}

impl From<Vec<(String, String)>> for Config {
    fn from(entries: Vec<(String, String)>) -> Self {
        Self { entries }
    }
}

impl From<Config> for Vec<(String, String)> {
    fn from(config: Config) -> Self {
        config.entries
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Config {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut config = Config::new();
        for (k, v) in iter {
            config.set(k, v);
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        [
            ("count", "10"),
            ("flag", "TRUE"),
            ("files", " a, b ,,c "),
            ("bad", "x"),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn typed_getters_parse_values() {
        let c = config();
        assert_eq!(c.parse::<u64>("count"), Ok(10));
        assert_eq!(c.parse_or::<u64>("absent", 7), Ok(7));
        assert_eq!(c.bool_or("flag", false), Ok(true));
        assert_eq!(c.list("files"), vec!["a", "b", "c"]);
        assert!(c.list("absent").is_empty());
    }

    #[test]
    fn errors_name_the_key_and_value() {
        let c = config();
        let err = c.parse::<u64>("bad").unwrap_err();
        assert_eq!(err.key, "bad");
        assert!(err.message.contains("\"x\""), "{err}");
        assert_eq!(c.string("missing").unwrap_err().key, "missing");
        assert_eq!(c.bool_or("bad", true).unwrap_err().key, "bad");
    }

    #[test]
    fn set_replaces_existing_keys() {
        let c = config().with("count", "11").with("new", "v");
        assert_eq!(c.get("count"), Some("11"));
        assert_eq!(c.iter().filter(|(k, _)| *k == "count").count(), 1);
        assert_eq!(c.get("new"), Some("v"));
    }
}
