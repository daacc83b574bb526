//! wiretape's storage: record formats, block building and the writers that put
//! blocks on disk; plus readers to verify what was written.
//!
//! The data path is: frames are copied once into a large aligned block of pcap
//! records ([`BlockBuilder`]); a full block goes to a [`BlockSink`], which
//! writes it and hands back a block to fill next. [`PcapWriter`] ties the two
//! together and counts what was written. Engines: [`uring::UringSink`]
//! (io_uring, O_DIRECT, several blocks in flight: the default) and
//! [`FileSink`] (buffered `write(2)`: where the filesystem refuses O_DIRECT);
//! [`AnySink`] chooses. [`repair`] trims torn tails.
//!
//! Reading: one record walker ([`walk`]) under the [`PcapReader`],
//! [`repair`] and the index rebuild ([`index`]); [`extract`] plans a time
//! query over directories and files (names, series, `.idx` blocks) and
//! merges their records in timestamp order (`wiretape extract`). It takes
//! the frame filter as a plain predicate (`FnMut(&[u8], u32) -> bool`), so
//! this crate stays free of libpcap: the command compiles the expression
//! with `wiretape-filter` and passes `Program::matches`. A writer holds an
//! advisory lock on each file while it writes it ([`is_being_written`]), so
//! readers tell writes in flight from damage.
//!
//! Usable on its own, e.g. by other capture tools.

mod aligned;
pub mod block;
pub mod extract;
pub mod index;
pub mod naming;
pub mod pcap;
pub mod pcapng;
pub mod reader;
pub mod repair;
pub mod retention;
pub mod rotating;
pub mod sink;
pub mod uring;
pub mod walk;
pub mod writer;

pub use block::BlockBuilder;
pub use pcap::{FileHeader, Format, LINKTYPE_ETHERNET, RECORD_HEADER_LEN};
pub use reader::{FileInfo, PcapReader, Record};
pub use retention::{MinFree, Policy, Retention};
pub use rotating::{
    prepare_dir, repair_dir, Gauge, QueueStorage, RotatingWriter, StorageConfig, StorageProgress,
    Store, WriterReport, DEFAULT_SNAPLEN,
};
pub use sink::{
    AnySink, Block, BlockSink, FileSink, IoMode, MakeRoom, PreparedSink, SinkStats, WriteSink,
};
pub use writer::{PcapWriter, WriterStats};

use std::path::PathBuf;

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A write found the filesystem full or the user's quota spent (ENOSPC,
    /// EDQUOT; a short O_DIRECT write counts too).
    #[error("disk full while writing {path}: free space or point -w at another disk")]
    DiskFull {
        /// The file being written when space ran out.
        path: PathBuf,
    },
    /// A write, flush or fsync failed for another reason than a full disk;
    /// also what a writer returns for frames offered after such a failure.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file being written (capture or index).
        path: PathBuf,
        /// The OS error (after an earlier failure: that failure's text).
        #[source]
        source: std::io::Error,
    },
    /// A new file could not be created: it exists already (wiretape never
    /// overwrites a capture), the directory refuses it, or the io_uring
    /// engine meant to write it could not be set up.
    #[error("cannot create {path}: {source}")]
    Create {
        /// The file that was to be created.
        path: PathBuf,
        /// The OS error (`AlreadyExists` for an existing file).
        #[source]
        source: std::io::Error,
    },
    /// Opening, measuring or reading a file failed (readers, repair, index
    /// rebuild, and recovery after a failed write).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file being read.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file starts with neither a pcap magic nor a pcapng section header,
    /// or a pcapng section's byte-order magic is wrong.
    #[error("{path}: not a pcap file (magic {magic:#010x}); expected a pcap written by wiretape, tcpdump or tshark")]
    BadMagic {
        /// The file read.
        path: PathBuf,
        /// The magic found: the first 4 bytes, read little-endian (pcapng:
        /// the section's byte-order field).
        magic: u32,
    },
    /// A file ends inside its header, a record or a block: a torn tail (a
    /// crash or a full disk), which [`repair`] trims.
    #[error("{path}: truncated {what} at byte {offset} (file is {len} bytes); the last complete record ends at byte {good_end}; `wiretape repair` trims it")]
    Truncated {
        /// The file read.
        path: PathBuf,
        /// What was cut short, e.g. "file header", "record data", "block".
        what: &'static str,
        /// Byte offset where the cut-short part starts.
        offset: u64,
        /// Length of the file in bytes.
        len: u64,
        /// End of the last complete record: the length repair cuts to.
        good_end: u64,
    },
    /// The output path (`-w`) exists and is not a directory.
    #[error("output path {0} exists and is not a directory: give -w a directory")]
    NotADirectory(PathBuf),
    /// The output directory cannot be created or written to (a probe file
    /// fails), or `--io direct` was asked of a filesystem that refuses O_DIRECT.
    #[error("output directory {path} is not writable ({source}): choose another -w directory or fix its permissions")]
    NotWritable {
        /// The output directory.
        path: PathBuf,
        /// The OS error, or what the filesystem refuses.
        #[source]
        source: std::io::Error,
    },
    /// A bug, not a disk or file problem: e.g. the thread closing a file
    /// panicked. The text says what went wrong.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// Bytes where a record should be are not one (and are not a torn tail);
    /// also an index with a bad magic, and a record too large for a block.
    #[error("{path}: corrupt record at byte {offset}: {why}")]
    Corrupt {
        /// The file read (or written, for a record too large).
        path: PathBuf,
        /// Byte offset where the damage was found (mostly where the last good
        /// record ends).
        offset: u64,
        /// What is wrong, in words for the user.
        why: String,
    },
}

