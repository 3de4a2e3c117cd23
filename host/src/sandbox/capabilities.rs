//! Capabilities: what a plugin instance may touch outside its own memory. Everything is denied
//! unless the connector config grants it, and this module is the only place that turns a
//! config into WASI permissions.
//!
//! Granted: host directories listed in `sandbox.fs.read` (read-only) and `sandbox.fs.write`
//! (read-write), visible to the plugin under the same absolute paths; the topics a source
//! connector may write to (`topic`, `topics`, `topic.prefix`, `sandbox.topics.write`,
//! `sandbox.topics.write.regex`), which the source loop checks for every new topic; and TCP
//! connections to the peers `sandbox.net.connect` lists, with lookups of the names it lists
//! ([`net`]), and HTTP requests to the URL prefixes `sandbox.http.allow` lists ([`http`]). Never
//! granted: the environment, arguments, stdin, binds, listening sockets, UDP,
//! and lookups of any other name. Stdout and stderr go to the logs.

pub mod http;
pub mod net;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

use super::state::Tags;
use super::stdio::{LogStream, Stream};
use crate::config_keys::{FS_READ, FS_WRITE, TOPICS_WRITE, TOPICS_WRITE_REGEX};
pub use http::{HTTP_ALLOW, HttpGrant};
pub use net::{NET_CONNECT, NetAccess, NetGrant};

/// The items of the comma-separated list keys named `key` in `config`, parsed with `parse`
/// (whose error names the key and the item), in order.
fn parse_list<T>(
    config: &[(String, String)],
    key: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    config
        .iter()
        .filter(|(k, _)| k == key)
        .flat_map(|(_, value)| value.split(',').map(str::trim).filter(|s| !s.is_empty()))
        .map(parse)
        .collect()
}

/// A grant's entries as the operator wrote them, in one phrase (`nothing` for none).
fn describe_list<'a>(texts: impl Iterator<Item = &'a str>) -> String {
    let texts: Vec<&str> = texts.collect();
    if texts.is_empty() {
        "nothing".to_owned()
    } else {
        texts.join(", ")
    }
}

/// Most bytes one `get-random-bytes` call may ask for (wasmtime's default is 64 MiB).
pub const MAX_RANDOM_REQUEST: u64 = 1024 * 1024;

/// One granted directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirGrant {
    /// The directory on the host, canonical (symlinks resolved).
    pub host: PathBuf,
    /// The path under which the plugin sees it: the path as configured.
    pub guest: String,
    /// Whether the plugin may create, write and delete files in it.
    pub writable: bool,
}

/// The topics a source connector may write to: the names its operator's config gives in
/// `topic`, `topics` and `sandbox.topics.write`, those that start with its `topic.prefix`, and
/// those `sandbox.topics.write.regex` matches whole. Only these may be written, and so only these
/// may be created.
#[derive(Debug, Clone, Default)]
pub struct TopicGrant {
    names: std::collections::BTreeSet<String>,
    /// `topic.prefix`: every topic whose name starts with it (the key Kafka Connect's JDBC
    /// source and Debezium name each table's topic by).
    prefixes: std::collections::BTreeSet<String>,
    /// The pattern as configured, and compiled to match whole names.
    pattern: Option<(String, regex::Regex)>,
}

impl PartialEq for TopicGrant {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names
            && self.prefixes == other.prefixes
            && self.pattern.as_ref().map(|(p, _)| p) == other.pattern.as_ref().map(|(p, _)| p)
    }
}

impl Eq for TopicGrant {}

