//! Encoding the key index: a segment's bytes (header page and tables) from
//! the rows of its blocks ([`build_segment`]). When segments are cut, the
//! builder thread that encodes them and the appending to the `.kdx` are the
//! write path's (`wiretape-storage`'s `keys`).

use super::*;
use std::path::PathBuf;
use wiretape_filter::flow::{FrameKeys, Rows};

/// One segment to build.
#[derive(Debug, Default)]
pub struct SegmentInput {
    /// The `.kdx` it goes to.
    pub path: PathBuf,
    /// The file's first segment: the `.kdx` is made anew.
    pub first: bool,
    /// Its first block's number.
    pub block0: u64,
    /// The fixed `.idx` entries of its blocks, `entry_len` bytes each.
    pub blocks: Vec<u8>,
    /// Bytes of each entry (32 or 56).
    pub entry_len: u32,
    /// The rows of its blocks.
    pub rows: Rows,
    /// Where the `.idx` entry after its last block starts.
    pub idx_next: u64,
    /// The last segment of a finished file: the capture (its length goes
    /// into the header).
    pub last_of: Option<PathBuf>,
    /// The capture's link type.
    pub linktype: u32,
}

/// A sorted table being written in pages (see the module docs of `keys`).
struct Paged {
    width: usize,
    data: Vec<u8>,
    fences: Vec<u128>,
    page: Vec<u8>,
    /// The open group: key, records, their count, the last block.
    gkey: Option<u128>,
    grecs: Vec<u8>,
    gn: u64,
    glast: u32,
    rec: Vec<u8>,
    records: u64,
    keys: u64,
}

fn var_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

impl Paged {
    fn new(width: usize, capacity: usize) -> Self {
        Paged {
            width,
            data: Vec::with_capacity(capacity.div_ceil(PAGE) * PAGE),
            fences: Vec::new(),
            page: vec![0; PAGE_HEADER],
            gkey: None,
            grecs: Vec::new(),
            gn: 0,
            glast: 0,
            rec: Vec::new(),
            records: 0,
            keys: 0,
        }
    }

    /// Adds the places `ranges` (ascending) of `frames` frames of `key` in
    /// `block`, then `payload` (keys ascending; within a key, blocks
    /// ascending). More ranges than a record holds go into several records.
    fn push(&mut self, key: u128, block: u32, frames: u32, ranges: &[(u32, u32)], payload: &[u8]) {
        if self.gkey != Some(key) {
            self.close_group();
            self.gkey = Some(key);
            self.keys += 1;
        }
        for (k, chunk) in ranges.chunks(RANGES_PER_RECORD).enumerate() {
            let frames = if k == 0 { frames } else { 0 };
            loop {
                self.rec.clear();
                let delta = if self.gn == 0 {
                    block
                } else {
                    block - self.glast
                };
                put_record(&mut self.rec, delta, frames, chunk);
                self.rec.extend_from_slice(payload);
                let hdr = self.width + var_len(self.gn + 1);
                if self.page.len() + hdr + self.grecs.len() + self.rec.len() <= PAGE {
                    self.grecs.extend_from_slice(&self.rec);
                    self.gn += 1;
                    self.glast = block;
                    self.records += 1;
                    break;
                }
                assert!(
                    self.gn > 0 || self.page.len() > PAGE_HEADER,
                    "a record larger than a page"
                );
                self.close_group();
                self.close_page();
                self.gkey = Some(key);
            }
        }
    }

    fn close_group(&mut self) {
        let Some(k) = self.gkey.take() else { return };
        if self.gn == 0 {
            return;
        }
        if self.page.len() == PAGE_HEADER {
            self.fences.push(k);
        }
        put_key(&mut self.page, k, self.width);
        put_var(&mut self.page, self.gn);
        self.page.extend_from_slice(&self.grecs);
        self.grecs.clear();
        self.gn = 0;
    }

    fn close_page(&mut self) {
        if self.page.len() <= PAGE_HEADER {
            return;
        }
        let used = self.page.len();
        self.page.resize(PAGE, 0);
        seal(&mut self.page, used);
        self.data.extend_from_slice(&self.page);
        self.page.clear();
        self.page.resize(PAGE_HEADER, 0);
    }

