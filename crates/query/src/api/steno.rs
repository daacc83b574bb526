//! `POST /query`, as Stenographer's server answers it (`env/env.go` of
//! 1.0.1), so that Debian's `stenoread` and `stenocurl` work unchanged:
//!
//! * the body is a query in Stenographer's language ([`crate::steno`]); the
//!   answer (`application/octet-stream`) is a classic pcap, little-endian,
//!   microsecond stamps (cut, not rounded, as Go's `pcapgo` writes them),
//!   snap length 65536, Ethernet: the frames of every store served that
//!   the query selects, merged in time order (a longer frame is cut to
//!   65536 bytes, its original length kept; Stenographer ends its answer
//!   there);
//! * `Steno-Limit-Packets` and `Steno-Limit-Bytes` (what `stenoread
//!   --limit-packets`, `--limit-bytes` send), read as Go's
//!   `strconv.ParseInt(v, 0, 64)` (so `0x100`, `0o17`, `1_000`, a sign):
//!   a bytes limit counts the 16-byte file header and each frame's bytes
//!   plus its 16-byte record header; the frame that reaches a limit is the
//!   last sent; 0 is no limit; a limit that is not a number is 400 before
//!   anything else (as Stenographer's "Invalid Limit Headers");
//! * a query that does not parse (or is longer than
//!   [`steno::MAX_QUERY_BYTES`], or nested deeper than
//!   [`steno::MAX_DEPTH`]) is 400 naming the position; nothing streamed;
//! * the rest as every query of the API: mutual TLS and `--allow-client`
//!   before anything, at most `--max-queries` at once (503), a client that
//!   goes away stops the merge, one line per query on stderr.

use super::body::{ApiBody, BodyError, ChannelSink, StopOnDrop};
use super::{error, log, plan_error, Client, State, CHUNK, CHUNKS};
use crate::job::{self, Job, Request};
use crate::steno;
use crate::QueryError;
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper::header::HeaderValue;
use hyper::{Method, Response, StatusCode};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use wiretape_files::Format;
use wiretape_filter::LINKTYPE_ETHERNET;
use wiretape_storage::PcapWriter;

/// The endpoint's path.
pub(super) const PATH: &str = "/query";
/// Stenographer's snap length.
const SNAPLEN: u32 = 65_536;
/// The bytes of the file header and of each record header.
const HEADER: i64 = 16;

/// Stenographer's `base.Limit`: what is left of each limit (0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Limit {
    pub(crate) bytes: i64,
    pub(crate) packets: i64,
}

impl Limit {
    /// `base.LimitFromHeaders`: the first value of each header, read as Go's
    /// `strconv.ParseInt(v, 0, 64)`; an empty or absent one is no limit.
    pub(crate) fn from_headers(h: &hyper::HeaderMap) -> Result<Limit, String> {
        let get = |name: &str| -> Result<i64, String> {
            let Some(v) = h.get(name) else { return Ok(0) };
            let s = v
                .to_str()
                .map_err(|_| format!("header {name}: not text"))?
                .trim();
            if s.is_empty() {
                return Ok(0);
            }
            go_parse_int(s).ok_or_else(|| {
                format!(
                    "Invalid Limit Headers: {name}: {} is not a number",
                    super::ascii_json(&serde_json::Value::from(s))
                )
            })
        };
        Ok(Limit {
            bytes: get("Steno-Limit-Bytes")?,
            packets: get("Steno-Limit-Packets")?,
        })
    }

