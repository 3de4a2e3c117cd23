//! `/connectors/...`: create, read, reconfigure, control and delete connectors.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::{ApiError, JsonBody};
use crate::config::ConnectorConfig;
use crate::config::connector::describe;
use crate::herder::{ConnectorOffset, Herder, TargetState};

type S = State<Arc<Herder>>;

/// Flatten a JSON config object into pairs; values must be scalars.
pub(super) fn config_pairs(object: &Map<String, Value>) -> Result<Vec<(String, String)>, ApiError> {
    object
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            Value::Number(n) => Ok((k.clone(), n.to_string())),
            Value::Bool(b) => Ok((k.clone(), b.to_string())),
            _ => Err(ApiError::bad_request(format!(
                "config value of {k} must be a string"
            ))),
        })
        .collect()
}

fn connector_config(
    name: &str,
    mut pairs: Vec<(String, String)>,
) -> Result<ConnectorConfig, ApiError> {
    match pairs.iter().find(|(k, _)| k == "name") {
        Some((_, n)) if n != name => {
            return Err(ApiError::bad_request(format!(
                "Connector name configuration ({n}) doesn't match connector name in the URL ({name})"
            )));
        }
        Some(_) => {}
        None => pairs.push(("name".into(), name.to_owned())),
    }
    ConnectorConfig::from_pairs(pairs)
        .map_err(|p| ApiError::bad_request(describe(&format!("connector {name}"), &p)))
}

pub async fn list(
    State(herder): S,
    query: axum::extract::RawQuery,
) -> Result<Json<Value>, ApiError> {
    // `expand` may repeat (`?expand=status&expand=info`), which serde_urlencoded cannot read.
    let expand: Vec<String> = query
        .0
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.strip_prefix("expand="))
        .map(str::to_owned)
        .collect();
    let names = herder.names().await;
    if expand.is_empty() {
        return Ok(Json(json!(names)));
    }
    let mut out = Map::new();
    for name in names {
        let mut item = Map::new();
        // A connector deleted meanwhile is skipped, as in Kafka Connect.
        if expand.iter().any(|e| e == "status") {
            let Ok(status) = herder.status(&name).await else {
                continue;
            };
            item.insert("status".into(), json!(status));
        }
        if expand.iter().any(|e| e == "info") {
            let Ok(info) = herder.info(&name).await else {
                continue;
            };
            item.insert("info".into(), json!(info));
        }
        out.insert(name, Value::Object(item));
    }
    Ok(Json(Value::Object(out)))
}

#[derive(Deserialize)]
pub struct CreateBody {
    name: Option<String>,
    config: Option<Map<String, Value>>,
    initial_state: Option<String>,
}

pub async fn create(
    State(herder): S,
    JsonBody(body): JsonBody<CreateBody>,
) -> Result<Response, ApiError> {
    let config = body
        .config
        .ok_or_else(|| ApiError::bad_request("The body must have a \"config\" object"))?;
    let pairs = config_pairs(&config)?;
    let name = body
        .name
        .or_else(|| {
            pairs
                .iter()
                .find(|(k, _)| k == "name")
                .map(|(_, v)| v.clone())
        })
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("The connector needs a \"name\""))?;
    let target = match body
        .initial_state
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("RUNNING") => TargetState::Running,
        Some("PAUSED") => TargetState::Paused,
        Some("STOPPED") => TargetState::Stopped,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "initial_state {other:?} must be RUNNING, PAUSED or STOPPED"
            )));
        }
    };
    let config = connector_config(&name, pairs)?;
    let info = herder.create(config, target).await?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

pub async fn info(State(herder): S, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(herder.info(&name).await?)))
}

pub async fn delete(State(herder): S, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    herder.delete(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn get_config(
    State(herder): S,
    Path(name): Path<String>,
) -> Result<Json<BTreeMap<String, String>>, ApiError> {
    Ok(Json(herder.config(&name).await?))
}

pub async fn put_config(
    State(herder): S,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Response, ApiError> {
    let config = connector_config(&name, config_pairs(&body)?)?;
    let (created, info) = herder.put_config(config).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(info)).into_response())
}

pub async fn patch_config(
    State(herder): S,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Json<Value>, ApiError> {
    let mut pairs = herder.raw_config(&name).await?;
    for (key, value) in &body {
        pairs.retain(|(k, _)| k != key);
        match value {
            Value::Null => {}
            Value::String(s) => pairs.push((key.clone(), s.clone())),
            Value::Number(n) => pairs.push((key.clone(), n.to_string())),
            Value::Bool(b) => pairs.push((key.clone(), b.to_string())),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "config value of {key} must be a string or null"
                )));
            }
        }
    }
    let config = connector_config(&name, pairs)?;
    let (_, info) = herder.put_config(config).await?;
    Ok(Json(json!(info)))
}

