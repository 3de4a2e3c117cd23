//! Converters between a plugin's keys and values ([`Data`]) and the bytes stored in Kafka, with
//! Kafka Connect's names and behaviour: `string` (StringConverter), `bytes`
//! (ByteArrayConverter) and `json` (JsonConverter, with or without the `{"schema", "payload"}`
//! envelope). Configured per connector (`key.converter`, `value.converter`,
//! `*.converter.schemas.enable`) with worker defaults.

mod schema;

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::config::keys::Kind;
use crate::sandbox::DataRef;
use crate::sandbox::wit::types::Data;

/// One converter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Converter {
    /// UTF-8 text both ways.
    String,
    /// Bytes passed through unchanged.
    Bytes,
    /// JSON, optionally in a schema envelope.
    Json { schemas: bool },
}

/// Kafka Connect class names accepted for our converters.
const ALIASES: &[(&str, &str)] = &[
    ("org.apache.kafka.connect.storage.StringConverter", "string"),
    ("org.apache.kafka.connect.json.JsonConverter", "json"),
    (
        "org.apache.kafka.connect.converters.ByteArrayConverter",
        "bytes",
    ),
];

/// Check one `key.converter*` / `value.converter*` setting.
pub fn check_setting(key: &str, value: &str) -> Result<(), String> {
    if key.ends_with(".schemas.enable") {
        return Kind::boolean(value).map(|_| ());
    }
    if key == "key.converter" || key == "value.converter" {
        return parse_name(value).map(|_| ());
    }
    Ok(())
}

fn parse_name(value: &str) -> Result<&'static str, String> {
    let value = value.trim();
    let name = ALIASES
        .iter()
        .find(|(class, _)| *class == value)
        .map(|(_, n)| *n)
        .unwrap_or(value);
    match name {
        "string" => Ok("string"),
        "json" => Ok("json"),
        "bytes" => Ok("bytes"),
        other => Err(format!(
            "unknown converter {other:?}; use string, json or bytes (or Kafka Connect's StringConverter, JsonConverter, ByteArrayConverter)"
        )),
    }
}

