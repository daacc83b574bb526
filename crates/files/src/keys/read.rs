//! Reading the key index: [`KeyIndex`] (its segments), block entries by
//! number, and a filter's [`Needs`] answered as [`Hit`]s.

use super::*;
use crate::error::StorageError;
use crate::index::Entry;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use wiretape_filter::flow::{FlowSet, FrameKeys, Key};

/// One segment of a `.kdx`: where it starts in the file, and its header.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Byte offset of its header page in the `.kdx`.
    pub at: u64,
    /// Its header.
    pub header: SegmentHeader,
}

impl Segment {
    /// The blocks it covers (numbers among the file's `.idx` entries).
    pub fn blocks(&self) -> std::ops::Range<u64> {
        self.header.block0..self.header.block0 + self.header.nblocks
    }
}

/// A place that may hold a frame the filter accepts: in block `block`, the
/// records starting from `first` to `last` bytes after the block's first
/// record (both inclusive: `last` is where the last such record starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    /// The block (its number among the file's `.idx` entries).
    pub block: u64,
    /// Offset of the first record, from the block's first record.
    pub first: u32,
    /// Offset of the last record, likewise.
    pub last: u32,
    /// Frames of the place that may match (a bound: frames of rows
    /// holding every key of an alternative, or the fewest frames of any of
    /// its keys in the block).
    pub frames: u64,
}

/// Values of a range key (a net, a port range) above which it is looked
/// up only when nothing narrower is at hand: a wide range reads a large
/// part of a table.
const WIDE: u128 = 4096;

/// What [`KeyIndex::scan`] calls per record: (key, its places, the payload
/// bytes, where the next record starts); None stops the walk.
type EachRecord<'a> = dyn FnMut(u128, Posting, &[u8], &mut usize) -> Option<()> + 'a;

/// An open `.kdx`.
#[derive(Debug)]
pub struct KeyIndex {
    path: PathBuf,
    /// Shared with the reader's options when they keep it open.
    file: std::sync::Arc<File>,
    len: u64,
    segments: Vec<Segment>,
    read: std::cell::Cell<u64>,
    /// Single pages read so far (checked), by offset: a query's lookups
    /// share roots, fences and the small `OTHER` table (a Stenographer
    /// query asks the tag EtherTypes for every condition).
    cache: std::cell::RefCell<HashMap<u64, Vec<u8>>>,
    /// The file's identity (inode, length, mtime) when the reader's options
    /// keep upper pages ([`crate::ReadOptions::with_kept_index_pages`]):
    /// what they kept of this file is reused only for the same one.
    identity: Option<Identity>,
    /// What the reader's options keep, when they keep upper pages: this
    /// file's are put there when it is dropped.
    kept: Option<std::sync::Arc<crate::kept::Kept>>,
    /// Offsets of the upper pages (header roots, fence levels) read.
    upper: std::cell::RefCell<Vec<u64>>,
}

/// A `.kdx`'s inode, length and mtime (ns).
type Identity = (u64, u64, i128);

/// What a long-running reader keeps of one `.kdx` between queries.
#[derive(Debug)]
struct Kept {
    identity: Identity,
    segments: Vec<Segment>,
    pages: HashMap<u64, Vec<u8>>,
}

/// The upper pages of the key indexes a reader opened so far, when its
/// [`crate::ReadOptions`] keep them
/// ([`crate::ReadOptions::with_kept_index_pages`]).
#[derive(Debug)]
pub(crate) struct KeptSet {
    cap: usize,
    used: usize,
    by_path: HashMap<PathBuf, Kept>,
}

impl KeptSet {
    /// Nothing kept yet, at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> Self {
        KeptSet {
            cap,
            used: 0,
            by_path: HashMap::new(),
        }
    }

    /// The bytes it may keep.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }
}

