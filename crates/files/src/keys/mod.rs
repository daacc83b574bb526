//! The exact key index (`<capture>.kdx`): for every host, port, protocol,
//! VLAN and EtherType of a capture file, the blocks that hold it and where
//! in each block its frames are, however many hosts a block holds. It is
//! what lets a selective query (`host 10.1.2.3`, `host X and port 443`)
//! read only the frames that can match, where the per-block flow sets of
//! the `.idx` ([`crate::index`]) give up past 1,024 values of a kind per
//! block and so, on a busy link, read the whole window.
//!
//! # What is indexed: rows
//!
//! The writer's collector ([`wiretape_filter::flow::FlowCollector`] with
//! rows) keeps, per block, one *row* per distinct frame signature: all of a
//! frame's keys (EtherTypes, VLAN ids, protocol, addresses, ports, read at
//! the offsets the filter side reads them: the flow module's soundness
//! rules), the offsets of the first and last record with it in the block,
//! and their count. A plain IPv4 frame's signature is one packed `u128`, so
//! a frame seen before in the block costs one compare and one store; there
//! is nothing per frame beyond what the flow sets already paid, no
//! allocation, no lock, no system call. Rows are per flow and block, not
//! per frame: real traffic (many frames per connection per block) makes
//! few; a link where every frame is a new flow makes one per frame, and
//! then costs what Stenographer's per-packet index costs.
//!
//! # Segments, built off the capture threads
//!
//! Rows pile up on the writer's thread until a *segment* is due (the file
//! closes, or the rows reach their budget: a file that never rotates still
//! gets its index in bounded memory). The segment (its rows and the fixed
//! `.idx` entries of its blocks) then goes to the store's builder thread
//! (the write path's, `wiretape_storage::keys::Builder`: one per store, at
//! a low priority), which sorts it into
//! tables and appends it to the `.kdx` in one write. The writer never waits
//! for it when recording an interface: if the builder falls that far behind,
//! that segment is dropped (its blocks are then found by their flow sets,
//! as before; `wiretape index --force` rebuilds) and the report says so. A
//! file source (`record -r`) waits instead: nothing is lost by waiting.
//!
//! # Layout
//!
//! A `.kdx` is a sequence of segments; each covers the consecutive blocks
//! `block0 .. block0 + nblocks` of the file and is self-contained. A segment
//! is a 4 KiB header page ([`SegmentHeader`]: magic `WTKDX\x01\0\0`, its
//! length, blocks, time range, where the `.idx` entry after its last block
//! starts, checksum) and five sections, each starting on a page:
//!
//! * `BLOCKS`: the `.idx` fixed entries of its blocks (offset, first and
//!   last stamp, frames; compressed files: where the unit is), so that a
//!   query of a finished file never reads the `.idx` and its flow sets;
//! * `HOST4`, `HOST6`: one record per (address, row): the row's block,
//!   first offset, span and frames, and the row's other keys (its peer
//!   address, protocol, ports; all of them for a tagged or odd frame), so
//!   that `host X and port P` or `host X and host Y` is decided per row,
//!   exactly, from one lookup;
//! * `PORT`, `OTHER` (EtherTypes, VLAN ids, protocols): per (key, block)
//!   the ranges of the offsets of its frames (ranges closer than a page
//!   joined) and their count, so that a sparse key (`udp`, `icmp`) reads
//!   the pages of its frames, not the span from its first to its last.
//!
//! A section is a sorted table of 4 KiB pages of groups (key, record
//! count, records: varints, the block delta-coded) with fence levels above
//! it (the first key of each page, packed, until one page holds them all),
//! like a leveldb table's index block but fixed-width, so a lookup reads
//! the root, one fence page per level and the data pages of its key: three
//! to four 4 KiB reads for a rare host in a segment of a million rows.
//!
//! # Why this and not Parquet
//!
//! A Parquet file per capture file, sorted by key with page statistics,
//! would let DuckDB read the local index directly; but a point lookup in
//! one costs its footer (column chunk metadata of every row group), the
//! column and offset indexes, and decoding whole pages of several columns,
//! per file per query. Measured on this project's machine (see
//! `benches/results/keys-format-*.md`), the fixed-width paged table answers a
//! rare host with fewer bytes and less CPU; the fleet's Parquet table is
//! made from these indexes instead (`query::fleet`), with the same
//! exactness.
//!
//! # Reading
//!
//! [`KeyIndex`] opens a `.kdx` (its segment headers; torn or foreign
//! segments are left out), answers a filter's [`Needs`] per segment with
//! [`Hit`]s (block, offset range, frames), and reads block entries by
//! number. The index of a file being written covers the segments written so
//! far; the blocks after them are found through the `.idx` from
//! [`SegmentHeader::idx_next`] on (fresh: every flushed block is queryable).
//! A final segment records the capture's length: a capture whose length
//! differs (repaired, rewritten) has a stale `.kdx`, which is not used.

