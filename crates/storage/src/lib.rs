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
//! Usable on its own, e.g. by other capture tools.



mod aligned;
pub mod block;
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
    prepare_dir, repair_dir, Gauge, RotatingWriter, StorageConfig, StorageProgress, Store,
    WriterReport, DEFAULT_SNAPLEN,
};
pub use sink::{AnySink, Block, BlockSink, FileSink, IoMode, MakeRoom, PreparedSink, SinkStats};
pub use writer::{PcapWriter, WriterStats};

use std::path::PathBuf;

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("disk full while writing {path}: free space or point -w at another disk")]
    DiskFull { path: PathBuf },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a pcap file (magic {magic:#010x}); expected a pcap written by wiretape, tcpdump or tshark")]
    BadMagic { path: PathBuf, magic: u32 },
    #[error("{path}: truncated {what} at byte {offset} (file is {len} bytes); the last complete record ends at byte {good_end}; `wiretape repair` trims it")]
    Truncated {
        path: PathBuf,
        what: &'static str,
        offset: u64,
        len: u64,
        good_end: u64,
    },
    #[error("output path {0} exists and is not a directory: give -w a directory")]
    NotADirectory(PathBuf),
    #[error("output directory {path} is not writable ({source}): choose another -w directory or fix its permissions")]
    NotWritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("internal error: {0}")]
    Internal(&'static str),
    #[error("{path}: corrupt record at byte {offset}: {why}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
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
    // SAFETY: statvfs only writes into the zeroed struct we pass; the path
    // is a valid NUL-terminated string that outlives the call.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let f = s.f_frsize;
    Some((s.f_bavail * f, s.f_blocks * f))
}

/// Creates `path` for writing, never over an existing file (wiretape never
/// overwrites a capture), with extra open(2) `flags` (e.g. O_DIRECT).
pub(crate) fn create_new(
    path: &std::path::Path,
    flags: i32,
) -> Result<std::fs::File, StorageError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(flags | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| StorageError::Create {
            path: path.to_owned(),
            source,
        })
}