impl Drop for KeyIndex {
    fn drop(&mut self) {
        let (Some(identity), Some(kept)) = (self.identity, self.kept.take()) else {
            return;
        };
        let Some(pages) = kept.index_pages.as_ref() else {
            return;
        };
        let mut set = pages.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = set.by_path.get(&self.path) {
            if old.identity != identity {
                let gone = (old.pages.len() + old.segments.len()) * PAGE;
                set.used = set.used.saturating_sub(gone);
                set.by_path.remove(&self.path);
            }
        }
        let cache = self.cache.get_mut();
        let upper = self.upper.get_mut();
        let KeptSet { cap, used, by_path } = &mut *set;
        // Full (files gone since stay counted until then): start over,
        // so memory stays under the cap and the files of now are kept.
        let need = (upper.len() + self.segments.len()) * PAGE;
        if !by_path.contains_key(&self.path) && *used + need > *cap {
            by_path.clear();
            *used = 0;
        }
        let k = by_path.entry(self.path.clone()).or_insert_with(|| {
            // A segment header counted as the page it was read from.
            *used += self.segments.len() * PAGE;
            Kept {
                identity,
                segments: self.segments.clone(),
                pages: HashMap::new(),
            }
        });
        for at in upper.iter() {
            if *used + PAGE > *cap {
                break;
            }
            if let (false, Some(p)) = (k.pages.contains_key(at), cache.get(at)) {
                k.pages.insert(*at, p.clone());
                *used += PAGE;
            }
        }
    }
}

/// Single pages a [`KeyIndex`] keeps at most.
const CACHE_PAGES: usize = 256;

/// A record's places: its block (segment-relative), frames, and ranges
/// (first and last record's offsets from the block's first record).
#[derive(Clone, Debug, Default)]
struct Posting {
    block: u32,
    frames: u32,
    ranges: Vec<(u32, u32)>,
}