mod build;
mod read;

pub use build::{build_segment, SegmentInput};
pub(crate) use read::KeptSet;
pub use read::{Hit, KeyIndex, Segment};
pub use wiretape_filter::flow::Needs;

use wiretape_filter::flow::FrameKeys;

/// The first 8 bytes of every segment.
pub const MAGIC: &[u8; 8] = b"WTKDX\x01\0\0";
/// Bytes of a page (and of a segment's header).
pub const PAGE: usize = 4096;
/// Bytes of every section page's header: the xxh32 of the rest of the
/// page, then (u16) the bytes used (data pages) or the items held (fence
/// and block pages), then two zero bytes. A page whose sum differs is an
/// error, never a silent miss: the planner then uses the `.idx`.
pub const PAGE_HEADER: usize = 8;
/// Room for items in a page after its header.
const PAGE_ROOM: usize = PAGE - PAGE_HEADER;
/// Bytes of a segment header's meaningful part (the rest of its page is 0).
const HEADER_USED: usize = 420;
/// Sections of a segment, in order.
pub const SECTIONS: usize = 5;
/// The `BLOCKS` section.
pub const S_BLOCKS: usize = 0;
/// The `HOST4` section.
pub const S_HOST4: usize = 1;
/// The `HOST6` section.
pub const S_HOST6: usize = 2;
/// The `PORT` section.
pub const S_PORT: usize = 3;
/// The `OTHER` section (EtherTypes, VLAN ids, protocols).
pub const S_OTHER: usize = 4;
/// Key bytes of each section (BLOCKS: none, it is a plain array).
const KEY_WIDTH: [usize; SECTIONS] = [0, 4, 16, 2, 3];
/// Fence levels at most (4 KiB pages of 2-byte keys: 2048^6 pages).
const MAX_LEVELS: usize = 6;
/// `OTHER` keys: the kind byte.
const K_ETHERTYPE: u8 = 0;
const K_VLAN: u8 = 1;
const K_PROTO: u8 = 2;
/// Flag: the last segment of a finished file.
pub const F_FINAL: u32 = 1;

/// The path of the key index of `capture`: `<capture>.kdx`.
pub fn path_for(capture: &std::path::Path) -> std::path::PathBuf {
    crate::naming::keys_path(capture)
}

/// Where one section is in its segment, and its shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Section {
    /// Byte offset from the segment's start (a page boundary).
    pub offset: u64,
    /// Data pages (BLOCKS: pages of the entry array).
    pub pages: u32,
    /// Records (BLOCKS: entries).
    pub records: u64,
    /// Distinct keys.
    pub keys: u64,
    /// Fence levels above the data (0: one data page or none).
    pub levels: u32,
    /// Pages of each fence level, lowest first.
    pub level_pages: [u32; MAX_LEVELS],
}

/// A segment's header page.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Flags ([`F_FINAL`]).
    pub flags: u32,
    /// Bytes of the segment, header included (whole pages).
    pub seg_len: u64,
    /// The first block (its number among the file's `.idx` entries).
    pub block0: u64,
    /// Blocks covered.
    pub nblocks: u64,
    /// Stamp of its first frame, UTC ns.
    pub first_ns: u64,
    /// Stamp of its last frame.
    pub last_ns: u64,
    /// Frames in its blocks.
    pub frames: u64,
    /// Rows indexed.
    pub rows: u64,
    /// Byte offset in the `.idx` of the entry of the block after its last
    /// one (0: not known).
    pub idx_next: u64,
    /// A final segment: the capture's length when it was written.
    pub capture_len: u64,
    /// Bytes of each `BLOCKS` entry (32, or 56 in a compressed file's).
    pub entry_len: u32,
    /// The capture's link type.
    pub linktype: u32,
    /// The sections.
    pub sections: [Section; SECTIONS],
}

impl SegmentHeader {
    /// Whether this is the last segment of a finished file.
    pub fn is_final(&self) -> bool {
        self.flags & F_FINAL != 0
    }

