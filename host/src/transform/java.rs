//! The few pieces of Java that transforms' results depend on, written to give the same text:
//! `Double.toString`, `Float.toString`, `BigDecimal.toString`, the number parsers `Cast` uses,
//! Connect's `Values.convertToString` (how a header value is written), and
//! `java.text.SimpleDateFormat` in UTC (TimestampConverter, TimestampRouter).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::data::Value;

const MILLIS_PER_DAY: i64 = 86_400_000;

/// `Double.toString(value)`.
pub fn double_to_string(value: f64) -> String {
    java_float(value, format!("{value:e}"))
}

/// `Float.toString(value)`.
pub fn float_to_string(value: f32) -> String {
    java_float(f64::from(value), format!("{value:e}"))
}

/// Java's floating-point text from the shortest digits (`scientific` as Rust's `{:e}` writes
/// them): plain between 10^-3 and 10^7, else `d.dddE<n>`; always a digit after the point.
fn java_float(value: f64, scientific: String) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .into();
    }
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    let magnitude = value.abs();
    if (1e-3..1e7).contains(&magnitude) {
        if exponent >= 0 {
            let point = exponent as usize + 1;
            if digits.len() <= point {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', point - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..point]);
                out.push('.');
                out.push_str(&digits[point..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        out.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        out.push('E');
        out.push_str(&exponent.to_string());
    }
    out
}

/// `BigDecimal.toString()` of `unscaled × 10^-scale`.
pub fn decimal_to_string(unscaled: i128, scale: i32) -> String {
    let negative = unscaled < 0;
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if negative { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let adjusted = -(scale as i64) + (digits.len() as i64 - 1);
    if scale > 0 && adjusted >= -6 {
        let scale = scale as usize;
        if digits.len() > scale {
            let point = digits.len() - scale;
            format!("{sign}{}.{}", &digits[..point], &digits[point..])
        } else {
            let zeros = "0".repeat(scale - digits.len());
            format!("{sign}0.{zeros}{digits}")
        }
    } else {
        let mut out = format!("{sign}{}", &digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('E');
        if adjusted >= 0 {
            out.push('+');
        }
        out.push_str(&adjusted.to_string());
        out
    }
}

/// A `BigDecimal`'s `doubleValue()` (nearest, as far as f64 parsing is).
pub fn decimal_to_f64(unscaled: i128, scale: i32) -> f64 {
    format!("{unscaled}e{}", -(scale as i64))
        .parse()
        .unwrap_or(f64::NAN)
}

/// `BigDecimal.longValue()`: the integer part (truncated), its low 64 bits.
pub fn decimal_to_i64(unscaled: i128, scale: i32) -> i64 {
    if scale <= 0 {
        let factor = 10i128.checked_pow((-scale) as u32).unwrap_or(0);
        unscaled.wrapping_mul(factor) as i64
    } else {
        let divisor = 10i128.checked_pow(scale as u32);
        divisor.map_or(0, |d| (unscaled / d) as i64)
    }
}

/// Java's `Long.parseLong` and friends: an optional sign and decimal digits, in range.
pub fn parse_integer<T: std::str::FromStr>(text: &str) -> Option<T> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Java's `Double.parseDouble` (and, narrowed, `Float.parseFloat`): surrounding whitespace
/// ignored, `NaN` and `Infinity` spelled as Java does, an `f`/`d` suffix allowed.
pub fn parse_double(text: &str) -> Option<f64> {
    let text = text.trim_matches(|c: char| c <= ' ');
    let (negative, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let sign = if negative { -1.0 } else { 1.0 };
    match body {
        "NaN" => return Some(f64::NAN),
        "Infinity" => return Some(sign * f64::INFINITY),
        _ => {}
    }
    let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
    let valid = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && body.bytes().any(|b| b.is_ascii_digit());
    if !valid {
        return None;
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

/// Java's `Boolean.parseBoolean`.
pub fn parse_boolean(text: &str) -> bool {
    text.eq_ignore_ascii_case("true")
}

/// `String.valueOf(value)` for the values Cast turns into strings; `Date` and byte arrays as
/// Cast writes them.
pub fn to_java_string(value: &Value) -> String {
    let mut out = String::new();
    append(&mut out, value, false);
    out
}

/// Connect's `Values.convertToString` (`None` for null): a header's text.
pub fn values_to_string(value: &Value) -> Option<String> {
    if value.is_null() {
        return None;
    }
    let mut out = String::new();
    append(&mut out, value, false);
    Some(out)
}

/// `Values.append`.
fn append(out: &mut String, value: &Value, embedded: bool) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int8(v) => out.push_str(&v.to_string()),
        Value::Int16(v) => out.push_str(&v.to_string()),
        Value::Int32(v) => out.push_str(&v.to_string()),
        Value::Int64(v) => out.push_str(&v.to_string()),
        Value::Float32(v) => out.push_str(&float_to_string(*v)),
        Value::Float64(v) => out.push_str(&double_to_string(*v)),
        Value::Decimal(u, s) => out.push_str(&decimal_to_string(*u, *s)),
        Value::String(s) if embedded => {
            out.push('"');
            out.push_str(&s.replace('\\', "\\\\").replace('"', "\\\""));
            out.push('"');
        }
        Value::String(s) => out.push_str(s),
        Value::Bytes(b) if embedded => {
            out.push('"');
            out.push_str(&BASE64.encode(b));
            out.push('"');
        }
        Value::Bytes(b) => out.push_str(&BASE64.encode(b)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, item, true);
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, k, true);
                out.push(':');
                append(out, v, true);
            }
            out.push('}');
        }
        Value::Struct(s) => {
            out.push('{');
            for (i, field) in s.schema.fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                append(out, &Value::String(field.name.clone()), true);
                out.push(':');
                append(out, s.get(i), true);
            }
            out.push('}');
        }
        Value::Date(millis) => out.push_str(&date_to_string(*millis)),
    }
}

/// `Values.dateFormatFor(date).format(date)` (in UTC): a time of day, a date, or a timestamp.
pub fn date_to_string(millis: i64) -> String {
    let pattern = if millis < MILLIS_PER_DAY {
        "HH:mm:ss.SSS'Z'"
    } else if millis % MILLIS_PER_DAY == 0 {
        "yyyy-MM-dd"
    } else {
        "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    };
    // The patterns above are valid.
    DateFormat::new(pattern).map_or_else(|_| millis.to_string(), |f| f.format(millis))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (month and day may overflow, as
/// Java's lenient calendar allows).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = year + (month - 1).div_euclid(12);
    let month = (month - 1).rem_euclid(12) + 1;
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468 + (day - 1)
}

/// The date of a day count since 1970-01-01: (year, month 1-12, day 1-31).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Field(char, usize),
    Literal(String),
}

/// A `SimpleDateFormat` pattern in UTC, English names. Letters: `y Y u M L d D E a H k K h m s
/// S Z X z` and quoted text; other letters are refused as Java refuses them.
#[derive(Debug, Clone)]
pub struct DateFormat {
    pattern: String,
    tokens: Vec<Token>,
}

impl DateFormat {
    /// Compile `pattern`; `Err` says what Java's `IllegalArgumentException` says.
    pub fn new(pattern: &str) -> Result<DateFormat, String> {
        let mut tokens = Vec::new();
        let chars: Vec<char> = pattern.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                // '' is a quote; 'text' is literal text.
                if chars.get(i + 1) == Some(&'\'') {
                    push_literal(&mut tokens, "'");
                    i += 2;
                    continue;
                }
                let mut text = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err("Unterminated quote".to_owned()),
                        Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                            text.push('\'');
                            i += 2;
                        }
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            text.push(ch);
                            i += 1;
                        }
                    }
                }
                push_literal(&mut tokens, &text);
            } else if c.is_ascii_alphabetic() {
                if !"yYuMLdDEaHkKhmsSZXz".contains(c) {
                    return Err(format!("Illegal pattern character '{c}'"));
                }
                let mut count = 1;
                while chars.get(i + count) == Some(&c) {
                    count += 1;
                }
                if c == 'X' && count > 3 {
                    return Err("invalid ISO 8601 format: length=4".to_owned());
                }
                tokens.push(Token::Field(c, count));
                i += count;
            } else {
                push_literal(&mut tokens, &c.to_string());
                i += 1;
            }
        }
        Ok(DateFormat {
            pattern: pattern.to_owned(),
            tokens,
        })
    }

    /// The pattern as given (`toPattern()`).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// `format(new Date(millis))` in UTC.
    pub fn format(&self, millis: i64) -> String {
        let days = millis.div_euclid(MILLIS_PER_DAY);
        let in_day = millis.rem_euclid(MILLIS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        let hour = in_day / 3_600_000;
        let minute = in_day / 60_000 % 60;
        let second = in_day / 1000 % 60;
        let milli = in_day % 1000;
        let mut out = String::new();
        for token in &self.tokens {
            let (c, n) = match token {
                Token::Literal(text) => {
                    out.push_str(text);
                    continue;
                }
                Token::Field(c, n) => (*c, *n),
            };
            let number = |out: &mut String, v: i64| out.push_str(&format!("{v:0n$}"));
            match c {
                'y' | 'Y' => {
                    let era_year = if year <= 0 { 1 - year } else { year };
                    if n == 2 {
                        out.push_str(&format!("{:02}", era_year % 100));
                    } else {
                        number(&mut out, era_year);
                    }
                }
                'u' => number(&mut out, (days + 3).rem_euclid(7) + 1),
                'M' | 'L' if n >= 4 => out.push_str(MONTHS[(month - 1) as usize]),
                'M' | 'L' if n == 3 => out.push_str(&MONTHS[(month - 1) as usize][..3]),
                'M' | 'L' => number(&mut out, month),
                'd' => number(&mut out, day),
                'D' => number(&mut out, days - days_from_civil(year, 1, 1) + 1),
                'E' => {
                    let name = DAYS[days.rem_euclid(7) as usize];
                    out.push_str(if n >= 4 { name } else { &name[..3] });
                }
                'a' => out.push_str(if hour < 12 { "AM" } else { "PM" }),
                'H' => number(&mut out, hour),
                'k' => number(&mut out, if hour == 0 { 24 } else { hour }),
                'K' => number(&mut out, hour % 12),
                'h' => number(&mut out, if hour % 12 == 0 { 12 } else { hour % 12 }),
                'm' => number(&mut out, minute),
                's' => number(&mut out, second),
                'S' => number(&mut out, milli),
                'Z' => out.push_str("+0000"),
                'X' => out.push('Z'),
                'z' => out.push_str(if n >= 4 {
                    "Coordinated Universal Time"
                } else {
                    "UTC"
                }),
                _ => {}
            }
        }
        out
    }

    /// `parse(text)` in UTC, leniently as Java does (fields that overflow roll over; text after
    /// the pattern is ignored). `None`: Java's `ParseException`.
    pub fn parse(&self, text: &str) -> Option<i64> {
        let bytes = text.as_bytes();
        let mut at = 0;
        let (mut year, mut month, mut day) = (1970i64, 1i64, 1i64);
        let mut day_of_year: Option<i64> = None;
        let (mut hour, mut minute, mut second, mut milli) = (0i64, 0i64, 0i64, 0i64);
        let mut pm: Option<bool> = None;
        let mut twelve_hour = false;
        let mut offset_minutes = 0i64;
        for (index, token) in self.tokens.iter().enumerate() {
            let (c, n) = match token {
                Token::Literal(lit) => {
                    if !text[at..].starts_with(lit.as_str()) {
                        return None;
                    }
                    at += lit.len();
                    continue;
                }
                Token::Field(c, n) => (*c, *n),
            };
            // A numeric field directly followed by another numeric field takes exactly its
            // count of digits (Java's "abutting fields").
            let abutting = matches!(
                self.tokens.get(index + 1),
                Some(Token::Field(next, m)) if is_numeric(*next, *m)
            );
            let limit = if abutting { at + n } else { bytes.len() };
            let read_number = |at: &mut usize, signed: bool| read_digits(text, at, limit, signed);
            match c {
                'y' | 'Y' => {
                    let start = at;
                    let value = read_number(&mut at, true)?;
                    year = if n <= 2 && at - start == 2 {
                        // Java's default century: within 80 years before and 20 after now.
                        let now = civil_from_days(now_millis().div_euclid(MILLIS_PER_DAY)).0;
                        let low = now - 80;
                        let mut candidate = low - low.rem_euclid(100) + value;
                        if candidate < low {
                            candidate += 100;
                        }
                        candidate
                    } else {
                        value
                    };
                }
                'M' | 'L' if n >= 3 => {
                    let (index, len) = match_name(&text[at..], &MONTHS)?;
                    month = index as i64 + 1;
                    at += len;
                }
                'M' | 'L' => month = read_number(&mut at, false)?,
                'd' => day = read_number(&mut at, false)?,
                'D' => day_of_year = Some(read_number(&mut at, false)?),
                'u' => {
                    read_number(&mut at, false)?;
                }
                'E' => {
                    let (_, len) = match_name(&text[at..], &DAYS)?;
                    at += len;
                }
                'a' => {
                    // `get`: the text is the record's, and may hold any character there.
                    match text.get(at..at + 2) {
                        Some(m) if m.eq_ignore_ascii_case("AM") => pm = Some(false),
                        Some(m) if m.eq_ignore_ascii_case("PM") => pm = Some(true),
                        _ => return None,
                    }
                    at += 2;
                }
                'H' => hour = read_number(&mut at, false)?,
                'k' => {
                    hour = read_number(&mut at, false)?;
                    if hour == 24 {
                        hour = 0;
                    }
                }
                'K' => {
                    hour = read_number(&mut at, false)?;
                    twelve_hour = true;
                }
                'h' => {
                    hour = read_number(&mut at, false)?;
                    if hour == 12 {
                        hour = 0;
                    }
                    twelve_hour = true;
                }
                'm' => minute = read_number(&mut at, false)?,
                's' => second = read_number(&mut at, false)?,
                'S' => milli = read_number(&mut at, false)?,
                'Z' | 'X' | 'z' => {
                    let (minutes, len) = parse_zone(&text[at..], c)?;
                    offset_minutes = minutes;
                    at += len;
                }
                _ => return None,
            }
        }
        if twelve_hour && pm == Some(true) || !twelve_hour && pm == Some(true) && hour < 12 {
            hour += 12;
        }
        // Fields out of any calendar's range are no date (and would overflow the arithmetic).
        const FIELD_LIMIT: i64 = 1_000_000_000;
        let fields = [year, month, day, hour, minute, second, milli];
        if fields
            .iter()
            .chain(&day_of_year)
            .any(|f| f.abs() > FIELD_LIMIT)
        {
            return None;
        }
        let days = match day_of_year {
            Some(doy) => days_from_civil(year, 1, 1) + doy - 1,
            None => days_from_civil(year, month, day),
        };
        days.checked_mul(MILLIS_PER_DAY)?
            .checked_add(hour * 3_600_000 + minute * 60_000 + second * 1000 + milli)?
            .checked_sub(offset_minutes * 60_000)
    }
}