    /// The section's pages (data, then fence levels) and its shape.
    fn finish(mut self) -> (Vec<u8>, Section) {
        self.close_group();
        self.close_page();
        let pages = (self.data.len() / PAGE) as u32;
        let mut s = Section {
            pages,
            records: self.records,
            keys: self.keys,
            ..Section::default()
        };
        let mut out = self.data;
        if pages > 1 {
            let fanout = PAGE_ROOM / self.width;
            let mut level: Vec<u128> = self.fences;
            loop {
                let n = level.len().div_ceil(fanout);
                let mut next = Vec::with_capacity(n);
                for chunk in level.chunks(fanout) {
                    next.push(chunk[0]);
                    let mut p = vec![0u8; PAGE_HEADER];
                    for &k in chunk {
                        put_key(&mut p, k, self.width);
                    }
                    p.resize(PAGE, 0);
                    seal(&mut p, chunk.len());
                    out.extend_from_slice(&p);
                }
                s.level_pages[s.levels as usize] = n as u32;
                s.levels += 1;
                if n <= 1 || s.levels as usize == MAX_LEVELS {
                    break;
                }
                level = next;
            }
        }
        (out, s)
    }
}

/// A row of `Rows::keys` (bit 31 set) or of `Rows::sig` (bit 31 clear), by
/// position.
const KEYS_ROW: u32 = 1 << 31;

/// A plain IPv4 row's fields, straight from its packed signature
/// ([`FrameKeys::from_sig`]'s layout): protocol, source, destination, ports.
#[inline]
fn sig_fields(sig: u128) -> (u8, u32, u32, u16, u16) {
    let addrs = (sig >> 32) as u64;
    let ports = sig as u32;
    (
        (sig >> 96) as u8,
        (addrs >> 32) as u32,
        addrs as u32,
        (ports >> 16) as u16,
        ports as u16,
    )
}

/// Sorts `v` by `key` (stable LSD radix sort, 16 bits a pass; a pass whose
/// digit is the same in every item is skipped): a segment's sorts are its
/// builder's main cost, and their keys are small integers.
fn radix_sort<T: Copy>(v: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    if v.len() < 2 {
        return;
    }
    let (mut or, mut and) = (0u64, !0u64);
    for x in v.iter() {
        let k = key(x);
        or |= k;
        and &= k;
    }
    let varying = or ^ and;
    let mut tmp = v.clone();
    let mut counts = vec![0usize; 1 << 16];
    for shift in (0..64).step_by(16) {
        if (varying >> shift) & 0xffff == 0 {
            continue;
        }
        counts.iter_mut().for_each(|c| *c = 0);
        for x in v.iter() {
            counts[((key(x) >> shift) & 0xffff) as usize] += 1;
        }
        let mut at = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = at;
            at += n;
        }
        for x in v.iter() {
            let d = ((key(x) >> shift) & 0xffff) as usize;
            tmp[counts[d]] = *x;
            counts[d] += 1;
        }
        std::mem::swap(v, &mut tmp);
    }
}

/// One flow of a block: a signature's rows there (a plain IPv4 row's
/// signature, or a row of `Rows::keys` by index: `kidx` with [`KEYS_ROW`]),
/// its frames, and its places (ranges `r0..r0 + rn` of the arena).
#[derive(Clone, Copy)]
struct Flow {
    sig: u128,
    kidx: u32,
    block: u32,
    frames: u32,
    r0: u32,
    rn: u32,
}

/// Appends `(first, last)` to the ranges `out[start..]`, joining it with
/// the last one when it overlaps or lies within [`ROW_GAP`] of it (ranges
/// come in ascending order of their first).
#[inline]
fn join_range(out: &mut Vec<(u32, u32)>, start: usize, first: u32, last: u32) {
    if out.len() > start {
        let l = out.last_mut().expect("a range");
        if first <= l.1.saturating_add(wiretape_filter::flow::ROW_GAP) {
            l.1 = l.1.max(last);
            return;
        }
    }
    out.push((first, last));
}

