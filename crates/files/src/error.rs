//! The one error of wiretape's files, read or written ([`StorageError`]).

use std::path::PathBuf;

/// Errors of reading and writing wiretape's files (the write path,
/// `wiretape-storage`, raises its own kinds through this one type, so that
/// a caller of both handles one error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// A write found the filesystem full or the user's quota spent (ENOSPC,
    /// EDQUOT; a short O_DIRECT write counts too). In the library's words:
    /// the command names its output flag.
    #[error("disk full while writing {path}: free space or write to another disk")]
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
    #[error("{path}: not a pcap file, nor pcapng (first bytes {:02x} {:02x} {:02x} {:02x}); expected a pcap or pcapng capture (wiretape, tcpdump, tshark)", magic & 0xff, magic >> 8 & 0xff, magic >> 16 & 0xff, magic >> 24)]
    BadMagic {
        /// The file read.
        path: PathBuf,
        /// The magic found: the first 4 bytes, read little-endian (pcapng:
        /// the section's byte-order field).
        magic: u32,
    },
    /// A file ends inside its header, a record or a block: a torn tail (a
    /// crash or a full disk), which `wiretape repair` trims (a file without a
    /// complete header, `good_end` 0, it removes).
    #[error("{path}: truncated {what} at byte {offset} (file is {len} bytes); {}", repair_hint(*.good_end))]
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
    /// fails).
    #[error("output directory {path} is not writable ({source})")]
    NotWritable {
        /// The output directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Direct I/O only was asked (`IoMode::Direct`) of an output directory
    /// whose filesystem refuses O_DIRECT (tmpfs, ramfs).
    #[error("output directory {path}: its filesystem refuses O_DIRECT (write through the page cache instead)")]
    DirectRefused {
        /// The output directory.
        path: PathBuf,
    },
    /// A bug, not a disk or file problem: e.g. the thread closing a file
    /// panicked. The text says what went wrong.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// Stenographer's file (stenotype's blocks, read and never changed) holds
    /// at `offset` what is not its block or frame, or ends inside one: the
    /// frames before it are read.
    #[error("{path}: {what}, at byte {offset} (file is {len} bytes): the frames before it are read; wiretape never changes Stenographer's files")]
    Steno {
        /// The file read.
        path: PathBuf,
        /// Where the damage starts (where the last whole frame ends, or
        /// the bad block or frame starts).
        offset: u64,
        /// Length of the file in bytes.
        len: u64,
        /// What is wrong, in words for the user.
        what: String,
    },
    /// A file that is Stenographer's, which a command would change (repair,
    /// or an index written beside it). In the library's words: the command
    /// names its flag for a sidecar directory
    /// ([`crate::ReadOptions::with_steno_sidecar_dir`]).
    #[error("{path}: Stenographer's packet file (stenotype's TPACKET_V3 blocks): wiretape reads it but never changes it, nor writes beside it (its indexes go to a sidecar directory of their own)")]
    NotOurs {
        /// The file.
        path: PathBuf,
    },
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

/// What `wiretape repair` does to a torn file whose last complete record
/// ends at `good_end` (0: nothing whole, not even the header).
fn repair_hint(good_end: u64) -> String {
    if good_end == 0 {
        "no complete file header, no frame in it; `wiretape repair` removes it".into()
    } else {
        format!("the last complete record ends at byte {good_end}; `wiretape repair` trims it")
    }
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
