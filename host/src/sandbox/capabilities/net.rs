//! Network capabilities: which TCP peers a connector's instances may connect to
//! (`sandbox.net.connect`), which names they may look up, and the per-instance bookkeeping that
//! enforces both.
//!
//! Invariants:
//! - Nothing is reachable unless granted: every TCP use goes through [`NetAccess::may_use`] and
//!   every lookup through [`NetAccess::may_resolve`]; with no `sandbox.net.connect` both refuse
//!   everything.
//! - A name lookup reaches DNS only for a granted name (exact, or under a granted `*.domain`):
//!   a lookup of anything else is refused before any query leaves the host, so DNS cannot carry
//!   data out.
//! - A TCP connect is allowed only to a granted port at an address that is granted itself (an
//!   address or CIDR block), or that the host resolved from a granted name for that port within
//!   [`RESOLVED_TTL`]. The plugin cannot make an address "granted" by any other means.
//! - Binds other than the implicit ephemeral bind of a connect, listening, accepting and every
//!   UDP use are refused.
//! - Every refusal is logged (at most once per [`DENIAL_LOG_INTERVAL`] per target) and kept for
//!   the failing call's error, so the task's trace says what the sandbox refused.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use wasmtime_wasi::sockets::SocketAddrUse;

use crate::sandbox::state::Tags;

pub use crate::config_keys::NET_CONNECT;

/// How long an address resolved from a granted name stays connectable. The system resolver
/// does not report record TTLs; a minute follows a DNS change soon enough for a database
/// fail-over while keeping lookups off the connect path.
pub const RESOLVED_TTL: Duration = Duration::from_secs(60);

/// A refusal of the same kind to the same target is logged at most this often.
pub const DENIAL_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// The most (address, port) pairs an instance remembers as resolved; beyond it, expired
/// entries are dropped first and then the oldest, so a plugin resolving endless granted
/// `*.domain` names cannot grow the worker's memory.
const MAX_RESOLVED: usize = 4096;

/// The most refusals kept for one call's error.
const MAX_DENIALS: usize = 4;

/// Which hosts an entry of `sandbox.net.connect` names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// One host name, lower case, without a trailing dot.
    Name(String),
    /// Every name under a domain (`*.example.com`: `a.example.com`, `a.b.example.com`, not
    /// `example.com`); the domain in lower case, with its leading dot (`.example.com`).
    Under(String),
    /// An address or a CIDR block.
    Net(IpNet),
}

impl HostPattern {
    fn matches_name(&self, name: &str) -> bool {
        match self {
            HostPattern::Name(n) => n == name,
            // `domain` keeps its leading dot: what is left must be a non-empty label chain.
            HostPattern::Under(domain) => name
                .strip_suffix(domain.as_str())
                .is_some_and(|head| !head.is_empty()),
            HostPattern::Net(_) => false,
        }
    }
}

/// One entry: a host pattern and an exact port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NetEntry {
    host: HostPattern,
    port: u16,
    /// As the operator wrote it, for messages.
    text: String,
}

/// What `sandbox.net.connect` grants a connector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetGrant {
    entries: Vec<NetEntry>,
}

impl NetGrant {
    /// The grant a connector config makes; an error names the key and the bad entry.
    pub fn from_config(config: &[(String, String)]) -> Result<Self, String> {
        Ok(Self {
            entries: super::parse_list(config, NET_CONNECT, parse_entry)?,
        })
    }

