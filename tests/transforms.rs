//! Differential test of the transforms: every case runs through Kafka Connect's own
//! `connect-transforms` (4.x from Maven Central, driven by `tests/java/TransformCheck.java` the
//! way Connect's TransformationChain drives them) and through wasm-connect's `transform::Chain`,
//! and the outputs are compared record by record: topic, partition, timestamp, key and value as
//! JsonConverter writes them (schema and payload), headers as the default header converter
//! writes them; a dropped record, a failed record, a refused config on both sides alike.

use std::borrow::Cow;
use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{Value as Json, json};
use wasm_connect::sandbox::DataRef;
use wasm_connect::transform::{Chain, Record, Side};
use wasm_connect_tests::{connect_libs, repo_root};

const T: &str = "org.apache.kafka.connect.transforms.";
const P: &str = "org.apache.kafka.connect.transforms.predicates.";

// ---------------------------------------------------------------------------------------------
// Records

fn schema_field(name: &str, mut schema: Json) -> Json {
    schema["field"] = json!(name);
    schema
}

fn nested_schema() -> Json {
    json!({"type": "struct", "optional": true, "name": "com.example.Address", "fields": [
        schema_field("city", json!({"type": "string", "optional": false})),
        schema_field("zip", json!({"type": "int32", "optional": true})),
        schema_field("geo", json!({"type": "struct", "optional": true, "fields": [
            schema_field("lat", json!({"type": "double", "optional": false})),
            schema_field("lon", json!({"type": "double", "optional": false})),
        ]})),
    ]})
}

/// A value struct with most kinds of field.
fn order_schema() -> Json {
    json!({"type": "struct", "optional": false, "name": "com.example.Order", "version": 3, "doc": "an order", "fields": [
        schema_field("id", json!({"type": "int64", "optional": false})),
        schema_field("name", json!({"type": "string", "optional": true})),
        schema_field("amount", json!({"type": "double", "optional": false})),
        schema_field("ratio", json!({"type": "float", "optional": true})),
        schema_field("qty", json!({"type": "int32", "optional": false})),
        schema_field("small", json!({"type": "int8", "optional": true})),
        schema_field("short", json!({"type": "int16", "optional": true})),
        schema_field("active", json!({"type": "boolean", "optional": false})),
        schema_field("code", json!({"type": "string", "optional": true})),
        schema_field("blob", json!({"type": "bytes", "optional": true})),
        schema_field("address", nested_schema()),
        schema_field("tags", json!({"type": "array", "optional": true, "items": {"type": "string", "optional": false}})),
        schema_field("props", json!({"type": "map", "optional": true, "keys": {"type": "string", "optional": false}, "values": {"type": "string", "optional": true}})),
        schema_field("created", json!({"type": "int64", "optional": true, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1})),
        schema_field("day", json!({"type": "int32", "optional": true, "name": "org.apache.kafka.connect.data.Date", "version": 1})),
        schema_field("at", json!({"type": "int32", "optional": true, "name": "org.apache.kafka.connect.data.Time", "version": 1})),
        schema_field("price", json!({"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": {"scale": "2"}})),
        schema_field("when", json!({"type": "string", "optional": true})),
        schema_field("epoch", json!({"type": "int64", "optional": true})),
        schema_field("missing", json!({"type": "string", "optional": true})),
        schema_field("level", json!({"type": "int32", "optional": true, "default": 7})),
    ]})
}

fn order_payload(id: i64) -> Json {
    json!({
        "id": id, "name": format!("order {id}"), "amount": 12.5, "ratio": 0.25, "qty": 3,
        "small": 5, "short": -300, "active": true, "code": "42", "blob": "AQID",
        "address": {"city": "Lyon", "zip": 69001, "geo": {"lat": 45.76, "lon": 4.84}},
        "tags": ["a", "b"], "props": {"k": "v"}, "created": 1_700_000_123_456i64, "day": 19_000,
        "at": 3_600_000, "price": "MDk=", "when": "2024-03-01 12:34:56", "epoch": 1_700_000_000i64,
        "missing": null, "level": null,
    })
}

fn order(id: i64) -> Json {
    json!({"schema": order_schema(), "payload": order_payload(id)})
}

