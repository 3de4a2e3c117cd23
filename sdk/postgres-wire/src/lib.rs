//! A small blocking PostgreSQL client for wasm-connect plugins.
//!
//! Why not `postgres`/`tokio-postgres`: both need tokio's networking, which `wasm32-wasip2`
//! does not have; a plugin's calls are synchronous and may block (the worker abandons a call at
//! its wall-clock deadline), so a blocking client over `std::net::TcpStream` is what fits. The
//! wire format, SCRAM-SHA-256 and MD5 come from `postgres-protocol` (the message layer of
//! rust-postgres, which has no I/O of its own); this crate adds only the conversation: startup,
//! authentication, simple queries, extended queries with text parameters and text results, and
//! pipelines of statements.
//!
//! The same code runs natively (the tests and benchmarks use it there too). It speaks
//! unencrypted TCP only: `sslmode` other than `disable`/`allow`/`prefer` is refused by
//! [`Config::from_url`] rather than ignored.
//!
//! Invariants: after any I/O error the client is broken ([`Client::is_broken`]) and every call
//! fails fast; after a server error the connection is back at `ReadyForQuery` (the rest of the
//! answer has been read), so the client stays usable.

mod config;
/// What wasm-connect's PostgreSQL connectors share (feature `connector`).
#[cfg(feature = "connector")]
pub mod connector;
pub mod values;

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;

use bytes::{BufMut, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::IsNull;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::{ErrorResponseBody, Message};
use postgres_protocol::message::frontend;

pub use config::{Config, DEFAULT_PORT};

/// Why a call failed.
#[derive(Debug)]
pub enum Error {
    /// The connection failed or broke (connect, read or write): retry with a new client.
    Io(io::Error),
    /// The server refused the statement or the login; the connection stays usable after a
    /// statement's error.
    Db(Box<DbError>),
    /// The login cannot proceed (a method this client does not speak, or no password given).
    Auth(String),
    /// The server said something this client did not expect; the client is broken.
    Protocol(String),
}

impl Error {
    /// Whether a new connection might succeed where this one failed (I/O, or a server that is
    /// starting up, shutting down or out of connections).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Io(_) => true,
            // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot
            // connect now; 53300: too many connections; 40001/40P01: serialization failure,
            // deadlock.
            Error::Db(e) => {
                e.code.starts_with("08")
                    || matches!(
                        e.code.as_str(),
                        "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01"
                    )
            }
            Error::Auth(_) | Error::Protocol(_) => false,
        }
    }

    /// The SQLSTATE of a server error.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Error::Db(e) => Some(&e.code),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "connection error: {e}"),
            Error::Db(e) => e.fmt(f),
            Error::Auth(m) => write!(f, "cannot log in: {m}"),
            Error::Protocol(m) => write!(f, "protocol error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// An error the server reported (an `ErrorResponse`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DbError {
    /// `ERROR`, `FATAL` or `PANIC`.
    pub severity: String,
    /// The SQLSTATE code, e.g. `23505` for a unique violation.
    pub code: String,
    /// The primary message.
    pub message: String,
    /// Detail, if the server gave it.
    pub detail: Option<String>,
    /// A hint, if the server gave one.
    pub hint: Option<String>,
    /// The table concerned, if any.
    pub table: Option<String>,
    /// The column concerned, if any.
    pub column: Option<String>,
    /// The constraint concerned, if any.
    pub constraint: Option<String>,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (SQLSTATE {})",
            self.severity, self.message, self.code
        )?;
        if let Some(detail) = &self.detail {
            write!(f, "; {detail}")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "; hint: {hint}")?;
        }
        Ok(())
    }
}

/// A result column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// The OID of its type (`pg_type.oid`), e.g. 23 for `int4`.
    pub type_oid: u32,
    /// The table it comes from, if it is a plain column of one (else 0).
    pub table_oid: u32,
    /// The type modifier (`atttypmod`): for `numeric(p,s)` it is `((p << 16) | s) + 4`, -1
    /// where the type has none.
    pub type_modifier: i32,
}

/// One statement's answer: its columns, its rows in text format (`None` is SQL NULL), and its
/// command tag (`INSERT 0 5`, `SELECT 3`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// The columns (empty for a statement that returns no rows).
    pub columns: Vec<Column>,
    /// The rows, each with one text value per column.
    pub rows: Vec<Vec<Option<String>>>,
    /// The command tag.
    pub tag: String,
}

