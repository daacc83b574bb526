//! `wiretape replay`: a capture file (pcap ns/µs, pcapng) as a
//! [`capture::tx::Source`], so the transmit loop sends it at its own pace.

use crate::capture::tx::Source;
use crate::storage::{PcapReader, Record, StorageError};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// Frames of a capture file, `loops` times over.
pub struct ReplaySource {
    path: PathBuf,
    reader: PcapReader<BufReader<File>>,
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
