//! [`PcapWriter`]: frames in, pcap blocks out through a [`BlockSink`].
//!
//! After a write error the writer stops, and at close it cuts the file back
//! to its last complete record and reports exactly how many frames the file
//! holds: everything accepted after that is counted as lost.

use crate::block::BlockBuilder;
use crate::index::IndexWriter;
use crate::sink::{BlockSink, Unwritten};
use std::collections::VecDeque;
use std::path::Path;
use wiretape_files::pcap::Format;
use wiretape_files::StorageError;

/// What a writer has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Frames in the file (or in blocks about to be written).
    pub frames: u64,
    /// Captured bytes of those frames (after snaplen).
    pub bytes: u64,
    /// Frames that could not be written (lost with a failed block, or
    /// offered after the sink failed).
    pub lost: u64,
    /// Frames whose captured length was cut by the snap length.
    pub truncated: u64,
    /// Runs laid out in place written ([`PcapWriter::write_external`]).
    pub runs: u64,
    /// Segments of the key index written ([`crate::keys`]).
    pub key_segments: u64,
    /// Blocks left out of the key index (its builder fell behind).
    pub key_dropped_blocks: u64,
    /// The key index could not be written (see the writer's notes).
    pub key_failed: bool,
    /// Frames not read for the file's session table (its thread was
    /// behind: the table is marked incomplete).
    pub sessions_skipped: u64,
}

/// Writes frames as pcap records into blocks and blocks into a sink.
pub struct PcapWriter<S: BlockSink> {
    block: BlockBuilder,
    sink: S,
    snaplen: usize,
    stats: WriterStats,
    failed: Option<String>,
    /// Stream bytes (header + records) handed to the builder so far.
    stream_len: u64,
    /// Record boundaries of recently submitted blocks: (stream offset,
    /// frames before it, bytes before it). Used to find the last complete
    /// record after a failed write without reading the whole file.
    history: VecDeque<(u64, u64, u64)>,
    /// Full blocks handed to the sink, and frames at the last flush.
    blocks: u64,
    frames_at_flush: u64,
    header_len: u64,
    index: Option<IndexWriter>,
    index_error: Option<String>,
    /// The failure was a full disk.
    failed_full: bool,
    /// Where the compressed sink put blocks, for the index.
    placed: Vec<wiretape_files::compress::Placed>,
    /// The file is compressed ([`crate::compress`]).
    compressed: bool,
    /// The session table's feed ([`crate::sessions`]), with where the
    /// block's records not yet handed over start and the frames handed.
    sessions: Option<crate::sessions::SessionFeed>,
    feed_from: usize,
    feed_frames: u64,
    linktypes: Vec<u32>,
    /// The file header (to walk a failed sink's records from the middle).
    header: Vec<u8>,
    /// The file is encrypted: this writer cannot read it back, so after a
    /// failure its counts come from what the sink gives back.
    encrypted: bool,
    /// After a failure, what the encrypted file keeps: (frames, bytes).
    kept_after: Option<(u64, u64)>,
    /// What the failed sink gave back while closing, for the caller.
    left: Option<Unwritten>,
}

/// (records, captured bytes) a reader gets from `path` (up to a torn tail).
fn readable(path: &Path) -> Option<(u64, u64)> {
    let src =
        wiretape_files::zread::open_buffered(path, &wiretape_files::ReadOptions::default()).ok()?;
    let mut w = wiretape_files::walk::Walker::new(src);
    let (mut n, mut b) = (0, 0);
    while let Some(m) = w.next() {
        n += 1;
        b += m.caplen as u64;
    }
    Some((n, b))
}

/// Frames with their record's metadata, kept in RAM for another volume.
pub type Rescued = Vec<(wiretape_files::walk::Meta, Vec<u8>)>;

/// The records in `u` (a file's bytes from stream offset `u.off` on; at 0
/// they start with the file header `header`): those that end past
/// `u.kept`, for another volume, and the count and captured bytes of those
/// before, which the failed file keeps.
pub fn split_unwritten(header: &[u8], u: &Unwritten) -> (Rescued, u64, u64) {
    let mut stream = Vec::new();
    if u.off > 0 {
        stream = header.to_vec();
    }
    // Where the walk's offsets are in the file.
    let shift = u.off as i128 - stream.len() as i128;
    for b in &u.blocks {
        stream.extend_from_slice(b.data());
    }
    let mut w = wiretape_files::walk::Walker::new(std::io::Cursor::new(stream));
    let (mut out, mut frames, mut bytes) = (Vec::new(), 0, 0);
    let mut data = Vec::new();
    while let Some(m) = w.next_into(&mut data) {
        if w.offset() as i128 + shift > u.kept as i128 {
            out.push((m, std::mem::take(&mut data)));
        } else {
            frames += 1;
            bytes += m.caplen as u64;
        }
    }
    (out, frames, bytes)
}

impl<S: BlockSink> PcapWriter<S> {
    /// A writer with nanosecond stamps and the sink's block size.
    pub fn new(sink: S, snaplen: u32) -> Self {
        Self::with_options(sink, snaplen, true)
    }

    /// A pcap writer of nanosecond stamps if `nanos`, else microsecond
    /// ones, cutting frames to `snaplen` bytes.
    pub fn with_options(sink: S, snaplen: u32, nanos: bool) -> Self {
        let f = if nanos {
            Format::PcapNs
        } else {
            Format::PcapUs
        };
        Self::with_format(sink, snaplen, f, "")
    }

