//! The control socket of a recording (`wiretape ctl`): a Unix stream socket,
//! mode 0600, one JSON request line in, one JSON reply line out.
//!
//! Requests: `{"cmd":"status"}` (the live counters) and
//! `{"cmd":"dump","from_ns":N,"to_ns":N,"filter":"EXPR"}` (each field
//! optional; the reply is the dump's report once it is written). A reply
//! with an `error` field is a refusal (`"usage": true`: the request itself
//! was wrong, e.g. a filter libpcap refuses).

use super::{DumpReport, DumpRequest, Hub, LiveError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The control socket's name in a recording's output directory (where
/// `wiretape record` puts it unless told otherwise).
pub const SOCKET_NAME: &str = ".wiretape-control.sock";

/// Why a recording into a directory gets no control socket by default.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoDefaultSocket {
    /// The path is too long for a Unix socket (108 bytes with its NUL).
    #[error("{} is too long for a Unix socket", .0.display())]
    TooLong(std::path::PathBuf),
    /// Another recording listens there.
    #[error("another wiretape listens on {}", .0.display())]
    Taken(std::path::PathBuf),
}

/// The default control socket of a recording into `dir`:
/// `dir/`[`SOCKET_NAME`], unless the path is too long for a socket or
/// another recording listens there (it connects to find out).
pub fn default_socket(dir: &std::path::Path) -> Result<std::path::PathBuf, NoDefaultSocket> {
    let p = dir.join(SOCKET_NAME);
    if p.as_os_str().len() >= 108 {
        return Err(NoDefaultSocket::TooLong(p));
    }
    if std::os::unix::net::UnixStream::connect(&p).is_ok() {
        return Err(NoDefaultSocket::Taken(p));
    }
    Ok(p)
}

/// The control socket a client talks to: `control` (as given to the
/// recording), else `dir/`[`SOCKET_NAME`] (its output directory), else
/// `from_env` (the caller's environment, e.g. `$WIRETAPE_CONTROL`), else
/// `./`[`SOCKET_NAME`] if it exists; `None`: which recording is unknown.
pub fn find_socket(
    control: Option<&Path>,
    dir: Option<&Path>,
    from_env: Option<PathBuf>,
) -> Option<PathBuf> {
    if let Some(p) = control {
        return Some(p.to_path_buf());
    }
    if let Some(d) = dir {
        return Some(d.join(SOCKET_NAME));
    }
    if from_env.is_some() {
        return from_env;
    }
    let p = Path::new(".").join(SOCKET_NAME);
    p.exists().then_some(p)
}

/// A part of a dump's window that does not parse (see [`dump_window`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    /// The span back from now is not a duration.
    #[error("'{0}' is not a duration: use e.g. 30s, 5m, 1h")]
    Last(String),
    /// The start is not a time ([`wiretape_timestamp::parse_time_in`]'s message).
    #[error("{0}")]
    From(String),
    /// The end is not a time.
    #[error("{0}")]
    To(String),
}

impl WindowError {
    /// Which part: `last`, `from` or `to`.
    pub fn part(&self) -> &'static str {
        match self {
            WindowError::Last(_) => "last",
            WindowError::From(_) => "from",
            WindowError::To(_) => "to",
        }
    }
}

/// A dump's window `[from_ns, to_ns)` from what a user writes: `last`, a
/// duration back from `now_ns` (`30s`, `-5m`, `90`: seconds), or `from`
/// and `to`, times as [`wiretape_timestamp::parse_time_in`] reads them
/// (`zone`: what a time without a zone means). Unset ends stay `None`
/// (the ring's oldest frame; now).
pub fn dump_window(
    last: Option<&str>,
    from: Option<&str>,
    to: Option<&str>,
    now_ns: u64,
    zone: wiretape_timestamp::NoZone,
) -> Result<(Option<u64>, Option<u64>), WindowError> {
    if let Some(l) = last {
        let span = crate::options::parse_duration(l.trim().trim_start_matches('-'))
            .map_err(|_| WindowError::Last(l.to_string()))?;
        return Ok((
            Some(now_ns.saturating_sub(span.as_nanos() as u64)),
            Some(now_ns),
        ));
    }
    let t = |s: &str| wiretape_timestamp::parse_time_in(s, now_ns, zone);
    let from = from.map(t).transpose().map_err(WindowError::From)?;
    let to = to.map(t).transpose().map_err(WindowError::To)?;
    Ok((from, to))
}

