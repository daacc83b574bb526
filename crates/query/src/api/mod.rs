//! `wiretape api`: the stores of a sensor answered over HTTP(S).
//!
//! - Loopback addresses may be served as plain HTTP; any other address only
//!   with mutual TLS ([`crate::tls::ServerTls`]): every client presents
//!   a certificate that chains to the client CA and is within its validity;
//!   `allow_clients` narrows that to certificates carrying one of the names
//!   (CN or SAN DNS). A refused client gets a failed handshake (no or a bad
//!   certificate; the log line says whose and why) or 403 (a name not
//!   admitted), never a byte of capture. Plain HTTP sent to the TLS port
//!   gets a plain 400 saying to use `https://`.
//! - Endpoints (GET), their parameters and answers: the table of [`spec`],
//!   which routing and the parameter checks use and `/v1/openapi.json`
//!   describes: `/v1/extract`, `/v1/count`, `/v1/plan`, `/v1/status`,
//!   `/v1/index.parquet`, `/v1/timeline` (the JSON of `wiretape timeline
//!   --json`), `/v1/files`, `/v1/openapi.json`, `POST /query` (Stenographer's
//!   clients answered as its server does: its `steno` module, over [`crate::steno`]); the
//!   console at `/` (one page, its script and style embedded in the binary,
//!   served with a `Content-Security-Policy` of `default-src 'self'`).
//!   Every refusal is
//!   JSON `{"error": "..."}` and a line on stderr: 400 naming the
//!   parameter, 404, 405 with `Allow`, 431 for a head over 16 KiB and 400
//!   for a request hyper cannot parse (hyper's own answers, made JSON),
//!   500 for a store that cannot be read or a bug (a panic is caught).
//!   What a client sent is escaped and cut ([`crate::text`]) in both.
//! - Each query runs on a blocking thread over the same [`Job`] as `wiretape
//!   extract`; at most `max_queries` at once (the next gets 503 with
//!   `Retry-After`). An extraction streams: the writer hands 256 KiB chunks
//!   to a channel of 8, so a slow client holds the query back (at most
//!   ~2.3 MiB read ahead of what it has taken); a client that goes away
//!   drops the channel, and the merge stops within 1024 records.
//! - An extraction that meets a damaged or unreadable file still sends
//!   every frame `extract` would; a client that asked for trailers (`TE:
//!   trailers`, as wiretape's own client does) gets the summary and the
//!   error in the trailers `wiretape-summary` and `wiretape-error`, any
//!   other client an answer cut short (the chunked encoding ends
//!   abnormally), never one passed off as whole.
//! - Connections: at most `max_connections` at once (more are closed at
//!   once); a TLS handshake must finish within 10 s; a connection waits at
//!   most 30 s for a request head.
//! - It is its own process: it reads the files `record` writes (fresh
//!   within the flush interval) and never touches the recorder.

mod body;
mod conn;
mod console;
mod options;
pub mod params;
pub mod spec;
mod steno;

use crate::job::{self, Job, Request};
use crate::text::{self, clean};
use crate::tls::{self, TlsError};
use crate::QueryError;
use body::{ApiBody, ChannelSink, StopOnDrop};
use hyper::body::Frame;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Response, StatusCode};
pub use options::{library_naming, ApiOpt, ApiOptions, Naming};
use params::BadRequest;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, Semaphore};
use wiretape_timestamp::realtime_ns;

/// Reads the upper pages of the key index of every file the stores hold
/// now, on a thread of its own (a query meanwhile reads what it needs
/// itself), as Stenographer's server opens each file's index when it finds
/// it: a query on a cold page cache then reads only its data pages.
fn warm_key_indexes(cfg: &ApiConfig) {
    let stores = cfg.stores.clone();
    let prefix = cfg.prefix.clone();
    let opts = cfg.read.clone();
    let _ = std::thread::Builder::new()
        .name("wt-api-warm".into())
        .spawn(move || {
            let _ = crate::extract::plan_files(
                &stores,
                crate::extract::Window::default(),
                prefix.as_deref(),
                &opts,
                &mut |path, _, _| {
                    if let Ok(Some(k)) = wiretape_files::keys::KeyIndex::open(&path, &opts) {
                        let _ = k.read_upper();
                    }
                    crate::extract::whole(path, false, crate::extract::IndexUse::Missing, 0)
                },
            );
        });
}

/// Bytes of key index pages (headers, roots, fences) a server keeps in
/// memory between queries (a file's are its segment headers and fence
/// levels; beyond this, a file's are read per query as before).
const KEPT_INDEX_BYTES: usize = 64 << 20;

