//! The control socket of a recording (`wiretape ctl`): a Unix stream socket,
//! mode 0600, one JSON request line in, one JSON reply line out.
//!
//! Requests: `{"cmd":"status"}` (the live counters) and
//! `{"cmd":"dump","from_ns":N,"to_ns":N,"filter":"EXPR"}` (each field
//! optional; the reply is the dump's report once it is written). A reply
//! with an `error` field is a refusal (`"usage": true`: the request itself
//! was wrong, e.g. a filter libpcap refuses).

use super::{DumpRequest, Hub, LiveError};
use serde_json::{json, Value};
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
        Err(e) => json!({ "error": format!("cannot read the request: {e}") }),
    };
    let mut w = &conn;
    let _ = writeln!(w, "{reply}");
}

fn answer(line: &str, hub: &Arc<Hub>, status: &mpsc::Sender<StatusRequest>) -> Value {
    let req: Value = match serde_json::from_str(line.trim()) {
        Ok(v) => v,
        Err(e) => return json!({ "error": format!("not a JSON request: {e}"), "usage": true }),
    };
    match req["cmd"].as_str() {
        Some("status") => {
            let (tx, rx) = mpsc::channel();
            if status.send(tx).is_err() {
                return json!({ "error": "the recording is stopping" });
            }
            rx.recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| json!({ "error": "the recording did not answer (stopping?)" }))
        }
        Some("dump") => {
            let d = DumpRequest {
                from_ns: req["from_ns"].as_u64(),
                to_ns: req["to_ns"].as_u64(),
                filter: req["filter"].as_str().map(str::to_owned),
                trigger: "ctl".into(),
            };
            match hub.dump(d) {
                Ok(rx) => match rx.recv() {
                    Ok(r) => serde_json::to_value(&r)
                        .unwrap_or_else(|e| json!({ "error": e.to_string() })),
                    Err(_) => json!({ "error": "the dump thread ended without a report" }),
                },
                Err(e) => {
                    let usage = matches!(e, LiveError::Filter(_) | LiveError::Window { .. });
                    json!({ "error": e.to_string(), "usage": usage })
                }
            }
        }
        other => json!({
            "error": format!("unknown command {other:?}: use status or dump"),
            "usage": true,
        }),
    }
}

/// Sends one request to the control socket at `path` and returns the reply
/// (what `wiretape ctl` does). `timeout` bounds the wait for the reply.
pub fn request(path: &Path, req: &Value, timeout: Duration) -> std::io::Result<Value> {
    let conn = UnixStream::connect(path)?;
    conn.set_read_timeout(Some(timeout))?;
    let mut w = &conn;
    writeln!(w, "{req}")?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    serde_json::from_str(line.trim())
        .map_err(|e| std::io::Error::other(format!("bad reply from {}: {e}", path.display())))
}
