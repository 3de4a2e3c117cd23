//! Single message transforms and predicates, configured as in Kafka Connect
//! (`transforms=a,b`, `transforms.a.type=...`, `transforms.a.predicate=p`,
//! `transforms.a.negate=true`, `predicates=p`, `predicates.p.type=...`) with Connect's class
//! names or short names, and Connect's built-in transforms with its results.
//!
//! A source task runs its chain after the plugin's poll and before the converters; a sink task
//! after the converters and before `put`. Records go through as [`Record`]s that borrow the
//! key and value until a transform needs their structure (`record.rs`), so a connector
//! without transforms pays nothing and a chain of routing transforms pays no parsing.
//!
//! Module map: `data.rs` (Connect's data model), `json.rs` (JsonConverter between JSON and
//! it), `java.rs` (the Java behaviour results depend on: number text, `SimpleDateFormat`),
//! `options.rs` (a transform's options), `fields.rs`, `cast.rs`, `routing.rs` (the built-ins).

pub mod cast;
pub mod data;
pub mod fields;
pub mod java;
pub mod json;
pub mod options;
pub mod record;
pub mod routing;

use std::collections::BTreeMap;

pub use options::{OptionDef, OptionError, Options};
pub use record::{Header, Record, SchemaCache, Side, TransformError};

use crate::config::connector::Problem;

/// The connector keys that list transforms and predicates.
pub const TRANSFORMS: &str = "transforms";
/// See [`TRANSFORMS`].
pub const PREDICATES: &str = "predicates";

/// Which side of a record a `$Key` / `$Value` transform works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Key,
    Value,
}

impl Target {
    /// The side of `record`.
    pub fn side<'r, 'a>(self, record: &'r mut Record<'a>) -> &'r mut Side<'a> {
        match self {
            Target::Key => &mut record.key,
            Target::Value => &mut record.value,
        }
    }

    /// `key` or `value`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Key => "key",
            Target::Value => "value",
        }
    }
}

/// A configured transform.
pub trait Transform: Send + Sync {
    /// Transform `record` in place; `Ok(false)` drops it. `cache` holds the chain's parsed
    /// schemas.
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError>;
}