    /// A writer of `format`; `ifname` names the interface in pcapng's IDB.
    pub fn with_format(sink: S, snaplen: u32, format: Format, ifname: &str) -> Self {
        Self::with_link(
            sink,
            snaplen,
            format,
            ifname,
            wiretape_files::pcap::LINKTYPE_ETHERNET,
        )
    }

    /// [`PcapWriter::with_format`] of frames of link type `linktype`.
    pub fn with_link(sink: S, snaplen: u32, format: Format, ifname: &str, linktype: u32) -> Self {
        Self::with_links(sink, snaplen, format, ifname, &[linktype])
    }

    /// [`PcapWriter::with_format`] of frames of the link types `linktypes`
    /// (at least one): pcapng gets an IDB for each, interface `k` for
    /// `linktypes[k]` ([`PcapWriter::write_wire_on`]). A pcap file states
    /// one link type: more than one is a caller's bug (it panics; refuse
    /// such output before, as `extract` does).
    pub fn with_links(
        mut sink: S,
        snaplen: u32,
        format: Format,
        ifname: &str,
        linktypes: &[u32],
    ) -> Self {
        assert!(
            linktypes.len() == 1 || (format == Format::PcapNg && !linktypes.is_empty()),
            "a pcap file holds one link type; pcapng one or more"
        );
        let mut block = BlockBuilder::with_format(sink.first_block(), format);
        let header = match format {
            Format::PcapNg => wiretape_files::pcapng::file_header_links(snaplen, ifname, linktypes),
            _ => format.file_header(snaplen, ifname, linktypes[0]),
        };
        assert!(block.push_raw(&header), "the file header fits a block");
        // (kept for walking a failed sink's records: see `take_unwritten`)
        let header_len = header.len() as u64;
        let feed_from = block.len();
        PcapWriter {
            block,
            sink,
            snaplen: snaplen as usize,
            stats: WriterStats::default(),
            failed: None,
            stream_len: header_len,
            history: VecDeque::from([(header_len, 0, 0)]),
            blocks: 0,
            frames_at_flush: 0,
            header_len,
            index: None,
            index_error: None,
            failed_full: false,
            placed: Vec::new(),
            compressed: false,
            sessions: None,
            feed_from,
            feed_frames: 0,
            linktypes: linktypes.to_vec(),
            header,
            encrypted: false,
            kept_after: None,
            left: None,
        }
    }

    /// Says the sink encrypts (a [`crate::crypt::AgeSink`], maybe behind
    /// a compressor): after a failed write the file, which this writer
    /// cannot read back, is left as the sink cut it (its whole chunks; a
    /// torn tail after them) and counted from what the sink gives back.
    pub fn encrypted(mut self, on: bool) -> Self {
        self.encrypted = on;
        self
    }

    /// After a failed write: the records the file does not keep, from its
    /// sink ([`BlockSink::take_unwritten`]), for another volume.
    pub fn take_unwritten(&mut self) -> Option<Unwritten> {
        if let Some(u) = self.left.take() {
            return Some(u);
        }
        let u = self.sink.take_unwritten()?;
        if self.encrypted {
            self.kept_after = Some(self.kept_with(&u));
        }
        Some(u)
    }

    /// (frames, bytes) the file keeps when the sink gave back `u`: those
    /// before `u.off` (the writer's count at that block boundary) and
    /// those of `u` that end by `u.kept`. A boundary older than the
    /// writer's history counts from the latest one before it (fewer than
    /// the file holds: never more).
    fn kept_with(&self, u: &Unwritten) -> (u64, u64) {
        if u.blocks.is_empty() && u.off >= self.stream_len {
            // The file keeps the whole stream.
            return (self.stats.frames, self.stats.bytes);
        }
        let at = self
            .history
            .iter()
            .rev()
            .find(|h| h.0 <= u.off.max(self.header_len));
        match at {
            Some(&(off, frames, bytes)) if off == u.off.max(self.header_len) => {
                let (_, n, b) = split_unwritten(&self.header, u);
                (frames + n, bytes + b)
            }
            Some(&(_, frames, bytes)) => (frames, bytes),
            None => (0, 0),
        }
    }

    /// Also feeds the file's session table ([`crate::sessions`]): a copy of
    /// each block's records goes to the session thread as the block goes
    /// to the disk.
    pub fn with_sessions(mut self, mut feed: crate::sessions::SessionFeed) -> Self {
        feed.set_layout(self.block.format(), &self.linktypes);
        self.sessions = Some(feed);
        self
    }

    /// Hands the block's records not handed yet, and `extra` (a run laid
    /// out in place holding `extra_frames` frames), to the session table:
    /// once per block, just before the block goes to the sink.
    fn feed_sessions(&mut self, extra: &[u8], extra_frames: u64) {
        let Some(f) = &mut self.sessions else { return };
        let frames = self.stats.frames.saturating_sub(self.feed_frames) + extra_frames;
        let bytes = self.block.as_bytes();
        f.hand(&[bytes.get(self.feed_from..).unwrap_or(&[]), extra], frames);
        self.feed_frames = self.stats.frames + extra_frames;
        self.feed_from = bytes.len();
    }

