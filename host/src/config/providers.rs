//! Config providers (Kafka's KIP-297, KIP-887): `${provider:path:key}` placeholders in worker
//! and connector configs, so that credentials live in files, directories or the environment
//! rather than in configs.
//!
//! A worker declares its providers (`config.providers=file,env,directory`,
//! `config.providers.<name>.class=<Kafka Connect's class or short name>`,
//! `config.providers.<name>.param.<param>=...`). Connector configs are resolved when a
//! connector or task starts (so a restart picks up a rotated secret) and only what the plugin
//! and the Kafka clients receive holds the resolved values: the stored config, REST answers,
//! statuses and task configs keep the placeholders ([`Resolved::restore`] puts them back into
//! task configs a plugin made from resolved values, as Kafka Connect's `reverseTransform`
//! does), and [`Resolved::redact`] takes resolved values out of text the plugin or the worker
//! writes.
//!
//! As in Kafka Connect, a placeholder naming a provider the worker does not declare is left as
//! it is (configs may hold literal `${...}` text); one naming a declared provider that cannot
//! resolve it is an error that names the key, never the value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

use super::connector::Problem;

/// Worker key: the names of the declared providers.
pub const PROVIDERS: &str = "config.providers";

/// What a resolved value is replaced with in text that is shown.
pub const REDACTED: &str = "[redacted]";

/// Kafka's placeholder syntax: `${provider:key}` or `${provider:path:key}`.
fn placeholder() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}").expect("the placeholder pattern")
    })
}

/// One declared provider.
#[derive(Debug, Clone)]
enum Provider {
    /// `${file:/path/to/file.properties:key}`: a key of a properties file.
    File { allowed: Option<Vec<PathBuf>> },
    /// `${directory:/path/to/dir:file}`: the content of a file in a directory.
    Directory { allowed: Option<Vec<PathBuf>> },
    /// `${env:NAME}`: an environment variable, if its name matches the allow-list pattern.
    Env { allowlist: Option<Regex> },
}

/// The providers a worker declares.
#[derive(Debug, Clone, Default)]
pub struct Providers {
    by_name: BTreeMap<String, Provider>,
}

/// A config with its placeholders resolved.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    /// The config with resolved values, for the plugin and the clients.
    pub pairs: Vec<(String, String)>,
    /// Keys whose value held a placeholder, with the value as written.
    raw: BTreeMap<String, String>,
    /// Every value a placeholder resolved to, longest first (for [`Resolved::redact`]).
    secrets: Vec<String>,
}

impl Resolved {
    /// A config without placeholders.
    pub fn plain(pairs: &[(String, String)]) -> Self {
        Self {
            pairs: pairs.to_vec(),
            ..Self::default()
        }
    }

    /// Whether any value was resolved.
    pub fn has_secrets(&self) -> bool {
        !self.secrets.is_empty()
    }

    /// Put the placeholders back into a config made from the resolved one (a task config):
    /// a key that held a placeholder gets it again where its value is the resolved one, and any
    /// resolved value elsewhere is redacted.
    pub fn restore(&self, config: &[(String, String)]) -> Vec<(String, String)> {
        self.put_back(config, |v| self.redact(v))
    }

    /// `text` with every resolved value in it replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        redact(&self.secrets, text)
    }

    /// A config made from the resolved one (a task config) with the placeholders back where a
    /// key holds exactly its resolved value, and every other value as it is: what resolving
    /// again turns into the config with today's values.
    pub fn placeholders_back(&self, config: &[(String, String)]) -> Vec<(String, String)> {
        self.put_back(config, str::to_owned)
    }

    /// `config` with the placeholder back in each key that holds exactly its resolved value;
    /// `other` makes every other value.
    fn put_back(
        &self,
        config: &[(String, String)],
        other: impl Fn(&str) -> String,
    ) -> Vec<(String, String)> {
        let resolved: BTreeMap<&str, &str> = self
            .pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        config
            .iter()
            .map(|(k, v)| match self.raw.get(k) {
                Some(raw) if resolved.get(k.as_str()) == Some(&v.as_str()) => {
                    (k.clone(), raw.clone())
                }
                _ => (k.clone(), other(v)),
            })
            .collect()
    }

    /// The resolved values, longest first.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }
}

/// The forms in which a message may quote resolved value `v`: as it is, escaped as Rust's
/// `{:?}` and JSON escape it (a secret file ending in a newline, a password with a quote), and
/// without surrounding whitespace (a value trimmed before it was shown).
fn renderings(v: &str) -> Vec<String> {
    let mut forms = vec![v.to_owned(), v.escape_debug().to_string()];
    if let Ok(json) = serde_json::to_string(v) {
        forms.push(json[1..json.len() - 1].to_owned());
    }
    let trimmed = v.trim();
    if !trimmed.is_empty() {
        forms.push(trimmed.to_owned());
    }
    forms.dedup();
    forms
}

