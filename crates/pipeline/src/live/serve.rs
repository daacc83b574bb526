//! PCAP-over-IP: each TCP client gets a pcap header (ns stamps) and then
//! every frame from its connect onward, merged across queues in time order
//! (each frame held until every queue's writer has published past it; a
//! quiet queue's watermark follows its clock less the reorder window). The server is one lossy subscriber
//! (`serve`, paused while no client is connected) and one thread; each
//! client has its own buffer and a non-blocking socket. A client whose
//! buffer fills (it reads slower than the stream) is cut off, logged and
//! counted: it never slows the recorder or the other clients. If the server
//! itself falls behind, its subscriber skips whole chunks (counted).

use super::chunk::RECORD_HEADER;
use super::hub::{Hub, Recv};
use super::{LiveError, Merger, SubscribeOptions};
use serde::Serialize;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `--serve` settings.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Where to listen (loopback unless `allow_remote`).
    pub addr: SocketAddr,
    /// Most clients at once; more are refused (accepted and closed, counted).
    pub max_clients: usize,
    /// Serve on a non-loopback address.
    pub allow_remote: bool,
    /// Bytes a client may lag behind before it is cut off.
    pub client_buffer: usize,
    /// How far (in stamps) a quiet queue's clock trails its watermark: a
    /// frame waits at most about this plus 100 ms for a queue with no
    /// traffic (see [`Merger`]).
    pub reorder: Duration,
}

impl ServeConfig {
    /// The defaults: 8 clients, 32 MiB each, 100 ms reorder window.
    pub fn new(addr: SocketAddr) -> Self {
        ServeConfig {
            addr,
            max_clients: 8,
            allow_remote: false,
            client_buffer: 32 << 20,
            reorder: Duration::from_millis(100),
        }
    }
}

/// What the PCAP-over-IP server did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServeReport {
    /// The address it listened on.
    pub addr: String,
    /// Clients accepted (and served).
    pub clients: u64,
    /// Clients refused (over `--serve-max-clients`).
    pub refused: u64,
    /// Clients cut off: their buffer filled (slower than the stream).
    pub cut_off: u64,
    /// Clients that went away by themselves.
    pub closed: u64,
    /// Clients connected at the end.
    pub connected: u64,
    /// Frames sent, all clients together.
    pub frames_sent: u64,
    /// Bytes sent, all clients together (headers included).
    pub bytes_sent: u64,
    /// Frames the server's subscriber missed while clients were connected
    /// (it fell behind and skipped whole chunks).
    pub skipped: u64,
}

/// Checks the address and binds it (before anything is attached).
pub(crate) fn bind(cfg: &ServeConfig) -> Result<TcpListener, LiveError> {
    if !super::may_listen(cfg.addr, cfg.allow_remote) {
        return Err(LiveError::NotLoopback(cfg.addr));
    }
    let l = TcpListener::bind(cfg.addr).map_err(|source| LiveError::Serve {
        addr: cfg.addr,
        source,
    })?;
    l.set_nonblocking(true).map_err(|source| LiveError::Serve {
        addr: cfg.addr,
        source,
    })?;
    Ok(l)
}

/// The running server.
pub(crate) struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
}

#[derive(Default)]
struct Stats {
    report: Mutex<ServeReport>,
    frames: AtomicU64,
    bytes: AtomicU64,
}

struct Client {
    s: TcpStream,
    addr: SocketAddr,
    buf: Vec<u8>,
    pos: usize,
    frames: u64,
    bytes: u64,
    since: Instant,
    dead: Option<&'static str>,
}

impl Client {
    /// Writes what the socket takes now.
    fn pump(&mut self) {
        while self.pos < self.buf.len() {
            match self.s.write(&self.buf[self.pos..]) {
                Ok(0) => {
                    self.dead = Some("closed");
                    return;
                }
                Ok(n) => {
                    self.pos += n;
                    self.bytes += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.dead = Some("closed");
                    return;
                }
            }
        }
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }
}

