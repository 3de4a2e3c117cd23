//! The transforms of a record's topic and headers, and the predicates: RegexRouter,
//! TimestampRouter, Filter, HeaderFrom, InsertHeader, DropHeaders; TopicNameMatches,
//! HasHeaderKey, RecordIsTombstone. Only HeaderFrom reads a key or value.

use std::borrow::Cow;
use std::sync::Arc;

use regex::Regex;

use super::data::{Struct, Type, Value};
use super::fields::{REPLACE_NULL, add_field, require_map, require_struct};
use super::java::{self, DateFormat};
use super::options::{OptionDef, OptionError, Options};
use super::record::{Record, SchemaCache, TransformError};
use super::{Predicate, Target, Transform};

/// A Java regular expression compiled for whole-topic matching (`Matcher.matches()`), and
/// unanchored for `replaceFirst`.
#[derive(Debug, Clone)]
pub struct TopicRegex {
    whole: Regex,
    first: Regex,
}

impl TopicRegex {
    /// Compile `pattern`; `Err` says why it is not a regular expression this worker runs.
    pub fn new(pattern: &str) -> Result<Self, String> {
        let first = Regex::new(pattern).map_err(|e| format!("Invalid regex: {e}"))?;
        let whole =
            Regex::new(&format!("^(?:{pattern})$")).map_err(|e| format!("Invalid regex: {e}"))?;
        Ok(Self { whole, first })
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        self.whole.is_match(text)
    }
}

/// RegexRouter: a topic that matches `regex` as a whole is replaced by `replacement` (`$1`
/// refers to a group).
pub struct RegexRouter {
    regex: TopicRegex,
    /// The replacement in the `regex` crate's syntax.
    replacement: String,
}

/// RegexRouter's options.
pub const REGEX_ROUTER: &[OptionDef] = &[
    OptionDef {
        name: "regex",
        ty: "STRING",
        default: None,
        required: true,
        doc: "Regular expression to match topics against (the whole topic must match).",
    },
    OptionDef {
        name: "replacement",
        ty: "STRING",
        default: None,
        required: true,
        doc: "The new topic; $1, $2 ... are the regex's groups, ${name} a named group, \\$ a dollar sign.",
    },
];

impl RegexRouter {
    /// Configured from `options`.
    pub fn new(options: &Options) -> Result<Self, OptionError> {
        let pattern = options.required("regex")?;
        let regex = TopicRegex::new(pattern).map_err(|e| OptionError::new("regex", e))?;
        let replacement = java_replacement(options.required("replacement")?, &regex.first)
            .map_err(|e| OptionError::new("replacement", e))?;
        Ok(Self { regex, replacement })
    }
}

/// A Java `Matcher` replacement (`$n` takes as many digits as name a group, `${name}`, `\`
/// escapes) in the `regex` crate's syntax.
fn java_replacement(text: &str, regex: &Regex) -> Result<String, String> {
    let groups = regex.captures_len() - 1;
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                let c = chars
                    .get(i + 1)
                    .ok_or("character to be escaped is missing")?;
                if *c == '$' {
                    out.push_str("$$");
                } else {
                    out.push(*c);
                }
                i += 2;
            }
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    let end = chars[i..]
                        .iter()
                        .position(|&c| c == '}')
                        .ok_or("named capturing group is missing trailing '}'")?;
                    let name: String = chars[i + 1..i + end].iter().collect();
                    out.push_str(&format!("${{{name}}}"));
                    i += end + 1;
                    continue;
                }
                let first = chars
                    .get(i)
                    .and_then(|c| c.to_digit(10))
                    .ok_or("Illegal group reference")?;
                let mut group = first as usize;
                i += 1;
                if group > groups {
                    return Err(format!("No group {group}"));
                }
                while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
                    let next = group * 10 + d as usize;
                    if next > groups {
                        break;
                    }
                    group = next;
                    i += 1;
                }
                out.push_str(&format!("${{{group}}}"));
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

