//! Text that came from outside (a client's request, a certificate's
//! names) made safe for a log line or a message: control characters
//! escaped (a terminal never sees ESC, NUL or a bidirectional override
//! that someone else typed), long values cut with their length said.

/// Characters of a value quoted in a message before it is cut.
pub const QUOTE_MAX: usize = 100;

/// Characters of a whole log line or error message before it is cut.
pub const LINE_MAX: usize = 2000;

/// Whether `c` is escaped: C0 and C1 controls, DEL, and the Unicode
/// format characters that reorder or hide text on a terminal (bidi
/// embeddings, overrides and isolates, zero-width marks, BOM).
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}')
}

/// `s` with every control and format character escaped (`\n`, `\t`, `\r`,
/// `\\xNN` below 0x80, `\u{NNNN}` above), and cut after `max` characters
/// with what was cut said: `…(15000 bytes in all)`.
pub fn clean(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max + 32));
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push_str(&format!("…({} bytes in all)", s.len()));
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if escaped(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if escaped(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A value from outside, quoted for a message: `'tcp\x1b[31m'`, cut
/// after [`QUOTE_MAX`] characters.
pub fn quote(s: &str) -> String {
    format!("'{}'", clean(s, QUOTE_MAX))
}

/// `msg` with every occurrence of the outside value `value` cut to
/// [`QUOTE_MAX`] characters (a message of another module that quotes the
/// value whole); control characters are left to the sink's [`clean`].
pub fn cut_echo(msg: &str, value: &str) -> String {
    if value.chars().count() <= QUOTE_MAX {
        return msg.to_string();
    }
    msg.replace(value, &clean(value, QUOTE_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_long_values_cut() {
        assert_eq!(clean("tcp\u{1b}[31mRED\0", 100), "tcp\\x1b[31mRED\\x00");
        assert_eq!(clean("a\nb\tc\r\u{7f}", 100), "a\\nb\\tc\\r\\x7f");
        assert_eq!(clean("\u{202e}evil\u{9b}", 100), "\\u{202e}evil\\u{009b}");
        assert_eq!(clean("héllo ✓", 100), "héllo ✓");
        let long = "x".repeat(15_000);
        let c = clean(&long, 100);
        assert_eq!(c, format!("{}…(15000 bytes in all)", "x".repeat(100)));
        assert_eq!(quote("udp"), "'udp'");
        let m = cut_echo(&format!("bad '{long}' here"), &long);
        assert!(
            m.ends_with("(15000 bytes in all)' here") && m.len() < 200,
            "{m}"
        );
        assert_eq!(cut_echo("bad 'udp'", "udp"), "bad 'udp'");
        // Nothing that a terminal acts on survives.
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        assert!(!clean(&all, usize::MAX).chars().any(escaped));
    }
}
