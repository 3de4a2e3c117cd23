//! Kafka Connect's client security settings, read as a Java client reads them and handed to
//! librdkafka in its own terms.
//!
//! Operators arrive with a Kafka Connect worker file: `security.protocol`, `sasl.mechanism`,
//! `sasl.jaas.config` in JAAS syntax, trust and key stores by location and type. librdkafka
//! names several of these differently and reads neither JAAS nor Java key stores, so
//! [`translate`] turns one client's settings into librdkafka's:
//! - `sasl.jaas.config` (the Plain, Scram and OAuthBearer login modules) becomes
//!   `sasl.username`/`sasl.password`, or librdkafka's OAUTHBEARER keys;
//! - a trust store (PEM file, PEM text, PKCS12 file) becomes `ssl.ca.location`/`ssl.ca.pem`;
//! - a key store (PEM file, PEM text, PKCS12 file) becomes `ssl.key.*`/`ssl.certificate.*` or
//!   librdkafka's own PKCS12 key store keys;
//! - `ssl.endpoint.identification.algorithm=` (empty: Java's "off") becomes `none`.
//!
//! Java-only tuning keys, whose absence changes nothing librdkafka does, are dropped with a
//! note for the log. Keys whose meaning cannot be carried out (a JKS store, Kerberos, Java
//! callback classes, TLS versions librdkafka cannot be limited to) are refused with what to do
//! instead. Every other key is librdkafka's own and passes unchanged; librdkafka rejects the
//! ones it does not know when the client is configured.
//!
//! Invariant: no message made here contains a secret (a password, JAAS text, key material):
//! messages name the key and, for files, the path.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::config::connector::Problem;

/// One client setting in Java's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The Java client key, prefixes removed (`ssl.truststore.location`).
    pub key: String,
    /// Its value.
    pub value: String,
    /// The key as the operator wrote it (`producer.ssl.truststore.location`), for messages.
    pub origin: String,
}

impl Setting {
    /// A setting whose key is written as it is meant.
    pub fn plain(key: &str, value: &str) -> Self {
        Self {
            key: key.to_owned(),
            value: value.to_owned(),
            origin: key.to_owned(),
        }
    }
}

/// One client's settings in librdkafka's terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Translated {
    /// librdkafka's settings, in a stable order.
    pub pairs: Vec<(String, String)>,
    /// Keys dropped because they only tune Java's implementation, or set to no effect; for the
    /// log.
    pub notes: Vec<String>,
    /// Who the client authenticates as (the SASL user, the OAUTHBEARER principal or client
    /// id), for messages about failed authentication.
    pub principal: Option<String>,
    /// The SASL mechanism, when the protocol authenticates with SASL.
    pub mechanism: Option<String>,
}

impl Translated {
    /// The value of librdkafka key `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The security protocols, in Kafka's spelling.
pub const PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/// Kafka's keys of a key store: this side's key and certificate chain.
pub const KEY_STORE_KEYS: &[&str] = &[
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
];

/// Kafka's keys of a trust store: the CAs the other side's certificate must chain to.
pub const TRUST_STORE_KEYS: &[&str] = &[
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
];

/// The SASL mechanisms librdkafka is built with here.
pub const MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// Java client keys that only tune the JVM's TLS or login implementation: nothing librdkafka
/// does would change if it read them.
const JAVA_ONLY: &[&str] = &[
    "ssl.protocol",
    "ssl.provider",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter",
];

/// Java client keys that name Java classes: there is no JVM to load them into.
const JAVA_CLASSES: &[&str] = &[
    "ssl.engine.factory.class",
    "sasl.client.callback.handler.class",
    "sasl.login.class",
];

/// The login callback handlers that fetch OAUTHBEARER tokens from a token endpoint (KIP-768),
/// which librdkafka does itself (`sasl.oauthbearer.method=oidc`).
const OIDC_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
];

const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
const OAUTH_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
const KERBEROS_MODULE: &str = "com.sun.security.auth.module.Krb5LoginModule";

/// The settings of one client, later ones overriding earlier ones with the same key, keyed by
/// Java key.
struct Settings<'a> {
    by_key: BTreeMap<&'a str, &'a Setting>,
}

impl<'a> Settings<'a> {
    fn new(settings: &'a [Setting]) -> Self {
        let mut by_key = BTreeMap::new();
        for s in settings {
            by_key.insert(s.key.as_str(), s);
        }
        Self { by_key }
    }

    /// The value of `key`, trimmed, if set to anything but blanks (where a blank value means
    /// something, [`Settings::raw`] reads it).
    fn get(&self, key: &str) -> Option<&'a str> {
        self.by_key
            .get(key)
            .map(|s| s.value.trim())
            .filter(|v| !v.is_empty())
    }

    /// The value of `key` as given (blank included).
    fn raw(&self, key: &str) -> Option<&'a str> {
        self.by_key.get(key).map(|s| s.value.as_str())
    }

    /// How the operator wrote `key`.
    fn origin(&self, key: &str) -> String {
        self.by_key
            .get(key)
            .map_or_else(|| key.to_owned(), |s| s.origin.clone())
    }

    /// How the operator would write `key`, which may be absent: as written if present, else
    /// with the prefix `near` (a key that is present) was written with
    /// (`listeners.https.ssl.key.password` beside `listeners.https.ssl.keystore.location`).
    fn origin_near(&self, key: &str, near: &str) -> String {
        if self.by_key.contains_key(key) {
            return self.origin(key);
        }
        match self.origin(near).strip_suffix(near) {
            Some(prefix) => format!("{prefix}{key}"),
            None => key.to_owned(),
        }
    }
}