/// The flows of the rows (per block, a signature's rows coalesced, their
/// places joined), in block order, and the arena of their places.
fn flows_of(rows: &Rows, block0: u32) -> (Vec<Flow>, Vec<(u32, u32)>) {
    let mut flows = Vec::with_capacity(rows.len());
    let mut arena: Vec<(u32, u32)> = Vec::with_capacity(rows.len());
    let (mut i, mut j) = (0, 0);
    let mut sigs: Vec<(u128, u32, u32, u32)> = Vec::new();
    let mut keys: Vec<(FrameKeys, u32, u32, u32, u32)> = Vec::new();
    while i < rows.sig.len() || j < rows.keys.len() {
        let block = match (rows.sig.get(i), rows.keys.get(j)) {
            (Some(a), Some(b)) => a.block.min(b.block),
            (Some(a), None) => a.block,
            (None, Some(b)) => b.block,
            (None, None) => break,
        };
        sigs.clear();
        while let Some(r) = rows.sig.get(i).filter(|r| r.block == block) {
            sigs.push((r.sig, r.first, r.last, r.frames));
            i += 1;
        }
        keys.clear();
        while let Some(r) = rows.keys.get(j).filter(|r| r.block == block) {
            keys.push((r.keys, r.first, r.last, r.frames, j as u32));
            j += 1;
        }
        let rel = block - block0;
        sigs.sort_unstable_by_key(|x| (x.0, x.1));
        let mut k = 0;
        while k < sigs.len() {
            let sig = sigs[k].0;
            let r0 = arena.len();
            let mut frames = 0u32;
            while k < sigs.len() && sigs[k].0 == sig {
                join_range(&mut arena, r0, sigs[k].1, sigs[k].2);
                frames = frames.saturating_add(sigs[k].3);
                k += 1;
            }
            flows.push(Flow {
                sig,
                kidx: 0,
                block: rel,
                frames,
                r0: r0 as u32,
                rn: (arena.len() - r0) as u32,
            });
        }
        keys.sort_unstable_by_key(|a| (a.0, a.1));
        let mut k = 0;
        while k < keys.len() {
            let key = keys[k].0;
            let r0 = arena.len();
            let mut frames = 0u32;
            let idx = keys[k].4;
            while k < keys.len() && keys[k].0 == key {
                join_range(&mut arena, r0, keys[k].1, keys[k].2);
                frames = frames.saturating_add(keys[k].3);
                k += 1;
            }
            flows.push(Flow {
                sig: 0,
                kidx: idx | KEYS_ROW,
                block: rel,
                frames,
                r0: r0 as u32,
                rn: (arena.len() - r0) as u32,
            });
        }
    }
    (flows, arena)
}

/// A flow's keys.
fn flow_keys(rows: &Rows, f: &Flow) -> FrameKeys {
    if f.kidx & KEYS_ROW == 0 {
        FrameKeys::from_sig(f.sig)
    } else {
        rows.keys[(f.kidx & !KEYS_ROW) as usize].keys
    }
}

