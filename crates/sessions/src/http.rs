//! The first HTTP/1.x request of a connection: its method, target, Host
//! and User-Agent, from the client's first bytes.
//!
//! Only complete lines are read, within what the connection's parse
//! buffer holds ([`crate::Config::name_bytes`]): a header after it, or a
//! request line longer than it (a 64 KiB URL), is not seen; such a line's
//! target is stored cut (ending in an ellipsis).
//!
//! Over UDP the same parser reads SSDP (UDP port 1900: `M-SEARCH`,
//! `NOTIFY`), one request per datagram, where tshark's HTTP dissector
//! reads it too (it is registered on that port only: a datagram on another
//! port that looks like HTTP is not read, by either).

use crate::names::Names;
use crate::text::escape;

/// Methods recognised at the start of a client's bytes.
const METHODS: &[&[u8]] = &[
    b"GET",
    b"POST",
    b"HEAD",
    b"PUT",
    b"DELETE",
    b"OPTIONS",
    b"PATCH",
    b"CONNECT",
    b"TRACE",
    b"PROPFIND",
    b"PROPPATCH",
    b"MKCOL",
    b"COPY",
    b"MOVE",
    b"LOCK",
    b"UNLOCK",
    b"SEARCH",
    // SSDP and UPnP's event notification (GENA).
    b"M-SEARCH",
    b"NOTIFY",
    b"SUBSCRIBE",
    b"UNSUBSCRIBE",
];

/// The UDP port whose datagrams are HTTP requests (SSDP).
pub const SSDP_PORT: u16 = 1900;

/// Bytes of a stored target at most.
pub const MAX_PATH: usize = 2048;
/// Bytes of a stored User-Agent at most.
pub const MAX_AGENT: usize = 1024;

/// What a client's first bytes are to this parser.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// Not an HTTP/1.x request.
    NotHttp,
    /// A request is starting: more bytes would tell more.
    More,
    /// Read: the names are stored.
    Done,
}

/// The method `data` starts with (followed by a space), or whether it may
/// still become one.
fn method(data: &[u8]) -> Result<&'static [u8], bool> {
    for m in METHODS {
        if data.len() > m.len() {
            if data.starts_with(m) && data[m.len()] == b' ' {
                return Ok(m);
            }
        } else if m.starts_with(data) {
            return Err(true);
        }
    }
    Err(false)
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t' | b'\r'] = v {
        v = rest;
    }
    v
}

/// Reads the request at the start of `data` into `names`; `last`: no more
/// bytes will come (the buffer or the frame budget is spent), so what is
/// there is stored.
pub fn request(data: &[u8], last: bool, names: &mut Names) -> Request {
    let m = match method(data) {
        Ok(m) => m,
        Err(true) if !last => return Request::More,
        Err(_) => return Request::NotHttp,
    };
    let rest = &data[m.len() + 1..];
    let Some(eol) = rest.iter().position(|&b| b == b'\n') else {
        if !last {
            return Request::More;
        }
        // A request line longer than the buffer: its target, cut.
        names.http_method = escape(m, 16);
        let cut = rest.len().min(MAX_PATH);
        names.http_path = escape(&rest[..cut], cut.saturating_sub(1).max(1));
        return Request::Done;
    };
    let line = trim(&rest[..eol]);
    // "target HTTP/1.x"
    let Some(sp) = line.iter().rposition(|&b| b == b' ') else {
        return Request::NotHttp;
    };
    if !line[sp + 1..].starts_with(b"HTTP/") {
        return Request::NotHttp;
    }
    let target = &line[..sp];
    let (mut host, mut agent) = (None, None);
    let mut at = m.len() + 1 + eol + 1;
    let mut complete = false;
    while at < data.len() {
        let Some(n) = data[at..].iter().position(|&b| b == b'\n') else {
            break;
        };
        let l = trim(&data[at..at + n]);
        at += n + 1;
        if l.is_empty() {
            complete = true;
            break;
        }
        let Some(colon) = l.iter().position(|&b| b == b':') else {
            continue;
        };
        let (k, v) = (&l[..colon], trim(&l[colon + 1..]));
        if host.is_none() && k.eq_ignore_ascii_case(b"host") {
            host = Some(v);
        } else if agent.is_none() && k.eq_ignore_ascii_case(b"user-agent") {
            agent = Some(v);
        }
    }
    if !complete && !last {
        return Request::More;
    }
    names.http_method = escape(m, 16);
    names.http_path = escape(target, MAX_PATH);
    names.http_host = host.and_then(|h| escape(h, crate::dns::MAX_NAME));
    names.http_user_agent = agent.and_then(|a| escape(a, MAX_AGENT));
    Request::Done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_its_partial_forms_and_others() {
        let r = b"GET /a?b=1 HTTP/1.1\r\nhost: example.com:8080\r\nUser-Agent:  curl/8.0 \r\n\r\n";
        let mut n = Names::default();
        assert_eq!(request(r, false, &mut n), Request::Done);
        assert_eq!(n.http_method.as_deref(), Some("GET"));
        assert_eq!(n.http_path.as_deref(), Some("/a?b=1"));
        assert_eq!(n.http_host.as_deref(), Some("example.com:8080"));
        assert_eq!(n.http_user_agent.as_deref(), Some("curl/8.0"));
        let mut n = Names::default();
        assert_eq!(request(&r[..30], false, &mut n), Request::More);
        assert_eq!(request(b"GE", false, &mut n), Request::More);
        assert_eq!(request(b"SSH-2.0-x\r\n", false, &mut n), Request::NotHttp);
        assert_eq!(request(b"GET nothing\r\n", false, &mut n), Request::NotHttp);
        // The buffer ends inside the headers: what was complete is kept.
        assert_eq!(request(&r[..50], true, &mut n), Request::Done);
        assert_eq!(n.http_host.as_deref(), Some("example.com:8080"));
        assert_eq!(n.http_user_agent, None);
        // A 64 KiB line: cut.
        let mut long = b"GET /".to_vec();
        long.resize(16 << 10, b'a');
        let mut n = Names::default();
        assert_eq!(request(&long, true, &mut n), Request::Done);
        assert!(n.http_path.unwrap().ends_with('\u{2026}'));
    }
}