    /// Whether nothing is granted (then the instance gets no network at all).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries as written, for `GET /connectors/{name}` and messages.
    pub fn entries(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.text.clone()).collect()
    }

    /// What is granted, in one phrase.
    pub fn describe(&self) -> String {
        super::describe_list(self.entries.iter().map(|e| e.text.as_str()))
    }

    /// The granted ports a name may be connected on: empty when the name is not granted.
    fn ports_of_name(&self, name: &str) -> BTreeSet<u16> {
        self.entries
            .iter()
            .filter(|e| e.host.matches_name(name))
            .map(|e| e.port)
            .collect()
    }

    /// Whether an address is granted directly (as an address or inside a CIDR block).
    fn grants_address(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        self.entries.iter().any(|e| {
            e.port == addr.port() && matches!(&e.host, HostPattern::Net(net) if net.contains(&ip))
        })
    }

    /// The exact names granted for `port` (resolved by the host when a connect needs them).
    fn names_for_port(&self, port: u16) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(move |e| match &e.host {
            HostPattern::Name(n) if e.port == port => Some(n.as_str()),
            _ => None,
        })
    }
}

fn parse_entry(item: &str) -> Result<NetEntry, String> {
    let bad = |why: &str| {
        format!(
            "{NET_CONNECT}: {item:?} {why}; write host:port, *.domain:port, address:port or CIDR:port, e.g. db.example.com:5432, 10.0.0.0/8:5432 or [::1]:5432"
        )
    };
    // `[v6 address or block]:port`, or `host:port` split at the last colon.
    let (host, port) = if let Some(rest) = item.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("has a '[' without its ']'"))?;
        let port = after.strip_prefix(':').ok_or_else(|| bad("has no port"))?;
        (host, port)
    } else {
        let (host, port) = item.rsplit_once(':').ok_or_else(|| bad("has no port"))?;
        if host.contains(':') {
            return Err(bad("looks like an IPv6 address: put it in brackets"));
        }
        (host, port)
    };
    let port: u16 = match port.parse() {
        Ok(p) if p > 0 => p,
        _ => {
            return Err(bad(
                "has no valid port (a number from 1 to 65535; ports are exact, so list each one)",
            ));
        }
    };
    let host = if host.contains('/') {
        HostPattern::Net(
            host.parse::<IpNet>()
                .map_err(|_| bad("is not a valid CIDR block"))?
                .trunc(),
        )
    } else if let Ok(ip) = host.parse::<IpAddr>() {
        HostPattern::Net(IpNet::from(ip.to_canonical()))
    } else if let Some(domain) = host.strip_prefix("*.") {
        HostPattern::Under(format!(
            ".{}",
            valid_name(domain).ok_or_else(|| bad("is not a valid domain"))?
        ))
    } else {
        HostPattern::Name(valid_name(host).ok_or_else(|| bad("is not a valid host name"))?)
    };
    Ok(NetEntry {
        host,
        port,
        text: item.to_owned(),
    })
}

/// A host name in lower case without a trailing dot, if it is one (letters, digits, `-` and
/// `_` in dot-separated labels of at most 63 bytes).
fn valid_name(name: &str) -> Option<String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    ok.then_some(name)
}

/// The network side of one instance: its grant, the addresses resolved for it, and the
/// refusals the current call met.
pub struct NetAccess {
    grant: NetGrant,
    tags: Tags,
    state: Mutex<NetState>,
}

#[derive(Default)]
struct NetState {
    /// (address, port) pairs resolved from granted names, until when they may be connected.
    resolved: HashMap<(IpAddr, u16), Instant>,
    /// Exact granted names the host resolved itself for a connect, and until when.
    host_lookups: HashMap<String, (Vec<IpAddr>, Instant)>,
    /// The name each open lookup of the plugin resolves (by the stream's handle).
    lookups: HashMap<u32, String>,
    /// Refusals since the current call began, newest last.
    denials: VecDeque<String>,
    /// When each refusal was last logged.
    logged: HashMap<String, Instant>,
}

impl NetAccess {
    /// The network side of an instance of a connector with `grant`.
    pub fn new(grant: NetGrant, tags: Tags) -> Self {
        Self {
            grant,
            tags,
            state: Mutex::new(NetState::default()),
        }
    }

    /// The grant.
    pub fn grant(&self) -> &NetGrant {
        &self.grant
    }

