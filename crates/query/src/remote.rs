//! The client side of the sensor API: `wiretape extract https://S1
//! https://S2 DIR ...` and `wiretape index --parquet OUT https://S1 ...`.
//!
//! A [`Client`] owns a small tokio runtime (one worker thread) that talks
//! HTTP/1.1 over mutual TLS (rustls) to the sensors; everything above it is
//! blocking. [`Client::stream`] asks a sensor for its frames and returns a
//! [`RemoteStream`] at once (the request goes out as the call returns, so
//! every sensor is asked at the same time); the stream is a [`Read`] of the
//! pcap the sensor sends, fed through a bounded channel (8 chunks: a
//! sensor runs at most a few MiB ahead of the merge). [`Sources`] merges
//! local merges and sensors' streams in stamp order, ties in the order of
//! the inputs: the same frames, in the same order, as one local merge over
//! all the stores.

use crate::extract::Merge;
use crate::job::Pred;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::header::HeaderMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use wiretape_files::walk::Walker;

/// Bytes of the chunks a sensor's stream hands to the merge.
const CHUNK: usize = 256 << 10;
/// How long connecting and the TLS handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a sensor may take to answer a request's head (it plans first).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// A sensor's failure, in words for the user (its URL is said beside it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RemoteError(pub String);

/// A sensor's address that does not parse ([`Remote::parse`]); each names
/// the address as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// Neither `https://` nor `http://`.
    #[error("{url}: not a sensor URL (https://HOST:PORT)")]
    NotUrl {
        /// The address as given.
        url: String,
    },
    /// A path or a query after `HOST:PORT`.
    #[error("{url}: give the sensor as https://HOST:PORT, without a path")]
    Path {
        /// The address as given.
        url: String,
    },
    /// No `:PORT` (`bracketed`: an IPv6 address in brackets).
    #[error("{url}: give the port: {}", if *.bracketed { "https://[ADDR]:PORT" } else { "https://HOST:PORT" })]
    NoPort {
        /// The address as given.
        url: String,
        /// Whether the host is an IPv6 address in brackets.
        bracketed: bool,
    },
    /// The port is not a number from 0 to 65535.
    #[error("{url}: '{port}' is not a port number")]
    BadPort {
        /// The address as given.
        url: String,
        /// The port's text.
        port: String,
    },
    /// Nothing before `:PORT`.
    #[error("{url}: no host")]
    NoHost {
        /// The address as given.
        url: String,
    },
    /// `http://` to a host that is not loopback: queries to other hosts
    /// never go out in the clear.
    #[error(
        "{url}: plain http:// is for loopback servers only; use https:// with this client's \
         certificate, key and CA"
    )]
    PlainNotLoopback {
        /// The address as given.
        url: String,
    },
}

/// A sensor's address: `https://HOST:PORT` (or `http://` for loopback).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    /// As given (without a trailing slash).
    pub url: String,
    /// TLS (`https`).
    pub tls: bool,
    /// The host: a name or an address (IPv6 without brackets).
    pub host: String,
    /// The port.
    pub port: u16,
}

/// Whether an input word names a sensor rather than a path.
pub fn is_url(s: &str) -> bool {
    s.starts_with("https://") || s.starts_with("http://")
}

/// Inputs split into local paths and sensors ([`is_url`] words), each in
/// its order. Err: a sensor's address that does not parse ([`Remote::parse`]).
pub fn split_inputs<S: AsRef<str>>(
    words: &[S],
) -> Result<(Vec<PathBuf>, Vec<Remote>), AddressError> {
    let mut local = Vec::new();
    let mut remotes = Vec::new();
    for w in words {
        let w = w.as_ref();
        if is_url(w) {
            remotes.push(Remote::parse(w)?);
        } else {
            local.push(PathBuf::from(w));
        }
    }
    Ok((local, remotes))
}