    /// The header page.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; PAGE];
        b[..8].copy_from_slice(MAGIC);
        let mut w = Put { b: &mut b, at: 8 };
        w.u32(PAGE as u32);
        w.u32(self.flags);
        for v in [
            self.seg_len,
            self.block0,
            self.nblocks,
            self.first_ns,
            self.last_ns,
            self.frames,
            self.rows,
            self.idx_next,
            self.capture_len,
        ] {
            w.u64(v);
        }
        w.u32(self.entry_len);
        w.u32(self.linktype);
        for s in &self.sections {
            w.u64(s.offset);
            w.u32(s.pages);
            w.u32(s.levels);
            w.u64(s.records);
            w.u64(s.keys);
            for p in s.level_pages {
                w.u32(p);
            }
            w.u32(0);
            w.u32(0);
        }
        let at = w.at;
        debug_assert!(at + 4 <= HEADER_USED);
        let sum = xxh32(&b[..HEADER_USED - 4]);
        b[HEADER_USED - 4..HEADER_USED].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Reads a header page; None if it is not one (magic, checksum, sizes).
    pub fn decode(b: &[u8]) -> Option<SegmentHeader> {
        if b.len() < HEADER_USED || &b[..8] != MAGIC {
            return None;
        }
        let sum = u32::from_le_bytes(b[HEADER_USED - 4..HEADER_USED].try_into().ok()?);
        if xxh32(&b[..HEADER_USED - 4]) != sum {
            return None;
        }
        let mut r = Get { b, at: 8 };
        if r.u32()? as usize != PAGE {
            return None;
        }
        let mut h = SegmentHeader {
            flags: r.u32()?,
            seg_len: r.u64()?,
            block0: r.u64()?,
            nblocks: r.u64()?,
            first_ns: r.u64()?,
            last_ns: r.u64()?,
            frames: r.u64()?,
            rows: r.u64()?,
            idx_next: r.u64()?,
            capture_len: r.u64()?,
            entry_len: r.u32()?,
            linktype: r.u32()?,
            ..SegmentHeader::default()
        };
        for s in &mut h.sections {
            s.offset = r.u64()?;
            s.pages = r.u32()?;
            s.levels = r.u32()?;
            s.records = r.u64()?;
            s.keys = r.u64()?;
            for p in &mut s.level_pages {
                *p = r.u32()?;
            }
            r.u32()?;
            r.u32()?;
        }
        let b = &h.sections[S_BLOCKS];
        let sane = h.seg_len >= PAGE as u64
            && h.seg_len.is_multiple_of(PAGE as u64)
            && (h.entry_len == 32 || h.entry_len == 56)
            && b.records == h.nblocks
            && h.nblocks <= b.pages as u64 * (PAGE_ROOM as u64 / h.entry_len.max(1) as u64)
            && h.sections.iter().all(|s| {
                s.offset.is_multiple_of(PAGE as u64)
                    && s.levels as usize <= MAX_LEVELS
                    && s.offset + section_pages(s) * PAGE as u64 <= h.seg_len
            });
        sane.then_some(h)
    }
}

/// Bytes before each page copied into a header page ([`embedded_pages`]):
/// the section (u8, never `S_BLOCKS`: 0 ends the list), the page's number
/// in its section (u32), its used bytes (u16).
const EMBED_HEAD: usize = 7;

/// The page a lookup in section `s` reads first: its root fence page (the
/// top level has one), or its only data page. None: an empty section.
fn root_page(s: &Section) -> Option<u64> {
    match s.levels as usize {
        _ if s.pages == 0 => None,
        0 => (s.pages == 1).then_some(0),
        l if l <= MAX_LEVELS => Some(
            s.pages as u64
                + s.level_pages[..l - 1]
                    .iter()
                    .map(|&p| p as u64)
                    .sum::<u64>(),
        ),
        _ => None,
    }
}

/// The section pages a header page holds copies of, after its fields
/// (written since the flat sidecar layout; older headers hold zeros there,
/// so none, and older readers never look there): (section, page number in
/// it, the whole page, its sum checked). A copy that does not check is
/// left out (the page is then read from its place).
fn embedded_pages(b: &[u8]) -> Vec<(usize, u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = HEADER_USED;
    while at + EMBED_HEAD <= b.len().min(PAGE) {
        let sec = b[at] as usize;
        if sec == S_BLOCKS || sec >= SECTIONS {
            break;
        }
        let p = u32::from_le_bytes(b[at + 1..at + 5].try_into().unwrap_or_default()) as u64;
        let used = u16::from_le_bytes([b[at + 5], b[at + 6]]) as usize;
        let Some(bytes) = b.get(at + EMBED_HEAD..at + EMBED_HEAD + used) else {
            break;
        };
        let mut page = bytes.to_vec();
        page.resize(PAGE, 0);
        if unseal(&page).is_some() {
            out.push((sec, p, page));
        }
        at += EMBED_HEAD + used;
    }
    out
}

/// Pages a section takes, fences included.
fn section_pages(s: &Section) -> u64 {
    s.pages as u64
        + s.level_pages[..(s.levels as usize).min(MAX_LEVELS)]
            .iter()
            .map(|&p| p as u64)
            .sum::<u64>()
}

/// Writes a section page's header: `n` (bytes used or items) and the sum.
fn seal(page: &mut [u8], n: usize) {
    page[4..6].copy_from_slice(&(n as u16).to_le_bytes());
    page[6..8].copy_from_slice(&[0, 0]);
    let sum = xxh32(&page[4..]);
    page[..4].copy_from_slice(&sum.to_le_bytes());
}

/// A section page's `n` if its sum holds.
fn unseal(page: &[u8]) -> Option<usize> {
    let sum = u32::from_le_bytes(page.get(..4)?.try_into().ok()?);
    (page.len() == PAGE && xxh32(&page[4..]) == sum)
        .then(|| u16::from_le_bytes([page[4], page[5]]) as usize)
}