/// A request to a recording's control socket (one JSON line, tagged by
/// `cmd`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
#[non_exhaustive]
pub enum Request {
    /// The live counters.
    Status,
    /// A window of the ring (and a filter) into a capture file.
    Dump {
        /// From (inclusive, UTC ns); none: the oldest frame in the ring.
        #[serde(default)]
        from_ns: Option<u64>,
        /// To (exclusive, UTC ns); none: now.
        #[serde(default)]
        to_ns: Option<u64>,
        /// A tcpdump expression; none: every frame.
        #[serde(default)]
        filter: Option<String>,
    },
}

impl Request {
    /// How long a client waits for the reply: 10 s for the status, an hour
    /// for a dump (a large window of a large ring is written at disk speed).
    pub fn reply_timeout(&self) -> Duration {
        match self {
            Request::Status => Duration::from_secs(10),
            Request::Dump { .. } => Duration::from_secs(3600),
        }
    }

    /// A dump of `[from_ns, to_ns)` through `filter`.
    pub fn dump(from_ns: Option<u64>, to_ns: Option<u64>, filter: Option<String>) -> Request {
        Request::Dump {
            from_ns,
            to_ns,
            filter,
        }
    }
}

/// A reply of the control socket.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Reply {
    /// The live counters, as `ctl status` prints them.
    Status(Value),
    /// What the dump wrote.
    Dump(DumpReport),
    /// The recording refused the request: `usage` when the request itself
    /// was wrong (a filter libpcap refuses, an empty window).
    Refused {
        /// Why.
        error: String,
        /// The request was wrong (not the recording).
        usage: bool,
    },
}

/// A refusal on the wire: `{"error": ..., "usage": true}` (`usage` only
/// when true).
#[derive(Serialize)]
struct Refusal {
    error: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    usage: bool,
}

fn refuse(error: impl Into<String>, usage: bool) -> Value {
    serde_json::to_value(Refusal {
        error: error.into(),
        usage,
    })
    .unwrap_or_default()
}

/// A status request waiting for the recording's loop to answer.
pub(crate) type StatusRequest = mpsc::Sender<Value>;

/// Binds `path` (mode 0600). A stale socket (nobody listening) is replaced;
/// a live one, or a path that is not a socket, is an error.
pub(crate) fn bind(path: &Path) -> Result<UnixListener, LiveError> {
    let err = |source| LiveError::Control {
        path: path.to_owned(),
        source,
    };
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if !md.file_type().is_socket() {
            return Err(err(std::io::Error::other(
                "the path exists and is not a socket",
            )));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(LiveError::ControlInUse(path.to_owned()));
        }
        std::fs::remove_file(path).map_err(err)?;
    }
    let l = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    l.set_nonblocking(true).map_err(err)?;
    Ok(l)
}