impl TopicGrant {
    /// The grant `config` makes; a bad pattern is an error naming the key.
    pub fn from_config(config: &[(String, String)]) -> Result<Self, String> {
        let mut grant = TopicGrant::default();
        for (key, value) in config {
            match key.as_str() {
                "topic" => {
                    let name = value.trim();
                    if !name.is_empty() {
                        grant.names.insert(name.to_owned());
                    }
                }
                "topic.prefix" => {
                    let prefix = value.trim();
                    if !prefix.is_empty() {
                        grant.prefixes.insert(prefix.to_owned());
                    }
                }
                "topics" | TOPICS_WRITE => grant.names.extend(
                    value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                ),
                TOPICS_WRITE_REGEX if !value.trim().is_empty() => {
                    let pattern = value.trim();
                    let compiled = regex::Regex::new(&format!("^(?:{pattern})$"))
                        .map_err(|e| format!("{TOPICS_WRITE_REGEX}: {pattern:?} is not a valid regular expression: {e}"))?;
                    grant.pattern = Some((pattern.to_owned(), compiled));
                }
                _ => {}
            }
        }
        Ok(grant)
    }

    /// Whether records may be written to `topic`.
    pub fn allows(&self, topic: &str) -> bool {
        self.names.contains(topic)
            || self.prefixes.iter().any(|p| topic.starts_with(p.as_str()))
            || self
                .pattern
                .as_ref()
                .is_some_and(|(_, compiled)| compiled.is_match(topic))
    }

    /// What is granted, for errors and `GET /connectors/{name}`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.names.is_empty() {
            parts.push(
                self.names
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        for prefix in &self.prefixes {
            parts.push(format!("names starting with {prefix:?}"));
        }
        if let Some((pattern, _)) = &self.pattern {
            parts.push(format!("names matching {pattern:?}"));
        }
        if parts.is_empty() {
            "no topic".to_owned()
        } else {
            parts.join("; ")
        }
    }
}

/// The capabilities of one connector's instances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    dirs: Vec<DirGrant>,
    topics: TopicGrant,
    net: NetGrant,
    http: HttpGrant,
}

impl Grants {
    /// No capabilities at all (used to read a plugin's spec).
    pub fn none() -> Self {
        Self::default()
    }

    /// The grants a connector config makes. Every path must be an absolute path to an existing
    /// directory; an error names the key and the path.
    pub fn from_config(config: &[(String, String)]) -> Result<Self, String> {
        let mut dirs: Vec<DirGrant> = Vec::new();
        for (key, value) in config {
            let writable = match key.as_str() {
                FS_READ => false,
                FS_WRITE => true,
                _ => continue,
            };
            for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let grant = dir_grant(key, item, writable)?;
                match dirs.iter_mut().find(|d| d.guest == grant.guest) {
                    // A directory granted both ways is writable.
                    Some(existing) => existing.writable |= grant.writable,
                    None => dirs.push(grant),
                }
            }
        }
        Ok(Self {
            dirs,
            topics: TopicGrant::from_config(config)?,
            net: NetGrant::from_config(config)?,
            http: HttpGrant::from_config(config)?,
        })
    }

    /// The URLs HTTP requests may go to.
    pub fn http(&self) -> &HttpGrant {
        &self.http
    }

    /// The TCP peers granted.
    pub fn net(&self) -> &NetGrant {
        &self.net
    }

    /// The topics a source connector may write to.
    pub fn topics(&self) -> &TopicGrant {
        &self.topics
    }

    /// The granted directories.
    pub fn dirs(&self) -> &[DirGrant] {
        &self.dirs
    }

    /// Build the WASI context of one instance: these directories, logging stdio, the TCP
    /// peers `net` allows (with its name lookups, which the linker filters through `net` as
    /// well), nothing else.
    pub(crate) fn wasi_ctx(
        &self,
        tags: &Tags,
        budget: &Arc<super::stdio::LogBudget>,
        net: &Arc<NetAccess>,
    ) -> wasmtime::Result<WasiCtx> {
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdout(LogStream {
                tags: tags.clone(),
                stream: Stream::Stdout,
                budget: budget.clone(),
            })
            .stderr(LogStream {
                tags: tags.clone(),
                stream: Stream::Stderr,
                budget: budget.clone(),
            })
            // Random bytes are generated by the host for each call: cap one request.
            .max_random_size(MAX_RANDOM_REQUEST)
            .allow_udp(false)
            // TCP and lookups are on for every instance so that every attempt meets the
            // grant's check (an empty grant refuses everything) and a refusal is explained in
            // the call's error, rather than failing earlier without a word.
            .allow_tcp(true)
            .allow_ip_name_lookup(true);
        let check = Arc::clone(net);
        builder.socket_addr_check(move |addr, usage| {
            let check = Arc::clone(&check);
            Box::pin(async move { check.may_use(addr, usage).await })
        });
        for dir in &self.dirs {
            let perms = if dir.writable {
                wasmtime_wasi::FsPerms::ReadWrite
            } else {
                wasmtime_wasi::FsPerms::ReadOnly
            };
            builder.preopened_dir(&dir.host, &dir.guest, perms)?;
        }
        Ok(builder.build())
    }
}