/// The TLS files of a server.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// Its certificate chain (`--tls-cert`).
    pub cert: PathBuf,
    /// Its key (`--tls-key`).
    pub key: PathBuf,
    /// The CA client certificates must chain to (`--client-ca`).
    pub client_ca: PathBuf,
}

/// A server's configuration (`wiretape api`).
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// The stores served (directories or files), read-only.
    pub stores: Vec<PathBuf>,
    /// Where to listen.
    pub listen: SocketAddr,
    /// Mutual TLS; required unless `listen` is a loopback address.
    pub tls: Option<TlsFiles>,
    /// Only certificates carrying one of these names (CN or SAN DNS); empty:
    /// any certificate of the client CA.
    pub allow_clients: Vec<String>,
    /// Queries running at once (default 4).
    pub max_queries: usize,
    /// Connections open at once (default 2048).
    pub max_connections: usize,
    /// In directories, only files of this prefix.
    pub prefix: Option<String>,
    /// The node name in `/v1/status` and `/v1/index.parquet`.
    pub node: String,
    /// No line per answered request on stderr (refusals are still logged).
    pub quiet: bool,
    /// How long a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// How long a connection may wait for a request head.
    pub idle_timeout: Duration,
    /// How the stores are read: the identities of encrypted files, where
    /// the indexes of Stenographer's files are.
    pub read: wiretape_files::ReadOptions,
    /// How the lines logged while serving name the settings (a connection
    /// closed for [`ApiOpt::MaxConnections`] or
    /// [`ApiOpt::HandshakeTimeout`]): [`library_naming`] by default, a
    /// command line's flags for `wiretape api`.
    pub naming: Naming,
    /// How TLS's messages name files and fixes (its refusals at start, the
    /// handshakes it refuses): [`tls::library_terms`] by default.
    pub tls_naming: tls::Naming,
}

impl ApiConfig {
    /// Serving `stores` on `listen`, plain (loopback only until TLS is set),
    /// with the defaults.
    pub fn new(stores: Vec<PathBuf>, listen: SocketAddr) -> Self {
        ApiConfig {
            stores,
            listen,
            tls: None,
            allow_clients: Vec::new(),
            max_queries: 4,
            max_connections: 2048,
            prefix: None,
            node: crate::fleet::hostname(),
            quiet: false,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            read: wiretape_files::ReadOptions::default(),
            naming: library_naming,
            tls_naming: tls::library_terms,
        }
    }
}

/// Why a server could not start or went down.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// No store to serve.
    #[error("no stores to serve")]
    NoStores,
    /// A store is not there (or cannot be read).
    #[error("store {}: {source}: a directory wiretape records into (or a capture file) is served", path.display())]
    Store {
        /// The store.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// A limit of queries or connections at once is 0.
    #[error("the limits of queries and of connections at once must be at least 1")]
    ZeroLimit,
    /// A non-loopback address without mutual TLS.
    #[error("{listen}: not a loopback address, so clients must be authenticated: mutual TLS (a server certificate, its key and a client CA) is needed")]
    NotLoopback {
        /// The address.
        listen: SocketAddr,
    },
    /// Client names to admit without mutual TLS (which says them).
    #[error("admitting clients by name needs mutual TLS")]
    AllowWithoutTls,
    /// A server certificate and key without a client CA: anyone would be
    /// admitted.
    #[error("a server certificate and key without a client CA would admit anyone")]
    OpenToAnyone,
    /// Some of the three TLS files, not all.
    #[error(
        "mutual TLS needs a server certificate, its key and a client CA: {} missing",
        missing.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    TlsIncomplete {
        /// The TLS settings given.
        given: Vec<ApiOpt>,
        /// Those missing.
        missing: Vec<ApiOpt>,
    },
    /// A certificate, key or CA file is unusable.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The address cannot be listened on.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The server's runtime failed.
    #[error("api server: {0}")]
    Runtime(#[source] std::io::Error),
}

impl ApiError {
    /// 1 where the server could not listen or run, 2 for the rest (its
    /// settings and certificates).
    pub fn exit_code(&self) -> i32 {
        match self {
            ApiError::Bind { .. } | ApiError::Runtime(_) => 1,
            _ => 2,
        }
    }
}

/// Makes a panic's line on stderr like the server's others: one line,
/// `wiretape: api: internal error ...`, escaped (a panic's message may
/// quote what a client sent). For the `api` command, before it serves.
pub fn escape_panics() {
    std::panic::set_hook(Box::new(|info| {
        eprintln!(
            "wiretape: api: internal error (a bug: please report it): {}",
            clean(&info.to_string(), text::LINE_MAX)
        );
    }));
}

/// Whether `ip` is a loopback address (127.0.0.0/8, ::1, or an IPv4-mapped
/// loopback).
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(a) => a.is_loopback(),
        std::net::IpAddr::V6(a) => {
            a.is_loopback() || a.to_ipv4_mapped().is_some_and(|m| m.is_loopback())
        }
    }
}

