//! Reading a capture file for a query: [`RampReader`], a buffer that
//! starts small after every seek and grows (a narrow window reads little, a
//! long scan reads big chunks), O_DIRECT where the filesystem takes it, and
//! the next chunk read ahead on a helper thread during long scans. The
//! extraction merge (`wiretape-query`) reads every file through one, under
//! the record walker ([`crate::walk::Walker`]).
//!
//! A plan of many short runs (the key index's: one per few frames) would
//! wait for the disk once per run, one run at a time. Given the runs
//! ([`RampReader::prefetch`]), a reader asks a query's [`ReadPool`] of
//! reader threads for the next runs' bytes ahead, many at once, while the
//! walker parses the current run: the disk then serves them in parallel
//! and such a query is bound by its throughput, not its latency.

use crate::aligned::{AlignedBuf, ALIGN};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

/// Bytes a reader reads at most at once (its buffer's size).
pub const READ_BUFFER: usize = 1 << 20;
/// Bytes of a reader's first read after a seek; each further read doubles
/// it up to [`READ_BUFFER`] (a narrow window reads little).
const FIRST_READ: usize = 64 << 10;
/// Bytes of the first read of a file: its header (and, read whole, the
/// first records).
const HEAD_READ: usize = 4 << 10;
/// Reads a file stream has asked for ahead at most ([`RampReader::prefetch`]).
pub const PREFETCH_RUNS: usize = 32;
/// Bytes a file stream has asked for ahead at most (a run reads at most
/// [`READ_BUFFER`] ahead; the rest of a longer one the usual way).
pub const PREFETCH_STREAM_BYTES: usize = 8 << 20;
/// Bytes all the file streams of one query have asked for ahead at most
/// (one [`ReadPool`]); a stream over it reads its runs when it gets there.
pub const PREFETCH_QUERY_BYTES: usize = 32 << 20;
/// Reader threads of a query's [`ReadPool`] (started at its first read).
pub const PREFETCH_THREADS: usize = 8;

/// A file read through a buffer that starts small after every seek and
/// doubles up to [`READ_BUFFER`]; counts the bytes it reads. A finished
/// file is read with O_DIRECT where the filesystem takes it (aligned reads
/// into a page-aligned buffer): a scan of a store larger than RAM then runs
/// at the disk's speed without the page cache's cost (filling, copying and
/// evicting pages was most of a cold scan's CPU); a file being written, or
/// one O_DIRECT refuses, is read through the page cache.
pub struct RampReader {
    file: File,
    direct: Option<std::sync::Arc<File>>,
    /// For a long sequential O_DIRECT read: the next chunk, read meanwhile.
    ahead: Option<ReadAhead>,
    /// For a plan of many runs: the next runs, read meanwhile.
    prefetch: Option<Prefetch>,
    buf: AlignedBuf,
    /// The full-size buffer, while `buf` is a run read ahead.
    big: Option<AlignedBuf>,
    /// Unread bytes: `buf[pos..len]`.
    pos: usize,
    len: usize,
    next_fill: usize,
    /// File offset of `buf[0]`.
    at: u64,
    read: u64,
    /// Reads served by reads ahead ([`RampReader::prefetch`]).
    reads_ahead: u64,
    /// Where the run the walk reads ends ([`RampReader::hint_to`]): a read
    /// that starts at or past it reads the rest of the run's last record
    /// only (what the walk asks for, in whole pages).
    run_end: Option<u64>,
    /// The file's first page is in the page cache (the caller read the
    /// file's first bytes to know its format): the head is read through
    /// it, not from the disk again.
    head_cached: bool,
    /// The file's first bytes, kept by the caller ([`RampReader::set_head`]):
    /// the head is taken from there, not read.
    head: Option<Arc<[u8]>>,
    /// Every read of the file (offset, bytes, from the disk: O_DIRECT),
    /// for the tests.
    #[cfg(test)]
    log: Log,
}

/// The reads of a file (offset, bytes, O_DIRECT), for the tests.
#[cfg(test)]
type Log = Arc<Mutex<Vec<(u64, usize, bool)>>>;

impl RampReader {
    /// Opens `path` for reading, and says whether a writer holds it
    /// ([`crate::is_being_written`]). A finished file is read with O_DIRECT
    /// too where the filesystem takes it; a file being written through the
    /// page cache (its last pages still change).
    pub fn open(path: &Path) -> std::io::Result<(Self, bool)> {
        Self::open_direct(File::open(path)?, path)
    }

    /// [`RampReader::open`] of `file`, opened at `path` by a caller who has
    /// just read its first bytes through the page cache (to know what the
    /// file is: [`crate::zread::open_layers`], which also told the kernel
    /// not to read ahead around them): its head is read from there, not
    /// from the disk a second time (with O_DIRECT it would be), and the
    /// file is not opened again for it.
    pub fn open_read_head(file: File, path: &Path) -> std::io::Result<(Self, bool)> {
        let (mut r, live) = Self::open_direct(file, path)?;
        if r.direct.is_none() {
            // Read through the page cache: in order, as a fresh one is.
            crate::sys::advise_normal(&r.file);
        }
        r.head_cached = true;
        Ok((r, live))
    }

