//! What a store holds, from its names and `.idx` sidecars (and the tails
//! the indexes have not reached yet): files, bytes, frames, the first and
//! last frame's stamps, the free space, whether a recorder is writing.
//! Cheap on a store of terabytes: no capture data is read but the tail of
//! a file past its index (at most [`TAIL_LIMIT`] bytes of it).

use std::path::{Path, PathBuf};
use wiretape_files::index;
use wiretape_files::walk::Walker;
use wiretape_files::ReadOptions;

/// Bytes of a file's tail (past its last index entry, or a file without
/// an index) walked at most to find its last stamp and frames.
pub const TAIL_LIMIT: u64 = 64 << 20;

/// One capture file of a store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStatus {
    /// The file.
    pub path: PathBuf,
    /// Its length.
    pub bytes: u64,
    /// Frames in it (its index's count, and its tail's).
    pub frames: u64,
    /// Its first frame's stamp, if known.
    pub first_ns: Option<u64>,
    /// Its last frame's stamp, if known.
    pub last_ns: Option<u64>,
    /// A writer holds it.
    pub being_written: bool,
    /// Its frames are not all counted (a long tail without index).
    pub partial: bool,
}

/// A store's (or several stores') status.
#[derive(Clone, Debug, Default)]
pub struct StoreStatus {
    /// The stores asked about.
    pub stores: Vec<PathBuf>,
    /// Every capture file, oldest first (by first stamp).
    pub files: Vec<FileStatus>,
    /// Free bytes (for unprivileged users) of each store's filesystem,
    /// summed over distinct filesystems.
    pub free_bytes: Option<u64>,
    /// Size of those filesystems.
    pub size_bytes: Option<u64>,
}

impl StoreStatus {
    /// The first frame's stamp of the store.
    pub fn first_ns(&self) -> Option<u64> {
        self.files.iter().filter_map(|f| f.first_ns).min()
    }

    /// The last frame's stamp of the store.
    pub fn last_ns(&self) -> Option<u64> {
        self.files.iter().filter_map(|f| f.last_ns).max()
    }

    /// Whether a recorder is writing into the store.
    pub fn recording(&self) -> bool {
        self.files.iter().any(|f| f.being_written)
    }

    /// The JSON of `/v1/status` (without node and version).
    pub fn to_json(&self) -> serde_json::Value {
        let fmt = |t: Option<u64>| t.map(wiretape_timestamp::format_rfc3339);
        serde_json::json!({
            "stores": self.stores.iter().map(|s| s.display().to_string()).collect::<Vec<_>>(),
            "first_ns": self.first_ns(),
            "last_ns": self.last_ns(),
            "first_time": fmt(self.first_ns()),
            "last_time": fmt(self.last_ns()),
            "files": self.files.len(),
            "bytes": self.files.iter().map(|f| f.bytes).sum::<u64>(),
            "frames": self.files.iter().map(|f| f.frames).sum::<u64>(),
            "frames_partial": self.files.iter().any(|f| f.partial),
            "free_bytes": self.free_bytes,
            "size_bytes": self.size_bytes,
            "recording": self.recording(),
            "files_being_written": self.files.iter().filter(|f| f.being_written).count(),
        })
    }
}

/// The status of `stores` (directories: our files, of `prefix` when given;
/// files named), read with `opts`. Stores that cannot be listed count no
/// files.
pub fn of(stores: &[PathBuf], prefix: Option<&str>, opts: &ReadOptions) -> StoreStatus {
    let mut st = StoreStatus {
        stores: stores.to_vec(),
        ..StoreStatus::default()
    };
    let mut seen_fs = Vec::new();
    for s in stores {
        use std::os::unix::fs::MetadataExt;
        let dir = if s.is_dir() {
            s.clone()
        } else {
            s.parent().map(Path::to_owned).unwrap_or_default()
        };
        if let (Ok(m), Some((free, size))) =
            (std::fs::metadata(&dir), wiretape_storage::fs_space(&dir))
        {
            if !seen_fs.contains(&m.dev()) {
                seen_fs.push(m.dev());
                *st.free_bytes.get_or_insert(0) += free;
                *st.size_bytes.get_or_insert(0) += size;
            }
        }
    }
    let files = crate::fleet::captures_with(stores, prefix, opts).unwrap_or_default();
    for f in files {
        st.files.push(file_status(&f, opts));
    }
    st.files
        .sort_by_key(|f| (f.first_ns.unwrap_or(u64::MAX), f.path.clone()));
    st
}

/// One file's status (its index where `opts` says; an encrypted file's
/// tail read with its identities).
pub fn file_status(path: &Path, opts: &ReadOptions) -> FileStatus {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let being_written = crate::fleet::being_written(path);
    let entries = index::read(&opts.index_path(path)).unwrap_or_default();
    let mut fs = FileStatus {
        path: path.to_owned(),
        bytes,
        frames: entries.iter().map(|e| e.count).sum(),
        first_ns: entries.first().map(|e| e.first_ns),
        last_ns: entries.iter().map(|e| e.last_ns).max(),
        being_written,
        partial: false,
    };
    // The tail past the index (or the whole file without one).
    let (from, skip_first) = match entries.last() {
        Some(e) => (e.offset, Some(e.count)),
        None => (0, None),
    };
    if bytes.saturating_sub(from) > TAIL_LIMIT {
        fs.partial = true;
        return fs;
    }
    let Ok(src) = wiretape_files::zread::open_buffered(path, opts) else {
        return fs;
    };
    let mut w = Walker::new(src);
    if w.stop().is_some() {
        return fs;
    }
    if from > 0 {
        w.seek_to(from);
    }
    let mut n = 0u64;
    while let Some(m) = w.next() {
        n += 1;
        if fs.first_ns.is_none() {
            fs.first_ns = Some(m.ts_ns);
        }
        fs.last_ns = Some(fs.last_ns.map_or(m.ts_ns, |l| l.max(m.ts_ns)));
    }
    // The last entry's own frames are in the index's count already.
    fs.frames += n.saturating_sub(skip_first.unwrap_or(0));
    fs
}
