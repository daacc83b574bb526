//! One capture file described, as `wiretape info` shows it: what a scan
//! of its records finds ([`FileInfo`], up to any damage), its `.idx`
//! sidecar summed up and checked against the file, and its `.kdx` key
//! index summed up, as a typed [`FileReport`] ([`describe`]); its JSON
//! ([`FileReport::to_json`]) is `info --json`'s line.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use wiretape_files::index;
use wiretape_files::keys::KeyIndex;
use wiretape_files::StorageError;
use wiretape_files::{FileInfo, Format, ReadOptions};

/// A sidecar of a capture file: none, one that cannot be read, or what it
/// says.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Sidecar<T> {
    /// The file has none.
    Absent,
    /// It cannot be read: why.
    Unreadable(String),
    /// What it says.
    Read(T),
}

impl<T: serde::Serialize> Sidecar<T> {
    /// `null`, `{"error": ...}` or the summary's object.
    fn to_json(&self) -> Value {
        match self {
            Sidecar::Absent => Value::Null,
            Sidecar::Unreadable(e) => json!({ "error": e }),
            Sidecar::Read(s) => serde_json::to_value(s).expect("a summary is plain data"),
        }
    }
}

/// The `.idx` sidecar's totals.
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct IndexSummary {
    /// Its entries (blocks).
    pub entries: usize,
    /// The frames they count.
    pub packets: u64,
    /// Whether its frames, first and last time are the file's (after a
    /// crash they may not be: `wiretape repair` rebuilds it).
    pub agrees: bool,
    /// Its first entry's first frame.
    pub first_ns: Option<u64>,
    /// Its last entry's last frame.
    pub last_ns: Option<u64>,
}

/// The `.kdx` key index's totals.
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct KeySummary {
    /// Its segments.
    pub segments: usize,
    /// The blocks they cover.
    pub blocks: u64,
    /// Their rows.
    pub rows: u64,
    /// The key index file's bytes.
    pub bytes: u64,
    /// Whether it covers the whole capture file.
    pub complete: bool,
}

/// One capture file described ([`describe`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct FileReport {
    /// The capture file.
    pub file: PathBuf,
    /// What the scan found, up to the damage.
    pub info: FileInfo,
    /// Where the file is damaged (its last complete record named).
    pub damage: Option<StorageError>,
    /// Its `.idx` sidecar.
    pub index: Sidecar<IndexSummary>,
    /// Its `.kdx` key index.
    pub key_index: Sidecar<KeySummary>,
}

/// Scans `file` to its end or its damage and sums up its sidecars (where
/// `opts` says they are).
pub fn describe(file: &Path, opts: &ReadOptions) -> FileReport {
    let (i, damage) = FileInfo::scan_to_damage_with(file, opts);
    let ip = opts.index_path(file);
    let index = match ip.exists().then(|| index::read(&ip)) {
        None => Sidecar::Absent,
        Some(Err(e)) => Sidecar::Unreadable(e.to_string()),
        Some(Ok(es)) => {
            let n: u64 = es.iter().map(|e| e.count).sum();
            let first_ns = es.first().map(|e| e.first_ns);
            let last_ns = es.last().map(|e| e.last_ns);
            Sidecar::Read(IndexSummary {
                entries: es.len(),
                packets: n,
                agrees: n == i.packets && first_ns == i.first_ns && last_ns == i.last_ns,
                first_ns,
                last_ns,
            })
        }
    };
    let key_index = match KeyIndex::open(file, opts) {
        Ok(None) => Sidecar::Absent,
        Err(e) => Sidecar::Unreadable(e.to_string()),
        Ok(Some(k)) => {
            let segs = k.segments();
            Sidecar::Read(KeySummary {
                segments: segs.len(),
                blocks: segs.iter().map(|s| s.header.nblocks).sum(),
                rows: segs.iter().map(|s| s.header.rows).sum(),
                bytes: std::fs::metadata(k.path()).map_or(0, |m| m.len()),
                complete: k.complete_for(i.file_bytes),
            })
        }
    };
    FileReport {
        file: file.to_owned(),
        info: i,
        damage,
        index,
        key_index,
    }
}

impl FileReport {
    /// The file's format as `info` names it.
    pub fn format_name(&self) -> &'static str {
        match self.info.format {
            Some(Format::PcapNg) => "pcapng",
            Some(Format::Steno) => "stenotype (TPACKET_V3 blocks)",
            _ => "pcap",
        }
    }

    /// Its timestamps' resolution: `ns` or `us`.
    pub fn resolution(&self) -> &'static str {
        if self.info.nanos {
            "ns"
        } else {
            "us"
        }
    }

    /// The object `info --json` prints for the file.
    pub fn to_json(&self) -> Value {
        let i = &self.info;
        json!({
            "file": self.file.display().to_string(), "packets": i.packets,
            "captured_bytes": i.captured_bytes, "original_bytes": i.original_bytes,
            "first_ns": i.first_ns, "last_ns": i.last_ns, "resolution": self.resolution(),
            "linktype": i.linktype, "snaplen": i.snaplen, "file_bytes": i.file_bytes,
            "out_of_order": i.out_of_order, "format": self.format_name(),
            "records_odd": i.records_odd,
            "compression": i.compression,
            "encrypted": i.encrypted,
            "index": self.index.to_json(),
            "key_index": self.key_index.to_json(),
            "error": self.damage.as_ref().map(|e| e.to_string()),
        })
    }
}
