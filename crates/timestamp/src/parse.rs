//! Points in time as users write them (`extract --from/--to`, `ctl dump`):
//! RFC 3339 with up to nine fraction digits and a `Z` or `±HH:MM` offset
//! (a space for the `T`; without a zone only where the caller says UTC is
//! meant, `--utc`), Unix seconds with a fraction, or a span back from now
//! (`-5m`). A refusal says what to add: the zone, the minus sign, the
//! seconds, the unit.

/// What a time without a zone (`2025-11-22 14:00:00`) means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoZone {
    /// Refused, the message saying to add `Z` or an offset (and, when
    /// given, the flag that makes such times UTC: `--utc`).
    Refuse(Option<&'static str>),
    /// UTC (the command's `--utc`).
    Utc,
}

/// Parses `s` into UTC ns since the epoch; `now_ns` anchors relative
/// times. A time without a zone is refused: see [`parse_time_in`].
///
/// Accepted: `2026-11-22T14:02:00.123456789Z`, `2026-11-22 14:02:00+01:00`
/// (a space for `T`, offsets `+01:00` or `+0100`, 0 to 9 fraction digits),
/// `1700000000.000000123` (Unix seconds, up to 9 fraction digits), `-90s`,
/// `-5m`, `-2h`, `-1d`, `-1.5s` (before `now_ns`). The error says what was
/// expected and, for the usual slips, what to add.
pub fn parse_time(s: &str, now_ns: u64) -> Result<u64, String> {
    parse_time_in(s, now_ns, NoZone::Refuse(None))
}

