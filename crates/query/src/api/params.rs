//! The parameters of the API's endpoints: parsed, checked (every problem a
//! 400 naming the parameter), and turned into a [`Request`]; the 5-tuple
//! form translated as Security Onion's stenoquery does.

use crate::extract::Window;
use crate::job::Request;
use crate::text::{cut_echo, quote};
use std::collections::HashMap;
use std::path::PathBuf;
use wiretape_files::Format;
use wiretape_timestamp::{format_rfc3339, parse_time};

/// A bad request: the message names the parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest(pub String);

use super::spec::{BY, FORMATS, MAX_NUMBER, MAX_SESSION_ROWS, TSPRECS, WIDTH};
pub use super::spec::{PROTOS, QUERY, SESSIONS, TIMELINE, WINDOW};

/// A number as the schemas' `integer` reads in a query string: decimal
/// digits only (no sign, no space), at most [`MAX_NUMBER`].
pub fn number(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&n| n <= MAX_NUMBER)
}

/// The decoded query string: each parameter at most once, each one known.
pub fn parse(
    query: Option<&str>,
    allowed: &[&str],
    path: &str,
) -> Result<HashMap<String, String>, BadRequest> {
    let mut out = HashMap::new();
    for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if !allowed.contains(&k.as_ref()) {
            return Err(BadRequest(if allowed.is_empty() {
                format!("unknown parameter {}: {path} takes none", quote(&k))
            } else {
                format!(
                    "unknown parameter {}: {path} takes {}",
                    quote(&k),
                    allowed.join(", ")
                )
            }));
        }
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(BadRequest(format!("parameter {} given twice", quote(&k))));
        }
    }
    Ok(out)
}

/// The window of `from` and `to` (TIME as `extract` takes it), checked.
pub fn window(p: &HashMap<String, String>, now_ns: u64) -> Result<Window, BadRequest> {
    let time = |k: &str| -> Result<Option<u64>, BadRequest> {
        p.get(k)
            .map(|s| {
                parse_time(s, now_ns).map_err(|e| {
                    BadRequest(format!("parameter '{k}': {}", cut_echo(&e.to_string(), s)))
                })
            })
            .transpose()
    };
    let w = Window {
        from_ns: time("from")?,
        to_ns: time("to")?,
    };
    if let (Some(f), Some(t)) = (w.from_ns, w.to_ns) {
        if t <= f {
            return Err(BadRequest(format!(
                "parameter 'to' ({}) is not after 'from' ({}): the window [from, to) is empty",
                format_rfc3339(t),
                format_rfc3339(f)
            )));
        }
    }
    Ok(w)
}

/// The output format of `format` and `tsprec` (default pcap, ns).
pub fn format(p: &HashMap<String, String>) -> Result<Format, BadRequest> {
    let f = p.get("format").map_or("pcap", String::as_str);
    let t = p.get("tsprec").map_or("ns", String::as_str);
    if !FORMATS.contains(&f) {
        return Err(BadRequest(format!(
            "parameter 'format': {} is not pcap or pcapng",
            quote(f)
        )));
    }
    if !TSPRECS.contains(&t) {
        return Err(BadRequest(format!(
            "parameter 'tsprec': {} is not ns or us",
            quote(t)
        )));
    }
    Format::from_flags(f, t).map_err(|e| {
        BadRequest(format!(
            "parameters 'format' and 'tsprec': {}",
            e.named("format", "tsprec")
        ))
    })
}

/// The filter expression of the 5-tuple form: `host SRC and host DST and
/// port SPORT and port DPORT and PROTO`, a term for each parameter given
/// (hosts and ports without direction: both directions of a conversation),
/// as Security Onion's stenoquery builds it; a number as `proto` is
/// `(ip proto N or ip6 proto N)`. None when no 5-tuple parameter is given.
pub fn five_tuple(p: &HashMap<String, String>) -> Result<Option<String>, BadRequest> {
    let mut terms = Vec::new();
    for k in ["src", "dst"] {
        if let Some(v) = p.get(k) {
            let a: std::net::IpAddr = v.parse().map_err(|_| {
                BadRequest(format!(
                    "parameter '{k}': {} is not an IPv4 or IPv6 address",
                    quote(v)
                ))
            })?;
            terms.push(format!("host {a}"));
        }
    }
    for k in ["sport", "dport"] {
        if let Some(v) = p.get(k) {
            let n = number(v).filter(|&n| n <= 65535).ok_or_else(|| {
                BadRequest(format!(
                    "parameter '{k}': {} is not a port number (0 to 65535)",
                    quote(v)
                ))
            })?;
            terms.push(format!("port {n}"));
        }
    }
    if let Some(v) = p.get("proto") {
        let lower = v.to_ascii_lowercase();
        // A number without leading zeros (the schema's pattern).
        let num = number(v).filter(|&n| n <= 255 && (v == "0" || !v.starts_with('0')));
        if PROTOS.contains(&lower.as_str()) {
            terms.push(lower);
        } else if let Some(n) = num {
            terms.push(format!("(ip proto {n} or ip6 proto {n})"));
        } else {
            return Err(BadRequest(format!(
                "parameter 'proto': {} is not one of {} or a protocol number (0 to 255)",
                quote(v),
                PROTOS.join(", ")
            )));
        }
    }
    Ok((!terms.is_empty()).then(|| terms.join(" and ")))
}