/// Translate one client's settings (later entries override earlier ones with the same key)
/// into librdkafka's. Every problem is reported, each naming the key as the operator wrote it.
pub fn translate(settings: &[Setting]) -> Result<Translated, Vec<Problem>> {
    let s = Settings::new(settings);
    let mut out = Translated::default();
    let mut problems = Vec::new();
    let mut handled: Vec<&str> = Vec::new();
    let set = |out: &mut Translated, key: &str, value: &str| {
        out.pairs.retain(|(k, _)| k != key);
        out.pairs.push((key.to_owned(), value.to_owned()));
    };

    // The protocol decides which of the rest apply.
    handled.push("security.protocol");
    let protocol = match s.get("security.protocol") {
        None => "PLAINTEXT".to_owned(),
        Some(p) => {
            let upper = p.to_ascii_uppercase();
            if PROTOCOLS.contains(&upper.as_str()) {
                set(&mut out, "security.protocol", &upper.to_ascii_lowercase());
                upper
            } else {
                problems.push(Problem::new(
                    s.origin("security.protocol"),
                    format!("{p:?} is not one of {}", PROTOCOLS.join(", ")),
                ));
                "PLAINTEXT".to_owned()
            }
        }
    };
    let uses_sasl = protocol.starts_with("SASL_");
    let uses_tls = protocol.ends_with("SSL");

    for key in JAVA_ONLY {
        if s.by_key.contains_key(key) {
            handled.push(key);
            out.notes.push(format!(
                "{} only tunes a Java client's implementation; wasm-connect's clients (librdkafka with OpenSSL) have no such setting, and leaving it out changes nothing they do",
                s.origin(key)
            ));
        }
    }
    // A server's key that Kafka Connect worker files carry for the REST listener; Kafka's
    // clients ignore it.
    if s.by_key.contains_key("ssl.client.auth") {
        handled.push("ssl.client.auth");
        out.notes.push(format!(
            "{} is a server's setting, which Kafka clients ignore; for the REST API's HTTPS listener write listeners.https.ssl.client.auth",
            s.origin("ssl.client.auth")
        ));
    }
    for key in JAVA_CLASSES {
        if s.by_key.contains_key(key) {
            handled.push(key);
            problems.push(Problem::new(
                s.origin(key),
                "names a Java class, and wasm-connect has no JVM to load it into; remove it (see docs/configuration.md for the settings wasm-connect reads)",
            ));
        }
    }

    mechanism(&s, uses_sasl, &mut out, &mut problems, &mut handled);
    jaas(&s, uses_sasl, &mut out, &mut problems, &mut handled);
    trust_store(&s, uses_tls, &mut out, &mut problems, &mut handled);
    key_store(&s, &mut out, &mut problems, &mut handled);

    handled.push("ssl.endpoint.identification.algorithm");
    if let Some(raw) = s.raw("ssl.endpoint.identification.algorithm") {
        match raw.trim().to_ascii_lowercase().as_str() {
            // Java turns hostname verification off with an empty value; librdkafka says none.
            "" | "none" => set(&mut out, "ssl.endpoint.identification.algorithm", "none"),
            "https" => set(&mut out, "ssl.endpoint.identification.algorithm", "https"),
            other => problems.push(Problem::new(
                s.origin("ssl.endpoint.identification.algorithm"),
                format!("{other:?} is neither https (check the broker's host name against its certificate; the default) nor empty (do not)"),
            )),
        }
    }

    handled.push("ssl.enabled.protocols");
    if let Some(list) = s.get("ssl.enabled.protocols") {
        let versions: Vec<&str> = list.split(',').map(str::trim).collect();
        if !(versions.contains(&"TLSv1.2") && versions.contains(&"TLSv1.3")) {
            problems.push(Problem::new(
                s.origin("ssl.enabled.protocols"),
                format!("{list:?}: wasm-connect's clients negotiate TLS 1.2 or 1.3 and cannot be limited further; remove the key (Kafka's default is TLSv1.2,TLSv1.3)"),
            ));
        }
    }

    compression_level(&s, &mut out, &mut problems, &mut handled);

    // Everything else is librdkafka's own key (or one it rejects, naming it).
    for (key, setting) in &s.by_key {
        if !handled.contains(key) && !out.pairs.iter().any(|(k, _)| k == key) {
            out.pairs.push(((*key).to_owned(), setting.value.clone()));
        }
    }
    if !uses_sasl && s.by_key.keys().any(|k| k.starts_with("sasl.")) {
        out.notes.push(format!(
            "sasl.* keys are set, but {} is {protocol}: the client does not authenticate with SASL; set it to SASL_SSL (or SASL_PLAINTEXT) if the cluster expects SASL",
            s.origin("security.protocol")
        ));
    }
    if uses_tls && out.get("ssl.ca.location").is_none() && out.get("ssl.ca.pem").is_none() {
        // No trust store named: trust the system's CAs, as a JVM trusts its cacerts. OpenSSL
        // is linked into the binary, so its built-in default paths are not this system's;
        // librdkafka's probe finds the system bundle.
        set(&mut out, "ssl.ca.location", "probe");
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn mechanism<'a>(
    s: &Settings<'a>,
    uses_sasl: bool,
    out: &mut Translated,
    problems: &mut Vec<Problem>,
    handled: &mut Vec<&'a str>,
) {
    handled.extend(["sasl.mechanism", "sasl.mechanisms"]);
    let given = match (s.get("sasl.mechanism"), s.get("sasl.mechanisms")) {
        (Some(a), Some(b)) if !a.eq_ignore_ascii_case(b) => {
            problems.push(Problem::new(
                s.origin("sasl.mechanism"),
                format!(
                    "disagrees with {} ({a} against {b}); set one",
                    s.origin("sasl.mechanisms")
                ),
            ));
            return;
        }
        (Some(m), _) | (None, Some(m)) => Some(m.to_ascii_uppercase()),
        (None, None) => None,
    };
    let origin = if s.get("sasl.mechanism").is_some() {
        s.origin("sasl.mechanism")
    } else {
        s.origin("sasl.mechanisms")
    };
    match given {
        Some(m) if m == "GSSAPI" => problems.push(Problem::new(
            origin,
            "GSSAPI (Kerberos) is not supported by wasm-connect; use SCRAM-SHA-512, SCRAM-SHA-256, PLAIN over TLS, or OAUTHBEARER",
        )),
        Some(m) if MECHANISMS.contains(&m.as_str()) && uses_sasl => {
            out.pairs.push(("sasl.mechanism".to_owned(), m.clone()));
            out.mechanism = Some(m);
        }
        // A known mechanism without SASL: a note says it does nothing.
        Some(m) if MECHANISMS.contains(&m.as_str()) => {}
        Some(m) => problems.push(Problem::new(
            origin,
            format!("{m:?} is not one of {}", MECHANISMS.join(", ")),
        )),
        None if uses_sasl => problems.push(Problem::new(
            s.origin("sasl.mechanism"),
            format!(
                "is not set, and {} uses SASL: Kafka's default (GSSAPI, Kerberos) is not supported by wasm-connect; set one of {}",
                s.origin("security.protocol"),
                MECHANISMS.join(", ")
            ),
        )),
        None => {}
    }
}

/// A JAAS login configuration for one module: `Module flag key="value" ...;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jaas {
    /// The login module's class.
    pub module: String,
    /// `required`, `requisite`, `sufficient` or `optional`.
    pub flag: String,
    /// The module's options, in order.
    pub options: Vec<(String, String)>,
}