/// The number at `*at` (an optional sign if `signed`, digits up to `limit`), moving `at` past it.
fn read_digits(text: &str, at: &mut usize, limit: usize, signed: bool) -> Option<i64> {
    let bytes = text.as_bytes();
    let start = *at;
    let mut end = start;
    if signed && end < bytes.len() && (bytes[end] == b'-' || bytes[end] == b'+') {
        end += 1;
    }
    while end < bytes.len().min(limit) && bytes[end].is_ascii_digit() {
        end += 1;
    }
    let value = text[start..end].parse::<i64>().ok()?;
    *at = end;
    Some(value)
}

fn push_literal(tokens: &mut Vec<Token>, text: &str) {
    if let Some(Token::Literal(last)) = tokens.last_mut() {
        last.push_str(text);
    } else {
        tokens.push(Token::Literal(text.to_owned()));
    }
}

fn is_numeric(c: char, n: usize) -> bool {
    match c {
        'M' | 'L' => n < 3,
        'y' | 'Y' | 'u' | 'd' | 'D' | 'H' | 'k' | 'K' | 'h' | 'm' | 's' | 'S' => true,
        _ => false,
    }
}

/// The index of the name (full, or its first three letters) `text` starts with, and its length.
fn match_name(text: &str, names: &[&str]) -> Option<(usize, usize)> {
    let lower = text.to_ascii_lowercase();
    for (i, name) in names.iter().enumerate() {
        if lower.starts_with(&name.to_ascii_lowercase()) {
            return Some((i, name.len()));
        }
    }
    for (i, name) in names.iter().enumerate() {
        if lower.starts_with(&name[..3].to_ascii_lowercase()) {
            return Some((i, 3));
        }
    }
    None
}

