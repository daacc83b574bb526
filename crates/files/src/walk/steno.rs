//! The walker's step over stenotype's files ([`Format::Steno`], the layout
//! in [`crate::steno`]): frame by frame through each block, block by block
//! at the block size, which the walk learns from the file (the first
//! page-aligned offset after the first block where a later block's
//! descriptor stands).
//!
//! How a walk ends: after the last block (the file's end, or zeros where
//! the next descriptor would be: space stenotype allocated ahead and has not
//! written yet) cleanly; anything else is damage ([`Why::Steno`], one line
//! naming the offset), the frames before it read. A file cut inside a block
//! gives its whole frames and then names the cut. Nothing here ever writes:
//! the files are Stenographer's.

use super::{read_claimed, End, Stop, Walker, Why};
use crate::pcap::{FileHeader, Format, MAX_SNAPLEN};
use crate::steno::{BlockDesc, FrameHdr, HEADER_LEN, MAX_BLOCK, PAGE};
use std::io::{Read, Seek, SeekFrom};

/// Where the walk is in stenotype's file.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct StenoPos {
    /// The block size, once known.
    block: Option<u64>,
    /// The current block: its start, and the end of its bytes in use.
    start: u64,
    end: u64,
    /// Its descriptor's sequence number.
    seq: u64,
    /// The next frame's header (None: the block is done).
    next: Option<u64>,
    /// Frames left in the block (`u32::MAX`: not known, after a seek into it).
    left: u32,
}

fn steno(at: u64, what: String) -> Stop {
    Stop::corrupt(at, Why::Steno(what))
}

impl<R: Read> Walker<R> {
    /// Reads the rest of a first descriptor whose first 4 bytes (`first`)
    /// say TPACKET_V3: Ok(true) if the file is stenotype's (its first block
    /// is then the current one).
    pub(super) fn read_steno_head(&mut self, first: [u8; 4]) -> Result<bool, Stop> {
        let mut h = [0u8; HEADER_LEN];
        h[..4].copy_from_slice(&first);
        if self.read(0, &mut h[4..])? < HEADER_LEN - 4 {
            return Err(Stop::torn(0, "block descriptor"));
        }
        let d = BlockDesc::decode(&h);
        if d.check(MAX_BLOCK).is_err() {
            return Ok(false);
        }
        self.format = Some(Format::Steno);
        self.header = FileHeader {
            nanos: true,
            snaplen: MAX_SNAPLEN,
            linktype: crate::pcap::LINKTYPE_ETHERNET,
            big_endian: false,
        };
        self.off = HEADER_LEN as u64;
        self.open_block(0, &d);
        Ok(true)
    }

    fn open_block(&mut self, at: u64, d: &BlockDesc) {
        let s = &mut self.steno;
        s.start = at;
        s.end = at + u64::from(d.blk_len);
        s.seq = d.seq;
        s.left = d.num_pkts;
        s.next = (d.num_pkts > 0).then_some(at + u64::from(d.offset_to_first_pkt));
    }

    /// Discards the stream up to offset `to` (at or after `self.off`): the
    /// bytes discarded (fewer: the stream ended).
    fn skip_to(&mut self, to: u64) -> Result<u64, Stop> {
        let n = to.saturating_sub(self.off);
        let got = std::io::copy(&mut (&mut self.inner).take(n), &mut std::io::sink())
            .map_err(|e| Stop::at(self.off, End::Io(e)))?;
        self.off += got;
        Ok(got)
    }

    /// Reads the 48 bytes at `self.off` (Ok(None): the stream ended there).
    fn read_header(&mut self, what: &'static str) -> Result<Option<[u8; HEADER_LEN]>, Stop> {
        let at = self.off;
        let mut h = [0u8; HEADER_LEN];
        let n = self.read(at, &mut h)?;
        if n == 0 {
            return Ok(None);
        }
        if n < HEADER_LEN {
            if h[..n].iter().all(|&b| b == 0) {
                return Ok(None);
            }
            return Err(Stop::torn(at, what));
        }
        self.off += HEADER_LEN as u64;
        Ok(Some(h))
    }

    /// On to the next block. Err(Clean): no more.
    fn next_block(&mut self) -> Result<(), Stop> {
        let s = self.steno;
        if let Some(bs) = s.block {
            let at = s.start + bs;
            self.skip_to(at)?;
            if self.off < at {
                // The file ends in the last block's unused bytes.
                return Err(Stop::at(self.off, End::Clean));
            }
            let Some(h) = self.read_header("block descriptor")? else {
                return Err(Stop::at(at, End::Clean));
            };
            if h == [0; HEADER_LEN] && self.rest_is_zero() {
                // Allocated ahead, not written (yet).
                return Err(Stop::at(at, End::Clean));
            }
            let d = BlockDesc::decode(&h);
            if let Err(why) = d.check(bs) {
                return Err(steno(at, format!("bad block descriptor: {why}")));
            }
            self.open_block(at, &d);
            return Ok(());
        }
        // The block size is not known yet: the next page-aligned offset
        // that holds a later block's descriptor.
        let mut at = s.end.div_ceil(PAGE) * PAGE;
        loop {
            if at - s.start > MAX_BLOCK {
                return Err(steno(
                    s.end,
                    format!(
                        "no block descriptor within {MAX_BLOCK} bytes after the block at {}",
                        s.start
                    ),
                ));
            }
            self.skip_to(at)?;
            if self.off < at {
                return Err(Stop::at(s.end, End::Clean));
            }
            let Some(h) = self.read_header("block descriptor")? else {
                return Err(Stop::at(s.end, End::Clean));
            };
            let d = BlockDesc::decode(&h);
            if d.seq > s.seq && d.check(at - s.start).is_ok() {
                self.steno.block = Some(at - s.start);
                self.open_block(at, &d);
                return Ok(());
            }
            if h == [0; HEADER_LEN] && self.rest_is_zero() {
                return Err(Stop::at(s.end, End::Clean));
            }
            at += PAGE;
        }
    }