impl Jaas {
    /// The value of option `name`.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parse `sasl.jaas.config` as Kafka's clients do: one login module, its control flag, options
/// whose values are quoted (with backslash escapes) or bare words, and a closing `;`. Errors
/// never contain option values.
pub fn parse_jaas(text: &str) -> Result<Jaas, String> {
    let mut chars = text.chars().peekable();
    let skip_blanks = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
    };
    let word = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        let mut w = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || c == ';' || c == '=' || c == '"' {
                break;
            }
            w.push(c);
            chars.next();
        }
        w
    };
    skip_blanks(&mut chars);
    let module = word(&mut chars);
    if module.is_empty() {
        return Err("is empty or does not start with a login module class (as in `org.apache.kafka.common.security.scram.ScramLoginModule required username=\"...\" password=\"...\";`)".into());
    }
    skip_blanks(&mut chars);
    let flag = word(&mut chars);
    if !matches!(
        flag.to_ascii_lowercase().as_str(),
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err(format!(
            "{module} must be followed by a control flag (required, requisite, sufficient or optional)"
        ));
    }
    let mut options = Vec::new();
    loop {
        skip_blanks(&mut chars);
        match chars.peek() {
            None => return Err("must end with `;`".into()),
            Some(';') => {
                chars.next();
                break;
            }
            Some(_) => {}
        }
        let name = word(&mut chars);
        // Where the text goes wrong, said by the option before it: the broken word itself may
        // be the rest of a password whose quote was not escaped, and must not be shown.
        let after = match options.last() {
            Some((previous, _)) => format!("after option {previous}"),
            None => format!("after {module} {flag}"),
        };
        if name.is_empty() {
            return Err(format!(
                "{after}: an option has no name (options are name=\"value\"; a quote inside a value is written \\\")"
            ));
        }
        skip_blanks(&mut chars);
        if chars.next() != Some('=') {
            return Err(format!(
                "{after}: a word is not an option name=\"value\" (a quote inside a value is written \\\")"
            ));
        }
        skip_blanks(&mut chars);
        let value = if chars.peek() == Some(&'"') {
            chars.next();
            let mut v = String::new();
            loop {
                match chars.next() {
                    None => return Err(format!("the quoted value of option {name} is not closed")),
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        None => {
                            return Err(format!("the quoted value of option {name} is not closed"));
                        }
                        Some('n') => v.push('\n'),
                        Some('t') => v.push('\t'),
                        Some(c) => v.push(c),
                    },
                    Some(c) => v.push(c),
                }
            }
            v
        } else {
            let v = word(&mut chars);
            if v.is_empty() {
                return Err(format!("option {name} has no value"));
            }
            v
        };
        options.push((name, value));
    }
    skip_blanks(&mut chars);
    if chars.peek().is_some() {
        return Err("holds more than one login module; a client uses exactly one".into());
    }
    Ok(Jaas {
        module,
        flag,
        options,
    })
}

fn jaas<'a>(
    s: &Settings<'a>,
    uses_sasl: bool,
    out: &mut Translated,
    problems: &mut Vec<Problem>,
    handled: &mut Vec<&'a str>,
) {
    handled.extend(["sasl.jaas.config", "sasl.login.callback.handler.class"]);
    let handler = s.get("sasl.login.callback.handler.class");
    let oidc_handler = match handler {
        Some(h) if OIDC_HANDLERS.contains(&h) => true,
        Some(_) => {
            problems.push(Problem::new(
                s.origin("sasl.login.callback.handler.class"),
                format!(
                    "names a Java class wasm-connect cannot load; the one it understands is {} (OAUTHBEARER tokens from sasl.oauthbearer.token.endpoint.url), or leave it out",
                    OIDC_HANDLERS[0]
                ),
            ));
            false
        }
        None => false,
    };
    let Some(text) = s.get("sasl.jaas.config") else {
        return;
    };
    let origin = s.origin("sasl.jaas.config");
    let jaas = match parse_jaas(text) {
        Ok(j) => j,
        Err(e) => {
            problems.push(Problem::new(origin, e));
            return;
        }
    };
    if !uses_sasl {
        // Noted by `translate`: SASL keys without a SASL protocol.
        return;
    }
    for direct in ["sasl.username", "sasl.password", "sasl.oauthbearer.config"] {
        if s.by_key.contains_key(direct) {
            problems.push(Problem::new(
                s.origin(direct),
                format!("is set as well as {origin}; set one of them"),
            ));
        }
    }
    let mechanism = out.mechanism.clone().unwrap_or_default();
    let mut push = |k: &str, v: &str| out.pairs.push((k.to_owned(), v.to_owned()));
    match jaas.module.as_str() {
        PLAIN_MODULE | SCRAM_MODULE => {
            if mechanism == "OAUTHBEARER" {
                problems.push(Problem::new(
                    origin,
                    format!(
                        "{} gives a user name and password, but sasl.mechanism is OAUTHBEARER; use {OAUTH_MODULE}, or set the mechanism to PLAIN or SCRAM-SHA-*",
                        jaas.module
                    ),
                ));
                return;
            }
            if jaas.option("tokenauth").is_some_and(|v| v == "true") {
                problems.push(Problem::new(
                    origin,
                    "tokenauth=true (delegation tokens) is not supported by wasm-connect; authenticate as a SCRAM user",
                ));
                return;
            }
            let (Some(user), Some(password)) = (jaas.option("username"), jaas.option("password"))
            else {
                problems.push(Problem::new(
                    origin,
                    format!(
                        "{} needs username=\"...\" and password=\"...\"",
                        jaas.module
                    ),
                ));
                return;
            };
            push("sasl.username", user);
            push("sasl.password", password);
            out.principal = Some(user.to_owned());
        }
        OAUTH_MODULE => {
            if mechanism != "OAUTHBEARER" {
                problems.push(Problem::new(
                    origin,
                    format!("{OAUTH_MODULE} needs sasl.mechanism=OAUTHBEARER"),
                ));
                return;
            }
            oauthbearer(s, &jaas, oidc_handler, &origin, out, problems);
        }
        KERBEROS_MODULE => problems.push(Problem::new(
            origin,
            "Kerberos (Krb5LoginModule) is not supported by wasm-connect; use SCRAM-SHA-512, SCRAM-SHA-256, PLAIN over TLS, or OAUTHBEARER",
        )),
        other => problems.push(Problem::new(
            origin,
            format!(
                "login module {other} is not one wasm-connect reads; use {PLAIN_MODULE}, {SCRAM_MODULE} or {OAUTH_MODULE}"
            ),
        )),
    }
}