fn xxh32(b: &[u8]) -> u32 {
    use std::hash::Hasher;
    let mut x = twox_hash::XxHash32::with_seed(0x5754_4b44);
    x.write(b);
    x.finish() as u32
}

struct Put<'a> {
    b: &'a mut [u8],
    at: usize,
}

impl Put<'_> {
    fn u32(&mut self, v: u32) {
        self.b[self.at..self.at + 4].copy_from_slice(&v.to_le_bytes());
        self.at += 4;
    }
    fn u64(&mut self, v: u64) {
        self.b[self.at..self.at + 8].copy_from_slice(&v.to_le_bytes());
        self.at += 8;
    }
}

struct Get<'a> {
    b: &'a [u8],
    at: usize,
}

impl Get<'_> {
    fn u32(&mut self) -> Option<u32> {
        let v = u32::from_le_bytes(self.b.get(self.at..self.at + 4)?.try_into().ok()?);
        self.at += 4;
        Some(v)
    }
    fn u64(&mut self) -> Option<u64> {
        let v = u64::from_le_bytes(self.b.get(self.at..self.at + 8)?.try_into().ok()?);
        self.at += 8;
        Some(v)
    }
}

/// Appends `v` as a LEB128 varint.
fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 varint at `*at` (None: cut short or longer than a u64).
fn get_var(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*at)?;
        *at += 1;
        v |= ((x & 0x7f) as u64) << shift;
        if x & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Ranges a record holds at most (a flow's or a key's places in a block
/// that need more go into several records): a record always fits a page.
const RANGES_PER_RECORD: usize = 128;

/// Appends a record's places: block delta, frames, the number of ranges,
/// then each range as its start after the previous range's end (the first:
/// after 0) and its span (last record's start minus first's).
fn put_record(out: &mut Vec<u8>, delta: u32, frames: u32, ranges: &[(u32, u32)]) {
    put_var(out, delta as u64);
    put_var(out, frames as u64);
    put_var(out, ranges.len() as u64);
    let mut end = 0u32;
    for &(a, b) in ranges {
        put_var(out, a.wrapping_sub(end) as u64);
        put_var(out, b.wrapping_sub(a) as u64);
        end = b;
    }
}

/// Reads [`put_record`]'s fields: (delta, frames), the ranges into `ranges`
/// (cleared first). None if they are not such (ranges not ascending,
/// offsets beyond u32, more ranges than a record holds).
fn get_record(b: &[u8], at: &mut usize, ranges: &mut Vec<(u32, u32)>) -> Option<(u64, u64)> {
    let delta = get_var(b, at)?;
    let frames = get_var(b, at)?;
    let n = get_var(b, at)?;
    if n > RANGES_PER_RECORD as u64 {
        return None;
    }
    ranges.clear();
    let mut end = 0u64;
    for i in 0..n {
        let a = end.checked_add(get_var(b, at)?)?;
        let z = a.checked_add(get_var(b, at)?)?;
        if z > u32::MAX as u64 || (i > 0 && a <= end) {
            return None;
        }
        ranges.push((a as u32, z as u32));
        end = z;
    }
    Some((delta, frames))
}

/// A key as the sections sort it: big-endian bytes of its width, as a
/// number.
fn key_from(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| a << 8 | x as u128)
}

fn put_key(out: &mut Vec<u8>, k: u128, width: usize) {
    out.extend_from_slice(&k.to_be_bytes()[16 - width..]);
}

/// The tags of a host record's payload in the plain IPv4 form: TCP, UDP
/// (the protocol in the tag), any other protocol (a byte of it follows).
const PLAIN4_TCP: u8 = 0xfd;
const PLAIN4_UDP: u8 = 0xfe;
const PLAIN4: u8 = 0xff;

