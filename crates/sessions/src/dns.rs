//! DNS messages over UDP (ports 53, 5353 for mDNS, 5355 for LLMNR: the same
//! format): the first question's name and type, every distinct question
//! name (a resolver reusing its source port to one server asks many on one
//! connection; at most [`MAX_QUERIES`]), and the answers of responses (A,
//! AAAA, CNAME, DNAME, NS, PTR, MX).
//!
//! Names follow compression pointers anywhere in the message, at most
//! [`MAX_HOPS`] of them and at most 255 bytes of name (RFC 1035's limit):
//! a pointer loop ends there, and the name is dropped. Labels of the
//! extended types (0x40, 0x80) end the message's parse. Every offset is
//! checked against the message's length.

use crate::names::Names;
use crate::text::escape;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Compression pointers followed in one name at most.
pub const MAX_HOPS: usize = 32;
/// Distinct question names kept per session at most.
pub const MAX_QUERIES: usize = 16;
/// Frames each way a DNS connection's messages are read from, at most
/// (other protocols: [`crate::Config::name_frames`]).
pub const MAX_FRAMES: u8 = 64;
/// Answers kept per session at most.
pub const MAX_ANSWERS: usize = 32;
/// Bytes of a stored name at most.
pub const MAX_NAME: usize = 255;
/// Resource records looked at per message at most.
const MAX_RRS: usize = 64;

