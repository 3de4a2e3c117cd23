//! PostgreSQL's text forms of dates, timestamps, numerics and `bytea`, and the forms Kafka
//! Connect gives them (milliseconds and days since the epoch, a decimal's unscaled bytes),
//! without a date or big-number library.
//!
//! Every timestamp text here is UTC: the client sets `TimeZone=UTC` and `DateStyle=ISO`, so the
//! server writes `2024-02-29 23:59:59.123456` (timestamp) and `2024-02-29 23:59:59.123456+00`
//! (timestamptz).

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (negative before).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    // Howard Hinnant's algorithm: shift the year to start in March so that the leap day is
    // last, then count 400-year eras.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01, as (year, month, day).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A date's text (`2024-02-29`, or with ` BC`) as days since 1970-01-01. `infinity` and
/// `-infinity` are `i32::MAX` and `i32::MIN` days (what the Java driver gives them).
pub fn parse_date(text: &str) -> Option<i64> {
    match text {
        "infinity" => return Some(i64::from(i32::MAX)),
        "-infinity" => return Some(i64::from(i32::MIN)),
        _ => {}
    }
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let mut parts = text.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: u32 = parts.next()?.parse().ok()?;
    let d: u32 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // 1 BC is year 0 of the proleptic calendar.
    let y = if bc { 1 - y } else { y };
    Some(days_from_civil(y, m, d))
}

