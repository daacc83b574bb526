//! wiretape's files, as they lie on disk: their formats and their readers.
//! One job: to say what the bytes of a capture file and its sidecars are,
//! and to read them back. Nothing here writes a file; the write path (sinks,
//! io_uring, rotation, retention, the index builders, repair) is
//! `wiretape-storage`'s, above this crate, and so are the queries
//! (`wiretape-query`).
//!
//! - Formats: classic pcap ([`pcap`]: the file header, [`Format`]), pcapng
//!   ([`pcapng`]: blocks, interfaces), compression at rest ([`compress`]:
//!   one LZ4 frame or zstd frames, a unit per block), the sidecar index
//!   ([`index`], `.idx`) and the exact key index ([`keys`], `.kdx`,
//!   encoder and reader), the files' names ([`naming`]), and encryption
//!   at rest ([`crypt`]: age files, the last layer, read by [`crypt::AgeReader`]);
//!   Stenographer's packet files are read too ([`steno`]: stenotype's
//!   TPACKET_V3 blocks).
//! - Reading: one record walker ([`walk`]) under the [`PcapReader`], the
//!   file summary ([`FileInfo`]), repair's scan and the index rebuild;
//!   [`zread`] reads compressed files a unit at a time; [`ramp`] reads a
//!   file for a query (small reads after a seek, growing; O_DIRECT;
//!   read-ahead).
//! - What a reader needs beyond a path ([`ReadOptions`]: the age identities,
//!   where Stenographer's files' sidecars are): a value passed down, never a
//!   process-wide setting.
//! - A store of several volumes: its description ([`store`], `store.toml`).
//! - A writer holds an advisory lock on each file while it writes it
//!   ([`is_being_written`]), so readers tell writes in flight from damage.
//!
//! Usable on its own, e.g. by other tools that read wiretape's files.

#![deny(unsafe_code)]

// `unsafe` only in these modules, each block with its invariant beside it:
// page-aligned buffers and slabs (mmap; the write path carves its blocks
// from them too) and the system calls (flock, fadvise).
#[allow(unsafe_code)]
pub mod aligned;
#[allow(unsafe_code)]
pub mod sys;

pub mod compress;
pub mod crypt;
mod error;
pub mod index;
mod kept;
pub mod keys;
pub mod naming;
mod options;
pub mod pcap;
pub mod pcapng;
pub mod ramp;
pub mod reader;
pub mod steno;
pub mod store;
pub mod walk;
pub mod zread;

pub use error::StorageError;
pub use options::ReadOptions;
pub use pcap::{FileHeader, Format, FormatError, LINKTYPE_ETHERNET, RECORD_HEADER_LEN};
pub use reader::{FileInfo, PcapReader, Record};
pub use sys::{is_being_written, lock_owner_gone};

/// Bytes in decimal units: `999 B`, `1.50 KB`, `3.27 GB`.
pub fn bytes_h(n: u64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u < units.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", units[u])
    }
}

/// 1234567 -> `1,234,567`: a count as every message and table of the
/// readers and the recorder groups it.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