/// A configured predicate.
pub trait Predicate: Send + Sync {
    /// Whether `record` matches.
    fn test(&self, record: &Record<'_>) -> bool;
}

/// How a built-in transform is made: with its side for `$Key`/`$Value` classes.
type MakeTransform = fn(Option<Target>, &Options) -> Result<Box<dyn Transform>, OptionError>;
type MakePredicate = fn(&Options) -> Result<Box<dyn Predicate>, OptionError>;

/// A built-in transform: its Connect class (short name), whether it has `$Key`/`$Value`
/// variants, its options and what it does.
pub struct Builtin {
    pub name: &'static str,
    pub keyed: bool,
    pub options: &'static [OptionDef],
    pub doc: &'static str,
    make: MakeTransform,
}

/// A built-in predicate.
pub struct BuiltinPredicate {
    pub name: &'static str,
    pub options: &'static [OptionDef],
    pub doc: &'static str,
    make: MakePredicate,
}

/// Kafka Connect's package of transforms, and of predicates.
pub const TRANSFORMS_PACKAGE: &str = "org.apache.kafka.connect.transforms.";
/// See [`TRANSFORMS_PACKAGE`].
pub const PREDICATES_PACKAGE: &str = "org.apache.kafka.connect.transforms.predicates.";

fn side(target: Option<Target>) -> Target {
    target.unwrap_or(Target::Value)
}

/// Every built-in transform.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "InsertField",
        keyed: true,
        options: fields::INSERT_FIELD,
        doc: "Insert fields from the record's metadata (topic, partition, offset, timestamp) or a static value.",
        make: |t, o| Ok(Box::new(fields::InsertField::new(side(t), o)?)),
    },
    Builtin {
        name: "ReplaceField",
        keyed: true,
        options: fields::REPLACE_FIELD,
        doc: "Keep, drop or rename fields.",
        make: |t, o| Ok(Box::new(fields::ReplaceField::new(side(t), o)?)),
    },
    Builtin {
        name: "MaskField",
        keyed: true,
        options: fields::MASK_FIELD,
        doc: "Replace fields with their type's empty value or a replacement.",
        make: |t, o| Ok(Box::new(fields::MaskField::new(side(t), o)?)),
    },
    Builtin {
        name: "ValueToKey",
        keyed: false,
        options: fields::VALUE_TO_KEY,
        doc: "Make the key from fields of the value.",
        make: |_, o| Ok(Box::new(fields::ValueToKey::new(o)?)),
    },
    Builtin {
        name: "ExtractField",
        keyed: true,
        options: fields::EXTRACT_FIELD,
        doc: "Replace the key or value with one of its fields.",
        make: |t, o| Ok(Box::new(fields::ExtractField::new(side(t), o)?)),
    },
    Builtin {
        name: "HoistField",
        keyed: true,
        options: fields::HOIST_FIELD,
        doc: "Wrap the key or value in a struct or map of one field.",
        make: |t, o| Ok(Box::new(fields::HoistField::new(side(t), o)?)),
    },
    Builtin {
        name: "Cast",
        keyed: true,
        options: cast::CAST,
        doc: "Cast fields, or the whole key or value, to another primitive type.",
        make: |t, o| Ok(Box::new(cast::Cast::new(side(t), o)?)),
    },
    Builtin {
        name: "TimestampConverter",
        keyed: true,
        options: cast::TIMESTAMP_CONVERTER,
        doc: "Convert a timestamp field, or the whole key or value, between string, unix, Date, Time and Timestamp.",
        make: |t, o| Ok(Box::new(cast::TimestampConverter::new(side(t), o)?)),
    },
    Builtin {
        name: "TimestampRouter",
        keyed: false,
        options: routing::TIMESTAMP_ROUTER,
        doc: "Set the topic from the topic and the record's timestamp.",
        make: |_, o| Ok(Box::new(routing::TimestampRouter::new(o)?)),
    },
    Builtin {
        name: "RegexRouter",
        keyed: false,
        options: routing::REGEX_ROUTER,
        doc: "Rename topics that match a regular expression.",
        make: |_, o| Ok(Box::new(routing::RegexRouter::new(o)?)),
    },
    Builtin {
        name: "Flatten",
        keyed: true,
        options: fields::FLATTEN,
        doc: "Flatten nested structs and maps into one level.",
        make: |t, o| Ok(Box::new(fields::Flatten::new(side(t), o)?)),
    },
    Builtin {
        name: "Filter",
        keyed: false,
        options: &[],
        doc: "Drop records (those its predicate matches).",
        make: |_, _| Ok(Box::new(routing::Filter)),
    },
    Builtin {
        name: "HeaderFrom",
        keyed: true,
        options: routing::HEADER_FROM,
        doc: "Move or copy fields of the key or value into headers.",
        make: |t, o| Ok(Box::new(routing::HeaderFrom::new(side(t), o)?)),
    },
    Builtin {
        name: "InsertHeader",
        keyed: false,
        options: routing::INSERT_HEADER,
        doc: "Add a header with a literal value.",
        make: |_, o| Ok(Box::new(routing::InsertHeader::new(o)?)),
    },
    Builtin {
        name: "DropHeaders",
        keyed: false,
        options: routing::DROP_HEADERS,
        doc: "Remove headers by name.",
        make: |_, o| Ok(Box::new(routing::DropHeaders::new(o)?)),
    },
    Builtin {
        name: "SetSchemaMetadata",
        keyed: true,
        options: fields::SET_SCHEMA_METADATA,
        doc: "Set the key's or value's schema name and version.",
        make: |t, o| Ok(Box::new(fields::SetSchemaMetadata::new(side(t), o)?)),
    },
];

/// Every built-in predicate.
pub const BUILTIN_PREDICATES: &[BuiltinPredicate] = &[
    BuiltinPredicate {
        name: "TopicNameMatches",
        options: routing::TOPIC_NAME_MATCHES,
        doc: "The record's topic matches a regular expression.",
        make: |o| Ok(Box::new(routing::TopicNameMatches::new(o)?)),
    },
    BuiltinPredicate {
        name: "HasHeaderKey",
        options: routing::HAS_HEADER_KEY,
        doc: "The record has a header with the name.",
        make: |o| Ok(Box::new(routing::HasHeaderKey::new(o)?)),
    },
    BuiltinPredicate {
        name: "RecordIsTombstone",
        options: &[],
        doc: "The record's value is null.",
        make: |_| Ok(Box::new(routing::RecordIsTombstone)),
    },
];