/// Postings of one kind: per (key, block), the places of its flows there
/// joined into ranges, and their frames; `keys_of` gives a flow's keys of
/// the kind. Made block by block (a small sort per block), then put in key
/// order by one stable radix sort.
fn posting_section(
    flows: &[Flow],
    arena: &[(u32, u32)],
    width: usize,
    keys_of: impl Fn(&Flow, &mut Vec<u32>),
) -> (Vec<u8>, Section) {
    // (key, block, frames, r0, rn) into `out_ranges`.
    let mut post: Vec<(u64, u32, u32, u32)> = Vec::with_capacity(flows.len() * 2);
    let mut out_ranges: Vec<(u32, u32)> = Vec::with_capacity(arena.len() * 2);
    let mut scratch: Vec<(u32, u32, u32, u32)> = Vec::new();
    let mut ks = Vec::with_capacity(8);
    let mut i = 0;
    while i < flows.len() {
        let block = flows[i].block;
        scratch.clear();
        while i < flows.len() && flows[i].block == block {
            let f = &flows[i];
            ks.clear();
            keys_of(f, &mut ks);
            for &k in &ks {
                for (n, &(a, b)) in arena[f.r0 as usize..(f.r0 + f.rn) as usize]
                    .iter()
                    .enumerate()
                {
                    let frames = if n == 0 { f.frames } else { 0 };
                    scratch.push((k, a, b, frames));
                }
            }
            i += 1;
        }
        scratch.sort_unstable_by_key(|x| (x.0, x.1));
        let mut k = 0;
        while k < scratch.len() {
            let key = scratch[k].0;
            let r0 = out_ranges.len();
            let mut frames = 0u32;
            while k < scratch.len() && scratch[k].0 == key {
                join_range(&mut out_ranges, r0, scratch[k].1, scratch[k].2);
                frames = frames.saturating_add(scratch[k].3);
                k += 1;
            }
            post.push((
                (key as u64) << 32 | block as u64,
                frames,
                r0 as u32,
                (out_ranges.len() - r0) as u32,
            ));
        }
    }
    radix_sort(&mut post, |p| p.0 >> 32);
    let mut p = Paged::new(width, post.len() * 8 + out_ranges.len() * 4);
    for &(kb, frames, r0, rn) in &post {
        let ranges = &out_ranges[r0 as usize..(r0 + rn) as usize];
        p.push((kb >> 32) as u128, kb as u32, frames, ranges, &[]);
    }
    p.finish()
}

/// A host record being gathered (32 bytes: sorting moves them): address
/// << 32 | block, the flow's frames, its one place inline (most flows have
/// one), a plain flow's peer, ports and protocol, so that writing the
/// sorted records reads nothing else. `proto` flags: [`KEYS_ROW`], a flow
/// of `Rows::keys` (its index in `peer`); [`MULTI`], a flow of several
/// places (its index in `first`, or `peer` for a flow of `Rows::keys`).
#[derive(Clone, Copy)]
struct Host4 {
    kb: u64,
    first: u32,
    last: u32,
    frames: u32,
    peer: u32,
    ports: u32,
    proto: u32,
}

/// [`Host4::proto`]: the flow has several places.
const MULTI: u32 = 1 << 30;

/// Host records of IPv4: one per (address, flow), sorted by address and
/// block; a plain flow's payload made from its signature.
fn host4_section(rows: &Rows, flows: &[Flow], arena: &[(u32, u32)]) -> (Vec<u8>, Section) {
    let mut v: Vec<Host4> = Vec::with_capacity(flows.len() * 2);
    for (n, f) in flows.iter().enumerate() {
        let b = f.block as u64;
        let (mut first, last) = arena[f.r0 as usize];
        let multi = if f.rn > 1 { MULTI } else { 0 };
        if f.kidx & KEYS_ROW == 0 {
            if multi != 0 {
                first = n as u32;
            }
            let (proto, src, dst, sp, dp) = sig_fields(f.sig);
            let mut h = Host4 {
                kb: (src as u64) << 32 | b,
                first,
                last,
                frames: f.frames,
                peer: dst,
                ports: (sp as u32) << 16 | dp as u32,
                proto: proto as u32 | multi,
            };
            v.push(h);
            if dst != src {
                h.kb = (dst as u64) << 32 | b;
                h.peer = src;
                v.push(h);
            }
        } else {
            let k = flow_keys(rows, f);
            let a = k.ip4();
            for (j, &addr) in a.iter().enumerate() {
                if !a[..j].contains(&addr) {
                    v.push(Host4 {
                        kb: (addr as u64) << 32 | b,
                        first,
                        last,
                        frames: f.frames,
                        peer: n as u32,
                        ports: 0,
                        proto: KEYS_ROW | multi,
                    });
                }
            }
        }
    }
    // Made in block order: a stable sort by address keeps it within one.
    radix_sort(&mut v, |e| e.kb >> 32);
    let mut p = Paged::new(4, v.len() * 16);
    let mut payload = Vec::with_capacity(64);
    for h in &v {
        let addr = (h.kb >> 32) as u32;
        payload.clear();
        let keys_flow = h.proto & KEYS_ROW != 0;
        let flow = match (keys_flow, h.proto & MULTI != 0) {
            (true, _) => Some(h.peer),
            (false, true) => Some(h.first),
            (false, false) => None,
        };
        if keys_flow {
            put_payload(
                &mut payload,
                &flow_keys(rows, &flows[h.peer as usize]),
                Me::V4(addr),
            );
        } else {
            put_plain4(
                &mut payload,
                h.proto as u8,
                h.peer,
                (h.ports >> 16) as u16,
                h.ports as u16,
            );
        }
        let one = [(h.first, h.last)];
        let ranges = match flow {
            Some(n) if h.proto & MULTI != 0 => {
                let f = &flows[n as usize];
                &arena[f.r0 as usize..(f.r0 + f.rn) as usize]
            }
            _ => &one[..],
        };
        p.push(addr as u128, h.kb as u32, h.frames, ranges, &payload);
    }
    p.finish()
}

