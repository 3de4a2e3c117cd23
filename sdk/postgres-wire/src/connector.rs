//! What wasm-connect's PostgreSQL connectors share (feature `connector`): the connection keys
//! (Kafka Connect JDBC's names), the login they make, and errors classified for the worker
//! (retriable when a retry may cure them) with the grant to add when the sandbox refused the
//! connection.

use wasm_connect_sdk::{
    Config as ConnectorConfig, ConfigDef, ConfigError, ConfigType, Error, Importance, Spec,
};

use crate::{Client, Config, DEFAULT_PORT, Error as DbError};

/// `spec` with the connection keys: `connection.url`, `connection.user`, `connection.password`.
pub fn connection_keys(spec: Spec) -> Spec {
    spec.config(
        ConfigDef::new(
            "connection.url",
            ConfigType::String,
            "JDBC URL of the database: jdbc:postgresql://host:port/database (user and password may be given as URL parameters, or below). Its host and port must be granted with sandbox.net.connect.",
        )
        .required()
        .importance(Importance::High),
    )
    .config(
        ConfigDef::new("connection.user", ConfigType::String, "The role to log in as.")
            .importance(Importance::High),
    )
    .config(
        ConfigDef::new(
            "connection.password",
            ConfigType::Password,
            "Its password. Use a config provider, e.g. ${file:/etc/secrets/db.properties:password}.",
        )
        .importance(Importance::High),
    )
}

/// The login the connection keys of `config` describe; problems are added to `errors`, each
/// naming its key.
pub fn login(config: &ConnectorConfig, errors: &mut Vec<ConfigError>) -> Config {
    let url = config.get("connection.url").unwrap_or_default();
    let mut login = match Config::from_url(url) {
        Ok(login) => login,
        Err(e) => {
            errors.push(ConfigError::new("connection.url", e));
            Config {
                host: String::new(),
                port: DEFAULT_PORT,
                dbname: "postgres".to_owned(),
                user: String::new(),
                password: None,
                application_name: String::new(),
            }
        }
    };
    if let Some(user) = config.get("connection.user").filter(|u| !u.is_empty()) {
        login.user = user.to_owned();
    }
    if let Some(password) = config.get("connection.password").filter(|p| !p.is_empty()) {
        login.password = Some(password.to_owned());
    }
    if login.user.is_empty() {
        errors.push(ConfigError::new(
            "connection.user",
            "is required (here, or as user= in connection.url)",
        ));
    }
    if login.dbname.is_empty() {
        errors.push(ConfigError::new(
            "connection.url",
            "names no database: write jdbc:postgresql://host:port/database",
        ));
    }
    login
}

/// A database error as the connector's error: retriable when a retry may cure it.
pub fn db_error(what: &str, e: &DbError) -> Error {
    classified(e, format!("{what}: {e}"))
}

/// `message` as the worker's error for `e`: retriable when a retry may cure it.
pub fn classified(e: &DbError, message: String) -> Error {
    if e.is_transient() {
        Error::retriable(message)
    } else {
        Error::fatal(message)
    }
}

/// Why a login failed, with the grant to add when the sandbox refused the connection.
pub fn connect_message(login: &Config, e: &DbError) -> String {
    let mut message = format!(
        "cannot connect to {}:{} as {}: {e}",
        login.host, login.port, login.user
    );
    if matches!(e, DbError::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied) {
        message.push_str(&format!(
            " (grant it: sandbox.net.connect={}:{})",
            login.host, login.port
        ));
    }
    message
}

/// A connection as `login` for a connector's `validate`, or the config error (on
/// `connection.url`) saying why not.
pub fn validate_login(login: &Config) -> Result<Client, ConfigError> {
    Client::connect(login)
        .map_err(|e| ConfigError::new("connection.url", connect_message(login, &e)))
}

/// A connection as `login`, or the worker's error saying why not.
pub fn connect(login: &Config) -> Result<Client, Error> {
    Client::connect(login).map_err(|e| classified(&e, connect_message(login, &e)))
}

/// The open connection in `slot`, connecting first when there is none or it broke.
pub fn ensure<'a>(slot: &'a mut Option<Client>, login: &Config) -> Result<&'a mut Client, Error> {
    if slot.as_ref().is_none_or(Client::is_broken) {
        *slot = Some(connect(login)?);
    }
    slot.as_mut()
        .ok_or_else(|| Error::retriable("no connection to the database"))
}