    /// `ShouldStopAfter`: takes `bytes` and `packets` off the limits that
    /// are set; true when one of them is used up.
    pub(crate) fn should_stop_after(&mut self, bytes: i64, packets: i64) -> bool {
        fn dec(a: &mut i64, b: i64) -> bool {
            if *a != 0 && b != 0 {
                *a = a.saturating_sub(b);
                *a <= 0
            } else {
                false
            }
        }
        let b = dec(&mut self.bytes, bytes);
        let p = dec(&mut self.packets, packets);
        b || p
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)`: an optional sign, then decimal, or
/// `0b`/`0o`/`0x` binary, octal, hexadecimal, or a leading `0` octal;
/// underscores between digits; within int64.
pub(crate) fn go_parse_int(s: &str) -> Option<i64> {
    let (neg, u) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let b = u.as_bytes();
    if b.is_empty() {
        return None;
    }
    let lower = |c: u8| c | 0x20;
    let (base, digits) = if b[0] == b'0' {
        match b.get(1).map(|&c| lower(c)) {
            Some(b'b') if b.len() >= 3 => (2, &b[2..]),
            Some(b'o') if b.len() >= 3 => (8, &b[2..]),
            Some(b'x') if b.len() >= 3 => (16, &b[2..]),
            _ => (8, &b[1..]),
        }
    } else {
        (10, b)
    };
    // underscoreOK: each '_' between digits (a base prefix counts as one).
    let hex = base == 16 && b.len() >= 2 && lower(b[1]) == b'x';
    let mut saw = if b.len() >= 2 && b[0] == b'0' && matches!(lower(b[1]), b'b' | b'o' | b'x') {
        b'0'
    } else {
        b'^'
    };
    let start = if saw == b'0' { 2 } else { 0 };
    for &c in &b[start..] {
        if c.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&lower(c))) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return None;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return None;
            }
            saw = b'!';
        }
    }
    if saw == b'_' {
        return None;
    }
    let mut n: u64 = 0;
    for &c in digits {
        if c == b'_' {
            continue;
        }
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'z' | b'A'..=b'Z' => lower(c) - b'a' + 10,
            _ => return None,
        };
        if u32::from(d) >= base {
            return None;
        }
        n = n.checked_mul(u64::from(base))?.checked_add(u64::from(d))?;
    }
    if neg {
        if n > 1 << 63 {
            return None;
        }
        Some((n as i64).wrapping_neg())
    } else {
        i64::try_from(n).ok()
    }
}

/// The bytes of a request body read (and dropped past what is kept)
/// before a refusal; a longer body's connection is closed.
const DRAIN: usize = 1 << 20;

/// The first `keep` bytes of `body` and its length, reading at most
/// `drain` bytes of it (the rest is left: the connection is then closed).
async fn read_body(
    mut body: hyper::body::Incoming,
    keep: usize,
    drain: usize,
) -> Result<(bytes::Bytes, usize), hyper::Error> {
    let mut kept = Vec::new();
    let mut total = 0usize;
    while let Some(f) = body.frame().await {
        if let Ok(d) = f?.into_data() {
            let room = keep.saturating_sub(kept.len());
            kept.extend_from_slice(&d[..d.len().min(room)]);
            total += d.len();
            if total > drain {
                break;
            }
        }
    }
    Ok((kept.into(), total))
}

/// Answers `POST /query`.
pub(super) async fn query(
    st: Arc<State>,
    client: Client,
    req: hyper::Request<hyper::body::Incoming>,
    what: String,
) -> Response<ApiBody> {
    if req.method() != Method::POST {
        log(&st, &client.name, &what, "405");
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{PATH} answers POST only (the query in the body, as stenoread sends it), not {}",
                req.method()
            ),
        );
        r.headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let refuse = |what: &str, m: String| {
        log(&st, &client.name, what, &format!("400 {m}"));
        error(StatusCode::BAD_REQUEST, m)
    };
    // The body is read (up to DRAIN bytes) before any answer, a refusal
    // too: a client still sending it would otherwise meet a closed
    // connection instead of the 400.
    let (parts, body) = req.into_parts();
    let (bytes, total) = match read_body(body, steno::MAX_QUERY_BYTES + 1, DRAIN).await {
        Ok(b) => b,
        Err(e) => return refuse(&what, format!("could not read request body: {e}")),
    };
    let mut limit = match Limit::from_headers(&parts.headers) {
        Ok(l) => l,
        Err(m) => return refuse(&what, m),
    };
    if total > steno::MAX_QUERY_BYTES {
        return refuse(
            &what,
            format!(
                "could not parse query: it is longer than {} bytes: at most that many are taken",
                steno::MAX_QUERY_BYTES
            ),
        );
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return refuse(
            &what,
            "could not parse query: it is not UTF-8 text".to_string(),
        );
    };
    let what = format!("{what} {}", crate::text::quote(text));
    let sel = match steno::compile(text, wiretape_timestamp::realtime_ns()) {
        Ok(s) => s,
        Err(e) => return refuse(&what, e.to_string()),
    };
    let Ok(permit) = st.queries.clone().try_acquire_owned() else {
        return super::busy(&st, &client, &what);
    };
    let mut request = Request::new(st.cfg.stores.clone());
    request.prefix = st.cfg.prefix.clone();
    request.read = st.cfg.read.clone();
    request.steno = Some(Arc::new(sel));
    let stop = StopOnDrop::new();
    let flag = stop.flag();
    let (planned_tx, planned_rx) = oneshot::channel::<Result<(), QueryError>>();
    let (tx, rx) = mpsc::channel::<Result<Frame<bytes::Bytes>, BodyError>>(CHUNKS);
    let st2 = st.clone();
    let name = client.name.clone();
    let what2 = what.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let started = Instant::now();
        let mut job = match Job::plan(&request) {
            Ok(j) => j,
            Err(e) => {
                let _ = planned_tx.send(Err(e));
                return;
            }
        };
        job.stop_on(flag.clone());
        let _ = planned_tx.send(Ok(()));
        let skipped = job.not_ethernet.len();
        let sink = ChannelSink::new(tx.clone(), flag.clone(), CHUNK);
        let mut out =
            PcapWriter::with_links(sink, SNAPLEN, Format::PcapUs, "", &[LINKTYPE_ETHERNET]);
        // Stenographer stops after the file header when the bytes limit
        // does not reach past it.
        let mut reached = limit.should_stop_after(HEADER, 0);
        let mut sent = 0u64;
        let run = if reached {
            None
        } else {
            Some(job.run(
                |fr| {
                    out.write_wire_on(0, fr.ts_ns, fr.data, fr.orig_len)
                        .map_err(|e| Some(QueryError::from(e)))?;
                    sent += 1;
                    let cap = fr.data.len().min(SNAPLEN as usize) as i64;
                    if limit.should_stop_after(cap + HEADER, 1) {
                        reached = true;
                        // Ends the run (nothing is wrong).
                        return Err(None);
                    }
                    Ok::<(), Option<QueryError>>(())
                },
                |_| {},
            ))
        };
        let closed = out
            .flush()
            .and_then(|_| out.close().map(|_| ()).map_err(|(_, e)| e));
        let secs = started.elapsed().as_secs_f64();
        if flag.load(Ordering::Relaxed) {
            log(
                &st2,
                &name,
                &what2,
                &format!("200 cut: the client went away ({sent} frames sent, {secs:.3} s)"),
            );
            return;
        }
        let failure = match (run, closed) {
            (_, Err(e)) => Some(e.to_string()),
            (None | Some(Err(None)), Ok(())) => None,
            (Some(Err(Some(e))), Ok(())) => Some(e.to_string()),
            (Some(Ok(o)), Ok(())) => {
                let bad: Vec<String> = o
                    .notes
                    .iter()
                    .filter(|n| matches!(n.kind, crate::NoteKind::Damage | crate::NoteKind::Error))
                    .map(job::note_line)
                    .collect();
                (!bad.is_empty()).then(|| bad.join("; "))
            }
        };
        let res = match &failure {
            None => format!(
                "200, {sent} frames{}{}, {secs:.3} s",
                if reached {
                    " (a Steno-Limit reached)"
                } else {
                    ""
                },
                if skipped > 0 {
                    format!(", {skipped} file(s) of other link types not read")
                } else {
                    String::new()
                },
            ),
            Some(f) => format!("200 cut short after {sent} frames, {secs:.3} s: {f}"),
        };
        log(&st2, &name, &what2, &res);
        if let Some(f) = failure {
            // Cut the answer short: never an incomplete one passed off as whole.
            let _ = tx.blocking_send(Err(f.into()));
        }
    });
    match planned_rx.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return plan_error(&st, &client.name, &what, &e),
        Err(_) => {
            log(
                &st,
                &client.name,
                &what,
                "500 the query ended before it was planned",
            );
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the query ended before it was planned",
            );
        }
    }
    let mut r = Response::new(ApiBody::stream(rx, stop));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_as_go_reads_them() {
        for (s, v) in [
            ("0", Some(0)),
            ("6", Some(6)),
            ("+6", Some(6)),
            ("-6", Some(-6)),
            ("010", Some(8)),
            ("0x10", Some(16)),
            ("0X1f", Some(31)),
            ("0o17", Some(15)),
            ("0b101", Some(5)),
            ("1_000", Some(1000)),
            ("0x_1f", Some(31)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("", None),
            ("0x", None),
            ("08", None),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("1k", None),
            ("1.5", None),
            (" 1", None),
        ] {
            assert_eq!(go_parse_int(s), v, "{s:?}");
        }
    }

    #[test]
    fn limits_stop_as_stenographers_do() {
        // Packets: exactly N.
        let mut l = Limit {
            bytes: 0,
            packets: 3,
        };
        assert!(!l.should_stop_after(HEADER, 0));
        let sent = (1..10)
            .take_while(|_| !l.should_stop_after(100 + HEADER, 1))
            .count()
            + 1;
        assert_eq!(sent, 3);
        // Bytes: the frame that reaches the limit is the last one.
        let mut l = Limit {
            bytes: 16 + 116 + 1,
            packets: 0,
        };
        assert!(!l.should_stop_after(HEADER, 0));
        assert!(!l.should_stop_after(100 + HEADER, 1));
        assert!(l.should_stop_after(100 + HEADER, 1));
        // The header alone.
        let mut l = Limit {
            bytes: 16,
            packets: 0,
        };
        assert!(l.should_stop_after(HEADER, 0));
        // A negative limit: one frame (packets), nothing (bytes).
        let mut l = Limit {
            bytes: 0,
            packets: -1,
        };
        assert!(!l.should_stop_after(HEADER, 0));
        assert!(l.should_stop_after(60 + HEADER, 1));
    }
}