    /// Ends the file's session table here (its writer goes on in a new
    /// file: `last` false), with the records written so far; the table is
    /// written by the session thread. Call it on the thread writing the
    /// frames, before the next file's first block is handed over.
    pub fn end_sessions(&mut self, last: bool) {
        self.feed_sessions(&[], 0);
        if let Some(f) = self.sessions.take() {
            self.stats.sessions_skipped = f.skipped();
            f.close(last);
        }
    }

    /// Says the sink compresses (a [`crate::compress::CompressSink`]):
    /// the index is then of version 3, and recovery after a write error
    /// reads the file decompressed. Call before [`PcapWriter::with_index`].
    pub fn compressed(mut self, on: bool) -> Self {
        self.compressed = on;
        self
    }

    /// Hands the places of compressed blocks to the index.
    fn note_placed(&mut self) {
        if !self.compressed {
            return;
        }
        self.sink.take_placed(&mut self.placed);
        if let Some(i) = &mut self.index {
            i.placed(&self.placed);
        }
        self.placed.clear();
    }

    /// Also writes the sidecar index `<path>.idx` (see [`crate::index`]).
    /// If it cannot be created the capture goes on without it
    /// ([`PcapWriter::index_error`] says why).
    pub fn with_index(self, capture_path: &Path) -> Self {
        self.index_with(capture_path, true)
    }

    /// With the index: also the exact key index `<capture>.kdx`
    /// ([`crate::keys`]), its segments built by `builder` (None: on the
    /// writer's thread at each cut, and at close); `wait`: wait for a busy
    /// builder (a file source) instead of leaving a segment out.
    pub fn with_keys(
        self,
        capture_path: &Path,
        builder: Option<std::sync::Arc<crate::keys::Builder>>,
        wait: bool,
    ) -> Self {
        self.with_keys_budget(capture_path, builder, wait, crate::keys::ROWS_BUDGET)
    }

    /// [`PcapWriter::with_keys`], a segment cut every `rows` rows (32 bytes
    /// each in memory until then).
    pub fn with_keys_budget(
        mut self,
        capture_path: &Path,
        builder: Option<std::sync::Arc<crate::keys::Builder>>,
        wait: bool,
        rows: usize,
    ) -> Self {
        if let Some(i) = self.index.take() {
            self.index = Some(i.with_keys_budget(capture_path, builder, wait, rows));
        }
        self
    }

    /// [`PcapWriter::with_index`] without the blocks' flow sets (time only).
    pub fn with_index_no_flows(self, capture_path: &Path) -> Self {
        self.index_with(capture_path, false)
    }

    fn index_with(mut self, capture_path: &Path, flows: bool) -> Self {
        // The index holds stamps as the file does (µs files: whole µs).
        let unit = if self.block.format() == Format::PcapUs {
            1000
        } else {
            1
        };
        match IndexWriter::create_with(capture_path, unit, self.compressed) {
            Ok(i) if flows => self.index = Some(i),
            Ok(i) => self.index = Some(i.without_flows()),
            Err(e) => self.index_error = Some(e.to_string()),
        }
        self
    }

    /// Why the index is missing or incomplete, if it is.
    pub fn index_error(&self) -> Option<&str> {
        self.index_error
            .as_deref()
            .or(self.index.as_ref().and_then(|i| i.error.as_deref()))
    }

    /// The format the file is written in.
    pub fn format(&self) -> Format {
        self.block.format()
    }

    /// Appends one frame stamped `ts_ns` (UTC ns); cut to the snap length.
    #[inline]
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> Result<(), StorageError> {
        self.write_wire(ts_ns, frame, frame.len() as u32)
    }

    /// As [`PcapWriter::write`], for a frame that was `wire_len` bytes on
    /// the wire (more than its bytes when a capture file had cut it).
    #[inline]
    pub fn write_wire(
        &mut self,
        ts_ns: u64,
        frame: &[u8],
        wire_len: u32,
    ) -> Result<(), StorageError> {
        self.write_wire_on(0, ts_ns, frame, wire_len)
    }

    /// [`PcapWriter::write_wire`] of a frame of interface `interface`
    /// (pcapng written [`PcapWriter::with_links`]: the index of its link
    /// type there; pcap: ignored).
    #[inline]
    pub fn write_wire_on(
        &mut self,
        interface: u32,
        ts_ns: u64,
        frame: &[u8],
        wire_len: u32,
    ) -> Result<(), StorageError> {
        let wire_len = wire_len.max(frame.len() as u32);
        if self.failed.is_some() {
            self.stats.lost += 1;
            return Err(self.failure());
        }
        let cap = frame.len().min(self.snaplen);
        let data = &frame[..cap];
        let mut rec = self.block.push_record_on(interface, ts_ns, data, wire_len);
        if rec == 0 {
            if let Err(e) = self.submit() {
                self.stats.lost += 1; // this frame: it never reached a block
                return Err(e);
            }
            rec = self.block.push_record_on(interface, ts_ns, data, wire_len);
            if rec == 0 {
                // Only a block smaller than one record gets here.
                self.stats.lost += 1;
                return Err(StorageError::Corrupt {
                    path: self.sink.path().to_owned(),
                    offset: self.stream_len,
                    why: format!("a {cap}-byte record does not fit a block; use a larger block"),
                });
            }
        }
        if let Some(i) = &mut self.index {
            i.record(self.stream_len, ts_ns, data);
        }
        self.stats.frames += 1;
        self.stats.bytes += cap as u64;
        self.stream_len += rec as u64;
        self.stats.truncated += u64::from(cap < frame.len());
        Ok(())
    }

