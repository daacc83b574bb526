//! The lexer and parser of Stenographer's query language, as Stenographer
//! 1.0.1 (`query/parser.y`, the Debian package) reads it.
//!
//! The lexer is Stenographer's, rule for rule: at each token, after
//! whitespace (Go's `unicode.IsSpace` of each byte: 0x85 and 0xA0 too), a
//! keyword (`host`, `net`, `mask`, `port`, `ip`, `proto`, `tcp`, `udp`,
//! `icmp`, `vlan`, `mpls`, `before`, `after`, `ago`, `and`, `&&`, `or`,
//! `||`) matches as a *prefix* of the rest (so `andtcp` is `and tcp`);
//! otherwise a run of `0-9 a-f : . - T + Z` (ended by `m` or `h`, which it
//! takes) is a time if it holds `- T + Z`, else an IP address if it holds
//! `:` or `.`, else a duration if it ended in `m`/`h`, else a number; `(`,
//! `)` and `/` stand alone. Times are Go's `time.Parse(time.RFC3339, ...)`
//! (Go 1.19's reading: a one-digit hour is taken, a fraction of any length
//! is cut to the nanosecond, an offset's two-digit hours and minutes are
//! not range-checked),
//! addresses Go's `net.ParseIP` (IPv4 without leading zeros; an
//! IPv4-mapped IPv6 address is IPv4), durations whole minutes or hours.
//!
//! The grammar: `and`/`&&` and `or`/`||` of equal precedence, left to
//! right; parentheses; the primitives `host IP`, `net IP/N`, `net IP mask
//! MASK` (a range from `IP & MASK` to `IP | ~MASK`, as Stenographer looks
//! it up), `port N` (< 65536), `ip proto N` (< 256), `tcp`, `udp`, `icmp`,
//! `vlan N` (< 65536), `mpls N` (< 2^20), `before T`, `after T` (`T`: a
//! time, or `N m ago` / `N h ago`).
//!
//! Where wiretape is stricter than Stenographer 1.0.1, on purpose:
//! Stenographer's lexer ends the query silently at a character it cannot
//! read (`port 80 AND tcp` is `port 80` there, `host 10.0.0.1 x` is `host
//! 10.0.0.1`); here that is an error naming the character. A query longer
//! than [`MAX_QUERY_BYTES`] or nested deeper than [`MAX_DEPTH`] is refused
//! (Stenographer takes any).

use std::fmt;
use std::net::Ipv6Addr;
use wiretape_timestamp::{days_from_civil, days_in_month};

/// The longest query taken, in bytes.
pub const MAX_QUERY_BYTES: usize = 64 << 10;
/// The deepest nesting taken: parentheses, and `and`/`or` alternating.
pub const MAX_DEPTH: usize = 100;

/// A parsed query. `and`/`or` are n-ary (a chain of one operator is one
/// node); primitives keep what Stenographer's index looks up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// `host`/`net` of IPv4: a source or destination address in `lo..=hi`.
    Net4(u32, u32),
    /// `host`/`net` of IPv6: a source or destination address in `lo..=hi`.
    Net6(u128, u128),
    /// `port N`: a TCP or UDP source or destination port.
    Port(u16),
    /// `ip proto N` (`tcp` 6, `udp` 17, `icmp` 1): the IP protocol (after
    /// IPv6 extension headers).
    Proto(u8),
    /// `vlan N`: any VLAN tag's id.
    Vlan(u16),
    /// `mpls N`: any MPLS label.
    Mpls(u32),
    /// `after T`: stamped at or after `T` (ns since the epoch).
    After(i128),
    /// `before T`: stamped before `T` (ns since the epoch).
    Before(i128),
    /// All of them.
    And(Vec<Query>),
    /// Any of them.
    Or(Vec<Query>),
}

impl Query {
    /// The nesting depth (1 for a primitive).
    pub fn depth(&self) -> usize {
        match self {
            Query::And(v) | Query::Or(v) => 1 + v.iter().map(Query::depth).max().unwrap_or(0),
            _ => 1,
        }
    }
}

fn ip4_text(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

fn ip6_text(a: u128) -> String {
    Ipv6Addr::from(a).to_string()
}

/// A time as RFC 3339 (UTC, to the ns), or the ns count when out of range.
pub(crate) fn time_text(ns: i128) -> String {
    match u64::try_from(ns) {
        Ok(n) => wiretape_timestamp::format_rfc3339(n),
        Err(_) => format!("{ns} ns after the epoch"),
    }
}

/// The prefix length of `lo..=hi` (of `bits`-bit addresses) when it is
/// exactly a CIDR block.
fn cidr(lo: u128, hi: u128, bits: u32) -> Option<u32> {
    let span = hi.checked_sub(lo)?;
    let host = 128 - span.leading_zeros();
    let ones = if host == 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    };
    (host <= bits && span == ones && lo & ones == 0).then_some(bits - host)
}