impl Server {
    /// Starts serving the run's frames on `listener`; `log` gets one line
    /// per client event.
    pub(crate) fn start(
        hub: &Arc<Hub>,
        listener: TcpListener,
        cfg: ServeConfig,
        log: impl Fn(String) + Send + 'static,
    ) -> std::io::Result<Server> {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Stats::default());
        stats.report.lock().expect("serve").addr = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| cfg.addr.to_string());
        let mut sub = hub.subscribe(SubscribeOptions {
            paused: true,
            buffer_bytes: 64 << 20,
            max_batches: 1024,
            ..SubscribeOptions::lossy().name("serve")
        });
        // The frames' link type (the input file's for `record -r`).
        let mut header = wiretape_files::FileHeader::new(hub.snaplen(), true);
        header.linktype = hub
            .target()
            .map_or(wiretape_files::LINKTYPE_ETHERNET, |t| t.linktype);
        let header = header.encode();
        let (st, stp) = (stats.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("wt-serve".into())
            .spawn(move || {
                // On a CPU shared with a capture thread, the capture thread
                // wins: a client that then falls behind skips (counted) or
                // is cut off, the files lose nothing.
                let _ = wiretape_capture::sys::lower_thread_priority(10);
                let mut merger: Option<Merger> = None;
                let mut clients: Vec<Client> = Vec::new();
                let mut skipped_at_pause = 0u64;
                let mut ended = false;
                loop {
                    let stopping = stp.load(Ordering::Relaxed);
                    // New clients.
                    loop {
                        // Accept only once a client waits (see sys::readable).
                        if stopping
                            || !wiretape_capture::sys::readable(listener.as_fd(), Duration::ZERO)
                                .unwrap_or(false)
                        {
                            break;
                        }
                        match listener.accept() {
                            Ok((s, addr)) => {
                                let mut r = st.report.lock().expect("serve");
                                if clients.len() >= cfg.max_clients {
                                    r.refused += 1;
                                    drop(r);
                                    log(format!("serve: refused {addr}: already {} clients (--serve-max-clients)", clients.len()));
                                    continue; // dropped: closed
                                }
                                r.clients += 1;
                                drop(r);
                                let _ = s.set_nonblocking(true);
                                let _ = s.set_nodelay(true);
                                let mut buf = Vec::with_capacity(1 << 20);
                                buf.extend_from_slice(&header);
                                let mut c = Client {
                                    s,
                                    addr,
                                    buf,
                                    pos: 0,
                                    frames: 0,
                                    bytes: 0,
                                    since: Instant::now(),
                                    dead: None,
                                };
                                // Deliveries resume before the client has
                                // its header: every frame from here on.
                                if clients.is_empty() {
                                    merger = Some(
                                        Merger::new(cfg.reorder).expect_queues(&sub.queues()),
                                    );
                                    skipped_at_pause = sub.report().skipped;
                                    sub.set_paused(false);
                                }
                                c.pump();
                                log(format!("serve: client {addr} connected"));
                                clients.push(c);
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => {
                                log(format!("serve: accept failed: {e}"));
                                break;
                            }
                        }
                    }
                    // Frames. How far every queue's writer has published,
                    // read before its batches are taken: each frame goes
                    // once every queue is past it (see Merger), so the
                    // stream stays in time order however late a queue's
                    // batch comes on a loaded machine.
                    if let Some(m) = &mut merger {
                        m.mark(&sub);
                    }
                    let wait = if clients.is_empty() { 50 } else { 5 };
                    match sub.recv_timeout(Duration::from_millis(wait)) {
                        Recv::Batch(b) => match &mut merger {
                            Some(m) if !clients.is_empty() => m.push(b),
                            _ => drop(b),
                        },
                        Recv::Timeout => {}
                        Recv::Ended => ended = true,
                    }
                    if let Some(m) = &mut merger {
                        // Take whatever else is queued before merging.
                        while let Recv::Batch(b) = sub.try_next() {
                            m.push(b);
                        }
                        let flush = ended || stopping;
                        let cap = cfg.client_buffer;
                        loop {
                            let f = if flush { m.next_flush() } else { m.next_ready() };
                            let Some(f) = f else { break };
                            let rec = RECORD_HEADER + f.data.len();
                            let mut h = [0u8; RECORD_HEADER];
                            h[0..4].copy_from_slice(&((f.ts_ns / 1_000_000_000) as u32).to_le_bytes());
                            h[4..8].copy_from_slice(&((f.ts_ns % 1_000_000_000) as u32).to_le_bytes());
                            h[8..12].copy_from_slice(&(f.data.len() as u32).to_le_bytes());
                            h[12..16].copy_from_slice(&f.orig_len.to_le_bytes());
                            for c in clients.iter_mut().filter(|c| c.dead.is_none()) {
                                if c.pending() + rec > cap {
                                    // A backlog released at once (the
                                    // reorder window, or this thread kept
                                    // off its CPU) is not a slow client:
                                    // what the socket takes now goes first.
                                    c.pump();
                                    if c.dead.is_some() {
                                        continue;
                                    }
                                    if c.pending() + rec > cap {
                                        c.dead = Some("cut off");
                                        continue;
                                    }
                                }
                                c.buf.extend_from_slice(&h);
                                c.buf.extend_from_slice(f.data);
                                c.frames += 1;
                                st.frames.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    for c in clients.iter_mut().filter(|c| c.dead.is_none()) {
                        c.pump();
                    }
                    let before = clients.len();
                    clients.retain(|c| {
                        let Some(why) = c.dead else { return true };
                        let mut r = st.report.lock().expect("serve");
                        if why == "cut off" {
                            r.cut_off += 1;
                            log(format!(
                                "serve: client {} cut off after {:.1} s and {} frames: {} bytes waiting for it (it reads slower than the stream)",
                                c.addr, c.since.elapsed().as_secs_f64(), c.frames, c.pending()
                            ));
                        } else {
                            r.closed += 1;
                            log(format!("serve: client {} went away after {} frames", c.addr, c.frames));
                        }
                        st.bytes.fetch_add(c.bytes, Ordering::Relaxed);
                        false
                    });
                    if before > 0 && clients.is_empty() {
                        sub.set_paused(true);
                        let mut r = st.report.lock().expect("serve");
                        r.skipped += sub.report().skipped - skipped_at_pause;
                        drop(r);
                        merger = None; // its held frames go: nobody wants them
                    }
                    if ended || stopping {
                        break;
                    }
                }
                // The end: what the clients are owed, as long as each
                // keeps reading (2 s without progress ends it), 10 s in all.
                let deadline = Instant::now() + Duration::from_secs(10);
                for c in clients.iter_mut() {
                    let _ = c.s.set_nonblocking(false);
                    while c.pos < c.buf.len() {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        let _ = c.s.set_write_timeout(Some(left.min(Duration::from_secs(2))));
                        match c.s.write(&c.buf[c.pos..]) {
                            Ok(0) => break,
                            Ok(n) => {
                                c.pos += n;
                                c.bytes += n as u64;
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(_) => break,
                        }
                    }
                    let _ = c.s.shutdown(std::net::Shutdown::Both);
                    st.bytes.fetch_add(c.bytes, Ordering::Relaxed);
                }
                let mut r = st.report.lock().expect("serve");
                r.connected = clients.len() as u64;
                if !clients.is_empty() {
                    r.skipped += sub.report().skipped - skipped_at_pause;
                }
            })?;
        Ok(Server {
            stop,
            thread: Some(thread),
            stats,
        })
    }

    /// Clients connected now and frames sent so far (for status).
    pub(crate) fn live(&self) -> ServeReport {
        let mut r = self.stats.report.lock().expect("serve").clone();
        r.frames_sent = self.stats.frames.load(Ordering::Relaxed);
        r.bytes_sent = self.stats.bytes.load(Ordering::Relaxed);
        r.connected = r.clients - r.cut_off - r.closed;
        r
    }

    /// Ends serving (after the run's frames were all published: clients
    /// get every frame up to the end) and reports.
    pub(crate) fn finish(mut self) -> ServeReport {
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
        let mut r = self.stats.report.lock().expect("serve").clone();
        r.frames_sent = self.stats.frames.load(Ordering::Relaxed);
        r.bytes_sent = self.stats.bytes.load(Ordering::Relaxed);
        r
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}
