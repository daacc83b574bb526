//! Writing the sidecar index (`<capture>.idx`, its format and readers:
//! `wiretape_files::index`): [`IndexWriter`] appends an entry per block as
//! the writer hands blocks to the disk (and feeds the key index's builder,
//! [`crate::keys`]); [`rebuild`] makes it, and the key index, exact again
//! from the capture itself (`repair`, `wiretape index`, after a write
//! error).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use wiretape_files::index::{header, path_for, Entry, ENTRY_LEN, ENTRY_LEN_V3, HEADER_LEN};
use wiretape_files::walk::Walker;
use wiretape_files::ReadOptions;
use wiretape_files::StorageError;
use wiretape_filter::flow::FlowCollector;

/// Collects the records of the current block and appends an entry per block.
pub struct IndexWriter {
    file: Option<File>,
    path: PathBuf,
    cur: Entry,
    unit: u64,
    flows: Option<FlowCollector>,
    buf: Vec<u8>,
    /// A compressed capture: entries wait here for where their block went.
    compressed: bool,
    pending: std::collections::VecDeque<Entry>,
    /// Entries written to the index so far (the block being collected is not
    /// one yet; none more after a write error).
    pub entries: u64,
    /// The first write error (the index is then abandoned, the capture not).
    pub error: Option<String>,
    /// The exact key index ([`crate::keys`]), fed entry by entry.
    keys: Option<crate::keys::KeyWriter>,
    /// Bytes of the `.idx` written so far.
    idx_len: u64,
    /// What the key index came to, once finished.
    pub keys_report: Option<crate::keys::KeyReport>,
    /// Why the key index is missing or incomplete, if it is.
    pub keys_error: Option<String>,
}

impl IndexWriter {
    /// Creates the index of `capture` (never overwrites). Stamps are cut to
    /// whole `unit` ns, as the file holds them (1000 for µs pcap).
    pub fn create(capture: &Path, unit: u64) -> Result<Self, StorageError> {
        Self::create_with(capture, unit, false)
    }

    /// [`IndexWriter::create`]; `compressed`: a version 3 index, each entry
    /// written once [`IndexWriter::placed`] says where its block went.
    pub fn create_with(capture: &Path, unit: u64, compressed: bool) -> Result<Self, StorageError> {
        let path = path_for(capture);
        let mut file = crate::sys::create_new(&path, 0)?;
        file.write_all(&header(compressed))
            .map_err(|e| StorageError::from_write(&path, e))?;
        // An old key index of that name (no capture of it is left: captures
        // are never overwritten) must not describe the new file.
        let _ = std::fs::remove_file(wiretape_files::keys::path_for(capture));
        Ok(IndexWriter {
            file: Some(file),
            path,
            cur: Entry::default(),
            unit: unit.max(1),
            flows: Some(FlowCollector::new()),
            buf: Vec::with_capacity(4096),
            compressed,
            pending: Default::default(),
            entries: 0,
            error: None,
            keys: None,
            idx_len: HEADER_LEN as u64,
            keys_report: None,
            keys_error: None,
        })
    }

    /// Also writes the exact key index `<capture>.kdx` ([`crate::keys`]),
    /// its segments built by `builder` (None: on this thread, at each cut
    /// and at [`IndexWriter::finish`]); `wait`: when the builder's queue is
    /// full, wait (a file source) instead of leaving that segment out. Needs
    /// the flow sets (Ethernet).
    pub fn with_keys(
        self,
        capture: &Path,
        builder: Option<std::sync::Arc<crate::keys::Builder>>,
        wait: bool,
    ) -> Self {
        self.with_keys_budget(capture, builder, wait, crate::keys::ROWS_BUDGET)
    }