fn dir_grant(key: &str, item: &str, writable: bool) -> Result<DirGrant, String> {
    let path = Path::new(item);
    if !path.is_absolute() {
        return Err(format!(
            "{key}: {item:?} is not an absolute path; grant directories by absolute path"
        ));
    }
    let host = path
        .canonicalize()
        .map_err(|e| format!("{key}: cannot use {item:?}: {e}"))?;
    if !host.is_dir() {
        return Err(format!(
            "{key}: {item:?} is not a directory; grant its parent directory"
        ));
    }
    let guest = item.trim_end_matches('/');
    let guest = if guest.is_empty() { "/" } else { guest };
    Ok(DirGrant {
        host,
        guest: guest.to_owned(),
        writable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, String)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn grants_come_only_from_the_sandbox_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap().to_owned();
        let grants = Grants::from_config(&cfg(&[
            ("file", "/etc/passwd".into()),
            (FS_READ, format!("{path}/")),
        ]))
        .unwrap();
        assert_eq!(grants.dirs().len(), 1);
        assert_eq!(grants.dirs()[0].guest, path);
        assert!(!grants.dirs()[0].writable);
        assert!(Grants::from_config(&[]).unwrap().dirs().is_empty());
    }

    #[test]
    fn read_and_write_of_one_directory_is_writable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap().to_owned();
        let grants =
            Grants::from_config(&cfg(&[(FS_READ, path.clone()), (FS_WRITE, path)])).unwrap();
        assert_eq!(grants.dirs().len(), 1);
        assert!(grants.dirs()[0].writable);
    }

    #[test]
    fn bad_grants_name_key_and_path() {
        let err = Grants::from_config(&cfg(&[(FS_READ, "relative/dir".into())])).unwrap_err();
        assert!(
            err.starts_with(FS_READ) && err.contains("relative/dir"),
            "{err}"
        );
        let err = Grants::from_config(&cfg(&[(FS_WRITE, "/no/such/dir".into())])).unwrap_err();
        assert!(
            err.starts_with(FS_WRITE) && err.contains("/no/such/dir"),
            "{err}"
        );
        let file = tempfile::NamedTempFile::new().unwrap();
        let err =
            Grants::from_config(&cfg(&[(FS_READ, file.path().display().to_string())])).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
    }

    #[test]
    fn topics_are_granted_by_name_and_by_whole_match() {
        let grant = Grants::from_config(&cfg(&[
            ("topic", " a ".into()),
            ("topics", "b,c".into()),
            (TOPICS_WRITE, "d".into()),
            (TOPICS_WRITE_REGEX, "logs\\..*".into()),
        ]))
        .unwrap();
        let topics = grant.topics();
        for ok in ["a", "b", "c", "d", "logs.x"] {
            assert!(topics.allows(ok), "{ok}");
        }
        for refused in ["e", "ab", "x.logs.y", "logs"] {
            assert!(!topics.allows(refused), "{refused}");
        }
        let prefixed = Grants::from_config(&cfg(&[("topic.prefix", "shop-".into())])).unwrap();
        assert!(prefixed.topics().allows("shop-users"));
        assert!(!prefixed.topics().allows("shop"));
        assert!(!prefixed.topics().allows("x-shop-users"));
        assert!(!Grants::none().topics().allows("a"));
        let err = Grants::from_config(&cfg(&[(TOPICS_WRITE_REGEX, "(".into())])).unwrap_err();
        assert!(err.starts_with(TOPICS_WRITE_REGEX), "{err}");
    }
}