    /// Appends `ext`, a run of pcapng blocks laid out in place (see
    /// [`crate::external`]: EPBs of interface 0 with ns stamps, fillers)
    /// that the sink writes from where it lies. The stream is first padded
    /// to a page with a filler. Returns what the run holds. A run that is
    /// not well formed is refused and nothing of it written (a bug of its
    /// maker). After a failed write its frames count as lost, and the sink
    /// keeps a copy of the run's bytes the file does not keep (made then,
    /// before the run's memory goes back to its owner; the io_uring and the
    /// buffered sink) for [`PcapWriter::take_unwritten`]: another volume
    /// takes them, and they are counted again there.
    pub fn write_external(
        &mut self,
        ext: crate::external::External,
    ) -> Result<crate::external::RunInfo, StorageError> {
        use crate::external::{walk_run, write_fill, MIN_BLOCK};
        assert!(
            self.block.format() == Format::PcapNg,
            "runs of pcapng blocks go into pcapng files"
        );
        if self.failed.is_some() {
            let frames = walk_run(ext.bytes(), |_, _, _| {}).map_or(0, |i| i.frames);
            self.stats.lost += frames;
            return Err(self.failure());
        }
        const PAGE: usize = wiretape_files::aligned::ALIGN;
        // Where the run will start (after the filler below).
        let rem = (self.stream_len % PAGE as u64) as usize;
        let mut gap = 0;
        if rem != 0 {
            gap = PAGE - rem;
            if gap < MIN_BLOCK {
                gap += PAGE;
            }
        }
        // One walk: checks the run and indexes its frames.
        let base = self.stream_len + gap as u64;
        let index = &mut self.index;
        let walked = walk_run(ext.bytes(), |o, ts, f| {
            if let Some(i) = index {
                i.record(base + o as u64, ts, f);
            }
        });
        let info = match walked {
            Ok(info) => info,
            Err(why) => {
                if let Some(i) = &mut self.index {
                    i.discard_current();
                }
                return Err(StorageError::Corrupt {
                    path: self.sink.path().to_owned(),
                    offset: base,
                    why: format!("a run laid out in place is not pcapng: {why}"),
                });
            }
        };
        if gap != 0 {
            let mut fill = [0u8; 2 * PAGE];
            write_fill(&mut fill[..gap]);
            if !self.block.push_raw(&fill[..gap]) {
                if let Err(e) = self.submit() {
                    self.stats.lost += info.frames;
                    return Err(e);
                }
                assert!(self.block.push_raw(&fill[..gap]), "a filler fits a block");
            }
            self.stream_len += gap as u64;
        }
        debug_assert_eq!(base, self.stream_len);
        let len = ext.len() as u64;
        self.feed_sessions(ext.bytes(), info.frames);
        let b = self.block.take();
        match self.sink.submit_external(b, ext) {
            Ok(next) => {
                self.block.set_block(next);
                self.feed_from = self.block.len();
                self.blocks += 1;
                if let Some(i) = &mut self.index {
                    i.block_done();
                }
                self.stats.frames += info.frames;
                self.stats.runs += 1;
                self.stats.bytes += info.bytes;
                self.stream_len += len;
                self.note_boundary();
                Ok(info)
            }
            Err(e) => {
                self.stats.lost += info.frames;
                Err(self.fail(e))
            }
        }
    }

    fn note_boundary(&mut self) {
        self.history
            .push_back((self.stream_len, self.stats.frames, self.stats.bytes));
        while self.history.len() > 256 {
            self.history.pop_front();
        }
    }