/// The built-in transform a `type` names (Connect's class name, or the short name after the
/// package), with its side.
pub fn find_builtin(type_name: &str) -> Result<(&'static Builtin, Option<Target>), String> {
    let short = type_name.trim();
    let short = short.strip_prefix(TRANSFORMS_PACKAGE).unwrap_or(short);
    let (name, target) = match short.split_once('$') {
        Some((name, "Key")) => (name, Some(Target::Key)),
        Some((name, "Value")) => (name, Some(Target::Value)),
        Some((name, other)) => {
            return Err(format!(
                "{type_name:?}: {name} has no variant ${other}; use {name}$Key or {name}$Value"
            ));
        }
        None => (short, None),
    };
    let builtin = BUILTINS.iter().find(|b| b.name == name).ok_or_else(|| {
        let names: Vec<&str> = BUILTINS.iter().map(|b| b.name).collect();
        format!(
            "unknown transform {type_name:?}; the built-in transforms are {} (as {TRANSFORMS_PACKAGE}<name>, or the name alone)",
            names.join(", ")
        )
    })?;
    match (builtin.keyed, target) {
        (true, None) => Err(format!(
            "{type_name:?} needs a side: use {0}$Key or {0}$Value",
            builtin.name
        )),
        (false, Some(_)) => Err(format!(
            "{type_name:?}: {0} has no $Key or $Value variant; use {0}",
            builtin.name
        )),
        _ => Ok((builtin, target)),
    }
}

/// The built-in predicate a `type` names.
pub fn find_predicate(type_name: &str) -> Result<&'static BuiltinPredicate, String> {
    let short = type_name.trim();
    let short = short.strip_prefix(PREDICATES_PACKAGE).unwrap_or(short);
    BUILTIN_PREDICATES
        .iter()
        .find(|p| p.name == short)
        .ok_or_else(|| {
            let names: Vec<&str> = BUILTIN_PREDICATES.iter().map(|p| p.name).collect();
            format!(
                "unknown predicate {type_name:?}; the built-in predicates are {} (as {PREDICATES_PACKAGE}<name>, or the name alone)",
                names.join(", ")
            )
        })
}

/// One transform of a chain.
struct Stage {
    alias: String,
    /// Its class, Kafka Connect's full name (what a failure names).
    class: String,
    transform: Box<dyn Transform>,
    /// Its predicate's index in the chain's predicates, and `negate`.
    predicate: Option<(usize, bool)>,
}

/// A transform's failure on one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The transform's alias.
    pub alias: String,
    /// Its class (Kafka Connect's name).
    pub class: String,
    pub error: TransformError,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "transform {} ({}) failed: {}",
            self.alias, self.class, self.error
        )
    }
}

