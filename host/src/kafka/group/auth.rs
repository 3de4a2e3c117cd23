//! The group connection's security: read from the same client settings the worker's rdkafka
//! clients use (in librdkafka's terms, after [`crate::kafka::security::translate`]), so one
//! worker file secures every Kafka connection; and SASL authentication over a [`Connection`].
//!
//! Supported: PLAINTEXT, SSL (trust store as a PEM file or text, or the system's CAs; client
//! certificate and key as PEM), SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and
//! SCRAM-SHA-512. Refused with a message saying so (the rdkafka clients support them, this
//! connection does not): OAUTHBEARER and GSSAPI, PKCS12 key stores, encrypted private keys,
//! and turning off host name verification.
//!
//! Invariant: no error message made here contains a password or key material.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::GroupError;
use super::wire::{Connection, describe_code};

/// How long one SASL round trip may take.
const SASL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A SASL mechanism this connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// SASL credentials.
#[derive(Clone)]
pub struct Sasl {
    pub mechanism: Mechanism,
    pub username: String,
    password: String,
}

impl std::fmt::Debug for Sasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sasl")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// How the group connection secures itself.
#[derive(Clone, Debug, Default)]
pub struct GroupSecurity {
    tls: Option<Arc<rustls::ClientConfig>>,
    sasl: Option<Sasl>,
}

impl GroupSecurity {
    /// No TLS, no SASL.
    pub fn plaintext() -> Self {
        Self::default()
    }

    /// From one client's settings in librdkafka's terms (`security.protocol`, `ssl.*`,
    /// `sasl.*`).
    pub fn from_librdkafka(pairs: &[(String, String)]) -> Result<Self, GroupError> {
        let get = |key: &str| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let refuse = |what: String| Err(GroupError::Config(what));
        let protocol = get("security.protocol")
            .unwrap_or("plaintext")
            .to_ascii_lowercase();
        let (tls, sasl) = match protocol.as_str() {
            "plaintext" => (false, false),
            "ssl" => (true, false),
            "sasl_plaintext" => (false, true),
            "sasl_ssl" => (true, true),
            other => {
                return refuse(format!(
                    "security.protocol {other:?} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
                ));
            }
        };
        let mut security = GroupSecurity::default();
        if tls {
            security.tls = Some(Arc::new(tls_config(&get)?));
        }
        if sasl {
            let mechanism = match get("sasl.mechanisms")
                .or_else(|| get("sasl.mechanism"))
                .unwrap_or("GSSAPI")
                .to_ascii_uppercase()
                .as_str()
            {
                "PLAIN" => Mechanism::Plain,
                "SCRAM-SHA-256" => Mechanism::ScramSha256,
                "SCRAM-SHA-512" => Mechanism::ScramSha512,
                other => {
                    return refuse(format!(
                        "sasl.mechanism {other} is not supported by distributed mode's group membership connection (it supports PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512); use one of those for the worker's own clients"
                    ));
                }
            };
            let (Some(username), Some(password)) = (get("sasl.username"), get("sasl.password"))
            else {
                return refuse(format!(
                    "sasl.mechanism {} needs a user name and password (sasl.jaas.config with username=\"...\" password=\"...\")",
                    mechanism.name()
                ));
            };
            security.sasl = Some(Sasl {
                mechanism,
                username: username.to_owned(),
                password: password.to_owned(),
            });
        }
        Ok(security)
    }

    /// The security protocol's name, for messages.
    pub fn protocol_name(&self) -> &'static str {
        match (self.tls.is_some(), self.sasl.is_some()) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }

    /// The TLS settings, if the connection uses TLS.
    pub fn tls(&self) -> Option<&Arc<rustls::ClientConfig>> {
        self.tls.as_ref()
    }

    /// The SASL credentials, if the connection authenticates.
    pub fn sasl(&self) -> Option<&Sasl> {
        self.sasl.as_ref()
    }
}

