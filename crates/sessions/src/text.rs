//! Names as they are stored: text that is safe to print anywhere (a
//! terminal, the console, a CSV), whatever bytes the wire held.
//!
//! Valid UTF-8 is kept, except: a backslash becomes `\\`; control
//! characters (C0, DEL, C1) and the invisible characters that reorder or
//! hide text (zero-width, bidirectional overrides and isolates, BOM)
//! become `\u{HHHH}`; each byte that is not valid UTF-8 becomes `\xHH`. A
//! name is read from at most `max` bytes of input (longer ones are cut
//! there, on a character boundary, and end in `\u{2026}`, an ellipsis);
//! an empty name is dropped (None).

use std::fmt::Write;

/// Whether `c` is shown escaped.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `bytes` as stored text (see the module docs), or None when empty.
pub fn escape(bytes: &[u8], max: usize) -> Option<String> {
    if bytes.is_empty() {
        return None;
    }
    let (b, cut) = if bytes.len() > max {
        // Back to the start of a character the cut would split.
        let mut end = max;
        while end > 0 && max - end < 3 && bytes[end] & 0xc0 == 0x80 {
            end -= 1;
        }
        (&bytes[..end], true)
    } else {
        (bytes, false)
    };
    let mut s = String::with_capacity(b.len() + 4);
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                s.push_str("\\\\");
            } else if hidden(c) {
                let _ = write!(s, "\\u{{{:04x}}}", c as u32);
            } else {
                s.push(c);
            }
        }
        for &x in chunk.invalid() {
            let _ = write!(s, "\\x{x:02x}");
        }
    }
    if cut {
        s.push('\u{2026}');
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_could_hurt_and_keeps_the_rest() {
        assert_eq!(escape(b"example.com", 255).as_deref(), Some("example.com"));
        assert_eq!(escape(b"", 255), None);
        assert_eq!(
            escape(b"a\x1b[31mb", 255).as_deref(),
            Some("a\\u{001b}[31mb")
        );
        assert_eq!(escape(b"a\\b", 255).as_deref(), Some("a\\\\b"));
        assert_eq!(escape(b"\xff\xfeok", 255).as_deref(), Some("\\xff\\xfeok"));
        assert_eq!(
            escape("caf\u{e9}".as_bytes(), 255).as_deref(),
            Some("caf\u{e9}")
        );
        assert_eq!(
            escape("x\u{202e}y".as_bytes(), 255).as_deref(),
            Some("x\\u{202e}y")
        );
        assert_eq!(escape(b"abcdef", 3).as_deref(), Some("abc\u{2026}"));
        assert_eq!(
            escape("ab\u{e9}".as_bytes(), 3).as_deref(),
            Some("ab\u{2026}")
        );
        for b in 0u8..=255 {
            let s = escape(&[b], 8).unwrap();
            assert!(!s.chars().any(hidden), "{b:#x}: {s:?}");
        }
    }
}
