//! Which contract a component implements: found from its export names alone, before anything
//! is instantiated, so a wrong file is rejected with a precise reason.

use std::fmt;

/// The WIT package every plugin implements.
pub const PACKAGE: &str = "wasm-connect:plugin";
/// The newest contract version this worker runs, the one `wasm-connect-sdk` builds.
pub const VERSION: Version = Version {
    major: 0,
    minor: 4,
    patch: 0,
};

/// Every contract version this worker runs, oldest first. A plugin built for any version
/// compatible with one of these loads (`wit/README.md` lists what each changed).
pub const SUPPORTED: [Version; 4] = [
    Version {
        major: 0,
        minor: 1,
        patch: 0,
    },
    Version {
        major: 0,
        minor: 2,
        patch: 0,
    },
    Version {
        major: 0,
        minor: 3,
        patch: 0,
    },
    VERSION,
];

/// A semantic version of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl Version {
    /// Parse `x.y.z` (pre-release and build suffixes are not used by the contract).
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.').map(|p| p.parse::<u64>().ok());
        let v = Version {
            major: parts.next()??,
            minor: parts.next()??,
            patch: parts.next()??,
        };
        parts.next().is_none().then_some(v)
    }

    /// Semver compatibility: same major, and for 0.x the same minor.
    pub fn compatible_with(&self, other: &Version) -> bool {
        self.major == other.major && (self.major != 0 || self.minor == other.minor)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The two worlds of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    /// `source-connector`: exports `connector` and `source`.
    Source,
    /// `sink-connector`: exports `connector` and `sink`.
    Sink,
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            World::Source => "source",
            World::Sink => "sink",
        })
    }
}

/// Decide the world and contract version from a component's export names, or say why not.
pub fn detect<'a>(exports: impl IntoIterator<Item = &'a str>) -> Result<(World, Version), String> {
    let exports: Vec<&str> = exports.into_iter().collect();
    let mut ours: Vec<(&str, Option<Version>)> = Vec::new();
    for name in &exports {
        if let Some(rest) = name.strip_prefix(PACKAGE).and_then(|r| r.strip_prefix('/')) {
            let (interface, version) = match rest.split_once('@') {
                Some((i, v)) => (i, Version::parse(v)),
                None => (rest, None),
            };
            ours.push((interface, version));
        }
    }
    if ours.is_empty() {
        let listed = if exports.is_empty() {
            "nothing".to_owned()
        } else {
            exports.join(", ")
        };
        return Err(format!(
            "it does not implement a {PACKAGE} world (it exports {listed}); build connectors with wasm-connect-sdk's export_source_connector! or export_sink_connector!"
        ));
    }
    let version = match ours.iter().find_map(|(_, v)| *v) {
        Some(v) => v,
        None => {
            return Err(format!(
                "its {PACKAGE} exports carry no version; rebuild it against {PACKAGE}@{VERSION}"
            ));
        }
    };
    if !SUPPORTED.iter().any(|s| version.compatible_with(s)) {
        let oldest = SUPPORTED[0];
        let newer = version > VERSION;
        return Err(format!(
            "it was built for contract {PACKAGE}@{version}, which is {} this worker runs ({}); {}",
            if newer { "newer than any" } else { "not one" },
            SUPPORTED
                .iter()
                .map(|s| format!("{}.{}.x", s.major, s.minor))
                .collect::<Vec<_>>()
                .join(", "),
            if newer {
                "upgrade wasm-connect or rebuild the plugin with a matching wasm-connect-sdk"
                    .to_owned()
            } else if version < oldest {
                "rebuild the plugin with a current wasm-connect-sdk".to_owned()
            } else {
                format!("rebuild the plugin against {PACKAGE}@{VERSION}")
            }
        ));
    }
    let has = |interface: &str| ours.iter().any(|(i, _)| *i == interface);
    match (has("connector"), has("source"), has("sink")) {
        (true, true, false) => Ok((World::Source, version)),
        (true, false, true) => Ok((World::Sink, version)),
        (true, true, true) => Err("it exports both the source and the sink interface; a plugin implements exactly one world".to_owned()),
        (false, _, _) => Err(format!("it does not export {PACKAGE}/connector, so it implements neither the source-connector nor the sink-connector world")),
        (true, false, false) => Err(format!("it exports {PACKAGE}/connector but neither /source nor /sink, so it implements neither the source-connector nor the sink-connector world")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_worlds() {
        let source = detect([
            "wasm-connect:plugin/connector@0.4.0",
            "wasm-connect:plugin/source@0.4.0",
        ]);
        assert_eq!(source, Ok((World::Source, VERSION)));
        let sink = detect([
            "wasm-connect:plugin/connector@0.1.3",
            "wasm-connect:plugin/sink@0.1.3",
        ]);
        assert_eq!(sink.map(|(w, _)| w), Ok(World::Sink));
        let old = detect([
            "wasm-connect:plugin/connector@0.1.0",
            "wasm-connect:plugin/source@0.1.0",
        ]);
        assert_eq!(old, Ok((World::Source, SUPPORTED[0])));
    }

    #[test]
    fn rejects_other_worlds_and_versions() {
        let err = detect(["wasi:cli/run@0.2.0"]).unwrap_err();
        assert!(err.contains("wasi:cli/run@0.2.0"), "{err}");
        let err = detect([
            "wasm-connect:plugin/connector@1.0.0",
            "wasm-connect:plugin/source@1.0.0",
        ])
        .unwrap_err();
        assert!(
            err.contains("@1.0.0")
                && err.contains("newer than any")
                && err.contains("0.1.x, 0.2.x, 0.3.x, 0.4.x"),
            "{err}"
        );
        let err = detect([
            "wasm-connect:plugin/connector@0.5.0",
            "wasm-connect:plugin/sink@0.5.0",
        ])
        .unwrap_err();
        assert!(err.contains("newer than any"), "{err}");
        let err = detect([
            "wasm-connect:plugin/connector@0.0.9",
            "wasm-connect:plugin/sink@0.0.9",
        ])
        .unwrap_err();
        assert!(
            err.contains("not one") && err.contains("current wasm-connect-sdk"),
            "{err}"
        );
        let err = detect(["wasm-connect:plugin/connector@0.1.0"]).unwrap_err();
        assert!(err.contains("neither"), "{err}");
    }

    #[test]
    fn version_parsing_and_compatibility() {
        assert_eq!(Version::parse("0.1.7").map(|v| v.patch), Some(7));
        assert_eq!(Version::parse("0.1"), None);
        assert_eq!(Version::parse("0.1.0.0"), None);
        let v = |s| Version::parse(s).unwrap();
        assert!(v("0.1.9").compatible_with(&v("0.1.0")));
        assert!(!v("0.2.0").compatible_with(&v("0.1.0")));
        assert!(v("1.4.0").compatible_with(&v("1.0.0")));
        assert!(!v("2.0.0").compatible_with(&v("1.0.0")));
    }
}