impl fmt::Display for Query {
    /// The query in Stenographer's language: a range as `net A/N` when it
    /// is a CIDR block, else as `net A mask M` (the range a mask makes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, v: &[Query], op: &str| -> fmt::Result {
            write!(f, "(")?;
            for (i, q) in v.iter().enumerate() {
                if i > 0 {
                    write!(f, " {op} ")?;
                }
                write!(f, "{q}")?;
            }
            write!(f, ")")
        };
        match self {
            Query::Net4(lo, hi) if lo == hi => write!(f, "host {}", ip4_text(*lo)),
            Query::Net6(lo, hi) if lo == hi => write!(f, "host {}", ip6_text(*lo)),
            Query::Net4(lo, hi) => match cidr(u128::from(*lo), u128::from(*hi), 32) {
                Some(n) => write!(f, "net {}/{n}", ip4_text(*lo)),
                None => write!(f, "net {} mask {}", ip4_text(*lo), ip4_text(!(lo ^ hi))),
            },
            Query::Net6(lo, hi) => match cidr(*lo, *hi, 128) {
                Some(n) => write!(f, "net {}/{n}", ip6_text(*lo)),
                None => write!(f, "net {} mask {}", ip6_text(*lo), ip6_text(!(lo ^ hi))),
            },
            Query::Port(p) => write!(f, "port {p}"),
            Query::Proto(p) => write!(f, "ip proto {p}"),
            Query::Vlan(v) => write!(f, "vlan {v}"),
            Query::Mpls(m) => write!(f, "mpls {m}"),
            Query::After(t) => write!(f, "after {}", time_text(*t)),
            Query::Before(t) => write!(f, "before {}", time_text(*t)),
            Query::And(v) => list(f, v, "and"),
            Query::Or(v) => list(f, v, "or"),
        }
    }
}

/// Why a query was refused: what, and where (a byte offset, as
/// Stenographer's "at character N").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} at character {pos} ({before} HERE {after})")]
pub struct ParseError {
    /// What is wrong.
    pub message: String,
    /// Where: bytes of the query before the offending token.
    pub pos: usize,
    /// Up to 40 characters before `pos`, quoted.
    before: String,
    /// Up to 40 characters from `pos` on, quoted.
    after: String,
}