    pub(super) fn step_steno(&mut self, data: Option<&mut Vec<u8>>) -> Result<super::Meta, Stop> {
        while self.steno.next.is_none() || self.steno.left == 0 {
            self.next_block()?;
        }
        let s = self.steno;
        let at = s.next.expect("a frame is next");
        self.skip_to(at)?;
        if self.off < at {
            return Err(steno(
                self.off,
                format!(
                    "the file ends inside the block at {} (a file cut short)",
                    s.start
                ),
            ));
        }
        let Some(h) = self.read_header("frame header")? else {
            return Err(steno(
                at,
                format!(
                    "the file ends inside the block at {} (a file cut short)",
                    s.start
                ),
            ));
        };
        let f = FrameHdr::decode(&h);
        if let Err(why) = f.check(s.end.saturating_sub(at)) {
            return Err(steno(
                at,
                format!("bad frame in the block at {}: {why}", s.start),
            ));
        }
        self.skip_to(at + u64::from(f.mac))?;
        let want = f.snaplen as usize;
        let got = match data {
            Some(d) => {
                read_claimed(&mut self.inner, d, want).map_err(|e| Stop::at(at, End::Io(e)))?
            }
            None => std::io::copy(
                &mut (&mut self.inner).take(want as u64),
                &mut std::io::sink(),
            )
            .map_err(|e| Stop::at(at, End::Io(e)))? as usize,
        };
        self.off += got as u64;
        if got < want {
            return Err(steno(
                at,
                format!(
                    "the file ends inside a frame of the block at {} (a file cut short)",
                    s.start
                ),
            ));
        }
        let next = u64::from(f.next_offset);
        self.steno.left = s.left.saturating_sub(1);
        self.steno.next = (next != 0).then_some(at + next);
        Ok(super::Meta {
            offset: at,
            file_len: if next != 0 { next } else { f.end() },
            caplen: f.snaplen,
            orig_len: f.len,
            ts_ns: u64::from(f.sec) * 1_000_000_000 + u64::from(f.nsec),
            interface: 0,
            odd: f.len < f.snaplen || f.len == 0 || f.nsec >= 1_000_000_000,
        })
    }
}

impl<R: Read + Seek> Walker<R> {
    /// [`Walker::seek_to`] in stenotype's file: `to` is a frame's header
    /// (or a block's start); its block is read from there.
    pub(super) fn seek_steno(&mut self, to: u64) -> Result<(), Stop> {
        let bs = match self.steno.block {
            Some(b) => b,
            None => self.probe_block_size()?,
        };
        let start = to - to % bs;
        let r = &mut self.inner.inner;
        let mut h = [0u8; HEADER_LEN];
        let io = |e| Stop::at(to, End::Io(e));
        r.seek(SeekFrom::Start(start)).map_err(io)?;
        self.inner.forget();
        self.off = start;
        let Some(h2) = self.read_header("block descriptor")? else {
            return Err(Stop::at(start, End::Clean));
        };
        h.copy_from_slice(&h2);
        let d = BlockDesc::decode(&h);
        if let Err(why) = d.check(bs) {
            return Err(steno(start, format!("bad block descriptor: {why}")));
        }
        self.open_block(start, &d);
        if to > start {
            // Frames before `to` in the block are not counted: the chain of
            // next offsets ends the block. Seek there, not read there.
            self.steno.next = Some(to);
            self.steno.left = u32::MAX;
            let r = &mut self.inner.inner;
            r.seek(SeekFrom::Start(to)).map_err(io)?;
            self.inner.forget();
            self.off = to;
        }
        Ok(())
    }

    /// The block size of a file whose walk has not yet passed its first
    /// block: the first page-aligned offset after it (1 MiB, stenotype's
    /// default, tried first) holding a later block's descriptor.
    fn probe_block_size(&mut self) -> Result<u64, Stop> {
        let first = self.steno;
        let r = &mut self.inner.inner;
        let mut read_at = |at: u64| -> Option<BlockDesc> {
            r.seek(SeekFrom::Start(at)).ok()?;
            let mut h = [0u8; HEADER_LEN];
            r.read_exact(&mut h).ok()?;
            Some(BlockDesc::decode(&h))
        };
        let fits = |d: &BlockDesc, bs: u64| d.seq > first.seq && d.check(bs).is_ok();
        let min = (first.end - first.start).div_ceil(PAGE).max(1) * PAGE;
        let mut found = None;
        let default = crate::steno::DEFAULT_BLOCK;
        if default >= min && read_at(default).is_some_and(|d| fits(&d, default)) {
            found = Some(default);
        } else {
            let mut bs = min;
            while bs <= MAX_BLOCK {
                match read_at(bs) {
                    None => break,
                    Some(d) if fits(&d, bs) => {
                        found = Some(bs);
                        break;
                    }
                    Some(_) => bs += PAGE,
                }
            }
        }
        // One block only: any size holds it.
        let bs = found.unwrap_or(MAX_BLOCK);
        self.steno.block = Some(bs);
        Ok(bs)
    }
}