/// A zone at the start of `text`: `Z`, `±hh`, `±hhmm`, `±hh:mm`, `UTC`, `GMT`, `GMT±hh:mm`;
/// its offset in minutes and its length.
fn parse_zone(text: &str, letter: char) -> Option<(i64, usize)> {
    if letter == 'X' && text.starts_with('Z') {
        return Some((0, 1));
    }
    for name in ["UTC", "GMT"] {
        if text.starts_with(name) && letter != 'X' {
            let rest = &text[3..];
            if rest.starts_with(['+', '-']) {
                let (minutes, len) = parse_offset(rest)?;
                return Some((minutes, 3 + len));
            }
            return Some((0, 3));
        }
    }
    parse_offset(text)
}

fn parse_offset(text: &str) -> Option<(i64, usize)> {
    let sign = match text.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: Vec<u8> = text.bytes().skip(1).take(5).collect();
    let d = |i: usize| -> Option<i64> {
        digits
            .get(i)
            .filter(|b| b.is_ascii_digit())
            .map(|b| i64::from(b - b'0'))
    };
    let hours = d(0)? * 10 + d(1)?;
    if digits.get(2) == Some(&b':') {
        let minutes = d(3)? * 10 + d(4)?;
        return Some((sign * (hours * 60 + minutes), 6));
    }
    match (d(2), d(3)) {
        (Some(a), Some(b)) => Some((sign * (hours * 60 + a * 10 + b), 5)),
        _ => Some((sign * hours * 60, 3)),
    }
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java() {
        for (v, s) in [
            (1.0, "1.0"),
            (100000.0, "100000.0"),
            (1e7, "1.0E7"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (-2.5, "-2.5"),
            (1234567.5, "1234567.5"),
            (1.5e-10, "1.5E-10"),
        ] {
            assert_eq!(double_to_string(v), s, "{v}");
        }
        assert_eq!(float_to_string(1.1), "1.1");
    }

    #[test]
    fn decimals_print_as_java() {
        assert_eq!(decimal_to_string(12345, 2), "123.45");
        assert_eq!(decimal_to_string(-5, 3), "-0.005");
        assert_eq!(decimal_to_string(5, 0), "5");
        assert_eq!(decimal_to_string(5, -2), "5E+2");
        assert_eq!(decimal_to_string(5, 10), "5E-10");
    }

    #[test]
    fn dates_round_trip() {
        let f = DateFormat::new("yyyy-MM-dd HH:mm:ss.SSS").unwrap();
        let millis = 1_700_000_123_456;
        let text = f.format(millis);
        assert_eq!(text, "2023-11-14 22:15:23.456");
        assert_eq!(f.parse(&text), Some(millis));
        let f = DateFormat::new("yyyyMMdd").unwrap();
        assert_eq!(f.format(0), "19700101");
        assert_eq!(
            f.parse("20240229"),
            Some(days_from_civil(2024, 2, 29) * MILLIS_PER_DAY)
        );
        // Lenient: month 13 is January of the next year.
        assert_eq!(f.parse("20231301"), f.parse("20240101"));
        assert!(DateFormat::new("yyyy-bb").is_err());
        // Any text may come to be parsed: no panic on a character where AM/PM would be.
        assert_eq!(DateFormat::new("ha").unwrap().parse("1é"), None);
        assert_eq!(f.parse("99999999999999999"), None);
        assert_eq!(
            DateFormat::new("EEE, d MMM yyyy").unwrap().format(0),
            "Thu, 1 Jan 1970"
        );
    }
}