/// The control socket's accept thread.
pub(crate) struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Serves `listener`; status requests go to `status` (the recording's
    /// loop answers them), dumps to the hub.
    pub(crate) fn start(
        path: PathBuf,
        listener: UnixListener,
        hub: Arc<Hub>,
        status: mpsc::Sender<StatusRequest>,
    ) -> std::io::Result<ControlServer> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wt-control".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    // Accept only once a client waits (see sys::readable);
                    // the timeout bounds how late the stop is seen.
                    match wiretape_capture::sys::readable(
                        listener.as_fd(),
                        Duration::from_millis(100),
                    ) {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    }
                    match listener.accept() {
                        Ok((conn, _)) => {
                            let (hub, status) = (hub.clone(), status.clone());
                            // One thread per request: a dump being written
                            // must not hold up a status request.
                            let _ = std::thread::Builder::new()
                                .name("wt-control-req".into())
                                .spawn(move || serve_one(conn, &hub, &status));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?;
        Ok(ControlServer {
            path,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve_one(conn: UnixStream, hub: &Arc<Hub>, status: &mpsc::Sender<StatusRequest>) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut line = String::new();
    let reply = match BufReader::new(&conn).read_line(&mut line) {
        Ok(_) => answer(&line, hub, status),
        Err(e) => refuse(format!("cannot read the request: {e}"), false),
    };
    let mut w = &conn;
    let _ = writeln!(w, "{reply}");
}

fn answer(line: &str, hub: &Arc<Hub>, status: &mpsc::Sender<StatusRequest>) -> Value {
    let req: Value = match serde_json::from_str(line.trim()) {
        Ok(v) => v,
        Err(e) => return refuse(format!("not a JSON request: {e}"), true),
    };
    let cmd = req["cmd"].as_str();
    if !matches!(cmd, Some("status" | "dump")) {
        return refuse(format!("unknown command {cmd:?}: use status or dump"), true);
    }
    let req: Request = match serde_json::from_value(req) {
        Ok(r) => r,
        Err(e) => return refuse(format!("not a valid request: {e}"), true),
    };
    match req {
        Request::Status => {
            let (tx, rx) = mpsc::channel();
            if status.send(tx).is_err() {
                return refuse("the recording is stopping", false);
            }
            rx.recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| refuse("the recording did not answer (stopping?)", false))
        }
        Request::Dump {
            from_ns,
            to_ns,
            filter,
        } => {
            let d = DumpRequest {
                from_ns,
                to_ns,
                filter,
                trigger: "ctl".into(),
            };
            match hub.dump(d) {
                Ok(rx) => match rx.recv() {
                    Ok(r) => {
                        serde_json::to_value(&r).unwrap_or_else(|e| refuse(e.to_string(), false))
                    }
                    Err(_) => refuse("the dump thread ended without a report", false),
                },
                Err(e) => {
                    let usage = matches!(e, LiveError::Filter(_) | LiveError::Window { .. });
                    refuse(e.to_string(), usage)
                }
            }
        }
    }
}

/// Sends one request to the control socket at `path` and returns the reply
/// (what `wiretape ctl` does). `timeout` bounds the wait for the reply.
pub fn request(path: &Path, req: &Request, timeout: Duration) -> std::io::Result<Reply> {
    let conn = UnixStream::connect(path)?;
    conn.set_read_timeout(Some(timeout))?;
    let mut w = &conn;
    let line = serde_json::to_string(req).map_err(std::io::Error::other)?;
    writeln!(w, "{line}")?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let bad = |e: serde_json::Error| {
        std::io::Error::other(format!("bad reply from {}: {e}", path.display()))
    };
    let v: Value = serde_json::from_str(line.trim()).map_err(bad)?;
    if let Some(e) = v["error"].as_str() {
        return Ok(Reply::Refused {
            error: e.to_string(),
            usage: v["usage"] == Value::Bool(true),
        });
    }
    Ok(match req {
        Request::Status => Reply::Status(v),
        Request::Dump { .. } => Reply::Dump(serde_json::from_value(v).map_err(bad)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiretape_timestamp::NoZone;

    #[test]
    fn a_window_is_a_span_back_from_now_or_two_times() {
        let now = 1_000_000_000_000;
        let w = |l, f, t| dump_window(l, f, t, now, NoZone::Utc);
        let s = 1_000_000_000;
        assert_eq!(
            w(Some("30s"), None, None),
            Ok((Some(now - 30 * s), Some(now)))
        );
        assert_eq!(
            w(Some("-1.5m"), None, None),
            Ok((Some(now - 90 * s), Some(now)))
        );
        assert_eq!(w(Some("2"), None, None), Ok((Some(now - 2 * s), Some(now))));
        assert_eq!(w(None, None, None), Ok((None, None)));
        assert_eq!(
            w(None, Some("-10s"), Some("990")),
            Ok((Some(now - 10 * s), Some(990 * s)))
        );
        for bad in ["x", "0s"] {
            let e = w(Some(bad), None, None).unwrap_err();
            assert_eq!(e.part(), "last");
            assert_eq!(
                e.to_string(),
                format!("'{bad}' is not a duration: use e.g. 30s, 5m, 1h")
            );
        }
        assert_eq!(w(None, Some("5m"), None).unwrap_err().part(), "from");
        assert_eq!(w(None, None, Some("nonsense")).unwrap_err().part(), "to");
    }

    #[test]
    fn the_socket_is_the_flag_then_the_directory_then_the_environment() {
        let (c, d, e) = (
            Path::new("/run/c.sock"),
            Path::new("/data"),
            PathBuf::from("/e.sock"),
        );
        assert_eq!(
            find_socket(Some(c), Some(d), Some(e.clone())),
            Some(c.to_path_buf())
        );
        assert_eq!(
            find_socket(None, Some(d), Some(e.clone())),
            Some(d.join(SOCKET_NAME))
        );
        assert_eq!(find_socket(None, None, Some(e.clone())), Some(e));
    }

    #[test]
    fn the_default_socket_is_refused_when_too_long_or_taken() {
        let dir = std::env::temp_dir().join(format!("wt-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(default_socket(&dir), Ok(dir.join(SOCKET_NAME)));
        let _listener = std::os::unix::net::UnixListener::bind(dir.join(SOCKET_NAME)).unwrap();
        assert_eq!(
            default_socket(&dir),
            Err(NoDefaultSocket::Taken(dir.join(SOCKET_NAME)))
        );
        let long = dir.join("d".repeat(100));
        assert_eq!(
            default_socket(&long),
            Err(NoDefaultSocket::TooLong(long.join(SOCKET_NAME)))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