impl Remote {
    /// Parses `https://HOST:PORT` (port required; an IPv6 host in
    /// brackets). `http://` only for a loopback host: queries to other
    /// hosts never go out in the clear.
    pub fn parse(s: &str) -> Result<Remote, AddressError> {
        let url = || s.to_string();
        let (tls, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(AddressError::NotUrl { url: url() });
        };
        let hostport = rest.trim_end_matches('/');
        if hostport.contains('/') || hostport.contains('?') {
            return Err(AddressError::Path { url: url() });
        }
        let (host, port) = if let Some(r) = hostport.strip_prefix('[') {
            let (h, p) = r.split_once("]:").ok_or_else(|| AddressError::NoPort {
                url: url(),
                bracketed: true,
            })?;
            (h.to_string(), p)
        } else {
            let (h, p) = hostport
                .rsplit_once(':')
                .ok_or_else(|| AddressError::NoPort {
                    url: url(),
                    bracketed: false,
                })?;
            (h.to_string(), p)
        };
        let port: u16 = port.parse().map_err(|_| AddressError::BadPort {
            url: url(),
            port: port.to_string(),
        })?;
        if host.is_empty() {
            return Err(AddressError::NoHost { url: url() });
        }
        if !tls {
            let loopback = match host.parse::<IpAddr>() {
                Ok(a) => crate::api::is_loopback(a),
                Err(_) => host == "localhost",
            };
            if !loopback {
                return Err(AddressError::PlainNotLoopback { url: url() });
            }
        }
        Ok(Remote {
            url: format!("{}://{}", if tls { "https" } else { "http" }, hostport),
            tls,
            host,
            port,
        })
    }
}

/// A pcap stream from a sensor, read as it arrives.
pub struct RemoteStream {
    rx: mpsc::Receiver<Msg>,
    buf: Bytes,
    /// The rest of the batch `buf` came from, in reverse order.
    queued: Vec<Bytes>,
    ended: bool,
    failure: Option<String>,
    trailers: Option<HeaderMap>,
    received: u64,
}

enum Msg {
    /// Data frames as they arrived (no copy), handed over together.
    Data(Vec<Bytes>),
    Trailers(HeaderMap),
    Failed(String),
}

impl RemoteStream {
    /// Why the stream failed (refused, an error status, cut short, or the
    /// sensor's `wiretape-error` trailer), once it has ended.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// The sensor's summary (`wiretape-summary` trailer: the JSON of
    /// `extract --json` there), once the stream has ended.
    pub fn summary(&self) -> Option<serde_json::Value> {
        let v = self.trailers.as_ref()?.get("wiretape-summary")?;
        serde_json::from_slice(v.as_bytes()).ok()
    }

    /// Bytes received.
    pub fn received(&self) -> u64 {
        self.received
    }
}

impl Read for RemoteStream {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.buf.is_empty() {
            if let Some(b) = self.queued.pop() {
                self.buf = b;
                continue;
            }
            if self.ended {
                return Ok(0);
            }
            match self.rx.blocking_recv() {
                Some(Msg::Data(mut v)) => {
                    self.received += v.iter().map(|b| b.len() as u64).sum::<u64>();
                    v.reverse();
                    self.queued = v;
                }
                Some(Msg::Trailers(h)) => {
                    if let Some(e) = h.get("wiretape-error") {
                        self.failure = Some(format!(
                            "the sensor reports: {}",
                            String::from_utf8_lossy(e.as_bytes())
                        ));
                    }
                    self.trailers = Some(h);
                }
                Some(Msg::Failed(e)) => {
                    self.failure = Some(e);
                    self.ended = true;
                }
                None => self.ended = true,
            }
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        let _ = self.buf.split_to(n);
        Ok(n)
    }
}

/// The client of one or more sensors.
pub struct Client {
    rt: tokio::runtime::Runtime,
    tls: Option<Arc<crate::tls::ClientTls>>,
    naming: crate::tls::Naming,
}