impl QueryResult {
    /// The rows the statement affected or returned: the tag's last number (0 if it has none).
    pub fn affected(&self) -> u64 {
        self.tag
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// The index of the column named `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
}

/// One statement of a [`Client::pipeline`], with its parameters in text format.
#[derive(Debug, Clone, Copy)]
pub struct Statement<'a> {
    /// The SQL, with `$1`, `$2`, ... placeholders.
    pub sql: &'a str,
    /// One value per placeholder; `None` is SQL NULL.
    pub params: &'a [Option<&'a str>],
}

/// A connection to one PostgreSQL server.
pub struct Client {
    stream: TcpStream,
    read: BytesMut,
    write: BytesMut,
    server_params: Vec<(String, String)>,
    broken: bool,
    /// The transaction status of the last `ReadyForQuery`: `I` idle, `T` in a transaction,
    /// `E` in a failed transaction.
    tx_status: u8,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("broken", &self.broken)
            .field("tx_status", &(self.tx_status as char))
            .finish_non_exhaustive()
    }
}

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 * 1024;

impl Client {
    /// Connect and log in. The session runs in UTC with ISO dates (so timestamps read back
    /// the same everywhere) and full float precision.
    pub fn connect(config: &Config) -> Result<Client, Error> {
        let stream = TcpStream::connect((config.host.as_str(), config.port))?;
        // Not every platform has the option (wasi may refuse it); it is an optimisation.
        let _ = stream.set_nodelay(true);
        let mut client = Client {
            stream,
            read: BytesMut::with_capacity(READ_CHUNK),
            write: BytesMut::with_capacity(4096),
            server_params: Vec::new(),
            broken: false,
            tx_status: b'I',
        };
        let params = [
            ("user", config.user.as_str()),
            ("database", config.dbname.as_str()),
            ("application_name", config.application_name.as_str()),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO, YMD"),
            ("TimeZone", "UTC"),
            ("IntervalStyle", "iso_8601"),
            ("extra_float_digits", "3"),
        ];
        frontend::startup_message(params, &mut client.write)?;
        client.flush()?;
        client.authenticate(config)?;
        loop {
            match client.next()? {
                Message::BackendKeyData(_) | Message::NoticeResponse(_) => {}
                Message::ParameterStatus(body) => {
                    let name = body.name().map_err(protocol)?.to_owned();
                    let value = body.value().map_err(protocol)?.to_owned();
                    client.server_params.push((name, value));
                }
                Message::ReadyForQuery(body) => {
                    client.tx_status = body.status();
                    return Ok(client);
                }
                Message::ErrorResponse(body) => return Err(Error::Db(Box::new(db_error(&body)?))),
                _ => return Err(client.unexpected("the startup")),
            }
        }
    }

    fn authenticate(&mut self, config: &Config) -> Result<(), Error> {
        let password = || {
            config.password.as_deref().ok_or_else(|| {
                Error::Auth(format!(
                    "the server asks for a password for user {:?} and none is configured",
                    config.user
                ))
            })
        };
        loop {
            match self.next()? {
                Message::AuthenticationOk => return Ok(()),
                Message::AuthenticationCleartextPassword => {
                    frontend::password_message(password()?.as_bytes(), &mut self.write)?;
                    self.flush()?;
                }
                Message::AuthenticationMd5Password(body) => {
                    let hash =
                        md5_hash(config.user.as_bytes(), password()?.as_bytes(), body.salt());
                    frontend::password_message(hash.as_bytes(), &mut self.write)?;
                    self.flush()?;
                }
                Message::AuthenticationSasl(body) => {
                    let mut offered = Vec::new();
                    let mut mechanisms = body.mechanisms();
                    while let Some(m) = mechanisms.next().map_err(protocol)? {
                        offered.push(m.to_owned());
                    }
                    if !offered.iter().any(|m| m == sasl::SCRAM_SHA_256) {
                        return Err(Error::Auth(format!(
                            "the server offers SASL mechanisms {offered:?}; this client speaks SCRAM-SHA-256 (without channel binding)"
                        )));
                    }
                    let mut scram = sasl::ScramSha256::new(
                        password()?.as_bytes(),
                        sasl::ChannelBinding::unsupported(),
                    );
                    frontend::sasl_initial_response(
                        sasl::SCRAM_SHA_256,
                        scram.message(),
                        &mut self.write,
                    )?;
                    self.flush()?;
                    match self.next()? {
                        Message::AuthenticationSaslContinue(body) => scram
                            .update(body.data())
                            .map_err(|e| Error::Auth(e.to_string()))?,
                        Message::ErrorResponse(body) => {
                            return Err(Error::Db(Box::new(db_error(&body)?)));
                        }
                        _ => return Err(self.unexpected("SCRAM authentication")),
                    }
                    frontend::sasl_response(scram.message(), &mut self.write)?;
                    self.flush()?;
                    match self.next()? {
                        Message::AuthenticationSaslFinal(body) => {
                            scram.finish(body.data()).map_err(|e| {
                                Error::Auth(format!("the server's SCRAM proof is wrong: {e}"))
                            })?
                        }
                        Message::ErrorResponse(body) => {
                            return Err(Error::Db(Box::new(db_error(&body)?)));
                        }
                        _ => return Err(self.unexpected("SCRAM authentication")),
                    }
                }
                Message::ErrorResponse(body) => return Err(Error::Db(Box::new(db_error(&body)?))),
                Message::AuthenticationKerberosV5
                | Message::AuthenticationScmCredential
                | Message::AuthenticationGss
                | Message::AuthenticationSspi
                | Message::AuthenticationGssContinue(_) => {
                    return Err(Error::Auth(
                        "the server asks for Kerberos, GSSAPI or SSPI, which this client does not speak; use scram-sha-256 (or md5, password) for this user in pg_hba.conf".to_owned(),
                    ));
                }
                _ => return Err(self.unexpected("authentication")),
            }
        }
    }