/// The same data without a schema (JsonConverter's schemaless maps and lists).
fn order_schemaless(id: i64) -> Json {
    let mut payload = order_payload(id);
    payload["blob"] = Json::Null;
    json!({"schema": null, "payload": payload})
}

fn key_struct(id: i64) -> Json {
    json!({"schema": {"type": "struct", "optional": false, "fields": [
        schema_field("id", json!({"type": "int64", "optional": false})),
        schema_field("region", json!({"type": "string", "optional": true})),
    ]}, "payload": {"id": id, "region": "eu"}})
}

fn string_envelope(text: &str) -> Json {
    json!({"schema": {"type": "string", "optional": false}, "payload": text})
}

fn record(topic: &str, key: Json, value: Json) -> Json {
    json!({"topic": topic, "partition": 1, "offset": 17, "timestamp": 1_700_000_123_456i64,
           "key": key, "value": value, "headers": [["trace", "abc"], ["n", "7"]]})
}

/// The records most cases run over: structs with schemas, schemaless maps, a tombstone, a
/// primitive value, a record without timestamp or headers.
fn standard_records() -> Vec<Json> {
    let mut bare = record("orders", Json::Null, order_schemaless(4));
    bare["timestamp"] = Json::Null;
    bare["headers"] = json!([]);
    vec![
        record("orders", key_struct(1), order(1)),
        record("users-eu", string_envelope("k2"), order_schemaless(2)),
        record("orders", string_envelope("k3"), Json::Null),
        record(
            "logs",
            Json::Null,
            json!({"schema": null, "payload": "plain text"}),
        ),
        bare,
        record(
            "orders",
            key_struct(5),
            json!({"schema": {"type": "struct", "optional": true, "fields": [
            schema_field("id", json!({"type": "int64", "optional": false}))]}, "payload": null}),
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Cases

struct Case {
    name: String,
    kind: &'static str,
    config: Vec<(String, String)>,
    records: Vec<Json>,
}

fn case(name: &str, config: &[(&str, &str)]) -> Case {
    Case {
        name: name.to_owned(),
        kind: "sink",
        config: config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        records: standard_records(),
    }
}

/// One transform `a` of `type_name` with `options`.
fn one(name: &str, type_name: &str, options: &[(&str, &str)]) -> Case {
    let mut config = vec![
        ("transforms".to_owned(), "a".to_owned()),
        ("transforms.a.type".to_owned(), type_name.to_owned()),
    ];
    config.extend(
        options
            .iter()
            .map(|(k, v)| (format!("transforms.a.{k}"), v.to_string())),
    );
    Case {
        name: name.to_owned(),
        kind: "sink",
        config,
        records: standard_records(),
    }
}

fn both_sides(name: &str, class: &str, options: &[(&str, &str)]) -> Vec<Case> {
    ["Key", "Value"]
        .iter()
        .map(|side| {
            one(
                &format!("{name}-{side}"),
                &format!("{T}{class}${side}"),
                options,
            )
        })
        .collect()
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // InsertField
    cases.extend(both_sides(
        "insert-all",
        "InsertField",
        &[
            ("topic.field", "t"),
            ("partition.field", "p!"),
            ("offset.field", "o?"),
            ("timestamp.field", "ts"),
            ("static.field", "s"),
            ("static.value", "db1"),
        ],
    ));
    cases.push(one(
        "insert-topic-only",
        &format!("{T}InsertField$Value"),
        &[("topic.field", "topic")],
    ));
    let mut source = one(
        "insert-offset-on-source",
        &format!("{T}InsertField$Value"),
        &[("offset.field", "o")],
    );
    source.kind = "source";
    cases.push(source);
    let mut source = one(
        "insert-on-source",
        &format!("{T}InsertField$Value"),
        &[("topic.field", "t"), ("partition.field", "p")],
    );
    source.kind = "source";
    cases.push(source);
    cases.push(one(
        "insert-duplicate-field",
        &format!("{T}InsertField$Value"),
        &[("topic.field", "id")],
    ));
    cases.push(one("insert-nothing", &format!("{T}InsertField$Value"), &[]));
    cases.push(one(
        "insert-static-without-value",
        &format!("{T}InsertField$Value"),
        &[("static.field", "s")],
    ));
    // ReplaceField
    cases.extend(both_sides(
        "replace-exclude",
        "ReplaceField",
        &[("exclude", "name,blob,region")],
    ));
    cases.push(one(
        "replace-include-rename",
        &format!("{T}ReplaceField$Value"),
        &[
            ("include", "id,amount,level"),
            ("renames", "id:order_id,amount:total"),
        ],
    ));
    cases.push(one(
        "replace-no-default",
        &format!("{T}ReplaceField$Value"),
        &[
            ("include", "level,id"),
            ("replace.null.with.default", "false"),
        ],
    ));
    // Only with a schema: onto an existing field of a schemaless map, which entry wins depends
    // on Java's HashMap order.
    let mut collision = one(
        "replace-rename-collision",
        &format!("{T}ReplaceField$Value"),
        &[("renames", "id:name")],
    );
    collision.records.truncate(1);
    cases.push(collision);
    cases.push(one(
        "replace-bad-renames",
        &format!("{T}ReplaceField$Value"),
        &[("renames", "a:b:c")],
    ));
    // MaskField
    cases.extend(both_sides(
        "mask",
        "MaskField",
        &[("fields", "name,amount,active,tags,props,created,qty,region")],
    ));
    cases.push(one(
        "mask-replacement",
        &format!("{T}MaskField$Value"),
        &[("fields", "qty,amount,code"), ("replacement", "99")],
    ));
    cases.push(one(
        "mask-replacement-bad-number",
        &format!("{T}MaskField$Value"),
        &[("fields", "qty"), ("replacement", "many")],
    ));
    cases.push(one(
        "mask-replacement-boolean",
        &format!("{T}MaskField$Value"),
        &[("fields", "active"), ("replacement", "x")],
    ));
    cases.push(one(
        "mask-bytes",
        &format!("{T}MaskField$Value"),
        &[("fields", "blob")],
    ));
    cases.push(one("mask-no-fields", &format!("{T}MaskField$Value"), &[]));
    // ValueToKey
    cases.push(one(
        "value-to-key",
        &format!("{T}ValueToKey"),
        &[("fields", "id,name,level")],
    ));
    cases.push(one(
        "value-to-key-missing",
        &format!("{T}ValueToKey"),
        &[("fields", "id,nope")],
    ));
    cases.push(one(
        "value-to-key-dupes",
        &format!("{T}ValueToKey"),
        &[("fields", "id,id")],
    ));
    // ExtractField
    cases.extend(both_sides("extract", "ExtractField", &[("field", "id")]));
    cases.push(one(
        "extract-struct",
        &format!("{T}ExtractField$Value"),
        &[("field", "address")],
    ));
    cases.push(one(
        "extract-nested-v2",
        &format!("{T}ExtractField$Value"),
        &[("field", "address.geo.lat"), ("field.syntax.version", "v2")],
    ));
    cases.push(one(
        "extract-nested-v1",
        &format!("{T}ExtractField$Value"),
        &[("field", "address.city")],
    ));
    cases.push(one(
        "extract-default",
        &format!("{T}ExtractField$Value"),
        &[("field", "level")],
    ));
    cases.push(one(
        "extract-no-default",
        &format!("{T}ExtractField$Value"),
        &[("field", "level"), ("replace.null.with.default", "false")],
    ));
    cases.push(one(
        "extract-bad-version",
        &format!("{T}ExtractField$Value"),
        &[("field", "id"), ("field.syntax.version", "V3")],
    ));
    // HoistField
    cases.extend(both_sides("hoist", "HoistField", &[("field", "wrapped")]));
    // Cast
    cases.push(one(
        "cast-fields",
        &format!("{T}Cast$Value"),
        &[(
            "spec",
            "id:string,amount:int32,qty:float64,active:int8,code:int16,small:boolean,ratio:float64,short:int8",
        )],
    ));
    cases.push(one(
        "cast-logical-to-string",
        &format!("{T}Cast$Value"),
        &[("spec", "created:string,day:string,at:string,price:string")],
    ));
    cases.push(one(
        "cast-logical-to-number",
        &format!("{T}Cast$Value"),
        &[("spec", "created:int64,day:int32,price:float64")],
    ));
    cases.push(one(
        "cast-bytes",
        &format!("{T}Cast$Value"),
        &[("spec", "blob:string")],
    ));
    cases.push(one(
        "cast-bytes-to-int",
        &format!("{T}Cast$Value"),
        &[("spec", "blob:int32")],
    ));
    cases.push(one(
        "cast-string-number",
        &format!("{T}Cast$Value"),
        &[("spec", "code:int64,name:int32")],
    ));
    cases.push(one(
        "cast-whole-key",
        &format!("{T}Cast$Key"),
        &[("spec", "string")],
    ));
    cases.push(one(
        "cast-struct",
        &format!("{T}Cast$Value"),
        &[("spec", "address:string")],
    ));
    cases.push(one(
        "cast-bad-type",
        &format!("{T}Cast$Value"),
        &[("spec", "id:bytes")],
    ));
    cases.push(one(
        "cast-whole-and-field",
        &format!("{T}Cast$Value"),
        &[("spec", "int32,id:string")],
    ));
    // TimestampConverter
    cases.push(one(
        "ts-to-string",
        &format!("{T}TimestampConverter$Value"),
        &[
            ("field", "created"),
            ("target.type", "string"),
            ("format", "yyyy-MM-dd'T'HH:mm:ss.SSS"),
        ],
    ));
    cases.push(one(
        "ts-string-to-timestamp",
        &format!("{T}TimestampConverter$Value"),
        &[
            ("field", "when"),
            ("target.type", "Timestamp"),
            ("format", "yyyy-MM-dd HH:mm:ss"),
        ],
    ));
    cases.push(one(
        "ts-unix-seconds-to-date",
        &format!("{T}TimestampConverter$Value"),
        &[
            ("field", "epoch"),
            ("target.type", "Date"),
            ("unix.precision", "seconds"),
        ],
    ));
    cases.push(one(
        "ts-to-unix-micros",
        &format!("{T}TimestampConverter$Value"),
        &[
            ("field", "created"),
            ("target.type", "unix"),
            ("unix.precision", "microseconds"),
        ],
    ));
    cases.push(one(
        "ts-to-time",
        &format!("{T}TimestampConverter$Value"),
        &[("field", "created"), ("target.type", "Time")],
    ));
    cases.push(one(
        "ts-wrong-field-type",
        &format!("{T}TimestampConverter$Value"),
        &[("field", "qty"), ("target.type", "unix")],
    ));
    cases.push(one(
        "ts-string-without-format",
        &format!("{T}TimestampConverter$Value"),
        &[("field", "created"), ("target.type", "string")],
    ));
    cases.push(one(
        "ts-bad-target",
        &format!("{T}TimestampConverter$Value"),
        &[("field", "created"), ("target.type", "epoch")],
    ));
    let mut whole = one(
        "ts-whole-value",
        &format!("{T}TimestampConverter$Value"),
        &[("target.type", "string"), ("format", "yyyyMMdd HH:mm")],
    );
    whole.records = vec![
        record(
            "t",
            Json::Null,
            json!({"schema": {"type": "int64", "optional": false}, "payload": 1_700_000_000_000i64}),
        ),
        record(
            "t",
            Json::Null,
            json!({"schema": null, "payload": 1_700_000_000_000i64}),
        ),
        record(
            "t",
            Json::Null,
            json!({"schema": {"type": "int64", "optional": false, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}, "payload": 1_700_000_000_000i64}),
        ),
        record(
            "t",
            Json::Null,
            json!({"schema": null, "payload": "20240102 03:04"}),
        ),
    ];
    cases.push(whole);
    // TimestampRouter, RegexRouter
    cases.push(one(
        "ts-router-default",
        &format!("{T}TimestampRouter"),
        &[],
    ));
    cases.push(one(
        "ts-router-format",
        &format!("{T}TimestampRouter"),
        &[
            ("topic.format", "${timestamp}/${topic}/${topic}"),
            ("timestamp.format", "yyyy.MM.dd-HH"),
        ],
    ));
    cases.push(one(
        "regex-router",
        &format!("{T}RegexRouter"),
        &[("regex", "(.*)-(eu|us)"), ("replacement", "$2.$1")],
    ));
    cases.push(one(
        "regex-router-literal-dollar",
        &format!("{T}RegexRouter"),
        &[("regex", "orders"), ("replacement", "a\\$b")],
    ));
    cases.push(one(
        "regex-router-partial",
        &format!("{T}RegexRouter"),
        &[("regex", "ord"), ("replacement", "x")],
    ));
    cases.push(one(
        "regex-router-bad",
        &format!("{T}RegexRouter"),
        &[("regex", "("), ("replacement", "x")],
    ));
    cases.push(one(
        "regex-router-missing",
        &format!("{T}RegexRouter"),
        &[("replacement", "x")],
    ));
    // Flatten
    cases.extend(both_sides("flatten", "Flatten", &[]));
    cases.push(one(
        "flatten-delimiter",
        &format!("{T}Flatten$Value"),
        &[("delimiter", "_")],
    ));
    let mut flat = one("flatten-no-map", &format!("{T}Flatten$Value"), &[]);
    flat.records = vec![record(
        "t",
        Json::Null,
        json!({"schema": {"type": "struct", "optional": false, "fields": [
            schema_field("a", nested_schema()),
            schema_field("b", json!({"type": "int32", "optional": false}))]},
          "payload": {"a": {"city": "Paris", "zip": null, "geo": null}, "b": 1}}),
    )];
    cases.push(flat);
    // Filter with predicates
    let filter = |name: &str, ptype: &str, popts: &[(&str, &str)], negate: bool| {
        let mut config = vec![
            ("transforms", "f".to_owned()),
            ("transforms.f.type", format!("{T}Filter")),
            ("transforms.f.predicate", "p".to_owned()),
            ("predicates", "p".to_owned()),
            ("predicates.p.type", format!("{P}{ptype}")),
        ];
        if negate {
            config.push(("transforms.f.negate", "true".to_owned()));
        }
        let mut c = case(name, &[]);
        c.config = config
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .chain(
                popts
                    .iter()
                    .map(|(k, v)| (format!("predicates.p.{k}"), v.to_string())),
            )
            .collect();
        c
    };
    cases.push(filter("filter-tombstones", "RecordIsTombstone", &[], false));
    cases.push(filter(
        "filter-keep-tombstones",
        "RecordIsTombstone",
        &[],
        true,
    ));
    cases.push(filter(
        "filter-topic",
        "TopicNameMatches",
        &[("pattern", "ord.*")],
        false,
    ));
    cases.push(filter(
        "filter-topic-partial",
        "TopicNameMatches",
        &[("pattern", "ord")],
        false,
    ));
    cases.push(filter(
        "filter-header",
        "HasHeaderKey",
        &[("name", "trace")],
        true,
    ));
    cases.push(filter(
        "filter-bad-pattern",
        "TopicNameMatches",
        &[("pattern", "[")],
        false,
    ));
    cases.push(one("filter-all", &format!("{T}Filter"), &[]));
    // Headers
    cases.extend(both_sides(
        "header-copy",
        "HeaderFrom",
        &[
            ("fields", "id,name"),
            ("headers", "x-id,x-name"),
            ("operation", "copy"),
        ],
    ));
    cases.push(one(
        "header-move",
        &format!("{T}HeaderFrom$Value"),
        &[
            ("fields", "qty,active,level"),
            ("headers", "q,a,l"),
            ("operation", "move"),
        ],
    ));
    cases.push(one(
        "header-move-struct",
        &format!("{T}HeaderFrom$Value"),
        &[
            ("fields", "address,tags,created,price"),
            ("headers", "addr,tags,created,price"),
            ("operation", "copy"),
        ],
    ));
    cases.push(one(
        "header-from-mismatch",
        &format!("{T}HeaderFrom$Value"),
        &[("fields", "a,b"), ("headers", "x"), ("operation", "copy")],
    ));
    for (name, literal) in [
        ("text", "hello world"),
        ("int", "42"),
        ("bool", "true"),
        ("float", "1.50"),
        ("empty", ""),
        ("null", "null"),
    ] {
        cases.push(one(
            &format!("insert-header-{name}"),
            &format!("{T}InsertHeader"),
            &[("header", "h"), ("value.literal", literal)],
        ));
    }
    cases.push(one(
        "drop-headers",
        &format!("{T}DropHeaders"),
        &[("headers", "trace,absent")],
    ));
    // SetSchemaMetadata
    cases.extend(both_sides(
        "schema-metadata",
        "SetSchemaMetadata",
        &[
            ("schema.name", "com.example.Renamed"),
            ("schema.version", "9"),
        ],
    ));
    cases.push(one(
        "schema-metadata-nothing",
        &format!("{T}SetSchemaMetadata$Value"),
        &[],
    ));
    cases.push(one(
        "schema-metadata-bad-version",
        &format!("{T}SetSchemaMetadata$Value"),
        &[("schema.version", "x")],
    ));
    // Chains: three transforms and a predicate; unknown types; a missing predicate.
    cases.push(case(
        "chain",
        &[
            ("transforms", "route, mask ,insert"),
            ("transforms.route.type", &format!("{T}RegexRouter")),
            ("transforms.route.regex", "(.*)"),
            ("transforms.route.replacement", "copy-$1"),
            ("transforms.mask.type", &format!("{T}MaskField$Value")),
            ("transforms.mask.fields", "name"),
            ("transforms.mask.predicate", "notTomb"),
            ("transforms.mask.negate", "true"),
            ("transforms.insert.type", &format!("{T}InsertField$Value")),
            ("transforms.insert.topic.field", "topic"),
            ("transforms.insert.predicate", "orders"),
            ("predicates", "notTomb,orders"),
            ("predicates.notTomb.type", &format!("{P}RecordIsTombstone")),
            ("predicates.orders.type", &format!("{P}TopicNameMatches")),
            ("predicates.orders.pattern", "copy-orders"),
        ],
    ));
    // More shapes: maps with non-string keys, arrays of structs, nested schemaless maps,
    // named groups, whole-value casts without a schema, nulls and tombstones on each side.
    let odd = || {
        vec![
            record(
                "metrics-eu",
                json!({"schema": null, "payload": {"a": {"b": {"c": 1}}, "d": [1, 2], "e": null}}),
                json!({"schema": {"type": "struct", "optional": false, "fields": [
                    schema_field("counts", json!({"type": "map", "optional": false,
                        "keys": {"type": "int32", "optional": false},
                        "values": {"type": "int64", "optional": true}})),
                    schema_field("items", json!({"type": "array", "optional": false,
                        "items": nested_schema()})),
                    schema_field("flag", json!({"type": "boolean", "optional": true, "default": true})),
                    schema_field("ratio", json!({"type": "float", "optional": false})),
                ]}, "payload": {"counts": [[1, 10], [2, null]],
                    "items": [{"city": "Rome", "zip": 1, "geo": null}], "flag": null, "ratio": 2.5}}),
            ),
            record(
                "metrics-us",
                json!({"schema": null, "payload": "42"}),
                json!({"schema": null, "payload": {"x.y": {"z": "w"}, "n": 3.75, "s": "-12"}}),
            ),
            record("metrics-us", Json::Null, Json::Null),
        ]
    };
    let with_odd = |mut c: Case| {
        c.records = odd();
        c
    };
    for (name, class, options) in [
        ("odd-flatten", "Flatten$Value", vec![("delimiter", "__")]),
        ("odd-flatten-key", "Flatten$Key", vec![]),
        ("odd-cast-key-whole", "Cast$Key", vec![("spec", "int32")]),
        (
            "odd-cast-value",
            "Cast$Value",
            vec![("spec", "ratio:int8,flag:string,n:int16,s:float32")],
        ),
        (
            "odd-extract-backticks",
            "ExtractField$Value",
            vec![("field", "`x.y`.z"), ("field.syntax.version", "V2")],
        ),
        (
            "odd-extract-key-nested",
            "ExtractField$Key",
            vec![("field", "a.b.c"), ("field.syntax.version", "V2")],
        ),
        ("odd-hoist-key", "HoistField$Key", vec![("field", "k")]),
        (
            "odd-mask",
            "MaskField$Value",
            vec![("fields", "counts,items,flag,n,s")],
        ),
        (
            "odd-value-to-key",
            "ValueToKey",
            vec![("fields", "flag,ratio")],
        ),
        (
            "odd-replace",
            "ReplaceField$Value",
            vec![("exclude", "items"), ("renames", "flag:f,n:m")],
        ),
        (
            "odd-header-from-key",
            "HeaderFrom$Key",
            vec![
                ("fields", "a,d"),
                ("headers", "ha,hd"),
                ("operation", "move"),
            ],
        ),
        (
            "odd-schema-version",
            "SetSchemaMetadata$Value",
            vec![("schema.version", "2")],
        ),
        (
            "odd-insert-key",
            "InsertField$Key",
            vec![
                ("static.field", "s"),
                ("static.value", "v"),
                ("partition.field", "p"),
            ],
        ),
        (
            "odd-ts-schemaless-field",
            "TimestampConverter$Value",
            vec![("field", "n"), ("target.type", "Timestamp")],
        ),
    ] {
        let options: Vec<(&str, &str)> = options;
        cases.push(with_odd(one(name, &format!("{T}{class}"), &options)));
    }
    cases.push(with_odd(one(
        "odd-regex-named",
        &format!("{T}RegexRouter"),
        &[
            ("regex", "(?<base>.*)-(?<region>eu|us)"),
            ("replacement", "${region}.${base}"),
        ],
    )));
    cases.push(with_odd(one(
        "odd-drop-all-headers",
        &format!("{T}DropHeaders"),
        &[("headers", "trace,n")],
    )));
    let mut ts = one(
        "ts-unix-nanos-to-time-string",
        &format!("{T}TimestampConverter$Value"),
        &[
            ("field", "epoch"),
            ("target.type", "string"),
            ("unix.precision", "nanoseconds"),
            ("format", "HH:mm:ss.SSS a, EEEE d MMMM yy"),
        ],
    );
    ts.records.truncate(2);
    cases.push(ts);
    cases.push(one("unknown-type", &format!("{T}Nope"), &[]));
    cases.push(case(
        "duplicate-alias",
        &[
            ("transforms", "a,a"),
            ("transforms.a.type", &format!("{T}Filter")),
        ],
    ));
    cases
}

// ---------------------------------------------------------------------------------------------
// Running both sides

fn run_java(cases: &[Case]) -> Vec<Json> {
    let input: Vec<Json> = cases
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "kind": c.kind,
                "config": c.config.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
                "records": c.records,
            })
        })
        .collect();
    let classpath = format!("{}/*", connect_libs().display());
    let mut java = Command::new("java")
        .args(["-Duser.timezone=UTC", "-cp", &classpath])
        .arg(repo_root().join("tests/java/TransformCheck.java"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run java");
    let mut stdin = java.stdin.take().unwrap();
    stdin
        .write_all(serde_json::to_string(&input).unwrap().as_bytes())
        .unwrap();
    drop(stdin);
    let out = java.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "TransformCheck failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<Json>>(&out.stdout).expect("TransformCheck's output is JSON")
}

/// The key or value of a case record as the task loops hand it to the chain: the envelope's
/// payload as JSON data with its schema's text.
fn side_of(envelope: &Json, texts: &mut Vec<(String, Option<String>)>) -> usize {
    texts.push(match envelope {
        Json::Null => (String::new(), None),
        e => (
            e["payload"].to_string(),
            (!e["schema"].is_null()).then(|| e["schema"].to_string()),
        ),
    });
    texts.len() - 1
}

fn run_ours(case: &Case) -> Json {
    let mut chain = match Chain::from_config(&case.config) {
        Ok(chain) => chain,
        Err(problems) => {
            let text: Vec<String> = problems
                .iter()
                .map(|p| format!("{}: {}", p.key, p.message))
                .collect();
            return json!({"name": case.name, "config_error": text.join("; ")});
        }
    };
    let mut outputs = Vec::new();
    for r in &case.records {
        let mut texts = Vec::new();
        let (k, v) = (
            side_of(&r["key"], &mut texts),
            side_of(&r["value"], &mut texts),
        );
        let side = |i: usize| -> Side<'_> {
            let (payload, schema) = &texts[i];
            // A null payload is null data, with the schema if there is one (as the json
            // converter reads an envelope).
            let envelope = &r[if i == k { "key" } else { "value" }];
            let null = envelope.is_null() || envelope["payload"].is_null();
            Side::raw(
                (!null).then_some(DataRef::Json(payload.as_str())),
                schema.as_deref(),
            )
        };
        let sink = case.kind == "sink";
        let mut record = Record {
            topic: Cow::Borrowed(r["topic"].as_str().unwrap()),
            partition: r["partition"]
                .as_i64()
                .map(|p| p as i32)
                .or(sink.then_some(0)),
            offset: sink.then(|| r["offset"].as_i64().unwrap_or(0)),
            timestamp: r["timestamp"].as_i64(),
            key: side(k),
            value: side(v),
            headers: r["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        Cow::Owned(h[0].as_str().unwrap().to_owned()),
                        h[1].as_str().map(|s| Cow::Owned(s.as_bytes().to_vec())),
                    )
                })
                .collect(),
        };
        outputs.push(match chain.apply(&mut record) {
            Ok(false) => json!({"dropped": true}),
            Err(failed) => json!({"error": failed.error.kind, "message": failed.error.message}),
            Ok(true) => match (record.key.to_envelope(), record.value.to_envelope()) {
                (Ok(key), Ok(value)) => json!({
                    "topic": record.topic, "partition": record.partition, "timestamp": record.timestamp,
                    "key": key, "value": value,
                    "headers": record.headers.iter().map(|(k, v)| json!([k, v.as_ref().map(|v| String::from_utf8_lossy(v).into_owned())])).collect::<Vec<_>>(),
                }),
                (Err(e), _) | (_, Err(e)) => {
                    json!({"error": format!("OutputConversion:{}", e.kind), "message": e.message})
                }
            },
        });
    }
    json!({"name": case.name, "config_error": null, "records": outputs})
}