/// A connection's stream: TLS or plain.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// The rustls error somewhere in `e`'s chain (tokio-rustls wraps it in an
/// I/O error, hyper in its own).
fn rustls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur = Some(e);
    while let Some(x) = cur {
        if let Some(r) = x.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(r) = x
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(r);
        }
        cur = x.source();
    }
    None
}

/// The TLS of one connection: the client's and what the connection saw.
type TlsCtx = (Arc<crate::tls::ClientTls>, crate::tls::SeenSlot);

/// Why a request to `r` failed, from its error and its connection's: the
/// TLS alert the sensor sent, a sensor that does not speak what the URL
/// says, or the likely causes and where the sensor logs them.
fn request_failure(
    e: &hyper::Error,
    conn: Option<&hyper::Error>,
    tls: Option<&TlsCtx>,
    r: &Remote,
    naming: crate::tls::Naming,
) -> String {
    use crate::tls::{PemRole, Term};
    let say = |t: Term| naming(&t);
    let causes: [Option<&(dyn std::error::Error + 'static)>; 2] = [
        conn.map(|c| c as &(dyn std::error::Error + 'static)),
        Some(e),
    ];
    for c in causes.into_iter().flatten() {
        if let (Some(err), Some((t, seen))) = (rustls_cause(c), tls) {
            return t.explain(err, seen, &r.host, r.port);
        }
    }
    let hp = format!("{}:{}", url_host(&r.host), r.port);
    if !r.tls && (e.is_parse() || conn.is_some_and(|c| c.is_parse())) {
        return format!(
            "the server at {hp} did not answer in HTTP ({}): if it speaks HTTPS (a `wiretape api` with \
             TLS), use https://{hp} with {}, {} and {}",
            conn.unwrap_or(e),
            say(Term::File(PemRole::ClientCert)),
            say(Term::File(PemRole::ClientKey)),
            say(Term::File(PemRole::ServerCa))
        );
    }
    if r.tls {
        return format!(
            "the sensor closed the connection after the TLS handshake without saying why ({}): most \
             often it refused this client's certificate (expired, of another CA) or had {} open; its \
             log (the stderr of `wiretape api`) says which",
            conn.unwrap_or(e),
            say(Term::ConnectionLimit)
        );
    }
    format!("the request failed: {}", conn.unwrap_or(e))
}

/// A host as it goes into a URL (an IPv6 address in brackets).
fn url_host(h: &str) -> String {
    if h.contains(':') {
        format!("[{h}]")
    } else {
        h.to_string()
    }
}

impl Client {
    /// A client with `tls` (None: plain http:// to loopback only), its
    /// messages in the library's words ([`crate::tls::library_terms`]).
    pub fn new(tls: Option<crate::tls::ClientTls>) -> Result<Client, RemoteError> {
        Client::named(tls, crate::tls::library_terms)
    }

    /// [`Client::new`], its messages (why a request failed) naming files
    /// and settings by `naming`.
    pub fn named(
        tls: Option<crate::tls::ClientTls>,
        naming: crate::tls::Naming,
    ) -> Result<Client, RemoteError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("wt-remote")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| RemoteError(format!("cannot start the client: {e}")))?;
        Ok(Client {
            rt,
            tls: tls.map(Arc::new),
            naming,
        })
    }

    /// Sends `GET path_and_query` to `r`; the response's head, and the
    /// body as it comes.
    async fn get(
        tls: Option<Arc<crate::tls::ClientTls>>,
        naming: crate::tls::Naming,
        r: Remote,
        path_and_query: String,
        trailers: bool,
    ) -> Result<hyper::Response<hyper::body::Incoming>, RemoteError> {
        let addr = format!("{}:{}", r.host, r.port);
        let hp = format!("{}:{}", url_host(&r.host), r.port);
        let step = |what: &str, e: &dyn std::fmt::Display| RemoteError(format!("{what}: {e}"));
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(&addr))
            .await
            .map_err(|_| RemoteError(format!("no answer from {addr} within 10 s")))?
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::ConnectionRefused {
                    RemoteError(format!(
                        "cannot connect: nothing listens on {hp} (is `wiretape api` running there, on this port?)"
                    ))
                } else {
                    step("cannot connect", &e)
                }
            })?;
        let _ = tcp.set_nodelay(true);
        let mut ctx: Option<TlsCtx> = None;
        let io: Box<dyn Io> = if r.tls {
            let Some(t) = tls else {
                return Err(RemoteError(
                    "https:// needs this client's certificate, key and CA: the client was made \
                     without them"
                        .into(),
                ));
            };
            let (cfg, seen) = t.connection();
            let conn = tokio_rustls::TlsConnector::from(cfg);
            let name = rustls::pki_types::ServerName::try_from(r.host.clone())
                .map_err(|e| step("bad server name", &e))?;
            let s = tokio::time::timeout(CONNECT_TIMEOUT, conn.connect(name, tcp))
                .await
                .map_err(|_| {
                    RemoteError(format!(
                        "TLS handshake: no answer within 10 s (a plain-HTTP server waits for a request: \
                         if {hp} serves plain HTTP, use http://{hp})"
                    ))
                })?
                .map_err(|e| match rustls_cause(&e) {
                    Some(err) => RemoteError(t.explain(err, &seen, &r.host, r.port)),
                    None => step("TLS handshake refused", &e),
                })?;
            ctx = Some((t, seen));
            Box::new(s)
        } else {
            Box::new(tcp)
        };
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
                .await
                .map_err(|e| step("HTTP", &e))?;
        // The connection's own error says more than the request's (a TLS
        // alert read after the handshake, a reply that is not HTTP).
        let (conn_tx, conn_rx) = tokio::sync::oneshot::channel::<hyper::Error>();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                let _ = conn_tx.send(e);
            }
        });
        let host = if r.host.contains(':') {
            format!("[{}]:{}", r.host, r.port)
        } else {
            format!("{}:{}", r.host, r.port)
        };
        let mut req = hyper::Request::get(path_and_query)
            .header(hyper::header::HOST, host)
            .header(
                hyper::header::USER_AGENT,
                concat!("wiretape/", env!("CARGO_PKG_VERSION")),
            );
        if trailers {
            req = req.header(hyper::header::TE, "trailers");
        }
        let req = req
            .body(http_body_util::Empty::<Bytes>::new())
            .map_err(|e| step("request", &e))?;
        let resp = match tokio::time::timeout(ANSWER_TIMEOUT, send.send_request(req)).await {
            Err(_) => return Err(RemoteError("no answer within 120 s".into())),
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => {
                // TLS 1.3: a refused client certificate shows here, the
                // sensor's alert coming after the handshake.
                let conn_err = tokio::time::timeout(Duration::from_secs(2), conn_rx)
                    .await
                    .ok()
                    .and_then(Result::ok);
                return Err(RemoteError(request_failure(
                    &e,
                    conn_err.as_ref(),
                    ctx.as_ref(),
                    &r,
                    naming,
                )));
            }
        };
        if resp.status() != hyper::StatusCode::OK {
            let status = resp.status();
            let body = tokio::time::timeout(ANSWER_TIMEOUT, resp.into_body().collect())
                .await
                .ok()
                .and_then(|b| b.ok())
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let msg = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
                .unwrap_or_else(|| {
                    String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()
                });
            return Err(RemoteError(format!("{status}: {msg}")));
        }
        Ok(resp)
    }

    /// The whole answer to `GET path_and_query` (JSON, a Parquet table).
    pub fn get_bytes(&self, r: &Remote, path_and_query: &str) -> Result<Vec<u8>, RemoteError> {
        self.get_with_headers(r, path_and_query).map(|(_, b)| b)
    }

    /// The headers and the whole answer to `GET path_and_query`.
    pub fn get_with_headers(
        &self,
        r: &Remote,
        path_and_query: &str,
    ) -> Result<(HeaderMap, Vec<u8>), RemoteError> {
        let (tls, r, pq) = (self.tls.clone(), r.clone(), path_and_query.to_string());
        self.rt.block_on(async move {
            let resp = Self::get(tls, self.naming, r, pq, false).await?;
            let head = resp.headers().clone();
            let b = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| RemoteError(format!("the answer was cut short: {e}")))?;
            Ok((head, b.to_bytes().to_vec()))
        })
    }

    /// The JSON answer to `GET path_and_query`.
    pub fn get_json(
        &self,
        r: &Remote,
        path_and_query: &str,
    ) -> Result<serde_json::Value, RemoteError> {
        let b = self.get_bytes(r, path_and_query)?;
        serde_json::from_slice(&b).map_err(|e| RemoteError(format!("not a JSON answer: {e}")))
    }

    /// Starts `GET path_and_query` (an extraction) and returns its stream
    /// at once; the request runs on the client's runtime meanwhile.
    pub fn stream(&self, r: &Remote, path_and_query: &str) -> RemoteStream {
        let (tx, rx) = mpsc::channel(8);
        let (tls, r, pq) = (self.tls.clone(), r.clone(), path_and_query.to_string());
        let naming = self.naming;
        self.rt.spawn(async move {
            let resp = match Self::get(tls, naming, r, pq, true).await {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Msg::Failed(e.0)).await;
                    return;
                }
            };
            let mut body = resp.into_body();
            // Data frames come as TLS records arrive (16 KiB or less): what
            // is ready at once goes over the channel as one chunk (up to
            // CHUNK), so the merge's thread wakes once per chunk, not per
            // record.
            let mut acc: Vec<Bytes> = Vec::new();
            let mut acc_len = 0usize;
            loop {
                let mut pending = body.frame().await;
                let mut ended = pending.is_none();
                while let Some(f) = pending.take() {
                    match f {
                        Ok(f) => match f.into_data() {
                            Ok(d) => {
                                acc_len += d.len();
                                acc.push(d);
                            }
                            Err(f) => {
                                if let Ok(t) = f.into_trailers() {
                                    if !acc.is_empty() {
                                        acc_len = 0;
                                        let d = std::mem::take(&mut acc);
                                        if tx.send(Msg::Data(d)).await.is_err() {
                                            return;
                                        }
                                    }
                                    if tx.send(Msg::Trailers(t)).await.is_err() {
                                        return;
                                    }
                                }
                            }
                        },
                        Err(e) => {
                            if !acc.is_empty() {
                                let _ = tx.send(Msg::Data(std::mem::take(&mut acc))).await;
                            }
                            let _ = tx
                                .send(Msg::Failed(format!("the stream was cut short: {e}")))
                                .await;
                            return;
                        }
                    }
                    if acc_len >= CHUNK {
                        break;
                    }
                    // Another frame already here? Take it without waiting.
                    let b = &mut body;
                    match std::future::poll_fn(|cx| {
                        std::task::Poll::Ready(hyper::body::Body::poll_frame(
                            std::pin::Pin::new(&mut *b),
                            cx,
                        ))
                    })
                    .await
                    {
                        std::task::Poll::Ready(Some(f)) => pending = Some(f),
                        std::task::Poll::Ready(None) => ended = true,
                        std::task::Poll::Pending => {}
                    }
                }
                acc_len = 0;
                if !acc.is_empty() && tx.send(Msg::Data(std::mem::take(&mut acc))).await.is_err() {
                    // The merge is gone (it ended early): drop the
                    // connection, the sensor stops.
                    return;
                }
                if ended {
                    return;
                }
            }
        });
        RemoteStream {
            rx,
            buf: Bytes::new(),
            queued: Vec::new(),
            ended: false,
            failure: None,
            trailers: None,
            received: 0,
        }
    }
}

