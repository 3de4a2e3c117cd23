//! A plugin file: read, checked against the contract, compiled (or loaded from the compile
//! cache) and described by its own `spec()`.

pub mod contract;
pub mod spec;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::Component;

pub use contract::{Version, World};
pub use spec::{ConfigKey, Kind, PluginSpec};

use crate::sandbox::cache::sha256_hex;
use crate::sandbox::{ConnectorInstance, InstanceContext, Limits, Origin, Sandbox};

/// The largest plugin file the worker reads: a plugin is compiled from memory, so a file
/// dropped into `plugin.path` must not be able to take the worker's RAM.
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// The largest spec a plugin may describe (as JSON), since it is kept and served by the REST
/// API for as long as the plugin is loaded.
pub const MAX_SPEC_BYTES: usize = 1024 * 1024;

/// A loaded, validated plugin.
pub struct Plugin {
    /// The file it was loaded from.
    pub path: PathBuf,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// The world it implements.
    pub world: World,
    /// The contract version it was built against.
    pub contract: Version,
    /// What it says about itself.
    pub spec: PluginSpec,
    /// Compiled or loaded from the cache.
    pub origin: Origin,
    /// The compiled component, ready to instantiate.
    pub component: Component,
    /// What its imports let it ask the sandbox for, beyond the contract ([`asks_for`]).
    pub asks: Vec<&'static str>,
}

/// The capabilities a component's imports (their names) let it ask for, each with the grant
/// that allows it, in a fixed order. A plugin gets none of them unless its connector's config
/// grants it; this says which grants it may need.
pub fn asks_for<'a>(imports: impl IntoIterator<Item = &'a str>) -> Vec<&'static str> {
    const CAPABILITIES: [(&str, &str); 5] = [
        (
            "wasi:filesystem/",
            "files: wasi:filesystem (granted by sandbox.fs.read, sandbox.fs.write)",
        ),
        (
            "wasi:sockets/tcp",
            "TCP connections: wasi:sockets/tcp (granted by sandbox.net.connect)",
        ),
        (
            "wasi:sockets/ip-name-lookup",
            "name lookups: wasi:sockets/ip-name-lookup (the names sandbox.net.connect grants)",
        ),
        ("wasi:sockets/udp", "UDP: wasi:sockets/udp (never granted)"),
        (
            "wasi:http/outgoing-handler",
            "outgoing HTTP: wasi:http/outgoing-handler (granted by sandbox.http.allow)",
        ),
    ];
    let imports: Vec<&str> = imports.into_iter().collect();
    CAPABILITIES
        .iter()
        .filter(|(prefix, _)| imports.iter().any(|i| i.starts_with(prefix)))
        .map(|(_, what)| *what)
        .collect()
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("name", &self.spec.name)
            .field("version", &self.spec.version)
            .field("world", &self.world)
            .finish_non_exhaustive()
    }
}

/// A plugin file that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot load plugin {}: {reason}", path.display())]
pub struct LoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it and what to do.
    pub reason: String,
}

/// The first bytes of every WebAssembly binary.
const WASM_MAGIC: &[u8; 4] = b"\0asm";
/// The version field of a core module (a component has a different one).
const CORE_MODULE_VERSION: [u8; 4] = [1, 0, 0, 0];

impl Plugin {
    /// Load the plugin in `path`, its `spec()` under the default limits.
    pub async fn load(sandbox: &Sandbox, path: &Path) -> Result<Arc<Plugin>, LoadError> {
        Self::load_within(sandbox, path, Limits::default()).await
    }

    /// Load the plugin in `path`, its `spec()` under `limits` (memory, CPU and the
    /// `sandbox.config.wall.timeout.ms` deadline).
    pub async fn load_within(
        sandbox: &Sandbox,
        path: &Path,
        limits: Limits,
    ) -> Result<Arc<Plugin>, LoadError> {
        let fail = |reason: String| LoadError {
            path: path.to_owned(),
            reason,
        };
        let bytes = read_bounded(path, MAX_FILE_BYTES)
            .await
            .map_err(|e| fail(format!("cannot read the file: {e}")))?
            .ok_or_else(|| {
                fail(format!(
                    "the file is larger than {MAX_FILE_BYTES} bytes, the most a plugin may be; it was not read"
                ))
            })?;
        Self::from_bytes(sandbox, path, &bytes, limits)
            .await
            .map_err(fail)
    }

