//! The TLS ClientHello: its server name, ALPN protocols and the JA4 client
//! fingerprint, from the first bytes a TCP client sent (the record layer,
//! a handshake message possibly split over several records) or from a
//! QUIC Initial's CRYPTO data (the handshake message itself).
//!
//! # JA4
//!
//! Implemented here from FoxIO's published definition (technical_details/
//! JA4.md in FoxIO's ja4 repository; JA4 is BSD-3-Clause, unlike the rest
//! of JA4+, which this crate does not implement):
//! `{t|q}{version}{d|i}{ciphers:02}{extensions:02}{alpn}_{b}_{c}` where
//! GREASE values (RFC 8701: 0x?a?a with equal bytes) are ignored
//! everywhere; the version is the highest of `supported_versions`, else
//! the ClientHello's own; counts stop at 99; `alpn` is the first and last
//! character of the first ALPN value as FoxIO's implementations write
//! them (a byte of 0x80 or more as `9`, a control byte making `99`; where
//! JA4.md's text says hex digits, see `alpn_chars`), `00` without one; `b` is the
//! first 12 hex digits of the SHA-256 of the sorted cipher suites (4 hex
//! digits each, comma-separated); `c` of the sorted extensions without SNI
//! (0) and ALPN (16), then `_` and the signature algorithms in their
//! order (no `_` without them); `000000000000` for an empty list.
//!
//! A ClientHello whose lengths do not add up (truncated, or longer than
//! its message) gives nothing: no guessing.

use crate::names::Names;
use crate::text::escape;
use std::fmt::Write;

/// ALPN values kept at most.
pub const MAX_ALPN: usize = 16;
/// Bytes of a stored ALPN value at most.
const MAX_ALPN_LEN: usize = 64;
/// Bytes of a handshake message this parser waits for at most.
pub const MAX_HELLO: usize = 16 << 10;

/// Whether `v` is a GREASE value (RFC 8701).
#[inline]
pub fn grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// A parsed ClientHello, borrowing the message.
#[derive(Debug, Default)]
pub struct Hello<'a> {
    /// The first host name of the server_name extension.
    pub sni: Option<&'a [u8]>,
    /// Whether the server_name extension is there at all.
    pub has_sni: bool,
    /// The ALPN protocols (at most [`MAX_ALPN`]).
    pub alpn: Vec<&'a [u8]>,
    /// The ClientHello's own version.
    pub legacy_version: u16,
    /// The highest non-GREASE supported_versions value, if any.
    pub max_supported: Option<u16>,
    /// Cipher suites, GREASE left out, in order.
    pub ciphers: Vec<u16>,
    /// Extension types, GREASE left out, in order.
    pub extensions: Vec<u16>,
    /// Signature algorithms, GREASE left out, in order.
    pub sig_algs: Vec<u16>,
}

/// Parses a ClientHello's body (after the 4-byte handshake header).
pub fn client_hello(b: &[u8]) -> Option<Hello<'_>> {
    let mut h = Hello {
        legacy_version: be16(b, 0)?,
        ..Hello::default()
    };
    let mut at = 34;
    let sid = *b.get(at)? as usize;
    if sid > 32 {
        return None;
    }
    at += 1 + sid;
    let cs = be16(b, at)? as usize;
    let suites = b.get(at + 2..at + 2 + cs)?;
    if !cs.is_multiple_of(2) {
        return None;
    }
    h.ciphers = suites
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .filter(|&v| !grease(v))
        .collect();
    at += 2 + cs;
    let comp = *b.get(at)? as usize;
    b.get(at + 1..at + 1 + comp)?;
    at += 1 + comp;
    if at == b.len() {
        // No extensions (old clients).
        return Some(h);
    }
    let el = be16(b, at)? as usize;
    let exts = b.get(at + 2..at + 2 + el)?;
    let mut e = 0;
    while e < exts.len() {
        let (Some(t), Some(l)) = (be16(exts, e), be16(exts, e + 2)) else {
            return None;
        };
        let d = exts.get(e + 4..e + 4 + l as usize)?;
        e += 4 + l as usize;
        if grease(t) {
            continue;
        }
        h.extensions.push(t);
        match t {
            0 => {
                h.has_sni = true;
                // server_name_list: (type, length, name)...
                let list = d.get(2..2 + be16(d, 0)? as usize).unwrap_or(&[]);
                let mut i = 0;
                while i + 3 <= list.len() {
                    let n = be16(list, i + 1)? as usize;
                    let name = list.get(i + 3..i + 3 + n)?;
                    if list[i] == 0 && h.sni.is_none() {
                        h.sni = Some(name);
                    }
                    i += 3 + n;
                }
            }
            16 => {
                let list = d.get(2..2 + be16(d, 0)? as usize).unwrap_or(&[]);
                let mut i = 0;
                while i < list.len() {
                    let n = list[i] as usize;
                    let p = list.get(i + 1..i + 1 + n)?;
                    if h.alpn.len() < MAX_ALPN {
                        h.alpn.push(p);
                    }
                    i += 1 + n;
                }
            }
            13 => {
                let n = be16(d, 0)? as usize;
                let list = d.get(2..2 + n)?;
                h.sig_algs = list
                    .chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .filter(|&v| !grease(v))
                    .collect();
            }
            43 => {
                let n = *d.first()? as usize;
                let list = d.get(1..1 + n)?;
                h.max_supported = list
                    .chunks_exact(2)
                    .map(|c| u16::from_be_bytes([c[0], c[1]]))
                    .filter(|&v| !grease(v))
                    .max();
            }
            _ => {}
        }
    }
    Some(h)
}

