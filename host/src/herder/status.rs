//! Statuses and descriptions in Kafka Connect's REST shapes.

use serde::Serialize;

/// The state of a connector or task instance.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct InstanceState {
    pub state: &'static str,
    pub worker_id: String,
    /// The plugin version it runs (KIP-891), once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// One task's state.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TaskStatus {
    pub id: u32,
    #[serde(flatten)]
    pub state: InstanceState,
}

/// `GET /connectors/{name}/status`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ConnectorStatus {
    pub name: String,
    pub connector: InstanceState,
    pub tasks: Vec<TaskStatus>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// A task id: `{"connector": name, "task": n}`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TaskId {
    pub connector: String,
    pub task: u32,
}

/// `GET /connectors/{name}`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ConnectorInfo {
    pub name: String,
    pub config: std::collections::BTreeMap<String, String>,
    pub tasks: Vec<TaskId>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// `GET /connectors/{name}/tasks` entries.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TaskInfo {
    pub id: TaskId,
    pub config: std::collections::BTreeMap<String, String>,
}
