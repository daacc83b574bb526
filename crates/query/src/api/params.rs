//! The parameters of the API's endpoints: parsed, checked (every problem a
//! 400 naming the parameter), and turned into a [`Request`]; the 5-tuple
//! form translated as Security Onion's stenoquery does.

use crate::extract::Window;
use crate::job::Request;
use std::collections::HashMap;
use std::path::PathBuf;
use wiretape_storage::Format;
use wiretape_timestamp::{format_rfc3339, parse_time};

/// A bad request: the message names the parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest(pub String);

/// The parameters every query endpoint takes.
pub const QUERY: &[&str] = &[
    "from", "to", "filter", "format", "tsprec", "src", "dst", "sport", "dport", "proto", "steno",
];
/// The parameters of `/v1/index.parquet`.
pub const WINDOW: &[&str] = &["from", "to"];

/// The parameters of `/v1/timeline`.
pub const TIMELINE: &[&str] = &["from", "to", "by", "filter_index", "width", "bin_ns"];

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
                format!("unknown parameter '{k}': {path} takes none")
            } else {
                format!(
                    "unknown parameter '{k}': {path} takes {}",
                    allowed.join(", ")
                )
            }));
        }
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(BadRequest(format!("parameter '{k}' given twice")));
        }
    }
    Ok(out)
}

/// The window of `from` and `to` (TIME as `extract` takes it), checked.
pub fn window(p: &HashMap<String, String>, now_ns: u64) -> Result<Window, BadRequest> {
    let time = |k: &str| -> Result<Option<u64>, BadRequest> {
        p.get(k)
            .map(|s| parse_time(s, now_ns).map_err(|e| BadRequest(format!("parameter '{k}': {e}"))))
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
    if !matches!(f, "pcap" | "pcapng") {
        return Err(BadRequest(format!(
            "parameter 'format': '{f}' is not pcap or pcapng"
        )));
    }
    if !matches!(t, "ns" | "us") {
        return Err(BadRequest(format!(
            "parameter 'tsprec': '{t}' is not ns or us"
        )));
    }
    Format::from_flags(f, t).map_err(BadRequest)
}

/// The protocol names the 5-tuple form takes, as tcpdump spells them.
pub const PROTOS: &[&str] = &["tcp", "udp", "icmp", "icmp6", "sctp"];

/// The filter expression of the 5-tuple form: `host SRC and host DST and
/// port SPORT and port DPORT and PROTO`, a term for each parameter given
/// (hosts and ports without direction: both directions of a conversation),
/// as Security Onion's stenoquery builds it; a number as `proto` is
/// `(ip proto N or ip6 proto N)`. None when no 5-tuple parameter is given.
pub fn five_tuple(p: &HashMap<String, String>) -> Result<Option<String>, BadRequest> {
    let mut terms = Vec::new();
    for k in ["src", "dst"] {
        if let Some(v) = p.get(k) {
            let a: std::net::IpAddr = v.trim().parse().map_err(|_| {
                BadRequest(format!(
                    "parameter '{k}': '{v}' is not an IPv4 or IPv6 address"
                ))
            })?;
            terms.push(format!("host {a}"));
        }
    }
    for k in ["sport", "dport"] {
        if let Some(v) = p.get(k) {
            let n: u16 = v.trim().parse().map_err(|_| {
                BadRequest(format!(
                    "parameter '{k}': '{v}' is not a port number (0 to 65535)"
                ))
            })?;
            terms.push(format!("port {n}"));
        }
    }
    if let Some(v) = p.get("proto") {
        let v = v.trim().to_ascii_lowercase();
        if PROTOS.contains(&v.as_str()) {
            terms.push(v);
        } else if let Ok(n) = v.parse::<u8>() {
            terms.push(format!("(ip proto {n} or ip6 proto {n})"));
        } else {
            return Err(BadRequest(format!(
                "parameter 'proto': '{v}' is not one of {} or a protocol number (0 to 255)",
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
    Ok(r)
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
        r.by = By::parse(b).ok_or_else(|| {
            BadRequest(format!("parameter 'by': '{b}' is not none, iface or queue"))
        })?;
    }
    r.filter_index = p
        .get("filter_index")
        .and_then(|f| crate::job::normalize_filter(f));
    if let Some(w) = p.get("width") {
        r.width = w
            .parse()
            .ok()
            .filter(|w| (200..=8000).contains(w))
            .ok_or_else(|| {
                BadRequest(format!(
                    "parameter 'width': '{w}' is not a number of pixels from 200 to 8000"
                ))
            })?;
    }
    if let Some(b) = p.get("bin_ns") {
        r.bin_ns = Some(b.parse().ok().filter(|&b: &u64| b > 0).ok_or_else(|| {
            BadRequest(format!(
                "parameter 'bin_ns': '{b}' is not a positive number of nanoseconds"
            ))
        })?);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(q: &str) -> HashMap<String, String> {
        parse(Some(q), QUERY, "/v1/extract").unwrap()
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