/// Host records of IPv6 (flows of tagged or IPv6 frames only: few).
fn host6_section(rows: &Rows, flows: &[Flow], arena: &[(u32, u32)]) -> (Vec<u8>, Section) {
    let mut v: Vec<(u128, u32, u32)> = Vec::new();
    for (n, f) in flows.iter().enumerate() {
        if f.kidx & KEYS_ROW == 0 {
            continue;
        }
        let k = flow_keys(rows, f);
        let a = k.ip6();
        for (j, &x) in a.iter().enumerate() {
            if !a[..j].contains(&x) {
                v.push((x, f.block, n as u32));
            }
        }
    }
    v.sort_unstable_by_key(|x| (x.0, x.1));
    let mut p = Paged::new(16, v.len() * 64);
    let mut payload = Vec::with_capacity(64);
    for &(addr, block, n) in &v {
        let f = &flows[n as usize];
        payload.clear();
        put_payload(&mut payload, &flow_keys(rows, f), Me::V6(addr));
        let ranges = &arena[f.r0 as usize..(f.r0 + f.rn) as usize];
        p.push(addr, block, f.frames, ranges, &payload);
    }
    p.finish()
}

/// The bytes of a segment: its header page and sections.
pub fn build_segment(input: &SegmentInput) -> Vec<u8> {
    let el = input.entry_len as usize;
    let nblocks = input.blocks.len().checked_div(el).unwrap_or(0) as u64;
    let rd = |i: usize, o: usize| {
        u64::from_le_bytes(input.blocks[i * el + o..i * el + o + 8].try_into().unwrap())
    };
    let (mut first_ns, mut last_ns, mut frames) = (0, 0, 0);
    if nblocks > 0 {
        first_ns = rd(0, 8);
        last_ns = rd(nblocks as usize - 1, 16);
        frames = (0..nblocks as usize).map(|i| rd(i, 24)).sum();
    }
    let b0 = input.block0 as u32;
    let rows = &input.rows;
    let mut h = SegmentHeader {
        flags: if input.last_of.is_some() { F_FINAL } else { 0 },
        block0: input.block0,
        nblocks,
        first_ns,
        last_ns,
        frames,
        rows: rows.len() as u64,
        idx_next: input.idx_next,
        capture_len: input
            .last_of
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len()),
        entry_len: input.entry_len,
        linktype: input.linktype,
        ..SegmentHeader::default()
    };
    // Sections are built first, then laid out once (no copies of a
    // growing segment).
    let mut parts: Vec<(usize, Vec<u8>, Section)> = Vec::with_capacity(SECTIONS);
    let put = |parts: &mut Vec<(usize, Vec<u8>, Section)>, i: usize, bytes: Vec<u8>, s: Section| {
        parts.push((i, bytes, s));
    };
    // The block entries, whole entries to a page.
    let per_page = PAGE_ROOM / el.max(1);
    let mut bpages = Vec::new();
    for chunk in input.blocks.chunks(per_page * el.max(1)) {
        let mut p = vec![0u8; PAGE_HEADER];
        p.extend_from_slice(chunk);
        p.resize(PAGE, 0);
        seal(&mut p, chunk.len() / el.max(1));
        bpages.extend_from_slice(&p);
    }
    let blocks = Section {
        pages: (bpages.len() / PAGE) as u32,
        records: nblocks,
        ..Section::default()
    };
    put(&mut parts, S_BLOCKS, bpages, blocks);
    let (flows, arena) = flows_of(rows, b0);
    let (b, s) = host4_section(rows, &flows, &arena);
    put(&mut parts, S_HOST4, b, s);
    let (b, s) = host6_section(rows, &flows, &arena);
    put(&mut parts, S_HOST6, b, s);
    let (b, s) = posting_section(&flows, &arena, 2, |f, v| {
        if f.kidx & KEYS_ROW == 0 {
            let (_, _, _, sp, dp) = sig_fields(f.sig);
            v.push(sp as u32);
            if dp != sp {
                v.push(dp as u32);
            }
        } else {
            let k = flow_keys(rows, f);
            for (j, &x) in k.ports().iter().enumerate() {
                if !k.ports()[..j].contains(&x) {
                    v.push(x as u32);
                }
            }
        }
    });
    put(&mut parts, S_PORT, b, s);
    let (b, s) = posting_section(&flows, &arena, 3, |f, v| {
        if f.kidx & KEYS_ROW == 0 {
            let (proto, ..) = sig_fields(f.sig);
            v.push((K_ETHERTYPE as u32) << 16 | 0x0800);
            v.push((K_PROTO as u32) << 16 | proto as u32);
        } else {
            let k = flow_keys(rows, f);
            let mut add = |x: u32| {
                if !v.contains(&x) {
                    v.push(x);
                }
            };
            k.ether_types()
                .iter()
                .for_each(|&e| add((K_ETHERTYPE as u32) << 16 | e as u32));
            k.vlans()
                .iter()
                .for_each(|&e| add((K_VLAN as u32) << 16 | e as u32));
            if let Some(p) = k.proto() {
                add((K_PROTO as u32) << 16 | p as u32);
            }
        }
    });
    put(&mut parts, S_OTHER, b, s);
    let total = PAGE
        + parts
            .iter()
            .map(|p| p.1.len().div_ceil(PAGE) * PAGE)
            .sum::<usize>();
    let mut out = Vec::with_capacity(total);
    out.resize(PAGE, 0);
    for (i, bytes, mut s) in parts {
        s.offset = out.len() as u64;
        out.extend_from_slice(&bytes);
        out.resize(out.len().div_ceil(PAGE) * PAGE, 0);
        h.sections[i] = s;
    }
    h.seg_len = out.len() as u64;
    out[..PAGE].copy_from_slice(&h.encode());
    embed_roots(&mut out, &h);
    out
}