/// Whether a UDP port is one of DNS's.
#[inline]
pub fn is_dns_port(p: u16) -> bool {
    matches!(p, 53 | 5353 | 5355)
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// Reads the name at `at` into `out` (labels joined by dots; the root is
/// `<Root>`, as tshark shows it); returns the offset after the name where
/// it starts (not where a pointer led), or None when it is malformed, too
/// long or loops.
pub fn read_name(msg: &[u8], at: usize, out: &mut Vec<u8>) -> Option<usize> {
    out.clear();
    let mut pos = at;
    let mut end = None;
    let mut hops = 0;
    loop {
        let len = *msg.get(pos)? as usize;
        match len & 0xc0 {
            0x00 if len == 0 => {
                if out.is_empty() {
                    out.extend_from_slice(b"<Root>");
                }
                return Some(end.unwrap_or(pos + 1));
            }
            0x00 => {
                let label = msg.get(pos + 1..pos + 1 + len)?;
                if !out.is_empty() {
                    out.push(b'.');
                }
                out.extend_from_slice(label);
                if out.len() > MAX_NAME {
                    return None;
                }
                pos += 1 + len;
            }
            0xc0 => {
                let target = (be16(msg, pos)? & 0x3fff) as usize;
                hops += 1;
                if hops > MAX_HOPS {
                    return None;
                }
                end.get_or_insert(pos + 2);
                pos = target;
            }
            _ => return None,
        }
    }
}

/// The query types with a mnemonic (the others are `TYPEn`, RFC 3597).
const TYPES: &[(u16, &str)] = &[
    (1, "A"),
    (2, "NS"),
    (5, "CNAME"),
    (6, "SOA"),
    (12, "PTR"),
    (13, "HINFO"),
    (15, "MX"),
    (16, "TXT"),
    (28, "AAAA"),
    (33, "SRV"),
    (35, "NAPTR"),
    (39, "DNAME"),
    (41, "OPT"),
    (43, "DS"),
    (46, "RRSIG"),
    (47, "NSEC"),
    (48, "DNSKEY"),
    (50, "NSEC3"),
    (52, "TLSA"),
    (64, "SVCB"),
    (65, "HTTPS"),
    (99, "SPF"),
    (251, "IXFR"),
    (252, "AXFR"),
    (255, "ANY"),
    (257, "CAA"),
];

/// A query type's mnemonic (RFC 3597's `TYPEn` for the others).
pub fn type_name(t: u16) -> String {
    match TYPES.iter().find(|x| x.0 == t) {
        Some((_, n)) => (*n).to_string(),
        None => format!("TYPE{t}"),
    }
}

/// The number of a mnemonic [`type_name`] gives.
pub fn type_number(s: &str) -> Option<u16> {
    match TYPES.iter().find(|x| x.1 == s) {
        Some((t, _)) => Some(*t),
        None => s.strip_prefix("TYPE")?.parse().ok(),
    }
}

/// Whether `raw` is stored as itself ([`escape`] changes nothing):
/// printable ASCII without a backslash.
fn plain(raw: &[u8]) -> bool {
    raw.iter().all(|&b| (0x20..0x7f).contains(&b) && b != b'\\')
}

/// Adds the question name `raw` to the connection's distinct ones: a name
/// already there costs a comparison per kept name and no allocation; a new
/// one is stored while there is room, else counted as cut.
fn question(raw: &[u8], names: &mut Names) {
    if raw.is_empty() || names.dns_queries.iter().any(|q| q.as_bytes() == raw) {
        return;
    }
    let name = if plain(raw) {
        if names.dns_queries.len() >= MAX_QUERIES {
            names.dns_queries_cut = names.dns_queries_cut.saturating_add(1);
            return;
        }
        String::from_utf8_lossy(raw).into_owned()
    } else {
        // Stored escaped: compare that form (hostile names only allocate
        // to be compared).
        match escape(raw, MAX_NAME) {
            Some(e) if !names.dns_queries.contains(&e) => e,
            _ => return,
        }
    };
    if names.dns_queries.len() < MAX_QUERIES {
        names.dns_queries.push(name);
    } else {
        names.dns_queries_cut = names.dns_queries_cut.saturating_add(1);
    }
}

/// Reads one DNS message into `names`: the first question when no query
/// is known yet, and (responses) the answers, up to [`MAX_ANSWERS`] in
/// all. `scratch` holds a name while it is read. Returns whether it was a
/// DNS message at all (a header and a readable first question).
pub fn message(msg: &[u8], names: &mut Names, scratch: &mut Vec<u8>) -> bool {
    if msg.len() < 12 {
        return false;
    }
    let flags = be16(msg, 2).unwrap_or(0);
    let response = flags & 0x8000 != 0;
    let qd = be16(msg, 4).unwrap_or(0) as usize;
    let an = be16(msg, 6).unwrap_or(0) as usize;
    let mut at = 12;
    for q in 0..qd.min(MAX_RRS) {
        let Some(next) = read_name(msg, at, scratch) else {
            return q > 0;
        };
        let Some(qtype) = be16(msg, next) else {
            return q > 0;
        };
        if q == 0 && names.dns_query.is_none() {
            names.dns_query = escape(scratch, MAX_NAME);
            names.dns_type = Some(qtype);
        }
        question(scratch, names);
        at = next + 4;
    }
    if qd == 0 && !response {
        return false;
    }
    if !response {
        return true;
    }
    for _ in 0..an.min(MAX_RRS) {
        if names.dns_answers.len() >= MAX_ANSWERS {
            break;
        }
        let Some(next) = read_name(msg, at, scratch) else {
            break;
        };
        let (Some(rtype), Some(rdlen)) = (be16(msg, next), be16(msg, next + 8)) else {
            break;
        };
        let rd_at = next + 10;
        let Some(rdata) = msg.get(rd_at..rd_at + rdlen as usize) else {
            break;
        };
        let answer = match rtype {
            1 if rdata.len() == 4 => {
                Some(Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3]).to_string())
            }
            28 if rdata.len() == 16 => {
                let a: [u8; 16] = rdata.try_into().unwrap_or_default();
                Some(Ipv6Addr::from(a).to_string())
            }
            2 | 5 | 12 | 39 => {
                read_name(msg, rd_at, scratch).and_then(|_| escape(scratch, MAX_NAME))
            }
            15 if rdata.len() > 2 => {
                read_name(msg, rd_at + 2, scratch).and_then(|_| escape(scratch, MAX_NAME))
            }
            _ => None,
        };
        if let Some(a) = answer {
            names.dns_answers.push(a);
        }
        at = rd_at + rdlen as usize;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for l in name.split('.') {
            m.push(l.len() as u8);
            m.extend_from_slice(l.as_bytes());
        }
        m.push(0);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&[0, 1]);
        m
    }

    #[test]
    fn a_response_with_a_cname_and_addresses() {
        let mut m = query("www.example.com", 1);
        m[2] = 0x81;
        m[7] = 3;
        // CNAME www -> (pointer to "example.com" at 16)
        m.extend_from_slice(&[0xc0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 6]);
        m.extend_from_slice(&[3, b'c', b'd', b'n', 0xc0, 16]);
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        m.extend_from_slice(&[0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16]);
        m.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let mut n = Names::default();
        let mut s = Vec::new();
        assert!(message(&m, &mut n, &mut s));
        assert_eq!(n.dns_query.as_deref(), Some("www.example.com"));
        assert_eq!(n.dns_type, Some(1));
        assert_eq!(
            n.dns_answers,
            ["cdn.example.com", "192.0.2.1", "2001:db8::1"]
        );
    }

    #[test]
    fn every_question_of_a_message_once_escaped_names_too() {
        // Two questions in one message, the second compressed onto the
        // first's parent; then the same message again; then a name with a
        // control character and a backslash (stored escaped), twice.
        let mut m = query("a.example", 1);
        m[5] = 2;
        m.extend_from_slice(&[1, b'b', 0xc0, 14, 0, 28, 0, 1]);
        let mut n = Names::default();
        let mut s = Vec::new();
        assert!(message(&m, &mut n, &mut s));
        assert!(message(&m, &mut n, &mut s));
        let odd = query("x\x01y\\.example", 1);
        assert!(message(&odd, &mut n, &mut s));
        assert!(message(&odd, &mut n, &mut s));
        assert_eq!(n.dns_query.as_deref(), Some("a.example"));
        assert_eq!(
            n.dns_queries,
            ["a.example", "b.example", "x\\u{0001}y\\\\.example"]
        );
        assert_eq!(n.dns_queries_cut, 0);
    }

    #[test]
    fn pointer_loops_and_overlong_names_end() {
        let mut m = vec![0, 0, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&[0xc0, 12]); // points at itself
        let mut s = Vec::new();
        assert_eq!(read_name(&m, 12, &mut s), None);
        let mut m = vec![0, 0, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(&[1, b'a', 0xc0, 12]); // a.a.a.a... forever
        assert_eq!(read_name(&m, 12, &mut s), None);
        let mut n = Names::default();
        assert!(!message(&m, &mut n, &mut s));
        assert_eq!(n.dns_query, None);
        assert_eq!(type_name(65), "HTTPS");
        assert_eq!(type_name(999), "TYPE999");
        assert_eq!(type_number("HTTPS"), Some(65));
        assert_eq!(type_number("TYPE999"), Some(999));
        assert_eq!(type_number("nonsense"), None);
    }
}
