//! HTTPS for the REST API, configured with Kafka Connect's keys: `listeners.https.ssl.*` or,
//! when no key has that prefix, the worker's own key and trust store keys (Connect's "all or
//! nothing" rule for listener prefixes; client authentication, protocols and suites then keep
//! their defaults). Key and trust stores are read the way the Kafka clients read them (PEM
//! or PKCS12; JKS refused with the keytool command), then handed to rustls.
//!
//! Invariant: no message made here contains a secret (a password or key material); messages
//! name the key and, for files, the path.

use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::config::connector::Problem;
use crate::kafka::security::{self, KEY_STORE_KEYS, Setting, TRUST_STORE_KEYS};

/// The prefix of the HTTPS listener's keys (named in `config/`, whose unknown-key check knows it).
pub const PREFIX: &str = crate::config::keys::HTTPS_LISTENER_PREFIX;

/// Whether `key` is one of a key or trust store's (read as the Kafka clients read them).
fn is_store_key(key: &str) -> bool {
    KEY_STORE_KEYS.contains(&key) || TRUST_STORE_KEYS.contains(&key)
}

/// Keys that only tune a JVM's TLS implementation, or that only mean something for a client
/// (`ssl.endpoint.identification.algorithm`): a rustls server has nothing to set from them.
const IGNORED: &[&str] = &[
    "ssl.protocol",
    "ssl.provider",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.endpoint.identification.algorithm",
];

/// Whether the listener asks clients for a certificate (`ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate (Connect's default).
    None,
    /// A client may present one; if it does, it must be signed by the trust store's CAs.
    Requested,
    /// Every client must present one signed by the trust store's CAs (mutual TLS).
    Required,
}

/// The HTTPS listener's TLS settings, read once.
#[derive(Clone)]
pub struct Tls {
    /// What rustls serves with.
    pub config: Arc<rustls::ServerConfig>,
    /// Whether clients must present certificates.
    pub client_auth: ClientAuth,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("client_auth", &self.client_auth)
            .finish_non_exhaustive()
    }
}

/// The HTTPS listener's settings as the operator wrote them: `listeners.https.ssl.*` if any key
/// has the prefix (and then only those), else the worker's key and trust store keys.
/// Each with its key stripped of the prefix and its origin as written.
fn listener_settings(pairs: &[(String, String)]) -> (Vec<Setting>, bool) {
    let prefixed = pairs.iter().any(|(k, _)| k.starts_with(PREFIX));
    let settings = pairs
        .iter()
        .filter_map(|(k, v)| {
            // Without the prefix only the stores are shared with the Kafka clients: their
            // ssl.enabled.protocols and ssl.cipher.suites are librdkafka's (OpenSSL's suite
            // names), and a worker-wide ssl.client.auth would make the Kafka cluster's CA the
            // REST API's credential.
            let key = if prefixed {
                k.strip_prefix(PREFIX)?
            } else {
                is_store_key(k).then_some(k.as_str())?
            };
            Some(Setting {
                key: key.to_owned(),
                value: v.clone(),
                origin: k.clone(),
            })
        })
        .collect();
    (settings, prefixed)
}