/// TLS settings from `ssl.*` keys in librdkafka's terms.
fn tls_config<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
) -> Result<rustls::ClientConfig, GroupError> {
    let config = |what: String| GroupError::Config(what);
    for unsupported in ["ssl.keystore.location", "ssl.key.password"] {
        if get(unsupported).is_some() {
            return Err(config(format!(
                "{unsupported} (a PKCS12 key store or an encrypted key) is not supported by distributed mode's group membership connection; give the client certificate and an unencrypted key as PEM (ssl.keystore.type=PEM with ssl.keystore.certificate.chain and ssl.keystore.key)"
            )));
        }
    }
    if get("ssl.endpoint.identification.algorithm") == Some("none") {
        return Err(config(
            "ssl.endpoint.identification.algorithm is empty (host names not checked), which distributed mode's group membership connection does not support: give the brokers certificates that name them".to_owned(),
        ));
    }
    let mut roots = rustls::RootCertStore::empty();
    let pem = match (get("ssl.ca.pem"), get("ssl.ca.location")) {
        (Some(text), _) => Some(("ssl.ca.pem".to_owned(), text.as_bytes().to_vec())),
        (None, Some(path)) if path != "probe" => {
            let bytes = std::fs::read(path)
                .map_err(|e| config(format!("cannot read the trust store {path}: {e}")))?;
            Some((path.to_owned(), bytes))
        }
        _ => None,
    };
    match pem {
        Some((origin, bytes)) => {
            for cert in CertificateDer::pem_slice_iter(&bytes) {
                let cert = cert
                    .map_err(|e| config(format!("{origin}: not a PEM certificate bundle: {e}")))?;
                roots.add(cert).map_err(|e| {
                    config(format!("{origin}: a certificate cannot be trusted: {e}"))
                })?;
            }
            if roots.is_empty() {
                return Err(config(format!("{origin} holds no certificate")));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(config(
                    "no trust store is set and the system has no CA certificates; set ssl.truststore.location".to_owned(),
                ));
            }
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| config(format!("TLS: {e}")))?
    .with_root_certificates(roots);
    let read = |text_key: &str, file_key: &str| -> Result<Option<(String, Vec<u8>)>, GroupError> {
        match (get(text_key), get(file_key)) {
            (Some(text), _) => Ok(Some((text_key.to_owned(), text.as_bytes().to_vec()))),
            (None, Some(path)) => std::fs::read(path)
                .map(|b| Some((path.to_owned(), b)))
                .map_err(|e| config(format!("cannot read {path}: {e}"))),
            (None, None) => Ok(None),
        }
    };
    let chain = read("ssl.certificate.pem", "ssl.certificate.location")?;
    let key = read("ssl.key.pem", "ssl.key.location")?;
    match (chain, key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some((chain_origin, chain)), Some((key_origin, key))) => {
            let certs = CertificateDer::pem_slice_iter(&chain)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| config(format!("{chain_origin}: not PEM certificates: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(&key).map_err(|e| {
                config(format!(
                    "{key_origin}: no unencrypted PEM private key in it: {e}"
                ))
            })?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| config(format!("the client certificate and key do not go together: {e}")))
        }
        _ => Err(config(
            "a client certificate needs both its chain and its key (ssl.keystore.certificate.chain and ssl.keystore.key)".to_owned(),
        )),
    }
}

/// Authenticate `conn` with `sasl`: SaslHandshake, then SaslAuthenticate rounds.
pub(super) async fn authenticate(conn: &mut Connection, sasl: &Sasl) -> Result<(), GroupError> {
    let addr = conn.addr().to_owned();
    let auth = |what: String| GroupError::Auth {
        addr: addr.clone(),
        what,
    };
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_static_str(sasl.mechanism.name()));
    let (response, _) = conn.send(&handshake, SASL_TIMEOUT).await?;
    if response.error_code != 0 {
        let offered: Vec<&str> = response.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(auth(format!(
            "the broker does not accept {} on this listener (it offers {}): {}",
            sasl.mechanism.name(),
            offered.join(", "),
            describe_code(response.error_code)
        )));
    }
    match sasl.mechanism {
        Mechanism::Plain => {
            let mut token = Vec::with_capacity(sasl.username.len() + sasl.password.len() + 2);
            token.push(0);
            token.extend_from_slice(sasl.username.as_bytes());
            token.push(0);
            token.extend_from_slice(sasl.password.as_bytes());
            round(conn, token, &auth).await?;
        }
        Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
            let mut scram = Scram::new(sasl);
            let server_first = round(conn, scram.client_first().into_bytes(), &auth).await?;
            let client_final = scram.client_final(&server_first).map_err(&auth)?;
            let server_final = round(conn, client_final.into_bytes(), &auth).await?;
            scram.verify(&server_final).map_err(&auth)?;
        }
    }
    Ok(())
}