    async fn from_bytes(
        sandbox: &Sandbox,
        path: &Path,
        bytes: &[u8],
        limits: Limits,
    ) -> Result<Arc<Plugin>, String> {
        check_header(bytes)?;
        let sha256 = sha256_hex(bytes);
        let (component, origin) = sandbox
            .compile_blocking(bytes.into(), sha256.clone())
            .await
            .map_err(|e| invalid_component(bytes, &e))?;
        let engine = sandbox.engine();
        let ty = component.component_type();
        let export_names: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
        let asks = asks_for(ty.imports(engine).map(|(n, _)| n));
        let (world, contract) = contract::detect(export_names.iter().map(String::as_str))?;
        sandbox.linker().instantiate_pre(&component).map_err(|e| {
            format!(
                "it needs imports this worker does not provide ({e}); a plugin may import only {} and WASI 0.2",
                contract::PACKAGE
            )
        })?;
        let label = format!("plugin:{}", path.display());
        let mut instance = ConnectorInstance::new(
            sandbox,
            &component,
            world,
            contract,
            &InstanceContext {
                limits,
                ..InstanceContext::bare(label)
            },
        )
        .await
        .map_err(|e| format!("it cannot be instantiated: {e:#}"))?;
        let spec: PluginSpec = instance
            .spec()
            .await
            .map_err(|e| format!("its spec() call failed: {e}"))?
            .into();
        let size = json_size(&spec);
        if size > MAX_SPEC_BYTES {
            return Err(format!(
                "its spec() is {size} bytes as JSON, over the limit of {MAX_SPEC_BYTES} bytes; a spec names and documents config keys, it should be small"
            ));
        }
        check_spec(&spec, world)?;
        Ok(Arc::new(Plugin {
            path: path.to_owned(),
            sha256,
            world,
            contract,
            spec,
            origin,
            component,
            asks,
        }))
    }
}

/// The file's bytes, or `None` when it is longer than `max` (then at most `max + 1` bytes
/// were read, whatever its size says, so a file that grows while it is read is caught too).
async fn read_bounded(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path).await?;
    let hint = file.metadata().await?.len();
    if hint > max {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(hint as usize);
    file.take(max + 1).read_to_end(&mut bytes).await?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// How many bytes `value` takes as JSON, counted without building the text.
pub(crate) fn json_size(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

fn check_header(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 8 {
        return Err(format!(
            "the file is {} bytes long, too short to be a WebAssembly component (truncated?)",
            bytes.len()
        ));
    }
    if &bytes[..4] != WASM_MAGIC {
        return Err("it is not a WebAssembly file (it does not start with \\0asm)".to_owned());
    }
    if bytes[4..8] == CORE_MODULE_VERSION {
        return Err("it is a core WebAssembly module, not a component; build plugins for the wasm32-wasip2 target (cargo build --target wasm32-wasip2)".to_owned());
    }
    Ok(())
}

fn invalid_component(bytes: &[u8], error: &wasmtime::Error) -> String {
    let detail = format!("{error:#}");
    if detail.contains("unexpected end") || detail.contains("out of bounds") {
        format!(
            "the file is truncated or corrupt ({} bytes; {detail}); copy it again",
            bytes.len()
        )
    } else {
        format!("it is not a valid WebAssembly component: {detail}")
    }
}

fn check_spec(spec: &PluginSpec, world: World) -> Result<(), String> {
    let kind_matches = matches!(
        (spec.kind, world),
        (Kind::Source, World::Source) | (Kind::Sink, World::Sink)
    );
    if !kind_matches {
        return Err(format!(
            "its spec() says kind {} but it implements the {world}-connector world",
            spec.kind
        ));
    }
    if spec.name.trim().is_empty() || spec.name.chars().any(char::is_whitespace) {
        return Err(format!(
            "its spec() name {:?} is empty or contains whitespace",
            spec.name
        ));
    }
    if spec.version.trim().is_empty() {
        return Err("its spec() version is empty".to_owned());
    }
    // Keys the worker interprets are the operator's alone: a plugin must not define them (a
    // default for sandbox.fs.write would otherwise grant the plugin a directory).
    if let Some(key) = spec
        .config
        .iter()
        .find(|k| crate::config::keys::is_reserved(&k.name))
    {
        return Err(format!(
            "its spec() defines the config key {}, which the worker reserves; plugins may not define name, connector.class, tasks.max, connector.plugin.version, sandbox.*, task.restart.*, errors.*, key/value converter, topic.creation.* or batch and in-flight limit keys",
            key.name
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_say_which_grants_a_plugin_may_need() {
        let asks = asks_for([
            "wasi:io/streams@0.2.6",
            "wasi:sockets/tcp@0.2.6",
            "wasi:sockets/ip-name-lookup@0.2.6",
            "wasi:filesystem/preopens@0.2.6",
        ]);
        assert_eq!(asks.len(), 3, "{asks:?}");
        assert!(asks[0].starts_with("files"));
        assert!(asks[1].contains("sandbox.net.connect"));
        assert!(asks_for(["wasi:io/streams@0.2.6"]).is_empty());
    }
}