    fn state(&self) -> std::sync::MutexGuard<'_, NetState> {
        // The state is plain bookkeeping: a panic elsewhere cannot leave it inconsistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the plugin may look `name` up. Address literals need no DNS and are answered
    /// as they are (whether they may be connected is decided at connect). A refusal is
    /// recorded.
    pub fn may_resolve(&self, name: &str) -> bool {
        if name.parse::<IpAddr>().is_ok() {
            return true;
        }
        let canonical = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        if !self.grant.ports_of_name(&canonical).is_empty() {
            return true;
        }
        self.refuse(format!(
            "name lookup of {name:?}: not granted by {NET_CONNECT} (granted: {})",
            self.grant.describe()
        ));
        false
    }

    /// A lookup of `name` began, answered through the stream with handle `handle`.
    pub fn lookup_started(&self, handle: u32, name: &str) {
        let canonical = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        self.state().lookups.insert(handle, canonical);
    }

    /// The lookup with handle `handle` answered `ip`: it may be connected on the name's
    /// granted ports for [`RESOLVED_TTL`].
    pub fn lookup_answered(&self, handle: u32, ip: IpAddr) {
        let mut state = self.state();
        let Some(name) = state.lookups.get(&handle) else {
            return;
        };
        let ports = self.grant.ports_of_name(name);
        let until = Instant::now() + RESOLVED_TTL;
        for port in ports {
            state.remember((ip.to_canonical(), port), until);
        }
    }

    /// The lookup stream with handle `handle` was dropped.
    pub fn lookup_ended(&self, handle: u32) {
        self.state().lookups.remove(&handle);
    }

    /// Whether the instance may use `addr` for `usage`; a refusal is recorded.
    pub async fn may_use(&self, addr: SocketAddr, usage: SocketAddrUse) -> bool {
        let allowed = match usage {
            SocketAddrUse::TcpConnect => self.may_connect(addr).await,
            // A connect first checks the implicit bind to an unspecified address and port 0:
            // that is the only bind allowed.
            SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
            _ => false,
        };
        if !allowed {
            let what = match usage {
                SocketAddrUse::TcpConnect => format!(
                    "TCP connect to {addr}: not granted by {NET_CONNECT} (granted: {})",
                    self.grant.describe()
                ),
                SocketAddrUse::TcpBind => {
                    format!("TCP bind to {addr}: plugins may not bind or listen")
                }
                SocketAddrUse::TcpListen | SocketAddrUse::TcpAccept => {
                    format!("TCP listen on {addr}: plugins may not listen")
                }
                _ => format!("UDP use of {addr}: plugins may not use UDP"),
            };
            self.refuse(what);
        }
        allowed
    }

    async fn may_connect(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        if self.grant.grants_address(addr) {
            return true;
        }
        {
            let state = self.state();
            if state
                .resolved
                .get(&(ip, addr.port()))
                .is_some_and(|until| *until > Instant::now())
            {
                return true;
            }
        }
        // The plugin may connect to an address of a granted name it did not look up through
        // WASI (it was configured with the address): the host resolves the exact names
        // granted for this port itself.
        let names: Vec<String> = self
            .grant
            .names_for_port(addr.port())
            .map(str::to_owned)
            .collect();
        for name in names {
            if self.host_lookup(&name).await.contains(&ip) {
                return true;
            }
        }
        false
    }

    /// The addresses of a granted name, resolved by the host and cached for [`RESOLVED_TTL`].
    async fn host_lookup(&self, name: &str) -> Vec<IpAddr> {
        if let Some((ips, until)) = self.state().host_lookups.get(name)
            && *until > Instant::now()
        {
            return ips.clone();
        }
        let ips: Vec<IpAddr> = match tokio::net::lookup_host((name, 0)).await {
            Ok(addrs) => addrs.map(|a| a.ip().to_canonical()).collect(),
            Err(e) => {
                tracing::debug!(name, "resolving a granted name failed: {e}");
                Vec::new()
            }
        };
        let mut state = self.state();
        if state.host_lookups.len() >= MAX_RESOLVED {
            state.host_lookups.clear();
        }
        state.host_lookups.insert(
            name.to_owned(),
            (ips.clone(), Instant::now() + RESOLVED_TTL),
        );
        ips
    }