    fn open_direct(file: File, path: &Path) -> std::io::Result<(Self, bool)> {
        use std::os::unix::fs::OpenOptionsExt;
        let live = crate::sys::is_being_written(&file);
        let direct = if live {
            None
        } else {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
                .open(path)
                .ok()
        };
        Ok((Self::new(file, direct), live))
    }

    /// A reader of `file`, through `direct` (the same file opened with
    /// O_DIRECT) where given and the filesystem takes it.
    pub fn new(file: File, direct: Option<File>) -> Self {
        RampReader {
            file,
            direct: direct.map(std::sync::Arc::new),
            ahead: None,
            prefetch: None,
            buf: AlignedBuf::lazy(READ_BUFFER + ALIGN),
            big: None,
            pos: 0,
            len: 0,
            next_fill: HEAD_READ,
            at: 0,
            read: 0,
            reads_ahead: 0,
            run_end: None,
            head_cached: false,
            head: None,
            #[cfg(test)]
            log: Log::default(),
        }
    }

    /// The file's first `head.len()` bytes, as the caller has them (a
    /// server keeps the heads of the files it read: [`crate::kept`]): the
    /// first read of the file, at its start, takes them instead of reading.
    pub(crate) fn set_head(&mut self, head: Arc<[u8]>) {
        self.head = Some(head);
    }

    /// The file (for its lock: [`crate::is_being_written`]).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Bytes read from the file so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// Reads served by a read asked for ahead ([`RampReader::prefetch`]).
    pub fn reads_ahead(&self) -> u64 {
        self.reads_ahead
    }

    /// The next reads (from where a seek put the reader, or where it is)
    /// are the records of a run the query wants, up to the record that
    /// starts at `end` or after it (which the walk does not read:
    /// [`crate::walk::Walker::next_at`]). The next read is then the pages
    /// from here to `end`, and a read that starts at `end` or past it (the
    /// run's last record goes on past `end`) reads what the walk asks for,
    /// in whole pages: a selective query reads the pages of its frames and
    /// no other, instead of the usual 64 KiB first read. Reads after those
    /// double as usual.
    pub fn hint_to(&mut self, end: u64) {
        let here = self.at + self.pos as u64;
        self.run_end = Some(end);
        self.next_fill = (end.saturating_sub(here) as usize).clamp(1, READ_BUFFER);
    }

    /// The file's next reads are the runs `runs` (start, end), in file
    /// order: their bytes are asked of `pool` ahead, up to
    /// [`PREFETCH_RUNS`] and [`PREFETCH_STREAM_BYTES`] at a time (and the
    /// pool's [`PREFETCH_QUERY_BYTES`]), each run from its page's start to
    /// its end's page end, nothing past it (the record at a run's end is
    /// not read: [`crate::walk::Walker::next_at`]; runs sharing a page in
    /// one read of up to [`READ_BUFFER`]). Only with O_DIRECT (a file read through the
    /// page cache, or being written, reads as usual) and for two runs or
    /// more. A read that reaches a run not read ahead reads it itself.
    pub fn prefetch(&mut self, pool: &ReadPool, runs: impl IntoIterator<Item = (u64, u64)>) {
        self.prefetch_at_least(pool, runs, 2)
    }

    /// [`RampReader::prefetch`] of a file the query reaches later, asked
    /// for with every other such file's at the query's start (a selective
    /// query over many files: [`ReadPool`] reads them all at once instead
    /// of one file after the other as the merge reaches each): a single
    /// read is asked for too.
    pub fn prefetch_early(&mut self, pool: &ReadPool, runs: impl IntoIterator<Item = (u64, u64)>) {
        self.prefetch_at_least(pool, runs, 1)
    }

    /// Whether reads are asked for ahead ([`RampReader::prefetch`]).
    pub fn prefetching(&self) -> bool {
        self.prefetch.is_some()
    }

    /// [`RampReader::prefetch`], when the runs make `min` reads or more.
    fn prefetch_at_least(
        &mut self,
        pool: &ReadPool,
        runs: impl IntoIterator<Item = (u64, u64)>,
        min: usize,
    ) {
        let Some(file) = self.direct.clone() else {
            return;
        };
        let a = ALIGN as u64;
        // Bytes in the buffer already (the head, read with the file's
        // format): not read again. Whole pages only (O_DIRECT reads start
        // at a page).
        let have = (self.at, self.at + self.len as u64);
        let have = if have.1.is_multiple_of(a) {
            have
        } else {
            (0, 0)
        };
        let mut todo: VecDeque<(u64, usize)> = VecDeque::new();
        for (start, end) in runs {
            let mut lo = start / a * a;
            let hi = end.div_ceil(a) * a;
            let hi = hi.min(lo + READ_BUFFER as u64);
            if lo >= have.0 && lo < have.1 {
                lo = have.1;
            }
            if let Some(last) = todo.back_mut() {
                let last_end = last.0 + last.1 as u64;
                if lo <= last_end && hi - last.0 <= READ_BUFFER as u64 {
                    last.1 = (hi.max(last_end) - last.0) as usize;
                    continue;
                }
                lo = lo.max(last_end);
            }
            if hi > lo {
                todo.push_back((lo, (hi - lo) as usize));
            }
        }
        if todo.len() < min.max(1) {
            return;
        }
        self.prefetch = None;
        let (done_tx, done_rx) = mpsc::channel();
        let mut p = Prefetch {
            pool: pool.clone(),
            file,
            todo,
            asked: VecDeque::new(),
            bytes: 0,
            next_id: 0,
            done_tx,
            done_rx,
            cancel: Arc::new(AtomicBool::new(false)),
            #[cfg(test)]
            log: self.log.clone(),
        };
        p.top_up();
        self.prefetch = Some(p);
    }