impl StorageError {
    /// Maps an I/O error of a write to [`StorageError::DiskFull`] or [`StorageError::Write`].
    pub fn from_write(path: &std::path::Path, e: std::io::Error) -> Self {
        if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) {
            StorageError::DiskFull {
                path: path.to_owned(),
            }
        } else {
            StorageError::Write {
                path: path.to_owned(),
                source: e,
            }
        }
    }
}

/// (free for unprivileged users, total) bytes of the filesystem holding `dir`.
pub fn fs_space(dir: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: libc::statvfs is a plain C struct of integers, for which all
    // zero bytes are a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call, and
    // `s` is a live, writable statvfs: the call only writes into it.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let f = s.f_frsize;
    Some((s.f_bavail * f, s.f_blocks * f))
}

/// Bytes free for unprivileged users on the filesystem holding `file`.
pub(crate) fn free_bytes(file: &std::fs::File) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: libc::statvfs is a plain C struct of integers, for which all
    // zero bytes are a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor the caller keeps open, and a live, writable
    // statvfs: the call only writes into it.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut s) } != 0 {
        return None;
    }
    Some(s.f_bavail * s.f_frsize)
}

/// Creates `path` for writing, never over an existing file (wiretape never
/// overwrites a capture), with extra open(2) `flags` (e.g. O_DIRECT).
pub(crate) fn create_new(
    path: &std::path::Path,
    flags: i32,
) -> Result<std::fs::File, StorageError> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(flags | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| StorageError::Create {
            path: path.to_owned(),
            source,
        })?;
    // While it is open, the file is being written: readers (extract) see the
    // lock and take a torn or zero tail for writes in flight, not damage.
    // Advisory, released when the descriptor closes (also on a crash);
    // where a filesystem has no locks, readers simply cannot tell.
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own and keep open; no memory involved.
    let _ = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    Ok(f)
}

/// The writer is done with `file` (complete and synced): drop its lock now.
/// Closing the descriptor would too, but a ring that registered the file
/// (io_uring fixed files) releases its reference only when the kernel
/// tears the ring down, asynchronously, possibly after the process exited:
/// a reader would take a finished file for one being written.
pub(crate) fn unlock(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor the caller keeps open; no memory involved.
    let _ = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

/// The offset of the first hole in `file` (of `len` bytes) if it lies
/// before the end. A file written with [`uring::Growth::Extend`] is
/// allocated ahead and written in parallel, so after a crash a write that
/// never completed is a hole (an unwritten extent, read as zeros) that can
/// sit before writes that did: everything from the first hole on is a
/// write in flight at the crash, not data. Clean cached pages are dropped
/// first, since the kernel counts a cached page over a hole as data.
/// None where the filesystem cannot tell (it then reports no hole).
pub(crate) fn first_hole(file: &std::fs::File, len: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: advice and a seek on a descriptor the caller keeps open; no
    // memory involved (the seek moves this descriptor's offset only).
    let at = unsafe {
        libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
        libc::lseek(fd, 0, libc::SEEK_HOLE)
    };
    (at >= 0 && (at as u64) < len).then_some(at as u64)
}

/// Whether a writer (wiretape's, while it has the file open) holds the
/// file: it is being written, and its end may be a write in flight. Tested
/// with a non-blocking shared `flock`, released at once.
pub fn is_being_written(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: flock on a descriptor the caller keeps open; no memory involved.
    let rc = unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) };
    if rc == 0 {
        // SAFETY: as above; releases the lock just taken.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        return false;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}