    /// Hands the full block to the sink.
    fn submit(&mut self) -> Result<(), StorageError> {
        self.feed_sessions(&[], 0);
        let b = self.block.take();
        match self.sink.submit(b) {
            Ok(next) => {
                self.block.set_block(next);
                self.feed_from = self.block.len();
                self.note_boundary();
                self.blocks += 1;
                if let Some(i) = &mut self.index {
                    i.block_done();
                }
                self.note_placed();
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Full blocks handed to the sink so far.
    pub fn blocks_submitted(&self) -> u64 {
        self.blocks
    }

    /// Whether frames arrived since the last flush.
    pub fn unflushed(&self) -> bool {
        self.stats.frames != self.frames_at_flush
    }

    /// Puts everything written so far in the file now (a quiet link).
    pub fn flush(&mut self) -> Result<(), StorageError> {
        if let Some(_f) = &self.failed {
            return Err(self.failure());
        }
        self.feed_sessions(&[], 0);
        let b = self.block.take();
        self.frames_at_flush = self.stats.frames;
        match self.sink.flush(b) {
            Ok(next) => {
                self.block.set_block(next);
                self.feed_from = self.block.len();
                self.note_boundary();
                if let Some(i) = &mut self.index {
                    i.block_done();
                }
                self.note_placed();
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    fn fail(&mut self, e: StorageError) -> StorageError {
        // The cause alone: failure() names the file again.
        self.failed = Some(match &e {
            StorageError::Write { source, .. } => source.to_string(),
            other => other.to_string(),
        });
        self.failed_full = matches!(e, StorageError::DiskFull { .. });
        e
    }

    fn failure(&self) -> StorageError {
        if self.failed_full {
            return StorageError::DiskFull {
                path: self.sink.path().to_owned(),
            };
        }
        StorageError::Write {
            path: self.sink.path().to_owned(),
            source: std::io::Error::other(self.failed.clone().unwrap_or_default()),
        }
    }

    /// Flushes and closes the file; returns the final counts. After a write
    /// error the file is cut back to its last complete record, and the
    /// counts say exactly what it holds.
    // The counts travel with the error: what the file holds after it.
    #[allow(clippy::result_large_err)]
    pub fn close(self) -> Result<WriterStats, (WriterStats, StorageError)> {
        self.close_keeping_sink().0
    }

    /// [`PcapWriter::close`], giving back the finished sink too (its
    /// statistics then cover the last writes, made while closing).
    // The counts travel with the error: what the file holds after it.
    #[allow(clippy::result_large_err)]
    pub fn close_keeping_sink(self) -> (Result<WriterStats, (WriterStats, StorageError)>, S) {
        let (r, s, _) = self.close_parts();
        (r, s)
    }

    /// [`PcapWriter::close_keeping_sink`], with what a write that failed
    /// while closing left in RAM ([`PcapWriter::take_unwritten`], when the
    /// close took it already; else ask the sink).
    // The counts travel with the error: what the file holds after it.
    #[allow(clippy::result_large_err)]
    pub fn close_parts(
        mut self,
    ) -> (
        Result<WriterStats, (WriterStats, StorageError)>,
        S,
        Option<Unwritten>,
    ) {
        let r = self.finish_file();
        (r, self.sink, self.left)
    }

    // The counts travel with the error: what the file holds after it.
    #[allow(clippy::result_large_err)]
    fn finish_file(&mut self) -> Result<WriterStats, (WriterStats, StorageError)> {
        // The session table has every record the file was given.
        self.end_sessions(true);
        // finish() also after a failure: it waits for every write in flight.
        let b = self.block.take();
        let block_size = self.sink.block_size() as u64;
        match self.sink.finish(b) {
            Ok(()) if self.failed.is_none() => {
                if let Some(i) = &mut self.index {
                    i.block_done();
                }
                self.note_placed();
                if let Some(mut i) = self.index.take() {
                    match i.finish_keeping() {
                        Ok((report, why)) => {
                            if let Some(r) = report {
                                self.stats.key_segments = r.segments;
                                self.stats.key_dropped_blocks = r.dropped_blocks;
                            }
                            self.stats.key_failed = why.is_some() && report.is_none();
                        }
                        Err(e) => self.index_error = Some(e.to_string()),
                    }
                }
                return Ok(self.stats);
            }
            Ok(()) => {}
            Err(e) => {
                if self.failed.is_none() {
                    self.fail(e);
                }
            }
        }
        let err = self.failure();
        let accepted = self.stats.frames + self.stats.lost;
        match self.recover() {
            Ok((frames, bytes)) => {
                self.stats.frames = frames;
                self.stats.bytes = bytes;
                self.stats.lost = accepted - frames;
                // The index described blocks that may not have landed.
                if let Some(i) = self.index.take() {
                    let idx = i.path().to_owned();
                    i.abandon();
                    if self.encrypted {
                        // Not rebuilt without an identity: readers find
                        // the records by reading the file.
                        let _ = std::fs::remove_file(&idx);
                        self.index_error = Some(
                            "removed: the file's end was cut by a failed write; `wiretape index \
                             --identity FILE` rebuilds it (readers go without meanwhile)"
                                .to_owned(),
                        );
                    } else if let Err(e) = crate::index::rebuild(self.sink.path(), block_size) {
                        self.index_error = Some(e.to_string());
                    }
                }
            }
            Err(_) => {
                // Could not even read the file back: claim nothing.
                self.stats.lost = accepted;
                self.stats.frames = 0;
                self.stats.bytes = 0;
            }
        }
        Err((self.stats, err))
    }

    /// Cuts the file to its last complete record; returns (frames, bytes) in it.
    fn recover(&mut self) -> Result<(u64, u64), StorageError> {
        let path = self.sink.path().to_owned();
        if self.encrypted {
            // Not readable here (no identity): the sink cut it after its
            // last whole chunk; what it gave back says what it keeps.
            if self.kept_after.is_none() {
                self.left = self.take_unwritten();
            }
            return self.kept_after.ok_or(StorageError::Internal(
                "an encrypted file's sink gave nothing back after a failed write",
            ));
        }
        if self.compressed {
            return match crate::repair::repair_counting(&path) {
                Ok((r, bytes)) => Ok((r.records, bytes)),
                // A volume that takes no more writes (read-only): left
                // uncut, counted as readers read it (to its last whole unit).
                Err(e) => readable(&path).ok_or(e),
            };
        }
        let len = std::fs::metadata(&path)
            .map_err(|source| StorageError::Read {
                path: path.clone(),
                source,
            })?
            .len();
        // The latest record boundary at or below the file's length.
        let (start, frames, bytes) = self
            .history
            .iter()
            .rev()
            .find(|(off, _, _)| *off <= len)
            .copied()
            .unwrap_or((self.header_len, 0, 0));
        if len < self.header_len {
            crate::repair::truncate(&path, 0)?;
            return Ok((0, 0));
        }
        let (end, n, b) = crate::repair::scan_from(&path, start)?;
        if end < len {
            // On a volume that takes no more writes (read-only) the torn
            // tail stays: readers stop at it as at the cut.
            let _ = crate::repair::truncate(&path, end);
        }
        Ok((frames + n, bytes + b))
    }

    /// Counts so far; frames in blocks not yet written may still be lost
    /// ([`PcapWriter::close`] returns the final counts).
    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    /// Whether runs wait in the sink for company ([`BlockSink::runs_waiting`]).
    pub fn runs_waiting(&self) -> bool {
        self.sink.runs_waiting()
    }

    /// Sends runs that waited long enough on their way ([`BlockSink::kick`]).
    pub fn kick(&mut self) {
        self.sink.kick()
    }

    /// The sink the blocks go to.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The sink the blocks go to, to set it up.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// The sink's engine statistics ([`BlockSink::stats`]).
    pub fn sink_stats(&self) -> crate::sink::SinkStats {
        self.sink.stats()
    }

    /// Whether a write failed: the writer then takes no more frames (each
    /// is counted as lost) and [`PcapWriter::close`] returns the error.
    pub fn has_failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Bytes of the stream so far (file plus the block not yet written).
    pub fn file_bytes(&self) -> u64 {
        self.stream_len
    }

    /// The capture file being written.
    pub fn path(&self) -> &Path {
        self.sink.path()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sink::{Block, FileSink};

    /// A FileSink that fails (disk full) from its `fail_at`-th block on.
    struct Failing {
        inner: FileSink,
        blocks: u32,
        fail_at: u32,
    }

    impl BlockSink for Failing {
        fn submit(&mut self, block: Block) -> Result<Block, StorageError> {
            self.blocks += 1;
            if self.blocks >= self.fail_at {
                return Err(StorageError::DiskFull {
                    path: self.inner.path().to_owned(),
                });
            }
            self.inner.submit(block)
        }
        fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
            self.submit(block)
        }
        fn finish(&mut self, block: Block) -> Result<(), StorageError> {
            if self.blocks >= self.fail_at {
                return Err(StorageError::DiskFull {
                    path: self.inner.path().to_owned(),
                });
            }
            self.inner.finish(block)
        }
        fn bytes(&self) -> u64 {
            self.inner.bytes()
        }
        fn path(&self) -> &Path {
            self.inner.path()
        }
        fn block_size(&self) -> usize {
            self.inner.block_size()
        }
        fn first_block(&mut self) -> Block {
            self.inner.first_block()
        }
    }

    /// A FileSink whose `fail_at`-th block lands only in part (its first
    /// `torn` bytes: a write cut short by a full disk) and fails, as does
    /// every later one; it says its last `lag` blocks are not written yet
    /// (writes in flight), and gives back the failed block and those after.
    struct Tearing {
        inner: FileSink,
        blocks: u32,
        fail_at: u32,
        torn: usize,
        lag: usize,
        ends: VecDeque<u64>,
        kept: Option<u64>,
        left: Vec<Block>,
        /// The failed write's bytes stay and the file is not cut (a
        /// filesystem that aborted mid-write: EIO, then read-only).
        uncut: bool,
    }

    impl BlockSink for Tearing {
        fn submit(&mut self, block: Block) -> Result<Block, StorageError> {
            self.blocks += 1;
            if self.kept.is_none() && self.blocks >= self.fail_at {
                let at = self.inner.bytes();
                self.kept = Some(at);
                let n = self.torn.min(block.len());
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(self.inner.path())
                    .and_then(|f| {
                        std::os::unix::fs::FileExt::write_all_at(&f, &block.data()[..n], at)
                    })
                    .unwrap();
            }
            if self.kept.is_some() {
                self.left.push(block);
                return Err(StorageError::DiskFull {
                    path: self.inner.path().to_owned(),
                });
            }
            let b = self.inner.submit(block)?;
            self.ends.push_back(self.inner.bytes());
            Ok(b)
        }
        fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
            self.submit(block)
        }
        fn finish(&mut self, block: Block) -> Result<(), StorageError> {
            let r = self.submit(block);
            if let Some(kept) = self.kept.filter(|_| !self.uncut) {
                // As both engines do: the file cut at the failed write.
                crate::repair::truncate(self.inner.path(), kept)?;
            }
            r?;
            self.inner.finish(Block::new(4096))
        }
        fn bytes(&self) -> u64 {
            self.inner.bytes()
        }
        fn written(&self) -> u64 {
            let n = self.ends.len();
            if n <= self.lag {
                return 0;
            }
            self.ends[n - 1 - self.lag]
        }
        fn path(&self) -> &Path {
            self.inner.path()
        }
        fn block_size(&self) -> usize {
            self.inner.block_size()
        }
        fn first_block(&mut self) -> Block {
            self.inner.first_block()
        }
        fn cut_at(&mut self, off: u64) -> std::io::Result<()> {
            if self.uncut {
                return Err(std::io::Error::from_raw_os_error(30)); // EROFS
            }
            crate::repair::truncate(self.inner.path(), off).map_err(std::io::Error::other)
        }
        fn take_unwritten(&mut self) -> Option<Unwritten> {
            let kept = self.kept?;
            Some(Unwritten {
                off: kept,
                kept,
                blocks: std::mem::take(&mut self.left),
            })
        }
    }

    /// Writes frames (each naming itself in its first bytes; some
    /// compressible, some not) into `sink` until a write fails; then checks
    /// that the file and what the sink gives back hold each exactly once.
    /// Returns the closed sink and what it gave back: (`off`, `kept`).
    pub(crate) fn exercise<S: BlockSink>(
        sink: S,
        compressed: bool,
        encrypted: bool,
        path: &Path,
        opts: &wiretape_files::ReadOptions,
        what: &str,
    ) -> (S, u64, u64) {
        let mut w = PcapWriter::new(sink, 65535)
            .compressed(compressed)
            .encrypted(encrypted);
        let mut sent = 0u64;
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        loop {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = 60 + (rng % 1400) as usize;
            let mut f: Vec<u8> = (0..len)
                .map(|i| {
                    if sent.is_multiple_of(3) {
                        (rng >> (i % 56)) as u8
                    } else {
                        i as u8
                    }
                })
                .collect();
            f[..8].copy_from_slice(&sent.to_le_bytes());
            if w.write(sent, &f).is_err() {
                break;
            }
            sent += 1;
            assert!(sent < 1_000_000, "{what}: never failed");
        }
        let u = w.take_unwritten().expect("something given back");
        let header = Format::PcapNs.file_header(65535, "", wiretape_files::pcap::LINKTYPE_ETHERNET);
        let (back, _, _) = split_unwritten(&header, &u);
        let (st, sink) = w.close_keeping_sink();
        let st = match st {
            Ok(st) | Err((st, _)) => st,
        };
        let id = |f: &[u8]| u64::from_le_bytes(f[..8].try_into().unwrap());
        let mut ids: Vec<u64> = back.iter().map(|(_, f)| id(f)).collect();
        let src = wiretape_files::zread::open_buffered(path, opts).unwrap();
        let mut walk = wiretape_files::walk::Walker::new(src);
        let mut in_file = 0;
        let mut data = Vec::new();
        while walk.next_into(&mut data).is_some() {
            ids.push(id(&data));
            in_file += 1;
        }
        assert_eq!(st.frames, in_file, "{what}: the writer's count");
        assert!(!back.is_empty(), "{what}: nothing given back");
        ids.sort_unstable();
        let twice = ids.windows(2).filter(|w| w[0] == w[1]).count();
        ids.dedup();
        assert_eq!(
            (ids.len() as u64, twice, ids.last().copied()),
            (sent, 0, sent.checked_sub(1)),
            "{what}: kept {in_file}, given back {} (frames, twice, last)",
            back.len()
        );
        (sink, u.off, u.kept)
    }

    /// A compressed or encrypted file whose disk fails while units or
    /// chunks are on their way: the file keeps every whole one before the
    /// failed write (readers and `repair` stop at the torn one), the sink
    /// gives back the records of all the others (at the pool, not written,
    /// handed in after), and the two together are every frame handed in,
    /// each once; the writer's count is what the file holds.
    #[test]
    fn a_failed_compressed_or_encrypted_file_keeps_or_gives_back_every_frame_once() {
        use wiretape_files::compress::Compress;
        let d = std::env::temp_dir().join(format!("wt-writer-back-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let pool = crate::compress::Pool::new(2).unwrap();
        let id = age::x25519::Identity::generate();
        let to = wiretape_files::crypt::Recipients(vec![id.to_public()]);
        let opts = wiretape_files::ReadOptions::new().with_identities(vec![id]);
        let mut case = 0;
        for (compress, age) in [
            (Compress::Lz4, false),
            (Compress::Zstd(3), false),
            (Compress::None, true),
            (Compress::Lz4, true),
        ] {
            for (fail_at, torn, lag, uncut) in [
                (2u32, 0usize, 0usize, false),
                (4, 5000, 2, false),
                (7, 70_000, 3, false),
                (3, 1 << 20, 1, false),
                // The failed write landed whole and the file stays as it
                // is (the cut refused: read-only): its units, or chunks,
                // stay with the file, none is given back too (issue 37).
                (3, 1 << 20, 1, true),
                (5, 1 << 20, 0, true),
                // ... or landed in part: the whole chunks in it stay.
                (4, 70_000, 2, true),
                (6, 200_000, 1, true),
            ] {
                case += 1;
                let path = d.join(format!("c{case}.pcap"));
                let inner = FileSink::with_block_size(&path, 1 << 17).unwrap();
                let t = Tearing {
                    inner,
                    blocks: 0,
                    fail_at,
                    torn,
                    lag,
                    ends: VecDeque::new(),
                    kept: None,
                    left: Vec::new(),
                    uncut,
                };
                let what = format!(
                    "{compress:?} age {age}, fail at {fail_at}, torn {torn}, lag {lag}, uncut {uncut}"
                );
                // The layers as `record` stacks them, over the tearing disk.
                let c = compress.is_on();
                match (c, age) {
                    (true, false) => drop(exercise(
                        crate::compress::CompressSink::new(t, compress, pool.clone()).unwrap(),
                        c,
                        age,
                        &path,
                        &opts,
                        &what,
                    )),
                    (false, _) => drop(exercise(
                        crate::crypt::AgeSink::new(t, &to).unwrap(),
                        c,
                        age,
                        &path,
                        &opts,
                        &what,
                    )),
                    (true, true) => drop(exercise(
                        crate::compress::CompressSink::new(
                            crate::crypt::AgeSink::new(t, &to).unwrap(),
                            compress,
                            pool.clone(),
                        )
                        .unwrap(),
                        c,
                        age,
                        &path,
                        &opts,
                        &what,
                    )),
                }
            }
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A real tmpfs of 1 MiB mounted for a test, with a filler file of
    /// 200,000 bytes in it (room left for 6 blocks of 128 KiB and part of
    /// a 7th); its capture `uncut.pcap` made appendable again and the
    /// mount gone however the test ends.
    pub(crate) struct Tmpfs(pub(crate) std::path::PathBuf);

    impl Tmpfs {
        /// Mounts one at a fresh directory named after `what`; None (the
        /// test skipped, it says so) when not root.
        pub(crate) fn mount(what: &str) -> Option<Tmpfs> {
            let uid =
                std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
            if uid != 0 {
                eprintln!("skipped: needs root (a tmpfs mount, chattr +a)");
                return None;
            }
            let d = std::env::temp_dir().join(format!("wt-{what}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            assert!(Self::run(&[
                "mount",
                "-t",
                "tmpfs",
                "-o",
                "size=1M",
                "tmpfs",
                d.to_str().unwrap()
            ]));
            let mnt = Tmpfs(d);
            std::fs::write(mnt.0.join("other"), vec![1u8; 200_000]).unwrap();
            Some(mnt)
        }

        /// Where the capture goes.
        pub(crate) fn capture(&self) -> std::path::PathBuf {
            self.0.join("uncut.pcap")
        }

        /// Makes the capture (created, still open) append-only: the volume
        /// refuses to cut it (`ftruncate`), as one gone read-only does,
        /// while the writes already open go on.
        pub(crate) fn refuse_cuts(&self) {
            let p = self.capture();
            assert!(
                Self::run(&["chattr", "+a", p.to_str().unwrap()]),
                "chattr +a on tmpfs"
            );
        }

        fn run(a: &[&str]) -> bool {
            std::process::Command::new(a[0])
                .args(&a[1..])
                .status()
                .is_ok_and(|s| s.success())
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            Self::run(&["chattr", "-a", self.capture().to_str().unwrap()]);
            // An io_uring is torn down asynchronously after it is dropped,
            // and the mount is busy until then: a few tries, then detached
            // (the kernel unmounts it once free).
            let dir = self.0.to_str().unwrap();
            let mut gone = false;
            for _ in 0..50 {
                gone = Self::run(&["umount", dir]);
                if gone {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if !gone {
                Self::run(&["umount", "-l", dir]);
            }
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A plain file on a volume that fills mid-write and refuses the cut
    /// (a real tmpfs of 1 MiB; the file append-only, as a filesystem gone
    /// read-only refuses `ftruncate`): the write lands in part, the file
    /// keeps the records in what landed, and the buffered sink gives back
    /// only the others: each frame once, in the file or given back
    /// (issue 37; before, the records that landed were given back too).
    #[test]
    fn a_plain_file_whose_cut_is_refused_keeps_what_landed_and_gives_back_the_rest() {
        let Some(mnt) = Tmpfs::mount("writer-uncut") else {
            return;
        };
        let path = mnt.capture();
        let sink = FileSink::with_block_size(&path, 1 << 17).unwrap();
        mnt.refuse_cuts();
        exercise(
            sink,
            false,
            false,
            &path,
            &wiretape_files::ReadOptions::new(),
            "plain, cut refused",
        );
        // The failed write did land in part (the blocks are whole 128 KiB
        // ones, the header in the first): else this tried nothing.
        let len = std::fs::metadata(&path).unwrap().len();
        assert_ne!(len % (1 << 17), 0, "a partial write landed ({len} B)");
        drop(mnt);
    }

    #[test]
    fn after_a_write_error_the_counts_say_exactly_what_the_file_holds() {
        let d = std::env::temp_dir().join(format!("wt-writer-fail-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (fail_at, flush_every, fmt) in [
            (3u32, 0u64, Format::PcapNs),
            (5, 97, Format::PcapNs),
            (2, 13, Format::PcapUs),
            (3, 0, Format::PcapNg),
            (4, 31, Format::PcapNg),
        ] {
            let p = d.join(format!("f{fail_at}-{flush_every}.{}", fmt.extension()));
            let sink = Failing {
                inner: FileSink::with_block_size(&p, 8192).unwrap(),
                blocks: 0,
                fail_at,
            };
            let mut w = PcapWriter::with_format(sink, 65535, fmt, "x").with_index(&p);
            let n = 1000u64;
            for i in 0..n {
                let _ = w.write(i, &[i as u8 | 1; 300]);
                if flush_every > 0 && i % flush_every == 0 {
                    let _ = w.flush();
                }
            }
            let (st, _e) = w.close().expect_err("the sink failed");
            let info =
                wiretape_files::FileInfo::scan(&p).expect("the file is valid after the failure");
            assert_eq!(
                st.frames, info.packets,
                "frames = records in the file ({fail_at}, {flush_every})"
            );
            assert_eq!(
                st.frames + st.lost,
                n,
                "every frame offered is written or lost ({fail_at}, {flush_every})"
            );
            let idx = wiretape_files::index::read(&wiretape_files::index::path_for(&p)).unwrap();
            assert_eq!(
                idx.iter().map(|e| e.count).sum::<u64>(),
                st.frames,
                "the index was rebuilt to what the file holds"
            );
        }
        std::fs::remove_dir_all(d).unwrap();
    }
}
