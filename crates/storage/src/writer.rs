//! [`PcapWriter`]: frames in, pcap blocks out through a [`BlockSink`].

use crate::block::{BlockBuilder, DEFAULT_BLOCK_SIZE};
use crate::pcap::FileHeader;
use crate::sink::BlockSink;
use crate::StorageError;
use std::path::Path;

/// What a writer has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Frames in the file (or in the block about to be written).
    pub frames: u64,
    /// Captured bytes of those frames (after snaplen).
    pub bytes: u64,
    /// Frames that could not be written (lost with a failed block, or
    /// offered after the sink failed).
    pub lost: u64,
    /// Frames whose captured length was cut by the snap length.
    pub truncated: u64,
}

/// Writes frames as pcap records into blocks and blocks into a sink.
pub struct PcapWriter<S: BlockSink> {
    block: BlockBuilder,
    block_bytes: u64,
    sink: S,
    snaplen: usize,
    stats: WriterStats,
    failed: Option<String>,
}

impl<S: BlockSink> PcapWriter<S> {
    /// A writer with the default block size (1 MiB) and nanosecond stamps.
    pub fn new(sink: S, snaplen: u32) -> Self {
        Self::with_options(sink, snaplen, true, DEFAULT_BLOCK_SIZE)
    }

    pub fn with_options(sink: S, snaplen: u32, nanos: bool, block_size: usize) -> Self {
        let mut block = BlockBuilder::new(block_size, nanos);
        block.push_raw(&FileHeader::new(snaplen, nanos).encode());
        PcapWriter {
            block,
            block_bytes: 0,
            sink,
            snaplen: snaplen as usize,
            stats: WriterStats::default(),
            failed: None,
        }
    }

    /// Appends one frame stamped `ts_ns` (UTC ns); cut to the snap length.
    #[inline]
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> Result<(), StorageError> {
        if self.failed.is_some() {
            self.stats.lost += 1;
            return Err(self.failure());
        }
        let cap = frame.len().min(self.snaplen);
        let data = &frame[..cap];
        if !self.block.push_record(ts_ns, data, frame.len() as u32) {
            self.flush()?;
            if !self.block.push_record(ts_ns, data, frame.len() as u32) {
                // Only a block smaller than one record gets here.
                self.stats.lost += 1;
                return Err(StorageError::Corrupt {
                    path: self.sink.path().to_owned(),
                    offset: self.sink.bytes(),
                    why: format!("a {cap}-byte record does not fit a block; use a larger block"),
                });
            }
        }
        self.stats.frames += 1;
        self.stats.bytes += cap as u64;
        self.block_bytes += cap as u64;
        self.stats.truncated += u64::from(cap < frame.len());
        Ok(())
    }

    /// Writes the partly filled block now (for a quiet link, and at close).
    pub fn flush(&mut self) -> Result<(), StorageError> {
        if self.block.is_empty() {
            return Ok(());
        }
        if self.failed.is_some() {
            return Err(self.failure());
        }
        match self.sink.write_block(self.block.as_bytes()) {
            Ok(()) => {
                self.block.clear();
                self.block_bytes = 0;
                Ok(())
            }
            Err(e) => {
                let n = self.block.records();
                self.stats.frames -= n;
                self.stats.bytes -= self.block_bytes;
                self.stats.lost += n;
                self.block.clear();
                self.block_bytes = 0;
                self.failed = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn failure(&self) -> StorageError {
        StorageError::Write {
            path: self.sink.path().to_owned(),
            source: std::io::Error::other(self.failed.clone().unwrap_or_default()),
        }
    }

    /// Flushes and closes the file; returns the final counts.
    pub fn close(mut self) -> Result<WriterStats, (WriterStats, StorageError)> {
        let r = self.flush().and_then(|_| self.sink.finish());
        match r {
            Ok(()) => Ok(self.stats),
            Err(e) => Err((self.stats, e)),
        }
    }

    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    pub fn has_failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Bytes the file has on disk, plus the block not yet written.
    pub fn file_bytes(&self) -> u64 {
        self.sink.bytes() + self.block.len() as u64
    }

    pub fn path(&self) -> &Path {
        self.sink.path()
    }
}
