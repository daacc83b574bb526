//! wiretape's write path: the blocks, sinks and writers that put captured
//! frames on disk, and the care of a store (rotation, retention, repair,
//! the index builders). One job: to write. The formats and every reader
//! (headers, the record walker, compressed readers, the `.idx` and `.kdx`
//! readers, names) are `wiretape-files`'s, below this crate; what answers
//! questions about a store (the extraction planner and merge, the fleet
//! index, the API) is `wiretape-query`'s, above both.
//!
//! The data path is: frames are copied once into a large aligned block of pcap
//! records ([`BlockBuilder`]); a full block goes to a [`BlockSink`], which
//! writes it and hands back a block to fill next. [`PcapWriter`] ties the two
//! together and counts what was written. Engines: [`uring::UringSink`]
//! (io_uring, O_DIRECT, several blocks in flight: the default) and
//! [`FileSink`] (buffered `write(2)`: where the filesystem refuses O_DIRECT);
//! [`AnySink`] chooses. An engine that lays frames out as pcapng in its own
//! memory (the TPACKET_V3 engine's ring blocks) hands them over as
//! [`external::External`] runs, which the io_uring sink writes as they lie
//! (no copy) and the others copy. [`compress`] compresses blocks on their
//! way out; [`index`] and [`keys`] write the sidecars as blocks go out.
//!
//! A store: [`Store`] opens a directory (checked, torn tails repaired) and
//! hands out a [`RotatingWriter`] per queue; [`retention`] keeps it within
//! its bounds; [`repair`] trims torn tails after a crash and rebuilds the
//! sidecars; [`volume`] spreads a store's files over several directories
//! (disks) and takes a failing one out. A writer holds an advisory lock on each file while it writes
//! it, which readers test (`wiretape_files::is_being_written`).
//! [`fuzz`] holds the fuzz bodies of the file readers and of repair (the
//! `fuzz/` targets and the stable `tests/fuzz_seeds.rs` run them).
//!
//! Usable on its own, e.g. by other capture tools.

#![deny(unsafe_code)]

// This crate's tests name it as a dependency only to have its test hooks
// (Cargo.toml: the feature fault-injection).
#[cfg(test)]
use wiretape_storage as _;

// `unsafe` only in these modules, each block with its invariant beside it:
// the io_uring engine (registered buffers and files: its `submit` part, the
// rest of it is safe) and the system calls (statvfs, flock, lseek, sysconf,
// setpriority). The page-aligned buffers are `wiretape_files::aligned`'s.
#[allow(unsafe_code)]
mod sys;
pub mod uring;

pub mod block;
pub mod compress;
pub mod crypt;
pub mod external;
pub mod fuzz;
pub mod index;
pub mod keys;
pub mod repair;
pub mod retention;
pub mod rotating;
pub mod sessions;
pub mod sink;
pub mod volume;
pub mod writer;

pub use block::BlockBuilder;
pub use compress::{CompressReport, CompressStats};
pub use retention::{Limit, LimitWords, MinFree, Policy, Retention, VolumeLimits};
pub use rotating::{
    prepare_dir, repair_dir, Gauge, QueueStorage, RotatingWriter, StorageConfig, StorageProgress,
    Store, WriterReport, DEFAULT_SNAPLEN,
};
pub use sink::{
    AnySink, Block, BlockSink, FileSink, Gate, IoMode, MakeRoom, PreparedSink, SinkStats, WriteSink,
};
pub use sys::fs_space;
pub use volume::{Volume, VolumeState, Volumes};
pub use writer::{PcapWriter, WriterStats};

/// The one error of wiretape's files, read or written: the readers' type,
/// re-exported on purpose, so that whoever writes (the pipeline) and reads
/// (the query side) handles one error, and `StorageError::DiskFull` and
/// `StorageError::Truncated` stay variants of the same enum.
pub use wiretape_files::StorageError;
