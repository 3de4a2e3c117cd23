//! The real PostgreSQL server of the tests (started by `scripts/postgres`), and throwaway
//! databases on it.

use std::process::Command;
use std::sync::OnceLock;

use wasm_connect_postgres_wire::{Client, Config, quote_ident};

use crate::repo_root;

/// The server's port, starting it (once per test process) with the project's script.
pub fn port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let output = Command::new(repo_root().join("scripts/postgres"))
            .arg("start")
            .output()
            .expect("run scripts/postgres start");
        assert!(
            output.status.success(),
            "scripts/postgres start failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        std::env::var("WASM_CONNECT_POSTGRES_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(15432)
    })
}

/// Settings to log in to `dbname` as `user` with `password` (see `scripts/postgres`).
pub fn login(dbname: &str, user: &str, password: &str) -> Config {
    Config {
        host: "127.0.0.1".to_owned(),
        port: port(),
        dbname: dbname.to_owned(),
        user: user.to_owned(),
        password: Some(password.to_owned()),
        application_name: "wasm-connect-tests".to_owned(),
    }
}

/// Settings of the `connect` role (what connectors log in as) for `dbname`.
pub fn config(dbname: &str) -> Config {
    login(dbname, "connect", "connect-secret")
}

/// `dbname`'s JDBC URL (without credentials).
pub fn jdbc_url(dbname: &str) -> String {
    format!("jdbc:postgresql://127.0.0.1:{}/{dbname}", port())
}

/// A new, empty database owned by `connect`, with a name no other test uses.
pub fn fresh_database(prefix: &str) -> String {
    let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let mut admin = Client::connect(&config("postgres")).expect("log in as connect");
    admin
        .simple_query(&format!("CREATE DATABASE {}", quote_ident(&name)))
        .expect("create a database");
    admin.close();
    name
}

/// A client of `dbname` as `connect`.
pub fn client(dbname: &str) -> Client {
    Client::connect(&config(dbname)).expect("log in as connect")
}
