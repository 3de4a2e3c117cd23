//! The plugins' PostgreSQL client (`wasm-connect-postgres-wire`), natively against the real
//! server of `scripts/postgres`: every login method, text values of the common types both
//! ways, server errors that leave the connection usable, pipelines that stop at the first error.

use wasm_connect_postgres_wire::{Client, Error, Statement};
use wasm_connect_tests::postgres::{self, client, fresh_database, login};

#[test]
fn logs_in_with_scram_md5_and_cleartext_and_refuses_a_wrong_password_clearly() {
    for (user, password) in [
        ("connect", "connect-secret"),
        ("connect_md5", "md5-secret"),
        ("connect_plain", "plain-secret"),
    ] {
        let mut c = Client::connect(&login("postgres", user, password))
            .unwrap_or_else(|e| panic!("{user}: {e}"));
        let who = c.query("SELECT current_user", &[]).unwrap();
        assert_eq!(who.rows, vec![vec![Some(user.to_owned())]]);
        assert!(c.server_param("server_version").is_some());
        c.close();
    }
    let err = Client::connect(&login("postgres", "connect", "wrong")).unwrap_err();
    assert_eq!(err.sqlstate(), Some("28P01"), "{err}");
    assert!(!err.is_transient());
    assert!(
        err.to_string().contains("password authentication failed"),
        "{err}"
    );
    let mut no_password = login("postgres", "connect", "");
    no_password.password = None;
    let err = Client::connect(&no_password).unwrap_err();
    assert!(matches!(err, Error::Auth(_)), "{err}");
    assert!(err.to_string().contains("none is configured"), "{err}");
    // Nothing listens on port 1: a connection error, which a retry may cure.
    let mut nowhere = postgres::config("postgres");
    nowhere.port = 1;
    assert!(Client::connect(&nowhere).unwrap_err().is_transient());
}

#[test]
fn values_of_the_common_types_cross_in_text_both_ways() {
    let db = fresh_database("wire");
    let mut c = client(&db);
    c.simple_query(
        "CREATE TABLE t (id int4 PRIMARY KEY, big int8, n numeric(20,4), f float8, ok bool,
                         name text, at timestamp, atz timestamptz, d date, raw bytea, doc jsonb)",
    )
    .unwrap();
    let rows: [[Option<&str>; 11]; 2] = [
        [
            Some("1"),
            Some("9223372036854775807"),
            Some("12345678901234.5678"),
            Some("0.1"),
            Some("true"),
            Some("zoë \"quoted\" 'x'"),
            Some("2024-02-29 23:59:59.123456"),
            Some("2024-02-29 23:59:59.5+00"),
            Some("2024-02-29"),
            Some("\\x00ff10"),
            Some(r#"{"a": [1, 2]}"#),
        ],
        [
            Some("2"),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ],
    ];
    for row in &rows {
        let n = c
            .execute(
                "INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                row,
            )
            .unwrap();
        assert_eq!(n, 1);
    }
    let read = c.query("SELECT * FROM t ORDER BY id", &[]).unwrap();
    assert_eq!(read.columns.len(), 11);
    assert_eq!(read.columns[0].name, "id");
    assert_eq!(read.columns[0].type_oid, 23, "int4");
    assert_eq!(read.columns[10].type_oid, 3802, "jsonb");
    let first = &read.rows[0];
    assert_eq!(first[1].as_deref(), Some("9223372036854775807"));
    assert_eq!(first[2].as_deref(), Some("12345678901234.5678"));
    assert_eq!(first[3].as_deref(), Some("0.1"));
    assert_eq!(first[4].as_deref(), Some("t"));
    assert_eq!(first[5].as_deref(), Some("zoë \"quoted\" 'x'"));
    assert_eq!(first[6].as_deref(), Some("2024-02-29 23:59:59.123456"));
    assert_eq!(
        first[7].as_deref(),
        Some("2024-02-29 23:59:59.5+00"),
        "the session is UTC"
    );
    assert_eq!(first[8].as_deref(), Some("2024-02-29"));
    assert_eq!(first[9].as_deref(), Some("\\x00ff10"));
    assert_eq!(first[10].as_deref(), Some(r#"{"a": [1, 2]}"#));
    assert!(
        read.rows[1][1..].iter().all(Option::is_none),
        "NULLs stay NULL"
    );
    assert_eq!(read.affected(), 2);
}

#[test]
fn server_errors_leave_the_connection_usable_and_a_pipeline_stops_at_the_first() {
    let db = fresh_database("wire");
    let mut c = client(&db);
    c.simple_query("CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL)")
        .unwrap();
    let err = c.query("SELECT * FROM missing", &[]).unwrap_err();
    assert_eq!(err.sqlstate(), Some("42P01"), "{err}");
    assert!(!c.is_broken());
    let insert = "INSERT INTO t VALUES ($1, $2)";
    let results = c
        .pipeline(&[
            Statement {
                sql: insert,
                params: &[Some("1"), Some("a")],
            },
            Statement {
                sql: insert,
                params: &[Some("1"), Some("b")],
            },
            Statement {
                sql: insert,
                params: &[Some("2"), Some("c")],
            },
        ])
        .unwrap();
    assert_eq!(results.len(), 2, "the server skips what follows an error");
    assert!(results[0].is_ok());
    let failure = results[1].as_ref().unwrap_err();
    assert_eq!(failure.code, "23505", "{failure}");
    assert_eq!(failure.constraint.as_deref(), Some("t_pkey"));
    // One implicit transaction: the first insert was rolled back with the failure.
    let count = c.query("SELECT count(*) FROM t", &[]).unwrap();
    assert_eq!(count.rows[0][0].as_deref(), Some("0"));
    // In an explicit transaction each statement can be kept apart with savepoints.
    c.simple_query("BEGIN").unwrap();
    assert!(c.in_transaction());
    c.execute(insert, &[Some("1"), Some("a")]).unwrap();
    c.simple_query("SAVEPOINT s").unwrap();
    let err = c.execute(insert, &[Some("3"), None]).unwrap_err();
    assert_eq!(err.sqlstate(), Some("23502"), "not null: {err}");
    c.simple_query("ROLLBACK TO SAVEPOINT s; COMMIT").unwrap();
    assert!(!c.in_transaction());
    let rows = c.query("SELECT id, v FROM t", &[]).unwrap().rows;
    assert_eq!(rows, vec![vec![Some("1".into()), Some("a".into())]]);
    // Several statements in one simple query answer one result each.
    let results = c.simple_query("SELECT 1; SELECT 'x', NULL").unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[1].rows, vec![vec![Some("x".into()), None]]);
}
