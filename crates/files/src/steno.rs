//! Stenographer's packet files, read as captures (never written, never
//! changed: they are Stenographer's).
//!
//! stenotype writes each TPACKET_V3 block of its AF_PACKET ring to disk as
//! the kernel filled it (`stenotype/stenotype.cc`, `packets.cc`), a block
//! every `--blocksize_kb` (1 MiB by default) from the start of the file:
//!
//! - the block descriptor (`struct tpacket_block_desc` of `linux/if_packet.h`,
//!   48 bytes, little-endian on the machines stenotype runs on): `version`
//!   (2: TPACKET_V3), `offset_to_priv` (48), then `tpacket_hdr_v1`:
//!   `block_status`, `num_pkts`, `offset_to_first_pkt`, `blk_len` (the bytes
//!   of the block in use), `seq_num` (u64), the first and last packets'
//!   stamps;
//! - at `offset_to_first_pkt`, and then at each `tp_next_offset` (0 on the
//!   block's last frame), a `struct tpacket3_hdr` (48 bytes: `tp_next_offset`,
//!   `tp_sec`, `tp_nsec`, `tp_snaplen`, `tp_len`, `tp_status`, `tp_mac`,
//!   `tp_net`, VLAN fields) and the frame's `tp_snaplen` bytes at `tp_mac`
//!   from the header;
//! - the rest of the block up to the next one: leftovers of the ring.
//!
//! A file is named by the microsecond stenotype opened it, without an
//! extension, in a thread's packets directory (`<dir>/thread0/packets`
//! under Debian's server; `PKT0` under stenotype's own `--dir`); the file
//! being written is a dot-file until stenotype renames it. Its leveldb index
//! (same name, in the thread's `index` directory) is not read: wiretape
//! builds its own (`wiretape index --index-dir`).
//!
//! The walk ([`crate::walk::Walker`], [`crate::Format::Steno`]) finds the
//! block size from the file itself (the first page-aligned offset after the
//! first block where a later block's descriptor stands). Stamps are
//! `tp_sec`/`tp_nsec` (ns), the wire length `tp_len`, the bytes
//! `tp_snaplen` at `tp_mac`: the frame as stenotype stored it (the kernel
//! has taken an outermost VLAN tag off into `tp_vlan_tci`; stenotype does
//! not put it back, and neither does this reader, so the frames are those
//! Stenographer's own server hands out).

use crate::kept::Kept;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Bytes of a block descriptor (`BLK_HDR_LEN`) and of a frame header
/// (`sizeof(struct tpacket3_hdr)`).
pub const HEADER_LEN: usize = 48;
/// `TPACKET_V3`, the descriptor's `version`.
pub const TPACKET_V3: u32 = 2;
/// stenotype's default block size (`--blocksize_kb 1024`).
pub const DEFAULT_BLOCK: u64 = 1 << 20;
/// Block sizes are whole pages (stenotype checks it), at least 10 KiB.
pub const PAGE: u64 = 4096;
/// The largest block this reader believes (the kernel's own limit on a
/// ring block is far below).
pub const MAX_BLOCK: u64 = 1 << 30;

/// A block descriptor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockDesc {
    /// `version`: [`TPACKET_V3`].
    pub version: u32,
    /// `offset_to_priv`: 48.
    pub offset_to_priv: u32,
    /// `block_status` (`TP_STATUS_USER`, maybe with `TP_STATUS_BLK_TMO`).
    pub status: u32,
    /// `num_pkts`: frames in the block.
    pub num_pkts: u32,
    /// `offset_to_first_pkt`, from the block's start.
    pub offset_to_first_pkt: u32,
    /// `blk_len`: bytes of the block in use, from its start.
    pub blk_len: u32,
    /// `seq_num`: the ring's count of blocks opened.
    pub seq: u64,
}

