//! Connection settings, and the two URL forms users write them in: JDBC's
//! `jdbc:postgresql://host:port/db?user=…&password=…` (what Kafka Connect's JDBC connectors
//! take) and libpq's `postgresql://user:password@host:port/db`.

/// Where and as whom to connect.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// Host name or address.
    pub host: String,
    /// TCP port (PostgreSQL's default is 5432).
    pub port: u16,
    /// The database.
    pub dbname: String,
    /// The role to log in as.
    pub user: String,
    /// Its password, if the server asks for one.
    pub password: Option<String>,
    /// What the server shows in `pg_stat_activity`.
    pub application_name: String,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("dbname", &self.dbname)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("application_name", &self.application_name)
            .finish()
    }
}

/// PostgreSQL's default port.
pub const DEFAULT_PORT: u16 = 5432;

impl Config {
    /// Settings from a URL. User and password in the URL are used unless `user`/`password`
    /// override them later (the caller's keys win: set the fields after). The errors say what
    /// is wrong with the URL, without repeating a password.
    pub fn from_url(url: &str) -> Result<Config, String> {
        let rest = url
            .strip_prefix("jdbc:postgresql://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .or_else(|| url.strip_prefix("postgres://"))
            .ok_or_else(|| {
                "must start with jdbc:postgresql:// (or postgresql://), e.g. jdbc:postgresql://db.example.com:5432/shop".to_owned()
            })?;
        let (before_query, query) = match rest.split_once('?') {
            Some((a, q)) => (a, Some(q)),
            None => (rest, None),
        };
        let (authority, dbname) = match before_query.split_once('/') {
            Some((a, d)) => (a, decode(d)?),
            None => (before_query, String::new()),
        };
        let mut config = Config {
            host: String::new(),
            port: DEFAULT_PORT,
            dbname,
            user: String::new(),
            password: None,
            application_name: "wasm-connect".to_owned(),
        };
        let host_port = match authority.rsplit_once('@') {
            Some((userinfo, host_port)) => {
                match userinfo.split_once(':') {
                    Some((user, password)) => {
                        config.user = decode(user)?;
                        config.password = Some(decode(password)?);
                    }
                    None => config.user = decode(userinfo)?,
                }
                host_port
            }
            None => authority,
        };
        if host_port.contains(',') {
            return Err(
                "lists several hosts; give one host (fail-over between hosts is not supported)"
                    .to_owned(),
            );
        }
        let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| "has a '[' without its ']'".to_owned())?;
            (host, after.strip_prefix(':'))
        } else {
            match host_port.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (host_port, None),
            }
        };
        if host.is_empty() {
            return Err("has no host, e.g. jdbc:postgresql://db.example.com:5432/shop".to_owned());
        }
        config.host = host.to_owned();
        if let Some(port) = port {
            config.port = match port.parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => {
                    return Err(format!(
                        "has port {port:?}; a port is a number from 1 to 65535"
                    ));
                }
            };
        }
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value)?;
            match key {
                "user" => config.user = value,
                "password" => config.password = Some(value),
                "ApplicationName" | "application_name" => config.application_name = value,
                "sslmode" | "ssl" => {
                    if !matches!(value.as_str(), "disable" | "allow" | "prefer" | "false") {
                        return Err(format!(
                            "asks for {key}={value}, but TLS to PostgreSQL is not supported yet; use sslmode=disable on a trusted network"
                        ));
                    }
                }
                // Settings of the Java driver that change nothing on the wire here.
                "connectTimeout"
                | "socketTimeout"
                | "loginTimeout"
                | "tcpKeepAlive"
                | "currentSchema"
                | "stringtype"
                | "reWriteBatchedInserts" => {}
                other => {
                    return Err(format!(
                        "has the parameter {other:?}, which is not supported; remove it (supported: user, password, ApplicationName, sslmode=disable)"
                    ));
                }
            }
        }
        Ok(config)
    }
}

/// Percent-decoding of a URL component.
fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "has a '%' not followed by two hex digits".to_owned())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent-decodes to bytes that are not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_url_forms_parse() {
        let c = Config::from_url(
            "jdbc:postgresql://db.example.com:6543/shop?user=kc&password=p%40ss&sslmode=disable",
        )
        .unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.dbname.as_str(), c.user.as_str()),
            ("db.example.com", 6543, "shop", "kc")
        );
        assert_eq!(c.password.as_deref(), Some("p@ss"));
        let c = Config::from_url("postgresql://kc:secret@[::1]/shop").unwrap();
        assert_eq!((c.host.as_str(), c.port), ("::1", DEFAULT_PORT));
        assert_eq!(c.password.as_deref(), Some("secret"));
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        for (url, says) in [
            ("mysql://h/db", "must start with"),
            ("jdbc:postgresql://h:0/db", "port"),
            ("jdbc:postgresql://a,b/db", "several hosts"),
            ("jdbc:postgresql://h/db?sslmode=require", "TLS"),
            ("jdbc:postgresql://h/db?password=hunter2&bogus=1", "bogus"),
            ("jdbc:postgresql:///db", "no host"),
        ] {
            let err = Config::from_url(url).unwrap_err();
            assert!(err.contains(says), "{url}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
    }
}