/// A window bound as the API takes it: Unix seconds with nine decimals.
pub fn time_param(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The query string of an extraction, count or plan: the window (absolute,
/// so every sensor answers the same one), the filter, and for extractions
/// pcap with ns stamps (the client writes the format asked for).
pub fn query_string(window: &crate::Window, filter: Option<&str>, extract: bool) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    if let Some(f) = window.from_ns {
        q.append_pair("from", &time_param(f));
    }
    if let Some(t) = window.to_ns {
        q.append_pair("to", &time_param(t));
    }
    if let Some(f) = filter {
        q.append_pair("filter", f);
    }
    if extract {
        q.append_pair("format", "pcap");
        q.append_pair("tsprec", "ns");
    }
    q.finish()
}

/// `query` (a query string) with `key=value` added.
pub fn with_param(query: &str, key: &str, value: &str) -> String {
    let mut q = form_urlencoded::Serializer::new(query.to_string());
    q.append_pair(key, value);
    q.finish()
}

/// A sensor's frames, as a merge source.
pub struct RemoteSource {
    /// The sensor.
    pub remote: Remote,
    walk: Walker<RemoteStream>,
    data: Vec<u8>,
    ts_ns: u64,
    orig_len: u32,
    /// Frames taken from it.
    pub frames: u64,
    /// Their captured bytes.
    pub bytes: u64,
    /// Their bytes on the wire.
    pub wire_bytes: u64,
    checked: bool,
    failure: Option<String>,
}

impl RemoteSource {
    /// A source over a stream started by [`Client::stream`].
    pub fn new(remote: Remote, stream: RemoteStream) -> Self {
        RemoteSource {
            remote,
            walk: Walker::new(stream),
            data: Vec::with_capacity(2048),
            ts_ns: 0,
            orig_len: 0,
            frames: 0,
            bytes: 0,
            wire_bytes: 0,
            checked: false,
            failure: None,
        }
    }

    fn advance(&mut self) -> Option<u64> {
        if !self.checked {
            self.checked = true;
            if self.walk.stop().is_none()
                && self.walk.header().linktype != wiretape_filter::LINKTYPE_ETHERNET
            {
                self.failure = Some(format!(
                    "the sensor sent link type {} (extract merges Ethernet)",
                    self.walk.header().linktype
                ));
                return None;
            }
        }
        match self.walk.next_into(&mut self.data) {
            Some(m) => {
                self.ts_ns = m.ts_ns;
                self.orig_len = m.orig_len;
                self.frames += 1;
                self.bytes += self.data.len() as u64;
                self.wire_bytes += u64::from(m.orig_len);
                Some(m.ts_ns)
            }
            None => {
                if self.failure.is_none() {
                    let s = self.walk.get_ref();
                    self.failure = match (s.failure(), self.walk.stop()) {
                        (Some(f), _) => Some(f.to_string()),
                        (None, Some(stop)) => {
                            use wiretape_files::walk::End;
                            match &stop.end {
                                End::Clean => None,
                                other => Some(format!(
                                    "the stream is not a whole capture: {other:?} at byte {}",
                                    stop.offset
                                )),
                            }
                        }
                        (None, None) => None,
                    };
                }
                None
            }
        }
    }

    /// Why this sensor failed, if it did (after the merge).
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// The sensor's own summary of its extraction.
    pub fn summary(&self) -> Option<serde_json::Value> {
        self.walk.get_ref().summary()
    }
}

/// One input of a merge over local stores and sensors.
pub enum Source {
    /// Local inputs (one planned job's merge).
    Local(Box<Merge<Pred>>),
    /// A sensor.
    Remote(Box<RemoteSource>),
}

impl Source {
    fn advance(&mut self) -> Option<u64> {
        match self {
            Source::Local(m) => m.next().map(|f| f.ts_ns),
            Source::Remote(r) => r.advance(),
        }
    }
}

/// One frame of a [`Sources`] merge.
#[derive(Clone, Copy, Debug)]
pub struct MixedFrame<'a> {
    /// UTC ns.
    pub ts_ns: u64,
    /// Length on the wire.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
    /// The source it came from (index in the order given).
    pub source: usize,
    /// Its link type (a sensor's frames are Ethernet).
    pub linktype: u32,
}

