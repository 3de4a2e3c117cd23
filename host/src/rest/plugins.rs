//! `/connector-plugins`: what plugins there are, their config definitions, and config
//! validation in Kafka Connect's `ConfigInfos` shape.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde_json::{Map, Value, json};

use super::error::{ApiError, JsonBody};
use crate::config::{ConnectorConfig, Problem};
use crate::herder::Herder;
use crate::plugin::ConfigKey;
use crate::transform;

type S = State<Arc<Herder>>;

/// Converters are plugins too in Kafka Connect's listing (`connectorsOnly=false`).
const CONVERTERS: &[&str] = &[
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
];

pub async fn list(State(herder): S, RawQuery(query): RawQuery) -> Json<Value> {
    let connectors_only = super::connectors::query_flag(query.as_deref(), "connectorsOnly", true);
    let mut out: Vec<Value> = herder
        .registry()
        .plugins()
        .iter()
        .map(|p| json!({"class": p.spec.name, "type": p.spec.kind.to_string(), "version": p.spec.version}))
        .collect();
    if !connectors_only {
        let version = env!("CARGO_PKG_VERSION");
        out.extend(
            CONVERTERS
                .iter()
                .map(|c| json!({"class": c, "type": "converter", "version": version})),
        );
        out.extend(
            transform_classes()
                .into_iter()
                .map(|c| json!({"class": c, "type": "transformation", "version": version})),
        );
        out.extend(transform::BUILTIN_PREDICATES.iter().map(|p| {
            json!({"class": format!("{}{}", transform::PREDICATES_PACKAGE, p.name), "type": "predicate", "version": version})
        }));
    }
    Json(Value::Array(out))
}

/// The built-in transforms' Kafka Connect class names (`$Key` and `$Value` where they have
/// them).
fn transform_classes() -> Vec<String> {
    let mut out = Vec::new();
    for b in transform::BUILTINS {
        let class = format!("{}{}", transform::TRANSFORMS_PACKAGE, b.name);
        if b.keyed {
            out.push(format!("{class}$Key"));
            out.push(format!("{class}$Value"));
        } else {
            out.push(class);
        }
    }
    out
}

/// The config definitions of a built-in transform or predicate named by its class (or short
/// name), as `GET /connector-plugins/{plugin}/config` gives them for Connect's.
fn transform_config(name: &str) -> Option<Vec<Value>> {
    let options = match transform::find_builtin(name) {
        Ok((builtin, _)) => builtin.options,
        Err(_) => transform::find_predicate(name).ok()?.options,
    };
    Some(
        options
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let key = ConfigKey {
                    name: o.name.into(),
                    ty: o.ty,
                    default: o.default.map(Into::into),
                    required: o.required,
                    importance: "MEDIUM",
                    documentation: o.doc.into(),
                    allowed_values: Vec::new(),
                };
                definition(&key, "", i + 1)
            })
            .collect(),
    )
}

/// The worker-level keys every connector has, as Kafka Connect's "Common" group.
fn common_keys() -> Vec<ConfigKey> {
    let key = |name: &str, ty: &'static str, required: bool, default: Option<&str>, doc: &str| {
        ConfigKey {
            name: name.into(),
            ty,
            default: default.map(Into::into),
            required,
            importance: "HIGH",
            documentation: doc.into(),
            allowed_values: Vec::new(),
        }
    };
    vec![
        key(
            "name",
            "STRING",
            true,
            None,
            "Globally unique name to use for this connector.",
        ),
        key(
            "connector.class",
            "STRING",
            true,
            None,
            "Name of the plugin to run (see GET /connector-plugins).",
        ),
        key(
            "tasks.max",
            "INT",
            false,
            Some("1"),
            "Maximum number of tasks to use for this connector.",
        ),
    ]
}

fn definition(key: &ConfigKey, group: &str, order: usize) -> Value {
    json!({
        "name": key.name,
        "type": key.ty,
        "required": key.required,
        "default_value": key.default,
        "importance": key.importance,
        "documentation": key.documentation,
        "group": group,
        "width": "NONE",
        "display_name": key.name,
        "dependents": [],
        "order_in_group": order,
    })
}

fn plugin_or_404(herder: &Herder, name: &str) -> Result<Arc<crate::plugin::Plugin>, ApiError> {
    herder
        .registry()
        .find(name, None)
        .ok_or_else(|| ApiError::not_found(format!("Unknown connector plugin {name}")))
}

pub async fn config(State(herder): S, Path(plugin): Path<String>) -> Result<Json<Value>, ApiError> {
    if herder.registry().find(&plugin, None).is_none()
        && let Some(defs) = transform_config(&plugin)
    {
        return Ok(Json(Value::Array(defs)));
    }
    let plugin = plugin_or_404(&herder, &plugin)?;
    let defs: Vec<Value> = plugin
        .spec
        .config
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let mut d = definition(k, &plugin.spec.name, i + 1);
            d["allowed_values"] = json!(k.allowed_values);
            d
        })
        .collect();
    Ok(Json(Value::Array(defs)))
}