impl Converter {
    /// The converter's name (`string`, `bytes`, `json`).
    pub fn name(&self) -> &'static str {
        match self {
            Converter::String => "string",
            Converter::Bytes => "bytes",
            Converter::Json { .. } => "json",
        }
    }

    /// The converter for `role` (`key` or `value`): the connector's setting, else the worker's,
    /// else the default (string keys, JSON values; schemas on, as in Kafka Connect).
    pub fn configured(
        role: &str,
        connector: &[(String, String)],
        worker: &[(String, String)],
    ) -> Result<Self, String> {
        let lookup = |suffix: &str| {
            let key = format!("{role}.converter{suffix}");
            connector
                .iter()
                .chain(worker)
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (key.clone(), v.clone()))
        };
        let name = match lookup("") {
            Some((key, value)) => parse_name(&value).map_err(|e| format!("{key}: {e}"))?,
            None if role == "key" => "string",
            None => "json",
        };
        Ok(match name {
            "string" => Converter::String,
            "bytes" => Converter::Bytes,
            _ => {
                let schemas = match lookup(".schemas.enable") {
                    Some((key, value)) => crate::config::keys::read_bool(&key, &value)?,
                    None => true,
                };
                Converter::Json { schemas }
            }
        })
    }

    /// Plugin data to Kafka bytes. `None` (null) stays null.
    pub fn to_kafka(&self, data: Option<&Data>) -> Result<Option<Vec<u8>>, String> {
        self.to_kafka_ref(data.map(DataRef::from))
            .map(|bytes| bytes.map(Cow::into_owned))
    }

    /// Like [`Converter::to_kafka`], but borrowing the data where the converter passes it
    /// through (string, bytes): the source hot path sends it from the polled batch without a
    /// copy.
    pub fn to_kafka_ref<'a>(
        &self,
        data: Option<DataRef<'a>>,
    ) -> Result<Option<Cow<'a, [u8]>>, String> {
        self.to_kafka_with(data, None)
    }

    /// [`Converter::to_kafka_ref`] for data the plugin gave a Kafka Connect `schema` (JSON text,
    /// checked by the batch reader): the json converter with schemas writes it into the
    /// envelope instead of inferring one, and the data is the envelope's payload as is. Other
    /// converters, and the json converter without schemas, ignore it, as Kafka Connect's do.
    pub fn to_kafka_with<'a>(
        &self,
        data: Option<DataRef<'a>>,
        schema: Option<&str>,
    ) -> Result<Option<Cow<'a, [u8]>>, String> {
        let Some(data) = data else { return Ok(None) };
        if let (Converter::Json { schemas: true }, Some(schema)) = (self, schema) {
            return json_with_schema(data, schema).map(|out| Some(Cow::Owned(out)));
        }
        match (self, data) {
            (Converter::Bytes, data) => Ok(Some(Cow::Borrowed(data.bytes()))),
            (Converter::String, DataRef::Bytes(b)) => match std::str::from_utf8(b) {
                Ok(_) => Ok(Some(Cow::Borrowed(b))),
                Err(_) => Err(
                    "the string converter got bytes that are not UTF-8; use the bytes converter"
                        .to_owned(),
                ),
            },
            (Converter::String, DataRef::Text(s) | DataRef::Json(s)) => {
                Ok(Some(Cow::Borrowed(s.as_bytes())))
            }
            (Converter::Json { schemas }, data) => {
                let mut out = Vec::with_capacity(json_capacity(data, *schemas));
                json_to_kafka(data, *schemas, &mut out)?;
                Ok(Some(Cow::Owned(out)))
            }
        }
    }

    /// Kafka bytes to plugin data. `None` (null) stays null.
    pub fn from_kafka(&self, bytes: Option<&[u8]>) -> Result<Option<Data>, String> {
        self.from_kafka_ref(bytes).map(Converted::into_data)
    }

    /// Like [`Converter::from_kafka`], but borrowing the bytes where the converter passes them
    /// through (string, bytes): the sink hot path packs them without an owned copy.
    pub fn from_kafka_ref<'a>(&self, bytes: Option<&'a [u8]>) -> Result<Converted<'a>, String> {
        let Some(bytes) = bytes else {
            return Ok(Converted::Null);
        };
        match self {
            Converter::Bytes => Ok(Converted::Bytes(bytes)),
            Converter::String => std::str::from_utf8(bytes)
                .map(Converted::Text)
                .map_err(|_| "not UTF-8 text; use the bytes converter for binary data".to_owned()),
            Converter::Json { schemas } => json_from_kafka(bytes, *schemas),
        }
    }
}

/// A key or value converted from Kafka bytes: borrowed from them, or built anew (JSON).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Converted<'a> {
    /// Null.
    Null,
    /// The bytes themselves (bytes converter).
    Bytes(&'a [u8]),
    /// The bytes, checked as UTF-8 (string converter).
    Text(&'a str),
    /// Data decoded from JSON (`None` is a JSON null), and the envelope's schema (JSON text)
    /// when the converter has schemas.
    Built {
        data: Option<Data>,
        schema: Option<String>,
    },
}

impl Converted<'_> {
    /// The data to pack, borrowed; `None` is null.
    pub fn as_data_ref(&self) -> Option<DataRef<'_>> {
        match self {
            Converted::Null => None,
            Converted::Bytes(b) => Some(DataRef::Bytes(b)),
            Converted::Text(s) => Some(DataRef::Text(s)),
            Converted::Built { data, .. } => data.as_ref().map(DataRef::from),
        }
    }

    /// The Kafka Connect schema the data came with (the json converter's envelope), if any.
    pub fn schema(&self) -> Option<&str> {
        match self {
            Converted::Built { schema, .. } => schema.as_deref(),
            _ => None,
        }
    }

    /// The data, owned.
    pub fn into_data(self) -> Option<Data> {
        match self {
            Converted::Null => None,
            Converted::Bytes(b) => Some(Data::Bytes(b.to_vec())),
            Converted::Text(s) => Some(Data::Text(s.to_owned())),
            Converted::Built { data, .. } => data,
        }
    }
}