/// [`parse_time`], with `zone` saying what a time without a zone means.
pub fn parse_time_in(s: &str, now_ns: u64, zone: NoZone) -> Result<u64, String> {
    let t = s.trim();
    let forms = "use RFC 3339 (2026-11-22T14:02:00.123456789Z), \
                 Unix seconds (1700000000.5) or a span back from now (-5m)";
    let bad = |why: &str| format!("'{s}' is not a time ({why}): {forms}");
    if let Some(rel) = t.strip_prefix('-') {
        let (num, mul) = match rel.char_indices().last() {
            Some((i, 's')) => (&rel[..i], 1e9),
            Some((i, 'm')) => (&rel[..i], 60e9),
            Some((i, 'h')) => (&rel[..i], 3600e9),
            Some((i, 'd')) => (&rel[..i], 86400e9),
            _ if !rel.is_empty() && rel.parse::<f64>().is_ok() => {
                return Err(format!(
                    "'{s}' is not a time: a span needs a unit: -{rel}s, -{rel}m, -{rel}h or -{rel}d"
                ))
            }
            _ => return Err(bad("a span needs a unit: s, m, h or d")),
        };
        let v: f64 = num.parse().map_err(|_| bad("bad span"))?;
        if !(v >= 0.0 && v.is_finite()) {
            return Err(bad("bad span"));
        }
        return Ok(now_ns.saturating_sub((v * mul) as u64));
    }
    if let Some(span) = unsigned_span(t) {
        // `5m`, `+5m`: a span without its minus sign.
        return Err(format!(
            "'{s}' is not a time: did you mean -{span} ({} before now)? \
             Spans go back from now and start with a minus sign",
            span_words(span)
        ));
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !t.is_empty() {
        let (sec, frac) = t.split_once('.').unwrap_or((t, ""));
        let sec: u64 = sec.parse().map_err(|_| bad("bad seconds"))?;
        let frac = fraction_ns(frac).ok_or_else(|| bad("up to 9 fraction digits"))?;
        return sec
            .checked_mul(1_000_000_000)
            .and_then(|n| n.checked_add(frac))
            .ok_or_else(|| bad("too far in the future"));
    }
    match rfc3339(t) {
        Ok(ns) => Ok(ns),
        Err(Why::NoZone(local)) => match zone {
            NoZone::Utc => Ok(local),
            NoZone::Refuse(flag) => Err(format!(
                "'{s}' is RFC 3339 without a time zone: add Z for UTC or an offset like +01:00 \
                 ({}Z){}",
                t.replacen(' ', "T", 1),
                flag.map(|f| format!(", or give {f} to read it as UTC"))
                    .unwrap_or_default()
            )),
        },
        Err(Why::DateOnly) => Err(format!(
            "'{s}' is a date without a time: add one, e.g. {t}T00:00:00Z"
        )),
        Err(Why::NoSeconds) => Err(format!(
            "'{s}' is not a time (RFC 3339 needs the seconds): e.g. {}:00Z",
            t.trim_end_matches(['Z', 'z'])
        )),
        Err(Why::Bad) => Err(bad("not RFC 3339")),
    }
}

/// `5m`, `+90s`, `1.5h`: a span written without its minus sign.
fn unsigned_span(t: &str) -> Option<&str> {
    let t = t.strip_prefix('+').unwrap_or(t);
    // The last character, whatever its width (`5é` is no span, and no panic).
    let (i, unit) = t.char_indices().last()?;
    let num = &t[..i];
    (matches!(unit, 's' | 'm' | 'h' | 'd') && !num.is_empty() && num.parse::<f64>().is_ok())
        .then_some(t)
}

/// `5m` -> `5 minutes`.
fn span_words(span: &str) -> String {
    let (num, unit) = span.split_at(span.len() - 1);
    let unit = match unit {
        "s" => "second",
        "m" => "minute",
        "h" => "hour",
        _ => "day",
    };
    format!("{num} {unit}{}", if num == "1" { "" } else { "s" })
}

/// Why a text is not RFC 3339.
enum Why {
    /// Date and time without a zone: the time as if it were UTC.
    NoZone(u64),
    /// `2025-11-22` alone.
    DateOnly,
    /// `2025-11-22T14:00` (no seconds).
    NoSeconds,
    /// Anything else.
    Bad,
}

/// Up to 9 digits after the point, as ns.
fn fraction_ns(f: &str) -> Option<u64> {
    if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: u64 = if f.is_empty() { 0 } else { f.parse().ok()? };
    Some(v * 10u64.pow(9 - f.len() as u32))
}

fn rfc3339(t: &str) -> Result<u64, Why> {
    let b = t.as_bytes();
    let date = |b: &[u8]| b.len() >= 10 && b[4] == b'-' && b[7] == b'-';
    if b.len() == 10 && date(b) {
        return Err(Why::DateOnly);
    }
    if (16..=17).contains(&b.len())
        && date(b)
        && matches!(b[10], b'T' | b't' | b' ')
        && b[13] == b':'
    {
        return Err(Why::NoSeconds);
    }
    if b.len() < 19 || !date(b) || !matches!(b[10], b'T' | b't' | b' ') {
        return Err(Why::Bad);
    }
    if b[13] != b':' || b[16] != b':' {
        return Err(Why::Bad);
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, Why> {
        let p = t.get(r).ok_or(Why::Bad)?;
        if !p.bytes().all(|c| c.is_ascii_digit()) {
            return Err(Why::Bad);
        }
        p.parse().map_err(|_| Why::Bad)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60
    {
        return Err(Why::Bad);
    }
    let mut rest = &t[19..];
    let mut frac = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac = fraction_ns(&r[..n]).ok_or(Why::Bad)?;
        rest = &r[n..];
    }
    let days = days_from_civil(y, mo, d);
    let local = days * 86_400 + h * 3600 + mi * 60 + sec;
    let at = |secs: i64| -> Result<u64, Why> {
        if secs < 0 {
            return Err(Why::Bad);
        }
        (secs as u64)
            .checked_mul(1_000_000_000)
            .and_then(|n| n.checked_add(frac))
            .ok_or(Why::Bad)
    };
    let offset_s: i64 = match rest {
        "" => return Err(Why::NoZone(at(local)?)),
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return Err(Why::Bad),
            };
            // ±HH:MM (RFC 3339) or ±HHMM (ISO 8601's basic form).
            let o = &rest[1..];
            if !o.is_ascii() {
                return Err(Why::Bad);
            }
            let (hh, mm) = match o.len() {
                5 if o.as_bytes()[2] == b':' => (&o[..2], &o[3..]),
                4 => (&o[..2], &o[2..]),
                _ => return Err(Why::Bad),
            };
            let digits = |p: &str| p.bytes().all(|c| c.is_ascii_digit());
            if !digits(hh) || !digits(mm) {
                return Err(Why::Bad);
            }
            let (hh, mm): (i64, i64) = (
                hh.parse().map_err(|_| Why::Bad)?,
                mm.parse().map_err(|_| Why::Bad)?,
            );
            if hh > 23 || mm > 59 {
                return Err(Why::Bad);
            }
            sign * (hh * 3600 + mm * 60)
        }
    };
    at(local - offset_s)
}