/// The filter of a query: the 5-tuple form's terms and `filter`, joined by
/// `and` (the filter in parentheses).
pub fn filter(p: &HashMap<String, String>) -> Result<Option<String>, BadRequest> {
    let tuple = five_tuple(p)?;
    let f = p
        .get("filter")
        .and_then(|f| crate::job::normalize_filter(f));
    Ok(match (tuple, f) {
        (Some(t), Some(f)) => Some(format!("{t} and ({f})")),
        (t, f) => t.or(f),
    })
}

/// The [`Request`] of a query endpoint's parameters over `stores`.
pub fn request(
    p: &HashMap<String, String>,
    stores: &[PathBuf],
    prefix: Option<&str>,
    now_ns: u64,
) -> Result<Request, BadRequest> {
    let mut r = Request::new(stores.to_vec());
    r.window = window(p, now_ns)?;
    r.filter = filter(p)?;
    r.prefix = prefix.map(str::to_string);
    if let Some(q) = p.get("steno") {
        if r.filter.is_some() {
            return Err(BadRequest(
                "parameter 'steno' (a Stenographer query) cannot be combined with 'filter' or the \
                 5-tuple form: say every condition in one of them"
                    .into(),
            ));
        }
        let sel = crate::steno::compile(q, now_ns)
            .map_err(|e| BadRequest(format!("parameter 'steno': {e}")))?;
        r.steno = Some(std::sync::Arc::new(sel));
    }
    if p.contains_key("session_where") {
        if r.steno.is_some() {
            return Err(BadRequest(
                "parameter 'session_where' cannot be combined with 'steno': give a filter (or the \
                 5-tuple form) with it instead"
                    .into(),
            ));
        }
        r.session_where = where_expr(p, "session_where")?;
    }
    Ok(r)
}

/// The session expression of parameter `key` (`where`, `session_where`),
/// parsed (see [`crate::sessions`]); None when not given.
pub fn where_expr(
    p: &HashMap<String, String>,
    key: &str,
) -> Result<Option<crate::sessions::Where>, BadRequest> {
    p.get(key)
        .map(|w| {
            crate::sessions::Where::parse(w).map_err(|e| {
                BadRequest(format!(
                    "parameter '{key}': at character {}: {}",
                    e.at, e.why
                ))
            })
        })
        .transpose()
}

/// The timeline request of `/v1/timeline`'s parameters over `stores`:
/// the window, `by` (none, iface, queue), `filter_index`, `width` (pixels,
/// 200 to 8000: it chooses the bins) or `bin_ns` (the bins given).
pub fn timeline(
    p: &HashMap<String, String>,
    stores: &[PathBuf],
    prefix: Option<&str>,
    now_ns: u64,
) -> Result<crate::timeline::Request, BadRequest> {
    use crate::timeline::{By, Request};
    let mut r = Request::new(stores.to_vec());
    r.window = window(p, now_ns)?;
    r.prefix = prefix.map(str::to_string);
    if let Some(b) = p.get("by") {
        r.by = BY
            .contains(&b.as_str())
            .then(|| By::parse(b))
            .flatten()
            .ok_or_else(|| {
                BadRequest(format!(
                    "parameter 'by': {} is not none, iface or queue",
                    quote(b)
                ))
            })?;
    }
    r.filter_index = p
        .get("filter_index")
        .and_then(|f| crate::job::normalize_filter(f));
    if let Some(w) = p.get("width") {
        r.width = number(w)
            .filter(|w| (WIDTH.0..=WIDTH.1).contains(w))
            .map(|w| w as u32)
            .ok_or_else(|| {
                BadRequest(format!(
                    "parameter 'width': {} is not a number of pixels from 200 to 8000",
                    quote(w)
                ))
            })?;
    }
    if let Some(b) = p.get("bin_ns") {
        r.bin_ns = Some(number(b).filter(|&b| b > 0).ok_or_else(|| {
            BadRequest(format!(
                "parameter 'bin_ns': {} is not a positive number of nanoseconds",
                quote(b)
            ))
        })?);
    }
    Ok(r)
}

