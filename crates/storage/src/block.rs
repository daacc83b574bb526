//! Building large aligned blocks of pcap records: the one copy of every frame.

use crate::aligned::AlignedBuf;
use crate::pcap::{record_header, RECORD_HEADER_LEN};

/// Default block size: 1 MiB (>= 512 KiB was best in the HPCAP measurements).
pub const DEFAULT_BLOCK_SIZE: usize = 1 << 20;

/// A reusable, page-aligned block that pcap records are appended to.
pub struct BlockBuilder {
    buf: AlignedBuf,
    len: usize,
    records: u64,
    nanos: bool,
}

impl BlockBuilder {
    pub fn new(size: usize, nanos: bool) -> Self {
        BlockBuilder {
            buf: AlignedBuf::new(size),
            len: 0,
            records: 0,
            nanos,
        }
    }

    /// Appends raw bytes (a file header). Returns false if they do not fit.
    pub fn push_raw(&mut self, bytes: &[u8]) -> bool {
        let end = self.len + bytes.len();
        if end > self.buf.len() {
            return false;
        }
        self.buf.as_mut_slice()[self.len..end].copy_from_slice(bytes);
        self.len = end;
        true
    }

    /// Appends one record; `data` is already cut to the snap length.
    /// Returns false (and appends nothing) when the block has no room.
    #[inline(always)]
    pub fn push_record(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> bool {
        let end = self.len + RECORD_HEADER_LEN + data.len();
        if end > self.buf.len() {
            return false;
        }
        let hdr = record_header(ts_ns, self.nanos, data.len() as u32, orig_len);
        let dst = &mut self.buf.as_mut_slice()[self.len..end];
        dst[..RECORD_HEADER_LEN].copy_from_slice(&hdr);
        dst[RECORD_HEADER_LEN..].copy_from_slice(data);
        self.len = end;
        self.records += 1;
        true
    }

    /// The filled part.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf.as_slice()[..self.len]
    }

    /// The whole aligned buffer (filled part first), for sinks that write
    /// whole aligned blocks and truncate.
    pub fn aligned(&self) -> &AlignedBuf {
        &self.buf
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Records in the block.
    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.records = 0;
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
        while b.push_record(n, &frame, 100) {
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
}
