//! Building large aligned blocks of pcap records: the one copy of every frame.

use crate::sink::Block;
use wiretape_files::pcap::{record_header, Format, RECORD_HEADER_LEN};

/// Default block size: 1 MiB (>= 512 KiB was best in the HPCAP measurements).
pub const DEFAULT_BLOCK_SIZE: usize = 1 << 20;

/// Appends pcap records to a [`Block`]. Records never straddle blocks: a
/// record that does not fit is the caller's cue to hand the block on.
pub struct BlockBuilder {
    block: Block,
    records: u64,
    format: Format,
}

impl BlockBuilder {
    /// A builder over a fresh block of `size` bytes.
    pub fn new(size: usize, nanos: bool) -> Self {
        Self::from_block(Block::new(size), nanos)
    }

    /// A builder that appends after the bytes `block` already holds.
    pub fn from_block(block: Block, nanos: bool) -> Self {
        let format = if nanos {
            Format::PcapNs
        } else {
            Format::PcapUs
        };
        Self::with_format(block, format)
    }

    /// A builder of `format` records over `block`.
    pub fn with_format(block: Block, format: Format) -> Self {
        BlockBuilder {
            block,
            records: 0,
            format,
        }
    }

    /// The record format it appends (pcap ns, pcap µs or pcapng).
    pub fn format(&self) -> Format {
        self.format
    }

    /// Hands the block on (to a sink).
    pub fn take(&mut self) -> Block {
        self.records = 0;
        std::mem::replace(&mut self.block, Block::new(wiretape_files::aligned::ALIGN))
    }

    /// Continues in `block` (from a sink), after the bytes it holds.
    pub fn set_block(&mut self, block: Block) {
        self.block = block;
        self.records = 0;
    }

    /// Appends raw bytes (a file header). Returns false if they do not fit.
    pub fn push_raw(&mut self, bytes: &[u8]) -> bool {
        let (buf, len) = self.block.space();
        let end = *len + bytes.len();
        if end > buf.len() {
            return false;
        }
        buf[*len..end].copy_from_slice(bytes);
        *len = end;
        true
    }

    /// Appends one record; `data` is already cut to the snap length.
    /// Returns the record's length in the block, or 0 (and appends nothing)
    /// when the block has no room.
    #[inline(always)]
    pub fn push_record(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> usize {
        self.push_record_on(0, ts_ns, data, orig_len)
    }

    /// [`BlockBuilder::push_record`] of a frame of pcapng interface
    /// `interface` (pcap has one: it is ignored there).
    #[inline(always)]
    pub fn push_record_on(
        &mut self,
        interface: u32,
        ts_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> usize {
        let (buf, len) = self.block.space();
        let start = *len;
        let rec = self.format.record_len(data.len());
        let end = start + rec;
        if end > buf.len() {
            return 0;
        }
        let dst = &mut buf[start..end];
        if self.format == Format::PcapNg {
            wiretape_files::pcapng::write_epb_on(dst, interface, ts_ns, data, orig_len);
        } else {
            let nanos = self.format == Format::PcapNs;
            let hdr = record_header(ts_ns, nanos, data.len() as u32, orig_len);
            dst[..RECORD_HEADER_LEN].copy_from_slice(&hdr);
            copy_frame(&mut dst[RECORD_HEADER_LEN..], data);
        }
        *len = end;
        self.records += 1;
        rec
    }

    /// The filled part.
    pub fn as_bytes(&self) -> &[u8] {
        self.block.data()
    }

    /// Bytes in the block so far: records plus any carried-over bytes or
    /// file header it started with.
    pub fn len(&self) -> usize {
        self.block.len()
    }

    /// Whether the block holds no bytes at all (not even carried-over ones).
    pub fn is_empty(&self) -> bool {
        self.block.is_empty()
    }

    /// Size of the block in bytes (a whole number of pages): the most
    /// [`BlockBuilder::len`] can reach.
    pub fn capacity(&self) -> usize {
        self.block.capacity()
    }

    /// Records appended since the block was started.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Empties the block (for benches and tests that discard blocks).
    pub fn clear(&mut self) {
        self.block.clear();
        self.records = 0;
    }
}

/// Copies `src` into `dst` (of the same length). A frame of 16 to 128
/// bytes (small-packet loads) is copied as two overlapping moves of a fixed
/// size, which the compiler inlines, not by a call into `memcpy` (whose
/// call and size dispatch cost as much as the copy at these sizes).
#[inline(always)]
fn copy_frame(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    match n {
        16..=32 => {
            dst[..16].copy_from_slice(&src[..16]);
            dst[n - 16..].copy_from_slice(&src[n - 16..]);
        }
        33..=64 => {
            dst[..32].copy_from_slice(&src[..32]);
            dst[n - 32..].copy_from_slice(&src[n - 32..]);
        }
        65..=128 => {
            dst[..64].copy_from_slice(&src[..64]);
            dst[n - 64..].copy_from_slice(&src[n - 64..]);
        }
        _ => dst.copy_from_slice(src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn fills_until_full() {
        let mut b = BlockBuilder::new(4096, true);
        let frame = [0xabu8; 100];
        let mut n = 0;
        while b.push_record(n, &frame, 100) > 0 {
            n += 1;
        }
        assert_eq!(n, 4096 / 116);
        assert_eq!(b.records(), n);
        assert_eq!(b.len(), n as usize * 116);
        assert_eq!(&b.as_bytes()[16..116], &frame[..]);
        b.clear();
        assert!(b.is_empty());
        assert!(b.push_raw(&[1; 24]));
    }

    #[test]
    fn every_frame_length_is_copied_exactly() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..300 {
            let mut dst = vec![0xeeu8; n + 8];
            copy_frame(&mut dst[..n], &src[..n]);
            assert_eq!(&dst[..n], &src[..n], "length {n}");
            assert!(
                dst[n..].iter().all(|&b| b == 0xee),
                "length {n}: past the end"
            );
        }
    }

    #[test]
    fn appends_after_carried_bytes() {
        let mut blk = Block::new(4096);
        blk.buf_mut()[..10].copy_from_slice(&[9; 10]);
        blk.set_len(10);
        let mut b = BlockBuilder::from_block(blk, true);
        assert_eq!(b.push_record(1, &[7; 20], 20), 16 + 20);
        assert_eq!(&b.as_bytes()[..10], &[9; 10]);
        assert_eq!(b.len(), 10 + 16 + 20);
        assert_eq!(b.records(), 1);
    }
}
