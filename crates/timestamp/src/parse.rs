//! Points in time as users write them (`extract --from/--to`, `ctl dump`):
//! RFC 3339 with up to nine fraction digits and a `Z` or `±HH:MM` offset,
//! Unix seconds with a fraction, or a span back from now (`-5m`).

/// Parses `s` into UTC ns since the epoch; `now_ns` anchors relative times.
///
/// Accepted: `2026-11-22T14:02:00.123456789Z`, `2026-11-22 14:02:00+01:00`
/// (a space for `T`, offsets, 0 to 9 fraction digits), `1700000000.000000123`
/// (Unix seconds, up to 9 fraction digits), `-90s`, `-5m`, `-2h`, `-1d`,
/// `-1.5s` (before `now_ns`). The error says what was expected.
pub fn parse_time(s: &str, now_ns: u64) -> Result<u64, String> {
    let t = s.trim();
    let bad = |why: &str| {
        format!(
            "'{s}' is not a time ({why}): use RFC 3339 (2026-11-22T14:02:00.123456789Z), \
             Unix seconds (1700000000.5) or a span back from now (-5m)"
        )
    };
    if let Some(rel) = t.strip_prefix('-') {
        let (num, mul) = match rel.char_indices().last() {
            Some((i, 's')) => (&rel[..i], 1e9),
            Some((i, 'm')) => (&rel[..i], 60e9),
            Some((i, 'h')) => (&rel[..i], 3600e9),
            Some((i, 'd')) => (&rel[..i], 86400e9),
            _ => return Err(bad("a span needs a unit: s, m, h or d")),
        };
        let v: f64 = num.parse().map_err(|_| bad("bad span"))?;
        if !(v >= 0.0 && v.is_finite()) {
            return Err(bad("bad span"));
        }
        return Ok(now_ns.saturating_sub((v * mul) as u64));
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let (sec, frac) = t.split_once('.').unwrap_or((t, ""));
        let sec: u64 = sec.parse().map_err(|_| bad("bad seconds"))?;
        let frac = fraction_ns(frac).ok_or_else(|| bad("up to 9 fraction digits"))?;
        return sec
            .checked_mul(1_000_000_000)
            .and_then(|n| n.checked_add(frac))
            .ok_or_else(|| bad("too far in the future"));
    }
    rfc3339(t).ok_or_else(|| bad("not RFC 3339"))
}

/// Up to 9 digits after the point, as ns.
fn fraction_ns(f: &str) -> Option<u64> {
    if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u64 = if f.is_empty() { 0 } else { f.parse().ok()? };
    Some(v * 10u64.pow(9 - f.len() as u32))
}

fn rfc3339(t: &str) -> Option<u64> {
    let b = t.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let p = t.get(r)?;
        p.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| p.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60
    {
        return None;
    }
    let mut rest = &t[19..];
    let mut frac = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac = fraction_ns(&r[..n])?;
        rest = &r[n..];
    }
    let offset_s: i64 = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let o = &rest.as_bytes()[1..];
            if o.len() != 5 || o[2] != b':' {
                return None;
            }
            let digits = |p: &[u8]| p.iter().all(u8::is_ascii_digit);
            if !digits(&o[..2]) || !digits(&o[3..]) {
                return None;
            }
            let hh: i64 = rest[1..3].parse().ok()?;
            let mm: i64 = rest[4..6].parse().ok()?;
            if hh > 23 || mm > 59 {
                return None;
            }
            sign * (hh * 3600 + mm * 60)
        }
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_s;
    if secs < 0 {
        return None;
    }
    (secs as u64).checked_mul(1_000_000_000)?.checked_add(frac)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format_rfc3339;

    #[test]
    fn forms() {
        let now = 1_763_820_000_000_000_000;
        let t = 1_763_820_120_123_456_789u64;
        assert_eq!(parse_time(&format_rfc3339(t), now), Ok(t));
        assert_eq!(
            parse_time("2025-11-22T14:02:00.123456789Z", now),
            Ok(1_763_820_120_123_456_789)
        );
        assert_eq!(
            parse_time("2025-11-22T15:02:00.123456789+01:00", now),
            Ok(1_763_820_120_123_456_789)
        );
        assert_eq!(
            parse_time("2025-11-22 13:32:00.5-00:30", now),
            Ok(1_763_820_120_500_000_000)
        );
        assert_eq!(
            parse_time("2025-11-22T14:02:00Z", now),
            Ok(1_763_820_120_000_000_000)
        );
        assert_eq!(
            parse_time("1700000000.000000123", now),
            Ok(1_700_000_000_000_000_123)
        );
        assert_eq!(parse_time("1700000000", now), Ok(1_700_000_000_000_000_000));
        assert_eq!(
            parse_time("1700000000.5", now),
            Ok(1_700_000_000_500_000_000)
        );
        assert_eq!(parse_time("-5m", now), Ok(now - 300_000_000_000));
        assert_eq!(parse_time("-1.5s", now), Ok(now - 1_500_000_000));
        assert_eq!(
            parse_time("2024-02-29T00:00:00Z", now),
            Ok(1_709_164_800_000_000_000)
        );
        // Round trip over many stamps.
        for k in 0..2000u64 {
            let t = k * 987_654_321_123_457 % 4_000_000_000_000_000_000;
            assert_eq!(
                parse_time(&format_rfc3339(t), now),
                Ok(t),
                "{}",
                format_rfc3339(t)
            );
        }
    }

    #[test]
    fn refusals_say_what_is_expected() {
        for bad in [
            "yesterday",
            "2025-13-01T00:00:00Z",
            "2025-02-30T00:00:00Z",
            "2025-11-22T14:02:00",
            "2025-11-22T14:02:00.1234567890Z",
            "2025-11-22T24:00:00Z",
            "1700000000.1234567891",
            "-5",
            "-5x",
            "2025-11-22T14:02:00+1:00",
        ] {
            let e = parse_time(bad, 0).unwrap_err();
            assert!(e.contains("RFC 3339"), "{bad}: {e}");
        }
    }
}