/// Appends the keys of a row filed under `me` (an address of the row's),
/// without `me` itself: a plain IPv4 row as its protocol, peer and ports
/// (9 bytes for TCP and UDP); any other as counts and lists.
fn put_payload(out: &mut Vec<u8>, k: &FrameKeys, me: Me) {
    let plain = k.ether_types() == [0x0800]
        && k.vlans().is_empty()
        && k.proto().is_some()
        && k.ip4().len() == 2
        && k.ip6().is_empty()
        && k.ports().len() == 2;
    if let (true, Me::V4(a)) = (plain, me) {
        let v4 = k.ip4();
        let peer = if v4[0] == a { v4[1] } else { v4[0] };
        let p = k.ports();
        put_plain4(out, k.proto().unwrap_or(0), peer, p[0], p[1]);
        return;
    }
    let mut v4: Vec<u32> = k.ip4().to_vec();
    let mut v6: Vec<u128> = k.ip6().to_vec();
    match me {
        Me::V4(a) => {
            if let Some(i) = v4.iter().position(|&x| x == a) {
                v4.remove(i);
            }
        }
        Me::V6(a) => {
            if let Some(i) = v6.iter().position(|&x| x == a) {
                v6.remove(i);
            }
        }
    }
    let t = k.ether_types().len() as u8
        | (k.vlans().len() as u8) << 2
        | u8::from(k.proto().is_some()) << 4
        | (k.ports().len() as u8) << 5;
    out.push(t);
    out.push(v4.len() as u8 | (v6.len() as u8) << 2);
    k.ether_types()
        .iter()
        .for_each(|e| out.extend_from_slice(&e.to_le_bytes()));
    k.vlans()
        .iter()
        .for_each(|e| out.extend_from_slice(&e.to_le_bytes()));
    if let Some(p) = k.proto() {
        out.push(p);
    }
    v4.iter()
        .for_each(|e| out.extend_from_slice(&e.to_le_bytes()));
    v6.iter()
        .for_each(|e| out.extend_from_slice(&e.to_le_bytes()));
    k.ports()
        .iter()
        .for_each(|e| out.extend_from_slice(&e.to_le_bytes()));
}

/// Appends a plain IPv4 row's payload (see [`put_payload`]).
fn put_plain4(out: &mut Vec<u8>, proto: u8, peer: u32, sp: u16, dp: u16) {
    match proto {
        6 => out.push(PLAIN4_TCP),
        17 => out.push(PLAIN4_UDP),
        p => out.extend_from_slice(&[PLAIN4, p]),
    }
    out.extend_from_slice(&peer.to_le_bytes());
    out.extend_from_slice(&sp.to_le_bytes());
    out.extend_from_slice(&dp.to_le_bytes());
}

/// The address a host record is filed under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Me {
    V4(u32),
    V6(u128),
}

/// Reads [`put_payload`]'s bytes at `*at` back into the row's keys (`me`
/// added back). None if they are not such.
fn get_payload(b: &[u8], at: &mut usize, me: Me) -> Option<FrameKeys> {
    fn take<'a>(b: &'a [u8], at: &mut usize, n: usize) -> Option<&'a [u8]> {
        let s = b.get(*at..at.checked_add(n)?)?;
        *at += n;
        Some(s)
    }
    let t = *b.get(*at)?;
    *at += 1;
    if t >= PLAIN4_TCP {
        let Me::V4(a) = me else { return None };
        let proto = match t {
            PLAIN4_TCP => 6,
            PLAIN4_UDP => 17,
            _ => take(b, at, 1)?[0],
        };
        let p = take(b, at, 8)?;
        let peer = u32::from_le_bytes(p[0..4].try_into().ok()?);
        let ports = [
            u16::from_le_bytes(p[4..6].try_into().ok()?),
            u16::from_le_bytes(p[6..8].try_into().ok()?),
        ];
        return FrameKeys::from_parts(&[0x0800], &[], Some(proto), &[a, peer], &[], &ports);
    }
    let u = *b.get(*at)?;
    *at += 1;
    let (n_eth, n_vlan, has_proto, n_port) = (
        (t & 3) as usize,
        (t >> 2 & 3) as usize,
        t >> 4 & 1 == 1,
        (t >> 5 & 3) as usize,
    );
    let (n_v4, n_v6) = ((u & 3) as usize, (u >> 2 & 3) as usize);
    if t >> 7 != 0 || u >> 4 != 0 {
        return None;
    }
    let u16s = |at: &mut usize, n: usize| -> Option<Vec<u16>> {
        take(b, at, 2 * n).map(|s| {
            s.chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect()
        })
    };
    let eth = u16s(at, n_eth)?;
    let vlans = u16s(at, n_vlan)?;
    let proto = if has_proto {
        Some(take(b, at, 1)?[0])
    } else {
        None
    };
    let mut v4: Vec<u32> = take(b, at, 4 * n_v4)?
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut v6: Vec<u128> = take(b, at, 16 * n_v6)?
        .chunks_exact(16)
        .map(|c| u128::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let ports = u16s(at, n_port)?;
    match me {
        Me::V4(a) => v4.insert(0, a),
        Me::V6(a) => v6.insert(0, a),
    }
    FrameKeys::from_parts(&eth, &vlans, proto, &v4, &v6, &ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_payloads_go_back_and_forth() {
        let mut b = Vec::new();
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            b.clear();
            put_var(&mut b, v);
            let mut at = 0;
            assert_eq!(get_var(&b, &mut at), Some(v));
            assert_eq!(at, b.len());
        }
        let plain = FrameKeys::from_parts(
            &[0x0800],
            &[],
            Some(6),
            &[0x0a00_0001, 0x0a00_0002],
            &[],
            &[443, 51000],
        )
        .unwrap();
        for me in [Me::V4(0x0a00_0001), Me::V4(0x0a00_0002)] {
            b.clear();
            put_payload(&mut b, &plain, me);
            assert_eq!(b.len(), 9);
            let mut at = 0;
            let back = get_payload(&b, &mut at, me).unwrap();
            assert_eq!(at, b.len());
            let mut want: Vec<_> = Vec::new();
            plain.for_each(|k| want.push(k));
            let mut got: Vec<_> = Vec::new();
            back.for_each(|k| got.push(k));
            want.sort();
            got.sort();
            assert_eq!(got, want);
        }
        let odd = FrameKeys::from_parts(
            &[0x8100, 0x86dd],
            &[7],
            Some(17),
            &[],
            &[1, 2 << 100],
            &[53],
        )
        .unwrap();
        b.clear();
        put_payload(&mut b, &odd, Me::V6(2 << 100));
        let mut at = 0;
        let back = get_payload(&b, &mut at, Me::V6(2 << 100)).unwrap();
        for k in [
            wiretape_filter::flow::Key::Vlan(7),
            wiretape_filter::flow::Key::Ip6(1),
            wiretape_filter::flow::Key::Ip6(2 << 100),
            wiretape_filter::flow::Key::Port(53),
            wiretape_filter::flow::Key::EtherType(0x86dd),
        ] {
            assert!(back.holds(&k), "{k:?}");
        }
        assert!(get_payload(&b[..b.len() - 1], &mut 0, Me::V6(2 << 100)).is_none());
    }

    #[test]
    fn headers_check_themselves() {
        let mut h = SegmentHeader {
            flags: F_FINAL,
            seg_len: 8 * PAGE as u64,
            block0: 3,
            nblocks: 9,
            first_ns: 10,
            last_ns: 20,
            frames: 99,
            rows: 12,
            idx_next: 1234,
            capture_len: 5678,
            entry_len: 32,
            linktype: 1,
            sections: [Section {
                offset: PAGE as u64,
                pages: 1,
                ..Section::default()
            }; SECTIONS],
        };
        h.sections[S_BLOCKS].records = 9;
        let b = h.encode();
        assert_eq!(SegmentHeader::decode(&b), Some(h));
        let mut bad = b.clone();
        bad[30] ^= 1;
        assert_eq!(SegmentHeader::decode(&bad), None);
    }
}

