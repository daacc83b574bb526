//! Writing the key index (`<capture>.kdx`; its format, encoder and reader
//! are `wiretape_files::keys`'s): the store's builder thread ([`Builder`]),
//! which encodes segments off the capture threads and appends them, and the
//! per-file state on the writer's side ([`KeyWriter`]) that cuts segments
//! and hands them over.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use wiretape_files::keys::{build_segment, path_for, SegmentInput};
use wiretape_files::StorageError;
use wiretape_filter::flow::{FlowCollector, Rows};

/// Rows a segment holds before it is cut (32 bytes each on the writer's
/// side, plain IPv4): a file that never rotates gets its index in segments
/// of this many rows, in bounded memory.
pub const ROWS_BUDGET: usize = 1 << 19;
/// Blocks a segment holds at most (a quiet link: few rows, many blocks).
const BLOCKS_BUDGET: u64 = 4096;
/// Segments waiting for the builder at most, all files of a store together.
pub const BUILD_QUEUE: usize = 4;

/// Builds `input`'s segment and appends it to its `.kdx` (made anew for a
/// file's first segment; synced for its last).
fn write_segment(input: &SegmentInput) -> Result<(), StorageError> {
    let bytes = build_segment(input);
    let mut o = std::fs::OpenOptions::new();
    if input.first {
        o.write(true).create(true).truncate(true);
    } else {
        o.append(true);
    }
    let mut f = o
        .open(&input.path)
        .map_err(|e| StorageError::from_write(&input.path, e))?;
    f.write_all(&bytes)
        .map_err(|e| StorageError::from_write(&input.path, e))?;
    if input.last_of.is_some() {
        f.sync_data()
            .map_err(|e| StorageError::from_write(&input.path, e))?;
    }
    Ok(())
}

/// What a file's segments went through, shared with the builder.
#[derive(Debug, Default)]
struct Shared {
    segments: AtomicU64,
    error: Mutex<Option<String>>,
}

enum Job {
    Segment {
        input: Box<SegmentInput>,
        shared: Arc<Shared>,
        recycle: Sender<Rows>,
    },
    Barrier(SyncSender<()>),
}

/// The store's key index builder: one thread, at a low priority, building
/// and appending segments in the order they come (see the module docs of
/// `keys`). Dropping the last handle ends the thread once its queue is done.
pub struct Builder {
    tx: Mutex<Option<SyncSender<Job>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Segments built.
    pub built: AtomicU64,
    /// Nanoseconds of CPU the thread spent building (its own clock).
    pub cpu_ns: AtomicU64,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("built", &self.built.load(Ordering::Relaxed))
            .finish()
    }
}

impl Builder {
    /// Starts the thread.
    pub fn start() -> std::io::Result<Arc<Builder>> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(BUILD_QUEUE);
        let b = Arc::new(Builder {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(None),
            built: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
        });
        let me = Arc::downgrade(&b);
        let h = std::thread::Builder::new()
            .name("wt-keys".into())
            .spawn(move || run(rx, me))?;
        *b.thread.lock().expect("builder") = Some(h);
        Ok(b)
    }

    fn submit(&self, job: Job, wait: bool) -> Result<(), Job> {
        let tx = self.tx.lock().expect("builder").clone();
        let Some(tx) = tx else { return Err(job) };
        if wait {
            return tx.send(job).map_err(|e| e.0);
        }
        match tx.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(j)) | Err(TrySendError::Disconnected(j)) => Err(j),
        }
    }

    /// Waits for every segment queued so far, then ends the thread.
    pub fn shutdown(&self) {
        self.tx.lock().expect("builder").take();
        if let Some(h) = self.thread.lock().expect("builder").take() {
            let _ = h.join();
        }
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        if let Ok(mut t) = self.tx.lock() {
            t.take();
        }
        // The thread holds no strong handle: it ends with the channel.
    }
}