    /// Ends reading ahead: reads not started are dropped, those under way
    /// waited for (none is left behind) and their bytes counted in
    /// [`RampReader::bytes_read`]. Dropping the reader does the same.
    pub fn settle(&mut self) {
        if let Some(mut p) = self.prefetch.take() {
            self.read += p.settle();
        }
    }

    /// Refills the buffer with the bytes from file offset `cur` on; the
    /// caller asks for `need` of them.
    fn fill(&mut self, cur: u64, need: usize) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut want = self.next_fill;
        if self.run_end.is_some_and(|e| cur >= e) {
            // The run's last record goes on past the run's end: its rest.
            self.run_end = None;
            want = need.clamp(1, READ_BUFFER);
        }
        self.next_fill = (want.div_ceil(ALIGN) * ALIGN * 2).min(READ_BUFFER);
        // The head, as the caller has it: nothing read.
        if let Some(h) = self
            .head
            .take()
            .filter(|h| cur == 0 && self.read == 0 && !h.is_empty())
        {
            self.head_cached = false;
            if self.buf.len() < h.len() {
                self.buf = self
                    .big
                    .take()
                    .unwrap_or_else(|| AlignedBuf::lazy(READ_BUFFER + ALIGN));
            }
            self.buf.as_mut_slice()[..h.len()].copy_from_slice(&h);
            self.at = 0;
            self.pos = 0;
            self.len = h.len();
            self.read += h.len() as u64;
            return Ok(());
        }
        // The head, where the caller's look at it left it: the page cache.
        let head = std::mem::take(&mut self.head_cached) && cur == 0 && self.read == 0;
        if let Some(p) = self.prefetch.as_mut().filter(|_| !head) {
            let (wasted, got) = p.take(cur);
            self.read += wasted;
            match got {
                Some((at, b, Ok(got))) => {
                    let old = std::mem::replace(&mut self.buf, b);
                    if old.len() >= READ_BUFFER + ALIGN {
                        self.big = Some(old);
                    }
                    self.at = at;
                    self.len = got;
                    self.pos = ((cur - at) as usize).min(got);
                    self.read += (got - self.pos) as u64;
                    self.reads_ahead += 1;
                    return Ok(());
                }
                // The filesystem does not take O_DIRECT after all: below.
                Some((_, _, Err(e))) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Some((_, _, Err(e))) => return Err(e),
                None => {}
            }
        }
        if self.buf.len() < READ_BUFFER + ALIGN {
            self.buf = self
                .big
                .take()
                .unwrap_or_else(|| AlignedBuf::lazy(READ_BUFFER + ALIGN));
        }
        if let Some(d) = self.direct.clone().filter(|_| !head) {
            let start = cur / ALIGN as u64 * ALIGN as u64;
            let skip = (cur - start) as usize;
            let n = (skip + want).div_ceil(ALIGN) * ALIGN;
            let r = match self.ahead.as_mut().and_then(|a| a.take(start)) {
                // Read meanwhile: swap it in, keep ours as the spare.
                Some((b, r)) => {
                    let old = std::mem::replace(&mut self.buf, b);
                    if let Some(a) = self.ahead.as_mut() {
                        a.spare = Some(old);
                    }
                    r
                }
                None => d.read_at(&mut self.buf.as_mut_slice()[..n], start),
            };
            match r {
                Ok(got) => {
                    #[cfg(test)]
                    self.log.lock().unwrap().push((start, got, true));
                    self.at = start;
                    self.len = got;
                    self.pos = skip.min(got);
                    self.read += (got - self.pos) as u64;
                    // Reading on at full size, and not at the end: ask for
                    // the next chunk now.
                    if want == READ_BUFFER && got >= n {
                        if self.ahead.is_none() {
                            self.ahead = ReadAhead::start(d).ok();
                        }
                        if let Some(a) = self.ahead.as_mut() {
                            a.ask(start + got as u64, READ_BUFFER);
                        }
                    }
                    return Ok(());
                }
                // The filesystem does not take it after all: the page cache.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    self.direct = None;
                    self.ahead = None;
                    self.settle();
                }
                Err(e) => return Err(e),
            }
        }
        // Through the page cache: to the end of the page `want` ends in.
        let skip = (cur % ALIGN as u64) as usize;
        let n = ((skip + want).div_ceil(ALIGN) * ALIGN - skip).min(READ_BUFFER);
        let got = self.file.read_at(&mut self.buf.as_mut_slice()[..n], cur)?;
        #[cfg(test)]
        self.log.lock().unwrap().push((cur, got, false));
        self.at = cur;
        self.pos = 0;
        self.len = got;
        self.read += got as u64;
        Ok(())
    }
}