/// Checks a configuration without listening: TLS where the address needs
/// it, the files usable, the stores there. Returns the TLS configuration.
pub fn check(cfg: &ApiConfig) -> Result<Option<Arc<tls::ServerTls>>, ApiError> {
    if cfg.stores.is_empty() {
        return Err(ApiError::NoStores);
    }
    for s in &cfg.stores {
        if let Err(source) = std::fs::metadata(s) {
            return Err(ApiError::Store {
                path: s.clone(),
                source,
            });
        }
    }
    if cfg.max_queries == 0 || cfg.max_connections == 0 {
        return Err(ApiError::ZeroLimit);
    }
    let loopback = is_loopback(cfg.listen.ip());
    match &cfg.tls {
        None if !loopback => Err(ApiError::NotLoopback { listen: cfg.listen }),
        None if !cfg.allow_clients.is_empty() => Err(ApiError::AllowWithoutTls),
        None => Ok(None),
        Some(t) => Ok(Some(Arc::new(tls::ServerTls::named(
            &t.cert,
            &t.key,
            &t.client_ca,
            cfg.tls_naming,
        )?))),
    }
}

pub(super) struct State {
    cfg: ApiConfig,
    tls: Option<Arc<tls::ServerTls>>,
    queries: Arc<Semaphore>,
    conns: AtomicUsize,
    refused_conns: AtomicUsize,
    /// Connections closed for the connection limit, logged once a second.
    refused_throttle: conn::Throttle,
    /// Connections that sent nothing or no whole handshake in time.
    timeout_throttle: conn::Throttle,
}

impl State {
    /// A line about a connection (no request yet): `wiretape: api: PEER MSG`.
    fn log_conn(&self, peer: &str, msg: &str) {
        eprintln!(
            "wiretape: api: {}",
            clean(&format!("{peer} {msg}"), text::LINE_MAX)
        );
    }
}

/// A server bound to its address, ready to [`Server::run`].
pub struct Server {
    listener: std::net::TcpListener,
    state: Arc<State>,
    addr: SocketAddr,
}

/// The client of a connection.
#[derive(Clone)]
pub(super) struct Client {
    /// Its certificate's first name, or its address on plain HTTP.
    name: Arc<str>,
    /// Whether its name is admitted.
    allowed: bool,
    names: Arc<[String]>,
}

impl Server {
    /// Checks the configuration ([`check`]) and binds the address: a usage
    /// or certificate problem is an error before anything listens.
    pub fn bind(mut cfg: ApiConfig) -> Result<Server, ApiError> {
        let tls = check(&cfg)?;
        // A server answers query after query: its stores' directory
        // listings and the key indexes' upper pages (headers, roots,
        // fences) stay in memory between them, so that a cold page cache
        // costs only the pages a lookup ends on. Kept by this server's
        // read options: never shared with another server in the process.
        cfg.read = cfg
            .read
            .with_kept_listings()
            .with_kept_index_pages(KEPT_INDEX_BYTES);
        let listener =
            std::net::TcpListener::bind(cfg.listen).map_err(|source| ApiError::Bind {
                addr: cfg.listen,
                source,
            })?;
        listener.set_nonblocking(true).map_err(ApiError::Runtime)?;
        let addr = listener.local_addr().map_err(ApiError::Runtime)?;
        let state = Arc::new(State {
            queries: Arc::new(Semaphore::new(cfg.max_queries)),
            conns: AtomicUsize::new(0),
            refused_conns: AtomicUsize::new(0),
            refused_throttle: conn::Throttle::new(),
            timeout_throttle: conn::Throttle::new(),
            tls,
            cfg,
        });
        Ok(Server {
            listener,
            state,
            addr,
        })
    }

    /// Certificates that end within 30 days, one line each (for the start).
    pub fn warnings(&self) -> Vec<crate::tls::Expiring> {
        self.state
            .tls
            .as_ref()
            .map(|t| t.warnings().to_vec())
            .unwrap_or_default()
    }