fn run(rx: Receiver<Job>, me: std::sync::Weak<Builder>) {
    crate::sys::lower_priority();
    while let Ok(job) = rx.recv() {
        match job {
            Job::Segment {
                mut input,
                shared,
                recycle,
            } => {
                let t0 = crate::sys::thread_cpu_ns();
                match write_segment(&input) {
                    Ok(()) => {
                        shared.segments.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        let mut err = shared.error.lock().expect("key index");
                        err.get_or_insert(e.to_string());
                    }
                }
                if let Some(b) = me.upgrade() {
                    b.built.fetch_add(1, Ordering::Relaxed);
                    b.cpu_ns
                        .fetch_add(crate::sys::thread_cpu_ns() - t0, Ordering::Relaxed);
                }
                let mut rows = std::mem::take(&mut input.rows);
                rows.clear();
                let _ = recycle.send(rows);
            }
            Job::Barrier(d) => {
                let _ = d.send(());
            }
        }
    }
}

/// One file's key index on the writer's side: the blocks of the segment
/// being gathered, and the cut (see the module docs of `keys`). Used by
/// [`crate::index::IndexWriter`]; its rows are in the writer's collector.
pub struct KeyWriter {
    path: PathBuf,
    capture: PathBuf,
    builder: Option<Arc<Builder>>,
    wait: bool,
    shared: Arc<Shared>,
    recycle_tx: Sender<Rows>,
    recycle_rx: Receiver<Rows>,
    first: bool,
    block0: u64,
    blocks: Vec<u8>,
    nblocks: u64,
    entry_len: u32,
    linktype: u32,
    idx_pos: u64,
    budget: usize,
    /// Blocks whose segment was dropped (the builder was behind).
    pub dropped_blocks: u64,
    /// Segments handed over (or built here).
    pub segments: u64,
}

impl std::fmt::Debug for KeyWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyWriter")
            .field("path", &self.path)
            .field("block0", &self.block0)
            .field("nblocks", &self.nblocks)
            .finish()
    }
}

impl KeyWriter {
    /// The key index of `capture`, built by `builder` (None: on the calling
    /// thread, at each cut); `wait`: block when the builder's queue is full
    /// instead of dropping the segment.
    pub fn new(
        capture: &Path,
        builder: Option<Arc<Builder>>,
        wait: bool,
        entry_len: u32,
        linktype: u32,
    ) -> KeyWriter {
        let path = path_for(capture);
        let (recycle_tx, recycle_rx) = std::sync::mpsc::channel();
        KeyWriter {
            path,
            capture: capture.to_owned(),
            builder,
            wait,
            shared: Arc::new(Shared::default()),
            recycle_tx,
            recycle_rx,
            first: true,
            block0: 0,
            blocks: Vec::new(),
            nblocks: 0,
            entry_len,
            linktype,
            idx_pos: wiretape_files::index::HEADER_LEN as u64,
            budget: ROWS_BUDGET,
            dropped_blocks: 0,
            segments: 0,
        }
    }

    /// Writes to `path` instead of `<capture>.kdx` (a rebuild's temporary).
    pub fn to_path(mut self, path: PathBuf) -> Self {
        self.path = path;
        self
    }

    /// Cuts segments at `rows` rows (tests, and the rebuild).
    pub fn with_budget(mut self, rows: usize) -> Self {
        self.budget = rows.max(1);
        self
    }

    /// The `.kdx` being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first error of a segment write, if any.
    pub fn error(&self) -> Option<String> {
        self.shared.error.lock().expect("key index").clone()
    }

    /// The `.idx` entry of the next block went out (its fixed part
    /// `fixed`), and the `.idx` is now `idx_len` bytes long. Cuts a segment
    /// when the rows are over budget.
    pub fn entry_written(&mut self, fixed: &[u8], idx_len: u64, col: &mut FlowCollector) {
        self.blocks.extend_from_slice(fixed);
        self.nblocks += 1;
        self.idx_pos = idx_len;
        let over = col.rows().is_some_and(|r| r.len() >= self.budget);
        if over || self.nblocks >= BLOCKS_BUDGET {
            self.cut(col, None);
        }
    }