impl KeyIndex {
    /// Opens the key index of `capture` (where `opts` says it is) and
    /// reads its segment headers. None: there is none. Segments are taken in order while they follow
    /// each other (blocks consecutive, none after a final one); a torn or
    /// foreign tail ends the list.
    pub fn open(
        capture: &Path,
        opts: &crate::ReadOptions,
    ) -> Result<Option<KeyIndex>, StorageError> {
        // Where `keys_path` says, with one `stat` (its own, then the
        // open's, were two): the current layout's path, else the old one's.
        let (mut path, old) = crate::naming::sidecar_choices(
            capture,
            ".kdx",
            opts.steno_sidecar_dir(),
            Some(opts.kept()),
        );
        // A long-running reader's options keep it open between queries.
        let mut opened = opts.kept().open(&path);
        if let (Err(e), Some(old)) = (&opened, old) {
            if e.kind() == std::io::ErrorKind::NotFound {
                path = old;
                opened = opts.kept().open(&path);
            }
        }
        let (file, meta) = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StorageError::Read { path, source }),
        };
        let len = meta.len();
        let identity = {
            use std::os::unix::fs::MetadataExt;
            let m = &meta;
            opts.kept().index_pages.is_some().then(|| {
                (
                    m.ino(),
                    m.len(),
                    m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
                )
            })
        };
        let mut k = KeyIndex {
            path,
            file,
            len,
            segments: Vec::new(),
            read: std::cell::Cell::new(0),
            cache: Default::default(),
            identity,
            kept: identity.map(|_| opts.kept_arc().clone()),
            upper: Default::default(),
        };
        let kept = k.kept.clone();
        let pages = kept.as_ref().and_then(|kept| kept.index_pages.as_ref());
        if let (Some(id), Some(pages)) = (identity, pages) {
            let g = pages.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(kept) = g.by_path.get(&k.path).filter(|kept| kept.identity == id) {
                k.segments = kept.segments.clone();
                k.cache.get_mut().extend(kept.pages.clone());
                drop(g);
                return Ok(Some(k));
            }
        }
        Ok(Some(k.with_segments()))
    }

    fn with_segments(mut self) -> Self {
        let mut at = 0u64;
        let mut next_block = 0u64;
        let mut page = vec![0u8; PAGE];
        while at + PAGE as u64 <= self.len {
            if self.read_at(&mut page, at).is_err() {
                break;
            }
            let Some(h) = SegmentHeader::decode(&page) else {
                break;
            };
            if at + h.seg_len > self.len || h.block0 < next_block {
                break;
            }
            next_block = h.block0 + h.nblocks;
            // The root pages the header holds: a lookup's first read saved.
            for (sec, p, bytes) in embedded_pages(&page) {
                let s = &h.sections[sec];
                if p < section_pages(s) {
                    let abs = at + s.offset + p * PAGE as u64;
                    self.cache.get_mut().insert(abs, bytes);
                    self.upper.get_mut().push(abs);
                }
            }
            let last = h.is_final();
            at += h.seg_len;
            self.segments.push(Segment {
                at: at - h.seg_len,
                header: h,
            });
            if last {
                break;
            }
        }
        self
    }

    /// Reads every fence level of every section (one read each, after
    /// the data pages), for the reader's options to keep when this is
    /// dropped: what a server does once per file, as Stenographer's opens
    /// each leveldb table and holds its index block. Already kept: nothing
    /// read.
    pub fn read_upper(&self) -> Result<(), StorageError> {
        for seg in &self.segments {
            for s in &seg.header.sections {
                let n: u64 = s.level_pages[..s.levels as usize]
                    .iter()
                    .map(|&p| p as u64)
                    .sum();
                let at = seg.at + s.offset + s.pages as u64 * PAGE as u64;
                if n == 0 || self.cache.borrow().contains_key(&at) {
                    continue;
                }
                let bytes = self.pages(seg, s.offset, s.pages as u64, n)?;
                let mut c = self.cache.borrow_mut();
                let mut u = self.upper.borrow_mut();
                for (i, p) in bytes.chunks_exact(PAGE).enumerate() {
                    let o = at + (i * PAGE) as u64;
                    c.insert(o, p.to_vec());
                    u.push(o);
                }
            }
        }
        Ok(())
    }

    /// The `.kdx`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its segments, in block order (there may be gaps between them: a
    /// segment the builder could not take in time).
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether it is complete for a finished capture of `capture_len` bytes:
    /// segments from block 0 without gaps up to a final one that was
    /// written for a capture of that length.
    pub fn complete_for(&self, capture_len: u64) -> bool {
        let mut next = 0;
        for s in &self.segments {
            if s.header.block0 != next {
                return false;
            }
            next += s.header.nblocks;
        }
        self.segments
            .last()
            .is_some_and(|s| s.header.is_final() && s.header.capture_len == capture_len)
    }

    /// Bytes read from the `.kdx` so far.
    pub fn bytes_read(&self) -> u64 {
        self.read.get()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> Result<(), StorageError> {
        self.file
            .read_exact_at(buf, at)
            .map_err(|source| StorageError::Read {
                path: self.path.clone(),
                source,
            })?;
        self.read.set(self.read.get() + buf.len() as u64);
        Ok(())
    }

    fn corrupt(&self, seg: &Segment, why: &str) -> StorageError {
        StorageError::Corrupt {
            path: self.path.clone(),
            offset: seg.at,
            why: format!("key index segment: {why}; `wiretape index --force` rebuilds it"),
        }
    }

    /// Reads `pages` pages of a section from its page `p0` on, each
    /// checked against its sum.
    fn pages(&self, seg: &Segment, off: u64, p0: u64, n: u64) -> Result<Vec<u8>, StorageError> {
        let at = seg.at + off + p0 * PAGE as u64;
        let len = n * PAGE as u64;
        if at + len > seg.at + seg.header.seg_len {
            return Err(self.corrupt(seg, "a page beyond the segment"));
        }
        if n == 1 {
            if let Some(p) = self.cache.borrow().get(&at) {
                return Ok(p.clone());
            }
        }
        let mut b = vec![0u8; len as usize];
        self.read_at(&mut b, at)?;
        if b.chunks_exact(PAGE).any(|p| unseal(p).is_none()) {
            return Err(self.corrupt(seg, "a page whose checksum does not match"));
        }
        if n == 1 {
            let mut c = self.cache.borrow_mut();
            if c.len() < CACHE_PAGES {
                c.insert(at, b.clone());
            }
        }
        Ok(b)
    }

    /// The entries of blocks `range` (segment-relative) of `seg`, without
    /// flow sets.
    pub fn entries(
        &self,
        seg: &Segment,
        range: std::ops::Range<u64>,
    ) -> Result<Vec<Entry>, StorageError> {
        let h = &seg.header;
        let range = range.start.min(h.nblocks)..range.end.min(h.nblocks);
        let blocks: Vec<u64> = range.collect();
        self.entries_at(seg, &blocks)
    }

    /// The entries of `blocks` (segment-relative, ascending, each below
    /// the segment's count) of `seg`, in that order: only the pages that
    /// hold them are read.
    pub fn entries_at(&self, seg: &Segment, blocks: &[u64]) -> Result<Vec<Entry>, StorageError> {
        let h = &seg.header;
        let el = h.entry_len as usize;
        let per = (PAGE_ROOM / el) as u64;
        let s = &h.sections[S_BLOCKS];
        let mut out = Vec::with_capacity(blocks.len().min(1 << 16));
        let mut i = 0;
        while i < blocks.len() {
            // A run of blocks on the same or touching pages: one read.
            let p0 = blocks[i] / per;
            let mut j = i + 1;
            while j < blocks.len()
                && blocks[j] >= blocks[j - 1]
                && blocks[j] / per <= blocks[j - 1] / per + 1
            {
                j += 1;
            }
            let last = blocks[j - 1];
            if last >= h.nblocks || blocks[i..j].windows(2).any(|w| w[1] < w[0]) {
                return Err(self.corrupt(seg, "a block beyond the segment"));
            }
            let p1 = last / per;
            let bytes = self.pages(seg, s.offset, p0, p1 - p0 + 1)?;
            for &b in &blocks[i..j] {
                let page = (b / per - p0) as usize;
                let held = unseal(&bytes[page * PAGE..(page + 1) * PAGE]).unwrap_or(0) as u64;
                if b % per >= held {
                    return Err(self.corrupt(seg, "a block page holds fewer entries"));
                }
                let o = page * PAGE + PAGE_HEADER + (b % per) as usize * el;
                out.push(Entry::from_fixed(&bytes[o..o + el]));
            }
            i = j;
        }
        Ok(out)
    }

    /// The entry of block `block` (a file-wide number) if a segment has it.
    pub fn entry(&self, block: u64) -> Result<Option<Entry>, StorageError> {
        let Some(seg) = self.segments.iter().find(|s| s.blocks().contains(&block)) else {
            return Ok(None);
        };
        let b = block - seg.header.block0;
        Ok(self.entries(seg, b..b + 1)?.pop())
    }

    /// The data pages of section `sec` of `seg` that may hold keys in
    /// `lo..=hi`, found through its fence levels: (first page, last page).
    fn page_range(
        &self,
        seg: &Segment,
        sec: usize,
        lo: u128,
        hi: u128,
    ) -> Result<Option<(u64, u64)>, StorageError> {
        let s = &seg.header.sections[sec];
        let w = KEY_WIDTH[sec];
        if s.pages == 0 || w == 0 {
            return Ok(None);
        }
        if s.levels == 0 {
            return Ok(Some((0, 0)));
        }
        let fanout = (PAGE_ROOM / w) as u64;
        let levels = s.levels as usize;
        // Page offsets of each level: data first, then level 1, 2...
        let mut level_at = [0u64; MAX_LEVELS];
        let mut at = s.pages as u64;
        for (l, la) in level_at.iter_mut().enumerate().take(levels) {
            *la = at;
            at += s.level_pages[l] as u64;
        }
        let mut range = (0u64, 0u64);
        for l in (0..levels).rev() {
            let below = if l == 0 {
                s.pages as u64
            } else {
                s.level_pages[l - 1] as u64
            };
            let bytes = self.pages(seg, s.offset, level_at[l] + range.0, range.1 - range.0 + 1)?;
            if range.0 == range.1 {
                // A fence page: kept by a long-running reader.
                let at = seg.at + s.offset + (level_at[l] + range.0) * PAGE as u64;
                self.upper.borrow_mut().push(at);
            }
            let first_item = range.0 * fanout;
            let n = (((range.1 + 1) * fanout).min(below)).saturating_sub(first_item) as usize;
            let per = fanout as usize;
            if n == 0 || n.div_ceil(per) * PAGE > bytes.len() {
                return Err(self.corrupt(seg, "a fence level shorter than the level below"));
            }
            let key = |i: usize| {
                let o = (i / per) * PAGE + PAGE_HEADER + (i % per) * w;
                key_from(&bytes[o..o + w])
            };
            let a = partition(n, |i| key(i) < lo).saturating_sub(1);
            let b = partition(n, |i| key(i) <= hi).saturating_sub(1).max(a);
            range = (first_item + a as u64, first_item + b as u64);
        }
        if range.1 >= s.pages as u64 {
            return Err(self.corrupt(seg, "a fence beyond the data"));
        }
        Ok(Some(range))
    }

    /// Walks the records of keys `lo..=hi` in section `sec` of `seg`:
    /// `each(key, block, first, span, frames, payload bytes, at)`.
    fn scan(
        &self,
        seg: &Segment,
        sec: usize,
        lo: u128,
        hi: u128,
        each: &mut EachRecord<'_>,
    ) -> Result<(), StorageError> {
        let Some((p0, p1)) = self.page_range(seg, sec, lo, hi)? else {
            return Ok(());
        };
        let s = seg.header.sections[sec];
        let w = KEY_WIDTH[sec];
        let bytes = self.pages(seg, s.offset, p0, p1 - p0 + 1)?;
        let bad = || self.corrupt(seg, "a data page does not parse");
        for page in bytes.chunks_exact(PAGE) {
            let used = unseal(page).ok_or_else(bad)?;
            if !(PAGE_HEADER..=PAGE).contains(&used) {
                return Err(bad());
            }
            let page = &page[..used];
            let mut at = PAGE_HEADER;
            while at < used {
                let key = key_from(page.get(at..at + w).ok_or_else(bad)?);
                at += w;
                let n = get_var(page, &mut at).ok_or_else(bad)?;
                if key > hi {
                    return Ok(());
                }
                let mut block = 0u32;
                for i in 0..n {
                    let mut p = Posting::default();
                    let (d, fr) = get_record(page, &mut at, &mut p.ranges).ok_or_else(bad)?;
                    let delta = u32::try_from(d).map_err(|_| bad())?;
                    block = if i == 0 {
                        delta
                    } else {
                        block.checked_add(delta).ok_or_else(bad)?
                    };
                    p.block = block;
                    p.frames = u32::try_from(fr).unwrap_or(u32::MAX);
                    if key >= lo {
                        each(key, p, page, &mut at).ok_or_else(bad)?;
                    } else if sec == S_HOST4 || sec == S_HOST6 {
                        // Skip the payload of a record not wanted.
                        let me = if sec == S_HOST4 {
                            Me::V4(key as u32)
                        } else {
                            Me::V6(key)
                        };
                        get_payload(page, &mut at, me).ok_or_else(bad)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The rows of host `key` (an address or a range of them: a key
    /// range of the sorted table) in `seg`: postings and their keys.
    fn host_rows(
        &self,
        seg: &Segment,
        key: &Key,
    ) -> Result<Vec<(Posting, FrameKeys)>, StorageError> {
        let (sec, lo, hi) = match *key {
            Key::Ip4(a) => (S_HOST4, a as u128, a as u128),
            Key::Ip6(a) => (S_HOST6, a, a),
            Key::Net4(a, b) => (S_HOST4, a as u128, b as u128),
            Key::Net6(a, b) => (S_HOST6, a, b),
            _ => return Ok(Vec::new()),
        };
        let mut out = Vec::new();
        self.scan(seg, sec, lo, hi, &mut |k, p, page, at| {
            let me = if sec == S_HOST4 {
                Me::V4(k as u32)
            } else {
                Me::V6(k)
            };
            let keys = get_payload(page, at, me)?;
            out.push((p, keys));
            Some(())
        })?;
        Ok(out)
    }

    /// The hull postings of `key` (a port or a range of them, an
    /// EtherType, VLAN or protocol; a host's from its rows) in `seg`, by
    /// block: a block's places of every key in its range joined.
    fn postings(&self, seg: &Segment, key: &Key) -> Result<Vec<Posting>, StorageError> {
        let (sec, lo, hi) = match *key {
            Key::Port(p) => (S_PORT, p as u128, p as u128),
            Key::Ports(a, b) => (S_PORT, a as u128, b as u128),
            Key::EtherType(e) => {
                let k = (K_ETHERTYPE as u128) << 16 | e as u128;
                (S_OTHER, k, k)
            }
            Key::Vlan(v) => {
                let k = (K_VLAN as u128) << 16 | v as u128;
                (S_OTHER, k, k)
            }
            Key::Proto(p) => {
                let k = (K_PROTO as u128) << 16 | p as u128;
                (S_OTHER, k, k)
            }
            Key::Ip4(_) | Key::Ip6(_) | Key::Net4(..) | Key::Net6(..) => {
                // A host's places per block, from its flows.
                let v = self.host_rows(seg, key)?.into_iter().map(|r| r.0).collect();
                return Ok(by_block(v));
            }
        };
        let mut out: Vec<Posting> = Vec::new();
        self.scan(seg, sec, lo, hi, &mut |_, p, _, _| {
            out.push(p);
            Some(())
        })?;
        // One key's records come in block order; a range's keys each start
        // over (a key's places in one block may spread over records too).
        Ok(by_block(out))
    }

    /// Where in `seg` a frame that `needs` asks for may be: for each
    /// alternative, the rows of its narrowest host (an address, or a net: a
    /// range of the sorted keys) that hold all of its keys (exact per
    /// row), or, without a host (or with only a host range wider than
    /// `WIDE` beside a narrow port or VLAN), the blocks where its keys
    /// are, each cut to where all of their frames overlap. Sorted by block
    /// and offset; hits of several alternatives may overlap.
    pub fn select(&self, seg: &Segment, needs: &Needs) -> Result<Vec<Hit>, StorageError> {
        let b0 = seg.header.block0;
        let mut out = Vec::new();
        let mut hosts: HashMap<Key, Vec<(Posting, FrameKeys)>> = HashMap::new();
        let mut hulls: HashMap<Key, Vec<Posting>> = HashMap::new();
        for alt in needs.alternatives() {
            let host = alt.iter().filter(|k| k.is_host()).min_by_key(|k| k.width());
            let narrow_other = alt.iter().any(|k| {
                matches!(k, Key::Port(_) | Key::Ports(..) | Key::Vlan(_)) && k.width() <= WIDE
            });
            if let Some(h) = host.filter(|h| h.width() <= WIDE || !narrow_other) {
                // The host's rows, each checked for every other key.
                if !hosts.contains_key(h) {
                    let rows = self.host_rows(seg, h)?;
                    hosts.insert(*h, rows);
                }
                for (p, keys) in &hosts[h] {
                    if alt.iter().all(|k| keys.holds(k)) {
                        push_hits(&mut out, b0, p.block, p.frames, &p.ranges);
                    }
                }
                continue;
            }
            // Intersect the keys' places block by block, narrowest first; a
            // key wider than WIDE after the first is left out (the
            // complement a `portrange`'s other port gets, `port >= 40002`:
            // it would read most of a table to rule out little; leaving a
            // key out only reads more).
            let mut keys: Vec<&Key> = alt.iter().collect();
            keys.sort_by_key(|k| k.width());
            let mut acc: Option<Vec<Posting>> = None;
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 && k.width() > WIDE {
                    continue;
                }
                if !hulls.contains_key(k) {
                    let p = self.postings(seg, k)?;
                    hulls.insert(*k, p);
                }
                let next = &hulls[k];
                acc = Some(match acc {
                    None => next.clone(),
                    Some(a) => intersect(&a, next),
                });
                if acc.as_ref().is_some_and(Vec::is_empty) {
                    break;
                }
            }
            for p in acc.unwrap_or_default() {
                push_hits(&mut out, b0, p.block, p.frames, &p.ranges);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Every key of each block of `seg` (segment-relative, in order), as
    /// flow sets that list them all, however many: the exact lists of the
    /// fleet's table.
    pub fn flow_sets(&self, seg: &Segment) -> Result<Vec<FlowSet>, StorageError> {
        let n = seg.header.nblocks as usize;
        let mut sets = vec![FlowSet::default(); n];
        for sec in [S_HOST4, S_HOST6, S_PORT, S_OTHER] {
            self.scan(seg, sec, 0, u128::MAX, &mut |k, p, page, at| {
                let key = match sec {
                    S_HOST4 => {
                        get_payload(page, at, Me::V4(k as u32))?;
                        Key::Ip4(k as u32)
                    }
                    S_HOST6 => {
                        get_payload(page, at, Me::V6(k))?;
                        Key::Ip6(k)
                    }
                    S_PORT => Key::Port(k as u16),
                    _ => match (k >> 16) as u8 {
                        K_ETHERTYPE => Key::EtherType(k as u16),
                        K_VLAN => Key::Vlan(k as u16),
                        _ => Key::Proto(k as u8),
                    },
                };
                sets.get_mut(p.block as usize)?.push(key);
                Some(())
            })?;
        }
        for s in &mut sets {
            s.normalize_exact();
        }
        Ok(sets)
    }
}

/// Postings sorted by block, those of one block joined (places united,
/// frames added).
fn by_block(mut v: Vec<Posting>) -> Vec<Posting> {
    v.sort_by_key(|p| p.block);
    let mut out: Vec<Posting> = Vec::with_capacity(v.len());
    for p in v {
        match out.last_mut() {
            Some(l) if l.block == p.block => {
                l.ranges = union(&l.ranges, &p.ranges);
                l.frames = l.frames.saturating_add(p.frames);
            }
            _ => out.push(p),
        }
    }
    out
}

/// One hit per range of a place (the frames go with the first).
fn push_hits(out: &mut Vec<Hit>, b0: u64, block: u32, frames: u32, ranges: &[(u32, u32)]) {
    for (i, &(first, last)) in ranges.iter().enumerate() {
        out.push(Hit {
            block: b0 + block as u64,
            first,
            last,
            frames: if i == 0 { frames as u64 } else { 0 },
        });
    }
}

/// The union of two ascending lists of ranges, ascending, overlapping
/// ones joined.
fn union(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut v: Vec<(u32, u32)> = a.iter().chain(b).copied().collect();
    v.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(v.len());
    for (x, y) in v {
        match out.last_mut() {
            Some(l) if x <= l.1 => l.1 = l.1.max(y),
            _ => out.push((x, y)),
        }
    }
    out
}

/// The overlaps of two ascending lists of ranges (a frame holding keys of
/// both lies in both).
fn overlaps(a: &[(u32, u32)], b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if lo <= hi {
            out.push((lo, hi));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Blocks in both (by block), their places cut to where both lists
/// overlap, frames the fewer; blocks where they do not overlap are out.
fn intersect(a: &[Posting], b: &[Posting]) -> Vec<Posting> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].block.cmp(&b[j].block) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                let ranges = overlaps(&a[i].ranges, &b[j].ranges);
                if !ranges.is_empty() {
                    out.push(Posting {
                        block: a[i].block,
                        frames: a[i].frames.min(b[j].frames),
                        ranges,
                    });
                }
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// The first `i` in `0..n` where `pred(i)` is false (`pred` true then false).
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