/// Read the HTTPS listener's settings from the worker's pairs; every problem is reported, each
/// naming the key as written.
pub fn from_pairs(pairs: &[(String, String)]) -> Result<Tls, Vec<Problem>> {
    let (settings, prefixed) = listener_settings(pairs);
    let mut problems = Vec::new();
    let find = |key: &str| settings.iter().rev().find(|s| s.key == key);
    let origin = |key: &str| {
        find(key).map_or_else(
            || format!("{}{key}", if prefixed { PREFIX } else { "" }),
            |s| s.origin.clone(),
        )
    };

    let client_auth = match find("ssl.client.auth").map(|s| s.value.trim().to_ascii_lowercase()) {
        None => ClientAuth::None,
        Some(v) if v == "none" || v.is_empty() => ClientAuth::None,
        Some(v) if v == "requested" => ClientAuth::Requested,
        Some(v) if v == "required" => ClientAuth::Required,
        Some(v) => {
            problems.push(Problem::new(
                origin("ssl.client.auth"),
                format!("{v:?} is not one of none, requested, required"),
            ));
            ClientAuth::None
        }
    };
    let versions = versions(find("ssl.enabled.protocols"), &mut problems);
    let provider = provider(find("ssl.cipher.suites"), &mut problems);
    if prefixed {
        for s in &settings {
            let known = is_store_key(&s.key)
                || IGNORED.contains(&s.key.as_str())
                || [
                    "ssl.client.auth",
                    "ssl.enabled.protocols",
                    "ssl.cipher.suites",
                ]
                .contains(&s.key.as_str());
            if !known {
                problems.push(Problem::new(
                    &s.origin,
                    "is not a setting of the HTTPS listener (it reads ssl.keystore.*, ssl.key.password, ssl.truststore.*, ssl.client.auth, ssl.enabled.protocols and ssl.cipher.suites)",
                ));
            }
        }
    }

    // The stores, read by the Kafka clients' code (the same formats, checks and messages).
    let mut store_settings = vec![Setting::plain("security.protocol", "SSL")];
    store_settings.extend(settings.iter().filter(|s| is_store_key(&s.key)).cloned());
    let translated = match security::translate(&store_settings) {
        Ok(t) => Some(t),
        Err(p) => {
            problems.extend(p);
            None
        }
    };
    let (identity, roots) = match &translated {
        Some(t) => (
            identity(t, &origin, &mut problems),
            roots(t, &origin, &mut problems),
        ),
        None => (None, None),
    };
    if translated.is_some() && identity.is_none() && problems.is_empty() {
        problems.push(Problem::new(
            origin("ssl.keystore.location"),
            "an https:// listener needs the server's key and certificate: set it to a PEM file holding both, or to a PKCS12 store (with ssl.keystore.password)",
        ));
    }
    if client_auth != ClientAuth::None && roots.is_none() && problems.is_empty() {
        problems.push(Problem::new(
            origin("ssl.client.auth"),
            format!(
                "asks clients for certificates, but no trust store says which CAs sign them: set {}",
                origin("ssl.truststore.location")
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let Some((certs, key)) = identity else {
        return Err(problems);
    };
    let provider = Arc::new(provider);
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| {
            vec![Problem::new(
                origin("ssl.cipher.suites"),
                format!("no cipher suite left for the enabled protocols ({e})"),
            )]
        })?;
    let builder = match (client_auth, roots) {
        (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(roots)) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            );
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(|e| {
                vec![Problem::new(
                    origin("ssl.truststore.location"),
                    format!("cannot verify client certificates with it ({e})"),
                )]
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        vec![Problem::new(
            origin("ssl.keystore.location"),
            format!("its key and certificate cannot be used ({e})"),
        )]
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        config: Arc::new(config),
        client_auth,
    })
}

/// The protocol versions `ssl.enabled.protocols` enables (default both TLS 1.2 and 1.3).
fn versions(
    setting: Option<&Setting>,
    problems: &mut Vec<Problem>,
) -> Vec<&'static rustls::SupportedProtocolVersion> {
    let all = vec![&rustls::version::TLS13, &rustls::version::TLS12];
    let Some(s) = setting.filter(|s| !s.value.trim().is_empty()) else {
        return all;
    };
    let mut out = Vec::new();
    for name in s.value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            other => problems.push(Problem::new(
                &s.origin,
                format!("{other:?}: the REST listener offers TLSv1.2 and TLSv1.3 only"),
            )),
        }
    }
    if out.is_empty() {
        problems.push(Problem::new(&s.origin, "enables no protocol"));
        return all;
    }
    out
}

