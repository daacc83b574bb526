//! The session table beside every capture file (`<capture>.sessions.parquet`,
//! issue 38; the rows are `wiretape-sessions`'): written by one thread of the
//! store ([`SessionRecorder`]) from copies of the blocks the writers hand
//! to their disks, never in the capture's way.
//!
//! A writer ([`crate::PcapWriter`] with a [`SessionFeed`]) copies the records
//! of each block it hands to its sink (once per block, never per frame) into
//! a buffer of the recorder's pool and sends it over. The pool has
//! [`SESSION_QUEUE`] buffers, all files of the store together: when none is
//! free (the thread is behind), the block is not copied and its frames are
//! counted as skipped for sessions. The file's table is then written all the
//! same, marked incomplete (`wiretape.sessions.complete = 0`,
//! `wiretape.sessions.skipped` frames); the capture loses nothing and the
//! writer never waits (a file source does wait: nothing is lost by it).
//!
//! When a file ends (rotation or stop) its writer sends the last records and
//! the file's name on the same channel, in order: the thread cuts the
//! series' connection table there ([`wiretape_sessions::Tracker::cut`]:
//! connections open at the cut go on into the next file's table with the
//! same `session_id`) and writes the table. Each queue's files are a series
//! of their own (a table per series).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use wiretape_files::pcap::{Format, RECORD_HEADER_LEN};
use wiretape_sessions::{write_parquet_file, Config, Tracker};

/// Blocks waiting for the session thread at most, all files of a store
/// together (each a buffer of up to a block's size).
pub const SESSION_QUEUE: usize = 8;

/// The session table of a capture file: `<file>.sessions.parquet`.
pub fn path_for(capture: &Path) -> PathBuf {
    wiretape_files::naming::sessions_path(capture)
}

/// What the session thread did (all files so far).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Tables written.
    pub tables: u64,
    /// Of them, incomplete (frames skipped).
    pub incomplete: u64,
    /// Frames not read for sessions: the thread was behind.
    pub skipped_frames: u64,
    /// Frames read.
    pub frames: u64,
    /// Tables that could not be written.
    pub errors: u64,
    /// CPU time of the thread, ns.
    pub cpu_ns: u64,
}

enum Msg {
    Block {
        series: u64,
        buf: Vec<u8>,
        format: Format,
        linktypes: Arc<[u32]>,
    },
    Close {
        series: u64,
        capture: PathBuf,
        skipped: u64,
        last: bool,
    },
    Barrier(SyncSender<()>),
}

/// The store's session thread and its buffer pool (see the module docs).
pub struct SessionRecorder {
    tx: Mutex<Option<Sender<Msg>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    free: Mutex<Vec<Vec<u8>>>,
    returned: Condvar,
    allocated: AtomicUsize,
    next_series: AtomicU64,
    tables: AtomicU64,
    incomplete: AtomicU64,
    skipped: AtomicU64,
    frames: AtomicU64,
    errors: AtomicU64,
    cpu_ns: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl std::fmt::Debug for SessionRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRecorder")
            .field("stats", &self.stats())
            .finish()
    }
}