    /// Hands the segment gathered so far over (`last_of`: the final one,
    /// always waited for: it is cut on the thread closing the file).
    fn cut(&mut self, col: &mut FlowCollector, last_of: Option<PathBuf>) {
        if self.nblocks == 0 && last_of.is_none() {
            return;
        }
        // The collector goes on in a buffer of the builder's (given back
        // emptied), or a new one made as large as the last: no growing
        // (copies and page faults) while frames come.
        let mut rows = self.recycle_rx.try_recv().unwrap_or_else(|_| {
            let cap = col
                .rows()
                .map_or((0, 0), |r| (r.sig.capacity(), r.keys.capacity()));
            Rows {
                sig: Vec::with_capacity(cap.0),
                keys: Vec::with_capacity(cap.1),
            }
        });
        col.take_rows(&mut rows);
        // Rows of blocks not in the segment (entries still on their way)
        // go back to the collector.
        let end = (self.block0 + self.nblocks) as u32;
        col.give_back_rows_from(end, &mut rows);
        let wait = self.wait || last_of.is_some();
        let mut input = Box::new(SegmentInput {
            path: self.path.clone(),
            first: self.first,
            block0: self.block0,
            blocks: std::mem::take(&mut self.blocks),
            entry_len: self.entry_len,
            rows,
            idx_next: self.idx_pos,
            last_of,
            linktype: self.linktype,
        });
        let nblocks = self.nblocks;
        self.block0 += self.nblocks;
        self.nblocks = 0;
        let Some(b) = &self.builder else {
            // No builder: here and now (a rebuild, or a writer used alone).
            if let Err(e) = write_segment(&input) {
                self.note_error(e);
            }
            self.first = false;
            self.segments += 1;
            self.recycle(&mut input);
            return;
        };
        let job = Job::Segment {
            input,
            shared: self.shared.clone(),
            recycle: self.recycle_tx.clone(),
        };
        match b.submit(job, wait) {
            Ok(()) => {
                self.first = false;
                self.segments += 1;
            }
            // The builder is behind: this segment's blocks go unindexed.
            Err(Job::Segment { mut input, .. }) => {
                self.dropped_blocks += nblocks;
                self.recycle(&mut input);
            }
            Err(Job::Barrier(_)) => {}
        }
    }

    fn recycle(&self, input: &mut SegmentInput) {
        let mut r = std::mem::take(&mut input.rows);
        r.clear();
        let _ = self.recycle_tx.send(r);
    }

    fn note_error(&self, e: StorageError) {
        self.shared
            .error
            .lock()
            .expect("key index")
            .get_or_insert(e.to_string());
    }

    /// The file is finished: its last segment, waited for.
    pub fn finish(mut self, col: &mut FlowCollector) -> Result<KeyReport, StorageError> {
        let capture = self.capture.clone();
        self.cut(col, Some(capture));
        self.wait_done();
        let report = KeyReport {
            segments: self.segments,
            dropped_blocks: self.dropped_blocks,
        };
        match self.error() {
            Some(e) => Err(StorageError::Write {
                path: self.path.clone(),
                source: std::io::Error::other(e),
            }),
            None => Ok(report),
        }
    }

    /// Waits until the builder is done with this file's segments (those
    /// handed over so far).
    pub fn wait_done(&self) {
        if let Some(b) = &self.builder {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            if b.submit(Job::Barrier(tx), true).is_ok() {
                let _ = rx.recv();
            }
        }
    }
}

/// What a file's key index came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyReport {
    /// Segments written.
    pub segments: u64,
    /// Blocks left out (the builder was behind when their segment was due).
    pub dropped_blocks: u64,
}

/// Writes the key index of `capture` from its rows as `walk` meets them:
/// used by [`crate::index::rebuild_with`], which walks the file once for
/// both indexes, into a temporary beside `kdx` (where the caller renames
/// it). Returns the writer to feed (entry by entry) and finish.
pub fn rebuild_file(capture: &Path, kdx: &Path, entry_len: u32, linktype: u32) -> KeyWriter {
    let tmp = {
        let mut p = kdx.as_os_str().to_owned();
        p.push(".tmp");
        PathBuf::from(p)
    };
    KeyWriter::new(capture, None, true, entry_len, linktype).to_path(tmp)
}