#[cfg(test)]
mod segment_tests {
    //! A segment built from rows and read back: lookups of every kind of
    //! key against a brute force over the rows, through several fence
    //! levels (a host section of thousands of pages).
    use super::*;
    use std::io::Write as _;
    use wiretape_filter::flow::{Key, KeysRow, Needs, Rows, SigRow};

    fn sig(proto: u8, src: u32, dst: u32, sp: u16, dp: u16) -> u128 {
        1 << 127
            | (proto as u128) << 96
            | ((src as u128) << 32 | dst as u128) << 32
            | ((sp as u32) << 16 | dp as u32) as u128
    }

    fn needs(alts: Vec<Vec<Key>>) -> Needs {
        // Needs has no public constructor: compile a filter of those keys.
        let mut parts = Vec::new();
        for alt in &alts {
            let mut p = Vec::new();
            for k in alt {
                p.push(match *k {
                    Key::Ip4(a) => format!("host {}", std::net::Ipv4Addr::from(a)),
                    Key::Port(x) => format!("port {x}"),
                    Key::Vlan(v) => format!("vlan {v}"),
                    Key::Proto(6) => "tcp".into(),
                    Key::Proto(17) => "udp".into(),
                    _ => unreachable!(),
                });
            }
            parts.push(format!("({})", p.join(" and ")));
        }
        let prog = wiretape_filter::compile(&parts.join(" or "), 1, 65535).unwrap();
        Needs::of(prog.insns()).unwrap()
    }