impl BlockDesc {
    /// Decodes the first 48 bytes of a block.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Self {
        let r = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        BlockDesc {
            version: r(0),
            offset_to_priv: r(4),
            status: r(8),
            num_pkts: r(12),
            offset_to_first_pkt: r(16),
            blk_len: r(20),
            seq: u64::from_le_bytes(b[24..32].try_into().unwrap()),
        }
    }

    /// Why it is not a block descriptor (of a block at most `max` bytes
    /// long), if it is not one.
    pub fn check(&self, max: u64) -> Result<(), String> {
        let ok = self.version == TPACKET_V3
            && self.offset_to_priv as usize == HEADER_LEN
            && self.offset_to_first_pkt as usize >= HEADER_LEN
            && self.offset_to_first_pkt <= self.blk_len
            && u64::from(self.blk_len) <= max;
        if ok {
            return Ok(());
        }
        Err(format!(
            "not a TPACKET_V3 block descriptor (version {}, offset_to_priv {}, offset_to_first_pkt {}, blk_len {}, block size {max})",
            self.version, self.offset_to_priv, self.offset_to_first_pkt, self.blk_len
        ))
    }
}

/// A frame header (`struct tpacket3_hdr`, the fields read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameHdr {
    /// `tp_next_offset`: the next frame's header, from this one (0: the
    /// block's last).
    pub next_offset: u32,
    /// `tp_sec`.
    pub sec: u32,
    /// `tp_nsec`.
    pub nsec: u32,
    /// `tp_snaplen`: bytes stored.
    pub snaplen: u32,
    /// `tp_len`: the frame's length on the wire.
    pub len: u32,
    /// `tp_mac`: where the frame starts, from the header.
    pub mac: u16,
}

impl FrameHdr {
    /// Decodes a frame header.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Self {
        let r = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        FrameHdr {
            next_offset: r(0),
            sec: r(4),
            nsec: r(8),
            snaplen: r(12),
            len: r(16),
            mac: u16::from_le_bytes([b[24], b[25]]),
        }
    }

    /// Bytes from the header to the end of its frame.
    pub fn end(&self) -> u64 {
        u64::from(self.mac) + u64::from(self.snaplen)
    }

    /// Why it is not a frame header of a block with `room` bytes left from
    /// it, if it is not one.
    pub fn check(&self, room: u64) -> Result<(), String> {
        let next = u64::from(self.next_offset);
        let ok = self.mac as usize >= HEADER_LEN
            && self.end() <= room
            && (next == 0 || (next >= self.end() && next + HEADER_LEN as u64 <= room));
        if ok {
            return Ok(());
        }
        Err(format!(
            "not a TPACKET_V3 frame header (tp_mac {}, tp_snaplen {}, tp_next_offset {}, {room} bytes left in the block)",
            self.mac, self.snaplen, self.next_offset
        ))
    }
}

/// Whether `b` (a file's first bytes, at least 48) starts like
/// stenotype's files: a TPACKET_V3 block descriptor.
pub fn looks_like(b: &[u8]) -> bool {
    let Some(h) = b.get(..HEADER_LEN) else {
        return false;
    };
    BlockDesc::decode(h.try_into().unwrap())
        .check(MAX_BLOCK)
        .is_ok()
}

/// Whether `name` is named as stenotype names its packet files: digits
/// (the microsecond it opened the file), with a leading dot while it writes
/// the file.
pub fn is_file_name(name: &str) -> bool {
    let d = name.strip_prefix('.').unwrap_or(name);
    !d.is_empty() && d.len() <= 20 && d.bytes().all(|b| b.is_ascii_digit())
}

/// The layout of a Stenographer store found at a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Not one: no packets directory in it, nor under its `thread*`.
    None,
    /// Packets directories (a thread's `packets`, `PKT<n>` of stenotype's
    /// own `--dir`, or the directory itself when it holds stenotype's
    /// files), in name order.
    Packets(Vec<PathBuf>),
}

/// The names in `dir` (kept ones where `kept` says:
/// [`crate::ReadOptions::with_kept_listings`]).
pub(crate) fn dir_names(
    dir: &Path,
    kept: Option<&Kept>,
) -> std::io::Result<Vec<std::ffi::OsString>> {
    listing(dir, kept).map(|(names, _)| names)
}