/// A thread that reads the next chunk of a sequential O_DIRECT read while
/// the current one is parsed, so that the disk and the CPU work at once (per
/// chunk of [`READ_BUFFER`]; nothing per frame). The buffers go back and
/// forth through channels: one is read into while the other is parsed.
struct ReadAhead {
    tx: std::sync::mpsc::Sender<(AlignedBuf, u64, usize)>,
    rx: std::sync::mpsc::Receiver<(AlignedBuf, u64, std::io::Result<usize>)>,
    /// File offset of the chunk being read, if one is.
    pending: Option<u64>,
    spare: Option<AlignedBuf>,
}

impl ReadAhead {
    fn start(file: std::sync::Arc<File>) -> std::io::Result<ReadAhead> {
        use std::os::unix::fs::FileExt;
        let (tx, work) = std::sync::mpsc::channel::<(AlignedBuf, u64, usize)>();
        let (done, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("wt-readahead".into())
            .spawn(move || {
                // Ends when the reader drops its sender.
                while let Ok((mut b, at, n)) = work.recv() {
                    let r = file.read_at(&mut b.as_mut_slice()[..n], at);
                    if done.send((b, at, r)).is_err() {
                        break;
                    }
                }
            })?;
        Ok(ReadAhead {
            tx,
            rx,
            pending: None,
            spare: Some(AlignedBuf::lazy(READ_BUFFER + ALIGN)),
        })
    }

    /// Starts reading `n` bytes at `at` (if no read is pending).
    fn ask(&mut self, at: u64, n: usize) {
        if self.pending.is_some() {
            return;
        }
        if let Some(b) = self.spare.take() {
            if self.tx.send((b, at, n)).is_ok() {
                self.pending = Some(at);
            }
        }
    }

    /// The chunk read at `at`, if that is the one asked for; another one is
    /// waited for and put aside (its buffer becomes the spare).
    fn take(&mut self, at: u64) -> Option<(AlignedBuf, std::io::Result<usize>)> {
        self.pending.take()?;
        let (b, got_at, r) = self.rx.recv().ok()?;
        if got_at == at {
            Some((b, r))
        } else {
            self.spare = Some(b);
            None
        }
    }
}

/// A query's reader threads, shared by its file streams
/// ([`RampReader::prefetch`]): up to [`PREFETCH_THREADS`] threads, one more
/// started when a read is asked for while none started waits (a query of a
/// few short runs starts one or two), reading runs ahead for every stream,
/// and a bound
/// on the bytes asked for by all of them ([`PREFETCH_QUERY_BYTES`]). The
/// threads end when the pool and every reader given it are dropped: the
/// last handle dropped (a caller's, never a worker's: no job holds the
/// pool) joins them and returns once the kernel no longer lists them.
#[derive(Clone)]
pub struct ReadPool {
    inner: Arc<Pool>,
}

struct Pool {
    threads: usize,
    /// The job queue and the threads, once started.
    work: Mutex<Option<Workers>>,
    /// Bytes asked for and not yet taken back by the streams.
    held: AtomicUsize,
    /// Jobs queued and not yet taken by a thread, and threads started and
    /// not reading: a job queued while none waits starts one more thread
    /// (up to `threads`), so that a query of a few runs starts a few.
    queued: Arc<AtomicUsize>,
    idle: Arc<AtomicUsize>,
}

/// The job queue of a pool's threads, its receiving end (each thread
/// started takes a clone), and the threads (each ends with its entry in
/// /proc: see [`Pool`]'s drop).
type Workers = (
    mpsc::Sender<Job>,
    Arc<Mutex<mpsc::Receiver<Job>>>,
    Vec<std::thread::JoinHandle<Option<std::path::PathBuf>>>,
);

/// A run to read ahead.
struct Job {
    file: Arc<File>,
    at: u64,
    buf: AlignedBuf,
    id: u64,
    /// Set when the stream no longer wants it (dropped or settled).
    cancel: Arc<AtomicBool>,
    done: mpsc::Sender<Done>,
}

/// A run read (or not: cancelled before it started).
struct Done {
    id: u64,
    buf: AlignedBuf,
    r: Option<std::io::Result<usize>>,
}

impl Default for ReadPool {
    fn default() -> Self {
        Self::new()
    }
}

impl ReadPool {
    /// A pool of [`PREFETCH_THREADS`] threads (none started yet).
    pub fn new() -> Self {
        Self::with_threads(PREFETCH_THREADS)
    }

