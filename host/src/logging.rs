//! The worker's logging: a tracing subscriber whose filter can be changed at runtime (the
//! REST API's `/admin/loggers`). Loggers are tracing targets (`wasm_connect::task`, `plugin`,
//! `librdkafka`, ...); `root` is the default level.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// The name Kafka Connect uses for the default level.
pub const ROOT: &str = "root";

/// A logger's level and when it was last set over REST (milliseconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggerLevel {
    pub level: String,
    pub last_modified: Option<u64>,
}

struct Control {
    handle: reload::Handle<EnvFilter, Registry>,
    levels: Mutex<BTreeMap<String, LoggerLevel>>,
}

/// The filter of the one tracing subscriber. Process-wide on purpose, and the one piece of
/// mutable state every worker in a process shares: `tracing` has one global subscriber per
/// process, so `/admin/loggers` on any worker changes what every worker in the process logs
/// (as Kafka Connect's does for the JVM's loggers). Everything a worker owns is per worker.
static CONTROL: OnceLock<Control> = OnceLock::new();

/// Install the global subscriber: `RUST_LOG` if set, else `default_filter`; logs to stderr.
pub fn init(default_filter: &str) {
    let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| default_filter.to_owned());
    let levels = parse_directives(&directives);
    let filter = EnvFilter::try_new(render(&levels)).unwrap_or_else(|_| EnvFilter::new("info"));
    let (layer, handle) = reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if tracing_subscriber::registry()
        .with(layer)
        .with(fmt)
        .try_init()
        .is_ok()
    {
        let _ = CONTROL.set(Control {
            handle,
            levels: Mutex::new(levels),
        });
    }
}

/// Every logger with an explicit level.
pub fn loggers() -> BTreeMap<String, LoggerLevel> {
    CONTROL
        .get()
        .map(|c| c.levels.lock().unwrap_or_else(|e| e.into_inner()).clone())
        .unwrap_or_default()
}

/// The effective level of `name`: its own, else its nearest configured parent's, else root's.
pub fn level_of(name: &str) -> Option<LoggerLevel> {
    effective(&loggers(), name)
}

/// The level `name` has among `all`: its own, or its nearest configured parent's.
fn effective(all: &BTreeMap<String, LoggerLevel>, name: &str) -> Option<LoggerLevel> {
    let mut candidate = name.to_owned();
    loop {
        if let Some(level) = all.get(&candidate) {
            return Some(level.clone());
        }
        match candidate.rfind("::") {
            Some(i) => candidate.truncate(i),
            None => return all.get(ROOT).cloned(),
        }
    }
}

/// Set `name` (or `root`) to `level` now; returns the loggers affected.
pub fn set_level(name: &str, level: &str) -> Result<Vec<String>, String> {
    let level = level.trim().to_ascii_uppercase();
    let tracing_level = match level.as_str() {
        "TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR" | "OFF" => level.to_ascii_lowercase(),
        "FATAL" => "error".to_owned(),
        "WARNING" => "warn".to_owned(),
        _ => {
            return Err(format!(
                "invalid log level {level:?}; use TRACE, DEBUG, INFO, WARN, ERROR or OFF"
            ));
        }
    };
    if name.is_empty() || name.contains([',', '=', ' ']) {
        return Err(format!("invalid logger name {name:?}"));
    }
    let control = CONTROL
        .get()
        .ok_or("logging is not controllable in this process")?;
    let mut guard = control.levels.lock().unwrap_or_else(|e| e.into_inner());
    // Only a filter that builds replaces the current one.
    let mut levels = guard.clone();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .ok();
    levels.insert(
        name.to_owned(),
        LoggerLevel {
            level: tracing_level.to_ascii_uppercase(),
            last_modified: now,
        },
    );
    let filter = EnvFilter::try_new(render(&levels))
        .map_err(|e| format!("invalid logger name {name:?}: {e}"))?;
    control.handle.reload(filter).map_err(|e| e.to_string())?;
    let before = std::mem::replace(&mut *guard, levels.clone());
    // As Kafka Connect: the loggers (this one and those under it) whose level changed.
    let level_in =
        |all: &BTreeMap<String, LoggerLevel>, k: &str| effective(all, k).map(|l| l.level);
    let affected: Vec<String> = levels
        .keys()
        .filter(|k| name == ROOT || *k == name || k.starts_with(&format!("{name}::")))
        .filter(|k| level_in(&before, k) != level_in(&levels, k))
        .cloned()
        .collect();
    Ok(affected)
}

fn parse_directives(directives: &str) -> BTreeMap<String, LoggerLevel> {
    let mut levels = BTreeMap::new();
    for part in directives
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (name, level) = match part.split_once('=') {
            Some((n, l)) => (n.to_owned(), l),
            None => (ROOT.to_owned(), part),
        };
        levels.insert(
            name,
            LoggerLevel {
                level: level.to_ascii_uppercase(),
                last_modified: None,
            },
        );
    }
    levels
        .entry(ROOT.to_owned())
        .or_insert_with(|| LoggerLevel {
            level: "INFO".into(),
            last_modified: None,
        });
    levels
}

fn render(levels: &BTreeMap<String, LoggerLevel>) -> String {
    levels
        .iter()
        .map(|(name, l)| {
            let level = l.level.to_ascii_lowercase();
            if name == ROOT {
                level
            } else {
                format!("{name}={level}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_level_takes_effect_at_runtime() {
        init("info");
        assert!(!tracing::enabled!(target: "some::module::inner", tracing::Level::DEBUG));
        set_level("some::module", "DEBUG").unwrap();
        assert!(tracing::enabled!(target: "some::module::inner", tracing::Level::DEBUG));
        assert_eq!(level_of("some::module::inner").unwrap().level, "DEBUG");
    }

    #[test]
    fn directives_round_trip() {
        let levels = parse_directives("info,librdkafka=warn,wasm_connect::task=debug");
        assert_eq!(levels[ROOT].level, "INFO");
        assert_eq!(levels["librdkafka"].level, "WARN");
        assert_eq!(
            render(&levels),
            "librdkafka=warn,info,wasm_connect::task=debug"
        );
    }
}