/// The names in `dir`, and the directory's mtime when the listing is a
/// kept one (None: listed afresh and not kept).
fn listing(
    dir: &Path,
    kept: Option<&Kept>,
) -> std::io::Result<(Vec<std::ffi::OsString>, Option<std::time::SystemTime>)> {
    let read = || -> std::io::Result<Vec<std::ffi::OsString>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name()))
            .collect()
    };
    let Some(kept) = kept.filter(|k| k.listings_on) else {
        return Ok((read()?, None));
    };
    // Held open where files are kept: the directory's inode stays in
    // memory for the next query's `stat`.
    let mtime = kept.stat(dir)?.modified()?;
    if let Some(names) = kept.listing(dir, mtime) {
        return Ok((names, Some(mtime)));
    }
    let names = read()?;
    let settled = std::time::SystemTime::now()
        .duration_since(mtime)
        .is_ok_and(|d| d > std::time::Duration::from_secs(2));
    if settled {
        kept.keep_listing(dir, mtime, &names);
        return Ok((names, Some(mtime)));
    }
    Ok((names, None))
}

/// Where stenotype's files lie under `dir`: `dir` itself holding them, a
/// thread directory (`packets/` in it), stenotype's `--dir` (`PKT<n>/`), or
/// their parent (`thread<n>/packets`).
pub fn layout(dir: &Path) -> Layout {
    layout_in(dir, None)
}

/// [`layout`], listings kept where `kept` says.
pub(crate) fn layout_in(dir: &Path, kept: Option<&Kept>) -> Layout {
    // Listed once for both looks (a kept listing costs a `stat` each).
    let names = dir_names(dir, kept).unwrap_or_default();
    let mut mine: Vec<PathBuf> = names
        .iter()
        .filter_map(|n| {
            let p = dir.join(n);
            let n = n.to_str()?;
            let pk = n == "packets"
                || n.strip_prefix("PKT")
                    .is_some_and(|t| t.parse::<u32>().is_ok());
            (pk && p.is_dir()).then_some(p)
        })
        .collect();
    mine.sort();
    if !mine.is_empty() {
        return Layout::Packets(mine);
    }
    let mut threads: Vec<PathBuf> = names
        .into_iter()
        .filter(|n| {
            n.to_str()
                .and_then(|n| n.strip_prefix("thread"))
                .is_some_and(|t| t.parse::<u32>().is_ok())
        })
        .map(|n| dir.join(n))
        .filter(|p| p.join("packets").is_dir())
        .collect();
    threads.sort();
    if !threads.is_empty() {
        return Layout::Packets(threads.iter().map(|t| t.join("packets")).collect());
    }
    if dir.file_name().is_some_and(|n| n == "packets") || holds_files(dir) {
        return Layout::Packets(vec![dir.to_owned()]);
    }
    Layout::None
}

/// Whether `dir` holds a file named and made like stenotype's.
fn holds_files(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_str().is_some_and(is_file_name) && starts_like(&e.path()))
}

/// Whether the file at `p` starts like one of stenotype's.
pub fn starts_like(p: &Path) -> bool {
    use std::io::Read;
    let mut b = [0u8; HEADER_LEN];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
        && looks_like(&b)
}

/// stenotype's files in a packets directory, oldest first (by the
/// microsecond in the name; the dot-file it writes last): regular files
/// named like its own ([`is_file_name`]). Empty files (a dot-file just
/// opened) are left out.
pub fn list(packets: &Path) -> std::io::Result<Vec<PathBuf>> {
    list_in(packets, None)
}

/// [`list`], the listing kept where `kept` says, and with it, by the
/// directory's mtime, whether each of its files under a final name (not a
/// dot-file) is a non-empty regular file. stenotype writes a file only
/// under its dot-name and renames it when done, and a rename or removal
/// moves the directory's mtime: a final name's state holds while the
/// mtime does, so a query over a kept store stats none of them (one
/// `stat` per file per query before; a store of stenotype's restarts
/// holds many empty ones). Dot-files are stat'ed every time (the one
/// being written grows).
pub(crate) fn list_in(packets: &Path, kept: Option<&Kept>) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<(u64, bool, PathBuf)> = Vec::new();
    let (names, at) = listing(packets, kept)?;
    let known = at
        .zip(kept)
        .and_then(|(t, k)| k.states(packets, t))
        .unwrap_or_default();
    let mut states = HashMap::new();
    for os in names {
        let path = packets.join(&os);
        let Some(name) = os.to_str() else {
            continue;
        };
        if !is_file_name(name) {
            continue;
        }
        let dot = name.starts_with('.');
        let us = name
            .trim_start_matches('.')
            .parse::<u64>()
            .unwrap_or(u64::MAX);
        let full = match known.get(&os) {
            Some(&full) if !dot => full,
            // The file being written, stat'ed every query: held open where
            // files are kept (its inode stays in memory). Final names are
            // stat'ed once per mtime, as plain paths.
            _ => match kept.filter(|_| dot) {
                Some(k) => k.stat(&path),
                None => std::fs::metadata(&path),
            }
            .is_ok_and(|m| m.is_file() && m.len() > 0),
        };
        if !dot {
            states.insert(os, full);
        }
        if full {
            v.push((us, dot, path));
        }
    }
    if let (Some(t), Some(k)) = (at, kept) {
        k.keep_states(packets, t, states);
    }
    v.sort();
    Ok(v.into_iter().map(|(_, _, p)| p).collect())
}