/// OAUTHBEARER: tokens from a token endpoint (KIP-768, when the JAAS options carry a client id
/// or the OIDC login handler is named), else Kafka's unsecured tokens for development.
fn oauthbearer(
    s: &Settings<'_>,
    jaas: &Jaas,
    oidc_handler: bool,
    origin: &str,
    out: &mut Translated,
    problems: &mut Vec<Problem>,
) {
    let push = |out: &mut Translated, k: &str, v: &str| {
        out.pairs.push((k.to_owned(), v.to_owned()));
    };
    let extensions: Vec<String> = jaas
        .options
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("extension_")
                .or_else(|| k.strip_prefix("unsecuredLoginExtension_"))
                .map(|name| format!("{name}={v}"))
        })
        .collect();
    if oidc_handler || jaas.option("clientId").is_some() {
        let (Some(id), Some(secret)) = (jaas.option("clientId"), jaas.option("clientSecret"))
        else {
            problems.push(Problem::new(
                origin,
                "tokens from a token endpoint need clientId=\"...\" and clientSecret=\"...\"",
            ));
            return;
        };
        if s.get("sasl.oauthbearer.token.endpoint.url").is_none() {
            problems.push(Problem::new(
                s.origin("sasl.oauthbearer.token.endpoint.url"),
                "is needed for OAUTHBEARER tokens from a token endpoint (the JAAS config names a client id)",
            ));
            return;
        }
        push(out, "sasl.oauthbearer.method", "oidc");
        push(out, "sasl.oauthbearer.client.id", id);
        push(out, "sasl.oauthbearer.client.secret", secret);
        if let Some(scope) = jaas.option("scope") {
            push(out, "sasl.oauthbearer.scope", scope);
        }
        if !extensions.is_empty() {
            push(out, "sasl.oauthbearer.extensions", &extensions.join(","));
        }
        out.principal = Some(id.to_owned());
        return;
    }
    // Unsecured tokens (Kafka's OAuthBearerUnsecuredLoginCallbackHandler): librdkafka makes
    // them from a principal, a scope, a lifetime and extensions; other claims it cannot carry.
    let claim_name = jaas
        .option("unsecuredLoginPrincipalClaimName")
        .unwrap_or("sub");
    let scope_name = jaas
        .option("unsecuredLoginScopeClaimName")
        .unwrap_or("scope");
    let Some(principal) = jaas.option(&format!("unsecuredLoginStringClaim_{claim_name}")) else {
        problems.push(Problem::new(
            origin,
            format!(
                "{OAUTH_MODULE} needs unsecuredLoginStringClaim_{claim_name}=\"<principal>\" (unsecured tokens) or clientId and clientSecret (tokens from sasl.oauthbearer.token.endpoint.url)"
            ),
        ));
        return;
    };
    let mut config = vec![format!("principal={principal}")];
    if claim_name != "sub" {
        config.push(format!("principalClaimName={claim_name}"));
    }
    for (k, v) in &jaas.options {
        if k == &format!("unsecuredLoginStringClaim_{claim_name}")
            || k.starts_with("unsecuredLoginExtension_")
            || k == "unsecuredLoginPrincipalClaimName"
            || k == "unsecuredLoginScopeClaimName"
        {
            continue;
        }
        if k == &format!("unsecuredLoginListClaim_{scope_name}") {
            // Java's list claims start with their own separator: ",a,b".
            let mut chars = v.chars();
            let scopes: Vec<&str> = match chars.next() {
                Some(sep) => chars
                    .as_str()
                    .split(sep)
                    .filter(|x| !x.is_empty())
                    .collect(),
                None => Vec::new(),
            };
            config.push(format!("scope={}", scopes.join(",")));
            if scope_name != "scope" {
                config.push(format!("scopeClaimName={scope_name}"));
            }
        } else if k == "unsecuredLoginLifetimeSeconds" {
            config.push(format!("lifeSeconds={v}"));
        } else if k.starts_with("unsecuredLogin") {
            problems.push(Problem::new(
                origin,
                format!("option {k}: unsecured tokens made by wasm-connect's clients carry only a principal, a scope list, a lifetime and extensions; remove it"),
            ));
        }
    }
    for e in &extensions {
        config.push(format!("extension_{e}"));
    }
    push(out, "enable.sasl.oauthbearer.unsecure.jwt", "true");
    push(out, "sasl.oauthbearer.config", &config.join(" "));
    out.principal = Some(principal.to_owned());
}

/// What a store file holds, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFormat {
    /// PEM text.
    Pem,
    /// PKCS#12 (DER).
    Pkcs12,
    /// A Java KeyStore (JKS or JCEKS).
    Jks,
}

impl StoreFormat {
    /// What `bytes` look like, if any store format.
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        match bytes {
            [0xFE, 0xED, 0xFE, 0xED, ..] | [0xCE, 0xCE, 0xCE, 0xCE, ..] => Some(Self::Jks),
            [0x30, ..] => Some(Self::Pkcs12),
            _ if contains(bytes, b"-----BEGIN ") => Some(Self::Pem),
            _ => None,
        }
    }

    /// The format a `ssl.*store.type` value names (`Err` for JKS and unknown types, with the
    /// text to say).
    fn named(raw: &str) -> Result<Self, ()> {
        match raw.trim().to_ascii_uppercase().as_str() {
            "PEM" => Ok(Self::Pem),
            "PKCS12" => Ok(Self::Pkcs12),
            "JKS" | "JCEKS" => Ok(Self::Jks),
            _ => Err(()),
        }
    }
}

/// The private key in PEM text `pem` (the first key block; certificates beside it are
/// skipped), decrypted with `password` if it is encrypted. An encrypted key without a password
/// fails (OpenSSL would otherwise ask for one on the terminal, and the worker would wait).
pub fn read_pem_key(
    pem: &[u8],
    password: Option<&str>,
) -> Result<openssl::pkey::PKey<openssl::pkey::Private>, openssl::error::ErrorStack> {
    match password {
        Some(p) => openssl::pkey::PKey::private_key_from_pem_passphrase(pem, p.as_bytes()),
        None => openssl::pkey::PKey::private_key_from_pem_callback(pem, |_| Ok(0)),
    }
}