    /// Whether an I/O or protocol error broke the connection (every further call fails).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Whether a transaction is open (`BEGIN` without its `COMMIT` or `ROLLBACK`).
    pub fn in_transaction(&self) -> bool {
        self.tx_status != b'I'
    }

    /// A run-time parameter the server reported at startup (`server_version`, ...).
    pub fn server_param(&self, name: &str) -> Option<&str> {
        self.server_params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Run `sql` (one or more statements, no parameters) with the simple query protocol and
    /// return each statement's result.
    pub fn simple_query(&mut self, sql: &str) -> Result<Vec<QueryResult>, Error> {
        self.usable()?;
        frontend::query(sql, &mut self.write)?;
        self.flush()?;
        let mut results = Vec::new();
        let mut current = QueryResult::default();
        let mut failure = None;
        loop {
            match self.next()? {
                Message::RowDescription(body) => current.columns = columns(&body)?,
                Message::DataRow(body) => current.rows.push(row(&body)?),
                Message::CommandComplete(body) => {
                    current.tag = body.tag().map_err(protocol)?.to_owned();
                    results.push(std::mem::take(&mut current));
                }
                Message::EmptyQueryResponse => results.push(std::mem::take(&mut current)),
                Message::ErrorResponse(body) => failure = Some(db_error(&body)?),
                Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
                Message::ReadyForQuery(body) => {
                    self.tx_status = body.status();
                    return match failure {
                        Some(e) => Err(Error::Db(Box::new(e))),
                        None => Ok(results),
                    };
                }
                _ => return Err(self.unexpected("a simple query")),
            }
        }
    }

    /// Run one statement with parameters (extended protocol, text format both ways).
    pub fn query(&mut self, sql: &str, params: &[Option<&str>]) -> Result<QueryResult, Error> {
        let mut results = self.pipeline(&[Statement { sql, params }])?;
        match results.pop() {
            Some(Ok(result)) => Ok(result),
            Some(Err(e)) => Err(Error::Db(Box::new(e))),
            None => Err(self.unexpected("a query")),
        }
    }

    /// Run one statement with parameters and return how many rows it affected.
    pub fn execute(&mut self, sql: &str, params: &[Option<&str>]) -> Result<u64, Error> {
        Ok(self.query(sql, params)?.affected())
    }

    /// Send `statements` in one round trip (each parsed, bound and executed, one `Sync` at the
    /// end) and read every answer. Statements run in the session's current transaction mode:
    /// outside a transaction, all of them form one implicit transaction, so the first error
    /// rolls back every statement before it and the server skips the rest. The result has one
    /// entry per statement up to and including the first that failed.
    pub fn pipeline(
        &mut self,
        statements: &[Statement<'_>],
    ) -> Result<Vec<Result<QueryResult, DbError>>, Error> {
        self.usable()?;
        for statement in statements {
            frontend::parse("", statement.sql, std::iter::empty(), &mut self.write)?;
            frontend::bind(
                "",
                "",
                [0i16],
                statement.params.iter().copied(),
                |value: Option<&str>, buf: &mut BytesMut| match value {
                    Some(text) => {
                        buf.put_slice(text.as_bytes());
                        Ok(IsNull::No)
                    }
                    None => Ok(IsNull::Yes),
                },
                [0i16],
                &mut self.write,
            )
            .map_err(|e| match e {
                frontend::BindError::Conversion(e) => Error::Protocol(e.to_string()),
                frontend::BindError::Serialization(e) => Error::Io(e),
            })?;
            frontend::describe(b'P', "", &mut self.write)?;
            frontend::execute("", 0, &mut self.write)?;
        }
        frontend::sync(&mut self.write);
        self.flush()?;
        let mut results = Vec::with_capacity(statements.len());
        let mut current = QueryResult::default();
        loop {
            match self.next()? {
                Message::ParseComplete | Message::BindComplete | Message::NoData => {}
                Message::RowDescription(body) => current.columns = columns(&body)?,
                Message::DataRow(body) => current.rows.push(row(&body)?),
                Message::CommandComplete(body) => {
                    current.tag = body.tag().map_err(protocol)?.to_owned();
                    results.push(Ok(std::mem::take(&mut current)));
                }
                Message::EmptyQueryResponse => results.push(Ok(std::mem::take(&mut current))),
                Message::ErrorResponse(body) => {
                    results.push(Err(db_error(&body)?));
                    current = QueryResult::default();
                }
                Message::NoticeResponse(_) | Message::ParameterStatus(_) => {}
                Message::ReadyForQuery(body) => {
                    self.tx_status = body.status();
                    return Ok(results);
                }
                _ => return Err(self.unexpected("a pipeline")),
            }
        }
    }

    /// Say goodbye and close the connection.
    pub fn close(mut self) {
        if !self.broken {
            frontend::terminate(&mut self.write);
            let _ = self.flush();
        }
    }

    fn usable(&self) -> Result<(), Error> {
        if self.broken {
            Err(Error::Io(io::Error::new(
                io::ErrorKind::NotConnected,
                "the connection broke earlier; connect again",
            )))
        } else {
            Ok(())
        }
    }

    fn flush(&mut self) -> Result<(), Error> {
        let result = self.stream.write_all(&self.write);
        self.write.clear();
        result.map_err(|e| {
            self.broken = true;
            Error::Io(e)
        })
    }

    /// The next message from the server, reading from the socket as needed.
    fn next(&mut self) -> Result<Message, Error> {
        loop {
            match Message::parse(&mut self.read) {
                Ok(Some(message)) => return Ok(message),
                Ok(None) => {}
                Err(e) => {
                    self.broken = true;
                    return Err(Error::Protocol(e.to_string()));
                }
            }
            let start = self.read.len();
            self.read.resize(start + READ_CHUNK, 0);
            let n = match self.stream.read(&mut self.read[start..]) {
                Ok(0) => {
                    self.read.truncate(start);
                    self.broken = true;
                    return Err(Error::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    )));
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                Err(e) => {
                    self.read.truncate(start);
                    self.broken = true;
                    return Err(Error::Io(e));
                }
            };
            self.read.truncate(start + n);
        }
    }

    fn unexpected(&mut self, during: &str) -> Error {
        self.broken = true;
        Error::Protocol(format!(
            "unexpected message from the server during {during}"
        ))
    }
}

fn protocol(e: io::Error) -> Error {
    Error::Protocol(e.to_string())
}

fn columns(
    body: &postgres_protocol::message::backend::RowDescriptionBody,
) -> Result<Vec<Column>, Error> {
    let mut out = Vec::new();
    let mut fields = body.fields();
    while let Some(field) = fields.next().map_err(protocol)? {
        out.push(Column {
            name: field.name().to_owned(),
            type_oid: field.type_oid(),
            table_oid: field.table_oid(),
            type_modifier: field.type_modifier(),
        });
    }
    Ok(out)
}

fn row(
    body: &postgres_protocol::message::backend::DataRowBody,
) -> Result<Vec<Option<String>>, Error> {
    let buffer = body.buffer();
    let mut out = Vec::new();
    let mut ranges = body.ranges();
    while let Some(range) = ranges.next().map_err(protocol)? {
        out.push(match range {
            Some(r) => Some(
                std::str::from_utf8(&buffer[r])
                    .map_err(|_| Error::Protocol("a text value is not UTF-8".to_owned()))?
                    .to_owned(),
            ),
            None => None,
        });
    }
    Ok(out)
}

fn db_error(body: &ErrorResponseBody) -> Result<DbError, Error> {
    let mut error = DbError::default();
    let mut fields = body.fields();
    while let Some(field) = fields.next().map_err(protocol)? {
        let value = String::from_utf8_lossy(field.value_bytes()).into_owned();
        match field.type_() {
            b'V' => error.severity = value,
            b'S' if error.severity.is_empty() => error.severity = value,
            b'C' => error.code = value,
            b'M' => error.message = value,
            b'D' => error.detail = Some(value),
            b'H' => error.hint = Some(value),
            b't' => error.table = Some(value),
            b'c' => error.column = Some(value),
            b'n' => error.constraint = Some(value),
            _ => {}
        }
    }
    Ok(error)
}

/// `name` as a quoted SQL identifier (`"my ""odd"" table"`).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `text` as a quoted SQL string literal (standard_conforming_strings on).
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