    /// [`IndexWriter::with_keys`], cutting a segment every `rows` rows
    /// (bounds the memory the rows take: 32 bytes each).
    pub fn with_keys_budget(
        mut self,
        capture: &Path,
        builder: Option<std::sync::Arc<crate::keys::Builder>>,
        wait: bool,
        rows: usize,
    ) -> Self {
        if let Some(f) = self.flows.take() {
            self.flows = Some(if f.has_rows() {
                f
            } else {
                FlowCollector::new().with_rows(rows.saturating_add(65536))
            });
            let entry_len = if self.compressed {
                ENTRY_LEN_V3
            } else {
                ENTRY_LEN
            } as u32;
            self.keys = Some(
                crate::keys::KeyWriter::new(
                    capture,
                    builder,
                    wait,
                    entry_len,
                    wiretape_files::pcap::LINKTYPE_ETHERNET,
                )
                .with_budget(rows),
            );
        }
        self
    }

    /// Without flow sets (blocks then may hold anything; `wiretape index`
    /// adds them later), hence without the key index.
    pub fn without_flows(mut self) -> Self {
        self.flows = None;
        self.keys = None;
        self
    }

    /// A record at stream offset `offset`, stamped `ts_ns`, holding `frame`
    /// (its stored bytes), joined the block.
    #[inline(always)]
    pub fn record(&mut self, offset: u64, ts_ns: u64, frame: &[u8]) {
        if self.cur.count == 0 {
            self.cur.offset = offset;
            self.cur.first_ns = ts_ns;
        }
        self.cur.last_ns = ts_ns;
        self.cur.count += 1;
        if let Some(f) = &mut self.flows {
            f.add_at(frame, (offset - self.cur.offset) as u32);
        }
    }

    /// Forgets the records of the block being collected (they never went
    /// to the file).
    pub(crate) fn discard_current(&mut self) {
        self.cur = Entry::default();
        if let Some(f) = &mut self.flows {
            f.discard();
        }
    }

    /// The block went to the disk: append its entry.
    pub fn block_done(&mut self) {
        if self.cur.count == 0 {
            return;
        }
        let mut e = std::mem::take(&mut self.cur);
        // Once per block, not per frame.
        e.first_ns -= e.first_ns % self.unit;
        e.last_ns -= e.last_ns % self.unit;
        e.flows = self.flows.as_mut().map(FlowCollector::finish);
        if self.compressed {
            self.pending.push_back(e);
        } else {
            self.write_entry(&e);
        }
    }

    /// Blocks of a compressed capture went to the file at these places
    /// (in order): the entries whose first record they hold are written.
    pub fn placed(&mut self, places: &[wiretape_files::compress::Placed]) {
        for p in places {
            while let Some(e) = self.pending.front() {
                if e.offset < p.u_start {
                    // Its block never got a place (cannot happen): drop it.
                    self.pending.pop_front();
                    continue;
                }
                if e.offset >= p.u_start + p.u_len {
                    break;
                }
                let mut e = self.pending.pop_front().expect("a front entry");
                e.z = Some(*p);
                self.write_entry(&e);
            }
        }
    }

    fn write_entry(&mut self, e: &Entry) {
        self.buf.clear();
        e.encode(&mut self.buf);
        if let Some(f) = &mut self.file {
            if let Err(err) = f.write_all(&self.buf) {
                self.error = Some(format!("index {}: {err}", self.path.display()));
                self.file = None;
                // The key index cannot go on without its entries.
                if self.keys.take().is_some() {
                    self.keys_error = Some("its .idx could not be written".into());
                }
            } else {
                self.entries += 1;
                self.idx_len += self.buf.len() as u64;
                if let (Some(k), Some(f)) = (&mut self.keys, &mut self.flows) {
                    k.entry_written(&e.fixed_bytes(), self.idx_len, f);
                }
            }
        }
    }

    /// Closes the index (durable along with its capture file), and writes
    /// the key index's last segment (waiting for it: call it off the
    /// capture threads).
    pub fn finish(mut self) -> Result<(), StorageError> {
        self.finish_keeping().map(|_| ())
    }

