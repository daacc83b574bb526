//! One connection of the API: the first bytes looked at before anything
//! else (plain HTTP sent to the TLS port gets a plain answer saying to
//! use `https://`, a TLS handshake sent to a plain port is named), the
//! TLS handshake (a refusal logged with its cause, the connection closed
//! gently so that the client reads the alert rather than a reset), then
//! HTTP/1.1 by hyper, whose own error answers (a head over 16 KiB, a
//! request it cannot parse) are turned into JSON like every other
//! refusal, and logged.

use super::body::ApiBody;
use super::{handle, log_line, ApiConfig, ApiOpt, Client, State};
use crate::text::clean;
use hyper::body::{Body, Frame, SizeHint};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// Bytes a request head may take (hyper's read buffer): more is 431.
pub(super) const MAX_HEAD: usize = 16 << 10;

/// How long a refused connection is drained before it is closed (so that
/// the client reads the answer or the alert, not a reset).
const LINGER: Duration = Duration::from_secs(1);

/// Logs a kind of event at most once a second, counting the rest: a flood
/// of refused connections costs one line a second.
pub(super) struct Throttle {
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttle {
    pub(super) const fn new() -> Self {
        Throttle {
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(n)` when a line may be written now (`n` more happened since
    /// the last one), None to stay quiet.
    pub(super) fn admit(&self) -> Option<u64> {
        let mut s = self.state.lock().ok()?;
        let now = Instant::now();
        match s.0 {
            Some(t) if now.duration_since(t) < Duration::from_secs(1) => {
                s.1 += 1;
                None
            }
            _ => {
                let more = s.1;
                *s = (Some(now), 0);
                Some(more)
            }
        }
    }
}

/// ` (and N more like it in the last second)` when N > 0.
/// Why a connection was closed before its first request: the line logged
/// names the setting at fault in the embedder's words ([`ApiConfig::naming`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Closed {
    /// At the connection limit.
    Full,
    /// Nothing sent within the handshake timeout.
    Silent,
    /// A TLS handshake not finished within the handshake timeout.
    SlowHandshake,
}

/// The line logged for a connection closed for `why`, `m` more of the
/// kind throttled in the last second.
pub(super) fn closed_line(cfg: &ApiConfig, why: Closed, m: u64) -> String {
    let secs = cfg.handshake_timeout.as_secs();
    let name = |o| (cfg.naming)(o);
    match why {
        Closed::Full => format!(
            "closed at once: {} connections are open ({}){}",
            cfg.max_connections,
            name(ApiOpt::MaxConnections),
            more(m)
        ),
        Closed::Silent => format!(
            "closed: nothing sent within {secs} s ({}){}",
            name(ApiOpt::HandshakeTimeout),
            more(m)
        ),
        Closed::SlowHandshake => format!(
            "closed: the TLS handshake did not end within {secs} s ({}){}",
            name(ApiOpt::HandshakeTimeout),
            more(m)
        ),
    }
}

fn more(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" (and {n} more in the last second)")
    }
}

/// Closes `tcp` after a shutdown of its sending side and a short drain of
/// what the client still sends: closing with unread data would reset the
/// connection, and the client would lose the answer or the alert.
async fn linger_close<S: AsyncRead + AsyncWrite + Unpin>(mut tcp: S) {
    let _ = tcp.shutdown().await;
    let end = Instant::now() + LINGER;
    let mut buf = [0u8; 4096];
    let mut total = 0usize;
    while total < (256 << 10) {
        let left = end.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, tcp.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => total += n,
            _ => break,
        }
    }
}

/// A JSON refusal in plain HTTP/1.1, whole, closing the connection.
pub(super) fn plain_answer(status: u16, reason: &str, msg: &str) -> Vec<u8> {
    let body = serde_json::json!({ "error": msg }).to_string();
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The request target of a request line peeked at (`GET /x HTTP/1.1`),
/// escaped and cut.
fn target_of(head: &[u8]) -> String {
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let target = line.split(' ').nth(1).unwrap_or("/");
    let t = if target.starts_with('/') { target } else { "/" };
    clean(t.trim_end_matches('?'), 200)
}

pub(super) async fn connection(state: Arc<State>, tcp: TcpStream, peer: SocketAddr) {
    let local = tcp
        .local_addr()
        .map_or_else(|_| "HOST:PORT".to_string(), |a| a.to_string());
    // The first bytes, before TLS or HTTP: a TLS handshake starts with a
    // handshake record (0x16), HTTP with a method's letters.
    let mut first = [0u8; 2048];
    let peeked = tokio::time::timeout(state.cfg.handshake_timeout, tcp.peek(&mut first)).await;
    let n = match peeked {
        Ok(Ok(n)) if n > 0 => n,
        Ok(_) => return,
        Err(_) => {
            if let Some(m) = state.timeout_throttle.admit() {
                state.log_conn(
                    &peer.to_string(),
                    &closed_line(&state.cfg, Closed::Silent, m),
                );
            }
            return;
        }
    };
    let head = &first[..n];
    let tls_hello = head[0] == 0x16;
    match (&state.tls, tls_hello) {
        (Some(_), false) => {
            let target = target_of(head);
            let looks_http = head[0].is_ascii_uppercase();
            let msg = if looks_http {
                format!(
                    "this sensor speaks HTTPS: use https://{local}{target} with a client certificate \
                     (wiretape: --cert, --key and --ca; curl: --cert, --key and --cacert)"
                )
            } else {
                format!(
                    "not a TLS handshake (first byte 0x{:02x}): this sensor speaks HTTPS with client \
                     certificates: use https://{local}/",
                    head[0]
                )
            };
            state.log_conn(&peer.to_string(), &format!("400 {msg}"));
            let mut tcp = tcp;
            if looks_http {
                let _ = tcp.write_all(&plain_answer(400, "Bad Request", &msg)).await;
            }
            linger_close(tcp).await;
        }
        (None, true) => {
            let msg = format!(
                "a TLS handshake on this plain-HTTP server (loopback only): use http://{local}/"
            );
            state.log_conn(&peer.to_string(), &format!("400 {msg}"));
            let mut tcp = tcp;
            let _ = tcp.write_all(&plain_answer(400, "Bad Request", &msg)).await;
            linger_close(tcp).await;
        }
        (None, false) => {
            let client = Client {
                name: peer.to_string().into(),
                allowed: true,
                names: Arc::new([]),
            };
            serve(state, tcp, client).await;
        }
        (Some(tls), true) => {
            let (cfg, refusal) = match tls.connection() {
                Ok(c) => c,
                Err(e) => {
                    state.log_conn(&peer.to_string(), &format!("TLS: {e}"));
                    return;
                }
            };
            let acc = tokio_rustls::TlsAcceptor::from(cfg);
            let hs =
                tokio::time::timeout(state.cfg.handshake_timeout, acc.accept(tcp).into_fallible())
                    .await;
            let stream = match hs {
                Ok(Ok(s)) => s,
                Ok(Err((e, tcp))) => {
                    let why = match rustls_error(&e) {
                        Some(r) => tls.explain(r, &refusal),
                        None => e.to_string(),
                    };
                    state.log_conn(&peer.to_string(), &format!("TLS handshake refused: {why}"));
                    linger_close(tcp).await;
                    return;
                }
                Err(_) => {
                    if let Some(m) = state.timeout_throttle.admit() {
                        state.log_conn(
                            &peer.to_string(),
                            &closed_line(&state.cfg, Closed::SlowHandshake, m),
                        );
                    }
                    return;
                }
            };
            let names: Vec<String> = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| crate::tls::cert_names(c))
                .unwrap_or_default();
            let allow = &state.cfg.allow_clients;
            let allowed = allow.is_empty() || names.iter().any(|n| allow.contains(n));
            let client = Client {
                name: names
                    .first()
                    .map(|n| clean(n, 64))
                    .unwrap_or_else(|| format!("{peer} (unnamed certificate)"))
                    .into(),
                allowed,
                names: names.iter().map(|n| clean(n, 64)).collect(),
            };
            serve(state, stream, client).await;
        }
    }
}

/// The rustls error inside an I/O error of tokio-rustls.
pub(crate) fn rustls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>())
}

async fn serve<I>(state: Arc<State>, io: I, client: Client)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let idle = state.cfg.idle_timeout;
    let rewritten = Arc::new(AtomicU16::new(0));
    let answering = Arc::new(AtomicUsize::new(0));
    let io = hyper_util::rt::TokioIo::new(JsonErrors {
        inner: Linger {
            io: Some(io),
            when: rewritten.clone(),
            close: Some(Box::new(|io| {
                tokio::spawn(linger_close(io));
            })),
        },
        pending: Vec::new(),
        rewritten: rewritten.clone(),
        answering: answering.clone(),
    });
    let st = state.clone();
    let cl = client.clone();
    let svc = hyper::service::service_fn(move |req| {
        let st = st.clone();
        let cl = cl.clone();
        let guard = Answering::new(answering.clone());
        let what = format!("{} {}", req.method(), req.uri());
        async move {
            // A bug that panics answers 500 in JSON like every other
            // failure (the panic's own line is escaped by the hook `api`
            // sets), and the server goes on.
            let r = match CatchUnwind(Box::pin(handle(st.clone(), cl.clone(), req))).await {
                Ok(r) => r,
                Err(()) => {
                    log_line(
                        &st,
                        &cl.name,
                        &what,
                        "500 internal error (a bug: the line before says where)",
                    );
                    super::error(
                        hyper::StatusCode::INTERNAL_SERVER_ERROR,
                        "internal error in wiretape api (a bug: its log says where; please report it)",
                    )
                }
            };
            Ok::<_, std::convert::Infallible>(r.map(|body| Tracked {
                body,
                _guard: guard,
            }))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Some(idle))
        .max_buf_size(MAX_HEAD)
        .keep_alive(true)
        .serve_connection(io, svc);
    let r = conn.await;
    let status = rewritten.load(Ordering::Relaxed);
    if status != 0 {
        let why = match &r {
            Err(e) => format!(" ({e})"),
            Ok(()) => String::new(),
        };
        log_line(
            &state,
            &client.name,
            "(request unread)",
            &format!("{status} {}{why}", auto_message(status)),
        );
    }
}

/// The message of hyper's own refusal `status`.
fn auto_message(status: u16) -> String {
    match status {
        431 => format!(
            "the request head (request line and headers) is over {} KiB: shorten the URL (a long filter?) \
             or the headers",
            MAX_HEAD >> 10
        ),
        414 => "the URL is too long: shorten the query".into(),
        505 => "HTTP version not supported: this server speaks HTTP/1.1".into(),
        _ => "not an HTTP/1.1 request this server can read (a bad request line, header or URL): \
              send `GET /v1/... HTTP/1.1` with a Host header"
            .into(),
    }
}

fn reason(status: u16) -> &'static str {
    hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error")
}

/// The status of `buf` when it is one of hyper's own error answers: a
/// whole head of status 4xx/5xx with `content-length: 0` and nothing
/// after it. Every answer of [`handle`] at or above 400 carries a JSON
/// body, so it is never taken for one.
fn auto_error(buf: &[u8]) -> Option<u16> {
    let rest = buf.strip_prefix(b"HTTP/1.1 ")?;
    let code: u16 = std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()?;
    if code < 400 || !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let head = std::str::from_utf8(buf).ok()?.to_ascii_lowercase();
    (head.contains("\r\ncontent-length: 0\r\n") && head.matches("\r\n\r\n").count() == 1)
        .then_some(code)
}

/// A future whose panic is caught: `Err(())` instead of unwinding into the
/// connection (which would close it without an answer).
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let f = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.as_mut().poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    }
}

/// Counts an answer of [`handle`] from the request until hyper drops its
/// body: while one is on its way, no write is taken for hyper's own.
struct Answering(Arc<AtomicUsize>);

impl Answering {
    fn new(n: Arc<AtomicUsize>) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Answering(n)
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An answer's body that holds its [`Answering`] count.
struct Tracked {
    body: ApiBody,
    _guard: Answering,
}

impl Body for Tracked {
    type Data = bytes::Bytes;
    type Error = super::body::BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection that, dropped after one of hyper's own refusals (a 431:
/// a head read only in part), is closed by [`linger_close`]: closed at
/// once with the rest of the head unread, it would be reset, and the
/// client could lose the answer (curl did, now and then, over TLS).
struct Linger<I> {
    io: Option<I>,
    /// The status hyper's refusal was rewritten to (0: none).
    when: Arc<AtomicU16>,
    /// Spawns the lingering close.
    close: Option<Box<dyn FnOnce(I) + Send>>,
}

impl<I> Linger<I> {
    fn io(&mut self) -> Pin<&mut I>
    where
        I: Unpin,
    {
        Pin::new(self.io.as_mut().expect("taken only on drop"))
    }
}

impl<I> Drop for Linger<I> {
    fn drop(&mut self) {
        if self.when.load(Ordering::Relaxed) != 0 {
            if let (Some(io), Some(close)) = (self.io.take(), self.close.take()) {
                close(io);
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Linger<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.io().poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Linger<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.io().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.io().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.as_ref().is_some_and(|i| i.is_write_vectored())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io().poll_shutdown(cx)
    }
}

/// The connection as hyper sees it: writes pass through, but for hyper's
/// own error answers, which become a JSON answer of the same status.
struct JsonErrors<I> {
    inner: Linger<I>,
    /// The JSON answer still to write.
    pending: Vec<u8>,
    /// The status rewritten (0: none).
    rewritten: Arc<AtomicU16>,
    /// Answers of [`handle`] on their way (their bytes, captured frames
    /// among them, are never taken for one of hyper's answers).
    answering: Arc<AtomicUsize>,
}

impl<I: AsyncWrite + Unpin> JsonErrors<I> {
    /// Writes what is pending; Ready(Ok) once nothing is.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.pending) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.pending.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Takes `buf` as written when it is hyper's own error answer (the JSON
    /// one queued in its place).
    fn intercept(&mut self, buf: &[u8]) -> bool {
        if self.rewritten.load(Ordering::Relaxed) != 0
            || self.answering.load(Ordering::Relaxed) != 0
        {
            return false;
        }
        match auto_error(buf) {
            Some(code) => {
                self.rewritten.store(code, Ordering::Relaxed);
                self.pending = plain_answer(code, reason(code), &auto_message(code));
                true
            }
            None => false,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for JsonErrors<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for JsonErrors<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.drain(cx))?;
        if this.intercept(buf) {
            let _ = this.drain(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.drain(cx))?;
        let mut live = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (live.next(), live.next()) {
            if this.intercept(only) {
                let _ = this.drain(cx)?;
                return Poll::Ready(Ok(only.len()));
            }
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(this.drain(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(this.drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_own_error_answers_are_told_from_ours() {
        let hyper431 = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\
content-length: 0\r\ndate: Fri, 27 Nov 2026 14:04:19 GMT\r\n\r\n";
        assert_eq!(auto_error(hyper431), Some(431));
        let hyper400 =
            b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(auto_error(hyper400), Some(400));
        // Ours: a JSON body, in the same buffer or not.
        let ours = plain_answer(400, "Bad Request", "x");
        assert_eq!(auto_error(&ours), None);
        let head = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 13\r\n\r\n";
        assert_eq!(auto_error(head), None);
        assert_eq!(
            auto_error(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
            None
        );
        assert_eq!(
            target_of(b"GET /v1/count?x=1 HTTP/1.1\r\nHost: a\r\n"),
            "/v1/count?x=1"
        );
        assert_eq!(target_of(b"GET \x1b[31m HTTP/1.1"), "/");
    }

    #[test]
    fn a_panic_in_a_handler_is_caught() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let quiet = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let r = rt.block_on(CatchUnwind(Box::pin(async {
            if std::hint::black_box(true) {
                panic!("a bug");
            }
            1
        })));
        std::panic::set_hook(quiet);
        assert_eq!(r, Err(()));
        assert_eq!(rt.block_on(CatchUnwind(Box::pin(async { 2 }))), Ok(2));
    }

    #[test]
    fn a_throttle_writes_once_a_second_and_counts_the_rest() {
        let t = Throttle::new();
        assert_eq!(t.admit(), Some(0));
        assert_eq!(t.admit(), None);
        assert_eq!(t.admit(), None);
        std::thread::sleep(Duration::from_millis(1050));
        assert_eq!(t.admit(), Some(2));
        assert_eq!(more(2), " (and 2 more in the last second)");
    }

    #[test]
    fn closed_lines_name_settings_in_the_embedders_words() {
        let mut cfg = ApiConfig::new(vec!["/s".into()], "127.0.0.1:0".parse().unwrap());
        cfg.max_connections = 3;
        cfg.handshake_timeout = Duration::from_secs(7);
        // Without an embedder: the library's own words, no flag.
        let full = closed_line(&cfg, Closed::Full, 0);
        assert_eq!(
            full,
            "closed at once: 3 connections are open (the connections at once)"
        );
        let silent = closed_line(&cfg, Closed::Silent, 2);
        assert_eq!(
            silent,
            "closed: nothing sent within 7 s (the handshake timeout) \
             (and 2 more in the last second)"
        );
        let slow = closed_line(&cfg, Closed::SlowHandshake, 0);
        assert_eq!(
            slow,
            "closed: the TLS handshake did not end within 7 s (the handshake timeout)"
        );
        for l in [&full, &silent, &slow] {
            assert!(!l.contains("--"), "{l}");
        }
        // An embedder's naming shows in the same lines.
        fn mine(o: ApiOpt) -> String {
            match o {
                ApiOpt::MaxConnections => "conn_cap in sensor.yaml".into(),
                ApiOpt::HandshakeTimeout => "hello_secs in sensor.yaml".into(),
                other => other.to_string(),
            }
        }
        cfg.naming = mine;
        assert_eq!(
            closed_line(&cfg, Closed::Full, 1),
            "closed at once: 3 connections are open (conn_cap in sensor.yaml) \
             (and 1 more in the last second)"
        );
        assert_eq!(
            closed_line(&cfg, Closed::Silent, 0),
            "closed: nothing sent within 7 s (hello_secs in sensor.yaml)"
        );
        assert_eq!(
            closed_line(&cfg, Closed::SlowHandshake, 0),
            "closed: the TLS handshake did not end within 7 s (hello_secs in sensor.yaml)"
        );
        // Set on the options, it reaches the configuration.
        let mut o =
            super::super::ApiOptions::new(vec!["/s".into()], "127.0.0.1:0".parse().unwrap());
        o.naming = mine;
        let built = o.build().unwrap();
        assert_eq!(
            (built.naming)(ApiOpt::MaxConnections),
            "conn_cap in sensor.yaml"
        );
    }
}