/// A connector's configured transforms, in order, with their predicates. One per task.
#[derive(Default)]
pub struct Chain {
    stages: Vec<Stage>,
    predicates: Vec<Box<dyn Predicate>>,
    cache: SchemaCache,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field(
                "stages",
                &self.stages.iter().map(|s| &s.alias).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The keys under `<prefix><alias>.`, the prefix taken off.
fn options_of(config: &[(String, String)], prefix: &str, alias: &str) -> BTreeMap<String, String> {
    let start = format!("{prefix}.{alias}.");
    config
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(&start).map(|o| (o.to_owned(), v.clone())))
        .collect()
}

/// Aliases of a `transforms` or `predicates` list, with the problem of a repeated one.
fn aliases(config: &[(String, String)], key: &str, problems: &mut Vec<Problem>) -> Vec<String> {
    let Some((_, value)) = config.iter().find(|(k, _)| k == key) else {
        return Vec::new();
    };
    let list = options::split_list(value);
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for alias in list {
        if alias.is_empty() {
            problems.push(Problem::new(
                key,
                format!("{value:?} has an empty alias; list the aliases separated by commas"),
            ));
        } else if out.contains(&alias) {
            problems.push(Problem::new(
                key,
                format!("Duplicate alias provided: {alias}"),
            ));
        } else {
            out.push(alias);
        }
    }
    out
}

impl Chain {
    /// The chain `config` (a connector config) describes; `Err` lists every problem, each
    /// with its key (`transforms.a.regex`, ...).
    pub fn from_config(config: &[(String, String)]) -> Result<Chain, Vec<Problem>> {
        let mut problems = Vec::new();
        let predicate_aliases = aliases(config, PREDICATES, &mut problems);
        let mut predicates = Vec::with_capacity(predicate_aliases.len());
        for alias in &predicate_aliases {
            let mut options = options_of(config, PREDICATES, alias);
            let type_key = format!("{PREDICATES}.{alias}.type");
            let Some(type_name) = options.remove("type") else {
                problems.push(Problem::new(&type_key, format!("is required: the class of predicate {alias} (TopicNameMatches, HasHeaderKey or RecordIsTombstone)")));
                continue;
            };
            options.remove("version");
            let builtin = match find_predicate(&type_name) {
                Ok(b) => b,
                Err(e) => {
                    problems.push(Problem::new(&type_key, e));
                    continue;
                }
            };
            let options = Options::new(options);
            let mut errors = options.unknown(builtin.options);
            match (builtin.make)(&options) {
                Ok(p) if errors.is_empty() => predicates.push(p),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
            problems.extend(
                errors
                    .into_iter()
                    .map(|e| Problem::new(format!("{PREDICATES}.{alias}.{}", e.option), e.message)),
            );
        }
        let mut stages = Vec::new();
        for alias in aliases(config, TRANSFORMS, &mut problems) {
            let mut options = options_of(config, TRANSFORMS, &alias);
            let key = |option: &str| format!("{TRANSFORMS}.{alias}.{option}");
            let predicate = options.remove("predicate");
            let negate = options.remove("negate");
            options.remove("version");
            let predicate = match predicate {
                Some(p) => match predicate_aliases.iter().position(|a| *a == p) {
                    Some(index) => Some(index),
                    None => {
                        problems.push(Problem::new(key("predicate"), format!("names predicate {p:?}, which `predicates` does not list; add it there with predicates.{p}.type")));
                        None
                    }
                },
                None => None,
            };
            let negate = match negate.as_deref().map(str::trim) {
                None => false,
                Some(v) if v.eq_ignore_ascii_case("true") => true,
                Some(v) if v.eq_ignore_ascii_case("false") => false,
                Some(v) => {
                    problems.push(Problem::new(
                        key("negate"),
                        format!("{v:?} must be true or false"),
                    ));
                    false
                }
            };
            if negate && predicate.is_none() && !problems.iter().any(|p| p.key == key("predicate"))
            {
                problems.push(Problem::new(key("negate"), "negates a predicate, but the transform has none: set transforms.<alias>.predicate or remove negate"));
            }
            let Some(type_name) = options.remove("type") else {
                problems.push(Problem::new(key("type"), format!("is required: the class of transform {alias}, e.g. org.apache.kafka.connect.transforms.RegexRouter")));
                continue;
            };
            let (builtin, target) = match find_builtin(&type_name) {
                Ok(found) => found,
                Err(e) => {
                    problems.push(Problem::new(key("type"), e));
                    continue;
                }
            };
            let options = Options::new(options);
            let mut errors = options.unknown(builtin.options);
            match (builtin.make)(target, &options) {
                Ok(transform) if errors.is_empty() => stages.push(Stage {
                    alias: alias.clone(),
                    class: format!(
                        "{TRANSFORMS_PACKAGE}{}{}",
                        builtin.name,
                        match target {
                            Some(Target::Key) => "$Key",
                            Some(Target::Value) => "$Value",
                            None => "",
                        }
                    ),
                    transform,
                    predicate: predicate.map(|p| (p, negate)),
                }),
                Ok(_) => {}
                Err(e) => errors.push(e),
            }
            problems.extend(
                errors
                    .into_iter()
                    .map(|e| Problem::new(key(&e.option), e.message)),
            );
        }
        if problems.is_empty() {
            Ok(Chain {
                stages,
                predicates,
                cache: SchemaCache::default(),
            })
        } else {
            Err(problems)
        }
    }

    /// Write a side a transform changed back as data and schema text (see [`Side::write`]).
    pub fn write(&mut self, side: &mut Side<'_>) -> Result<(), TransformError> {
        side.write(&mut self.cache)
    }

    /// Whether the chain has no transforms (the task loops skip it).
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Run `record` through the chain: `Ok(true)` it goes on (changed sides written back
    /// with [`Side::write`]), `Ok(false)` a transform dropped it.
    pub fn apply(&mut self, record: &mut Record<'_>) -> Result<bool, Failed> {
        for stage in &mut self.stages {
            if let Some((index, negate)) = stage.predicate {
                let matched = self.predicates[index].test(record);
                if matched == negate {
                    continue;
                }
            }
            let fail = |error| Failed {
                alias: stage.alias.clone(),
                class: stage.class.clone(),
                error,
            };
            if !stage
                .transform
                .apply(record, &mut self.cache)
                .map_err(fail)?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Check a connector config's transforms and predicates (what `PUT .../config/validate` and
/// creating a connector report).
pub fn check(config: &[(String, String)]) -> Vec<Problem> {
    Chain::from_config(config).err().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(config: &[(&str, &str)]) -> Vec<(String, String)> {
        config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_guide_lists_every_transform_predicate_and_option() {
        let guide = include_str!("../../../docs/transforms.md");
        let section = |name: &str| {
            let start = guide
                .find(&format!("### {name}"))
                .unwrap_or_else(|| panic!("docs/transforms.md has no section for {name}"));
            let rest = &guide[start + 4..];
            &rest[..rest.find("\n### ").unwrap_or(rest.len())]
        };
        for b in BUILTINS {
            let text = section(b.name);
            for option in b.options {
                let documented = text.contains(&format!("| `{}` |", option.name))
                    || (option.name == "replace.null.with.default" && text.contains("RN)"));
                assert!(
                    documented,
                    "{}'s option {} is not in its section",
                    b.name, option.name
                );
            }
        }
        for p in BUILTIN_PREDICATES {
            let text = section(p.name);
            for option in p.options {
                assert!(
                    text.contains(&format!("| `{}` |", option.name)),
                    "{}",
                    p.name
                );
            }
        }
    }

    #[test]
    fn types_are_class_names_or_short_names_with_their_side() {
        assert_eq!(
            find_builtin("org.apache.kafka.connect.transforms.InsertField$Key")
                .map(|(b, t)| (b.name, t)),
            Ok(("InsertField", Some(Target::Key)))
        );
        assert_eq!(
            find_builtin("RegexRouter").map(|(b, t)| (b.name, t)),
            Ok(("RegexRouter", None))
        );
        assert!(
            find_builtin("InsertField")
                .err()
                .unwrap()
                .contains("InsertField$Key")
        );
        assert!(find_builtin("RegexRouter$Value").is_err());
        assert!(
            find_builtin("org.example.Nope")
                .err()
                .unwrap()
                .contains("RegexRouter")
        );
        assert!(find_predicate("RecordIsTombstone").is_ok());
    }

    #[test]
    fn every_problem_of_a_chain_is_reported_under_its_key() {
        let problems = Chain::from_config(&pairs(&[
            ("transforms", "a, b ,c,a"),
            ("transforms.a.type", "Filter"),
            ("transforms.a.negate", "true"),
            ("transforms.b.type", "MaskField$Value"),
            ("transforms.b.fields", "x"),
            ("transforms.b.colour", "blue"),
            ("transforms.b.predicate", "missing"),
            ("predicates", "p"),
            ("predicates.p.type", "TopicNameMatches"),
        ]))
        .unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "predicates.p.pattern",
                "transforms",
                "transforms.a.negate",
                "transforms.b.predicate",
                "transforms.b.colour",
                "transforms.c.type",
            ],
            "{problems:?}"
        );
        assert!(Chain::from_config(&[]).unwrap().is_empty());
    }
}