/// PEM text as OpenSSL reads it: each block's base64 body on lines of 64 characters. Java's
/// PEM reader takes a block with its lines joined by spaces (a `.properties` value continued
/// over lines with `\`, whose line breaks the file format removes), and so do we.
fn normalize_pem(text: &str) -> String {
    const BEGIN: &str = "-----BEGIN ";
    const DASHES: &str = "-----";
    let mut out = String::with_capacity(text.len() + text.len() / 64);
    let mut rest = text;
    while let Some(start) = rest.find(BEGIN) {
        let after_begin = &rest[start + BEGIN.len()..];
        let Some(label_end) = after_begin.find(DASHES) else {
            break;
        };
        let label = &after_begin[..label_end];
        let body_and_more = &after_begin[label_end + DASHES.len()..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_and_more.find(&end_marker) else {
            break;
        };
        let body: String = body_and_more[..body_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        // Encrypted traditional keys carry headers (`Proc-Type: ...`): leave those as written.
        if body.contains(':') {
            out.push_str(body_and_more[..body_end].trim());
            out.push('\n');
        } else {
            for line in body.as_bytes().chunks(64) {
                out.push_str(std::str::from_utf8(line).unwrap_or_default());
                out.push('\n');
            }
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_and_more[body_end + end_marker.len()..];
    }
    if out.is_empty() { text.to_owned() } else { out }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The message for a JKS store named by `location_key`.
pub fn jks_message(location_key: &str, type_key: &str, path: &str) -> String {
    let target = std::path::Path::new(path).with_extension("p12");
    format!(
        "{path} is a Java KeyStore (JKS), which wasm-connect cannot read (its clients use OpenSSL, not a JVM). Convert it to PKCS12 with the JDK's keytool: `keytool -importkeystore -srckeystore {path} -srcstoretype JKS -destkeystore {} -deststoretype PKCS12`, then set {location_key} to the new file and {type_key}=PKCS12",
        target.display()
    )
}

/// The bytes of the store file `path` named by `location_key`, and what they hold; checks the
/// declared type (`type_key`) against the content.
fn read_store(
    s: &Settings<'_>,
    location_key: &str,
    type_key: &str,
    problems: &mut Vec<Problem>,
) -> Option<(Vec<u8>, StoreFormat)> {
    let path = s.get(location_key)?;
    let declared = match s.get(type_key).map(StoreFormat::named) {
        None => None,
        Some(Ok(StoreFormat::Jks)) => {
            problems.push(Problem::new(
                s.origin(type_key),
                jks_message(&s.origin(location_key), &s.origin(type_key), path),
            ));
            return None;
        }
        Some(Ok(f)) => Some(f),
        Some(Err(())) => {
            problems.push(Problem::new(
                s.origin(type_key),
                format!(
                    "{:?} is not a store type wasm-connect reads: PEM or PKCS12 (a JKS store must be converted to PKCS12)",
                    s.get(type_key).unwrap_or_default()
                ),
            ));
            return None;
        }
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            problems.push(Problem::new(
                s.origin(location_key),
                format!("cannot read {path}: {e}"),
            ));
            return None;
        }
    };
    let found = StoreFormat::sniff(&bytes);
    match (declared, found) {
        (_, Some(StoreFormat::Jks)) => {
            problems.push(Problem::new(
                s.origin(location_key),
                jks_message(&s.origin(location_key), &s.origin(type_key), path),
            ));
            None
        }
        (_, None) => {
            problems.push(Problem::new(
                s.origin(location_key),
                format!("{path} is neither PEM text nor a PKCS12 file"),
            ));
            None
        }
        (Some(d), Some(f)) if d != f => {
            problems.push(Problem::new(
                s.origin(type_key),
                format!("says {d:?}, but {path} is a {f:?} file; correct one of them"),
            ));
            None
        }
        (_, Some(f)) => Some((bytes, f)),
    }
}

/// Open a PKCS12 file with `password`: its certificates (the keyed one first) as PEM text, and
/// whether it holds a private key.
fn open_pkcs12(bytes: &[u8], password: &str) -> Result<(String, bool), String> {
    let p12 = openssl::pkcs12::Pkcs12::from_der(bytes)
        .map_err(|e| format!("is not a valid PKCS12 file ({e})"))?;
    let parsed = p12.parse2(password).map_err(|_| {
        "cannot be opened with the password given (wrong password, or a store made with algorithms OpenSSL 3 no longer enables, such as RC2 from Java 8's keytool: export it again with a current keytool)".to_owned()
    })?;
    let mut pem = String::new();
    let certs = parsed
        .cert
        .into_iter()
        .chain(parsed.ca.into_iter().flatten());
    for cert in certs {
        let text = cert
            .to_pem()
            .map_err(|e| format!("holds a certificate that cannot be written as PEM ({e})"))?;
        pem.push_str(&String::from_utf8_lossy(&text));
    }
    Ok((pem, parsed.pkey.is_some()))
}

fn trust_store<'a>(
    s: &Settings<'a>,
    uses_tls: bool,
    out: &mut Translated,
    problems: &mut Vec<Problem>,
    handled: &mut Vec<&'a str>,
) {
    let keys = TRUST_STORE_KEYS;
    handled.extend(keys);
    if !keys.iter().any(|k| s.by_key.contains_key(k)) {
        return;
    }
    if !uses_tls {
        out.notes.push(format!(
            "ssl.truststore.* keys are set, but {} is not SSL or SASL_SSL: the client does not use TLS",
            s.origin("security.protocol")
        ));
        return;
    }
    for direct in ["ssl.ca.location", "ssl.ca.pem"] {
        if s.by_key.contains_key(direct) {
            problems.push(Problem::new(
                s.origin(direct),
                "is set as well as ssl.truststore.*; set one of them",
            ));
            return;
        }
    }
    if let Some(pem) = s.get("ssl.truststore.certificates") {
        if s.get("ssl.truststore.location").is_some() {
            problems.push(Problem::new(
                s.origin("ssl.truststore.certificates"),
                format!(
                    "is set as well as {}; set one of them",
                    s.origin("ssl.truststore.location")
                ),
            ));
        } else if !pem.contains("-----BEGIN CERTIFICATE-----") {
            problems.push(Problem::new(
                s.origin("ssl.truststore.certificates"),
                "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            ));
        } else {
            out.pairs
                .push(("ssl.ca.pem".to_owned(), normalize_pem(pem)));
        }
        return;
    }
    let Some((bytes, format)) = read_store(
        s,
        "ssl.truststore.location",
        "ssl.truststore.type",
        problems,
    ) else {
        return;
    };
    let path = s.get("ssl.truststore.location").unwrap_or_default();
    match format {
        StoreFormat::Pem => {
            if !contains(&bytes, b"-----BEGIN CERTIFICATE-----") {
                problems.push(Problem::new(
                    s.origin("ssl.truststore.location"),
                    format!("{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
                ));
                return;
            }
            out.pairs
                .push(("ssl.ca.location".to_owned(), path.to_owned()));
        }
        StoreFormat::Pkcs12 => {
            let password = s.raw("ssl.truststore.password").unwrap_or("");
            match open_pkcs12(&bytes, password) {
                Ok((pem, _)) if pem.is_empty() => problems.push(Problem::new(
                    s.origin("ssl.truststore.location"),
                    format!("{path} holds no certificates"),
                )),
                Ok((pem, _)) => out.pairs.push(("ssl.ca.pem".to_owned(), pem)),
                Err(e) => problems.push(Problem::new(
                    s.origin("ssl.truststore.location"),
                    format!("{path} {e}; check {}", s.origin("ssl.truststore.password")),
                )),
            }
        }
        StoreFormat::Jks => {}
    }
}

fn key_store<'a>(
    s: &Settings<'a>,
    out: &mut Translated,
    problems: &mut Vec<Problem>,
    handled: &mut Vec<&'a str>,
) {
    handled.extend(KEY_STORE_KEYS);
    let mut push = |k: &str, v: &str| out.pairs.push((k.to_owned(), v.to_owned()));
    let key_password = s.raw("ssl.key.password");
    match (
        s.get("ssl.keystore.key"),
        s.get("ssl.keystore.certificate.chain"),
    ) {
        (Some(key), Some(chain)) => {
            if s.get("ssl.keystore.location").is_some() {
                problems.push(Problem::new(
                    s.origin("ssl.keystore.key"),
                    format!(
                        "is set as well as {}; set one of them",
                        s.origin("ssl.keystore.location")
                    ),
                ));
                return;
            }
            let (key, chain) = (normalize_pem(key), normalize_pem(chain));
            if read_pem_key(key.as_bytes(), key_password).is_err() {
                problems.push(Problem::new(
                    s.origin("ssl.keystore.key"),
                    format!(
                        "holds a private key that cannot be read (PEM; an encrypted key needs {}, and it must be right)",
                        s.origin_near("ssl.key.password", "ssl.keystore.key")
                    ),
                ));
                return;
            }
            push("ssl.key.pem", &key);
            push("ssl.certificate.pem", &chain);
            if let Some(p) = key_password {
                push("ssl.key.password", p);
            }
            return;
        }
        (Some(_), None) | (None, Some(_)) => {
            problems.push(Problem::new(
                s.origin("ssl.keystore.key"),
                format!(
                    "{} and {} go together (the private key and its certificate chain, PEM)",
                    s.origin("ssl.keystore.key"),
                    s.origin("ssl.keystore.certificate.chain")
                ),
            ));
            return;
        }
        (None, None) => {}
    }
    let Some((bytes, format)) =
        read_store(s, "ssl.keystore.location", "ssl.keystore.type", problems)
    else {
        if let Some(p) = key_password {
            // With librdkafka's own ssl.key.location.
            push("ssl.key.password", p);
        }
        return;
    };
    let path = s.get("ssl.keystore.location").unwrap_or_default();
    match format {
        StoreFormat::Pem => {
            if s.by_key.contains_key("ssl.keystore.password") {
                // As Kafka's clients: a PEM key store has a key password only.
                problems.push(Problem::new(
                    s.origin("ssl.keystore.password"),
                    format!(
                        "does not apply to a PEM key store; an encrypted key's password is {}",
                        s.origin("ssl.key.password")
                    ),
                ));
                return;
            }
            if !contains(&bytes, b"PRIVATE KEY-----")
                || !contains(&bytes, b"-----BEGIN CERTIFICATE-----")
            {
                problems.push(Problem::new(
                    s.origin("ssl.keystore.location"),
                    format!("{path} must hold the private key and its certificate chain (PEM)"),
                ));
                return;
            }
            if read_pem_key(&bytes, key_password).is_err() {
                problems.push(Problem::new(
                    s.origin("ssl.keystore.location"),
                    format!(
                        "{path} holds a private key that cannot be read (an encrypted key needs {}, and it must be right)",
                        s.origin_near("ssl.key.password", "ssl.keystore.location")
                    ),
                ));
                return;
            }
            push("ssl.key.location", path);
            push("ssl.certificate.location", path);
            if let Some(p) = key_password {
                push("ssl.key.password", p);
            }
        }
        StoreFormat::Pkcs12 => {
            let password = s.raw("ssl.keystore.password").unwrap_or("");
            if key_password.is_some_and(|k| k != password) {
                problems.push(Problem::new(
                    s.origin("ssl.key.password"),
                    format!(
                        "differs from {}: wasm-connect opens a PKCS12 key store and its key with one password; export the store with the two the same",
                        s.origin("ssl.keystore.password")
                    ),
                ));
                return;
            }
            match open_pkcs12(&bytes, password) {
                Ok((_, false)) => problems.push(Problem::new(
                    s.origin("ssl.keystore.location"),
                    format!("{path} holds no private key (a key store holds this client's key and certificate)"),
                )),
                Ok((_, true)) => {
                    push("ssl.keystore.location", path);
                    push("ssl.keystore.password", password);
                }
                Err(e) => problems.push(Problem::new(
                    s.origin("ssl.keystore.location"),
                    format!("{path} {e}; check {}", s.origin("ssl.keystore.password")),
                )),
            }
        }
        StoreFormat::Jks => {}
    }
}

/// Kafka's per-codec levels (KIP-390) to librdkafka's one `compression.level`.
fn compression_level<'a>(
    s: &Settings<'a>,
    out: &mut Translated,
    problems: &mut Vec<Problem>,
    handled: &mut Vec<&'a str>,
) {
    let codec = s
        .get("compression.type")
        .or_else(|| s.get("compression.codec"))
        .map(str::to_ascii_lowercase);
    for name in ["gzip", "lz4", "zstd"] {
        let key = match name {
            "gzip" => "compression.gzip.level",
            "lz4" => "compression.lz4.level",
            _ => "compression.zstd.level",
        };
        let Some(level) = s.get(key) else {
            continue;
        };
        handled.push(key);
        if codec.as_deref() != Some(name) {
            out.notes.push(format!(
                "{} has no effect: compression.type is not {name}",
                s.origin(key)
            ));
            continue;
        }
        if level.parse::<i32>().is_err() {
            problems.push(Problem::new(
                s.origin(key),
                format!("{level:?} is not an integer"),
            ));
            continue;
        }
        out.pairs
            .push(("compression.level".to_owned(), level.to_owned()));
    }
}

/// Whether librdkafka key `key` holds a secret, whose value no message may show.
pub fn is_secret(key: &str) -> bool {
    key.contains("password")
        || key.contains("secret")
        || key.contains("jaas")
        || key == "ssl.key.pem"
        || key == "ssl.keystore.key"
        || key == "sasl.oauthbearer.config"
        || key == "sasl.oauthbearer.assertion.private.key.pem"
}

/// A client's failure to authenticate or to set up TLS, as librdkafka reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The broker (or the token endpoint) refused the credentials.
    Authentication(String),
    /// The TLS handshake failed (certificate not trusted, host name mismatch, client
    /// certificate refused).
    Tls(String),
}

impl Failure {
    /// What went wrong, for statuses and the log: `principal` and `mechanism` say who tried.
    pub fn describe(&self, principal: Option<&str>, mechanism: Option<&str>) -> String {
        match self {
            Failure::Authentication(reason) => {
                let who = match (principal, mechanism) {
                    (Some(p), Some(m)) => format!(" for user {p} ({m})"),
                    (Some(p), None) => format!(" for user {p}"),
                    (None, Some(m)) => format!(" ({m})"),
                    (None, None) => String::new(),
                };
                let check = if mechanism == Some("OAUTHBEARER") {
                    "check sasl.jaas.config (clientId and clientSecret, or the unsecured token's claims) and sasl.oauthbearer.token.endpoint.url"
                } else {
                    "check sasl.jaas.config (user name and password) and sasl.mechanism"
                };
                format!("authentication failed{who}: {reason}; {check}")
            }
            Failure::Tls(reason) => {
                let lower = reason.to_ascii_lowercase();
                if lower.contains("certificate verify failed")
                    || lower.contains("could not be verified")
                {
                    if lower.contains("mismatch") {
                        format!(
                            "certificate does not match the broker's host name: {reason}; connect by a name the certificate holds, or check ssl.endpoint.identification.algorithm"
                        )
                    } else {
                        // librdkafka's own hint names its keys and a system package, neither
                        // of which applies to a trust store given as Kafka's keys.
                        let reason = reason
                            .replace(", verify that ssl.ca.location is correctly configured or root CA certificates are installed (install ca-certificates package)", "")
                            .replace(", verify that ssl.ca.location is correctly configured or root CA certificates are installed", "");
                        format!(
                            "certificate not trusted: {reason}; check ssl.truststore.location (it must hold the CA that signed the broker's certificate) and that bootstrap.servers names the brokers by a host name their certificates hold"
                        )
                    }
                } else if lower.contains("alert")
                    && (lower.contains("certificate") || lower.contains("unknown ca"))
                {
                    format!(
                        "the broker refused this client's certificate: {reason}; check ssl.keystore.location (its certificate must be signed by a CA the broker trusts)"
                    )
                } else {
                    format!(
                        "TLS handshake failed: {reason}; check security.protocol and the ssl.* settings"
                    )
                }
            }
        }
    }
}

/// What librdkafka reported, if it is a failure to authenticate or to set up TLS.
pub fn classify(code: Option<rdkafka::types::RDKafkaErrorCode>, reason: &str) -> Option<Failure> {
    use rdkafka::types::RDKafkaErrorCode as Code;
    match code {
        Some(Code::Authentication | Code::SaslAuthenticationFailed) => {
            Some(Failure::Authentication(reason.to_owned()))
        }
        Some(Code::SSL) => Some(Failure::Tls(reason.to_owned())),
        _ => None,
    }
}

/// A failure that librdkafka reports only in a log line: a TLS alert from the broker (under
/// TLS 1.3 a refused client certificate arrives after the handshake, and its error is a mere
/// transport failure).
pub fn classify_log(message: &str) -> Option<Failure> {
    let lower = message.to_ascii_lowercase();
    let alert =
        lower.contains("alert") && (lower.contains("certificate") || lower.contains("unknown ca"));
    alert.then(|| Failure::Tls(message.to_owned()))
}

/// The last failure of a client to authenticate or to set up TLS, kept until a request
/// succeeds again (librdkafka reports such a failure once, then holds back its repeats).
///
/// Owned by the client whose failures it keeps (the worker's shared producer, through which
/// the health probe asks: see `health.rs`), never process-wide, so two workers in one process
/// never see each other's failures.
#[derive(Debug, Default)]
pub struct LastFailure(Mutex<Option<Failure>>);

impl LastFailure {
    /// Keep `failure` (see [`classify_log`]).
    pub fn record(&self, failure: Failure) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
    }

    /// Keep what the client reported, if it is a failure to authenticate or to set up TLS.
    pub fn observe(&self, code: Option<rdkafka::types::RDKafkaErrorCode>, reason: &str) {
        if let Some(failure) = classify(code, reason) {
            self.record(failure);
        }
    }

    /// The failure kept since the last [`Self::clear`], if any.
    pub fn get(&self) -> Option<Failure> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Forget the failure: a request succeeded.
    pub fn clear(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(items: &[(&str, &str)]) -> Vec<Setting> {
        items.iter().map(|(k, v)| Setting::plain(k, v)).collect()
    }

    fn problems(items: &[(&str, &str)]) -> Vec<String> {
        translate(&settings(items))
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn jaas_is_read_as_kafka_writes_it() {
        let j = parse_jaas(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p\"w;x" ;"#,
        )
        .unwrap();
        assert_eq!(j.module, SCRAM_MODULE);
        assert_eq!(j.flag, "required");
        assert_eq!(j.option("username"), Some("alice"));
        assert_eq!(j.option("password"), Some("p\"w;x"));
        let bare = parse_jaas("m.Module optional a=b c = \"d\";").unwrap();
        assert_eq!(
            bare.options,
            vec![
                ("a".to_owned(), "b".to_owned()),
                ("c".to_owned(), "d".to_owned())
            ]
        );
        for (bad, says) in [
            ("", "login module"),
            ("m.Module", "control flag"),
            ("m.Module required a=\"secret", "not closed"),
            ("m.Module required a=\"secret\"", "must end with"),
            (
                "m.Module required a;",
                "after m.Module required: a word is not an option",
            ),
            (
                r#"m.Module required username="u" password="p4ss"w0rd-XYZ";"#,
                "after option password: a word is not an option",
            ),
            ("m.Module required; n.Other required;", "more than one"),
        ] {
            let e = parse_jaas(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(
                !e.contains("secret") && !e.contains("w0rd"),
                "a value leaked: {e}"
            );
        }
    }

    #[test]
    fn pem_joined_by_spaces_is_rewrapped_as_openssl_reads_it() {
        let body = "QUJD".repeat(20);
        let joined = format!(
            "-----BEGIN CERTIFICATE----- {} {} -----END CERTIFICATE-----",
            &body[..40],
            &body[40..]
        );
        let wrapped = normalize_pem(&joined);
        assert_eq!(
            wrapped,
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n{}\n-----END CERTIFICATE-----\n",
                &body[..64],
                &body[64..]
            )
        );
        assert_eq!(
            normalize_pem(&wrapped),
            wrapped,
            "well-formed PEM stays as it is"
        );
        assert_eq!(normalize_pem("not pem"), "not pem");
    }

    #[test]
    fn an_encrypted_pem_key_needs_its_password() {
        let key = openssl::pkey::PKey::from_ec_key(
            openssl::ec::EcKey::generate(
                &openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1)
                    .unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let pem = key
            .private_key_to_pem_pkcs8_passphrase(openssl::symm::Cipher::aes_256_cbc(), b"key-pw")
            .unwrap();
        assert!(read_pem_key(&pem, None).is_err());
        assert!(read_pem_key(&pem, Some("wrong")).is_err());
        assert!(read_pem_key(&pem, Some("key-pw")).is_ok());
        let text = String::from_utf8(pem).unwrap();
        let chain = "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n";
        let said = problems(&[
            ("security.protocol", "SSL"),
            ("ssl.keystore.key", &text),
            ("ssl.keystore.certificate.chain", chain),
        ]);
        assert!(
            said.iter()
                .any(|p| p.contains("ssl.keystore.key") && p.contains("ssl.key.password")),
            "{said:?}"
        );
        assert!(!said.iter().any(|p| p.contains("key-pw")));
    }

    #[test]
    fn a_broker_refusing_the_client_certificate_is_told_from_its_alert() {
        let line = "ssl://localhost:19095/bootstrap: SSL handshake failed: ssl/tls alert bad certificate: SSL alert number 42 (after 0ms in state APIVERSION_QUERY)";
        let failure = classify_log(line).unwrap();
        assert!(
            failure
                .describe(None, None)
                .starts_with("the broker refused this client's certificate: "),
            "{failure:?}"
        );
        assert_eq!(classify_log("Disconnected (after 3ms in state UP)"), None);
    }

    #[test]
    fn scram_over_tls_becomes_librdkafka_s_keys() {
        let t = translate(&settings(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";"#,
            ),
            ("ssl.protocol", "TLSv1.3"),
            ("ssl.endpoint.identification.algorithm", ""),
            ("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"),
            ("linger.ms", "5"),
        ]))
        .unwrap();
        assert_eq!(t.get("security.protocol"), Some("sasl_ssl"));
        assert_eq!(t.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(t.get("sasl.username"), Some("alice"));
        assert_eq!(t.get("sasl.password"), Some("alice-secret"));
        assert_eq!(t.get("ssl.endpoint.identification.algorithm"), Some("none"));
        assert_eq!(t.get("ssl.ca.location"), Some("probe"));
        assert_eq!(t.get("linger.ms"), Some("5"));
        for gone in ["sasl.jaas.config", "ssl.protocol", "ssl.enabled.protocols"] {
            assert_eq!(t.get(gone), None, "{gone}");
        }
        assert_eq!(t.principal.as_deref(), Some("alice"));
        assert!(
            t.notes
                .iter()
                .any(|n| n.starts_with("ssl.protocol only tunes"))
        );
    }

    #[test]
    fn what_cannot_be_carried_out_is_refused_with_what_to_do() {
        let p = problems(&[("security.protocol", "SASL_SSL")]);
        assert!(
            p[0].starts_with("sasl.mechanism: is not set") && p[0].contains("GSSAPI"),
            "{p:?}"
        );
        let p = problems(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "GSSAPI"),
        ]);
        assert!(p[0].contains("Kerberos"), "{p:?}");
        let p = problems(&[("security.protocol", "TLS")]);
        assert!(
            p[0].contains("PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
            "{p:?}"
        );
        let p = problems(&[
            ("security.protocol", "SSL"),
            ("ssl.enabled.protocols", "TLSv1.3"),
        ]);
        assert!(p[0].starts_with("ssl.enabled.protocols: "), "{p:?}");
        let p = problems(&[("ssl.engine.factory.class", "com.example.Engine")]);
        assert!(p[0].contains("Java class"), "{p:?}");
        let p = problems(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\";",
            ),
        ]);
        assert!(
            p[0].contains("needs username") && !p[0].contains("\"u\""),
            "{p:?}"
        );
        let p = problems(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "u"),
            (
                "sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" password=\"hunter2\";",
            ),
        ]);
        assert!(p[0].starts_with("sasl.username: is set as well"), "{p:?}");
        assert!(p.iter().all(|m| !m.contains("hunter2")), "{p:?}");
    }

    #[test]
    fn oauthbearer_has_an_unsecured_and_a_token_endpoint_form() {
        let base = [
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "OAUTHBEARER"),
        ];
        let mut unsecured = base.to_vec();
        unsecured.push((
            "sasl.jaas.config",
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin" unsecuredLoginListClaim_scope=",read,write" unsecuredLoginExtension_traceId="123";"#,
        ));
        let t = translate(&settings(&unsecured)).unwrap();
        assert_eq!(t.get("enable.sasl.oauthbearer.unsecure.jwt"), Some("true"));
        assert_eq!(
            t.get("sasl.oauthbearer.config"),
            Some("principal=admin scope=read,write extension_traceId=123")
        );
        let mut oidc = base.to_vec();
        oidc.extend([
            ("sasl.login.callback.handler.class", OIDC_HANDLERS[0]),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp.example/token"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="connect" clientSecret="s3" scope="kafka";"#,
            ),
        ]);
        let t = translate(&settings(&oidc)).unwrap();
        assert_eq!(t.get("sasl.oauthbearer.method"), Some("oidc"));
        assert_eq!(t.get("sasl.oauthbearer.client.id"), Some("connect"));
        assert_eq!(t.get("sasl.oauthbearer.client.secret"), Some("s3"));
        assert_eq!(t.get("sasl.oauthbearer.scope"), Some("kafka"));
        assert_eq!(
            t.get("sasl.oauthbearer.token.endpoint.url"),
            Some("https://idp.example/token")
        );
        assert_eq!(t.get("sasl.login.callback.handler.class"), None);
    }

    #[test]
    fn stores_are_read_by_content_and_jks_says_how_to_convert() {
        let dir = tempfile::tempdir().unwrap();
        let jks = dir.path().join("client.truststore.jks");
        std::fs::write(&jks, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let jks = jks.to_str().unwrap();
        let p = problems(&[
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", jks),
            ("ssl.truststore.password", "changeit"),
        ]);
        assert!(
            p[0].starts_with("ssl.truststore.location: ")
                && p[0].contains("Java KeyStore (JKS)")
                && p[0].contains("keytool -importkeystore")
                && p[0].contains("ssl.truststore.type=PKCS12"),
            "{p:?}"
        );
        let p = problems(&[
            ("security.protocol", "SSL"),
            ("ssl.keystore.type", "JKS"),
            ("ssl.keystore.location", jks),
        ]);
        assert!(
            p[0].starts_with("ssl.keystore.type: ") && p[0].contains("keytool"),
            "{p:?}"
        );
        let pem = dir.path().join("ca.pem");
        std::fs::write(
            &pem,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let pem = pem.to_str().unwrap();
        let t = translate(&settings(&[
            ("security.protocol", "SSL"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", pem),
        ]))
        .unwrap();
        assert_eq!(t.get("ssl.ca.location"), Some(pem));
        let p = problems(&[
            ("security.protocol", "SSL"),
            ("ssl.truststore.type", "PKCS12"),
            ("ssl.truststore.location", pem),
        ]);
        assert!(
            p[0].starts_with("ssl.truststore.type: says Pkcs12"),
            "{p:?}"
        );
        let p = problems(&[
            ("security.protocol", "SSL"),
            ("ssl.truststore.location", "/nonexistent/ca.pem"),
        ]);
        assert!(p[0].contains("cannot read /nonexistent/ca.pem"), "{p:?}");
    }

    #[test]
    fn failures_say_what_they_are() {
        let auth = Failure::Authentication("SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512".into());
        assert!(
            auth.describe(Some("alice"), Some("SCRAM-SHA-512"))
                .starts_with("authentication failed for user alice (SCRAM-SHA-512): ")
        );
        let tls = Failure::Tls("SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified".into());
        assert!(
            tls.describe(None, None)
                .starts_with("certificate not trusted: ")
        );
        assert!(
            is_secret("sasl.password")
                && is_secret("ssl.keystore.password")
                && !is_secret("linger.ms")
        );
    }
}