    /// The address listened on (the port chosen when 0 was given).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's URL (`https://` with TLS, else `http://`).
    pub fn url(&self) -> String {
        let scheme = if self.state.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// Serves until `stop` is set (checked every 100 ms); queries running
    /// then are ended.
    pub fn run(self, stop: &AtomicBool) -> Result<(), ApiError> {
        warm_key_indexes(&self.state.cfg);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(self.state.cfg.max_queries + 4)
            .thread_name("wt-api")
            .enable_io()
            .enable_time()
            .build()
            .map_err(ApiError::Runtime)?;
        let Server {
            listener, state, ..
        } = self;
        rt.block_on(async move {
            let listener =
                tokio::net::TcpListener::from_std(listener).map_err(ApiError::Runtime)?;
            while !stop.load(Ordering::Relaxed) {
                let r = match tokio::time::timeout(Duration::from_millis(100), listener.accept())
                    .await
                {
                    Err(_) => continue,
                    Ok(r) => r,
                };
                let Ok((tcp, peer)) = r else {
                    // EMFILE and the like: wait a little, go on.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if state.conns.load(Ordering::Relaxed) >= state.cfg.max_connections {
                    state.refused_conns.fetch_add(1, Ordering::Relaxed);
                    drop(tcp);
                    if let Some(m) = state.refused_throttle.admit() {
                        state.log_conn(
                            &peer.to_string(),
                            &conn::closed_line(&state.cfg, conn::Closed::Full, m),
                        );
                    }
                    continue;
                }
                state.conns.fetch_add(1, Ordering::Relaxed);
                let _ = tcp.set_nodelay(true);
                let st = state.clone();
                tokio::spawn(async move {
                    let _guard = ConnGuard(st.clone());
                    conn::connection(st, tcp, peer).await;
                });
            }
            Ok::<(), ApiError>(())
        })?;
        rt.shutdown_timeout(Duration::from_secs(2));
        Ok(())
    }
}

/// Counts a connection while it lives.
struct ConnGuard(Arc<State>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.conns.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `v` as one line of JSON in ASCII only (what a header value may hold):
/// every other character escaped as `\uXXXX`.
pub fn ascii_json(v: &serde_json::Value) -> String {
    let mut out = String::new();
    for c in v.to_string().chars() {
        if c.is_ascii() && !c.is_ascii_control() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// A JSON answer.
fn json(status: StatusCode, v: &serde_json::Value) -> Response<ApiBody> {
    let mut r = Response::new(ApiBody::full(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// An error answer: `{"error": msg}` (control characters escaped, cut at
/// [`text::LINE_MAX`]).
pub(super) fn error(status: StatusCode, msg: impl Into<String>) -> Response<ApiBody> {
    let m = clean(&identity_words(&msg.into()), text::LINE_MAX);
    json(status, &serde_json::json!({ "error": m }))
}

/// `m` with the reader's words of what opens an encrypted file said for a
/// client: the identities are the server's, given when it was started.
fn identity_words(m: &str) -> String {
    use wiretape_files::crypt::IdentityNeeded;
    m.replacen(
        &format!(": {}", IdentityNeeded::NONE_GIVEN),
        ": this server was started without an identity (the secret key of one of its recipients \
         opens it)",
        1,
    )
    .replacen(
        "and the identity given (",
        "and the identity this server was started with (",
        1,
    )
}

/// The line of a request: `wiretape: api: CLIENT WHAT -> RESULT`, with
/// everything a client sent escaped and the whole cut at
/// [`text::LINE_MAX`].
fn log_line(st: &State, client: &str, what: &str, result: &str) {
    // -q: no line for an answered request; a refusal is always logged.
    if !(st.cfg.quiet && result.starts_with('2')) {
        let what = clean(what, 300);
        eprintln!(
            "wiretape: api: {}",
            clean(
                &format!("{client} {what} -> {}", identity_words(result)),
                text::LINE_MAX
            )
        );
    }
}

fn log(st: &State, client: &str, what: &str, result: &str) {
    log_line(st, client, what, result)
}

pub(super) async fn handle(
    st: Arc<State>,
    client: Client,
    req: hyper::Request<hyper::body::Incoming>,
) -> Response<ApiBody> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let what = format!("{} {}", req.method(), req.uri());
    if !client.allowed {
        let m = format!(
            "client certificate {} is not admitted here (not among the names this server admits)",
            if client.names.is_empty() {
                "without a name".to_string()
            } else {
                format!("of {}", client.names.join(", "))
            }
        );
        log(&st, &client.name, &what, "403 not admitted");
        return error(StatusCode::FORBIDDEN, m);
    }
    let Some(ep) = spec::endpoint(&path) else {
        log(&st, &client.name, &what, "404");
        return error(
            StatusCode::NOT_FOUND,
            format!(
                "no such endpoint {}: try {}",
                text::quote(&path),
                spec::ENDPOINTS
                    .iter()
                    .map(|e| e.path)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    };
    if ep.answer == spec::Answer::Steno {
        // Its method, body and headers are its own (Stenographer's).
        return steno::query(st, client, req, what).await;
    }
    let head_ok = ep.is_asset() && req.method() == Method::HEAD;
    if req.method() != Method::GET && !head_ok {
        log(&st, &client.name, &what, "405");
        let mut r = error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{path} answers {} only, not {}",
                ep.allow(),
                text::clean(req.method().as_str(), 20)
            ),
        );
        r.headers_mut()
            .insert(hyper::header::ALLOW, HeaderValue::from_static(ep.allow()));
        return r;
    }
    if ep.is_asset() {
        // The page reads its own query string (`/?filter=`).
        if let Some(asset) = console::asset(&path) {
            log(&st, &client.name, &what, "200");
            return console::answer(asset);
        }
    }
    let allowed = ep.params;
    let p = match params::parse(query.as_deref(), allowed, &path) {
        Ok(p) => p,
        Err(BadRequest(m)) => {
            log(&st, &client.name, &what, &format!("400 {m}"));
            return error(StatusCode::BAD_REQUEST, m);
        }
    };
    let wants_trailers = req.headers().get_all(hyper::header::TE).iter().any(|v| {
        v.to_str()
            .is_ok_and(|s| s.to_ascii_lowercase().contains("trailers"))
    });
    let now = realtime_ns();
    let prefix = st.cfg.prefix.clone();
    let built = || -> Result<(Request, wiretape_files::Format), BadRequest> {
        let mut r = params::request(&p, &st.cfg.stores, prefix.as_deref(), now)?;
        r.read = st.cfg.read.clone();
        Ok((r, params::format(&p)?))
    };
    if path == "/v1/status" {
        return config_json(st, client, what, status_json).await;
    }
    if path == "/v1/openapi.json" {
        log(&st, &client.name, &what, "200");
        return json(StatusCode::OK, &spec::openapi());
    }
    if path == "/v1/files" {
        return config_json(st, client, what, files_json).await;
    }
    if path == "/v1/timeline" {
        let r = match params::timeline(&p, &st.cfg.stores, prefix.as_deref(), now) {
            Ok(mut r) => {
                r.read = st.cfg.read.clone();
                r
            }
            Err(BadRequest(m)) => {
                log(&st, &client.name, &what, &format!("400 {m}"));
                return error(StatusCode::BAD_REQUEST, m);
            }
        };
        return timeline(st, client, what, r).await;
    }
    if path == "/v1/sessions" {
        let parsed = params::window(&p, now).and_then(|w| {
            Ok((
                w,
                params::where_expr(&p, "where")?,
                params::session_limit(&p)?,
            ))
        });
        let (w, wh, limit) = match parsed {
            Ok(x) => x,
            Err(BadRequest(m)) => {
                log(&st, &client.name, &what, &format!("400 {m}"));
                return error(StatusCode::BAD_REQUEST, m);
            }
        };
        return sessions(st, client, what, w, wh.unwrap_or_default(), limit).await;
    }
    if path == "/v1/index.parquet" {
        let w = match params::window(&p, now) {
            Ok(w) => w,
            Err(BadRequest(m)) => {
                log(&st, &client.name, &what, &format!("400 {m}"));
                return error(StatusCode::BAD_REQUEST, m);
            }
        };
        return parquet(st, client, what, w).await;
    }
    let (request, format) = match built() {
        Ok(x) => x,
        Err(BadRequest(m)) => {
            log(&st, &client.name, &what, &format!("400 {m}"));
            return error(StatusCode::BAD_REQUEST, m);
        }
    };
    let Ok(permit) = st.queries.clone().try_acquire_owned() else {
        return busy(&st, &client, &what);
    };
    match path.as_str() {
        "/v1/extract" => extract(st, client, what, request, format, wants_trailers, permit).await,
        _ => {
            let plan_only = path == "/v1/plan";
            count_or_plan(st, client, what, request, format, plan_only, permit).await
        }
    }
}

/// A planning failure as an answer: 400 for a filter libpcap refuses, 500
/// for a store that cannot be read.
/// A filter's error as the API says it: the expression, quoted whole in
/// the filter crate's message, cut to its first characters.
fn filter_message(f: &wiretape_filter::FilterError) -> String {
    text::cut_echo(&f.to_string(), f.expr())
}

fn plan_error(st: &State, client: &str, what: &str, e: &QueryError) -> Response<ApiBody> {
    let (code, m) = match e {
        QueryError::Filter(f) => (
            StatusCode::BAD_REQUEST,
            format!("parameter 'filter': {}", filter_message(f)),
        ),
        // The line a local extract prints, with the query parameter where
        // the command names its flag (tests/linktypes.rs).
        QueryError::MixedLinkTypes(m) => (StatusCode::BAD_REQUEST, m.with_fix("format=pcapng")),
        other => (StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    };
    log(st, client, what, &format!("{} {m}", code.as_u16()));
    error(code, m)
}

async fn count_or_plan(
    st: Arc<State>,
    client: Client,
    what: String,
    mut request: Request,
    format: wiretape_files::Format,
    plan_only: bool,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Response<ApiBody> {
    request.list_blocks = plan_only;
    let stop = StopOnDrop::new();
    let flag = stop.flag();
    let r = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let mut job = Job::plan(&request)?;
        if plan_only {
            return Ok(job.plan_json());
        }
        job.stop_on(flag);
        let (f, n, s, w) = (
            job.filter.clone(),
            job.filter_narrows,
            job.plan_stats,
            request.window,
        );
        // Frames per link type, as `extract --count-only --json` lists them.
        let mut per_lt: Vec<(u32, u64)> = job.linktype_list().into_iter().map(|l| (l, 0)).collect();
        let out = job.run(
            |fr| {
                if let Some(l) = per_lt.iter_mut().find(|l| l.0 == fr.linktype) {
                    l.1 += 1;
                }
                Ok::<(), QueryError>(())
            },
            |_| {},
        )?;
        let mut j = job::summary_json(f.as_deref(), n, &s, &w, &out, None, format);
        j["linktypes"] = job::linktypes_json(&per_lt);
        Ok::<_, QueryError>(j)
    })
    .await;
    drop(stop);
    match r {
        Ok(Ok(v)) => {
            let frames = v.get("frames").and_then(|f| f.as_u64());
            let res = match frames {
                Some(n) => format!("200, {n} frames"),
                None => "200".into(),
            };
            log(&st, &client.name, &what, &res);
            json(StatusCode::OK, &v)
        }
        Ok(Err(e)) => plan_error(&st, &client.name, &what, &e),
        Err(e) => {
            log(&st, &client.name, &what, &format!("500 {e}"));
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the query failed: {e}"),
            )
        }
    }
}

/// Chunks of an extraction in flight between the merge and the client.
const CHUNKS: usize = 8;
/// Bytes of one chunk.
const CHUNK: usize = 256 << 10;

#[allow(clippy::too_many_arguments)]
async fn extract(
    st: Arc<State>,
    client: Client,
    what: String,
    request: Request,
    format: wiretape_files::Format,
    trailers: bool,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Response<ApiBody> {
    let stop = StopOnDrop::new();
    let flag = stop.flag();
    let (planned_tx, planned_rx) = oneshot::channel::<Result<(), QueryError>>();
    let (tx, rx) = mpsc::channel::<Result<Frame<bytes::Bytes>, body::BodyError>>(CHUNKS);
    let st2 = st.clone();
    let name = client.name.clone();
    let what2 = what.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let started = Instant::now();
        // Several link types: pcapng (an interface each), never pcap.
        let mut job = match Job::plan(&request).and_then(|j| j.check_output(format).map(|_| j)) {
            Ok(j) => j,
            Err(e) => {
                let _ = planned_tx.send(Err(e));
                return;
            }
        };
        job.stop_on(flag.clone());
        let _ = planned_tx.send(Ok(()));
        let (f, n, s) = (job.filter.clone(), job.filter_narrows, job.plan_stats);
        let sink = ChannelSink::new(tx.clone(), flag.clone(), CHUNK);
        let lts = job.linktype_list();
        let mut out = wiretape_storage::PcapWriter::with_links(
            sink,
            wiretape_files::pcap::MAX_SNAPLEN,
            format,
            "wiretape-extract",
            &lts,
        );
        let mut per_lt = vec![0u64; lts.len()];
        let run = job.run(
            |fr| {
                let itf = lts.iter().position(|&l| l == fr.linktype).unwrap_or(0);
                per_lt[itf] += 1;
                out.write_wire_on(itf as u32, fr.ts_ns, fr.data, fr.orig_len)
            },
            |_| {},
        );
        let closed = out
            .flush()
            .and_then(|_| out.close().map(|_| ()).map_err(|(_, e)| e));
        let secs = started.elapsed().as_secs_f64();
        let gone = flag.load(Ordering::Relaxed);
        let (outcome, failure) = match (run, closed) {
            (Ok(o), Ok(())) if !gone && !o.stopped => {
                let bad = o
                    .notes
                    .iter()
                    .filter(|n| matches!(n.kind, crate::NoteKind::Damage | crate::NoteKind::Error))
                    .map(job::note_line)
                    .collect::<Vec<_>>();
                let failure = (!bad.is_empty()).then(|| bad.join("; "));
                (Some(o), failure)
            }
            (Ok(o), Ok(())) => (Some(o), None),
            (Ok(o), Err(e)) => (Some(o), Some(e.to_string())),
            (Err(e), _) => (None, Some(e.to_string())),
        };
        if gone {
            let frames = outcome.as_ref().map_or(0, |o| o.stats.frames);
            log(
                &st2,
                &name,
                &what2,
                &format!("200 cut: the client went away ({frames} frames sent, {secs:.3} s)"),
            );
            return;
        }
        let written: Vec<(u32, u64)> = lts.iter().copied().zip(per_lt).collect();
        let summary = outcome.as_ref().map(|o| {
            let mut j =
                job::summary_json(f.as_deref(), n, &s, &request.window, o, Some("-"), format);
            j["linktypes"] = job::linktypes_json(&written);
            j
        });
        let res = match &outcome {
            Some(o) => format!(
                "200, {} frames, {} bytes, {secs:.3} s{}",
                o.stats.frames,
                o.stats.bytes,
                failure
                    .as_ref()
                    .map(|f| format!(", with errors: {f}"))
                    .unwrap_or_default()
            ),
            None => format!(
                "200 failed after {secs:.3} s: {}",
                failure.clone().unwrap_or_default()
            ),
        };
        log(&st2, &name, &what2, &res);
        if trailers {
            let mut h = HeaderMap::new();
            if let Some(s) = &summary {
                if let Ok(v) = HeaderValue::from_str(&ascii_json(s)) {
                    h.insert("wiretape-summary", v);
                }
            }
            if let Some(f) = &failure {
                let clean: String = f
                    .chars()
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect();
                if let Ok(v) = HeaderValue::from_str(&clean) {
                    h.insert("wiretape-error", v);
                }
            }
            let _ = tx.blocking_send(Ok(Frame::trailers(h)));
        } else if let Some(f) = failure {
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
    let ctype = match format {
        wiretape_files::Format::PcapNg => "application/x-pcapng",
        _ => "application/vnd.tcpdump.pcap",
    };
    r.headers_mut()
        .insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    if trailers {
        r.headers_mut().insert(
            hyper::header::TRAILER,
            HeaderValue::from_static("wiretape-summary, wiretape-error"),
        );
    }
    r
}

/// A JSON answer made by `make` from the configuration on a blocking
/// thread (it lists and reads the store): `/v1/status`, `/v1/files`.
async fn config_json(
    st: Arc<State>,
    client: Client,
    what: String,
    make: fn(&ApiConfig) -> serde_json::Value,
) -> Response<ApiBody> {
    let st2 = st.clone();
    let r = tokio::task::spawn_blocking(move || make(&st2.cfg)).await;
    match r {
        Ok(v) => {
            log(&st, &client.name, &what, "200");
            json(StatusCode::OK, &v)
        }
        Err(e) => {
            log(&st, &client.name, &what, &format!("500 {e}"));
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

/// The JSON of `/v1/status` (see [`crate::status`]).
pub fn status_json(cfg: &ApiConfig) -> serde_json::Value {
    let s = crate::status::of(&cfg.stores, cfg.prefix.as_deref(), &cfg.read);
    let mut v = s.to_json();
    v["node"] = cfg.node.clone().into();
    v["version"] = env!("CARGO_PKG_VERSION").into();
    v
}

/// The JSON of `/v1/files`: the store's capture files, oldest first.
pub fn files_json(cfg: &ApiConfig) -> serde_json::Value {
    let s = crate::status::of(&cfg.stores, cfg.prefix.as_deref(), &cfg.read);
    let fmt = |t: Option<u64>| t.map(wiretape_timestamp::format_rfc3339);
    let files: Vec<serde_json::Value> = s
        .files
        .iter()
        .map(|f| {
            serde_json::json!({
                "name": f.path.file_name().map(|n| n.to_string_lossy().into_owned()),
                "path": f.path.display().to_string(),
                "bytes": f.bytes,
                "frames": f.frames,
                "first_ns": f.first_ns,
                "last_ns": f.last_ns,
                "first_time": fmt(f.first_ns),
                "last_time": fmt(f.last_ns),
                "being_written": f.being_written,
            })
        })
        .collect();
    serde_json::json!({ "files": files })
}

async fn timeline(
    st: Arc<State>,
    client: Client,
    what: String,
    req: crate::timeline::Request,
) -> Response<ApiBody> {
    let r = tokio::task::spawn_blocking(move || crate::timeline::build(&req)).await;
    match r {
        Ok(Ok(t)) => {
            log(
                &st,
                &client.name,
                &what,
                &format!("200, {} frames in {} bins", t.totals().frames, t.len()),
            );
            json(StatusCode::OK, &t.to_json())
        }
        Ok(Err(QueryError::Filter(f))) => {
            let m = format!("parameter 'filter_index': {}", filter_message(&f));
            log(&st, &client.name, &what, &format!("400 {m}"));
            error(StatusCode::BAD_REQUEST, m)
        }
        Ok(Err(QueryError::Timeline(m))) => {
            log(&st, &client.name, &what, &format!("400 {m}"));
            error(StatusCode::BAD_REQUEST, m)
        }
        Ok(Err(e)) => plan_error(&st, &client.name, &what, &e),
        Err(e) => {
            log(&st, &client.name, &what, &format!("500 {e}"));
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

/// `/v1/sessions`: the rows of the stores' session tables in `window`
/// that `w` keeps, as JSON lines (`wiretape sessions --json`), with how
/// complete the answer is in headers.
async fn sessions(
    st: Arc<State>,
    client: Client,
    what: String,
    window: crate::Window,
    w: crate::sessions::Where,
    limit: usize,
) -> Response<ApiBody> {
    let Ok(permit) = st.queries.clone().try_acquire_owned() else {
        return busy(&st, &client, &what);
    };
    let st2 = st.clone();
    let r = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let files =
            crate::fleet::captures_with(&st2.cfg.stores, st2.cfg.prefix.as_deref(), &st2.cfg.read)?;
        let l = crate::sessions::list_first(
            &files,
            &st2.cfg.read,
            window.from_ns,
            window.to_ns,
            &w,
            limit,
        )?;
        let mut body = Vec::new();
        for (r, f) in &l.rows {
            let _ = serde_json::to_writer(&mut body, &crate::sessions::row_json(r, f));
            body.push(b'\n');
        }
        Ok::<_, QueryError>((body, l))
    })
    .await;
    match r {
        Ok(Ok((body, l))) => {
            log(
                &st,
                &client.name,
                &what,
                &format!(
                    "200, {} sessions from {} tables{}",
                    l.rows.len(),
                    l.tables,
                    if l.cut { " (cut at the limit)" } else { "" }
                ),
            );
            for (p, e) in &l.unreadable {
                st.log_conn(&client.name, &format!("session table {}: {e}", p.display()));
            }
            let mut r = Response::new(ApiBody::full(body));
            let h = r.headers_mut();
            h.insert(
                hyper::header::CONTENT_TYPE,
                HeaderValue::from_static("application/x-ndjson"),
            );
            for (k, v) in [
                ("wiretape-tables", l.tables),
                ("wiretape-tables-incomplete", l.incomplete.len()),
                ("wiretape-files-without-table", l.without.len()),
            ] {
                h.insert(k, HeaderValue::from(v as u64));
            }
            if l.cut {
                h.insert(
                    "wiretape-sessions-cut",
                    HeaderValue::from(l.rows.len() as u64),
                );
            }
            if let Ok(v) = HeaderValue::from_str(&clean(&st.cfg.node, 200)) {
                h.insert("wiretape-node", v);
            }
            r
        }
        Ok(Err(e)) => plan_error(&st, &client.name, &what, &e),
        Err(e) => {
            log(&st, &client.name, &what, &format!("500 {e}"));
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

/// 503: every query slot is taken.
pub(super) fn busy(st: &State, client: &Client, what: &str) -> Response<ApiBody> {
    log(st, &client.name, what, "503 busy");
    let mut r = error(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "{} queries are running (this server's limit at once): try again in a second",
            st.cfg.max_queries
        ),
    );
    r.headers_mut()
        .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

async fn parquet(
    st: Arc<State>,
    client: Client,
    what: String,
    window: crate::Window,
) -> Response<ApiBody> {
    let Ok(permit) = st.queries.clone().try_acquire_owned() else {
        log(&st, &client.name, &what, "503 busy");
        let mut r = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many queries are running (this server's limit at once): try again in a second",
        );
        r.headers_mut()
            .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    };
    let st2 = st.clone();
    let r = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let files =
            crate::fleet::captures_with(&st2.cfg.stores, st2.cfg.prefix.as_deref(), &st2.cfg.read)?;
        let table = crate::fleet::block_table(
            &st2.cfg.node,
            &files,
            &st2.cfg.read,
            &window,
            &mut |_, _| {},
        )?;
        let mut buf = Vec::new();
        crate::fleet::write_table(
            &mut buf,
            std::slice::from_ref(&table),
            std::path::Path::new("index.parquet"),
        )?;
        Ok::<_, QueryError>((buf, table.num_rows()))
    })
    .await;
    match r {
        Ok(Ok((buf, rows))) => {
            log(&st, &client.name, &what, &format!("200, {rows} blocks"));
            let mut r = Response::new(ApiBody::full(buf));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                HeaderValue::from_static("application/vnd.apache.parquet"),
            );
            r
        }
        Ok(Err(e)) => plan_error(&st, &client.name, &what, &e),
        Err(e) => {
            log(&st, &client.name, &what, &format!("500 {e}"));
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}