/// The crypto provider with the suites `ssl.cipher.suites` names (Java's names, which are the
/// IANA names), or all of ring's when unset.
fn provider(
    setting: Option<&Setting>,
    problems: &mut Vec<Problem>,
) -> rustls::crypto::CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    let Some(s) = setting.filter(|s| !s.value.trim().is_empty()) else {
        return provider;
    };
    let iana = |suite: &rustls::SupportedCipherSuite| {
        // rustls spells TLS 1.3 suites TLS13_*; IANA (and Java) TLS_*.
        format!("{:?}", suite.suite()).replacen("TLS13_", "TLS_", 1)
    };
    let mut chosen = Vec::new();
    for name in s.value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match provider.cipher_suites.iter().find(|c| iana(c) == name) {
            Some(suite) => chosen.push(*suite),
            None => problems.push(Problem::new(
                &s.origin,
                format!(
                    "{name:?} is not a cipher suite the REST listener offers ({})",
                    provider
                        .cipher_suites
                        .iter()
                        .map(iana)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }
    provider.cipher_suites = chosen;
    provider
}

type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The server's certificate chain and key from the translated key store.
fn identity(
    t: &security::Translated,
    origin: &dyn Fn(&str) -> String,
    problems: &mut Vec<Problem>,
) -> Option<Identity> {
    let password = t.get("ssl.key.password");
    let from_pem = |key: &[u8], chain: &[u8], at: String| -> Result<Identity, Problem> {
        // An encrypted key without a password fails here, never prompting on the terminal.
        let pkey = security::read_pem_key(key, password).map_err(|_| {
            Problem::new(
                at.clone(),
                format!(
                    "holds a private key that cannot be read (an encrypted key needs {}, and it must be right)",
                    origin("ssl.key.password")
                ),
            )
        })?;
        let certs = openssl::x509::X509::stack_from_pem(chain).map_err(|e| {
            Problem::new(at.clone(), format!("holds no readable certificate ({e})"))
        })?;
        finish(&pkey, certs.iter(), &at)
    };
    let result =
        if let (Some(key), Some(chain)) = (t.get("ssl.key.pem"), t.get("ssl.certificate.pem")) {
            from_pem(key.as_bytes(), chain.as_bytes(), origin("ssl.keystore.key"))
        } else if let Some(path) = t.get("ssl.key.location") {
            match std::fs::read(path) {
                Ok(bytes) => from_pem(&bytes, &bytes, origin("ssl.keystore.location")),
                Err(e) => Err(Problem::new(
                    origin("ssl.keystore.location"),
                    format!("cannot read {path}: {e}"),
                )),
            }
        } else if let Some(path) = t.get("ssl.keystore.location") {
            let at = origin("ssl.keystore.location");
            std::fs::read(path)
                .map_err(|e| format!("cannot read {path}: {e}"))
                .and_then(|bytes| {
                    openssl::pkcs12::Pkcs12::from_der(&bytes)
                        .and_then(|p| p.parse2(t.get("ssl.keystore.password").unwrap_or("")))
                        .map_err(|_| {
                            format!(
                                "{path} cannot be opened; check {}",
                                origin("ssl.keystore.password")
                            )
                        })
                })
                .map_err(|m| Problem::new(at.clone(), m))
                .and_then(|parsed| {
                    let Some(pkey) = parsed.pkey else {
                        return Err(Problem::new(
                            at.clone(),
                            format!("{path} holds no private key"),
                        ));
                    };
                    let certs: Vec<openssl::x509::X509> = parsed
                        .cert
                        .into_iter()
                        .chain(parsed.ca.into_iter().flatten())
                        .collect();
                    finish(&pkey, certs.iter(), &at)
                })
        } else {
            return None;
        };
    result.map_err(|p| problems.push(p)).ok()
}

/// The key as PKCS#8 and the chain as DER, for rustls.
fn finish<'a>(
    pkey: &openssl::pkey::PKey<openssl::pkey::Private>,
    certs: impl Iterator<Item = &'a openssl::x509::X509>,
    at: &str,
) -> Result<Identity, Problem> {
    let key = pkey
        .private_key_to_pkcs8()
        .map_err(|e| Problem::new(at, format!("its private key cannot be used ({e})")))?;
    let chain = certs
        .map(|c| c.to_der().map(CertificateDer::from))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Problem::new(at, format!("a certificate cannot be used ({e})")))?;
    if chain.is_empty() {
        return Err(Problem::new(at, "holds no certificate for the key"));
    }
    Ok((chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key))))
}

