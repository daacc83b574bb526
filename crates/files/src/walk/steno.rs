//! The walker's step over stenotype's files ([`Format::Steno`], the layout
//! in [`crate::steno`]): frame by frame through each block, block by block
//! at the block size, which the walk learns from the file (the first
//! page-aligned offset after the first block where a later block's
//! descriptor stands) when it first leaves a block: a seek spends no read
//! on it (a selective query reads a file's head and its frames).
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
    /// The first block's end of bytes in use and sequence number (from the
    /// head): a seek into it needs no block size.
    first_end: u64,
    first_seq: u64,
    /// Seeked into a block after the first before the block size was
    /// known: its start is not known (`start` is the seek's target), nor
    /// its end (`end` is the end of the last frame read); the next
    /// descriptor is looked for from there when its last frame is read.
    lazy: bool,
}

fn steno(at: u64, what: String) -> Stop {
    Stop::corrupt(at, Why::Steno(what))
}

/// The block size, from the first block (its start, the bytes it uses, its
/// sequence number) and the first later descriptor found (`gap` bytes after
/// its start, sequence number `seq`). The ring numbers every block it
/// hands out, and hands out no empty block (on a timeout it re-arms the
/// timer of an empty one instead), and stenotype writes every block it
/// gets: numbers `k` apart are `k` blocks apart in the file. A gap of `k`
/// whole blocks of pages, each at least as long as the first block's bytes
/// in use, means the `k - 1` descriptors between were not found (damage).
fn stride(used: u64, seq0: u64, gap: u64, seq: u64) -> u64 {
    let k = seq.saturating_sub(seq0);
    if k > 1 && gap.is_multiple_of(k) {
        let s = gap / k;
        if s.is_multiple_of(PAGE) && s >= used {
            return s;
        }
    }
    gap
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
        self.steno.first_end = self.steno.end;
        self.steno.first_seq = d.seq;
        Ok(true)
    }

    fn open_block(&mut self, at: u64, d: &BlockDesc) {
        let s = &mut self.steno;
        s.lazy = false;
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
        // that holds a later block's descriptor. After a seek into a block
        // whose start is not known ([`StenoPos::lazy`]: `end` is its last
        // frame's end), the block found is opened and the size is found at
        // the next one.
        let mut at = s.end.div_ceil(PAGE) * PAGE;
        let from = if s.lazy { s.end } else { s.start };
        // What stands at each page start passed: the descriptor a stride
        // that skips it finds bad.
        let mut seen: Vec<(u64, [u8; HEADER_LEN])> = Vec::new();
        loop {
            if at - from > MAX_BLOCK {
                let b = self.block_name();
                return Err(steno(
                    s.end,
                    format!("no block descriptor within {MAX_BLOCK} bytes after {b}"),
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
            if s.lazy && d.seq > s.seq && d.check(MAX_BLOCK).is_ok() {
                self.open_block(at, &d);
                return Ok(());
            }
            if !s.lazy && d.seq > s.seq && d.check(at - s.start).is_ok() {
                let bs = stride(s.end - s.start, s.seq, at - s.start, d.seq);
                self.steno.block = Some(bs);
                if bs < at - s.start {
                    let bad = s.start + bs;
                    let h = seen
                        .iter()
                        .find(|x| x.0 == bad)
                        .map_or([0; HEADER_LEN], |x| x.1);
                    let why = BlockDesc::decode(&h).check(bs).err().unwrap_or_default();
                    return Err(steno(bad, format!("bad block descriptor: {why}")));
                }
                self.open_block(at, &d);
                return Ok(());
            }
            seen.push((at, h));
            if h == [0; HEADER_LEN] && self.rest_is_zero() {
                return Err(Stop::at(s.end, End::Clean));
            }
            at += PAGE;
        }
    }

    /// Names the current block in a message.
    fn block_name(&self) -> String {
        let s = &self.steno;
        if s.lazy {
            format!("the block holding byte {}", s.start)
        } else {
            format!("the block at {}", s.start)
        }
    }

    /// [`Walker::next_at`] in stenotype's file: the block's next frame, or,
    /// after its last, the next page boundary (where the next block's
    /// descriptor is at the earliest; its first frame follows it).
    pub(super) fn steno_next_at(&self) -> u64 {
        match self.steno.next {
            Some(n) if self.steno.left > 0 => n.max(self.off),
            _ => self.off.div_ceil(PAGE) * PAGE,
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
            let b = self.block_name();
            return Err(steno(
                self.off,
                format!("the file ends inside {b} (a file cut short)"),
            ));
        }
        let Some(h) = self.read_header("frame header")? else {
            let b = self.block_name();
            return Err(steno(
                at,
                format!("the file ends inside {b} (a file cut short)"),
            ));
        };
        if s.lazy && at.is_multiple_of(PAGE) && h[..4] == crate::steno::TPACKET_V3.to_le_bytes() {
            // A seek to a block's start: its descriptor (a frame header's
            // `tp_next_offset` is never 2).
            let d = BlockDesc::decode(&h);
            if d.seq <= s.first_seq {
                return Err(steno(
                    at,
                    format!(
                        "bad block descriptor: sequence number {} not after the first block's {}",
                        d.seq, s.first_seq
                    ),
                ));
            }
            if let Err(why) = d.check(MAX_BLOCK) {
                return Err(steno(at, format!("bad block descriptor: {why}")));
            }
            self.open_block(at, &d);
            return self.step_steno(data);
        }
        let f = FrameHdr::decode(&h);
        // Seeked into a block of a size not known yet: a frame within the
        // largest block believed.
        let room = if s.lazy {
            MAX_BLOCK
        } else {
            s.end.saturating_sub(at)
        };
        if let Err(why) = f.check(room) {
            let b = self.block_name();
            return Err(steno(at, format!("bad frame in {b}: {why}")));
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
            let b = self.block_name();
            return Err(steno(
                at,
                format!("the file ends inside a frame of {b} (a file cut short)"),
            ));
        }
        let next = u64::from(f.next_offset);
        if s.lazy {
            self.steno.end = at + f.end();
        }
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
    /// (or a block's start); its block is read from there. Into a block,
    /// its descriptor is not read (a query's reads stay at its frames): the
    /// block's frames go on along their next offsets to the last one (0),
    /// each within the block's size. No read is spent on the block size
    /// before it is needed: a seek into the first block takes its bounds
    /// from its descriptor (read with the head); a seek further on before
    /// the walk knows the block size goes to the frame, and the next block
    /// is looked for after the last frame of that one
    /// ([`StenoPos::lazy`]). A selective query then reads the file's head
    /// and its frames, nothing else.
    pub(super) fn seek_steno(&mut self, to: u64) -> Result<(), Stop> {
        let io = |e| Stop::at(to, End::Io(e));
        self.inner.inner.seek(SeekFrom::Start(to)).map_err(io)?;
        self.inner.forget();
        self.off = to;
        let s = &mut self.steno;
        let Some(bs) = s.block else {
            s.next = Some(to);
            s.left = u32::MAX;
            if to < s.first_end {
                s.lazy = false;
                s.start = 0;
                s.end = s.first_end;
                s.seq = s.first_seq;
            } else {
                s.lazy = true;
                s.start = to;
                s.end = to;
                s.seq = s.first_seq;
            }
            return Ok(());
        };
        let start = to - to % bs;
        if to == start {
            let Some(h) = self.read_header("block descriptor")? else {
                return Err(Stop::at(start, End::Clean));
            };
            let d = BlockDesc::decode(&h);
            if let Err(why) = d.check(bs) {
                return Err(steno(start, format!("bad block descriptor: {why}")));
            }
            self.open_block(start, &d);
            return Ok(());
        }
        let s = &mut self.steno;
        s.lazy = false;
        s.start = start;
        s.end = start + bs;
        s.next = Some(to);
        s.left = u32::MAX;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::Walker;
    use crate::steno::{encode_block, HEADER_LEN, TP_MAC};
    use crate::{FileInfo, Format, PcapReader, Record, StorageError};
    use std::io::Cursor;

    /// Frame `i` of block `b`: its stamp and bytes (lengths vary).
    fn frame(b: usize, i: usize) -> (u64, Vec<u8>) {
        let n = 60 + (b * 7 + i * 13) % 1400;
        let ts = 1_795_813_946_000_000_000 + (b * 1000 + i) as u64 * 1_000_003;
        (ts, (0..n).map(|k| (k + b * 31 + i) as u8).collect())
    }

    /// A file of `blocks` blocks of `size` bytes, `per` frames each.
    fn file(blocks: usize, per: usize, size: usize) -> (Vec<u8>, Vec<(u64, Vec<u8>)>) {
        let mut out = Vec::new();
        let mut all = Vec::new();
        for b in 0..blocks {
            let fr: Vec<(u64, Vec<u8>)> = (0..per).map(|i| frame(b, i)).collect();
            let refs: Vec<(u64, &[u8])> = fr.iter().map(|(t, d)| (*t, d.as_slice())).collect();
            out.extend(encode_block(&refs, size, 3 + b as u64));
            all.extend(fr);
        }
        (out, all)
    }

    fn read_all(bytes: &[u8]) -> (Vec<(u64, Vec<u8>)>, Option<StorageError>) {
        let path = std::path::Path::new("/x/1795813946878311");
        let mut r = match PcapReader::new(Cursor::new(bytes), path, bytes.len() as u64) {
            Ok(r) => r,
            Err(e) => return (Vec::new(), Some(e)),
        };
        assert_eq!(r.format(), Format::Steno);
        let mut got = Vec::new();
        let mut rec = Record::default();
        loop {
            match r.next_into(&mut rec) {
                Ok(true) => {
                    assert_eq!(rec.orig_len as usize, rec.data.len());
                    got.push((rec.ts_ns, rec.data.clone()));
                }
                Ok(false) => return (got, None),
                Err(e) => return (got, Some(e)),
            }
        }
    }

    #[test]
    fn every_frame_of_every_block_at_a_block_size_found_in_the_file() {
        for size in [16 << 10, 1 << 20] {
            let (bytes, want) = file(4, 9, size);
            let (got, err) = read_all(&bytes);
            assert!(err.is_none(), "{err:?}");
            assert_eq!(got, want, "block size {size}");
        }
    }

    #[test]
    fn zeros_where_a_block_would_be_end_the_file_cleanly() {
        // Space stenotype allocated ahead, not written yet.
        let (mut bytes, want) = file(3, 5, 16 << 10);
        bytes.extend(vec![0u8; 3 * (16 << 10)]);
        let (got, err) = read_all(&bytes);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got, want);
    }

    #[test]
    fn a_file_cut_short_gives_its_whole_frames_and_names_the_cut() {
        let size = 16 << 10;
        let (bytes, want) = file(3, 6, size);
        // Inside the fourth frame's bytes of the third block.
        let mut at = 2 * size + HEADER_LEN;
        for i in 0..3 {
            let n = usize::from(TP_MAC) + frame(2, i).1.len();
            at += n.div_ceil(16) * 16;
        }
        let cut = at + usize::from(TP_MAC) + 10;
        let (got, err) = read_all(&bytes[..cut]);
        assert_eq!(got, want[..2 * 6 + 3].to_vec());
        let e = err.expect("the cut is named");
        let m = e.to_string();
        assert!(
            matches!(e, StorageError::Steno { offset, .. } if offset == at as u64),
            "{m}"
        );
        assert!(
            m.contains("cut short") && m.contains(&format!("file is {cut} bytes")),
            "{m}"
        );
        assert!(m.contains("never changes Stenographer's files"), "{m}");
        // Cut inside a descriptor: the blocks before, the cut named.
        let (got, err) = read_all(&bytes[..size + 20]);
        assert_eq!(got, want[..6].to_vec());
        assert!(err.unwrap().to_string().contains("cut short"));
        // Cut in the unused end of the last block: nothing lost, no error.
        let (got, err) = read_all(&bytes[..size - 8]);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(got, want[..6].to_vec());
    }

    #[test]
    fn a_bad_descriptor_is_named_with_its_offset_and_the_frames_before_kept() {
        let size = 16 << 10;
        let (mut bytes, want) = file(4, 5, size);
        bytes[2 * size] = 7; // version 7
        let (got, err) = read_all(&bytes);
        assert_eq!(got, want[..10].to_vec());
        let e = err.unwrap();
        let m = e.to_string();
        assert!(
            matches!(e, StorageError::Steno { offset, .. } if offset == 2 * size as u64),
            "{m}"
        );
        assert!(
            m.contains("bad block descriptor") && m.contains("version 7"),
            "{m}"
        );
        assert_eq!(m.lines().count(), 1);
        // The second block's, while the block size is still to be found:
        // not taken for slack (the numbers of the blocks say one is missing).
        let (mut bytes, want) = file(4, 5, size);
        bytes[size] = 7;
        let (got, err) = read_all(&bytes);
        assert_eq!(got, want[..5].to_vec());
        let m = err.unwrap().to_string();
        assert!(
            m.contains(&format!("at byte {size}")) && m.contains("version 7"),
            "{m}"
        );
        // A bad frame header: the frames before it in its block are kept.
        let (mut bytes, want) = file(2, 5, size);
        let second = HEADER_LEN + (usize::from(TP_MAC) + frame(0, 0).1.len()).div_ceil(16) * 16;
        bytes[second + 24..second + 26].copy_from_slice(&9u16.to_le_bytes()); // tp_mac 9
        let (got, err) = read_all(&bytes);
        assert_eq!(got, want[..1].to_vec());
        assert!(err.unwrap().to_string().contains("tp_mac 9"));
    }

    /// The frames after `got`, read to the walk's clean end.
    fn rest<R: std::io::Read>(
        w: &mut Walker<R>,
        mut got: Vec<(u64, Vec<u8>)>,
    ) -> Vec<(u64, Vec<u8>)> {
        let mut d = Vec::new();
        while let Some(m) = w.next_into(&mut d) {
            got.push((m.ts_ns, d.clone()));
        }
        let stop = w.stop().unwrap();
        assert!(stop.error(std::path::Path::new("x"), 0).is_none());
        got
    }

    #[test]
    fn seeking_to_a_frame_reads_from_it_whatever_was_read_before() {
        for size in [16 << 10, 1 << 20] {
            let (bytes, want) = file(3, 7, size);
            // The offsets of every frame, from a first walk.
            let mut w = Walker::new(Cursor::new(&bytes));
            let mut offs = Vec::new();
            while let Some(m) = w.next() {
                offs.push(m.offset);
            }
            assert_eq!(offs.len(), want.len());
            for k in [0, 3, 7, 9, 20] {
                let mut w = Walker::new(Cursor::new(&bytes));
                w.seek_to(offs[k]);
                let got = rest(&mut w, Vec::new());
                assert_eq!(got, want[k..].to_vec(), "size {size}, from frame {k}");
            }
        }
    }

    /// A reader that notes where each read starts and how long it is.
    struct Noted<'a> {
        c: Cursor<&'a [u8]>,
        reads: std::rc::Rc<std::cell::RefCell<Vec<(u64, usize)>>>,
    }

    impl std::io::Read for Noted<'_> {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            let at = self.c.position();
            let n = self.c.read(b)?;
            if n > 0 {
                self.reads.borrow_mut().push((at, n));
            }
            Ok(n)
        }
    }

    impl std::io::Seek for Noted<'_> {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.c.seek(to)
        }
    }

    #[test]
    fn a_seek_reads_the_head_and_the_frame_and_no_byte_to_find_the_block_size() {
        let size = 1 << 20;
        let (bytes, want) = file(3, 7, size);
        let mut w = Walker::new(Cursor::new(&bytes));
        let mut offs = Vec::new();
        while let Some(m) = w.next() {
            offs.push(m.offset);
        }
        // A frame of the first block, of the second, of the third; and the
        // third block's start (its descriptor, then its frames).
        for (to, first) in [
            (offs[3], 3),
            (offs[9], 9),
            (offs[16], 16),
            (2 * size as u64, 14),
        ] {
            let reads = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let c = Cursor::new(bytes.as_slice());
            let mut w = Walker::new(Noted {
                c,
                reads: reads.clone(),
            });
            let head = reads.borrow().len();
            w.seek_to(to);
            let mut d = Vec::new();
            let m = w.next_into(&mut d).expect("a frame");
            assert_eq!((m.ts_ns, d.clone()), want[first], "from byte {to}");
            // Nothing read but the head and from the seek's target on.
            let r = reads.borrow();
            assert!(
                r[..head].iter().all(|&(at, n)| at + n as u64 <= 48),
                "{r:?}"
            );
            assert!(
                r[head..].iter().all(|&(at, _)| at >= to),
                "from byte {to}: {r:?}"
            );
            drop(r);
            // And on to the end, across the blocks.
            let got = rest(&mut w, vec![(m.ts_ns, d)]);
            assert_eq!(got, want[first..].to_vec(), "from byte {to}");
        }
    }

    #[test]
    fn info_sums_a_file() {
        let d = std::env::temp_dir().join(format!("wt-steno-info-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("1795813946878311");
        let (bytes, want) = file(2, 4, 16 << 10);
        std::fs::write(&p, &bytes).unwrap();
        let i = FileInfo::scan(&p).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(i.format, Some(Format::Steno));
        assert_eq!(i.packets, 8);
        assert!(i.nanos);
        assert_eq!(
            i.captured_bytes,
            want.iter().map(|f| f.1.len() as u64).sum::<u64>()
        );
        assert_eq!(i.first_ns, Some(want[0].0));
        assert_eq!(i.last_ns, Some(want[7].0));
    }
}