    /// A pool of `threads` threads (at least one; none started yet).
    pub fn with_threads(threads: usize) -> Self {
        ReadPool {
            inner: Arc::new(Pool {
                threads: threads.max(1),
                work: Mutex::new(None),
                held: AtomicUsize::new(0),
                queued: Arc::new(AtomicUsize::new(0)),
                idle: Arc::new(AtomicUsize::new(0)),
            }),
        }
    }

    /// Bytes asked for ahead now, by all the pool's streams.
    pub fn held(&self) -> usize {
        self.inner.held.load(Ordering::Relaxed)
    }

    /// Takes `n` bytes of the query's bound, if there is room.
    fn reserve(&self, n: usize) -> bool {
        self.inner
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                (h + n <= PREFETCH_QUERY_BYTES).then_some(h + n)
            })
            .is_ok()
    }

    fn release(&self, n: usize) {
        self.inner.held.fetch_sub(n, Ordering::AcqRel);
    }

    /// Queues `job`, starting one more thread when no thread started waits
    /// for it (up to the pool's `threads`); gives it back if none runs and
    /// none can be started.
    fn submit(&self, job: Job) -> Result<(), Job> {
        let pool = &*self.inner;
        let mut work = pool.work.lock().unwrap_or_else(|e| e.into_inner());
        let (tx, rx, handles) = work.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            (tx, Arc::new(Mutex::new(rx)), Vec::new())
        });
        let queued = pool.queued.fetch_add(1, Ordering::AcqRel) + 1;
        if handles.len() < pool.threads && queued > pool.idle.load(Ordering::Acquire) {
            let k = handles.len();
            let (rx, queued, idle) = (rx.clone(), pool.queued.clone(), pool.idle.clone());
            // Waiting from its start: counted idle before it runs.
            pool.idle.fetch_add(1, Ordering::AcqRel);
            let h = std::thread::Builder::new()
                .name(format!("wt-prefetch-{k}"))
                .spawn(move || {
                    // Where the kernel lists this thread (PID/task/TID).
                    let task = std::fs::read_link("/proc/thread-self")
                        .ok()
                        .map(|l| Path::new("/proc").join(l));
                    worker(&rx, &queued, &idle);
                    task
                });
            match h {
                Ok(h) => handles.push(h),
                Err(_) => {
                    pool.idle.fetch_sub(1, Ordering::AcqRel);
                    if handles.is_empty() {
                        pool.queued.fetch_sub(1, Ordering::AcqRel);
                        return Err(job);
                    }
                }
            }
        }
        tx.send(job).map_err(|e| {
            pool.queued.fetch_sub(1, Ordering::AcqRel);
            e.0
        })
    }
}

/// A reader thread: reads the jobs queued until the pool is dropped
/// (`queued` and `idle`: see [`Pool`]).
fn worker(jobs: &Mutex<mpsc::Receiver<Job>>, queued: &AtomicUsize, idle: &AtomicUsize) {
    use std::os::unix::fs::FileExt;
    loop {
        let job = match jobs.lock().unwrap_or_else(|e| e.into_inner()).recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        queued.fetch_sub(1, Ordering::AcqRel);
        idle.fetch_sub(1, Ordering::AcqRel);
        let Job {
            file,
            at,
            mut buf,
            id,
            cancel,
            done,
        } = job;
        let r = (!cancel.load(Ordering::Acquire)).then(|| file.read_at(buf.as_mut_slice(), at));
        // The stream may be gone (it waits only for reads under way).
        let _ = done.send(Done { id, buf, r });
        idle.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let work = self
            .work
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((tx, rx, handles)) = work {
            drop((tx, rx));
            for h in handles {
                // Joined, a thread may still be listed a moment (the kernel
                // wakes the joiner before it reaps the thread): wait until
                // it is gone, so that none outlives the pool (at most 1 s;
                // microseconds, even on a loaded machine).
                if let Ok(Some(task)) = h.join() {
                    let t0 = std::time::Instant::now();
                    while task.exists() && t0.elapsed() < std::time::Duration::from_secs(1) {
                        std::thread::sleep(std::time::Duration::from_micros(50));
                    }
                }
            }
        }
    }
}

/// A stream's runs read ahead ([`RampReader::prefetch`]).
struct Prefetch {
    pool: ReadPool,
    file: Arc<File>,
    /// Reads not asked for yet (offset, length), in file order.
    todo: VecDeque<(u64, usize)>,
    /// Reads asked for, in file order, and what came back so far.
    asked: VecDeque<Asked>,
    /// Bytes of `asked` (held in the pool's bound).
    bytes: usize,
    next_id: u64,
    done_tx: mpsc::Sender<Done>,
    done_rx: mpsc::Receiver<Done>,
    cancel: Arc<AtomicBool>,
    #[cfg(test)]
    log: Log,
}

struct Asked {
    id: u64,
    at: u64,
    n: usize,
    got: Option<(AlignedBuf, Option<std::io::Result<usize>>)>,
}