    #[test]
    fn lookups_through_several_fence_levels_match_a_brute_force() {
        // 150,000 rows over 150 blocks: the HOST4 section takes more than
        // a thousand pages, so two fence levels.
        let mut rows = Rows::default();
        let mut x = 7u64;
        let mut rnd = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            x >> 20
        };
        let blocks = 150u32;
        for b in 0..blocks {
            for k in 0..1000u32 {
                let src = 0x0a00_0000 | (rnd() % 200_000) as u32;
                let dst = 0xc0a8_0000 | (rnd() % 50) as u32;
                let (sp, dp) = (
                    1024 + (rnd() % 60000) as u16,
                    [80u16, 443, 53][(rnd() % 3) as usize],
                );
                let proto = if dp == 53 { 17 } else { 6 };
                rows.sig.push(SigRow {
                    sig: sig(proto, src, dst, sp, dp),
                    block: 5 + b,
                    first: k * 500,
                    last: k * 500 + (rnd() % 3) as u32 * 100,
                    frames: 1 + (rnd() % 3) as u32,
                });
            }
            // A tagged frame now and then.
            let keys = FrameKeys::from_parts(
                &[0x8100, 0x0800],
                &[42],
                Some(17),
                &[0x0a00_0001, 0x0a00_0002],
                &[],
                &[53, 5353],
            )
            .unwrap();
            rows.keys.push(KeysRow {
                keys,
                block: 5 + b,
                first: 7,
                last: 7,
                frames: 1,
            });
        }
        let mut blocks_bytes = Vec::new();
        for b in 0..blocks as u64 {
            let e = crate::index::Entry {
                offset: 24 + b * (1 << 20),
                first_ns: b * 1000,
                last_ns: b * 1000 + 999,
                count: 2001,
                flows: None,
                z: None,
            };
            blocks_bytes.extend_from_slice(&e.fixed_bytes());
        }
        let d = std::env::temp_dir().join(format!("wt-keys-seg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let cap = d.join("c.pcap");
        std::fs::write(&cap, b"").unwrap();
        let input = SegmentInput {
            path: path_for(&cap),
            first: true,
            block0: 5,
            blocks: blocks_bytes,
            entry_len: 32,
            rows,
            idx_next: 0,
            last_of: None,
            linktype: 1,
        };
        let bytes = build_segment(&input);
        // A first segment of blocks 0-4 (no rows), then the big one at block 5.
        let mut f = std::fs::File::create(path_for(&cap)).unwrap();
        let empty = SegmentInput {
            path: path_for(&cap),
            blocks: (0..5u64)
                .flat_map(|b| {
                    crate::index::Entry {
                        offset: b,
                        ..Default::default()
                    }
                    .fixed_bytes()
                    .to_vec()
                })
                .collect(),
            entry_len: 32,
            ..SegmentInput::default()
        };
        f.write_all(&build_segment(&empty)).unwrap();
        f.write_all(&bytes).unwrap();
        drop(f);
        let k = KeyIndex::open(&cap, &crate::ReadOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(k.segments().len(), 2);
        let seg = &k.segments()[1];
        let h4 = &seg.header.sections[S_HOST4];
        assert!(h4.levels >= 2, "{h4:?}");
        assert_eq!(
            h4.records,
            input.rows.sig.len() as u64 * 2 + blocks as u64 * 2
        );
        let rows = &input.rows;
        let brute = |alt: &[Key]| -> Vec<(u64, u32)> {
            let mut v: Vec<(u64, u32)> = rows
                .sig
                .iter()
                .map(|r| (FrameKeys::from_sig(r.sig), r.block, r.first))
                .chain(rows.keys.iter().map(|r| (r.keys, r.block, r.first)))
                .filter(|(k, _, _)| alt.iter().all(|x| k.holds(x)))
                .map(|(_, b, f)| (b as u64, f))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        for probe in 0..40u32 {
            let a = 0x0a00_0000 | ((probe * 4999) % 200_000);
            let alt = vec![Key::EtherType(0x0800), Key::Ip4(a)];
            let hits = k.select(seg, &needs(vec![vec![Key::Ip4(a)]])).unwrap();
            let mut got: Vec<(u64, u32)> = hits.iter().map(|h| (h.block, h.first)).collect();
            got.dedup();
            assert_eq!(got, brute(&alt), "host {a:x}");
            let alt2 = vec![Key::EtherType(0x0800), Key::Ip4(a), Key::Port(443)];
            let hits = k
                .select(seg, &needs(vec![vec![Key::Ip4(a), Key::Port(443)]]))
                .unwrap();
            let mut got: Vec<(u64, u32)> = hits.iter().map(|h| (h.block, h.first)).collect();
            got.dedup();
            assert_eq!(got, brute(&alt2), "host {a:x} and port 443");
        }
        // Hull postings: the tagged frames' VLAN, every block.
        let hits = k.select(seg, &needs(vec![vec![Key::Vlan(42)]])).unwrap();
        assert_eq!(hits.len(), blocks as usize);
        assert!(hits.iter().all(|h| h.first == 7 && h.last == 7));
        // Port 53 over UDP: block by block, where the places of both keys
        // overlap: every such row's first frame is in one, and the places
        // do not cover the blocks whole (rows are 500 bytes apart, a third
        // of them on port 53).
        let hits = k
            .select(seg, &needs(vec![vec![Key::Proto(17), Key::Port(53)]]))
            .unwrap();
        let mut blocks_hit: Vec<u64> = hits.iter().map(|h| h.block).collect();
        blocks_hit.dedup();
        assert_eq!(blocks_hit.len(), blocks as usize);
        for (b, first) in brute(&[Key::Proto(17), Key::Port(53)]) {
            assert!(
                hits.iter()
                    .any(|h| h.block == b && h.first <= first && first <= h.last),
                "block {b} offset {first} in no place"
            );
        }
        let covered: u64 = hits.iter().map(|h| (h.last - h.first) as u64).sum();
        assert!(
            covered < blocks as u64 * 1000 * 500,
            "{covered} bytes of places"
        );
        // Entries by number.
        let es = k.entries_at(seg, &[0, 1, 100, 149]).unwrap();
        assert_eq!(
            es.iter().map(|e| e.first_ns).collect::<Vec<_>>(),
            vec![0, 1000, 100_000, 149_000]
        );
        assert_eq!(k.entry(5 + 100).unwrap().unwrap().first_ns, 100_000);
        // One rare host's lookup: the two segments' header pages, the
        // root, one fence page per level below it and its data page(s).
        let k = KeyIndex::open(&cap, &crate::ReadOptions::default())
            .unwrap()
            .unwrap();
        let seg = &k.segments()[1];
        let a = 0x0a00_0000 | 12345;
        let hits = k.select(seg, &needs(vec![vec![Key::Ip4(a)]])).unwrap();
        assert_eq!(hits.len(), brute(&[Key::Ip4(a)]).len());
        // The header holds copies of the roots (HOST4's among them): the
        // root is not read again.
        let copies = embedded_pages(&bytes[..PAGE]);
        let root = root_page(h4).unwrap();
        let o = (h4.offset + root * PAGE as u64) as usize;
        assert!(copies
            .iter()
            .any(|(s, p, b)| (*s, *p) == (S_HOST4, root) && b[..] == bytes[o..o + PAGE]));
        let pages = k.bytes_read() / PAGE as u64;
        assert!(
            pages < 2 + h4.levels as u64 + 2,
            "{pages} pages read for one host"
        );
        // A header written before the copies (zeros after its fields):
        // the same hits, the roots read from their places.
        let mut old = std::fs::read(path_for(&cap)).unwrap();
        let at = seg.at as usize;
        old[at + HEADER_USED..at + PAGE].fill(0);
        std::fs::write(path_for(&cap), &old).unwrap();
        let k0 = KeyIndex::open(&cap, &crate::ReadOptions::default())
            .unwrap()
            .unwrap();
        let hits0 = k0
            .select(&k0.segments()[1], &needs(vec![vec![Key::Ip4(a)]]))
            .unwrap();
        assert_eq!(
            hits0
                .iter()
                .map(|h| (h.block, h.first, h.last))
                .collect::<Vec<_>>(),
            hits.iter()
                .map(|h| (h.block, h.first, h.last))
                .collect::<Vec<_>>()
        );
        assert!(k0.bytes_read() > k.bytes_read());
        // A server keeps the upper pages: after one reading of them, a
        // lookup of the same file reads only its data pages, and a changed
        // file (here longer) is read afresh.
        let fds = crate::kept::tests::fds_on;
        let kdx = std::path::absolute(path_for(&cap)).unwrap();
        let base = fds(&kdx);
        let server = crate::ReadOptions::new().with_kept_index_pages(64 << 20);
        let key = needs(vec![vec![Key::Ip4(a)]]);
        let warm = KeyIndex::open(&cap, &server).unwrap().unwrap();
        warm.read_upper().unwrap();
        assert!(warm.bytes_read() >= PAGE as u64 * (1 + h4.levels as u64));
        drop(warm);
        // Kept by those options (and their clones) only: other options
        // read the headers again.
        let other = KeyIndex::open(&cap, &crate::ReadOptions::default())
            .unwrap()
            .unwrap();
        assert!(other.bytes_read() >= PAGE as u64, "nothing shared");
        let k1 = KeyIndex::open(&cap, &server.clone()).unwrap().unwrap();
        assert_eq!(k1.bytes_read(), 0, "segment headers kept");
        let hits1 = k1.select(&k1.segments()[1], &key).unwrap();
        let pick = |h: &[Hit]| {
            h.iter()
                .map(|h| (h.block, h.first, h.last))
                .collect::<Vec<_>>()
        };
        assert_eq!(pick(&hits1), pick(&hits));
        let data = k1.bytes_read() / PAGE as u64;
        assert!(data >= 1 && data < pages, "{data} data pages of {pages}");
        drop((k1, other));
        // And the file: opened once by those options, kept open (beside
        // the indexes opened above with other options, still open).
        assert_eq!(fds(&kdx), base + 1, "the .kdx kept open once");
        let k3 = KeyIndex::open(&cap, &server).unwrap().unwrap();
        assert_eq!(
            pick(&k3.select(&k3.segments()[1], &key).unwrap()),
            pick(&hits)
        );
        assert_eq!(fds(&kdx), base + 1, "not opened again");
        drop(k3);
        old.extend_from_slice(&[0u8; PAGE]);
        std::fs::write(path_for(&cap), &old).unwrap();
        let k2 = KeyIndex::open(&cap, &server).unwrap().unwrap();
        assert!(k2.bytes_read() >= PAGE as u64, "a changed file read again");
        assert_eq!(
            pick(&k2.select(&k2.segments()[1], &key).unwrap()),
            pick(&hits)
        );
        drop(k2);
        assert_eq!(fds(&kdx), base + 1);
        drop(server);
        assert_eq!(fds(&kdx), base, "closed with the options");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