/// JSON equality with numbers compared by value (Java writes `100000.0` where Rust may write
/// `100000.0` or `1e5`; an integer and a float never equal).
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.is_f64() == y.is_f64() && x.as_f64() == y.as_f64(),
        },
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        // A header holding a map as Connect writes it: entries in Java's HashMap order.
        (Json::String(x), Json::String(y)) if x != y && x.starts_with('{') => {
            match (
                serde_json::from_str::<Json>(x),
                serde_json::from_str::<Json>(y),
            ) {
                (Ok(x), Ok(y)) => same(&x, &y),
                _ => false,
            }
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[test]
fn transforms_give_kafka_connects_results() {
    let cases = cases();
    let java = run_java(&cases);
    assert_eq!(java.len(), cases.len());
    let mut mismatches = Vec::new();
    let mut compared = 0;
    // What the comparisons were of: records passed on, dropped, failed; refused configs.
    let (mut passed, mut dropped, mut failed, mut refused) = (0, 0, 0, 0);
    for (case, theirs) in cases.iter().zip(&java) {
        let ours = run_ours(case);
        let (their_error, our_error) = (&theirs["config_error"], &ours["config_error"]);
        if their_error.is_null() != our_error.is_null() {
            mismatches.push(format!(
                "{}: config error\n  connect: {their_error}\n  ours:    {our_error}",
                case.name
            ));
            continue;
        }
        if !their_error.is_null() {
            compared += 1;
            refused += 1;
            continue;
        }
        let (theirs, ours) = (
            theirs["records"].as_array().unwrap(),
            ours["records"].as_array().unwrap(),
        );
        assert_eq!(
            theirs.len(),
            ours.len(),
            "{}: one result per record",
            case.name
        );
        for (i, (t, o)) in theirs.iter().zip(ours).enumerate() {
            compared += 1;
            if t.get("error").is_some() {
                failed += 1;
            } else if t.get("dropped").is_some() {
                dropped += 1;
            } else {
                passed += 1;
            }
            let equal = match (t.get("error"), o.get("error")) {
                // Both failed: with the same exception class (the messages are ours).
                (Some(te), Some(oe)) => te == oe,
                (None, None) => same(t, o),
                _ => false,
            };
            if !equal {
                mismatches.push(format!(
                    "{} record {i}:\n  connect: {t}\n  ours:    {o}",
                    case.name
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {compared} results differ from Kafka Connect's:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // The cases are meant to cover every transform and predicate.
    for name in wasm_connect::transform::BUILTINS
        .iter()
        .map(|b| b.name)
        .chain(
            wasm_connect::transform::BUILTIN_PREDICATES
                .iter()
                .map(|p| p.name),
        )
    {
        assert!(
            cases
                .iter()
                .any(|c| c.config.iter().any(|(_, v)| v.contains(name))),
            "no case uses {name}"
        );
    }
    eprintln!(
        "{compared} results equal to Kafka Connect's over {} cases: {passed} records passed on, {dropped} dropped, {failed} failed, {refused} configs refused",
        cases.len()
    );
    // Most comparisons are of records that came through, not of failures alike.
    assert!(passed > failed * 2 && dropped > 0 && refused > 0);
}