fn version_code(v: u16) -> &'static str {
    match v {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

/// The first 12 hex digits of the SHA-256 of `s`.
fn hash12(s: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, s.as_bytes());
    let mut out = String::with_capacity(12);
    for b in &d.as_ref()[..6] {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn hex_list(v: &[u16]) -> String {
    let mut s = String::with_capacity(v.len() * 5);
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{x:04x}");
    }
    s
}

/// The two characters of the first ALPN value's first and last bytes, as
/// FoxIO's own implementations write them (python/ja4.py, rust/ja4's
/// `first_last`, and their expected outputs for FoxIO's test captures): a
/// printable ASCII byte writes itself, a byte of 0x80 or more writes `9`,
/// and a control byte at either end makes it `99`. JA4.md's text says the
/// hex digits instead for anything not alphanumeric; the fingerprints
/// users match against (FoxIO's tools, ja4db) are the implementations'.
fn alpn_chars(first: u8, last: u8) -> String {
    let c = |b: u8| match b {
        0x20..=0x7e => Some(b as char),
        0x80.. => Some('9'),
        _ => None,
    };
    match (c(first), c(last)) {
        (Some(f), Some(l)) => format!("{f}{l}"),
        _ => "99".to_string(),
    }
}

/// The JA4 fingerprint of a ClientHello; `proto` is `'t'` (TCP), `'q'`
/// (QUIC) or `'d'` (DTLS).
pub fn ja4(h: &Hello<'_>, proto: char) -> String {
    let version = version_code(h.max_supported.unwrap_or(h.legacy_version));
    let alpn = match h.alpn.first() {
        Some(a) if !a.is_empty() => alpn_chars(a[0], a[a.len() - 1]),
        _ => "00".to_string(),
    };
    let mut ciphers = h.ciphers.clone();
    ciphers.sort_unstable();
    let b = if ciphers.is_empty() {
        "000000000000".to_string()
    } else {
        hash12(&hex_list(&ciphers))
    };
    let mut exts: Vec<u16> = h
        .extensions
        .iter()
        .copied()
        .filter(|&e| e != 0 && e != 16)
        .collect();
    exts.sort_unstable();
    let c = if exts.is_empty() {
        "000000000000".to_string()
    } else {
        let mut s = hex_list(&exts);
        if !h.sig_algs.is_empty() {
            s.push('_');
            s.push_str(&hex_list(&h.sig_algs));
        }
        hash12(&s)
    };
    format!(
        "{proto}{version}{}{:02}{:02}{alpn}_{b}_{c}",
        if h.has_sni { 'd' } else { 'i' },
        h.ciphers.len().min(99),
        h.extensions.len().min(99),
    )
}

/// Stores what a ClientHello names: `quic` puts the server name in
/// `quic_sni` (and 'q' in the fingerprint), else in `tls_sni`.
pub fn store(h: &Hello<'_>, quic: bool, names: &mut Names) {
    let sni = h.sni.and_then(|s| escape(s, crate::dns::MAX_NAME));
    if quic {
        names.quic_sni = sni;
    } else {
        names.tls_sni = sni;
    }
    names.tls_alpn = h
        .alpn
        .iter()
        .filter_map(|a| escape(a, MAX_ALPN_LEN))
        .collect();
    names.ja4 = Some(ja4(h, if quic { 'q' } else { 't' }));
}

/// Where the TLS records a TCP client sent stand.
#[derive(Debug, PartialEq, Eq)]
pub enum Stream {
    /// Not a TLS handshake (or not a ClientHello).
    NotTls,
    /// A ClientHello is starting: more bytes are needed.
    More,
    /// The ClientHello message is complete in `scratch` (its body from
    /// byte 4).
    Hello,
}

/// Reads the record layer of a client's first bytes `data`: collects the
/// handshake records' contents into `scratch` (cleared first) until the
/// first handshake message is complete.
pub fn records(data: &[u8], scratch: &mut Vec<u8>) -> Stream {
    scratch.clear();
    let mut at = 0;
    while at < data.len() {
        let rec = &data[at..];
        // Content type 22 (handshake), version 3.x.
        if rec[0] != 22 || rec.get(1).is_some_and(|&v| v != 3) || rec.get(2).is_some_and(|&v| v > 4)
        {
            return Stream::NotTls;
        }
        let Some(len) = be16(rec, 3) else {
            return Stream::More;
        };
        let len = len as usize;
        if len == 0 || len > (16 << 10) + 2048 {
            return Stream::NotTls;
        }
        let body = &rec[5..(5 + len).min(rec.len())];
        let room = MAX_HELLO + 4 - scratch.len().min(MAX_HELLO + 4);
        scratch.extend_from_slice(&body[..body.len().min(room)]);
        if let Some(&t) = scratch.first() {
            if t != 1 {
                return Stream::NotTls;
            }
        }
        if scratch.len() >= 4 {
            let need = 4 + (u32::from_be_bytes([0, scratch[1], scratch[2], scratch[3]]) as usize);
            if need > MAX_HELLO + 4 {
                return Stream::NotTls;
            }
            if scratch.len() >= need {
                scratch.truncate(need);
                return Stream::Hello;
            }
        }
        if body.len() < len {
            return Stream::More;
        }
        at += 5 + len;
    }
    Stream::More
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FoxIO's worked example (technical_details/JA4.md): the same lists
    /// give `t13d1516h2_8daaf6152771_e5627efa2ab1`.
    #[test]
    fn foxio_worked_example() {
        let h = Hello {
            has_sni: true,
            alpn: vec![b"h2", b"http/1.1"],
            legacy_version: 0x0303,
            max_supported: Some(0x0304),
            ciphers: vec![
                0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013,
                0xc014, 0x009c, 0x009d, 0x002f, 0x0035,
            ],
            extensions: vec![
                0x001b, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023,
                0x0012, 0x002b, 0xff01, 0x000b, 0x000a, 0x0015,
            ],
            sig_algs: vec![
                0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
            ],
            ..Hello::default()
        };
        assert_eq!(ja4(&h, 't'), "t13d1516h2_8daaf6152771_e5627efa2ab1");
        let mut h2 = h;
        h2.sig_algs.clear();
        assert!(ja4(&h2, 't').ends_with("_6d807ffa2a79"));
    }

    #[test]
    fn alpn_characters_as_foxio_implementations_write_them() {
        let cases: &[(&[u8], &str)] = &[
            (&[0xab], "99"),
            (&[0x20], "  "),
            (&[0xba, 0xad], "99"),
            (&[0x20, 0x61], " a"),
            (&[0x30, 0xab], "09"),
            (&[0x61, 0x20], "a "),
            (&[0x30, 0x31, 0xab, 0xcd], "09"),
            (&[0x30, 0xab, 0xcd, 0x31], "01"),
            (&[0x68, 0x1f], "99"),
            (&[0x7f, 0x68], "99"),
            (b"h", "hh"),
            (b"h2", "h2"),
            (b"http/1.1", "h1"),
        ];
        for (alpn, want) in cases {
            let h = Hello {
                alpn: vec![alpn],
                ..Hello::default()
            };
            assert_eq!(&ja4(&h, 't')[8..10], *want, "{alpn:x?}");
        }
        assert!(grease(0x0a0a) && grease(0xfafa) && !grease(0x0a1a) && !grease(0x1301));
    }
}