/// The merge of several sources in stamp order, ties in the order of the
/// sources.
pub struct Sources {
    sources: Vec<Source>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    current: Option<usize>,
    started: bool,
}

impl Sources {
    /// Merges `sources` (in the order of the inputs).
    pub fn new(sources: Vec<Source>) -> Self {
        Sources {
            sources,
            heap: BinaryHeap::new(),
            current: None,
            started: false,
        }
    }

    /// The sources (for their counts, notes and failures after the merge).
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// The sources, to take their notes as the merge goes.
    pub fn sources_mut(&mut self) -> &mut [Source] {
        &mut self.sources
    }

    /// Gives the sources back.
    pub fn into_sources(self) -> Vec<Source> {
        self.sources
    }

    /// The next frame, or None when every source is done.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<MixedFrame<'_>> {
        if !self.started {
            self.started = true;
            for i in 0..self.sources.len() {
                if let Some(ts) = self.sources[i].advance() {
                    self.heap.push(Reverse((ts, i)));
                }
            }
        } else if let Some(i) = self.current.take() {
            if let Some(ts) = self.sources[i].advance() {
                self.heap.push(Reverse((ts, i)));
            }
        }
        let Reverse((_, i)) = self.heap.pop()?;
        self.current = Some(i);
        match &self.sources[i] {
            Source::Local(m) => {
                let f = m.current()?;
                Some(MixedFrame {
                    ts_ns: f.ts_ns,
                    orig_len: f.orig_len,
                    data: f.data,
                    source: i,
                    linktype: f.linktype,
                })
            }
            Source::Remote(r) => Some(MixedFrame {
                ts_ns: r.ts_ns,
                orig_len: r.orig_len,
                data: &r.data,
                source: i,
                linktype: wiretape_filter::LINKTYPE_ETHERNET,
            }),
        }
    }
}

