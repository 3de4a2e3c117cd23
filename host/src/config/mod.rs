//! Configuration files: the worker config and connector configs, in Kafka Connect's
//! `.properties` and `.json` formats or our `.toml`.
//!
//! Layering: `config/` reads files and keys, and holds the settings types the worker config is
//! made of, so it sits below the subsystems that use them. It imports nothing from `herder/`,
//! `rest/` or `worker/` (a test below reads this directory's sources to keep it so): a setting
//! such a subsystem needs either lives here ([`capacity`], [`restart`]) or is read by the
//! subsystem itself from the same keys ([`WorkerConfig::from_pairs_with`], which the REST API's
//! listeners use).

pub mod capacity;
pub mod connector;
pub mod file;
pub mod keys;
pub mod properties;
pub mod providers;
pub mod restart;
pub mod worker;

pub use connector::{ConnectorConfig, Problem};
pub use file::Pairs;
pub use worker::WorkerConfig;

#[cfg(test)]
mod tests {
    /// The modules `config/` must not use: they sit above it.
    const ABOVE: [&str; 3] = ["herder", "rest", "worker"];

    /// Where `text` (a source file of this directory, `depth` modules below the crate root)
    /// names a module of [`ABOVE`]: `crate::herder...`, `super::super::rest...`, or one inside
    /// a group, `crate::{kafka, worker::X}`. Text is not parsed into modules, so a `super` chain
    /// long enough to reach the crate from the file counts as reaching it even inside a nested
    /// module (where it would name a sibling in `config/`): such paths are written
    /// `crate::config::...` here.
    fn uses_above(text: &str, depth: usize) -> Vec<String> {
        // Every path to the crate root this file could write: from the file's module, and from
        // a module inside it (its tests).
        let roots = [
            "crate::".to_owned(),
            "super::".repeat(depth),
            "super::".repeat(depth + 1),
        ];
        let mut found = Vec::new();
        for root in &roots {
            for (at, _) in text.match_indices(root.as_str()) {
                let rest = &text[at + root.len()..];
                // A group: the names at its top level, each up to `::`, `,` or `}`.
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => {
                        let mut depth = 0usize;
                        let end = group
                            .char_indices()
                            .find(|&(_, c)| {
                                match c {
                                    '{' => depth += 1,
                                    '}' if depth == 0 => return true,
                                    '}' => depth -= 1,
                                    _ => {}
                                }
                                false
                            })
                            .map_or(group.len(), |(i, _)| i);
                        let mut names = Vec::new();
                        let mut level = 0usize;
                        let mut start = true;
                        for (i, c) in group[..end].char_indices() {
                            match c {
                                '{' => level += 1,
                                '}' => level = level.saturating_sub(1),
                                ',' if level == 0 => start = true,
                                c if start && !c.is_whitespace() => {
                                    names.push(&group[i..]);
                                    start = false;
                                }
                                _ => {}
                            }
                        }
                        names
                    }
                    None => vec![rest],
                };
                for name in names {
                    let ident: String = name
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if ABOVE.contains(&ident.as_str()) {
                        let line = text[..at].lines().count().max(1);
                        found.push(format!("line {line}: {root}{ident}"));
                    }
                }
            }
        }
        found
    }

    #[test]
    fn config_uses_nothing_above_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config");
        let mut checked = 0;
        let mut offences = Vec::new();
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // `mod.rs` is the module itself (its `super` is the crate); the others are one
            // level down. This file's tests spell the forbidden paths on purpose: they are cut.
            let (text, depth) = if path.ends_with("mod.rs") {
                let code = text.split("#[cfg(test)]\nmod tests {").next();
                (code.unwrap_or_default().to_owned(), 1)
            } else {
                (text, 2)
            };
            for offence in uses_above(&text, depth) {
                offences.push(format!("{}: {offence}", path.display()));
            }
            checked += 1;
        }
        assert!(
            checked >= 8,
            "only {checked} files read from {}",
            dir.display()
        );
        assert!(
            offences.is_empty(),
            "config/ must not use herder/, rest/ or worker/ (move the setting into config/, or \
             read it in the subsystem with WorkerConfig::from_pairs_with; name config/'s own \
             modules as crate::config::...):\n{}",
            offences.join("\n")
        );
    }

    #[test]
    fn the_check_sees_every_way_of_naming_a_module() {
        let hits = |text: &str, depth| uses_above(text, depth).len();
        assert_eq!(hits("use crate::herder::Capacity;", 2), 1);
        assert_eq!(hits("let x: crate::rest::RestConfig = y;", 2), 1);
        assert_eq!(hits("use crate::{kafka, worker::RestartPolicy};", 2), 1);
        assert_eq!(
            hits("use crate::{\n    herder,\n    rest::{a, b},\n};", 2),
            2
        );
        assert_eq!(hits("use super::super::worker;", 2), 1);
        assert_eq!(hits("use super::super::super::herder;", 2), 1);
        assert_eq!(hits("use super::rest;", 1), 1);
        assert_eq!(hits("use super::restart::RestartPolicy;", 2), 0);
        assert_eq!(hits("use crate::config::restart;", 2), 0);
        assert_eq!(hits("use crate::{kafka::{rest, worker}, task};", 2), 0);
        assert_eq!(hits("crate::restart_all()", 2), 0);
    }
}