    /// [`IndexWriter::finish`], giving back what the key index came to and
    /// why it is incomplete, if it is.
    pub fn finish_keeping(
        &mut self,
    ) -> Result<(Option<crate::keys::KeyReport>, Option<String>), StorageError> {
        self.block_done();
        if let Some(f) = self.file.take() {
            f.sync_data()
                .map_err(|e| StorageError::from_write(&self.path, e))?;
            if let (Some(k), Some(flows)) = (self.keys.take(), &mut self.flows) {
                match k.finish(flows) {
                    Ok(r) => {
                        if r.dropped_blocks > 0 {
                            self.keys_error = Some(format!(
                                "{} blocks left out of the key index (its builder fell behind); \
                                 `wiretape index --force` rebuilds it",
                                r.dropped_blocks
                            ));
                        }
                        self.keys_report = Some(r);
                    }
                    Err(e) => self.keys_error = Some(e.to_string()),
                }
            }
        }
        Ok((self.keys_report, self.keys_error.clone()))
    }

    /// Gives the index up (its file is to be rebuilt): waits until the key
    /// index's builder is done with this file, so that nothing is appended
    /// to the key index after the rebuild.
    pub fn abandon(mut self) {
        if let Some(k) = self.keys.take() {
            k.wait_done();
        }
    }