/// The CAs client certificates must chain to, from the translated trust store.
fn roots(
    t: &security::Translated,
    origin: &dyn Fn(&str) -> String,
    problems: &mut Vec<Problem>,
) -> Option<rustls::RootCertStore> {
    let at = origin("ssl.truststore.location");
    let pem = match (t.get("ssl.ca.pem"), t.get("ssl.ca.location")) {
        (Some(pem), _) => pem.as_bytes().to_vec(),
        // "probe" means none was given (the clients then use the system's CAs; a listener
        // trusts no client by default).
        (None, Some(path)) if path != "probe" => match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                problems.push(Problem::new(at, format!("cannot read {path}: {e}")));
                return None;
            }
        },
        _ => return None,
    };
    let mut store = rustls::RootCertStore::empty();
    match openssl::x509::X509::stack_from_pem(&pem) {
        Ok(certs) => {
            for cert in certs {
                let added = cert.to_der().map_err(|e| e.to_string()).and_then(|der| {
                    store
                        .add(CertificateDer::from(der))
                        .map_err(|e| e.to_string())
                });
                if let Err(e) = added {
                    problems.push(Problem::new(
                        &at,
                        format!("holds a CA certificate that cannot be used ({e})"),
                    ));
                }
            }
        }
        Err(e) => problems.push(Problem::new(
            &at,
            format!("holds no readable certificate ({e})"),
        )),
    }
    (!store.is_empty()).then_some(store)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::file::pairs_of as pairs;

    fn messages(items: &[(&str, &str)]) -> Vec<String> {
        from_pairs(&pairs(items))
            .unwrap_err()
            .iter()
            .map(|p| p.to_string())
            .collect()
    }

    #[test]
    fn prefixed_keys_win_all_or_nothing() {
        let (settings, prefixed) = listener_settings(&pairs(&[
            ("ssl.keystore.location", "/kafka/client.p12"),
            ("listeners.https.ssl.client.auth", "required"),
        ]));
        assert!(prefixed);
        assert_eq!(settings.len(), 1, "{settings:?}");
        assert_eq!(settings[0].key, "ssl.client.auth");
        assert_eq!(settings[0].origin, "listeners.https.ssl.client.auth");
        let (settings, prefixed) = listener_settings(&pairs(&[
            ("ssl.keystore.location", "/kafka/client.p12"),
            ("ssl.ca.location", "/kafka/ca.pem"),
            ("ssl.client.auth", "required"),
            ("ssl.cipher.suites", "ECDHE-RSA-AES256-GCM-SHA384"),
        ]));
        assert!(!prefixed);
        assert_eq!(
            settings.len(),
            1,
            "the clients' own keys stay theirs: {settings:?}"
        );
    }

    #[test]
    fn bad_settings_name_their_keys() {
        let m = messages(&[]);
        assert!(
            m[0].contains("ssl.keystore.location") && m[0].contains("needs the server's key"),
            "{m:?}"
        );
        let m = messages(&[
            (
                "listeners.https.ssl.keystore.location",
                "/nonexistent/server.pem",
            ),
            ("listeners.https.ssl.client.auth", "sometimes"),
            ("listeners.https.ssl.enabled.protocols", "TLSv1.1"),
            ("listeners.https.ssl.cipher.suites", "TLS_RSA_WITH_NULL_MD5"),
            ("listeners.https.ssl.keystore.lokation", "x"),
        ]);
        let all = m.join("\n");
        for expected in [
            "listeners.https.ssl.client.auth: \"sometimes\"",
            "listeners.https.ssl.enabled.protocols: \"TLSv1.1\"",
            "listeners.https.ssl.cipher.suites: \"TLS_RSA_WITH_NULL_MD5\"",
            "listeners.https.ssl.keystore.lokation: is not a setting",
            "listeners.https.ssl.keystore.location: cannot read /nonexistent/server.pem",
        ] {
            assert!(all.contains(expected), "{expected} in:\n{all}");
        }
    }

    #[test]
    fn a_generated_key_and_certificate_serve() {
        use openssl::{asn1, bn, hash, pkey, rsa, x509};
        let key = pkey::PKey::from_rsa(rsa::Rsa::generate(2048).unwrap()).unwrap();
        let mut name = x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "localhost").unwrap();
        let name = name.build();
        let mut cert = x509::X509Builder::new().unwrap();
        cert.set_version(2).unwrap();
        cert.set_serial_number(&bn::BigNum::from_u32(1).unwrap().to_asn1_integer().unwrap())
            .unwrap();
        cert.set_subject_name(&name).unwrap();
        cert.set_issuer_name(&name).unwrap();
        cert.set_pubkey(&key).unwrap();
        cert.set_not_before(&asn1::Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        cert.set_not_after(&asn1::Asn1Time::days_from_now(1).unwrap())
            .unwrap();
        cert.sign(&key, hash::MessageDigest::sha256()).unwrap();
        let cert = cert.build();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.pem");
        let mut pem = key.private_key_to_pem_pkcs8().unwrap();
        pem.extend(cert.to_pem().unwrap());
        std::fs::write(&path, pem).unwrap();
        let tls = from_pairs(&pairs(&[(
            "listeners.https.ssl.keystore.location",
            path.to_str().unwrap(),
        )]))
        .unwrap();
        assert_eq!(tls.client_auth, ClientAuth::None);
        let m = messages(&[
            (
                "listeners.https.ssl.keystore.location",
                path.to_str().unwrap(),
            ),
            ("listeners.https.ssl.client.auth", "required"),
        ]);
        assert!(m[0].contains("no trust store"), "{m:?}");

        // An encrypted key: refused without its password (never a prompt on the terminal),
        // served with it.
        let encrypted = dir.path().join("encrypted.pem");
        let mut pem = key
            .private_key_to_pem_pkcs8_passphrase(
                openssl::symm::Cipher::aes_256_cbc(),
                b"key-secret",
            )
            .unwrap();
        pem.extend(cert.to_pem().unwrap());
        std::fs::write(&encrypted, pem).unwrap();
        let location = (
            "listeners.https.ssl.keystore.location",
            encrypted.to_str().unwrap(),
        );
        let m = messages(&[location]);
        assert!(
            m[0].contains("listeners.https.ssl.key.password") && !m[0].contains("key-secret"),
            "{m:?}"
        );
        from_pairs(&pairs(&[
            location,
            ("listeners.https.ssl.key.password", "key-secret"),
        ]))
        .unwrap();
    }
}
