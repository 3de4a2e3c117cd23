//! Java `.properties` files, as Kafka Connect reads them: `key=value`, `key: value` or
//! `key value`; `#` and `!` comments; `\` line continuations; `\t`, `\n`, `\uXXXX` escapes.

/// Parse `.properties` text into ordered pairs; an error names the line.
pub fn parse(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, raw)) = lines.next() {
        let first_line = index + 1;
        let mut logical = raw.trim_start().to_owned();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key).map_err(|e| format!("line {first_line}: {e}"))?;
        let value = unescape(value).map_err(|e| format!("line {first_line}: {e}"))?;
        if key.is_empty() {
            return Err(format!(
                "line {first_line}: a property needs a key before the value"
            ));
        }
        match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some(existing) => existing.1 = value,
            None => pairs.push((key, value)),
        }
    }
    Ok(pairs)
}

/// An odd number of trailing backslashes continues the line.
fn ends_with_continuation(line: &str) -> bool {
    line.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (&line[..i], line[i + 1..].trim_start()),
            c if c.is_whitespace() => {
                let rest = line[i..].trim_start();
                let rest = rest
                    .strip_prefix('=')
                    .or_else(|| rest.strip_prefix(':'))
                    .unwrap_or(rest);
                return (&line[..i], rest.trim_start());
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("invalid unicode escape \\u{hex}"))?;
                out.push(code);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn parses_the_properties_syntax_kafka_connect_uses() {
        let text = "# comment\n! also a comment\nname=local-file-source\nconnector.class : FileStreamSource\ntasks.max 1\n\
                    file=/tmp/a\\\n     ,/tmp/b\nkey\\=with\\:seps=v\nunicode=caf\\u00e9\nempty=\ntopic=first\ntopic=second\n";
        let pairs = parse(text).unwrap();
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("name"), Some("local-file-source"));
        assert_eq!(get("connector.class"), Some("FileStreamSource"));
        assert_eq!(get("tasks.max"), Some("1"));
        assert_eq!(get("file"), Some("/tmp/a,/tmp/b"));
        assert_eq!(get("key=with:seps"), Some("v"));
        assert_eq!(get("unicode"), Some("café"));
        assert_eq!(get("empty"), Some(""));
        assert_eq!(get("topic"), Some("second"), "the last value wins");
    }

    #[test]
    fn errors_name_the_line() {
        let err = parse("a=1\nb=\\uZZZZ\n").unwrap_err();
        assert!(err.starts_with("line 2"), "{err}");
    }
}