/// The address a remote's host resolves to first (for messages).
pub fn describe(r: &Remote) -> String {
    match format!("{}:{}", r.host, r.port).parse::<SocketAddr>() {
        Ok(a) => a.to_string(),
        Err(_) => format!("{}:{}", r.host, r.port),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn input_words_split_into_paths_and_sensors_in_order() {
        let (l, r) =
            split_inputs(&["/data", "https://s1:8443", "x.pcap", "http://127.0.0.1:1"]).unwrap();
        assert_eq!(l, [PathBuf::from("/data"), PathBuf::from("x.pcap")]);
        let urls: Vec<&str> = r.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls, ["https://s1:8443", "http://127.0.0.1:1"]);
        assert!(split_inputs(&["https://"]).is_err());
    }

    use super::*;

    #[test]
    fn sensor_urls() {
        let r = Remote::parse("https://sensor1.example:8443/").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.tls),
            ("sensor1.example", 8443, true)
        );
        assert_eq!(r.url, "https://sensor1.example:8443");
        let r = Remote::parse("https://[fe80::1]:443").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("fe80::1", 443));
        assert!(Remote::parse("http://127.0.0.1:1").is_ok());
        assert!(Remote::parse("http://[::1]:1").is_ok());
        assert!(Remote::parse("http://localhost:1").is_ok());
        for bad in [
            "http://10.0.0.1:80",
            "https://host",
            "https://host:99999",
            "https://host:1/v1/extract",
            "ftp://host:1",
        ] {
            assert!(Remote::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Remote::parse("http://10.0.0.1:80"),
            Err(AddressError::PlainNotLoopback {
                url: "http://10.0.0.1:80".into()
            })
        );
        assert_eq!(
            Remote::parse("https://[::1]").unwrap_err().to_string(),
            "https://[::1]: give the port: https://[ADDR]:PORT"
        );
        assert_eq!(
            time_param(1_700_000_000_000_000_001),
            "1700000000.000000001"
        );
    }
}