    /// Record a refusal (of a socket use, a lookup, or an HTTP request): logged (rate-limited
    /// per target) and kept for the call's error.
    pub(crate) fn refuse(&self, what: String) {
        let mut state = self.state();
        let now = Instant::now();
        let log = match state.logged.get(&what) {
            Some(at) => now.duration_since(*at) >= DENIAL_LOG_INTERVAL,
            None => true,
        };
        if log {
            if state.logged.len() >= 256 {
                state.logged.clear();
            }
            state.logged.insert(what.clone(), now);
            tracing::warn!(connector = %self.tags.connector, task = %self.tags.task_label(), "the sandbox refused {what}");
        }
        if state.denials.len() == MAX_DENIALS {
            state.denials.pop_front();
        }
        state.denials.push_back(what);
    }

    /// Forget the refusals of the previous call (a call begins).
    pub fn clear_denials(&self) {
        self.state().denials.clear();
    }

    /// The refusals since the current call began, oldest first.
    pub fn take_denials(&self) -> Vec<String> {
        self.state().denials.drain(..).collect()
    }
}

impl NetState {
    fn remember(&mut self, key: (IpAddr, u16), until: Instant) {
        if self.resolved.len() >= MAX_RESOLVED && !self.resolved.contains_key(&key) {
            let now = Instant::now();
            self.resolved.retain(|_, u| *u > now);
            if self.resolved.len() >= MAX_RESOLVED
                && let Some(oldest) = self
                    .resolved
                    .iter()
                    .min_by_key(|(_, u)| **u)
                    .map(|(k, _)| *k)
            {
                self.resolved.remove(&oldest);
            }
        }
        self.resolved.insert(key, until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(value: &str) -> Result<NetGrant, String> {
        NetGrant::from_config(&[(NET_CONNECT.to_owned(), value.to_owned())])
    }

    fn access(value: &str) -> NetAccess {
        NetAccess::new(
            grant(value).unwrap(),
            Tags {
                connector: "c".into(),
                task: Some(0),
            },
        )
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn entries_parse_in_every_form_and_bad_ones_name_the_key() {
        let g = grant(
            "DB.example.com.:5432, *.internal.example:443, 10.1.0.0/16:5432, 127.0.0.1:15432, [::1]:80, [fd00::/8]:9000",
        )
        .unwrap();
        assert_eq!(g.entries().len(), 6);
        assert!(grant("").unwrap().is_empty());
        for bad in [
            "db.example.com",
            "db.example.com:0",
            "db.example.com:http",
            "db.example.com:70000",
            "::1:80",
            "[::1:80",
            "10.0.0.0/40:80",
            "bad name:80",
            "*.:80",
        ] {
            let err = grant(bad).unwrap_err();
            assert!(err.starts_with(NET_CONNECT), "{bad}: {err}");
            assert!(err.contains(bad), "{bad}: {err}");
        }
    }

    #[test]
    fn only_granted_names_may_be_looked_up() {
        let net = access("db.example.com:5432, *.svc.example:443");
        assert!(net.may_resolve("db.example.com"));
        assert!(net.may_resolve("DB.Example.com."));
        assert!(net.may_resolve("a.svc.example"));
        assert!(net.may_resolve("a.b.svc.example"));
        assert!(net.may_resolve("192.0.2.1"), "literals need no DNS");
        for refused in [
            "svc.example",
            "xsvc.example",
            "example.com",
            "db.example.com.evil.test",
            "secret.attacker.test",
        ] {
            assert!(!net.may_resolve(refused), "{refused}");
        }
        let denials = net.take_denials();
        assert_eq!(denials.len(), MAX_DENIALS, "kept, newest last: {denials:?}");
        assert!(denials[MAX_DENIALS - 1].contains("secret.attacker.test"));
        assert!(net.take_denials().is_empty());
    }

    #[tokio::test]
    async fn connects_reach_granted_addresses_and_what_granted_names_resolved_to() {
        let net = access("10.1.0.0/16:5432, 127.0.0.1:15432, *.svc.example:443");
        assert!(
            net.may_use(addr("10.1.2.3:5432"), SocketAddrUse::TcpConnect)
                .await
        );
        assert!(
            net.may_use(addr("[::ffff:10.1.2.3]:5432"), SocketAddrUse::TcpConnect)
                .await
        );
        assert!(
            !net.may_use(addr("10.1.2.3:5433"), SocketAddrUse::TcpConnect)
                .await
        );
        assert!(
            !net.may_use(addr("10.2.0.1:5432"), SocketAddrUse::TcpConnect)
                .await
        );
        assert!(
            !net.may_use(addr("127.0.0.1:8083"), SocketAddrUse::TcpConnect)
                .await
        );
        // An address becomes connectable on the name's ports once a lookup of a granted name
        // answered it, and only then.
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        assert!(
            !net.may_use(SocketAddr::new(ip, 443), SocketAddrUse::TcpConnect)
                .await
        );
        net.lookup_started(3, "api.svc.example");
        net.lookup_answered(3, ip);
        net.lookup_ended(3);
        assert!(
            net.may_use(SocketAddr::new(ip, 443), SocketAddrUse::TcpConnect)
                .await
        );
        assert!(
            !net.may_use(SocketAddr::new(ip, 80), SocketAddrUse::TcpConnect)
                .await
        );
        // An answer to a handle that is not a granted lookup grants nothing.
        net.lookup_answered(4, "192.0.2.8".parse().unwrap());
        assert!(
            !net.may_use(addr("192.0.2.8:443"), SocketAddrUse::TcpConnect)
                .await
        );
    }

    #[tokio::test]
    async fn exact_names_are_resolved_by_the_host_for_a_connect() {
        let net = access("localhost:15432");
        assert!(
            net.may_use(addr("127.0.0.1:15432"), SocketAddrUse::TcpConnect)
                .await
        );
        assert!(
            !net.may_use(addr("127.0.0.1:15433"), SocketAddrUse::TcpConnect)
                .await
        );
    }

    #[tokio::test]
    async fn binds_listens_and_udp_are_refused_but_a_connect_s_implicit_bind() {
        let net = access("127.0.0.1:15432");
        assert!(net.may_use(addr("0.0.0.0:0"), SocketAddrUse::TcpBind).await);
        assert!(net.may_use(addr("[::]:0"), SocketAddrUse::TcpBind).await);
        for (a, usage) in [
            ("127.0.0.1:15432", SocketAddrUse::TcpBind),
            ("0.0.0.0:8080", SocketAddrUse::TcpBind),
            ("0.0.0.0:0", SocketAddrUse::TcpListen),
            ("127.0.0.1:15432", SocketAddrUse::TcpAccept),
            ("127.0.0.1:15432", SocketAddrUse::UdpBind),
            ("127.0.0.1:15432", SocketAddrUse::UdpSend),
            ("127.0.0.1:15432", SocketAddrUse::UdpReceive),
        ] {
            assert!(!net.may_use(addr(a), usage).await, "{a}");
        }
    }

    #[test]
    fn the_resolved_set_is_bounded() {
        let net = access("*.svc.example:443");
        net.lookup_started(1, "a.svc.example");
        for i in 0..(MAX_RESOLVED as u32 + 100) {
            net.lookup_answered(1, IpAddr::from(i.to_be_bytes()));
        }
        assert_eq!(net.state().resolved.len(), MAX_RESOLVED);
    }
}