impl ParseError {
    fn at(input: &str, pos: usize, message: impl Into<String>) -> ParseError {
        let b = input.as_bytes();
        let pos = pos.min(b.len());
        let from = pos.saturating_sub(40);
        let to = (pos + 40).min(b.len());
        let quote = |s: &[u8], cut_front: bool, cut_back: bool| {
            let text = String::from_utf8_lossy(s);
            let mut q: String = text.escape_debug().collect();
            if cut_front {
                q.insert_str(0, "...");
            }
            if cut_back {
                q.push_str("...");
            }
            format!("\"{q}\"")
        };
        ParseError {
            message: message.into(),
            pos,
            before: quote(&b[from..pos], from > 0, false),
            after: quote(&b[pos..to], false, to < b.len()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kw {
    After,
    Ago,
    And,
    Before,
    Host,
    Icmp,
    Ip,
    Mask,
    Net,
    Or,
    Port,
    Vlan,
    Mpls,
    Proto,
    Tcp,
    Udp,
}

/// Stenographer's keyword table (matched as prefixes; no keyword is a
/// prefix of another, so the order does not matter, as it does not in
/// Stenographer's Go map).
const KEYWORDS: &[(&str, Kw)] = &[
    ("after", Kw::After),
    ("ago", Kw::Ago),
    ("&&", Kw::And),
    ("and", Kw::And),
    ("before", Kw::Before),
    ("host", Kw::Host),
    ("icmp", Kw::Icmp),
    ("ip", Kw::Ip),
    ("mask", Kw::Mask),
    ("net", Kw::Net),
    ("||", Kw::Or),
    ("or", Kw::Or),
    ("port", Kw::Port),
    ("vlan", Kw::Vlan),
    ("mpls", Kw::Mpls),
    ("proto", Kw::Proto),
    ("tcp", Kw::Tcp),
    ("udp", Kw::Udp),
];

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Kw(Kw),
    /// An address: IPv4 (4 bytes) or IPv6.
    Ip(Ip),
    Num(i64),
    /// A duration in ns.
    Dur(i64),
    /// A time in ns since the epoch.
    Time(i128),
    /// `(`, `)`, `/` (and `:`, `.` alone, which no rule takes).
    Char(u8),
    Eof,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ip {
    V4(u32),
    V6(u128),
}

fn tok_name(t: &Tok) -> String {
    match t {
        Tok::Kw(k) => {
            let w = KEYWORDS
                .iter()
                .find(|(_, x)| x == k)
                .map_or("?", |(w, _)| w);
            format!("'{w}'")
        }
        Tok::Ip(_) => "an address".into(),
        Tok::Num(_) => "a number".into(),
        Tok::Dur(_) => "a duration".into(),
        Tok::Time(_) => "a time".into(),
        Tok::Char(c) => format!("'{}'", *c as char),
        Tok::Eof => "the end of the query".into(),
    }
}

/// Go's `unicode.IsSpace` of a byte taken as a rune.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ' | 0x85 | 0xa0)
}

struct Lexer<'a> {
    input: &'a str,
    b: &'a [u8],
    pos: usize,
    now_ns: i128,
}

impl<'a> Lexer<'a> {
    fn err(&self, pos: usize, m: impl Into<String>) -> ParseError {
        ParseError::at(self.input, pos, m)
    }

    /// The next token and where it starts.
    fn next(&mut self) -> Result<(Tok, usize), ParseError> {
        while self.pos < self.b.len() && is_space(self.b[self.pos]) {
            self.pos += 1;
        }
        let start = self.pos;
        let rest = &self.b[start..];
        if let Some((w, k)) = KEYWORDS
            .iter()
            .find(|(w, _)| rest.starts_with(w.as_bytes()))
        {
            self.pos += w.len();
            return Ok((Tok::Kw(*k), start));
        }
        let (mut is_ip, mut is_dur, mut is_time) = (false, false, false);
        while let Some(&c) = self.b.get(self.pos) {
            match c {
                b':' | b'.' => {
                    is_ip = true;
                    self.pos += 1;
                }
                b'0'..=b'9' | b'a'..=b'f' => self.pos += 1,
                b'm' | b'h' => {
                    self.pos += 1;
                    is_dur = true;
                    break;
                }
                b'-' | b'T' | b'+' | b'Z' => {
                    self.pos += 1;
                    is_time = true;
                }
                _ => break,
            }
        }
        let part = &self.input[start..self.pos];
        if is_time {
            return match parse_rfc3339(part) {
                Some(t) => Ok((Tok::Time(t), start)),
                None => Err(self.err(
                    start,
                    format!("bad time {part:?} (RFC 3339, e.g. 2015-01-01T13:14:15Z or +01:00)"),
                )),
            };
        }
        if is_ip {
            return match parse_ip(part) {
                Some(ip) => Ok((Tok::Ip(ip), start)),
                None => Err(self.err(start, format!("bad IP {part:?}"))),
            };
        }
        if is_dur {
            return match parse_duration(part) {
                Some(d) => Ok((Tok::Dur(d), start)),
                None => Err(self.err(
                    start,
                    format!("bad duration {part:?} (whole minutes or hours: 45m, 3h)"),
                )),
            };
        }
        if self.pos != start {
            // Go's strconv.Atoi: decimal, within int64.
            return match part.bytes().all(|c| c.is_ascii_digit()) {
                true => match part.parse::<i64>() {
                    Ok(n) => Ok((Tok::Num(n), start)),
                    Err(_) => Err(self.err(
                        start,
                        format!(
                            "number {part} is too large: Stenographer 1.0.1 would end the query \
                             here without a word (taking only what comes before)"
                        ),
                    )),
                },
                false => Err(self.err(
                    start,
                    format!(
                        "cannot read {part:?}: Stenographer 1.0.1 would end the query here \
                         without a word (taking only what comes before)"
                    ),
                )),
            };
        }
        match self.b.get(self.pos) {
            None => Ok((Tok::Eof, start)),
            Some(&c @ (b':' | b'.' | b'(' | b')' | b'/')) => {
                self.pos += 1;
                Ok((Tok::Char(c), start))
            }
            Some(_) => {
                let ch = self.input[start..].chars().next().unwrap_or('?');
                Err(self.err(
                    start,
                    format!(
                        "unexpected {ch:?}: keywords are lower case, addresses lower-case hex; \
                         Stenographer 1.0.1 would end the query here without a word (taking only \
                         what comes before)"
                    ),
                ))
            }
        }
    }
}

/// Go's `net.ParseIP`, with IPv4-mapped IPv6 addresses as IPv4 (as
/// Stenographer's lexer keeps them).
fn parse_ip(s: &str) -> Option<Ip> {
    let first = s.bytes().find(|&c| c == b'.' || c == b':')?;
    if first == b'.' {
        return parse_ip4(s).map(Ip::V4);
    }
    let a: Ipv6Addr = s.parse().ok()?;
    Some(match a.to_ipv4_mapped() {
        Some(v4) => Ip::V4(u32::from(v4)),
        None => Ip::V6(u128::from(a)),
    })
}

/// Go 1.19's `parseIPv4`: four decimal fields of at most 255, no leading
/// zeros.
fn parse_ip4(s: &str) -> Option<u32> {
    let mut out = 0u32;
    let mut n = 0;
    for field in s.split('.') {
        n += 1;
        if n > 4
            || field.is_empty()
            || field.len() > 3
            || !field.bytes().all(|c| c.is_ascii_digit())
            || (field.len() > 1 && field.starts_with('0'))
        {
            return None;
        }
        let v: u32 = field.parse().ok()?;
        if v > 255 {
            return None;
        }
        out = out << 8 | v;
    }
    (n == 4).then_some(out)
}

/// Go's `time.ParseDuration` of what the lexer takes as one (digits, then
/// `m` or `h`; hex letters make it unreadable), in ns, within int64.
fn parse_duration(s: &str) -> Option<i64> {
    let (digits, unit) = s.split_at(s.len() - 1);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let unit: i64 = if unit == "h" {
        3_600_000_000_000
    } else {
        60_000_000_000
    };
    digits.parse::<i64>().ok()?.checked_mul(unit)
}

/// Go 1.19's `time.Parse(time.RFC3339, s)` as ns since the epoch.
fn parse_rfc3339(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize, n: usize| -> Option<i64> {
        let f = b.get(*i..*i + n)?;
        if !f.iter().all(|c| c.is_ascii_digit()) {
            return None;
        }
        *i += n;
        std::str::from_utf8(f).ok()?.parse().ok()
    };
    let lit = |i: &mut usize, c: u8| -> Option<()> { (b.get(*i) == Some(&c)).then(|| *i += 1) };
    // "2006": four digits.
    let year = digits(&mut i, 4)?;
    lit(&mut i, b'-')?;
    let month = digits(&mut i, 2)?;
    lit(&mut i, b'-')?;
    let day = digits(&mut i, 2)?;
    lit(&mut i, b'T')?;
    // "15": one or two digits.
    let hour = if b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        digits(&mut i, 2)?
    } else {
        digits(&mut i, 1)?
    };
    lit(&mut i, b':')?;
    let min = digits(&mut i, 2)?;
    lit(&mut i, b':')?;
    let sec = digits(&mut i, 2)?;
    let mut nanos: i64 = 0;
    if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let frac = &s[start..i.min(start + 9)];
        nanos = frac.parse::<i64>().ok()? * 10i64.pow(9 - frac.len() as u32);
    }
    let offset_s: i64 = match b.get(i)? {
        b'Z' => {
            i += 1;
            0
        }
        &sign @ (b'+' | b'-') => {
            i += 1;
            let h = digits(&mut i, 2)?;
            lit(&mut i, b':')?;
            let m = digits(&mut i, 2)?;
            let o = (h * 60 + m) * 60;
            if sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    if i != b.len()
        || !(1..=12).contains(&month)
        || !(0..24).contains(&hour)
        || !(0..60).contains(&min)
        || !(0..60).contains(&sec)
        || day < 1
        || day > days_in_month(year, month)
    {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec - offset_s;
    Some(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
}

struct Parser<'a> {
    lex: Lexer<'a>,
    tok: Tok,
    at: usize,
}

impl Parser<'_> {
    fn bump(&mut self) -> Result<(), ParseError> {
        let (t, at) = self.lex.next()?;
        self.tok = t;
        self.at = at;
        Ok(())
    }

    fn unexpected(&self, wanted: &str) -> ParseError {
        self.lex.err(
            self.at,
            format!(
                "syntax error: {} where {wanted} was expected",
                tok_name(&self.tok)
            ),
        )
    }

    /// `expr: expr2 | expr AND expr2 | expr OR expr2` (left to right);
    /// with the tree's depth. `depth`: parentheses around it.
    fn expr(&mut self, depth: usize) -> Result<(Query, usize), ParseError> {
        let (mut cur, mut d) = self.expr2(depth)?;
        loop {
            let and = match self.tok {
                Tok::Kw(Kw::And) => true,
                Tok::Kw(Kw::Or) => false,
                _ => return Ok((cur, d)),
            };
            let op_at = self.at;
            self.bump()?;
            let (next, nd) = self.expr2(depth)?;
            (cur, d) = match (cur, and) {
                (Query::And(mut v), true) => {
                    v.push(next);
                    (Query::And(v), d.max(nd + 1))
                }
                (Query::Or(mut v), false) => {
                    v.push(next);
                    (Query::Or(v), d.max(nd + 1))
                }
                (c, true) => (Query::And(vec![c, next]), d.max(nd) + 1),
                (c, false) => (Query::Or(vec![c, next]), d.max(nd) + 1),
            };
            if depth + d > MAX_DEPTH {
                return Err(self.lex.err(
                    op_at,
                    format!(
                        "the query is nested more than {MAX_DEPTH} deep (parentheses, and `and` and \
                         `or` alternating)"
                    ),
                ));
            }
        }
    }

    fn num(&mut self, what: &str) -> Result<(i64, usize), ParseError> {
        self.bump()?;
        match self.tok {
            Tok::Num(n) => {
                let at = self.at;
                self.bump()?;
                Ok((n, at))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn ip(&mut self) -> Result<(Ip, usize), ParseError> {
        self.bump()?;
        match self.tok {
            Tok::Ip(ip) => Ok((ip, self.at)),
            _ => Err(self.unexpected("an IP address")),
        }
    }

    fn timestamp(&mut self) -> Result<i128, ParseError> {
        self.bump()?;
        match self.tok {
            Tok::Time(t) => {
                self.bump()?;
                Ok(t)
            }
            Tok::Dur(d) => {
                self.bump()?;
                if self.tok != Tok::Kw(Kw::Ago) {
                    return Err(self.unexpected("'ago'"));
                }
                self.bump()?;
                Ok(self.lex.now_ns - i128::from(d))
            }
            _ => Err(self.unexpected("a time (RFC 3339) or a duration (45m, 3h) and 'ago'")),
        }
    }

    fn expr2(&mut self, depth: usize) -> Result<(Query, usize), ParseError> {
        let at = self.at;
        let bad = |p: &Self, pos: usize, m: String| p.lex.err(pos, m);
        let q = match self.tok {
            Tok::Kw(Kw::Host) => {
                let (ip, _) = self.ip()?;
                self.bump()?;
                match ip {
                    Ip::V4(a) => Query::Net4(a, a),
                    Ip::V6(a) => Query::Net6(a, a),
                }
            }
            Tok::Kw(Kw::Port) => {
                let (n, p) = self.num("a port number")?;
                let n = u16::try_from(n).map_err(|_| bad(self, p, format!("invalid port {n}")))?;
                Query::Port(n)
            }
            Tok::Kw(Kw::Vlan) => {
                let (n, p) = self.num("a VLAN id")?;
                let n = u16::try_from(n).map_err(|_| bad(self, p, format!("invalid vlan {n}")))?;
                Query::Vlan(n)
            }
            Tok::Kw(Kw::Mpls) => {
                let (n, p) = self.num("an MPLS label")?;
                if !(0..1 << 20).contains(&n) {
                    return Err(bad(self, p, format!("invalid mpls {n}")));
                }
                Query::Mpls(n as u32)
            }
            Tok::Kw(Kw::Ip) => {
                self.bump()?;
                if self.tok != Tok::Kw(Kw::Proto) {
                    return Err(self.unexpected("'proto'"));
                }
                let (n, p) = self.num("a protocol number")?;
                let n = u8::try_from(n).map_err(|_| bad(self, p, format!("invalid proto {n}")))?;
                Query::Proto(n)
            }
            Tok::Kw(Kw::Net) => {
                let (ip, _) = self.ip()?;
                self.bump()?;
                let (mask, len_bits) = match (self.tok.clone(), ip) {
                    (Tok::Char(b'/'), _) => {
                        let (n, p) = self.num("a prefix length")?;
                        let bits = if matches!(ip, Ip::V4(_)) { 32 } else { 128 };
                        if !(0..=bits).contains(&n) {
                            let shown = match ip {
                                Ip::V4(a) => ip4_text(a),
                                Ip::V6(a) => ip6_text(a),
                            };
                            return Err(bad(self, p, format!("bad cidr: {shown}/{n}")));
                        }
                        let n = n as u32;
                        let m = if n == 0 { 0 } else { u128::MAX << (128 - n) };
                        (m >> (128 - bits), bits)
                    }
                    (Tok::Kw(Kw::Mask), _) => {
                        let (m, m_at) = self.ip()?;
                        self.bump()?;
                        match (ip, m) {
                            (Ip::V4(_), Ip::V4(m)) => (u128::from(m), 32),
                            (Ip::V6(_), Ip::V6(m)) => (m, 128),
                            _ => {
                                return Err(bad(
                                    self,
                                    m_at,
                                    "bad IP or mask: an IPv4 address takes an IPv4 mask, an IPv6 one an IPv6 mask"
                                        .to_string(),
                                ))
                            }
                        }
                    }
                    _ => return Err(self.unexpected("'/' or 'mask'")),
                };
                let full = if len_bits == 32 {
                    u128::from(u32::MAX)
                } else {
                    u128::MAX
                };
                let a = match ip {
                    Ip::V4(a) => u128::from(a),
                    Ip::V6(a) => a,
                };
                let (lo, hi) = (a & mask, a | (!mask & full));
                if len_bits == 32 {
                    Query::Net4(lo as u32, hi as u32)
                } else {
                    Query::Net6(lo, hi)
                }
            }
            Tok::Char(b'(') => {
                if depth + 1 >= MAX_DEPTH {
                    return Err(bad(
                        self,
                        at,
                        format!("the query is nested more than {MAX_DEPTH} deep (parentheses)"),
                    ));
                }
                self.bump()?;
                let q = self.expr(depth + 1)?;
                if self.tok != Tok::Char(b')') {
                    return Err(self.unexpected("'and', 'or' or ')'"));
                }
                self.bump()?;
                return Ok(q);
            }
            Tok::Kw(Kw::Tcp) => {
                self.bump()?;
                Query::Proto(6)
            }
            Tok::Kw(Kw::Udp) => {
                self.bump()?;
                Query::Proto(17)
            }
            Tok::Kw(Kw::Icmp) => {
                self.bump()?;
                Query::Proto(1)
            }
            Tok::Kw(Kw::Before) => Query::Before(self.timestamp()?),
            Tok::Kw(Kw::After) => Query::After(self.timestamp()?),
            Tok::Kw(Kw::Proto) => {
                return Err(bad(
                    self,
                    at,
                    "syntax error: Stenographer 1.0.1 has no `protocol` (nor `proto` alone): say \
                     `ip proto N`"
                        .to_string(),
                ))
            }
            _ => {
                return Err(self.unexpected(
                    "a primitive (host, net, port, ip proto, tcp, udp, icmp, vlan, mpls, before, \
                     after) or '('",
                ))
            }
        };
        Ok((q, 1))
    }
}

/// Parses `input` as Stenographer 1.0.1 does; `now_ns` is the time `N m
/// ago` counts back from.
pub fn parse(input: &str, now_ns: u64) -> Result<Query, ParseError> {
    if input.len() > MAX_QUERY_BYTES {
        return Err(ParseError::at(
            input,
            MAX_QUERY_BYTES,
            format!(
                "the query is {} bytes long: at most {MAX_QUERY_BYTES} are taken",
                input.len()
            ),
        ));
    }
    let mut p = Parser {
        lex: Lexer {
            input,
            b: input.as_bytes(),
            pos: 0,
            now_ns: i128::from(now_ns),
        },
        tok: Tok::Eof,
        at: 0,
    };
    p.bump()?;
    let (q, _) = p.expr(0)?;
    if p.tok != Tok::Eof {
        return Err(p.unexpected("'and', 'or' or the end of the query"));
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000_000_000;

    fn ok(s: &str) -> Query {
        parse(s, NOW).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn stenographers_own_valid_queries() {
        // query_test.go's TestParsingValidQueries.
        for s in [
            "net 1.2.3.4/8",
            "net 1.2.3.4 mask 255.255.254.0",
            "host 1.2.3.4",
            "port 80",
            "ip proto 6",
            "tcp",
            "udp",
            "icmp",
            "before 45m ago",
            "after 3h ago",
            "after 2015-01-01T13:14:15Z",
            "before 2015-01-01T13:14:15+01:00",
            "host 1.2.3.4 and port 255",
            "(port 80 or (host 1.2.3.4 and tcp) or port 7)",
            "udp and port 514 or tcp and port 80",
            "(udp && port 514) or (tcp and port 80)",
            "(port 80 && after 2015-01-01T13:14:15Z) || (host 1.2.3.4 && before 2015-01-01T13:14:15Z)",
        ] {
            ok(s);
        }
    }

    #[test]
    fn stenographers_own_invalid_queries() {
        // query_test.go's TestParsingInvalidQuery (`protocol` is no keyword
        // of 1.0.1: every `protocol ...` is refused).
        for s in [
            "host 1.2.3",
            "net 1.2.3.4/44",
            "port 8 and port 77777",
            "port 77777 and port 8",
            "protocol -1",
            "protocol 256",
            "protocol 6",
            "last 4",
            "",
            "   ",
        ] {
            assert!(parse(s, NOW).is_err(), "{s:?} parsed");
        }
    }

    #[test]
    fn primitives_mean_what_stenographer_looks_up() {
        assert_eq!(ok("host 10.0.0.1"), Query::Net4(0x0a00_0001, 0x0a00_0001));
        assert_eq!(ok("net 1.2.3.4/8"), Query::Net4(0x0100_0000, 0x01ff_ffff));
        assert_eq!(ok("net 0.0.0.0/0"), Query::Net4(0, u32::MAX));
        // A mask that is no prefix: a range, as Stenographer's index looks up.
        assert_eq!(
            ok("net 10.1.2.3 mask 255.0.255.0"),
            Query::Net4(0x0a00_0200, 0x0aff_02ff)
        );
        assert_eq!(
            ok("host ::ffff:1.2.3.4"),
            Query::Net4(0x0102_0304, 0x0102_0304)
        );
        assert_eq!(ok("host ::1"), Query::Net6(1, 1));
        assert_eq!(
            ok("net 2001:db8::/32"),
            Query::Net6(0x2001_0db8 << 96, (0x2001_0db8 << 96) | ((1u128 << 96) - 1))
        );
        assert_eq!(ok("port 0"), Query::Port(0));
        assert_eq!(ok("port 65535"), Query::Port(65535));
        assert_eq!(ok("ip proto 255"), Query::Proto(255));
        assert_eq!(ok("tcp"), Query::Proto(6));
        assert_eq!(ok("udp"), Query::Proto(17));
        assert_eq!(ok("icmp"), Query::Proto(1));
        assert_eq!(ok("vlan 4095"), Query::Vlan(4095));
        assert_eq!(ok("vlan 65535"), Query::Vlan(65535));
        assert_eq!(ok("mpls 1048575"), Query::Mpls(1_048_575));
        for bad in [
            "vlan 65536",
            "mpls 1048576",
            "ip proto 256",
            "port 65536",
            "net 1.2.3.4/33",
            "net ::/129",
        ] {
            assert!(parse(bad, NOW).is_err(), "{bad}");
        }
    }

    #[test]
    fn times_are_go_rfc3339_and_durations_count_back_from_now() {
        let t = 1_420_118_055_000_000_000i128; // 2015-01-01T13:14:15Z
        assert_eq!(ok("after 2015-01-01T13:14:15Z"), Query::After(t));
        assert_eq!(
            ok("before 2015-01-01T13:14:15+01:00"),
            Query::Before(t - 3_600_000_000_000)
        );
        assert_eq!(
            ok("after 2015-01-01T13:14:15-00:30"),
            Query::After(t + 1_800_000_000_000)
        );
        assert_eq!(
            ok("after 2015-01-01T13:14:15.5Z"),
            Query::After(t + 500_000_000)
        );
        assert_eq!(
            ok("after 2015-01-01T13:14:15.0000000019Z"),
            Query::After(t + 1)
        );
        assert_eq!(
            ok("after 2015-01-01T3:14:15Z"),
            Query::After(t - 36_000_000_000_000)
        );
        assert_eq!(
            ok("after 2016-02-29T00:00:00Z"),
            Query::After(1_456_704_000_000_000_000)
        );
        assert_eq!(
            ok("after 1969-12-31T23:59:59Z"),
            Query::After(-1_000_000_000)
        );
        let now = i128::from(NOW);
        assert_eq!(
            ok("before 45m ago"),
            Query::Before(now - 45 * 60_000_000_000)
        );
        assert_eq!(
            ok("after 3h ago"),
            Query::After(now - 3 * 3_600_000_000_000)
        );
        assert_eq!(ok("after 0m ago"), Query::After(now));
        for bad in [
            "after 2015-02-29T00:00:00Z",
            "after 2015-01-01T24:00:00Z",
            "after 2015-01-01T13:14:60Z",
            "after 2015-01-01 13:14:15Z",
            "after 2015-01-01T13:14:15",
            "after 2015-01-01T13:14:15+0100",
            "after 2015-1-01T13:14:15Z",
            "after 2015-01-01",
            "after 3h",
            "after 1.5h ago",
            "after 3d ago",
            "after 10s ago",
            "after 99999999999999h ago",
        ] {
            assert!(parse(bad, NOW).is_err(), "{bad}");
        }
    }

    #[test]
    fn operators_are_equal_and_left_to_right() {
        let a = Query::Proto(17);
        let b = Query::Port(514);
        let c = Query::Proto(6);
        let d = Query::Port(80);
        // udp and port 514 or tcp and port 80 = ((udp and 514) or tcp) and 80
        assert_eq!(
            ok("udp and port 514 or tcp and port 80"),
            Query::And(vec![
                Query::Or(vec![Query::And(vec![a.clone(), b.clone()]), c.clone()]),
                d.clone()
            ])
        );
        assert_eq!(ok("udp&&port 514||tcp"), ok("udp and port 514 or tcp"));
        // Keywords match as prefixes: `andport` is `and port`.
        assert_eq!(ok("tcp andport 80"), Query::And(vec![c, d]));
        assert_eq!(ok("(udp)"), a);
    }

    #[test]
    fn where_stenographer_would_drop_the_rest_we_refuse() {
        for (s, at) in [
            ("port 80 AND tcp", 8),
            ("host 10.0.0.1 x", 14),
            ("HOST 10.0.0.1", 0),
            ("port 80x", 7),
            ("host FE80::1", 5),
            ("host 10.0.0.1 # comment", 14),
            ("port 80 \u{e9}", 8),
        ] {
            let e = parse(s, NOW).unwrap_err();
            assert_eq!(e.pos, at, "{s}: {e}");
            assert!(e.to_string().contains("at character"), "{e}");
        }
        let e = parse("port 80 AND tcp", NOW).unwrap_err();
        assert!(
            e.to_string()
                .contains("Stenographer 1.0.1 would end the query here"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_position() {
        let e = parse("host 1.2.3.4 and port 77777", NOW).unwrap_err();
        assert_eq!(e.pos, 22);
        assert_eq!(
            e.to_string(),
            "invalid port 77777 at character 22 (\"host 1.2.3.4 and port \" HERE \"77777\")"
        );
        let e = parse("host 1.2.3", NOW).unwrap_err();
        assert_eq!((e.pos, e.message.as_str()), (5, "bad IP \"1.2.3\""));
        let e = parse("(tcp", NOW).unwrap_err();
        assert_eq!(e.pos, 4, "{e}");
        let e = parse("tcp udp", NOW).unwrap_err();
        assert_eq!(e.pos, 4, "{e}");
        let e = parse("tcp and", NOW).unwrap_err();
        assert!(e.message.contains("the end of the query"), "{e}");
    }

    #[test]
    fn size_and_depth_are_bounded_without_recursion_blowing_up() {
        let deep = format!("{}tcp{}", "(".repeat(10_000), ")".repeat(10_000));
        let e = parse(&deep, NOW).unwrap_err();
        assert!(e.message.contains("nested more than 100"), "{e}");
        assert_eq!(e.pos, MAX_DEPTH - 1);
        let ok_deep = format!("{}tcp{}", "(".repeat(98), ")".repeat(98));
        assert_eq!(ok(&ok_deep), Query::Proto(6));
        // Alternating operators nest too.
        let alt: Vec<&str> = (0..200)
            .map(|i| if i % 2 == 0 { "tcp and udp" } else { "icmp" })
            .collect();
        let e = parse(&alt.join(" or "), NOW).unwrap_err();
        assert!(e.message.contains("nested"), "{e}");
        // A long flat chain is one node.
        let flat = vec!["host 10.0.0.1"; 3000].join(" or ");
        match ok(&flat) {
            Query::Or(v) => assert_eq!(v.len(), 3000),
            q => panic!("{q:?}"),
        }
        let big = format!("tcp{}", " ".repeat(100 << 10));
        let e = parse(&big, NOW).unwrap_err();
        assert!(e.message.contains("at most 65536"), "{e}");
    }

    #[test]
    fn display_reads_back() {
        for s in [
            "host 10.0.0.1 and (port 53 or ip proto 1)",
            "net 10.0.0.0/8 or net 2001:db8::/32 or vlan 7 or mpls 16",
            "after 2015-01-01T13:14:15Z and before 2015-01-01T13:15:15Z",
        ] {
            let q = ok(s);
            let text = q.to_string();
            assert_eq!(ok(&text.replace(".000000000Z", "Z")), q, "{text}");
        }
    }
}