/// Copies the first page a lookup reads in each section (its root fence
/// page, or its only data page), `OTHER` first (every Stenographer query
/// asks it), then `HOST4`, `PORT`, `HOST6`, into the header page after its
/// fields, as many as fit ([`super::embedded_pages`] reads them): a lookup
/// then reads the header and goes straight to the level below the root.
fn embed_roots(seg: &mut [u8], h: &SegmentHeader) {
    let mut at = HEADER_USED;
    for sec in [S_OTHER, S_HOST4, S_PORT, S_HOST6] {
        let s = &h.sections[sec];
        let Some(p) = root_page(s) else { continue };
        let o = (s.offset + p * PAGE as u64) as usize;
        let page = &seg[o..o + PAGE];
        // Its used bytes (the rest of a page is zeros: a reader pads).
        let used = page.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        if at + EMBED_HEAD + used > PAGE {
            continue;
        }
        let item = page[..used].to_vec();
        seg[at] = sec as u8;
        seg[at + 1..at + 5].copy_from_slice(&(p as u32).to_le_bytes());
        seg[at + 5..at + 7].copy_from_slice(&(used as u16).to_le_bytes());
        seg[at + EMBED_HEAD..at + EMBED_HEAD + used].copy_from_slice(&item);
        at += EMBED_HEAD + used;
    }
}
