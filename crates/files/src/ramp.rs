//! Reading a capture file for a query: [`RampReader`], a buffer that
//! starts small after every seek and grows (a narrow window reads little, a
//! long scan reads big chunks), O_DIRECT where the filesystem takes it, and
//! the next chunk read ahead on a helper thread during long scans. The
//! extraction merge (`wiretape-query`) reads every file through one, under
//! the record walker ([`crate::walk::Walker`]).

use crate::aligned::{AlignedBuf, ALIGN};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Bytes a reader reads at most at once (its buffer's size).
pub const READ_BUFFER: usize = 1 << 20;
/// Bytes of a reader's first read after a seek; each further read doubles
/// it up to [`READ_BUFFER`] (a narrow window reads little).
const FIRST_READ: usize = 64 << 10;
/// Bytes read beyond a hinted span ([`RampReader::hint`]), for its last
/// record (whose length is not known): a small frame's. A longer one that
/// crosses into the next page costs a second read.
const HINT_SLACK: usize = 512;
/// Bytes of the first read of a file: its header (and, read whole, the
/// first records).
const HEAD_READ: usize = 4 << 10;

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
    buf: AlignedBuf,
    /// Unread bytes: `buf[pos..len]`.
    pos: usize,
    len: usize,
    next_fill: usize,
    /// File offset of `buf[0]`.
    at: u64,
    read: u64,
}

impl RampReader {
    /// Opens `path` for reading, and says whether a writer holds it
    /// ([`crate::is_being_written`]). A finished file is read with O_DIRECT
    /// too where the filesystem takes it; a file being written through the
    /// page cache (its last pages still change).
    pub fn open(path: &Path) -> std::io::Result<(Self, bool)> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = File::open(path)?;
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
            buf: AlignedBuf::new(READ_BUFFER + ALIGN),
            pos: 0,
            len: 0,
            next_fill: HEAD_READ,
            at: 0,
            read: 0,
        }
    }

    /// The file (for its lock: [`crate::is_being_written`]).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Bytes read from the file so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// The next read (after a seek) is about `len` bytes: the records of a
    /// span the query wants, plus room for its last record (whose length
    /// the caller does not know). A selective query then reads a few pages
    /// per frame instead of the usual 64 KiB first read; reads after it double
    /// as usual.
    pub fn hint(&mut self, len: u64) {
        let want = (len as usize).saturating_add(HINT_SLACK);
        self.next_fill = want
            .div_ceil(ALIGN)
            .max(1)
            .saturating_mul(ALIGN)
            .min(READ_BUFFER);
    }

    /// Refills the buffer with the bytes from file offset `cur` on.
    fn fill(&mut self, cur: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let want = self.next_fill;
        self.next_fill = (want * 2).min(READ_BUFFER);
        if let Some(d) = self.direct.clone() {
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
                }
                Err(e) => return Err(e),
            }
        }
        let got = self
            .file
            .read_at(&mut self.buf.as_mut_slice()[..want], cur)?;
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
            spare: Some(AlignedBuf::new(READ_BUFFER + ALIGN)),
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

impl Read for RampReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.len {
            self.fill(self.at + self.len as u64)?;
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