/// Days in month `m` (1-12) of year `y` (proleptic Gregorian).
pub fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
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
    #[test]
    fn no_text_makes_the_parser_panic() {
        // Every short string over ASCII that times are made of and
        // characters of two, three and four bytes in UTF-8 (C1 controls
        // among them: what a URL's %C2%80 decodes to), in every place.
        let alphabet = [
            "0",
            "1",
            "5",
            "9",
            "-",
            "+",
            ":",
            ".",
            "T",
            " ",
            "Z",
            "s",
            "m",
            "d",
            "\u{80}",
            "é",
            "€",
            "\u{1f600}",
        ];
        let mut n = 0;
        for a in alphabet {
            for b in alphabet {
                for c in alphabet {
                    for s in [format!("{a}{b}{c}"), format!("{a}{b}"), a.to_string()] {
                        let _ = parse_time(&s, 1_700_000_000_000_000_000);
                        n += 1;
                    }
                }
            }
        }
        for s in [
            "2025-11-22T00:00:00+aéb",
            "2025-11-22T00:00:00+é:1",
            "2025-11-22T00:00:00\u{80}",
            "2025-11-22T00:00:00.5é",
            "2025-11-22Té0:00:00Z",
            "-5é",
            "+5é",
            "5\u{80}",
        ] {
            assert!(parse_time(s, 0).is_err(), "{s}");
            n += 1;
        }
        assert!(n > 5000);
    }

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
    fn slips_are_told_what_to_add() {
        let now = 1_763_820_000_000_000_000;
        let e = parse_time("2025-11-22T14:00:00", now).unwrap_err();
        assert!(
            e.contains("without a time zone: add Z for UTC or an offset like +01:00")
                && e.contains("(2025-11-22T14:00:00Z)"),
            "{e}"
        );
        let e =
            parse_time_in("2025-11-22 14:00:00", now, NoZone::Refuse(Some("--utc"))).unwrap_err();
        assert!(e.contains("or give --utc to read it as UTC"), "{e}");
        assert_eq!(
            parse_time_in("2025-11-22 14:02:00.5", now, NoZone::Utc),
            Ok(1_763_820_120_500_000_000)
        );
        // With a zone, --utc changes nothing.
        assert_eq!(
            parse_time_in("2025-11-22 15:02:00+01:00", now, NoZone::Utc),
            Ok(1_763_820_120_000_000_000)
        );
        assert_eq!(
            parse_time("2025-11-22 15:02:00+0100", now),
            Ok(1_763_820_120_000_000_000)
        );
        let e = parse_time("5m", now).unwrap_err();
        assert!(
            e.contains("did you mean -5m (5 minutes before now)?"),
            "{e}"
        );
        let e = parse_time("+90s", now).unwrap_err();
        assert!(
            e.contains("did you mean -90s (90 seconds before now)?"),
            "{e}"
        );
        let e = parse_time("-5", now).unwrap_err();
        assert!(e.contains("-5s, -5m, -5h or -5d"), "{e}");
        let e = parse_time("2025-11-22", now).unwrap_err();
        assert!(e.contains("e.g. 2025-11-22T00:00:00Z"), "{e}");
        let e = parse_time("2025-11-22T14:00Z", now).unwrap_err();
        assert!(
            e.contains("needs the seconds): e.g. 2025-11-22T14:00:00Z"),
            "{e}"
        );
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
            assert!(
                e.contains("RFC 3339") || e.contains("-5s, -5m"),
                "{bad}: {e}"
            );
        }
    }
}