impl Transform for RegexRouter {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        _cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        if self.regex.matches(&record.topic) {
            let topic = self
                .regex
                .first
                .replacen(&record.topic, 1, self.replacement.as_str())
                .into_owned();
            record.topic = Cow::Owned(topic);
        }
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// TimestampRouter: the topic from a format of the topic and the record's timestamp.
pub struct TimestampRouter {
    topic_format: String,
    format: DateFormat,
}

/// TimestampRouter's options.
pub const TIMESTAMP_ROUTER: &[OptionDef] = &[
    OptionDef {
        name: "topic.format",
        ty: "STRING",
        default: Some("${topic}-${timestamp}"),
        required: false,
        doc: "The new topic, with ${topic} and ${timestamp} as placeholders.",
    },
    OptionDef {
        name: "timestamp.format",
        ty: "STRING",
        default: Some("yyyyMMdd"),
        required: false,
        doc: "A java.text.SimpleDateFormat pattern for the timestamp (UTC).",
    },
];

impl TimestampRouter {
    /// Configured from `options`.
    pub fn new(options: &Options) -> Result<Self, OptionError> {
        let pattern = options.string("timestamp.format").unwrap_or("yyyyMMdd");
        // Connect finds a bad pattern at the first record; a config error says it sooner.
        let format = DateFormat::new(pattern).map_err(|e| {
            OptionError::new(
                "timestamp.format",
                format!("{pattern:?} is not a SimpleDateFormat pattern: {e}"),
            )
        })?;
        Ok(Self {
            topic_format: options
                .string("topic.format")
                .unwrap_or("${topic}-${timestamp}")
                .to_owned(),
            format,
        })
    }
}

impl Transform for TimestampRouter {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        _cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        let Some(timestamp) = record.timestamp else {
            return Err(TransformError::data(format!(
                "Timestamp missing on record: topic {}, partition {:?}",
                record.topic, record.partition
            )));
        };
        let formatted = self.format.format(timestamp);
        let topic = self
            .topic_format
            .replace("${topic}", &record.topic)
            .replace("${timestamp}", &formatted);
        record.topic = Cow::Owned(topic);
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// Filter: drops every record it is applied to (with a predicate, those that match).
pub struct Filter;

impl Transform for Filter {
    fn apply(
        &mut self,
        _record: &mut Record<'_>,
        _cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        Ok(false)
    }
}

// ---------------------------------------------------------------------------------------------

/// HeaderFrom: fields of the key or value moved or copied into headers.
pub struct HeaderFrom {
    target: Target,
    fields: Vec<String>,
    headers: Vec<String>,
    moving: bool,
    with_default: bool,
}

/// HeaderFrom's options.
pub const HEADER_FROM: &[OptionDef] = &[
    OptionDef {
        name: "fields",
        ty: "LIST",
        default: None,
        required: true,
        doc: "Field names whose values are copied or moved to headers.",
    },
    OptionDef {
        name: "headers",
        ty: "LIST",
        default: None,
        required: true,
        doc: "Header names, in the same order as the fields.",
    },
    OptionDef {
        name: "operation",
        ty: "STRING",
        default: None,
        required: true,
        doc: "move (the fields are removed from the key or value) or copy.",
    },
    REPLACE_NULL,
];

impl HeaderFrom {
    /// Configured from `options`.
    pub fn new(target: Target, options: &Options) -> Result<Self, OptionError> {
        let fields = options.required_list("fields")?;
        let headers = options.required_list("headers")?;
        if fields.len() != headers.len() {
            return Err(OptionError::new(
                "headers",
                "'fields' config must have the same number of elements as 'headers' config.",
            ));
        }
        let moving = options.one_of("operation", &["move", "copy"], None)? == "move";
        Ok(Self {
            target,
            fields,
            headers,
            moving,
            with_default: options.boolean(REPLACE_NULL.name, true)?,
        })
    }
}

/// A header value as Connect's default header converter writes it.
fn header_bytes(value: &Value) -> Option<Cow<'static, [u8]>> {
    java::values_to_string(value).map(|s| Cow::Owned(s.into_bytes()))
}

impl Transform for HeaderFrom {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        let purpose = if self.moving {
            "header move"
        } else {
            "header copy"
        };
        let (schema, value) = self.target.side(record).take(cache)?;
        let mut added = Vec::with_capacity(self.fields.len());
        let Some(schema) = schema else {
            let map = require_map(&value, purpose)?;
            let mut out = map.clone();
            for (field, header) in self.fields.iter().zip(&self.headers) {
                let v = Value::map_get(map, field).unwrap_or(&Value::Null);
                added.push((header.clone(), header_bytes(v)));
                if self.moving {
                    Value::map_remove(&mut out, field);
                }
            }
            self.target.side(record).set(None, Value::Map(out));
            record
                .headers
                .extend(added.into_iter().map(|(k, v)| (Cow::Owned(k), v)));
            return Ok(true);
        };
        let original = require_struct(&value, purpose)?;
        for (field, header) in self.fields.iter().zip(&self.headers) {
            if schema.field(field).is_none() {
                return Err(TransformError {
                    kind: "NullPointerException",
                    message: format!("the {} has no field {field:?}", self.target.name()),
                });
            }
            let v = original
                .get_named(field, self.with_default)
                .unwrap_or(&Value::Null);
            added.push((header.clone(), header_bytes(v)));
        }
        if self.moving {
            let mut updated = schema.basics(Type::Struct);
            for field in &schema.fields {
                if !self.fields.contains(&field.name) {
                    add_field(&mut updated, &field.name, Arc::clone(&field.schema))?;
                }
            }
            let updated = Arc::new(updated);
            let mut out = Struct::new(Arc::clone(&updated));
            for (index, field) in updated.fields.iter().enumerate() {
                let v = original
                    .get_named(&field.name, self.with_default)
                    .cloned()
                    .unwrap_or(Value::Null);
                out.put(index, v).map_err(TransformError::data)?;
            }
            self.target
                .side(record)
                .set(Some(updated), Value::Struct(out));
        } else {
            self.target.side(record).set(Some(schema), value);
        }
        record
            .headers
            .extend(added.into_iter().map(|(k, v)| (Cow::Owned(k), v)));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// InsertHeader: a header with a literal value added to every record.
pub struct InsertHeader {
    header: String,
    value: Option<Vec<u8>>,
}

/// InsertHeader's options.
pub const INSERT_HEADER: &[OptionDef] = &[
    OptionDef {
        name: "header",
        ty: "STRING",
        default: None,
        required: true,
        doc: "The name of the header.",
    },
    OptionDef {
        name: "value.literal",
        ty: "STRING",
        default: None,
        required: true,
        doc: "The literal value of the header on all records.",
    },
];

impl InsertHeader {
    /// Configured from `options`.
    pub fn new(options: &Options) -> Result<Self, OptionError> {
        let header = options.required("header")?.to_owned();
        let literal = options.required("value.literal")?;
        Ok(Self {
            header,
            value: literal_text(literal).map(String::into_bytes),
        })
    }
}

/// What Connect's `Values.parseString(literal)`, written back by its header converter, makes
/// of a literal: `null` is a null header, numbers are normalized as Connect parses them (a
/// whole number to its integer, other decimals to a float), the rest is kept as written.
fn literal_text(literal: &str) -> Option<String> {
    let trimmed = literal.trim();
    if trimmed == "null" {
        return None;
    }
    if trimmed == "true" || trimmed == "false" {
        return Some(trimmed.to_owned());
    }
    let numeric = !trimmed.is_empty()
        && trimmed
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        && trimmed.bytes().any(|b| b.is_ascii_digit());
    if numeric && let Some((unscaled, scale)) = super::json::parse_decimal(trimmed) {
        let power = |n: i32| 10i128.checked_pow(n.unsigned_abs());
        let whole = scale <= 0 || unscaled == 0 || power(scale).is_some_and(|p| unscaled % p == 0);
        if whole {
            let value = if scale <= 0 {
                power(scale).and_then(|p| unscaled.checked_mul(p))
            } else {
                Some(power(scale).map_or(0, |p| unscaled / p))
            };
            if let Some(v) = value.filter(|v| i64::try_from(*v).is_ok()) {
                return Some(v.to_string());
            }
        } else if let Ok(f) = trimmed.parse::<f32>()
            && f.is_finite()
        {
            return Some(java::float_to_string(f));
        }
    }
    Some(literal.to_owned())
}

impl Transform for InsertHeader {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        _cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        record.headers.push((
            Cow::Owned(self.header.clone()),
            self.value.clone().map(Cow::Owned),
        ));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// DropHeaders: headers with the given names removed.
pub struct DropHeaders {
    headers: Vec<String>,
}

/// DropHeaders' options.
pub const DROP_HEADERS: &[OptionDef] = &[OptionDef {
    name: "headers",
    ty: "LIST",
    default: None,
    required: true,
    doc: "The names of the headers to remove.",
}];

impl DropHeaders {
    /// Configured from `options`.
    pub fn new(options: &Options) -> Result<Self, OptionError> {
        let headers = options.required_list("headers")?;
        Ok(Self { headers })
    }
}

impl Transform for DropHeaders {
    fn apply(
        &mut self,
        record: &mut Record<'_>,
        _cache: &mut SchemaCache,
    ) -> Result<bool, TransformError> {
        record
            .headers
            .retain(|(k, _)| !self.headers.iter().any(|h| h == k));
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------------

/// TopicNameMatches: the whole topic matches a regular expression.
pub struct TopicNameMatches(TopicRegex);

/// TopicNameMatches' options.
pub const TOPIC_NAME_MATCHES: &[OptionDef] = &[OptionDef {
    name: "pattern",
    ty: "STRING",
    default: None,
    required: true,
    doc: "A regular expression matched against the whole topic name.",
}];

impl TopicNameMatches {
    /// Configured from `options`.
    pub fn new(options: &Options) -> Result<Self, OptionError> {
        let pattern = options.required("pattern")?;
        if pattern.is_empty() {
            return Err(OptionError::new(
                "pattern",
                "Invalid value  for configuration pattern: String must be non-empty",
            ));
        }
        TopicRegex::new(pattern).map(Self).map_err(|e| {
            OptionError::new(
                "pattern",
                format!("entry must be a Java-compatible regular expression: {e}"),
            )
        })
    }
}

impl Predicate for TopicNameMatches {
    fn test(&self, record: &Record<'_>) -> bool {
        self.0.matches(&record.topic)
    }
}

/// HasHeaderKey: the record has at least one header with the name.
pub struct HasHeaderKey(String);

/// HasHeaderKey's options.
pub const HAS_HEADER_KEY: &[OptionDef] = &[OptionDef {
    name: "name",
    ty: "STRING",
    default: None,
    required: true,
    doc: "The header name.",
}];

impl HasHeaderKey {
    /// Configured from `options`.
    pub fn new(options: &Options) -> Result<Self, OptionError> {
        let name = options.required("name")?;
        if name.is_empty() {
            return Err(OptionError::new(
                "name",
                "Invalid value  for configuration name: String must be non-empty",
            ));
        }
        Ok(Self(name.to_owned()))
    }
}

impl Predicate for HasHeaderKey {
    fn test(&self, record: &Record<'_>) -> bool {
        record.headers.iter().any(|(k, _)| *k == self.0)
    }
}

/// RecordIsTombstone: the value is null.
pub struct RecordIsTombstone;

impl Predicate for RecordIsTombstone {
    fn test(&self, record: &Record<'_>) -> bool {
        record.value.is_null()
    }
}

#[cfg(test)]
mod tests {
    use super::literal_text;

    #[test]
    fn header_literals_are_normalized_as_connect_parses_them() {
        for (literal, text) in [
            ("42", Some("42")),
            ("007", Some("7")),
            ("1.50", Some("1.5")),
            ("2.0", Some("2")),
            ("0e-50", Some("0")),
            ("true", Some("true")),
            ("null", None),
            ("hello world", Some("hello world")),
            ("", Some("")),
        ] {
            assert_eq!(literal_text(literal).as_deref(), text, "{literal:?}");
        }
        // Any literal: no overflow on tiny or huge exponents.
        let _ = literal_text("1e-50");
        let _ = literal_text("1e400");
    }
}