/// One SaslAuthenticate round trip: the server's bytes.
async fn round(
    conn: &mut Connection,
    token: Vec<u8>,
    auth: &impl Fn(String) -> GroupError,
) -> Result<Vec<u8>, GroupError> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(token.into());
    let (response, _) = conn.send(&request, SASL_TIMEOUT).await?;
    if response.error_code != 0 {
        let message = response
            .error_message
            .as_ref()
            .map_or_else(|| describe_code(response.error_code), |m| m.to_string());
        return Err(auth(message));
    }
    Ok(response.auth_bytes.to_vec())
}

/// A SCRAM exchange (RFC 5802, RFC 7677) from the client's side.
struct Scram<'a> {
    sasl: &'a Sasl,
    nonce: String,
    client_first_bare: String,
    /// The server signature the server must prove, once the client's final message is made.
    expected_server_signature: Option<Vec<u8>>,
}

impl<'a> Scram<'a> {
    fn new(sasl: &'a Sasl) -> Self {
        let mut random = [0u8; 24];
        // A failing system RNG leaves zeros: the exchange still works, only less unique.
        let _ = openssl::rand::rand_bytes(&mut random);
        let nonce = BASE64.encode(random);
        let user = sasl.username.replace('=', "=3D").replace(',', "=2C");
        Self {
            sasl,
            client_first_bare: format!("n={user},r={nonce}"),
            nonce,
            expected_server_signature: None,
        }
    }

    fn digest(&self) -> openssl::hash::MessageDigest {
        match self.sasl.mechanism {
            Mechanism::ScramSha512 => openssl::hash::MessageDigest::sha512(),
            _ => openssl::hash::MessageDigest::sha256(),
        }
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
        let key = openssl::pkey::PKey::hmac(key).map_err(|e| e.to_string())?;
        let mut signer =
            openssl::sign::Signer::new(self.digest(), &key).map_err(|e| e.to_string())?;
        signer.update(data).map_err(|e| e.to_string())?;
        signer.sign_to_vec().map_err(|e| e.to_string())
    }

    fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    fn client_final(&mut self, server_first: &[u8]) -> Result<String, String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "the server's first SCRAM message is not text".to_owned())?;
        let field = |name: char| {
            server_first
                .split(',')
                .find_map(|part| part.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
        };
        if let Some(error) = field('e') {
            return Err(format!("the server refused: {error}"));
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (field('r'), field('s'), field('i'))
        else {
            return Err(
                "the server's first SCRAM message lacks its nonce, salt or iteration count"
                    .to_owned(),
            );
        };
        if !nonce.starts_with(&self.nonce) {
            return Err("the server's SCRAM nonce does not extend the client's".to_owned());
        }
        let salt = BASE64
            .decode(salt)
            .map_err(|_| "the server's SCRAM salt is not base64".to_owned())?;
        let iterations: usize = iterations
            .parse()
            .map_err(|_| "the server's SCRAM iteration count is not a number".to_owned())?;
        if !(4096..=1_000_000).contains(&iterations) {
            return Err(format!(
                "the server asks for {iterations} SCRAM iterations (4096 to 1000000 accepted)"
            ));
        }
        let len = self.digest().size();
        let mut salted = vec![0u8; len];
        openssl::pkcs5::pbkdf2_hmac(
            self.sasl.password.as_bytes(),
            &salt,
            iterations,
            self.digest(),
            &mut salted,
        )
        .map_err(|e| e.to_string())?;
        let client_key = self.hmac(&salted, b"Client Key")?;
        let stored_key =
            openssl::hash::hash(self.digest(), &client_key).map_err(|e| e.to_string())?;
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = self.hmac(&stored_key, auth_message.as_bytes())?;
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.hmac(&salted, b"Server Key")?;
        self.expected_server_signature = Some(self.hmac(&server_key, auth_message.as_bytes())?);
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)))
    }

    fn verify(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| "the server's final SCRAM message is not text".to_owned())?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(format!("the server refused: {error}"));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| BASE64.decode(v.split(',').next().unwrap_or(v)).ok())
            .ok_or_else(|| "the server's final SCRAM message has no signature".to_owned())?;
        match &self.expected_server_signature {
            // Constant time, and any length (the server's bytes).
            Some(expected) if bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], &signature[..])) => Ok(()),
            _ => Err("the server could not prove it knows the password (a SCRAM signature mismatch): it is not the broker it claims to be".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::file::pairs_of as pairs;

    /// RFC 7677's SCRAM-SHA-256 example, with its nonce.
    #[test]
    fn scram_sha_256_follows_rfc_7677() {
        let sasl = Sasl {
            mechanism: Mechanism::ScramSha256,
            username: "user".into(),
            password: "pencil".into(),
        };
        let mut scram = Scram::new(&sasl);
        scram.nonce = "rOprNGfwEbeRWgbNEkqO".into();
        scram.client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO".into();
        assert_eq!(scram.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = scram.client_final(server_first).unwrap();
        assert_eq!(
            client_final,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        assert!(scram.verify(b"v=AAAA").is_err());
        assert!(scram.verify(b"e=invalid-proof").is_err());
    }

    #[test]
    fn a_server_nonce_that_does_not_extend_ours_is_refused() {
        let sasl = Sasl {
            mechanism: Mechanism::ScramSha512,
            username: "u".into(),
            password: "p".into(),
        };
        let mut scram = Scram::new(&sasl);
        let refused = scram.client_final(b"r=other,s=AAAA,i=4096").unwrap_err();
        assert!(refused.contains("nonce"), "{refused}");
        let few = format!("r={}x,s=AAAA,i=1", scram.nonce);
        assert!(
            scram
                .client_final(few.as_bytes())
                .unwrap_err()
                .contains("iterations")
        );
    }

    #[test]
    fn settings_map_to_the_connection_or_say_what_it_cannot_do() {
        let plain = GroupSecurity::from_librdkafka(&pairs(&[])).unwrap();
        assert_eq!(plain.protocol_name(), "PLAINTEXT");
        let sasl = GroupSecurity::from_librdkafka(&pairs(&[
            ("security.protocol", "sasl_plaintext"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "secret-pw"),
        ]))
        .unwrap();
        assert_eq!(sasl.protocol_name(), "SASL_PLAINTEXT");
        assert_eq!(sasl.sasl().unwrap().mechanism, Mechanism::ScramSha512);
        assert!(!format!("{sasl:?}").contains("secret-pw"));
        for (settings, says) in [
            (
                vec![
                    ("security.protocol", "sasl_ssl"),
                    ("sasl.mechanisms", "OAUTHBEARER"),
                ],
                "OAUTHBEARER is not supported",
            ),
            (
                vec![
                    ("security.protocol", "sasl_plaintext"),
                    ("sasl.mechanisms", "PLAIN"),
                ],
                "needs a user name and password",
            ),
            (
                vec![
                    ("security.protocol", "ssl"),
                    ("ssl.keystore.location", "/k.p12"),
                ],
                "PKCS12",
            ),
            (
                vec![
                    ("security.protocol", "ssl"),
                    ("ssl.endpoint.identification.algorithm", "none"),
                ],
                "host names not checked",
            ),
            (
                vec![
                    ("security.protocol", "ssl"),
                    ("ssl.ca.location", "/no/such/ca.pem"),
                ],
                "cannot read the trust store /no/such/ca.pem",
            ),
            (vec![("security.protocol", "carrier-pigeon")], "not one of"),
        ] {
            let refused = GroupSecurity::from_librdkafka(&pairs(&settings)).unwrap_err();
            assert!(
                refused.to_string().contains(says),
                "{settings:?}: {refused}"
            );
        }
    }
}