pub async fn status(State(herder): S, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(herder.status(&name).await?)))
}

#[derive(Deserialize)]
pub struct RestartQuery {
    #[serde(rename = "includeTasks", default)]
    include_tasks: bool,
    #[serde(rename = "onlyFailed", default)]
    only_failed: bool,
}

pub async fn restart(
    State(herder): S,
    Path(name): Path<String>,
    Query(query): Query<RestartQuery>,
) -> Result<Response, ApiError> {
    let status = herder
        .restart(&name, query.include_tasks, query.only_failed)
        .await?;
    // Kafka Connect: a plain connector restart answers 204, one that involves tasks 202 with the status.
    if !query.include_tasks && !query.only_failed {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Ok((StatusCode::ACCEPTED, Json(status)).into_response())
    }
}

pub async fn pause(State(herder): S, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    herder.pause(&name).await?;
    Ok(StatusCode::ACCEPTED)
}

pub async fn resume(State(herder): S, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    herder.resume(&name).await?;
    Ok(StatusCode::ACCEPTED)
}

pub async fn stop(State(herder): S, Path(name): Path<String>) -> Result<StatusCode, ApiError> {
    herder.stop(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn tasks(State(herder): S, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(herder.tasks(&name).await?)))
}

fn task_id(raw: &str) -> Result<u32, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::bad_request(format!("task id {raw:?} is not a number")))
}

pub async fn task_status(
    State(herder): S,
    Path((name, task)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(
        herder.task_status(&name, task_id(&task)?).await?
    )))
}

pub async fn task_metrics(
    State(herder): S,
    Path((name, task)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(
        herder.task_metrics(&name, task_id(&task)?).await?
    )))
}

pub async fn restart_task(
    State(herder): S,
    Path((name, task)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    herder.restart_task(&name, task_id(&task)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /connectors/{name}/offsets`: `{"offsets": [{"partition": {..}, "offset": {..}}]}`.
pub async fn offsets(State(herder): S, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    let offsets: Vec<Value> = herder
        .offsets(&name)
        .await?
        .into_iter()
        .map(|o| json!({"partition": o.partition, "offset": o.offset}))
        .collect();
    Ok(Json(json!({ "offsets": offsets })))
}

/// `PATCH /connectors/{name}/offsets` with `{"offsets": [{"partition": .., "offset": ..}]}`
/// (an offset of `null` forgets that partition's).
pub async fn alter_offsets(
    State(herder): S,
    Path(name): Path<String>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    herder.alter_offsets(&name, offset_changes(&body)?).await?;
    Ok(Json(
        json!({"message": "The offsets for this connector have been altered successfully"}),
    ))
}

/// The changes a `PATCH .../offsets` body asks for, or a 400 saying what it should look like.
fn offset_changes(body: &Value) -> Result<Vec<ConnectorOffset>, ApiError> {
    let entries = body
        .get("offsets")
        .and_then(Value::as_array)
        .filter(|entries| !entries.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(
                "the body must be {\"offsets\": [{\"partition\": {...}, \"offset\": {...}}]} with at least one entry",
            )
        })?;
    entries
        .iter()
        .map(|e| {
            let partition = e
                .get("partition")
                .filter(|p| p.is_object())
                .ok_or_else(|| ApiError::bad_request("every entry needs a \"partition\" object"))?;
            let offset = match e.get("offset") {
                None | Some(Value::Null) => None,
                Some(o) if o.is_object() => Some(o.clone()),
                Some(_) => {
                    return Err(ApiError::bad_request(
                        "an \"offset\" must be an object or null",
                    ));
                }
            };
            Ok(ConnectorOffset {
                partition: partition.clone(),
                offset,
            })
        })
        .collect()
}

/// `DELETE /connectors/{name}/offsets`.
pub async fn reset_offsets(
    State(herder): S,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    herder.reset_offsets(&name).await?;
    Ok(Json(
        json!({"message": "The offsets for this connector have been reset successfully"}),
    ))
}

pub async fn topics(State(herder): S, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
    let topics = herder.topics(&name).await?;
    Ok(Json(json!({ name: {"topics": topics} })))
}

pub async fn reset_topics(
    State(herder): S,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    herder.reset_topics(&name).await?;
    Ok(StatusCode::ACCEPTED)
}