impl Prefetch {
    /// Asks for reads until the stream's or the query's bound.
    fn top_up(&mut self) {
        while self.asked.len() < PREFETCH_RUNS {
            let Some(&(at, n)) = self.todo.front() else {
                return;
            };
            if self.bytes + n > PREFETCH_STREAM_BYTES || !self.pool.reserve(n) {
                return;
            }
            self.todo.pop_front();
            let id = self.next_id;
            self.next_id += 1;
            let job = Job {
                file: self.file.clone(),
                at,
                buf: AlignedBuf::new(n),
                id,
                cancel: self.cancel.clone(),
                done: self.done_tx.clone(),
            };
            if self.pool.submit(job).is_err() {
                // No thread: the stream reads its runs itself.
                self.pool.release(n);
                self.todo.clear();
                return;
            }
            self.bytes += n;
            self.asked.push_back(Asked {
                id,
                at,
                n,
                got: None,
            });
        }
    }

    /// Waits until the read at the front of `asked` came back.
    fn wait_front(&mut self) {
        while self.asked.front().is_some_and(|a| a.got.is_none()) {
            let Ok(d) = self.done_rx.recv() else {
                return;
            };
            if let Some(a) = self.asked.iter_mut().find(|a| a.id == d.id) {
                a.got = Some((d.buf, d.r));
            }
        }
    }

    /// Pops the front read; its bytes read (0 if it was not).
    fn pop(&mut self) -> Option<(u64, AlignedBuf, Option<std::io::Result<usize>>)> {
        self.wait_front();
        let a = self.asked.pop_front()?;
        self.bytes -= a.n;
        self.pool.release(a.n);
        let (b, r) = a.got.unwrap_or_else(|| (AlignedBuf::new(ALIGN), None));
        #[cfg(test)]
        if let Some(Ok(got)) = &r {
            self.log.lock().unwrap().push((a.at, *got, true));
        }
        Some((a.at, b, r))
    }

    /// The read holding file offset `cur`, if one was asked for: waited
    /// for. Reads wholly before `cur` (never used: the walk went past them)
    /// are dropped; the bytes they read come first.
    #[allow(clippy::type_complexity)]
    fn take(&mut self, cur: u64) -> (u64, Option<(u64, AlignedBuf, std::io::Result<usize>)>) {
        let mut wasted = 0;
        while self
            .todo
            .front()
            .is_some_and(|&(at, n)| at + n as u64 <= cur)
        {
            self.todo.pop_front();
        }
        while self.asked.front().is_some_and(|a| a.at + a.n as u64 <= cur) {
            if let Some((_, _, Some(Ok(got)))) = self.pop() {
                wasted += got as u64;
            }
        }
        let found = self.asked.front().is_some_and(|a| a.at <= cur);
        let got = if found {
            match self.pop() {
                Some((at, b, Some(r))) => Some((at, b, r)),
                _ => None,
            }
        } else {
            None
        };
        self.top_up();
        (wasted, got)
    }

    /// Cancels what was not started and waits for the rest; the bytes read.
    fn settle(&mut self) -> u64 {
        self.cancel.store(true, Ordering::Release);
        self.todo.clear();
        let mut read = 0;
        while let Some((_, _, r)) = self.pop() {
            if let Some(Ok(got)) = r {
                read += got as u64;
            }
        }
        read
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        self.settle();
    }
}

