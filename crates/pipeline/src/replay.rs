//! Capture files as sources: [`ReplaySource`] for the transmit loop
//! (`wiretape replay`), [`FileSource`] for the file engine
//! (`wiretape record -r`).

use std::path::{Path, PathBuf};
use wiretape_capture::tx::Source;
use wiretape_capture::{PcapInPlace, RecordHead, RecordSource};
use wiretape_files::{Format, PcapReader, Record};
use wiretape_storage::StorageError;

/// Frames of a capture file, `loops` times over.
pub struct ReplaySource {
    path: PathBuf,
    reader: PcapReader<wiretape_files::reader::FileSource>,
    rec: Record,
    loops_left: u64,
    /// Stamp of the current pass's first frame.
    first_ts: Option<u64>,
    /// Due time of the current pass's first frame (after earlier passes).
    base_ns: u64,
    last_due: u64,
    /// Frames read (all passes), and those cut short in the file (caplen <
    /// orig_len: sent as recorded).
    pub frames: u64,
    /// Of those, frames the file had cut (sent as recorded).
    pub cut: u64,
    /// A read error ends the replay; it is kept here.
    pub error: Option<StorageError>,
}

impl ReplaySource {
    /// Opens `path`; `loops` passes (at least 1).
    pub fn open(path: &Path, loops: u64) -> Result<Self, StorageError> {
        Ok(ReplaySource {
            path: path.to_owned(),
            reader: PcapReader::open(path)?,
            rec: Record::default(),
            loops_left: loops.max(1),
            first_ts: None,
            base_ns: 0,
            last_due: 0,
            frames: 0,
            cut: 0,
            error: None,
        })
    }

    /// The file's link type.
    pub fn linktype(&self) -> u32 {
        self.reader.header().linktype
    }
}

impl Source for ReplaySource {
    fn next(&mut self) -> Option<(usize, u64)> {
        loop {
            match self.reader.next_into(&mut self.rec) {
                Ok(true) => {
                    let first = *self.first_ts.get_or_insert(self.rec.ts_ns);
                    let due = self.base_ns + self.rec.ts_ns.saturating_sub(first);
                    // Never earlier than the frame before (out-of-order stamps).
                    let due = due.max(self.last_due);
                    self.last_due = due;
                    self.frames += 1;
                    self.cut += u64::from((self.rec.data.len() as u32) < self.rec.orig_len);
                    return Some((self.rec.data.len(), due));
                }
                Ok(false) => {
                    self.loops_left -= 1;
                    if self.loops_left == 0 {
                        return None;
                    }
                    match PcapReader::open(&self.path) {
                        Ok(r) => self.reader = r,
                        Err(e) => {
                            self.error = Some(e);
                            return None;
                        }
                    }
                    // The next pass starts right after this one's last frame.
                    self.first_ts = None;
                    self.base_ns = self.last_due;
                }
                Err(e) => {
                    self.error = Some(e);
                    return None;
                }
            }
        }
    }

    fn fill(&mut self, dst: &mut [u8], _send_ns: u64) {
        dst.copy_from_slice(&self.rec.data);
    }
}

/// The records of a capture file (pcap ns/µs either byte order, pcapng),
/// for the file engine.
pub struct FileSource {
    reader: PcapReader<wiretape_files::reader::FileSource>,
    rec: Record,
    error: Option<StorageError>,
}

impl FileSource {
    /// Opens `path` (its header is read and checked here).
    pub fn open(path: &Path) -> Result<Self, StorageError> {
        Self::open_with(path, &wiretape_files::ReadOptions::default())
    }

    /// [`FileSource::open`] with `opts` (an encrypted file's identities).
    pub fn open_with(
        path: &Path,
        opts: &wiretape_files::ReadOptions,
    ) -> Result<Self, StorageError> {
        Ok(FileSource {
            reader: PcapReader::open_with(path, opts)?,
            rec: Record::default(),
            error: None,
        })
    }

    /// The file's link type.
    pub fn linktype(&self) -> u32 {
        self.reader.header().linktype
    }
}

impl RecordSource for FileSource {
    fn next(&mut self) -> Option<RecordHead> {
        match self.reader.next_into(&mut self.rec) {
            Ok(true) => Some(RecordHead {
                caplen: self.rec.data.len() as u32,
                wire_len: self.rec.orig_len.max(self.rec.data.len() as u32),
                ts_ns: self.rec.ts_ns,
            }),
            Ok(false) => None,
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }

    fn fill(&mut self, dst: &mut [u8]) {
        dst.copy_from_slice(&self.rec.data);
    }

    fn error(&self) -> Option<String> {
        self.error.as_ref().map(|e| e.to_string())
    }

    /// Plain pcap (ns or µs, either byte order) is read in place; pcapng,
    /// Stenographer's files and compressed files through `next`/`fill`.
    fn pcap_in_place(&mut self) -> Option<PcapInPlace> {
        // (Versions before 2.4 may swap caplen and orig_len: read through.)
        if matches!(self.reader.format(), Format::PcapNg | Format::Steno)
            || !self.reader.lengths_as_written()
        {
            return None;
        }
        // The file already opened (and its header checked), not its path
        // again: the same file even if the path was renamed over since.
        // A compressed capture is read through `next`/`fill`, decompressed.
        let wiretape_files::zread::Source::Plain(plain) = self.reader.get_ref() else {
            return None;
        };
        let file = plain.get_ref().try_clone().ok()?;
        // A file wiretape is still writing is cut to its exact length at
        // every flush (it grows ahead of the writes): a mapping would fault
        // (SIGBUS) past such a cut. It is read through the ring instead.
        if wiretape_files::is_being_written(&file) {
            return None;
        }
        let h = self.reader.header();
        Some(PcapInPlace {
            file,
            offset: self.reader.offset(),
            nanos: h.nanos,
            big_endian: h.big_endian,
            snapshot: self.reader.snapshot(),
        })
    }

    fn resume_at(&mut self, offset: u64) {
        self.reader.seek_to(offset);
    }
}