/// A time of day's text (`23:59:59.123456`, optionally with a zone offset, which is ignored:
/// Kafka Connect's Time has none) as microseconds since midnight.
pub fn parse_time_micros(text: &str) -> Option<i64> {
    let clock = text.find(['+', '-']).map_or(text, |zone| &text[..zone]);
    let mut parts = clock.splitn(3, ':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let (s, micros) = seconds_and_micros(parts.next()?)?;
    Some(((h * 60 + m) * 60 + s) * 1_000_000 + micros)
}

fn seconds_and_micros(text: &str) -> Option<(i64, i64)> {
    let (s, frac) = match text.split_once('.') {
        Some((s, f)) => (s, f),
        None => (text, ""),
    };
    let s: i64 = s.parse().ok()?;
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut micros = 0i64;
    for (i, b) in frac.bytes().take(6).enumerate() {
        micros += i64::from(b - b'0') * 10i64.pow(5 - i as u32);
    }
    Some((s, micros))
}

/// A timestamp's text (`2024-02-29 23:59:59.123456`, with `+00` or another offset for
/// timestamptz, optionally ` BC`) as microseconds since 1970-01-01 00:00 UTC. `infinity` and
/// `-infinity` are `i64::MAX` and `i64::MIN`.
pub fn parse_timestamp_micros(text: &str) -> Option<i64> {
    match text {
        "infinity" => return Some(i64::MAX),
        "-infinity" => return Some(i64::MIN),
        _ => {}
    }
    let (text, bc) = match text.strip_suffix(" BC") {
        Some(t) => (t, true),
        None => (text, false),
    };
    let (date, time) = text.split_once(' ')?;
    // A zone offset follows the seconds: `+05`, `-03:30`, `+05:30:15`.
    let (clock, offset_secs) = match time.rfind(['+', '-']) {
        Some(at) => {
            let sign = if time.as_bytes()[at] == b'-' { -1 } else { 1 };
            let mut secs = 0i64;
            for (i, part) in time[at + 1..].split(':').enumerate() {
                let n: i64 = part.parse().ok()?;
                secs += n * [3600, 60, 1].get(i)?;
            }
            (&time[..at], sign * secs)
        }
        None => (time, 0),
    };
    let days = parse_date(&if bc {
        format!("{date} BC")
    } else {
        date.to_owned()
    })?;
    let mut parts = clock.splitn(3, ':');
    let h: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let (s, micros) = seconds_and_micros(parts.next()?)?;
    let secs = days * 86_400 + (h * 60 + m) * 60 + s - offset_secs;
    Some(secs * 1_000_000 + micros)
}

/// Microseconds since 1970-01-01 00:00 UTC as a timestamp text PostgreSQL reads back exactly
/// (`2024-02-29 23:59:59.123456`, ` BC` before year 1), for a `timestamp` or, in a UTC session,
/// a `timestamptz` parameter.
pub fn format_timestamp_micros(micros: i64) -> String {
    match micros {
        i64::MAX => return "infinity".to_owned(),
        i64::MIN => return "-infinity".to_owned(),
        _ => {}
    }
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let in_day = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let (year, era) = if y <= 0 { (1 - y, " BC") } else { (y, "") };
    format!(
        "{year:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{frac:06}{era}",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// Days since 1970-01-01 as a date text PostgreSQL reads back exactly.
pub fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    let (year, era) = if y <= 0 { (1 - y, " BC") } else { (y, "") };
    format!("{year:04}-{m:02}-{d:02}{era}")
}

/// A `bytea` in the server's hex output form (`\x00ff`) as bytes.
pub fn parse_bytea_hex(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

/// Bytes as a `bytea` parameter text (`\x00ff`).
pub fn format_bytea_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 + bytes.len() * 2);
    out.push_str("\\x");
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A numeric's text (`-12.3400`) rescaled to `scale` digits after the point, as the unscaled
/// integer's two's-complement big-endian bytes, shortest form: what Kafka Connect's Decimal
/// carries (Java's `BigInteger.toByteArray`). `None` for `NaN`, infinities, malformed text, or a
/// value with more digits after the point than `scale` allows without rounding.
pub fn decimal_unscaled_bytes(text: &str, scale: u32) -> Option<Vec<u8>> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty()
        || !int_part
            .bytes()
            .chain(frac_part.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let scale = scale as usize;
    let kept_frac = frac_part.trim_end_matches('0');
    if kept_frac.len() > scale {
        return None;
    }
    // The unscaled integer's decimal digits.
    let mut decimal: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes().take(scale))
        .map(|b| b - b'0')
        .collect();
    decimal.extend(std::iter::repeat_n(
        0,
        scale.saturating_sub(frac_part.len()),
    ));
    // Base 10 to base 256 by repeated division, little-endian bytes.
    let mut magnitude = Vec::new();
    let mut current: Vec<u8> = decimal.into_iter().skip_while(|d| *d == 0).collect();
    while !current.is_empty() {
        let mut remainder = 0u32;
        let mut quotient = Vec::with_capacity(current.len());
        for d in &current {
            let value = remainder * 10 + u32::from(*d);
            let q = value / 256;
            remainder = value % 256;
            if !quotient.is_empty() || q != 0 {
                quotient.push(q as u8);
            }
        }
        magnitude.push(remainder as u8);
        current = quotient;
    }
    // Two's complement, big-endian, with a sign bit.
    let mut bytes: Vec<u8> = magnitude.into_iter().rev().collect();
    if bytes.is_empty() {
        return Some(vec![0]);
    }
    if negative {
        negate(&mut bytes);
        if bytes[0] & 0x80 == 0 {
            bytes.insert(0, 0xff);
        }
        // Shortest form: drop leading 0xff while the next byte keeps the sign.
        while bytes.len() > 1 && bytes[0] == 0xff && bytes[1] & 0x80 != 0 {
            bytes.remove(0);
        }
    } else if bytes[0] & 0x80 != 0 {
        bytes.insert(0, 0);
    }
    Some(bytes)
}

/// Two's-complement negation of a big-endian integer in place: invert, add one.
fn negate(bytes: &mut [u8]) {
    for b in bytes.iter_mut() {
        *b = !*b;
    }
    for b in bytes.iter_mut().rev() {
        let (sum, carry) = b.overflowing_add(1);
        *b = sum;
        if !carry {
            break;
        }
    }
}

/// The decimal text of a two's-complement big-endian unscaled integer with `scale` digits after
/// the point (the inverse of [`decimal_unscaled_bytes`]).
pub fn decimal_from_unscaled_bytes(bytes: &[u8], scale: u32) -> String {
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut magnitude: Vec<u8> = bytes.to_vec();
    if negative {
        negate(&mut magnitude);
    }
    // Base 256 to base 10 by repeated division.
    let mut digits = Vec::new();
    let mut current: Vec<u8> = magnitude.into_iter().skip_while(|b| *b == 0).collect();
    while !current.is_empty() {
        let mut remainder = 0u32;
        let mut quotient = Vec::with_capacity(current.len());
        for b in &current {
            let value = remainder * 256 + u32::from(*b);
            let q = value / 10;
            remainder = value % 10;
            if !quotient.is_empty() || q != 0 {
                quotient.push(q as u8);
            }
        }
        digits.push(b'0' + remainder as u8);
        current = quotient;
    }
    let scale = scale as usize;
    while digits.len() <= scale {
        digits.push(b'0');
    }
    digits.reverse();
    let mut text = String::with_capacity(digits.len() + 2);
    if negative {
        text.push('-');
    }
    let point = digits.len() - scale;
    text.push_str(std::str::from_utf8(&digits[..point]).unwrap_or("0"));
    if scale > 0 {
        text.push('.');
        text.push_str(std::str::from_utf8(&digits[point..]).unwrap_or(""));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_timestamps_round_trip_through_the_epoch_forms() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(format_date(19_782), "2024-02-29");
        assert_eq!(
            parse_date("0001-01-01 BC").map(format_date).as_deref(),
            Some("0001-01-01 BC")
        );
        for text in [
            "2024-02-29 23:59:59.123456",
            "1970-01-01 00:00:00.000000",
            "1900-03-01 12:00:00.000001",
            "0044-03-15 12:00:00.000000 BC",
        ] {
            let micros = parse_timestamp_micros(text).unwrap();
            assert_eq!(format_timestamp_micros(micros), text);
        }
        assert_eq!(
            parse_timestamp_micros("2024-02-29 23:59:59.5+00"),
            Some(1_709_251_199_500_000)
        );
        assert_eq!(
            parse_timestamp_micros("2024-03-01 05:29:59.5+05:30"),
            Some(1_709_251_199_500_000)
        );
        assert_eq!(parse_timestamp_micros("infinity"), Some(i64::MAX));
        assert_eq!(parse_time_micros("01:02:03.5"), Some(3_723_500_000));
        assert!(parse_timestamp_micros("2024-13-01 00:00:00").is_none());
    }

    #[test]
    fn decimals_become_java_s_big_integer_bytes_and_back() {
        for (text, scale, bytes) in [
            ("0", 0, vec![0u8]),
            ("1.5", 1, vec![15]),
            ("-1.5", 1, vec![0xf1]),
            ("127", 0, vec![0x7f]),
            ("128", 0, vec![0x00, 0x80]),
            ("-128", 0, vec![0x80]),
            ("-129", 0, vec![0xff, 0x7f]),
            ("12.34", 4, vec![0x01, 0xe2, 0x08]),
            (
                "12345678901234567890.1234",
                4,
                vec![0x1a, 0x24, 0x9b, 0x1f, 0x10, 0xa0, 0x6c, 0x96, 0xaf, 0xf2],
            ),
        ] {
            assert_eq!(
                decimal_unscaled_bytes(text, scale),
                Some(bytes.clone()),
                "{text}"
            );
            let back = decimal_from_unscaled_bytes(&bytes, scale);
            assert_eq!(
                decimal_unscaled_bytes(&back, scale),
                Some(bytes),
                "{text} -> {back}"
            );
        }
        assert_eq!(decimal_from_unscaled_bytes(&[0xf1], 1), "-1.5");
        assert_eq!(
            decimal_from_unscaled_bytes(&[0x01, 0xe2, 0x08], 4),
            "12.3400"
        );
        assert!(decimal_unscaled_bytes("1.25", 1).is_none(), "would round");
        assert!(decimal_unscaled_bytes("NaN", 2).is_none());
    }

    #[test]
    fn bytea_hex_round_trips() {
        assert_eq!(parse_bytea_hex("\\x00ff10"), Some(vec![0, 255, 16]));
        assert_eq!(format_bytea_hex(&[0, 255, 16]), "\\x00ff10");
        assert!(parse_bytea_hex("00ff").is_none());
    }
}