impl Read for RampReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.len {
            self.fill(self.at + self.len as u64, out.len())?;
            if self.pos == self.len {
                return Ok(0);
            }
        }
        let k = out.len().min(self.len - self.pos);
        out[..k].copy_from_slice(&self.buf.as_slice()[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

impl Seek for RampReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let SeekFrom::Start(to) = to else {
            return Err(std::io::Error::other("only absolute seeks"));
        };
        self.run_end = None;
        // Within the buffer: no system call.
        if to >= self.at && to <= self.at + self.len as u64 {
            self.pos = (to - self.at) as usize;
            return Ok(to);
        }
        self.at = to;
        self.pos = 0;
        self.len = 0;
        self.next_fill = FIRST_READ;
        Ok(to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of the test's own, removed when dropped.
    struct Dir(std::path::PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            Dir(d)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Block `b` (from 0) of a Stenographer file of 64 KiB blocks: `per`
    /// frames of 60 to 59 + `spread` bytes, 1 µs apart, each's bytes its
    /// own.
    fn steno_block(b: u64, per: u64, spread: u64) -> Vec<u8> {
        let fr: Vec<(u64, Vec<u8>)> = (0..per)
            .map(|i| {
                let n = 60 + ((b * per + i) * 7919 % spread) as usize;
                let ts = 1_795_813_946_000_000_000 + (b * per + i) * 1000;
                (ts, (0..n).map(|k| (k as u64 * 31 + b + i) as u8).collect())
            })
            .collect();
        let refs: Vec<(u64, &[u8])> = fr.iter().map(|(t, d)| (*t, d.as_slice())).collect();
        crate::steno::encode_block(&refs, 64 << 10, 1 + b)
    }

    /// Threads of this process named like the pool's.
    fn prefetch_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|c| c.starts_with("wt-prefetch"))
            .count()
    }

    /// Runs read ahead give the file's very bytes (runs that touch, share a
    /// page, cross the read ahead's end, or are skipped); a reader dropped
    /// with reads asked for leaves no read and, with its pool, no thread.
    #[test]
    fn runs_read_ahead_are_the_files_bytes_and_nothing_is_left_behind() {
        let dir = Dir::new("wt-ramp");
        let path = dir.0.join("f.bin");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..5_000_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        // 400 runs: gaps of 0 (touching) to 12 KiB, lengths 1 B to 9 KiB.
        let mut runs = Vec::new();
        let mut at = 100u64;
        for k in 0..400u64 {
            let len = 1 + (k * 7919 % 9000);
            runs.push((at, at + len));
            at += len + (k * 104_729 % 12_000) * u64::from(k % 5 != 0);
        }
        assert!(at < bytes.len() as u64);
        let pool = ReadPool::with_threads(4);
        let (mut r, live) = RampReader::open(&path).unwrap();
        assert!(!live);
        r.prefetch(&pool, runs.iter().copied());
        let mut got = Vec::new();
        for (k, &(a, b)) in runs.iter().enumerate() {
            // Every 7th run skipped: its read ahead is never used.
            if k % 7 == 3 {
                continue;
            }
            // Every 11th read on 5000 bytes past its end (past the read ahead).
            let n = (b - a + if k % 11 == 0 { 5000 } else { 0 }) as usize;
            r.seek(SeekFrom::Start(a)).unwrap();
            r.hint_to(b);
            got.resize(n, 0);
            r.read_exact(&mut got).unwrap();
            assert!(got == bytes[a as usize..a as usize + n], "run {k} at {a}");
        }
        // Runs a page or two apart share one read ahead.
        assert!(r.reads_ahead() >= 50, "{} reads ahead", r.reads_ahead());
        r.settle();
        assert_eq!(pool.held(), 0);
        let used: u64 = runs.iter().map(|&(a, b)| b - a).sum();
        assert!(
            r.bytes_read() >= used * 6 / 7,
            "{} bytes read",
            r.bytes_read()
        );
        drop(r);
        // Stopped early: two runs read of 400, the reader dropped.
        let (mut r, _) = RampReader::open(&path).unwrap();
        r.prefetch(&pool, runs.iter().copied());
        for &(a, b) in &runs[..2] {
            r.seek(SeekFrom::Start(a)).unwrap();
            got.resize((b - a) as usize, 0);
            r.read_exact(&mut got).unwrap();
            assert!(got == bytes[a as usize..b as usize]);
        }
        assert!(pool.held() > 0, "reads asked for ahead");
        assert!(prefetch_threads() > 0);
        drop(r);
        assert_eq!(pool.held(), 0);
        drop(pool);
        assert_eq!(prefetch_threads(), 0, "threads left behind");
    }

    /// A plan's runs over stenotype's file, read as the extraction merge
    /// reads them (runs read ahead, a seek and a hint per run, the walk
    /// stopping at each run's end): the frames are the file's; every page
    /// read holds a byte of a frame a run wants (or is the head, page 0),
    /// and no page is read twice: neighbouring runs share a read, a run's
    /// last frame that goes on past its end costs the pages it goes on
    /// into and no more, and the head is read once (its first bytes, read
    /// to know the file's format, come from the page cache).
    #[test]
    fn a_plans_reads_touch_each_page_of_its_frames_once_and_no_other() {
        use crate::steno::TP_MAC;
        use crate::walk::Walker;
        use crate::zread::Source;
        let dir = Dir::new("wt-ramp-plan");
        let path = dir.0.join("1795813946878311");
        // 6 blocks of 64 KiB, frames of 60 to 1,559 bytes (some cross pages).
        let bytes: Vec<u8> = (0..6).flat_map(|b| steno_block(b, 40, 1500)).collect();
        std::fs::write(&path, &bytes).unwrap();
        // Every frame: its offset and bytes.
        let mut all = Vec::new();
        let mut w = Walker::new(std::io::Cursor::new(&bytes));
        let mut d = Vec::new();
        while let Some(m) = w.next_into(&mut d) {
            all.push((m.offset, d.clone()));
        }
        assert_eq!(all.len(), 240);
        // The plan: runs (first frame, last frame) as the key index's
        // places give them (a run ends one byte into its last frame): lone
        // frames, neighbours, runs that touch, a frame in the head's page.
        let picks: Vec<(usize, usize)> = vec![
            (1, 1),
            (9, 9),
            (10, 12),
            (13, 13),
            (30, 30),
            (31, 31),
            (47, 47),
            (60, 64),
            (90, 90),
            (133, 133),
            (134, 134),
            (170, 170),
            (201, 203),
            (239, 239),
        ];
        let runs: Vec<(u64, u64)> = picks
            .iter()
            .map(|&(f, l)| (all[f].0, all[l].0 + 1))
            .collect();
        let want: Vec<(u64, Vec<u8>)> = picks
            .iter()
            .flat_map(|&(f, l)| all[f..=l].iter().cloned())
            .collect();
        // The pages the wanted frames' bytes lie in (header to data end).
        let page = |o: u64| o / ALIGN as u64;
        let mut needed = std::collections::BTreeSet::from([0]);
        for (o, d) in &want {
            needed.extend(page(*o)..=page(o + u64::from(TP_MAC) + d.len() as u64 - 1));
        }
        let pool = ReadPool::with_threads(4);
        for ahead in [true, false] {
            let (src, live) = Source::open_query(&path, &crate::ReadOptions::default()).unwrap();
            assert!(!live);
            let log = match &src {
                Source::Plain(r) => r.log.clone(),
                _ => unreachable!("a plain file"),
            };
            let mut w = Walker::new(src);
            if ahead {
                w.get_mut().prefetch(&pool, runs.iter().copied());
            }
            let mut got = Vec::new();
            for &(start, end) in &runs {
                if start > w.next_at() {
                    w.seek_to(start);
                }
                w.get_mut().hint_to(end);
                while w.next_at() < end {
                    let m = w.next_into(&mut d).expect("a frame");
                    got.push((m.offset, d.clone()));
                }
            }
            w.get_mut().settle();
            assert!(got == want, "read ahead {ahead}: other frames");
            let reads = log.lock().unwrap().clone();
            let mut seen = std::collections::BTreeSet::new();
            // The head: from the page cache, where the look at the file's
            // format put it (the disk reads it once).
            assert_eq!(reads[0], (0, ALIGN, false), "read ahead {ahead}");
            for &(at, n, _) in &reads {
                for p in page(at)..page(at + n as u64 - 1) + 1 {
                    assert!(
                        seen.insert(p),
                        "read ahead {ahead}: page {p} read twice: {reads:?}"
                    );
                    assert!(
                        needed.contains(&p),
                        "read ahead {ahead}: page {p} holds no frame wanted: {reads:?}"
                    );
                }
            }
            assert_eq!(seen, needed, "read ahead {ahead}");
            if ahead {
                // Runs that share or touch pages: one read.
                assert!(reads.len() < runs.len(), "{} reads: {reads:?}", reads.len());
            }
        }
    }

    /// Read syscalls of the calling thread so far.
    fn reads_so_far() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("syscr: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// A server's options keep a finished capture's head (its first page)
    /// once read: opening the file again for a query reads nothing of it
    /// (no read at all before the frames), and the walk gives the file's
    /// frames; a file that has grown since is read again; options that
    /// keep nothing read the head each time.
    #[test]
    fn a_server_reads_a_finished_file_s_head_once() {
        use crate::walk::Walker;
        use crate::zread::Source;
        let dir = Dir::new("wt-ramp-head");
        let path = dir.0.join("1795813946878311");
        let block = |b: u64| steno_block(b, 30, 1400);
        let mut bytes: Vec<u8> = (0..3).flat_map(block).collect();
        std::fs::write(&path, &bytes).unwrap();
        let frames = |bytes: &[u8]| {
            let mut w = Walker::new(std::io::Cursor::new(bytes));
            let mut d = Vec::new();
            std::iter::from_fn(|| w.next_into(&mut d).map(|m| (m.offset, d.clone())))
                .collect::<Vec<_>>()
        };
        // What reading the syscall counter costs by itself.
        let idle = {
            let a = reads_so_far();
            reads_so_far() - a
        };
        // Opens the file for a query and reads its head: the read calls
        // that took (the counter's own subtracted), and its frames.
        let open = |opts: &crate::ReadOptions| {
            let a = reads_so_far();
            let (src, live) = Source::open_query(&path, opts).unwrap();
            assert!(!live);
            let mut w = Walker::new(src);
            let head_reads = reads_so_far() - a - idle;
            let mut d = Vec::new();
            let got: Vec<(u64, Vec<u8>)> =
                std::iter::from_fn(|| w.next_into(&mut d).map(|m| (m.offset, d.clone()))).collect();
            (head_reads, got)
        };
        let server = crate::ReadOptions::default().with_kept_index_pages(1 << 20);
        let (first, got) = open(&server);
        assert!(first >= 1, "the first open reads the head");
        assert!(got == frames(&bytes) && got.len() == 90);
        for _ in 0..3 {
            let (again, got) = open(&server);
            assert_eq!(again, 0, "the head kept: nothing read");
            assert!(got == frames(&bytes));
        }
        // Grown (another block): its head read again, its frames all there.
        bytes.extend(block(3));
        std::fs::write(&path, &bytes).unwrap();
        let (grown, got) = open(&server);
        assert!(grown >= 1, "a file changed since is read again");
        assert!(got == frames(&bytes) && got.len() == 120);
        assert_eq!(open(&server).0, 0);
        // Options that keep nothing: the head read each time.
        let plain = crate::ReadOptions::default();
        for _ in 0..2 {
            let (n, got) = open(&plain);
            assert!(n >= 1);
            assert!(got == frames(&bytes));
        }
    }
}