/// Test hook (the cargo feature `fault-injection` only, never in a shipped
/// build): `WIRETAPE_FAULT_SESSIONS_STALL_MS=N` makes the session thread
/// sleep N ms before each block, a thread starved of CPU.
#[cfg(feature = "fault-injection")]
fn stall() {
    static MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let ms = *MS.get_or_init(|| {
        std::env::var("WIRETAPE_FAULT_SESSIONS_STALL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    });
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
fn stall() {}

impl SessionRecorder {
    /// Starts the thread.
    pub fn start() -> std::io::Result<Arc<SessionRecorder>> {
        let (tx, rx) = std::sync::mpsc::channel::<Msg>();
        let r = Arc::new(SessionRecorder {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(None),
            free: Mutex::new(Vec::new()),
            returned: Condvar::new(),
            allocated: AtomicUsize::new(0),
            next_series: AtomicU64::new(0),
            tables: AtomicU64::new(0),
            incomplete: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            frames: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
            last_error: Mutex::new(None),
        });
        let me = r.clone();
        let h = std::thread::Builder::new()
            .name("wt-sessions".into())
            .spawn(move || me.run(rx))?;
        *r.thread.lock().expect("sessions") = Some(h);
        Ok(r)
    }

    /// A new series of files (one queue's writer).
    pub fn series(&self) -> u64 {
        self.next_series.fetch_add(1, Ordering::Relaxed)
    }

    /// The counts so far.
    pub fn stats(&self) -> SessionStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SessionStats {
            tables: l(&self.tables),
            incomplete: l(&self.incomplete),
            skipped_frames: l(&self.skipped),
            frames: l(&self.frames),
            errors: l(&self.errors),
            cpu_ns: l(&self.cpu_ns),
        }
    }

    /// The last table that could not be written, and why.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().expect("sessions").clone()
    }

    fn send(&self, m: Msg) -> bool {
        match self.tx.lock().expect("sessions").as_ref() {
            Some(tx) => tx.send(m).is_ok(),
            None => false,
        }
    }

    /// A buffer of the pool: a free one, a new one while fewer than
    /// [`SESSION_QUEUE`] exist, else (`wait`) one given back, or none.
    fn buffer(&self, wait: bool) -> Option<Vec<u8>> {
        let mut free = self.free.lock().expect("sessions");
        loop {
            if let Some(b) = free.pop() {
                return Some(b);
            }
            if self.allocated.load(Ordering::Relaxed) < SESSION_QUEUE {
                self.allocated.fetch_add(1, Ordering::Relaxed);
                return Some(Vec::new());
            }
            if !wait || self.tx.lock().expect("sessions").is_none() {
                return None;
            }
            free = self.returned.wait(free).expect("sessions");
        }
    }

    fn give_back(&self, mut b: Vec<u8>) {
        b.clear();
        self.free.lock().expect("sessions").push(b);
        self.returned.notify_one();
    }

    /// Waits until every table of the files ended so far is written.
    pub fn wait_idle(&self) {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        if self.send(Msg::Barrier(tx)) {
            let _ = rx.recv();
        }
    }

    /// Writes what is queued, then ends the thread.
    pub fn shutdown(&self) {
        self.tx.lock().expect("sessions").take();
        self.returned.notify_all();
        if let Some(h) = self.thread.lock().expect("sessions").take() {
            let _ = h.join();
        }
    }

    fn run(&self, rx: Receiver<Msg>) {
        crate::sys::lower_priority();
        let mut series: HashMap<u64, Tracker> = HashMap::new();
        while let Ok(m) = rx.recv() {
            let t0 = crate::sys::thread_cpu_ns();
            match m {
                Msg::Block {
                    series: s,
                    buf,
                    format,
                    linktypes,
                } => {
                    stall();
                    let t = series
                        .entry(s)
                        .or_insert_with(|| Tracker::new(Config::default()));
                    let n = for_each_record(&buf, format, |iface, ts, data, wire| {
                        let lt = linktypes
                            .get(iface as usize)
                            .or(linktypes.first())
                            .copied()
                            .unwrap_or(wiretape_files::pcap::LINKTYPE_ETHERNET);
                        t.add(lt, ts, data, wire);
                    });
                    self.frames.fetch_add(n, Ordering::Relaxed);
                    self.give_back(buf);
                }
                Msg::Close {
                    series: s,
                    capture,
                    skipped,
                    last,
                } => {
                    let mut t = series.remove(&s).unwrap_or_default();
                    t.skipped(skipped);
                    let name = capture
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let table = t.cut(&name);
                    if !last {
                        series.insert(s, t);
                    }
                    let out = path_for(&capture);
                    match write_parquet_file(&out, &table) {
                        Ok(()) => {
                            self.tables.fetch_add(1, Ordering::Relaxed);
                            if !table.stats.complete() {
                                self.incomplete.fetch_add(1, Ordering::Relaxed);
                            }
                            // Retention may have taken the capture meanwhile.
                            if !capture.exists() {
                                let _ = std::fs::remove_file(&out);
                            }
                        }
                        Err(e) => {
                            self.errors.fetch_add(1, Ordering::Relaxed);
                            *self.last_error.lock().expect("sessions") = Some(e.to_string());
                        }
                    }
                }
                Msg::Barrier(d) => {
                    let _ = d.send(());
                }
            }
            self.cpu_ns.fetch_add(
                crate::sys::thread_cpu_ns().saturating_sub(t0),
                Ordering::Relaxed,
            );
        }
    }
}

/// Calls `each(interface, stamp ns, captured bytes, wire length)` for every
/// record of `bytes`, whole records of `format` as a writer lays them out
/// (pcap records; pcapng blocks, of which the EPBs, ns stamps, are frames).
/// Stops at the first record that does not fit. Returns the frames seen.
pub fn for_each_record(
    bytes: &[u8],
    format: Format,
    mut each: impl FnMut(u32, u64, &[u8], u32),
) -> u64 {
    let rd = |o: usize| {
        bytes
            .get(o..o + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let mut o = 0usize;
    let mut n = 0;
    if format == Format::PcapNg {
        while bytes.len() - o >= 12 {
            let (kind, total) = (rd(o), rd(o + 4) as usize);
            if total < 12 || total > bytes.len() - o {
                break;
            }
            if kind == wiretape_files::pcapng::EPB && total >= wiretape_files::pcapng::EPB_OVERHEAD
            {
                let iface = rd(o + 8);
                let ts = ((rd(o + 12) as u64) << 32) | rd(o + 16) as u64;
                let cap = rd(o + 20) as usize;
                let wire = rd(o + 24);
                let head = wiretape_files::pcapng::EPB_HEAD;
                if let Some(data) = bytes.get(o + head..o + head + cap) {
                    each(iface, ts, data, wire);
                    n += 1;
                }
            }
            o += total;
        }
        return n;
    }
    let unit = if format == Format::PcapUs { 1000 } else { 1 };
    while bytes.len() - o >= RECORD_HEADER_LEN {
        let sec = rd(o) as u64;
        let frac = rd(o + 4) as u64;
        let cap = rd(o + 8) as usize;
        let wire = rd(o + 12);
        let Some(data) = bytes.get(o + RECORD_HEADER_LEN..o + RECORD_HEADER_LEN + cap) else {
            break;
        };
        each(0, sec * 1_000_000_000 + frac * unit, data, wire);
        n += 1;
        o += RECORD_HEADER_LEN + cap;
    }
    n
}

/// One file's way to the session thread, held by its writer.
pub struct SessionFeed {
    rec: Arc<SessionRecorder>,
    series: u64,
    capture: PathBuf,
    format: Format,
    linktypes: Arc<[u32]>,
    wait: bool,
    /// Frames not handed over (the pool was empty).
    skipped: u64,
}

impl std::fmt::Debug for SessionFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionFeed")
            .field("series", &self.series)
            .field("capture", &self.capture)
            .field("skipped", &self.skipped)
            .finish()
    }
}

impl SessionFeed {
    /// The feed of `capture`, a file of series `series`
    /// ([`SessionRecorder::series`]); `wait`: when the pool is empty, wait
    /// for a buffer (a file source) instead of skipping the block.
    pub fn new(rec: Arc<SessionRecorder>, series: u64, capture: &Path, wait: bool) -> SessionFeed {
        SessionFeed {
            rec,
            series,
            capture: capture.to_owned(),
            format: Format::PcapNs,
            linktypes: Arc::from(vec![wiretape_files::pcap::LINKTYPE_ETHERNET]),
            wait,
            skipped: 0,
        }
    }

    /// The file's record format and link types (pcapng: by interface).
    pub(crate) fn set_layout(&mut self, format: Format, linktypes: &[u32]) {
        self.format = format;
        self.linktypes = Arc::from(linktypes.to_vec());
    }

    /// Hands over the records `parts` (whole records, in order) holding
    /// `frames` frames: copied into a buffer of the pool, or counted as
    /// skipped when none is free. Once per block.
    pub(crate) fn hand(&mut self, parts: &[&[u8]], frames: u64) {
        if frames == 0 {
            return;
        }
        let Some(mut buf) = self.rec.buffer(self.wait) else {
            self.skipped += frames;
            self.rec.skipped.fetch_add(frames, Ordering::Relaxed);
            return;
        };
        for p in parts {
            buf.extend_from_slice(p);
        }
        let m = Msg::Block {
            series: self.series,
            buf,
            format: self.format,
            linktypes: self.linktypes.clone(),
        };
        if !self.rec.send(m) {
            self.skipped += frames;
            self.rec.skipped.fetch_add(frames, Ordering::Relaxed);
        }
    }

    /// Frames not handed over so far.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The file ended (`last`: its series too): its table is written.
    pub(crate) fn close(self, last: bool) {
        self.rec.send(Msg::Close {
            series: self.series,
            capture: self.capture,
            skipped: self.skipped,
            last,
        });
    }
}

/// Writes the session table of an existing capture file (`wiretape index`),
/// reading it once (with `opts`: its identities, where a Stenographer
/// file's table goes) with `tracker` (a new one, or the one that read the
/// file before it in its series: connections open at its end go on here
/// with their ids). The table goes to a temporary first, then renamed.
/// Returns the table's counts.
pub fn rebuild(
    capture: &Path,
    opts: &wiretape_files::ReadOptions,
    tracker: &mut Tracker,
) -> Result<wiretape_sessions::TableStats, crate::StorageError> {
    let rd = |source| crate::StorageError::Read {
        path: capture.to_owned(),
        source,
    };
    let len = std::fs::metadata(capture).map(|m| m.len()).unwrap_or(0);
    let src = wiretape_files::zread::open_buffered(capture, opts).map_err(rd)?;
    if src.age().is_some() {
        // An encrypted capture gets no session table: its names and
        // addresses would lie beside it in clear.
        return Ok(wiretape_sessions::TableStats::default());
    }
    let mut walk = wiretape_files::walk::Walker::new(src);
    let mut data = Vec::new();
    while let Some(m) = walk.next_into(&mut data) {
        let lt = walk
            .interfaces()
            .get(m.interface as usize)
            .map_or(walk.header().linktype, |i| i.linktype as u32);
        tracker.add(lt, m.ts_ns, &data, m.orig_len);
    }
    if let Some(e) = walk.stop().and_then(|s| s.error(capture, len)) {
        return Err(e);
    }
    let name = capture
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let table = tracker.cut(&name);
    let out = opts.sessions_path(capture);
    // A temporary of this process's own: the recorder's session thread
    // may be writing the same table.
    let tmp = {
        let mut p = out.as_os_str().to_owned();
        p.push(format!(".{}.tmp", std::process::id()));
        PathBuf::from(p)
    };
    let werr = |e: wiretape_sessions::TableError| crate::StorageError::Write {
        path: out.clone(),
        source: std::io::Error::other(e.to_string()),
    };
    let file = std::fs::File::create(&tmp).map_err(|e| crate::StorageError::from_write(&tmp, e))?;
    if let Err(e) = wiretape_sessions::write_parquet(std::io::BufWriter::new(file), &table, &out) {
        let _ = std::fs::remove_file(&tmp);
        return Err(werr(e));
    }
    std::fs::rename(&tmp, &out).map_err(|e| crate::StorageError::from_write(&out, e))?;
    Ok(table.stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileSink, PcapWriter};
    use wiretape_sessions::synth;

    /// Frames written through a writer with a feed come out as the same
    /// table a rebuild of the file makes (pcap and pcapng, blocks of a
    /// few frames: many hand-overs), and a rotation carries connections
    /// into the next file with their ids.
    #[test]
    fn the_recorded_table_equals_the_rebuilt_one() {
        let d = std::env::temp_dir().join(format!("wt-sess-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let ip = |x: u8| std::net::IpAddr::from([10, 0, 0, x]);
        let mut frames = Vec::new();
        for i in 0..40u16 {
            let q = synth::dns_query(i, &format!("n{i}.example.com"), 1);
            frames.push(synth::udp(None, (ip(1), 40000 + i), (ip(53), 53), &q));
        }
        let mut t = synth::Tcp::new((ip(2), 40999), (ip(80), 80), None, 1);
        frames.extend(t.open());
        frames.push(t.seg(false, 0x18, &synth::http_get("h.example", "/", "ua")));
        let rec = SessionRecorder::start().unwrap();
        for fmt in [Format::PcapNs, Format::PcapNg] {
            let series = rec.series();
            let mut ids = Vec::new();
            for part in 0..2 {
                let p = d.join(format!("a{part}.{}", fmt.extension()));
                let sink = FileSink::with_block_size(&p, 4096).unwrap();
                let feed = SessionFeed::new(rec.clone(), series, &p, true);
                let mut w = PcapWriter::with_format(sink, 65535, fmt, "x").with_sessions(feed);
                for (i, f) in frames.iter().enumerate() {
                    w.write((part * 1000 + i) as u64 * 1000, f).unwrap();
                }
                if part == 0 {
                    w.end_sessions(false);
                }
                w.close().unwrap();
                rec.wait_idle();
                let got = wiretape_sessions::read_parquet(std::fs::read(path_for(&p)).unwrap(), &p)
                    .unwrap();
                assert!(got.stats.complete());
                assert_eq!(got.stats.frames, frames.len() as u64);
                let mut alone = Tracker::default();
                rebuild(&p, &Default::default(), &mut alone).unwrap();
                let again =
                    wiretape_sessions::read_parquet(std::fs::read(path_for(&p)).unwrap(), &p)
                        .unwrap();
                if part == 0 {
                    assert_eq!(got.rows, again.rows, "{fmt:?}");
                }
                assert_eq!(got.rows.len(), 41);
                ids.push(
                    got.rows
                        .iter()
                        .map(|r| r.id)
                        .collect::<std::collections::BTreeSet<_>>(),
                );
            }
            // Every connection (none closed, none idle) goes on in the
            // second file with its id.
            assert_eq!(ids[0], ids[1], "{fmt:?}");
        }
        rec.shutdown();
        let _ = std::fs::remove_dir_all(&d);
    }
}