    /// The index file being written: `<capture>.idx`.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Rewrites the index of `capture` from the file itself, one entry per
/// `block` bytes of records. Returns the number of entries.
pub fn rebuild(capture: &Path, block: u64) -> Result<u64, StorageError> {
    rebuild_with(capture, block, &ReadOptions::default(), &mut |_| {})
}

/// [`rebuild`] with `opts` (an encrypted capture's identities; where the
/// indexes of Stenographer's files go), calling `progress` with the file
/// offset reached (per record: keep it cheap).
pub fn rebuild_with(
    capture: &Path,
    block: u64,
    opts: &ReadOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, StorageError> {
    let path = opts.index_path(capture);
    let tmp = {
        let mut p = path.as_os_str().to_owned();
        p.push(".tmp");
        PathBuf::from(p)
    };
    let rd = |source| StorageError::Read {
        path: capture.to_owned(),
        source,
    };
    let len = std::fs::metadata(capture).map(|m| m.len()).unwrap_or(0);
    // A compressed capture: one entry per compressed unit, where it is.
    let src = wiretape_files::zread::open_buffered(capture, opts).map_err(rd)?;
    let kind = src.z().map(|z| z.kind());
    // An encrypted capture: times, counts and offsets only, no flow sets
    // nor key index (they would say its addresses in clear).
    let encrypted = src.age().is_some();
    let mut out = Vec::from(header(kind.is_some()));
    let mut walk = Walker::new(src);
    // Flow keys are Ethernet's: other link types get time-only entries.
    let ethernet = walk.header().linktype == wiretape_files::pcap::LINKTYPE_ETHERNET && !encrypted;
    let mut cur = Entry::default();
    let mut flows = FlowCollector::new();
    // The key index is rebuilt in the same walk (into a temporary, renamed
    // with the `.idx`); its segments are built on this thread.
    let mut keys = ethernet.then(|| {
        flows = FlowCollector::new().with_rows(crate::keys::ROWS_BUDGET + 65536);
        let el = if kind.is_some() {
            ENTRY_LEN_V3
        } else {
            ENTRY_LEN
        };
        crate::keys::rebuild_file(
            capture,
            &opts.keys_path(capture),
            el as u32,
            wiretape_files::pcap::LINKTYPE_ETHERNET,
        )
    });
    let mut data = Vec::new();
    let mut entries = 0;
    let block = block.max(1);
    let mut put = |cur: &mut Entry, flows: &mut FlowCollector, out: &mut Vec<u8>| {
        cur.flows = Some(flows.finish()).filter(|_| ethernet);
        cur.encode(out);
        if let Some(k) = &mut keys {
            k.entry_written(&cur.fixed_bytes(), out.len() as u64, flows);
        }
    };
    while let Some(m) = walk.next_into(&mut data) {
        let unit = walk.get_ref().z().and_then(|z| z.unit_of(m.offset));
        let new_block = match (unit, cur.z) {
            (Some(u), Some(c)) => u.u_start != c.u_start,
            _ => m.offset / block != cur.offset / block,
        };
        if cur.count > 0 && new_block {
            put(&mut cur, &mut flows, &mut out);
            entries += 1;
            cur = Entry::default();
        }
        if cur.count == 0 {
            cur.offset = m.offset;
            cur.first_ns = m.ts_ns;
            cur.z = unit;
        }
        cur.last_ns = m.ts_ns;
        cur.count += 1;
        if ethernet {
            flows.add_at(&data, (m.offset - cur.offset) as u32);
        }
        progress(m.offset);
    }
    if let Some(e) = walk.stop().and_then(|s| s.error(capture, len)) {
        if let Some(k) = &keys {
            let _ = std::fs::remove_file(k.path());
        }
        return Err(e);
    }
    if cur.count > 0 {
        put(&mut cur, &mut flows, &mut out);
        entries += 1;
    }
    std::fs::write(&tmp, &out).map_err(|e| StorageError::from_write(&tmp, e))?;
    let kdx = opts.keys_path(capture);
    match keys {
        Some(k) => {
            let ktmp = k.path().to_owned();
            if let Err(e) = k.finish(&mut flows) {
                let _ = std::fs::remove_file(&ktmp);
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            std::fs::rename(&ktmp, &kdx).map_err(|e| StorageError::from_write(&kdx, e))?;
        }
        None => {
            let _ = std::fs::remove_file(&kdx);
        }
    }
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::from_write(&path, e))?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::FileSink;
    use crate::writer::PcapWriter;
    use wiretape_files::index::read;
    use wiretape_files::Format;

    #[test]
    fn writer_index_matches_the_file_and_rebuild_agrees() {
        let d = std::env::temp_dir().join(format!("wt-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for fmt in [Format::PcapNs, Format::PcapNg] {
            let p = d.join(format!("a.{}", fmt.extension()));
            let sink = FileSink::with_block_size(&p, 8192).unwrap();
            let mut w = PcapWriter::with_format(sink, 65535, fmt, "eth9").with_index(&p);
            for i in 0..1000u64 {
                w.write(1_000_000 + i * 10, &vec![i as u8; 60 + (i as usize % 300)])
                    .unwrap();
                if i == 500 {
                    w.flush().unwrap();
                }
            }
            w.close().unwrap();
            let idx = read(&path_for(&p)).unwrap();
            assert!(idx.len() > 20, "{} entries", idx.len());
            assert_eq!(idx.iter().map(|e| e.count).sum::<u64>(), 1000);
            assert_eq!(idx[0].first_ns, 1_000_000);
            assert_eq!(idx.last().unwrap().last_ns, 1_000_000 + 999 * 10);
            // Every entry's offset is where a record with its first stamp starts.
            let data = std::fs::read(&p).unwrap();
            let mut n = 0u64;
            for e in &idx {
                let o = e.offset as usize;
                let ts = match fmt {
                    Format::PcapNg => {
                        assert_eq!(&data[o..o + 4], &wiretape_files::pcapng::EPB.to_le_bytes());
                        let hi = u32::from_le_bytes(data[o + 12..o + 16].try_into().unwrap());
                        let lo = u32::from_le_bytes(data[o + 16..o + 20].try_into().unwrap());
                        ((hi as u64) << 32) | lo as u64
                    }
                    _ => {
                        let s = u32::from_le_bytes(data[o..o + 4].try_into().unwrap()) as u64;
                        let f = u32::from_le_bytes(data[o + 4..o + 8].try_into().unwrap()) as u64;
                        s * 1_000_000_000 + f
                    }
                };
                assert_eq!(ts, e.first_ns);
                assert_eq!(e.first_ns, 1_000_000 + n * 10);
                assert_eq!(e.last_ns, 1_000_000 + (n + e.count - 1) * 10);
                n += e.count;
            }
            let k = rebuild(&p, 8192).unwrap();
            let again = read(&path_for(&p)).unwrap();
            assert_eq!(k as usize, again.len());
            assert_eq!(again.iter().map(|e| e.count).sum::<u64>(), 1000);
            assert_eq!(again[0].offset, idx[0].offset);
        }
        std::fs::remove_dir_all(d).unwrap();
    }
}