/// What the JSON converter makes of Kafka bytes: the data, and with schemas the envelope's
/// schema as it was written (`None` for a `null` schema).
///
/// Neither the payload nor the schema is built into a document tree (on a sink's hot path that
/// was most of the converter's cost): both are taken as the raw text of the envelope, checked as
/// JSON by the parser; a string payload is unescaped, and a document payload is passed on as
/// written when it has no whitespace to drop (else written compact).
fn json_from_kafka(bytes: &[u8], schemas: bool) -> Result<Converted<'static>, String> {
    use serde_json::value::RawValue;
    /// Kafka Connect's envelope: exactly these two fields.
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Envelope<'a> {
        #[serde(borrow)]
        schema: &'a RawValue,
        #[serde(borrow)]
        payload: &'a RawValue,
    }
    /// What the converter reads of a schema: its type (other fields are skipped, not built).
    #[derive(serde::Deserialize)]
    struct SchemaHead<'a> {
        #[serde(rename = "type", borrow)]
        ty: Option<std::borrow::Cow<'a, str>>,
    }
    let (payload, schema) = if schemas {
        let envelope: Envelope<'_> = serde_json::from_slice(bytes).map_err(|e| {
            if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err() {
                format!("not valid JSON ({e})")
            } else {
                envelope_error()
            }
        })?;
        let schema = envelope.schema.get();
        (envelope.payload.get(), (schema != "null").then_some(schema))
    } else {
        let raw: &RawValue =
            serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON ({e})"))?;
        (raw.get(), None)
    };
    let payload = payload.trim_matches(|c| matches!(c, ' ' | '\n' | '\r' | '\t'));
    let schema_type = match schema {
        Some(text) => Some(
            serde_json::from_str::<SchemaHead<'_>>(text)
                .ok()
                .and_then(|head| head.ty)
                .ok_or_else(|| {
                    format!("the envelope's schema is not a Kafka Connect schema (a JSON object with a string \"type\"): {text}")
                })?,
        ),
        None => None,
    };
    let data = match payload.as_bytes().first() {
        // The only JSON value that starts with `n`.
        Some(b'n') => None,
        Some(b'"') => {
            let s: String =
                serde_json::from_str(payload).map_err(|e| format!("not valid JSON ({e})"))?;
            if schema_type.as_deref() == Some("bytes") {
                Some(Data::Bytes(
                    BASE64
                        .decode(s.as_bytes())
                        .map_err(|e| format!("bytes payload is not base64: {e}"))?,
                ))
            } else {
                Some(Data::Text(s))
            }
        }
        _ if payload
            .bytes()
            .any(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t')) =>
        {
            let value: serde_json::Value =
                serde_json::from_str(payload).map_err(|e| format!("not valid JSON ({e})"))?;
            Some(Data::Json(value.to_string()))
        }
        _ => Some(Data::Json(payload.to_owned())),
    };
    Ok(Converted::Built {
        data,
        schema: schema.map(str::to_owned),
    })
}

fn envelope_error() -> String {
    "the json converter with schemas.enable=true expects {\"schema\": ..., \"payload\": ...}; set value.converter.schemas.enable=false (or key.) for plain JSON".to_owned()
}

/// Kafka Connect's JsonConverter envelope around a string payload, up to the payload.
const STRING_ENVELOPE: &[u8] = br#"{"schema":{"type":"string","optional":false},"payload":"#;

/// Kafka Connect's JsonConverter envelope around a bytes payload, up to the payload.
const BYTES_ENVELOPE: &[u8] = br#"{"schema":{"type":"bytes","optional":false},"payload":"#;

