//! `/connectors/...`: create, read, reconfigure, control and delete connectors.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::auth::Scheme;
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

/// A boolean query parameter read as Kafka Connect reads it (Java's `Boolean.valueOf`): `true`
/// in any case is true, any other value false, absent the default. Never a rejection: Python
/// clients send `True`.
pub(super) fn query_flag(query: Option<&str>, name: &str, default: bool) -> bool {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(k, _)| k == name)
        .last()
        .map_or(default, |(_, v)| v.eq_ignore_ascii_case("true"))
}

/// A connector name from a request: refused if empty or holding control characters (which
/// would let a caller forge lines in the worker's log), as Kafka Connect does.
fn check_name(name: &str) -> Result<(), ApiError> {
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("Connector name is required"));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "Connector name cannot contain ISO control characters",
        ));
    }
    Ok(())
}

/// The URL of connector `name` for a `Location` header: absolute, on the host and scheme the
/// request came in with, the name percent-encoded as a path segment.
fn location(headers: &HeaderMap, scheme: Option<&Scheme>, name: &str) -> Option<HeaderValue> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let scheme = scheme.map_or("http", |s| s.0);
    let encoded = crate::rest::path_segment(name);
    HeaderValue::from_str(&format!("{scheme}://{host}/connectors/{encoded}")).ok()
}

/// A 201 with the created connector's info and its `Location`.
fn created(headers: &HeaderMap, scheme: Option<&Scheme>, name: &str, info: Value) -> Response {
    let mut response = (StatusCode::CREATED, Json(info)).into_response();
    if let Some(url) = location(headers, scheme, name) {
        response.headers_mut().insert(header::LOCATION, url);
    }
    response
}

fn connector_config(
    name: &str,
    mut pairs: Vec<(String, String)>,
) -> Result<ConnectorConfig, ApiError> {
    check_name(name)?;
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

pub async fn list(State(herder): S, query: RawQuery) -> Result<Json<Value>, ApiError> {
    // `expand` may repeat (`?expand=status&expand=info`), which serde_urlencoded cannot read.
    let expand: Vec<String> = url::form_urlencoded::parse(query.0.unwrap_or_default().as_bytes())
        .filter(|(k, _)| k == "expand")
        .map(|(_, v)| v.into_owned())
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
    scheme: Option<Extension<Scheme>>,
    headers: HeaderMap,
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
    Ok(created(&headers, scheme.as_deref(), &name, json!(info)))
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
    scheme: Option<Extension<Scheme>>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<Map<String, Value>>,
) -> Result<Response, ApiError> {
    let config = connector_config(&name, config_pairs(&body)?)?;
    let (is_new, info) = herder.put_config(config).await?;
    if is_new {
        Ok(created(&headers, scheme.as_deref(), &name, json!(info)))
    } else {
        Ok((StatusCode::OK, Json(info)).into_response())
    }
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

pub async fn restart(
    State(herder): S,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let include_tasks = query_flag(query.as_deref(), "includeTasks", false);
    let only_failed = query_flag(query.as_deref(), "onlyFailed", false);
    let status = herder.restart(&name, include_tasks, only_failed).await?;
    // Kafka Connect: a plain connector restart answers 204, one that involves tasks 202 with the status.
    if !include_tasks && !only_failed {
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

/// A task id from the path. Anything that is not one (`-1`, `x`) names no task: 404, as in
/// Kafka Connect.
fn task_id(name: &str, raw: &str) -> Result<u32, ApiError> {
    raw.parse()
        .map_err(|_| ApiError::not_found(format!("Task {name}-{raw} not found")))
}

pub async fn task_status(
    State(herder): S,
    Path((name, task)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(
        herder.task_status(&name, task_id(&name, &task)?).await?
    )))
}

pub async fn task_metrics(
    State(herder): S,
    Path((name, task)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(
        herder.task_metrics(&name, task_id(&name, &task)?).await?
    )))
}

/// `POST /connectors/{name}/tasks/{task}/restart`. In distributed mode a task that runs on
/// another worker is restarted there: the request goes to the leader, which sends it to the
/// task's worker with `forward=false` (Kafka Connect forwards it the same way), with the
/// caller's credentials.
pub async fn restart_task(
    State(herder): S,
    Path((name, task)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    use crate::herder::Hop;
    let id = task_id(&name, &task)?;
    let forward = query
        .as_deref()
        .and_then(|q| url::form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "forward"))
        .map(|(_, v)| v.into_owned());
    let hop = match forward.as_deref() {
        Some("leader") => Hop::ToLeader,
        Some(v) if v.eq_ignore_ascii_case("false") => Hop::ToOwner,
        _ => Hop::FromClient,
    };
    if let Some(worker) = herder.task_elsewhere(&name, id, hop)?
        && let Some(cluster) = herder.cluster()
    {
        let leader = cluster.role() == crate::distributed::cluster::Role::Leader;
        let url = format!(
            "{}/connectors/{}/tasks/{id}/restart?forward={}",
            worker.trim_end_matches('/'),
            crate::rest::path_segment(&name),
            if leader { "false" } else { "leader" }
        );
        let auth = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let (status, body) = cluster
            .forward_post(&url, auth)
            .await
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, body).into_response();
        response.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
        return Ok(response);
    }
    herder.restart_task(&name, id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_are_read_as_java_reads_them() {
        let q = Some("includeTasks=True&onlyFailed=FALSE&x=1");
        assert!(query_flag(q, "includeTasks", false));
        assert!(!query_flag(q, "onlyFailed", true));
        assert!(query_flag(q, "absent", true));
        assert!(!query_flag(
            Some("connectorsOnly=yes"),
            "connectorsOnly",
            true
        ));
        assert!(!query_flag(None, "includeTasks", false));
    }

    #[test]
    fn names_with_control_characters_are_refused() {
        for bad in ["a\nb", "tab\there", "", "  ", "bell\u{7}"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["a b", "café", "x/y", "dots.and-dashes"] {
            assert!(check_name(good).is_ok(), "{good:?}");
        }
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("localhost:8083"));
        let url = location(&headers, Some(&Scheme("https")), "my connector/1").unwrap();
        assert_eq!(url, "https://localhost:8083/connectors/my%20connector%2F1");
    }
}