/// `text` with every one of `secrets` in it (longest first) replaced by [`REDACTED`].
pub fn redact(secrets: &[String], text: &str) -> String {
    let mut out = text.to_owned();
    for secret in secrets {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    out
}

/// Kafka's class names of the providers, and the short names accepted for them.
const CLASSES: &[(&str, &str)] = &[
    (
        "org.apache.kafka.common.config.provider.FileConfigProvider",
        "file",
    ),
    (
        "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
        "directory",
    ),
    (
        "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        "env",
    ),
];

/// Resolved values shorter than this are not redacted from text (a one-character value would
/// redact every occurrence of that character); they are still never stored or shown as config.
const REDACT_MIN_LEN: usize = 4;

impl Providers {
    /// Read the providers a worker config declares; every problem is reported.
    pub fn from_worker(pairs: &[(String, String)]) -> Result<Self, Vec<Problem>> {
        let get = |k: &str| super::file::last(pairs, k);
        let mut problems = Vec::new();
        let mut by_name = BTreeMap::new();
        let names: Vec<&str> = get(PROVIDERS)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        for name in &names {
            let class_key = format!("{PROVIDERS}.{name}.class");
            let Some(class) = get(&class_key) else {
                problems.push(Problem::new(
                    &class_key,
                    format!(
                        "is missing: provider {name} is declared in {PROVIDERS} but has no class (FileConfigProvider, DirectoryConfigProvider or EnvVarConfigProvider, or file, directory, env)"
                    ),
                ));
                continue;
            };
            let kind = CLASSES
                .iter()
                .find(|(long, short)| {
                    class == *long
                        || class.eq_ignore_ascii_case(short)
                        || long.rsplit('.').next() == Some(class)
                })
                .map(|(_, short)| *short);
            let param = |p: &str| get(&format!("{PROVIDERS}.{name}.param.{p}"));
            let paths = |p: &str| -> Option<Vec<PathBuf>> {
                param(p).map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(PathBuf::from)
                        .collect()
                })
            };
            let provider = match kind {
                Some("file") => Provider::File {
                    allowed: paths("allowed.paths"),
                },
                Some("directory") => Provider::Directory {
                    allowed: paths("allowed.paths"),
                },
                Some(_) => {
                    let allowlist = match param("allowlist.pattern") {
                        None => None,
                        Some(p) => match Regex::new(&format!("^(?:{p})$")) {
                            Ok(re) => Some(re),
                            Err(e) => {
                                problems.push(Problem::new(
                                    format!("{PROVIDERS}.{name}.param.allowlist.pattern"),
                                    format!("is not a valid regular expression: {e}"),
                                ));
                                None
                            }
                        },
                    };
                    Provider::Env { allowlist }
                }
                None => {
                    problems.push(Problem::new(
                        &class_key,
                        format!(
                            "{class:?} is not a provider wasm-connect has; use {}, {} or {} (or file, directory, env)",
                            CLASSES[0].0, CLASSES[1].0, CLASSES[2].0
                        ),
                    ));
                    continue;
                }
            };
            if let Provider::File {
                allowed: Some(list),
            }
            | Provider::Directory {
                allowed: Some(list),
            } = &provider
                && let Some(relative) = list.iter().find(|p| !p.is_absolute())
            {
                problems.push(Problem::new(
                    format!("{PROVIDERS}.{name}.param.allowed.paths"),
                    format!("{} is not an absolute path", relative.display()),
                ));
            }
            by_name.insert((*name).to_owned(), provider);
        }
        // A provider configured but not declared is a typo waiting to be found.
        for (key, _) in pairs {
            if let Some(rest) = key.strip_prefix(&format!("{PROVIDERS}.")) {
                let name = rest.split('.').next().unwrap_or_default();
                if !names.contains(&name) {
                    problems.push(Problem::new(
                        key,
                        format!("configures provider {name}, which {PROVIDERS} does not declare"),
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(Self { by_name })
        } else {
            Err(problems)
        }
    }

    /// Whether any provider is declared.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Resolve every placeholder of a declared provider in `config` (`config.providers.*` keys
    /// themselves are left as they are). Every key that cannot be resolved is reported; the
    /// messages name the key, the provider and the path, never a value.
    pub fn resolve(&self, config: &[(String, String)]) -> Result<Resolved, Vec<Problem>> {
        if self.by_name.is_empty() {
            return Ok(Resolved::plain(config));
        }
        let mut problems = Vec::new();
        let mut resolved = Resolved::default();
        // Files are read once per resolution, however many keys they serve.
        let mut files: BTreeMap<PathBuf, Result<BTreeMap<String, String>, String>> =
            BTreeMap::new();
        for (key, value) in config {
            if key.starts_with(&format!("{PROVIDERS}.")) || !value.contains("${") {
                resolved.pairs.push((key.clone(), value.clone()));
                continue;
            }
            let mut failed = false;
            let mut any = false;
            let mut found = Vec::new();
            let out = placeholder().replace_all(value, |caps: &regex::Captures<'_>| {
                let whole = caps.get(0).map_or("", |m| m.as_str()).to_owned();
                let name = caps.get(1).map_or("", |m| m.as_str());
                let path = caps.get(2).map(|m| m.as_str());
                let item = caps.get(3).map_or("", |m| m.as_str());
                let Some(provider) = self.by_name.get(name) else {
                    return whole;
                };
                any = true;
                match lookup(provider, path, item, &mut files) {
                    Ok(v) => {
                        found.push(v.clone());
                        v
                    }
                    Err(e) => {
                        failed = true;
                        problems.push(Problem::new(
                            key,
                            format!(
                                "cannot resolve ${{{name}:{}{item}}}: {e}",
                                path.map(|p| format!("{p}:")).unwrap_or_default()
                            ),
                        ));
                        whole
                    }
                }
            });
            if any && !failed {
                resolved.raw.insert(key.clone(), value.clone());
            }
            for v in found {
                for form in renderings(&v) {
                    if form.len() >= REDACT_MIN_LEN && !resolved.secrets.contains(&form) {
                        resolved.secrets.push(form);
                    }
                }
            }
            resolved.pairs.push((key.clone(), out.into_owned()));
        }
        resolved.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        if problems.is_empty() {
            Ok(resolved)
        } else {
            Err(problems)
        }
    }
}

/// Whether `path` is under one of `allowed` (none: any path).
fn allowed(path: &Path, allowed: &Option<Vec<PathBuf>>) -> Result<(), String> {
    let Some(list) = allowed else {
        return Ok(());
    };
    // Compare real paths, so `..` and links cannot step outside.
    let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if list
        .iter()
        .any(|a| std::fs::canonicalize(a).is_ok_and(|a| real.starts_with(a)))
    {
        Ok(())
    } else {
        Err(format!(
            "{} is outside the provider's allowed.paths",
            path.display()
        ))
    }
}

fn lookup(
    provider: &Provider,
    path: Option<&str>,
    item: &str,
    files: &mut BTreeMap<PathBuf, Result<BTreeMap<String, String>, String>>,
) -> Result<String, String> {
    match provider {
        Provider::Env { allowlist } => {
            if let Some(p) = path.filter(|p| !p.is_empty()) {
                return Err(format!(
                    "the env provider takes no path ({p:?}); write ${{env:NAME}}"
                ));
            }
            if allowlist.as_ref().is_some_and(|re| !re.is_match(item)) {
                return Err(format!(
                    "{item} does not match the provider's allowlist.pattern"
                ));
            }
            std::env::var(item).map_err(|_| format!("environment variable {item} is not set"))
        }
        Provider::File { allowed: list } => {
            let path = path.filter(|p| !p.is_empty()).ok_or_else(|| {
                "the file provider needs a path: ${file:/path/file.properties:key}".to_owned()
            })?;
            let path = PathBuf::from(path);
            allowed(&path, list)?;
            let entries = files
                .entry(path.clone())
                .or_insert_with(|| {
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                    Ok(super::properties::parse(&text)
                        .map_err(|e| format!("{}: {e}", path.display()))?
                        .into_iter()
                        .collect())
                })
                .clone()?;
            entries
                .get(item)
                .cloned()
                .ok_or_else(|| format!("{} has no key {item}", path.display()))
        }
        Provider::Directory { allowed: list } => {
            let dir = path.filter(|p| !p.is_empty()).ok_or_else(|| {
                "the directory provider needs a path: ${directory:/path/dir:file}".to_owned()
            })?;
            if item.contains('/') || item == ".." || item == "." {
                return Err(format!("{item:?} is not a file name in the directory"));
            }
            let file = Path::new(dir).join(item);
            allowed(&file, list)?;
            std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::file::pairs_of as pairs;

    #[test]
    fn file_directory_and_env_placeholders_resolve_and_restore() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("secrets.properties");
        std::fs::write(&secrets, "db.password=s3cr3t-pw\nuser=app\n").unwrap();
        std::fs::write(dir.path().join("token"), "tok-123456").unwrap();
        // A variable every process has (tests must not set variables: others read them).
        let path = std::env::var("PATH").unwrap();
        let providers = Providers::from_worker(&pairs(&[
            ("config.providers", "file,directory,env"),
            (
                "config.providers.file.class",
                "org.apache.kafka.common.config.provider.FileConfigProvider",
            ),
            (
                "config.providers.directory.class",
                "DirectoryConfigProvider",
            ),
            ("config.providers.env.class", "env"),
            ("config.providers.env.param.allowlist.pattern", "PATH|HOME"),
        ]))
        .unwrap();
        let f = secrets.display().to_string();
        let d = dir.path().display().to_string();
        let config = pairs(&[
            ("password", &format!("${{file:{f}:db.password}}")),
            ("url", &format!("postgres://${{file:{f}:user}}@db")),
            ("token", &format!("${{directory:{d}:token}}")),
            ("from.env", "${env:PATH}"),
            ("literal", "${unknown:x} and $HOME"),
        ]);
        let r = providers.resolve(&config).unwrap();
        let get = |k: &str| r.pairs.iter().find(|(key, _)| key == k).unwrap().1.clone();
        assert_eq!(get("password"), "s3cr3t-pw");
        assert_eq!(get("url"), "postgres://app@db");
        assert_eq!(get("token"), "tok-123456");
        assert_eq!(get("from.env"), path);
        assert_eq!(get("literal"), "${unknown:x} and $HOME");
        // A task config made from the resolved config gets the placeholders back.
        let task = pairs(&[
            ("password", "s3cr3t-pw"),
            ("task.id", "0"),
            ("copy", "x s3cr3t-pw"),
        ]);
        let restored = r.restore(&task);
        assert_eq!(restored[0].1, format!("${{file:{f}:db.password}}"));
        assert_eq!(restored[1].1, "0");
        assert_eq!(restored[2].1, "x [redacted]");
        assert_eq!(
            r.redact("connecting with s3cr3t-pw and tok-123456"),
            "connecting with [redacted] and [redacted]"
        );
    }

    #[test]
    fn secrets_quoted_escaped_or_trimmed_are_redacted_too() {
        // A secret file written by `echo` ends in a newline; a password may hold a quote.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pw"), "hunter2-secret\n").unwrap();
        std::fs::write(dir.path().join("q"), "quote\"secret\\x").unwrap();
        let providers = Providers::from_worker(&pairs(&[
            ("config.providers", "dir"),
            ("config.providers.dir.class", "DirectoryConfigProvider"),
        ]))
        .unwrap();
        let d = dir.path().display().to_string();
        let r = providers
            .resolve(&pairs(&[
                ("a", &format!("${{dir:{d}:pw}}")),
                ("b", &format!("${{dir:{d}:q}}")),
            ]))
            .unwrap();
        for (shown, message) in [
            (
                "hunter2-secret\n",
                format!("{:?} is not a valid INT", "hunter2-secret\n"),
            ),
            (
                "hunter2-secret\n",
                serde_json::json!({"v": "hunter2-secret\n"}).to_string(),
            ),
            ("hunter2-secret", "value hunter2-secret is wrong".to_owned()),
            (
                "quote\"secret\\x",
                format!("{:?} is not allowed", "quote\"secret\\x"),
            ),
            (
                "quote\"secret\\x",
                serde_json::json!(["quote\"secret\\x"]).to_string(),
            ),
        ] {
            let redacted = r.redact(&message);
            assert!(
                !redacted.contains("hunter2") && !redacted.contains("quote"),
                "{shown:?} in {message:?} became {redacted:?}"
            );
            assert!(redacted.contains(REDACTED), "{redacted}");
        }
    }

    #[test]
    fn what_cannot_be_resolved_names_the_key_and_never_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("s.properties");
        std::fs::write(&secrets, "a=hidden-value\n").unwrap();
        let allowed = dir.path().join("allowed");
        std::fs::create_dir(&allowed).unwrap();
        let providers = Providers::from_worker(&pairs(&[
            ("config.providers", "file,env"),
            ("config.providers.file.class", "FileConfigProvider"),
            (
                "config.providers.file.param.allowed.paths",
                allowed.to_str().unwrap(),
            ),
            ("config.providers.env.class", "EnvVarConfigProvider"),
            ("config.providers.env.param.allowlist.pattern", "ONLY_THIS"),
        ]))
        .unwrap();
        let f = secrets.display().to_string();
        let problems = providers
            .resolve(&pairs(&[
                ("a", &format!("${{file:{f}:a}}")),
                ("b", "${env:PATH}"),
            ]))
            .unwrap_err();
        assert_eq!(problems.len(), 2);
        assert!(
            problems[0].key == "a"
                && problems[0]
                    .message
                    .contains("outside the provider's allowed.paths"),
            "{problems:?}"
        );
        assert!(
            problems[1].message.contains("allowlist.pattern"),
            "{problems:?}"
        );
        assert!(problems.iter().all(|p| !p.message.contains("hidden-value")));
        let bad = Providers::from_worker(&pairs(&[
            ("config.providers", "vault"),
            (
                "config.providers.vault.class",
                "com.example.VaultConfigProvider",
            ),
            ("config.providers.other.class", "file"),
        ]))
        .unwrap_err();
        assert_eq!(bad.len(), 2, "{bad:?}");
    }
}