/// About what [`json_to_kafka`] writes for `data`: room for the envelope and a little escaping,
/// so that the common record is written without the buffer growing.
fn json_capacity(data: DataRef<'_>, schemas: bool) -> usize {
    let payload = match data {
        DataRef::Bytes(b) => b.len().div_ceil(3) * 4 + 2,
        DataRef::Text(s) => s.len() + s.len() / 16 + 2,
        // The schema of a document is about as long as the document itself.
        DataRef::Json(s) => s.len() * if schemas { 3 } else { 1 },
    };
    payload
        + if schemas {
            STRING_ENVELOPE.len() + 1
        } else {
            0
        }
}

/// Append the JSON converter's bytes for `data` to `out`, in the schema envelope if `schemas`.
/// The envelope and schema are written as Kafka Connect's JsonConverter writes them (`schema`
/// before `payload`; `type`, then `fields` or `items`, then `optional`; a field's name last), so
/// a record has the same bytes whichever system wrote it. Text and bytes are written straight
/// from the plugin's batch; a document is parsed once (its schema is inferred from it) and
/// written compact.
fn json_to_kafka(data: DataRef<'_>, schemas: bool, out: &mut Vec<u8>) -> Result<(), String> {
    let written = match data {
        DataRef::Text(s) => {
            if schemas {
                out.extend_from_slice(STRING_ENVELOPE);
            }
            serde_json::to_writer(&mut *out, s)
        }
        DataRef::Bytes(b) => {
            if schemas {
                out.extend_from_slice(BYTES_ENVELOPE);
            }
            push_base64(out, b)?;
            Ok(())
        }
        DataRef::Json(text) => {
            let payload: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| format!("the plugin returned invalid JSON ({e})"))?;
            if schemas {
                out.extend_from_slice(br#"{"schema":"#);
                schema::write(&payload, false, out);
                out.extend_from_slice(br#","payload":"#);
            }
            serde_json::to_writer(&mut *out, &payload)
        }
    };
    written.map_err(|e| e.to_string())?;
    if schemas {
        out.push(b'}');
    }
    Ok(())
}

/// Append `bytes` as a JSON string of their base64 (the JsonConverter's form of bytes).
fn push_base64(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), String> {
    out.push(b'"');
    let start = out.len();
    out.resize(start + bytes.len().div_ceil(3) * 4, 0);
    let encoded = BASE64
        .encode_slice(bytes, &mut out[start..])
        .map_err(|e| e.to_string())?;
    out.truncate(start + encoded);
    out.push(b'"');
    Ok(())
}

/// The JsonConverter's envelope around `data` with the plugin's `schema`: the schema as the
/// plugin wrote it, and the data as the payload (a document checked to be JSON and written as
/// it came, text as a JSON string, bytes as base64).
fn json_with_schema(data: DataRef<'_>, schema: &str) -> Result<Vec<u8>, String> {
    let payload_len = match data {
        DataRef::Bytes(b) => b.len().div_ceil(3) * 4 + 2,
        DataRef::Text(s) | DataRef::Json(s) => s.len() + 2,
    };
    let mut out = Vec::with_capacity(schema.len() + payload_len + 24);
    out.extend_from_slice(br#"{"schema":"#);
    out.extend_from_slice(schema.trim().as_bytes());
    out.extend_from_slice(br#","payload":"#);
    match data {
        DataRef::Json(text) => {
            serde_json::from_str::<serde::de::IgnoredAny>(text)
                .map_err(|e| format!("the plugin returned invalid JSON ({e})"))?;
            out.extend_from_slice(text.trim().as_bytes());
        }
        DataRef::Text(s) => serde_json::to_writer(&mut out, s).map_err(|e| e.to_string())?,
        DataRef::Bytes(b) => push_base64(&mut out, b)?,
    }
    out.push(b'}');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(c: Converter, data: Data) -> Option<Data> {
        let bytes = c.to_kafka(Some(&data)).unwrap();
        c.from_kafka(bytes.as_deref()).unwrap()
    }

    #[test]
    fn to_kafka_ref_matches_to_kafka_and_borrows_what_it_passes_through() {
        for converter in [
            Converter::String,
            Converter::Bytes,
            Converter::Json { schemas: false },
            Converter::Json { schemas: true },
        ] {
            for data in [
                Data::Text("é".into()),
                Data::Json("{\"a\":1}".into()),
                Data::Bytes(b"xy".to_vec()),
            ] {
                let borrowed = converter.to_kafka_ref(Some(DataRef::from(&data)));
                assert_eq!(
                    borrowed.as_ref().ok().map(|b| b.as_deref()),
                    converter
                        .to_kafka(Some(&data))
                        .ok()
                        .as_ref()
                        .map(|b| b.as_deref()),
                    "{converter:?} {data:?}"
                );
                let passed_through = converter != Converter::Json { schemas: true }
                    && converter != Converter::Json { schemas: false };
                assert_eq!(
                    matches!(borrowed, Ok(Some(Cow::Borrowed(_)))),
                    passed_through,
                    "{converter:?} {data:?}"
                );
            }
        }
        let err = Converter::String
            .to_kafka_ref(Some(DataRef::Bytes(&[0xff])))
            .unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
        assert_eq!(Converter::String.to_kafka_ref(None), Ok(None));
    }

    #[test]
    fn from_kafka_ref_borrows_what_it_passes_through() {
        let bytes = "é".as_bytes();
        assert_eq!(
            Converter::String.from_kafka_ref(Some(bytes)),
            Ok(Converted::Text("é"))
        );
        assert_eq!(
            Converter::Bytes.from_kafka_ref(Some(bytes)),
            Ok(Converted::Bytes(bytes))
        );
        assert_eq!(Converter::Bytes.from_kafka_ref(None), Ok(Converted::Null));
        let json = Converter::Json { schemas: false };
        let built = json.from_kafka_ref(Some(b"[1]")).unwrap();
        assert_eq!(built.as_data_ref(), Some(DataRef::Json("[1]")));
        assert_eq!(
            json.from_kafka_ref(Some(b"null")).unwrap().as_data_ref(),
            None
        );
        assert!(Converter::String.from_kafka_ref(Some(&[0xff])).is_err());
    }

    #[test]
    fn configured_by_connector_then_worker_then_default() {
        let pairs = |items: &[(&str, &str)]| -> Vec<(String, String)> {
            items
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let worker = pairs(&[(
            "value.converter",
            "org.apache.kafka.connect.storage.StringConverter",
        )]);
        assert_eq!(
            Converter::configured("value", &[], &worker),
            Ok(Converter::String)
        );
        let connector = pairs(&[
            ("value.converter", "json"),
            ("value.converter.schemas.enable", "false"),
        ]);
        assert_eq!(
            Converter::configured("value", &connector, &worker),
            Ok(Converter::Json { schemas: false })
        );
        assert_eq!(
            Converter::configured("key", &[], &[]),
            Ok(Converter::String)
        );
        assert_eq!(
            Converter::configured("value", &[], &[]),
            Ok(Converter::Json { schemas: true })
        );
        let err =
            Converter::configured("key", &pairs(&[("key.converter", "avro")]), &[]).unwrap_err();
        assert!(
            err.starts_with("key.converter: ") && err.contains("avro"),
            "{err}"
        );
    }

    #[test]
    fn a_plugins_schema_goes_into_the_envelope_as_given() {
        let schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"users"}"#;
        let value = DataRef::Json(r#"{"id":7}"#);
        let with = Converter::Json { schemas: true };
        assert_eq!(
            with.to_kafka_with(Some(value), Some(schema))
                .unwrap()
                .unwrap()
                .as_ref(),
            format!(r#"{{"schema":{schema},"payload":{{"id":7}}}}"#).as_bytes()
        );
        let bytes = with
            .to_kafka_with(
                Some(DataRef::Bytes(&[1, 2, 3])),
                Some(r#"{"type":"bytes","optional":true}"#),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            bytes.as_ref(),
            br#"{"schema":{"type":"bytes","optional":true},"payload":"AQID"}"#
        );
        // Without schemas, and for other converters, the schema is ignored.
        let without = Converter::Json { schemas: false };
        assert_eq!(
            without
                .to_kafka_with(Some(value), Some(schema))
                .unwrap()
                .unwrap()
                .as_ref(),
            br#"{"id":7}"#
        );
        assert_eq!(
            Converter::String
                .to_kafka_with(Some(value), Some(schema))
                .unwrap()
                .unwrap()
                .as_ref(),
            br#"{"id":7}"#
        );
        // Null stays null; a payload that is not JSON is refused.
        assert_eq!(with.to_kafka_with(None, Some(schema)), Ok(None));
        assert!(
            with.to_kafka_with(Some(DataRef::Json("{oops")), Some(schema))
                .unwrap_err()
                .contains("invalid JSON")
        );
        // What the sink side reads back: the schema and the payload.
        let envelope = format!(r#"{{"schema":{schema},"payload":{{"id":7}}}}"#);
        let read = with.from_kafka_ref(Some(envelope.as_bytes())).unwrap();
        assert_eq!(read.schema(), Some(schema));
        assert_eq!(read.as_data_ref(), Some(DataRef::Json(r#"{"id":7}"#)));
    }

    #[test]
    fn json_with_schemas_wraps_and_unwraps() {
        let c = Converter::Json { schemas: true };
        let bytes = c
            .to_kafka(Some(&Data::Json(r#"{"id":1,"name":"x"}"#.into())))
            .unwrap()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["payload"], serde_json::json!({"id":1,"name":"x"}));
        assert_eq!(v["schema"]["type"], "struct");
        assert_eq!(
            v["schema"]["fields"][0],
            serde_json::json!({"field":"id","type":"int64","optional":false})
        );
        assert_eq!(
            roundtrip(c, Data::Text("line".into())),
            Some(Data::Text("line".into()))
        );
        assert_eq!(
            roundtrip(c, Data::Bytes(vec![0, 255])),
            Some(Data::Bytes(vec![0, 255]))
        );
        let err = c.from_kafka(Some(br#"{"id":1}"#)).unwrap_err();
        assert!(err.contains("schemas.enable"), "{err}");
    }

    #[test]
    fn json_from_kafka_passes_documents_on_as_written_and_checks_the_schema() {
        let c = Converter::Json { schemas: true };
        let built = |bytes: &'static [u8]| c.from_kafka_ref(Some(bytes)).unwrap();
        // Compact documents as written (numbers keep their text); whitespace dropped.
        let compact = built(
            br#"{"schema":{"type":"struct","fields":[]},"payload":{"b":1.50,"a":[true,null]}}"#,
        );
        assert_eq!(
            compact.as_data_ref(),
            Some(DataRef::Json(r#"{"b":1.50,"a":[true,null]}"#))
        );
        assert_eq!(compact.schema(), Some(r#"{"type":"struct","fields":[]}"#));
        let spaced = built(b"{\"schema\": null, \"payload\": {\"a\": [1, 2]}\n}");
        assert_eq!(spaced.as_data_ref(), Some(DataRef::Json(r#"{"a":[1,2]}"#)));
        assert_eq!(spaced.schema(), None);
        // Strings are unescaped; a bytes schema decodes base64; null is null.
        let text = built(br#"{"schema":{"type":"string"},"payload":"a\"b\u00e9"}"#);
        assert_eq!(text.as_data_ref(), Some(DataRef::Text("a\"bé")));
        let raw = built(br#"{"schema":{"type":"bytes"},"payload":"AP8="}"#);
        assert_eq!(raw.as_data_ref(), Some(DataRef::Bytes(&[0, 255])));
        assert_eq!(
            built(br#"{"schema":null,"payload":null}"#).as_data_ref(),
            None
        );
        // A schema that is not an object with a string type, invalid JSON: errors that say so.
        for bad in [
            &br#"{"schema":"int32","payload":1}"#[..],
            br#"{"schema":{"type":7},"payload":1}"#,
        ] {
            let err = c.from_kafka_ref(Some(bad)).unwrap_err();
            assert!(err.contains("not a Kafka Connect schema"), "{err}");
        }
        let err = c
            .from_kafka_ref(Some(br#"{"schema":null,"payload":{"a":}}"#))
            .unwrap_err();
        assert!(err.contains("not valid JSON"), "{err}");
        let plain = Converter::Json { schemas: false };
        assert_eq!(
            plain
                .from_kafka_ref(Some(b" {\"a\":1} "))
                .unwrap()
                .as_data_ref(),
            Some(DataRef::Json(r#"{"a":1}"#))
        );
    }

    #[test]
    fn json_with_schemas_writes_connects_order() {
        let c = Converter::Json { schemas: true };
        let bytes = |data: Data| String::from_utf8(c.to_kafka(Some(&data)).unwrap().unwrap());
        assert_eq!(
            bytes(Data::Text("a \"line\"\n".into())).unwrap(),
            r#"{"schema":{"type":"string","optional":false},"payload":"a \"line\"\n"}"#
        );
        assert_eq!(
            bytes(Data::Bytes(vec![0, 255, 7, 1])).unwrap(),
            r#"{"schema":{"type":"bytes","optional":false},"payload":"AP8HAQ=="}"#
        );
        assert_eq!(
            bytes(Data::Json(
                r#"{"id": 1, "tags": ["x"], "score": 0.5, "gone": null, "empty": []}"#.into()
            ))
            .unwrap(),
            concat!(
                r#"{"schema":{"type":"struct","fields":["#,
                r#"{"type":"array","items":{"type":"string","optional":true},"optional":false,"field":"empty"},"#,
                r#"{"type":"string","optional":true,"field":"gone"},"#,
                r#"{"type":"int64","optional":false,"field":"id"},"#,
                r#"{"type":"double","optional":false,"field":"score"},"#,
                r#"{"type":"array","items":{"type":"string","optional":true},"optional":false,"field":"tags"}"#,
                r#"],"optional":false},"#,
                r#""payload":{"empty":[],"gone":null,"id":1,"score":0.5,"tags":["x"]}}"#
            )
        );
        assert_eq!(
            bytes(Data::Json("[true]".into())).unwrap(),
            r#"{"schema":{"type":"array","items":{"type":"boolean","optional":true},"optional":false},"payload":[true]}"#
        );
        assert_eq!(
            String::from_utf8(
                Converter::Json { schemas: false }
                    .to_kafka(Some(&Data::Bytes(vec![1, 2, 3, 4, 5])))
                    .unwrap()
                    .unwrap()
            )
            .unwrap(),
            r#""AQIDBAU=""#
        );
    }

    #[test]
    fn json_without_schemas_string_and_bytes() {
        let c = Converter::Json { schemas: false };
        assert_eq!(
            c.to_kafka(Some(&Data::Text("a\"b".into())))
                .unwrap()
                .unwrap(),
            br#""a\"b""#
        );
        assert_eq!(
            roundtrip(c, Data::Json("[1,2]".into())),
            Some(Data::Json("[1,2]".into()))
        );
        assert!(
            c.to_kafka(Some(&Data::Json("{oops".into())))
                .unwrap_err()
                .contains("invalid JSON")
        );
        assert!(
            c.from_kafka(Some(b"{oops"))
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert_eq!(
            roundtrip(Converter::String, Data::Text("é".into())),
            Some(Data::Text("é".into()))
        );
        assert!(Converter::String.from_kafka(Some(&[0xff])).is_err());
        assert_eq!(
            roundtrip(Converter::Bytes, Data::Bytes(vec![1, 2])),
            Some(Data::Bytes(vec![1, 2]))
        );
        assert_eq!(Converter::Bytes.to_kafka(None).unwrap(), None);
    }
}