/// `/v1/sessions`' `limit`: 1 to [`MAX_SESSION_ROWS`], that maximum when
/// not given.
pub fn session_limit(p: &HashMap<String, String>) -> Result<usize, BadRequest> {
    match p.get("limit") {
        None => Ok(MAX_SESSION_ROWS as usize),
        Some(l) => number(l)
            .filter(|n| (1..=MAX_SESSION_ROWS).contains(n))
            .map(|n| n as usize)
            .ok_or_else(|| {
                BadRequest(format!(
                    "parameter 'limit': {} is not a number of rows from 1 to {MAX_SESSION_ROWS}",
                    quote(l)
                ))
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(q: &str) -> HashMap<String, String> {
        parse(Some(q), QUERY, "/v1/extract").unwrap()
    }

    #[test]
    fn a_format_refused_names_the_parameters() {
        assert_eq!(format(&p("format=pcapng&tsprec=ns")), Ok(Format::PcapNg));
        assert_eq!(
            format(&p("format=pcapng&tsprec=us")).unwrap_err().0,
            "parameters 'format' and 'tsprec': tsprec us is for pcap; pcapng files always carry \
             ns stamps (if_tsresol 9)"
        );
    }

    #[test]
    fn the_five_tuple_form_is_stenoquerys() {
        let f = |q: &str| filter(&p(q));
        assert_eq!(
            f("src=10.0.0.1&dst=10.0.0.2&sport=1234&dport=80&proto=tcp")
                .unwrap()
                .unwrap(),
            "host 10.0.0.1 and host 10.0.0.2 and port 1234 and port 80 and tcp"
        );
        assert_eq!(f("dport=53&proto=UDP").unwrap().unwrap(), "port 53 and udp");
        assert_eq!(
            f("dport=0080&proto=0").unwrap().unwrap(),
            "port 80 and (ip proto 0 or ip6 proto 0)"
        );
        assert_eq!(
            f("proto=47").unwrap().unwrap(),
            "(ip proto 47 or ip6 proto 47)"
        );
        assert_eq!(
            f("src=fe80::1&filter=not%20icmp6").unwrap().unwrap(),
            "host fe80::1 and (not icmp6)"
        );
        assert_eq!(f("filter=tcp++port+80").unwrap().unwrap(), "tcp port 80");
        assert_eq!(f("").unwrap(), None);
        for (q, k) in [
            ("src=10.0.0.300", "'src'"),
            ("dst=host.example", "'dst'"),
            ("sport=65536", "'sport'"),
            ("dport=-1", "'dport'"),
            ("proto=tcpx", "'proto'"),
            ("proto=256", "'proto'"),
            ("proto=007", "'proto'"),
            ("proto=+6", "'proto'"),
            ("sport=+80", "'sport'"),
            ("dport=%2080", "'dport'"),
            ("src=%2010.0.0.1", "'src'"),
        ] {
            let e = f(q).unwrap_err();
            assert!(e.0.contains(k), "{q}: {}", e.0);
        }
    }

    #[test]
    fn unknown_repeated_and_bad_parameters_are_named() {
        let e = parse(Some("form=1"), QUERY, "/v1/extract").unwrap_err();
        assert!(e.0.contains("unknown parameter 'form'"), "{}", e.0);
        let e = parse(Some("to=1&to=2"), QUERY, "/v1/extract").unwrap_err();
        assert!(e.0.contains("'to' given twice"), "{}", e.0);
        let e = parse(Some("x=1"), &[], "/v1/status").unwrap_err();
        assert!(e.0.contains("takes none"), "{}", e.0);
        let e = window(&p("from=2&to=1"), 0).unwrap_err();
        assert!(e.0.contains("'to'") && e.0.contains("not after"), "{}", e.0);
        let e = window(&p("from=yesterday"), 0).unwrap_err();
        assert!(e.0.contains("'from'"), "{}", e.0);
        assert!(format(&p("format=pcapx"))
            .unwrap_err()
            .0
            .contains("'format'"));
        assert!(format(&p("tsprec=ms")).unwrap_err().0.contains("'tsprec'"));
        assert_eq!(format(&p("format=pcapng")).unwrap(), Format::PcapNg);
        assert_eq!(format(&p("tsprec=us")).unwrap(), Format::PcapUs);
        let w = window(&p("from=1700000000.5&to=1700000001"), 0).unwrap();
        assert_eq!(w.from_ns, Some(1_700_000_000_500_000_000));
        assert_eq!(w.to_ns, Some(1_700_000_001_000_000_000));
    }
}