/// Whether `p` lies in a Stenographer store: it, or a directory above it,
/// is a packets directory of stenotype's (wiretape writes nothing there).
pub fn is_steno_file(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_file_name)
        && starts_like(p)
}

/// Where the kernel puts a frame after its header (`tp_mac`) on a machine
/// like the ones stenotype ran on here: the header, a `sockaddr_ll`, and
/// padding so that the network header is 16-byte aligned.
pub const TP_MAC: u16 = 82;

/// One block of `size` bytes as the kernel fills it and stenotype writes
/// it: descriptor (sequence number `seq`), then each frame (its stamp in
/// ns, its bytes; `tp_len` = `tp_snaplen`) at `tp_next_offset`s aligned to
/// 16 bytes, the rest zeros. For tests and fuzzing: wiretape never writes
/// stenotype's files. Panics if the frames do not fit.
pub fn encode_block(frames: &[(u64, &[u8])], size: usize, seq: u64) -> Vec<u8> {
    let mut b = vec![0u8; size];
    let put = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    let mut at = HEADER_LEN;
    for (i, (ts, data)) in frames.iter().enumerate() {
        let len = usize::from(TP_MAC) + data.len();
        let next = len.div_ceil(16) * 16;
        let last = i + 1 == frames.len();
        assert!(at + len <= size, "the frames fit the block");
        put(&mut b, at, if last { 0 } else { next as u32 });
        put(&mut b, at + 4, (ts / 1_000_000_000) as u32);
        put(&mut b, at + 8, (ts % 1_000_000_000) as u32);
        put(&mut b, at + 12, data.len() as u32);
        put(&mut b, at + 16, data.len() as u32);
        put(&mut b, at + 20, 1);
        b[at + 24..at + 26].copy_from_slice(&TP_MAC.to_le_bytes());
        b[at + 26..at + 28].copy_from_slice(&(TP_MAC + 14).to_le_bytes());
        b[at + usize::from(TP_MAC)..at + len].copy_from_slice(data);
        at += if last { len } else { next };
    }
    put(&mut b, 0, TPACKET_V3);
    put(&mut b, 4, HEADER_LEN as u32);
    put(&mut b, 8, 1);
    put(&mut b, 12, frames.len() as u32);
    put(&mut b, 16, HEADER_LEN as u32);
    put(&mut b, 20, at as u32);
    b[24..32].copy_from_slice(&seq.to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_listings_follow_the_mtime() {
        let d = std::env::temp_dir().join(format!("wt-steno-ls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("1795813946878311"), b"x").unwrap();
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let age = |t| std::fs::File::open(&d).unwrap().set_modified(t).unwrap();
        age(past);
        let k = Kept::with_listings();
        let sorted = |mut v: Vec<std::ffi::OsString>| {
            v.sort();
            v
        };
        assert_eq!(dir_names(&d, Some(&k)).unwrap(), vec!["1795813946878311"]);
        // A new file moves the mtime: listed again.
        std::fs::write(d.join("1795813957904924"), b"x").unwrap();
        assert_eq!(sorted(dir_names(&d, Some(&k)).unwrap()).len(), 2);
        // The same mtime as the kept listing: the listing is kept (a
        // change that left the mtime where it was is not seen).
        std::fs::write(d.join("1795813968909403"), b"x").unwrap();
        age(past);
        assert_eq!(dir_names(&d, Some(&k)).unwrap(), vec!["1795813946878311"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_kept_store_stats_its_final_names_once_per_mtime() {
        let d = std::env::temp_dir().join(format!("wt-steno-states-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let (full, empty, dot) = (
            d.join("1795813946878311"),
            d.join("1795813957904924"),
            d.join(".1795813968909403"),
        );
        std::fs::write(&full, b"x").unwrap();
        std::fs::write(&empty, b"").unwrap();
        std::fs::write(&dot, b"").unwrap();
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let age = |t| std::fs::File::open(&d).unwrap().set_modified(t).unwrap();
        age(past);
        let k = Kept::with_listings();
        assert_eq!(list_in(&d, Some(&k)).unwrap(), vec![full.clone()]);
        // The dot-file being written grows: seen at once (stat'ed every
        // time); a final name's state is kept while the mtime holds (the
        // empty file written in place, which stenotype never does, is
        // not seen)...
        std::fs::write(&dot, b"x").unwrap();
        std::fs::write(&empty, b"x").unwrap();
        assert_eq!(
            list_in(&d, Some(&k)).unwrap(),
            vec![full.clone(), dot.clone()]
        );
        // ... and a rename (stenotype's end of a file) moves the mtime:
        // every final name is looked at again.
        let done = d.join("1795813968909403");
        std::fs::rename(&dot, &done).unwrap();
        assert_eq!(list_in(&d, Some(&k)).unwrap(), vec![full, empty, done]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn two_stores_options_share_nothing() {
        // Two stores' options in one process (a server each): what one
        // keeps is not the other's, and options that keep nothing list
        // afresh.
        let root = std::env::temp_dir().join(format!("wt-steno-two-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let d = root.join("packets");
        std::fs::create_dir_all(&d).unwrap();
        let first = d.join("1795813946878311");
        std::fs::write(&first, b"x").unwrap();
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let age = |t| std::fs::File::open(&d).unwrap().set_modified(t).unwrap();
        age(past);
        let a = crate::ReadOptions::new().with_kept_listings();
        let b = crate::ReadOptions::new().with_kept_listings();
        assert_eq!(a.list_any(&d, None).unwrap(), vec![first.clone()]);
        // A file come while the mtime is put back: `a` (and its clone)
        // keep their listing, `b` (which never listed the directory) and
        // the options that keep nothing see the file.
        let second = d.join("1795813957904924");
        std::fs::write(&second, b"x").unwrap();
        age(past);
        let both = vec![first.clone(), second.clone()];
        assert_eq!(a.list_any(&d, None).unwrap(), vec![first.clone()]);
        assert_eq!(a.clone().list_any(&d, None).unwrap(), vec![first.clone()]);
        assert_eq!(b.list_any(&d, None).unwrap(), both);
        assert_eq!(crate::ReadOptions::new().list_any(&d, None).unwrap(), both);
        assert_eq!(crate::naming::list_any(&d, None).unwrap(), both);
        assert_eq!(list(&d).unwrap(), both);
        // Each keeps only the directory it listed.
        assert_eq!(a.kept().listings.lock().unwrap().len(), 1);
        assert_eq!(b.kept().listings.lock().unwrap().len(), 1);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn names() {
        assert!(is_file_name("1795813946878311"));
        assert!(is_file_name(".1795813946878311"));
        assert!(!is_file_name("."));
        assert!(!is_file_name("1795813946878311.pcap"));
        assert!(!is_file_name(""));
    }

    #[test]
    fn descriptor() {
        let mut b = [0u8; HEADER_LEN];
        b[0] = 2;
        b[4] = 48;
        b[8] = 1;
        b[12] = 3;
        b[16] = 48;
        b[20..24].copy_from_slice(&1000u32.to_le_bytes());
        assert!(looks_like(&b));
        let d = BlockDesc::decode(&b);
        assert_eq!((d.num_pkts, d.blk_len), (3, 1000));
        assert!(d.check(999).is_err());
        b[0] = 1;
        assert!(!looks_like(&b));
        assert!(!looks_like(&[2, 0, 0, 0]));
    }
}