pub async fn validate(
    State(herder): S,
    Path(plugin_name): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    // As Kafka Connect: a config naming no plugin there is is a bad request (not a 404: the
    // path names the plugin the config is for).
    let plugin = herder.registry().find(&plugin_name, None).ok_or_else(|| {
        let names: Vec<String> = herder
            .registry()
            .plugins()
            .iter()
            .map(|p| p.spec.name.clone())
            .collect();
        ApiError::bad_request(format!(
            "Failed to find any connector plugin which name matches {plugin_name}; available connector plugins are: {}",
            names.join(", ")
        ))
    })?;
    let mut pairs = super::connectors::config_pairs(&body)?;
    match pairs.iter().find(|(k, _)| k == "connector.class") {
        Some((_, class)) if *class != plugin.spec.name => {
            return Err(ApiError::bad_request(format!(
                "connector.class {class} does not match the plugin in the URL ({plugin_name})"
            )));
        }
        Some(_) => {}
        None => pairs.push(("connector.class".into(), plugin.spec.name.clone())),
    }
    let problems = match ConnectorConfig::from_pairs(pairs.clone()) {
        // The connector's own keys are wrong, so nothing more is asked of the worker or the
        // plugin; the transforms are checked all the same (they need neither).
        Err(mut problems) => {
            problems.extend(transform::check(&pairs));
            problems
        }
        Ok(config) => herder.validate(&config).await?.1,
    };
    let value_of = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut keys: Vec<(ConfigKey, &str)> =
        common_keys().into_iter().map(|k| (k, "Common")).collect();
    keys.extend(
        plugin
            .spec
            .config
            .iter()
            .cloned()
            .map(|k| (k, plugin.spec.name.as_str())),
    );
    let mut errors_by_key: Vec<(String, String)> = problems.iter().map(problem_key).collect();
    let mut configs = Vec::new();
    for (order, (key, group)) in keys.iter().enumerate() {
        let errors: Vec<String> = take_errors(&mut errors_by_key, &key.name);
        let value = if key.ty == "PASSWORD" {
            value_of(&key.name).map(|_| crate::herder::HIDDEN.to_owned())
        } else {
            value_of(&key.name).or_else(|| key.default.clone())
        };
        configs.push(json!({
            "definition": definition(key, group, order + 1),
            "value": {
                "name": key.name,
                "value": value,
                "recommended_values": key.allowed_values,
                "errors": errors,
                "visible": true,
            }
        }));
    }
    // Problems with keys the plugin does not define (sandbox grants, converters, transforms,
    // ...); a transform's or predicate's keys in Connect's group for it.
    while let Some((key, _)) = errors_by_key.first().cloned() {
        let errors = take_errors(&mut errors_by_key, &key);
        let group = match key.split('.').collect::<Vec<_>>().as_slice() {
            ["transforms", alias, _, ..] => format!("Transforms: {alias}"),
            ["predicates", alias, _, ..] => format!("Predicates: {alias}"),
            _ => "Worker".to_owned(),
        };
        configs.push(json!({
            "definition": {"name": key, "type": "STRING", "required": false, "default_value": null, "importance": "MEDIUM", "documentation": "", "group": group, "width": "NONE", "display_name": key, "dependents": [], "order_in_group": configs.len() + 1},
            "value": {"name": key, "value": value_of(&key), "recommended_values": [], "errors": errors, "visible": true}
        }));
    }
    let error_count: usize = configs
        .iter()
        .map(|c| c["value"]["errors"].as_array().map_or(0, Vec::len))
        .sum();
    Ok(Json(json!({
        "name": plugin.spec.name,
        "error_count": error_count,
        "groups": ["Common", plugin.spec.name],
        "configs": configs,
    })))
}

/// The key a problem is about: its own, or the `key: ` its message starts with.
fn problem_key(p: &Problem) -> (String, String) {
    if !p.key.is_empty() {
        return (p.key.clone(), p.message.clone());
    }
    match p.message.split_once(": ") {
        Some((key, rest)) if !key.contains(' ') && key.contains('.') => {
            (key.to_owned(), rest.to_owned())
        }
        _ => ("connector.class".to_owned(), p.message.clone()),
    }
}

fn take_errors(errors: &mut Vec<(String, String)>, key: &str) -> Vec<String> {
    let mut taken = Vec::new();
    errors.retain(|(k, m)| {
        if k == key {
            taken.push(m.clone());
            false
        } else {
            true
        }
    });
    taken
}
