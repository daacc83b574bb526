//! Query planner and k-way merge for `wiretape extract`: which files and
//! which blocks of them can hold frames of a time window ([`plan`]), and
//! their records merged in timestamp order, cut to the window and a
//! predicate ([`Merge`]).
//!
//! # The plan
//!
//! Inputs are directories and files. In a directory only files named like
//! ours ([`naming::parse_any`]: `<prefix>-<iface>-q<N>-<UTC>.pcap[ng]`, any
//! prefix, or one given) are read; a file given by name is read whatever its
//! name. A file named like ours holds one queue's frames in time order (the
//! writer stamps and writes them in arrival order) and its name is the stamp
//! of its first frame; its `.idx` lists its blocks in that order. That is
//! what makes skipping safe, and it is trusted only for such files:
//!
//! * a file whose name starts at or after `--to` is not opened;
//! * a file whose successor in its series (same `<prefix>-<iface>-q<N>` in
//!   the same directory: the next rotated file or run) starts before
//!   `--from` is not opened: its frames all come before the successor's first;
//! * otherwise its index picks the blocks that overlap the window
//!   (`last_ns >= from && first_ns < to`, found by the order of the entries)
//!   and that the block check accepts (the seam where a per-block "can this
//!   block match the filter?" test plugs in: [`plan_with`]); the walker is
//!   moved to the first such block's offset and reads on only through
//!   selected blocks;
//! * the last file of a series may be longer than its index says (the index
//!   is appended as blocks go out, so it lags a file being written, and a
//!   crash can cut it short): from its last entry on it is read to its
//!   current end;
//! * it is read no further than the first frame at or after `--to`.
//!
//! Any other file (another name, no usable index) is read whole, every
//! frame checked against the window; a file without an index is said so in
//! the notes. An index that is unreadable or not in order (offsets rising,
//! stamps not decreasing) is not used: the file is read whole.
//!
//! # The merge
//!
//! Each file is a stream; the next frame out is the earliest of the
//! streams' next frames (a binary heap). Ties (equal stamps) go in the
//! order of the plan: inputs as given, files of a directory by the start in
//! their names, then by path (so q0 before q1 when both start together);
//! within a file, the file's order. Streams are assumed to be in time order
//! (as `mergecap` assumes its inputs are); a stream that is not is merged as
//! it comes and its backward steps are counted ([`Stats::out_of_order`]).
//! Files are opened lazily: a file whose frames cannot come before the
//! frames at hand (its lower bound: the name's start, or its first selected
//! block's first stamp) is opened only when the merge reaches that time, so
//! only the files overlapping in time are open at once (one 1 MiB read
//! buffer each). Per frame nothing is allocated: each stream reads into its
//! own buffer, and the frame handed out borrows it.
//!
//! # Damage and files being written
//!
//! A file held open by a writer ([`wiretape_files::is_being_written`]) ends where
//! its writes in flight end: a torn record or zero pages there are not
//! damage; reading stops quietly. In a finished file, a torn tail or a
//! corrupt record is damage ([`NoteKind::Damage`]): what comes before it is
//! extracted and, when the file has an index, reading resumes at the next
//! indexed block after it. Every skip is a [`Note`]; none is silent.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wiretape_files::index::{self, Entry};
use wiretape_files::naming;
use wiretape_files::ramp::{RampReader, ReadPool};
use wiretape_files::walk::{End, Walker};
use wiretape_files::zread::Source;
use wiretape_files::ReadOptions;
use wiretape_storage::StorageError;

pub use wiretape_files::ramp::READ_BUFFER;

/// A time window: `from_ns` inclusive, `to_ns` exclusive (UTC ns); either
/// may be open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Frames stamped at or after this.
    pub from_ns: Option<u64>,
    /// Frames stamped before this.
    pub to_ns: Option<u64>,
}

impl Window {
    /// Whether a frame stamped `ts` is in the window.
    #[inline]
    pub fn contains(&self, ts: u64) -> bool {
        self.from_ns.is_none_or(|f| ts >= f) && !self.is_past(ts)
    }

    /// Whether `ts` is at or after the window's end.
    #[inline]
    pub fn is_past(&self, ts: u64) -> bool {
        self.to_ns.is_some_and(|t| ts >= t)
    }

    /// Whether frames stamped from `first` to `last` can be in the window.
    pub fn overlaps(&self, first: u64, last: u64) -> bool {
        self.from_ns.is_none_or(|f| last >= f) && !self.is_past(first)
    }
}

/// The first and last stamps a store holds, as its indexes and file names
/// say (no capture data read): what a window that finds nothing is
/// compared with ([`StoreSpan::misses`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreSpan {
    /// The first frame's stamp (UTC ns).
    pub first_ns: u64,
    /// The last frame's stamp (UTC ns).
    pub last_ns: u64,
}

impl StoreSpan {
    /// The span of both (either may be unknown).
    pub fn union(a: Option<StoreSpan>, b: Option<StoreSpan>) -> Option<StoreSpan> {
        match (a, b) {
            (Some(a), Some(b)) => Some(StoreSpan {
                first_ns: a.first_ns.min(b.first_ns),
                last_ns: a.last_ns.max(b.last_ns),
            }),
            (a, b) => a.or(b),
        }
    }

    /// Whether no stamp of the span is in `w`.
    pub fn misses(&self, w: &Window) -> bool {
        !w.overlaps(self.first_ns, self.last_ns)
    }

    /// The store's span when a window found no frame because it misses
    /// the store; None when frames were found, the span is unknown or the
    /// window overlaps it. The one condition for the "nothing was read"
    /// note of `extract` and `timeline` ([`StoreSpan::missed_line`]).
    pub fn missed(span: Option<StoreSpan>, frames: u64, w: &Window) -> Option<StoreSpan> {
        span.filter(|s| frames == 0 && s.misses(w))
    }

    /// `{first_ns, last_ns, first_time, last_time}` (the JSON field
    /// `store_span` of `extract --json`, `/v1/count`, `/v1/timeline`).
    pub fn to_json(&self) -> serde_json::Value {
        let fmt = wiretape_timestamp::format_rfc3339;
        serde_json::json!({
            "first_ns": self.first_ns,
            "last_ns": self.last_ns,
            "first_time": fmt(self.first_ns),
            "last_time": fmt(self.last_ns),
        })
    }

    /// Reads [`StoreSpan::to_json`] back (a sensor's answer); None for null.
    pub fn from_json(v: &serde_json::Value) -> Option<StoreSpan> {
        Some(StoreSpan {
            first_ns: v.get("first_ns")?.as_u64()?,
            last_ns: v.get("last_ns")?.as_u64()?,
        })
    }

    /// The line a command prints when a window found nothing because it
    /// misses the store: the window and the span (the command adds how it
    /// takes a window inside it).
    pub fn missed_line(&self, w: &Window) -> String {
        let fmt = wiretape_timestamp::format_rfc3339;
        let end = |t: Option<u64>, open: &str| t.map_or(open.to_string(), fmt);
        format!(
            "the window {} to {} misses the store, which holds {} to {}: nothing was read",
            end(w.from_ns, "the first frame"),
            end(w.to_ns, "the last frame"),
            fmt(self.first_ns),
            fmt(self.last_ns)
        )
    }
}

/// How a file's `.idx` is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexUse {
    /// Read and in order: it picks the blocks.
    Used,
    /// There is none: the file is read whole.
    Missing,
    /// Unreadable or out of order (why): the file is read whole.
    Unusable(String),
    /// The file is not named like ours, so its order is not known: read
    /// whole whether it has an index or not.
    Ignored,
}

/// A run of a file's bytes to read: from `start` up to the record that
/// starts at `end` (None: to the end of the file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// Offset of the first record (0: from the file's start).
    pub start: u64,
    /// Offset where the run ends (the next unselected block), or None.
    pub end: Option<u64>,
    /// The index entries (blocks) the run covers (empty without an index).
    /// Runs of the key index may share one block (several places in it).
    pub blocks: Range<usize>,
}

/// Why a file is not opened at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Its name says its first frame is at or after the window's end.
    StartsAfter,
    /// The next file of its series starts before the window.
    EndsBefore,
    /// No block of its index overlaps the window (or passes the block check).
    NoBlock,
}

/// What is read of one file.
#[derive(Clone, Debug)]
pub struct FilePlan {
    /// The file.
    pub path: PathBuf,
    /// Named like ours: one queue in time order; skipping relies on it.
    pub ordered: bool,
    /// How its index is used.
    pub index: IndexUse,
    /// Its index entries (when used).
    pub entries: Vec<Entry>,
    /// What to read, in file order (one whole-file span without an index).
    pub spans: Vec<Span>,
    /// Not opened at all, and why.
    pub skip: Option<Skip>,
    /// No frame of the spans is stamped before this (0: unknown).
    pub lower_ns: u64,
    /// Blocks the file's indexes list (its `.idx` entries; with the key
    /// index, `entries` holds only those the spans read).
    pub blocks_total: u64,
    /// Planned by the exact key index ([`wiretape_files::keys`]).
    pub key_index: bool,
}

/// The files of a query, in tie order, and the window.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Every input file, in the order ties are broken.
    pub files: Vec<FilePlan>,
    /// The window.
    pub window: Window,
    /// How its files are read (identities, where sidecars are).
    pub read: ReadOptions,
}

impl Plan {
    /// The stamps the store's files span, from their indexes (first entry's
    /// first stamp, last entry's last) and, for our files without one, the
    /// start in their names; None when none of that is known. Nothing is
    /// read: a file being written may hold a few frames past its index.
    pub fn span(&self) -> Option<StoreSpan> {
        let mut span = None;
        for f in &self.files {
            let s = match (f.entries.first(), f.entries.last()) {
                (Some(a), Some(b)) => Some(StoreSpan {
                    first_ns: a.first_ns,
                    last_ns: f
                        .entries
                        .iter()
                        .map(|e| e.last_ns)
                        .max()
                        .unwrap_or(b.last_ns),
                }),
                _ if f.ordered && f.lower_ns > 0 => Some(StoreSpan {
                    first_ns: f.lower_ns,
                    last_ns: f.lower_ns,
                }),
                _ => None,
            };
            span = StoreSpan::union(span, s);
        }
        span
    }
}

/// [`plan_with`] with no block check (every block overlapping the window is read).
pub fn plan(
    inputs: &[PathBuf],
    window: Window,
    prefix: Option<&str>,
    opts: &ReadOptions,
) -> Result<Plan, StorageError> {
    plan_with(inputs, window, prefix, opts, &mut |_, _| true)
}

/// Plans a query over `inputs` (directories and files; see the module
/// docs) for `window`; in directories only files named like ours (with
/// `prefix` when given), their sidecars where `opts` says (and the files
/// read with it). `check(file, entry)` says whether an index block
/// can hold a wanted frame (false: it is not read); only asked about blocks
/// that overlap the window. Err: an input that does not exist or a
/// directory that cannot be listed (nothing is read then).
pub fn plan_with(
    inputs: &[PathBuf],
    window: Window,
    prefix: Option<&str>,
    opts: &ReadOptions,
    check: &mut dyn FnMut(&Path, &Entry) -> bool,
) -> Result<Plan, StorageError> {
    plan_files(inputs, window, prefix, opts, &mut |path, start, next| {
        plan_ours(path, start, next, &window, opts, check)
    })
}

/// Lists `inputs` as [`plan_with`] does and plans each file: ours (named
/// like ours: `ours(path, start_ns, next_start_ns)`), or read whole.
pub(crate) fn plan_files(
    inputs: &[PathBuf],
    window: Window,
    prefix: Option<&str>,
    opts: &ReadOptions,
    ours: &mut dyn FnMut(PathBuf, u64, Option<u64>) -> FilePlan,
) -> Result<Plan, StorageError> {
    let found = find_files(inputs, prefix, opts)?;
    Ok(plan_found(found, window, opts, ours))
}

/// One input file as [`find_files`] found it.
pub(crate) enum Found {
    /// Planned by its indexes: ours (its start from its name, the next
    /// file's of its series), or one of Stenographer's with a sidecar
    /// index (start 0, no next).
    Indexed {
        /// The file.
        path: PathBuf,
        /// Its start (ns).
        start: u64,
        /// The start of the next file of its series.
        next: Option<u64>,
    },
    /// Read whole.
    Whole(FilePlan),
}

/// Plans what [`find_files`] found: each [`Found::Indexed`] by `ours`, in
/// their order.
pub(crate) fn plan_found(
    found: Vec<Found>,
    window: Window,
    opts: &ReadOptions,
    ours: &mut dyn FnMut(PathBuf, u64, Option<u64>) -> FilePlan,
) -> Plan {
    let files = found
        .into_iter()
        .map(|f| match f {
            Found::Indexed { path, start, next } => ours(path, start, next),
            Found::Whole(p) => p,
        })
        .collect();
    Plan {
        files,
        window,
        read: opts.clone(),
    }
}

/// The files [`plan_files`] plans, in its order, each once: what a plan
/// lists and stats before it reads an index (one pass per query, whatever
/// uses it).
pub(crate) fn find_files(
    inputs: &[PathBuf],
    prefix: Option<&str>,
    opts: &ReadOptions,
) -> Result<Vec<Found>, StorageError> {
    let rd = |p: &Path, source| StorageError::Read {
        path: p.to_owned(),
        source,
    };
    let mut paths = Vec::new();
    let mut seen = HashSet::new();
    // A volume of a store stands for all of them (store.toml).
    for input in &opts.expand_inputs(inputs) {
        let md = std::fs::metadata(input).map_err(|e| rd(input, e))?;
        let files = if md.is_dir() {
            opts.list_any(input, prefix).map_err(|e| rd(input, e))?
        } else {
            vec![input.clone()]
        };
        for f in files {
            use std::os::unix::fs::MetadataExt;
            let id = match opts.capture_metadata(&f) {
                Ok(m) => (m.dev(), m.ino()),
                // Listed, and deleted since (retention, while a recorder
                // writes): as if listed a moment later. A file named by
                // the caller is an error.
                Err(e) if md.is_dir() && e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(rd(&f, e)),
            };
            // The same file twice (a directory and a file in it) is read once.
            if seen.insert(id) {
                paths.push(f);
            }
        }
    }
    // Series: our files of one queue in one directory, by start.
    let mut series: HashMap<(PathBuf, String), Vec<(u64, usize)>> = HashMap::new();
    let names: Vec<Option<(String, u64)>> = paths
        .iter()
        .map(|p| {
            let name = p.file_name()?.to_str()?;
            let n = naming::parse_any(name)?;
            Some((n.series.to_string(), n.start_ns()?))
        })
        .collect();
    for (i, n) in names.iter().enumerate() {
        if let Some((s, start)) = n {
            let dir = paths[i].parent().map(Path::to_owned).unwrap_or_default();
            series
                .entry((dir, s.clone()))
                .or_default()
                .push((*start, i));
        }
    }
    let mut next_start: Vec<Option<u64>> = vec![None; paths.len()];
    for v in series.values_mut() {
        v.sort();
        for w in v.windows(2) {
            next_start[w[0].1] = Some(w[1].0);
        }
    }
    Ok(paths
        .into_iter()
        .enumerate()
        .map(|(i, path)| match names[i] {
            Some((_, start)) => Found::Indexed {
                path,
                start,
                next: next_start[i],
            },
            // Stenographer's file with a sidecar index of ours (in
            // `--index-dir`): planned by it like ours; no start in its name
            // (stenotype names a file by when it opened it, which frames
            // of its first block may predate).
            None if steno_indexed(&path, opts) => Found::Indexed {
                path,
                start: 0,
                next: None,
            },
            None => {
                let index = if opts.index_path(&path).exists() {
                    IndexUse::Ignored
                } else {
                    IndexUse::Missing
                };
                Found::Whole(whole(path, false, index, 0))
            }
        })
        .collect())
}

/// Whether `path` is one of Stenographer's files with a sidecar index
/// (where `opts` says: `wiretape index --index-dir`).
fn steno_indexed(path: &Path, opts: &ReadOptions) -> bool {
    opts.steno_sidecar_dir().is_some()
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(wiretape_files::steno::is_file_name)
        // A server's options keep the `.idx` open, as its `.kdx`: asked
        // again on a cold cache, its inode is in memory (Stenographer's
        // server holds its own files open too).
        && opts.index_exists(path)
}

/// A file read from start to end.
pub(crate) fn whole(path: PathBuf, ordered: bool, index: IndexUse, lower_ns: u64) -> FilePlan {
    FilePlan {
        path,
        ordered,
        index,
        entries: Vec::new(),
        spans: vec![Span {
            start: 0,
            end: None,
            blocks: 0..0,
        }],
        skip: None,
        lower_ns,
        blocks_total: 0,
        key_index: false,
    }
}

/// Why entries cannot be trusted to be in file and time order, if so.
fn out_of_order(entries: &[Entry]) -> Option<String> {
    for (i, e) in entries.iter().enumerate() {
        if e.first_ns > e.last_ns {
            return Some(format!("entry {i} ends before it starts"));
        }
        if let Some(n) = entries.get(i + 1) {
            if n.offset <= e.offset {
                return Some(format!("entry {} does not start after entry {i}", i + 1));
            }
            if n.first_ns < e.last_ns {
                return Some(format!("entry {} starts before entry {i} ends", i + 1));
            }
        }
    }
    None
}

/// Whether `capture` may hold records past what its index `idx` lists: a
/// writer holds it, or the index is older than it (a crash between a
/// block's write and its entry; `wiretape index` rebuilds such an index).
fn index_may_lag(capture: &Path, idx: &Path) -> bool {
    if crate::fleet::being_written(capture) {
        return true;
    }
    match (std::fs::metadata(capture), std::fs::metadata(idx)) {
        (Ok(c), Ok(i)) => match (c.modified(), i.modified()) {
            (Ok(c), Ok(i)) => i < c,
            _ => true,
        },
        _ => true,
    }
}

pub(crate) fn plan_ours(
    path: PathBuf,
    start_ns: u64,
    next_ns: Option<u64>,
    w: &Window,
    opts: &ReadOptions,
    check: &mut dyn FnMut(&Path, &Entry) -> bool,
) -> FilePlan {
    // The name has the first frame's stamp in ns; a µs file holds it cut.
    let lower = start_ns - start_ns % 1000;
    let ip = opts.index_path(&path);
    let (index, entries) = if !ip.exists() {
        (IndexUse::Missing, Vec::new())
    } else {
        match index::read(&ip) {
            Err(e) => (IndexUse::Unusable(e.to_string()), Vec::new()),
            Ok(es) => match out_of_order(&es) {
                Some(why) => (
                    IndexUse::Unusable(format!("{}: {why}", ip.display())),
                    Vec::new(),
                ),
                None => (IndexUse::Used, es),
            },
        }
    };
    let skipped = |skip, index, entries: Vec<Entry>| FilePlan {
        path: path.clone(),
        ordered: true,
        index,
        blocks_total: entries.len() as u64,
        entries,
        spans: Vec::new(),
        skip: Some(skip),
        lower_ns: lower,
        key_index: false,
    };
    if w.is_past(lower) {
        return skipped(Skip::StartsAfter, index, entries);
    }
    if let (Some(next), Some(from)) = (next_ns, w.from_ns) {
        // Every frame of this file comes before (or with) the next one's first.
        if next < from {
            return skipped(Skip::EndsBefore, index, entries);
        }
    }
    if entries.is_empty() {
        // No index, or none yet (a file being written): read it all.
        let mut p = whole(path.clone(), true, index, lower);
        p.entries = entries;
        return p;
    }
    let blocks_total = entries.len() as u64;
    let n = entries.len();
    // Blocks before `first` end before the window; from `end` on they
    // start after it (entries are in time order).
    let first = w
        .from_ns
        .map_or(0, |f| entries.partition_point(|e| e.last_ns < f));
    let end = w
        .to_ns
        .map_or(n, |t| entries.partition_point(|e| e.first_ns < t));
    let mut sel = vec![false; n];
    for (i, e) in entries.iter().enumerate().take(end).skip(first) {
        sel[i] = w.overlaps(e.first_ns, e.last_ns) && check(&path, e);
    }
    // The last file of a series may go on past its index (being written,
    // or its index cut short by a crash): read from its last entry to its
    // end, unless even that entry starts after the window. A finished file
    // whose index is not older than it (as `wiretape index` judges an index
    // current) is all in its index: nothing past it to read.
    if next_ns.is_none() && !w.is_past(entries[n - 1].first_ns) && index_may_lag(&path, &ip) {
        sel[n - 1] = true;
    }
    let mut spans = Vec::new();
    let mut i = 0;
    while i < n {
        if !sel[i] {
            i += 1;
            continue;
        }
        let a = i;
        while i < n && sel[i] {
            i += 1;
        }
        spans.push(Span {
            start: entries[a].offset,
            end: entries.get(i).map(|e| e.offset),
            blocks: a..i,
        });
    }
    let Some(s) = spans.first() else {
        return skipped(Skip::NoBlock, index, entries);
    };
    let lower_ns = lower.max(entries[s.blocks.start].first_ns);
    FilePlan {
        path,
        ordered: true,
        index,
        entries,
        spans,
        skip: None,
        lower_ns,
        blocks_total,
        key_index: false,
    }
}

/// One frame of the merge; its bytes borrow the stream's buffer.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// UTC ns.
    pub ts_ns: u64,
    /// Length on the wire.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
    /// Index of its file in [`Plan::files`].
    pub file: usize,
    /// Offset of its record in the file.
    pub offset: u64,
    /// Its link type (its file's).
    pub linktype: u32,
}

/// What a note is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteKind {
    /// The file has no usable index (or is not ours): read whole.
    NoIndex,
    /// A finished file is damaged (corrupt record, torn tail): what comes
    /// before is extracted (and after it, from the next indexed block).
    Damage,
    /// Reading failed, or the file is not a capture extract can merge
    /// (another link type): its frames are missing from the output.
    Error,
    /// Records out of time order: the merge follows the file there.
    OutOfOrder,
}

/// Something about a file the user must hear of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The file.
    pub path: PathBuf,
    /// Where (for damage: where the last whole record ends).
    pub offset: Option<u64>,
    /// What kind.
    pub kind: NoteKind,
    /// Words for the user.
    pub message: String,
}

/// What a merge did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames handed out.
    pub frames: u64,
    /// Their captured bytes.
    pub bytes: u64,
    /// Their bytes on the wire.
    pub wire_bytes: u64,
    /// Files in the plan.
    pub files: u64,
    /// Files opened and read.
    pub files_read: u64,
    /// Files not opened (their names or indexes rule them out).
    pub files_skipped: u64,
    /// Files read whole without an index.
    pub files_without_index: u64,
    /// Files being written while read.
    pub files_live: u64,
    /// Index blocks read from (at least one record).
    pub blocks_read: u64,
    /// Of those, blocks that held a frame the window and filter kept (the
    /// rest were read for nothing: the index's false positives).
    pub blocks_matched: u64,
    /// Index blocks of the files' indexes not read.
    pub blocks_skipped: u64,
    /// Bytes read from the files.
    pub bytes_read: u64,
    /// Compressed units decompressed (compressed captures only): a narrow
    /// window decompresses a few.
    pub blocks_decompressed: u64,
    /// age chunks (64 KiB) decrypted (encrypted captures only): a narrow
    /// window decrypts a few.
    pub chunks_decrypted: u64,
    /// Records walked (in the window or not).
    pub records_read: u64,
    /// Of those, odd records libpcap reads as frames (and so does the
    /// merge): orig_len 0 or below caplen, a fraction of a second out of
    /// range, a caplen above the snap length.
    pub records_odd: u64,
    /// Records stamped before the one before them in their file.
    pub out_of_order: u64,
    /// Files with damage ([`NoteKind::Damage`]).
    pub damaged_files: u64,
    /// Files with errors ([`NoteKind::Error`]).
    pub error_files: u64,
    /// What the store's files span ([`Plan::span`]), known before reading.
    pub store_span: Option<StoreSpan>,
}

impl std::ops::AddAssign for Stats {
    /// The counts of two merges together (several inputs merged apart).
    fn add_assign(&mut self, o: Stats) {
        self.frames += o.frames;
        self.bytes += o.bytes;
        self.wire_bytes += o.wire_bytes;
        self.files += o.files;
        self.files_read += o.files_read;
        self.files_skipped += o.files_skipped;
        self.files_without_index += o.files_without_index;
        self.files_live += o.files_live;
        self.blocks_read += o.blocks_read;
        self.blocks_matched += o.blocks_matched;
        self.blocks_skipped += o.blocks_skipped;
        self.bytes_read += o.bytes_read;
        self.blocks_decompressed += o.blocks_decompressed;
        self.chunks_decrypted += o.chunks_decrypted;
        self.records_read += o.records_read;
        self.records_odd += o.records_odd;
        self.out_of_order += o.out_of_order;
        self.damaged_files += o.damaged_files;
        self.error_files += o.error_files;
        self.store_span = StoreSpan::union(self.store_span, o.store_span);
    }
}

/// One open file of the merge.
struct Stream {
    walk: Walker<Source<RampReader>>,
    data: Vec<u8>,
    ts_ns: u64,
    orig_len: u32,
    offset: u64,
    /// The span being read.
    span: usize,
    /// The index block of the last record; the last block counted as read,
    /// and as holding a match.
    block: usize,
    counted: Option<usize>,
    matched: Option<usize>,
    prev_ts: u64,
    out_of_order: u64,
    live: bool,
    /// Its link type's place in [`Merge`]'s list (and predicate).
    lt: usize,
}

/// The k-way merge of a plan's files (see the module docs): frames in the
/// window that `pred(data, wire_len, ts_ns)` accepts, in timestamp order. Over
/// files of several link types ([`Merge::per_linktype`]) each link type
/// has its own predicate (a filter compiles differently for each) and each
/// frame says its link type ([`Frame::linktype`]).
pub struct Merge<P: FnMut(&[u8], u32, u64) -> bool> {
    files: Vec<FilePlan>,
    window: Window,
    /// The link types merged, each with its predicate.
    preds: Vec<(u32, P)>,
    /// Files not opened yet, latest lower bound first.
    pending: Vec<(u64, usize)>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    streams: Vec<Option<Stream>>,
    /// The stream whose frame was handed out last (advanced on the next call).
    current: Option<usize>,
    stats: Stats,
    notes: Vec<Note>,
    noted: Vec<bool>,
    /// Set by whoever wants the merge to end early (a client gone).
    stop: Option<Arc<AtomicBool>>,
    stopped: bool,
    /// Reader threads reading the files' runs ahead (a plan of many runs).
    pool: ReadPool,
    /// How the files are opened ([`Plan::read`]).
    read: ReadOptions,
    /// Files the planner opened already (to learn their link types), by
    /// path: taken instead of opening them again ([`Merge::with_opened`]).
    opened: HashMap<PathBuf, Opened>,
    /// The first frame was asked for ([`read_early`] done).
    started: bool,
}

/// Bytes of a plan's runs, over the files the planner opened, up to which
/// all of them are asked for at the merge's start ([`read_early`]).
const EARLY_BYTES: u64 = 8 << 20;

/// Runs of a plan, over the files the planner opened, up to which all of
/// them are asked for at the merge's start ([`read_early`]): beyond, the
/// first file's later runs would queue behind every other file's.
const EARLY_RUNS: usize = 64;

/// A selective plan over several files (at most [`EARLY_RUNS`] runs of
/// [`EARLY_BYTES`] in all, over the files the planner opened, none read
/// to its end): every file's runs asked of `pool` at once, in the order
/// the merge reaches the files. The merge opens a file only when its first frame
/// could be next (in time order, the files one after the other): without
/// this, each file's reads would wait for the one before, as many disk
/// waits in a row as files; now the disk serves them together. A larger
/// plan reads as before (each file's runs asked for when the merge
/// reaches it), so the files it reaches first are not kept waiting behind
/// the others'.
pub(crate) fn read_early(
    files: &[FilePlan],
    opened: &mut HashMap<PathBuf, Opened>,
    pool: &ReadPool,
) {
    let mut order: Vec<&FilePlan> = files
        .iter()
        .filter(|f| f.skip.is_none() && opened.contains_key(&f.path))
        .collect();
    order.sort_by_key(|f| f.lower_ns);
    let runs_in_all: usize = order.iter().map(|f| f.spans.len()).sum();
    if runs_in_all > EARLY_RUNS {
        return;
    }
    let mut total = 0u64;
    let mut early = Vec::with_capacity(order.len());
    for f in order {
        let mut runs = Vec::with_capacity(f.spans.len());
        for s in &f.spans {
            let Some(end) = s.end else {
                return;
            };
            total += end.saturating_sub(s.start);
            runs.push((s.start, end));
        }
        if total > EARLY_BYTES {
            return;
        }
        early.push((&f.path, runs));
    }
    if early.len() < 2 {
        return;
    }
    for (path, runs) in early {
        if let Some((walk, _)) = opened.get_mut(path) {
            walk.get_mut().prefetch_early(pool, runs);
        }
    }
}

/// A file opened for the merge: its walk (its header read) and whether a
/// writer holds it ([`Source::open_query`]).
pub(crate) type Opened = (Walker<Source<RampReader>>, bool);

/// Opens `path` for the merge ([`Opened`]).
pub(crate) fn open_for_merge(path: &Path, read: &ReadOptions) -> std::io::Result<Opened> {
    let (reader, live) = Source::open_query(path, read)?;
    Ok((Walker::new(reader), live))
}

impl<P: FnMut(&[u8], u32, u64) -> bool> Merge<P> {
    /// A merge of `plan`'s files, frames of link type `linktype` only (a
    /// file of another is an [`NoteKind::Error`]), kept when `pred` says so.
    pub fn new(plan: Plan, linktype: u32, pred: P) -> Self {
        Self::per_linktype(plan, vec![(linktype, pred)])
    }

    /// A merge of `plan`'s files of the link types in `preds` (a file of
    /// another is an [`NoteKind::Error`]), a frame kept when its link
    /// type's predicate says so.
    pub fn per_linktype(plan: Plan, preds: Vec<(u32, P)>) -> Self {
        let mut stats = Stats {
            files: plan.files.len() as u64,
            store_span: plan.span(),
            ..Stats::default()
        };
        let mut notes = Vec::new();
        let mut pending = Vec::new();
        for (i, f) in plan.files.iter().enumerate() {
            if f.skip.is_some() {
                stats.files_skipped += 1;
                stats.blocks_skipped += f.blocks_total;
                continue;
            }
            let why = match &f.index {
                IndexUse::Used if !f.entries.is_empty() => None,
                IndexUse::Used => Some("its index has no entry yet: read whole".to_string()),
                IndexUse::Missing => Some("no index (.idx): read whole".into()),
                IndexUse::Unusable(e) => Some(format!("index not used ({e}): read whole")),
                IndexUse::Ignored => Some(
                    "not named like wiretape's files (order unknown): read whole, its index unused"
                        .into(),
                ),
            };
            if let Some(message) = why {
                stats.files_without_index += 1;
                notes.push(Note {
                    path: f.path.clone(),
                    offset: None,
                    kind: NoteKind::NoIndex,
                    message,
                });
            }
            pending.push((f.lower_ns, i));
        }
        pending.sort_by(|a, b| b.cmp(a));
        let n = plan.files.len();
        Merge {
            files: plan.files,
            window: plan.window,
            read: plan.read,
            preds,
            pending,
            heap: BinaryHeap::new(),
            streams: (0..n).map(|_| None).collect(),
            current: None,
            stats,
            notes,
            noted: vec![false; n],
            stop: None,
            stopped: false,
            pool: ReadPool::new(),
            opened: HashMap::new(),
            started: false,
        }
    }

    /// The merge takes these files as they are opened ([`open_for_merge`]
    /// by the planner) instead of opening them again.
    pub(crate) fn with_opened(mut self, opened: HashMap<PathBuf, Opened>) -> Self {
        self.opened = opened;
        self
    }

    /// Ends the merge early once `flag` is set: it is checked every 1024
    /// records walked (and before each file is opened), so a query whose
    /// client went away stops reading within a block or so, whether or not
    /// frames match. [`Merge::next`] then returns None.
    pub fn stop_on(&mut self, flag: Arc<AtomicBool>) {
        self.stop = Some(flag);
    }

    /// Whether the merge ended because the stop flag was set.
    pub fn stopped_early(&self) -> bool {
        self.stopped
    }

    fn should_stop(&mut self) -> bool {
        if !self.stopped
            && self
                .stop
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Relaxed))
        {
            self.stopped = true;
        }
        self.stopped
    }

    /// The frame [`Merge::next`] handed out last, again (until the next
    /// call): for merging this merge with other sources.
    pub fn current(&self) -> Option<Frame<'_>> {
        let i = self.current?;
        let s = self.streams[i].as_ref()?;
        Some(Frame {
            ts_ns: s.ts_ns,
            orig_len: s.orig_len,
            data: &s.data,
            file: i,
            offset: s.offset,
            linktype: self.preds[s.lt].0,
        })
    }

    /// The link types merged, in the order given.
    pub fn linktypes(&self) -> Vec<u32> {
        self.preds.iter().map(|p| p.0).collect()
    }

    /// The files of the plan.
    pub fn files(&self) -> &[FilePlan] {
        &self.files
    }

    /// Counts so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Notes not taken yet (cheap to check after every frame).
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// Takes the notes so far.
    pub fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.notes)
    }

    /// The next frame, or None when every file is done.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Frame<'_>> {
        if !std::mem::replace(&mut self.started, true) {
            read_early(&self.files, &mut self.opened, &self.pool);
        }
        if let Some(i) = self.current.take() {
            self.advance(i);
        }
        if self.should_stop() {
            return None;
        }
        // Open every file whose frames could come before the earliest at hand.
        while let Some(&(lower, i)) = self.pending.last() {
            if self.heap.peek().is_some_and(|Reverse((ts, _))| lower > *ts) {
                break;
            }
            self.pending.pop();
            self.open(i);
        }
        let Reverse((_, i)) = self.heap.pop()?;
        self.current = Some(i);
        let s = self.streams[i]
            .as_ref()
            .expect("a stream in the heap is open");
        self.stats.frames += 1;
        self.stats.bytes += s.data.len() as u64;
        self.stats.wire_bytes += u64::from(s.orig_len);
        self.current()
    }

    fn note(&mut self, i: usize, offset: Option<u64>, kind: NoteKind, message: String) {
        if matches!(kind, NoteKind::Damage | NoteKind::Error) && !self.noted[i] {
            self.noted[i] = true;
            match kind {
                NoteKind::Damage => self.stats.damaged_files += 1,
                _ => self.stats.error_files += 1,
            }
        }
        self.notes.push(Note {
            path: self.files[i].path.clone(),
            offset,
            kind,
            message,
        });
    }

    fn open(&mut self, i: usize) {
        let path = &self.files[i].path;
        let opened = match self.opened.remove(path) {
            Some(o) => Ok(o),
            None => open_for_merge(path, &self.read),
        };
        let (mut walk, live) = match opened {
            Ok(o) => o,
            Err(e) => {
                let m = format!("cannot read it: {e}");
                return self.note(i, None, NoteKind::Error, m);
            }
        };
        self.stats.files_read += 1;
        self.stats.files_live += u64::from(live);
        let lt = walk.header().linktype;
        let known = self.preds.iter().position(|p| p.0 == lt);
        if walk.stop().is_none() && known.is_none() {
            let merged: Vec<String> = self.preds.iter().map(|p| p.0.to_string()).collect();
            let m = format!(
                "link type {lt} (extract merges link type {} only): not read",
                merged.join(", ")
            );
            self.stats.bytes_read += walk.get_ref().bytes_read();
            self.stats.blocks_decompressed += walk.get_ref().blocks_decompressed();
            self.stats.chunks_decrypted += walk.get_ref().chunks_decrypted();
            return self.note(i, None, NoteKind::Error, m);
        }
        let spans = &self.files[i].spans;
        // Many runs: their reads asked for ahead, many at once (per run,
        // bounded per file and per query), while the walk parses.
        if spans.len() > 1 && !walk.get_ref().prefetching() {
            let runs = spans.iter().filter_map(|s| s.end.map(|e| (s.start, e)));
            walk.get_mut().prefetch(&self.pool, runs);
        }
        let sp = &spans[0];
        let first = sp.start;
        walk.seek_to(first);
        if let Some(end) = sp.end {
            walk.get_mut().hint_to(end);
        }
        let block = sp.blocks.start;
        self.streams[i] = Some(Stream {
            walk,
            data: Vec::with_capacity(2048),
            ts_ns: 0,
            orig_len: 0,
            offset: 0,
            span: 0,
            block,
            counted: None,
            matched: None,
            prev_ts: 0,
            out_of_order: 0,
            live,
            lt: known.unwrap_or(0),
        });
        self.advance(i);
    }

    /// Moves stream `i` to its next wanted frame and puts it in the heap,
    /// or closes it.
    fn advance(&mut self, i: usize) {
        let Some(mut s) = self.streams[i].take() else {
            return;
        };
        let found = self.step(i, &mut s);
        if found {
            self.heap.push(Reverse((s.ts_ns, i)));
            self.streams[i] = Some(s);
        } else {
            self.close(i, s);
        }
    }

    fn step(&mut self, i: usize, s: &mut Stream) -> bool {
        loop {
            // The run's records all read: the next record starts at its end
            // or beyond, so it is neither read nor its bytes asked for (the
            // reads of a selective query end at its runs' ends).
            let f = &self.files[i];
            let at = s.walk.next_at();
            if s.walk.stop().is_none() && f.spans[s.span].end.is_some_and(|e| at >= e) {
                s.span += 1;
                let Some(next) = f.spans.get(s.span) else {
                    return false;
                };
                s.block = next.blocks.start;
                if next.start > at {
                    s.walk.seek_to(next.start);
                }
                // Read on (after the seek, or from where the walk is: the
                // runs touch) to this run's end.
                if let Some(end) = next.end {
                    s.walk.get_mut().hint_to(end);
                }
                continue;
            }
            let Some(m) = s.walk.next_into(&mut s.data) else {
                if self.stopped(i, s) {
                    continue;
                }
                return false;
            };
            self.stats.records_read += 1;
            self.stats.records_odd += u64::from(m.odd);
            if self.stats.records_read.is_multiple_of(1024) && self.should_stop() {
                return false;
            }
            let f = &self.files[i];
            if m.ts_ns < s.prev_ts {
                s.out_of_order += 1;
            }
            s.prev_ts = m.ts_ns;
            let span = &f.spans[s.span];
            if span.end.is_some_and(|e| m.offset >= e) {
                // Past the run: on to the next one, if any.
                s.span += 1;
                let Some(next) = f.spans.get(s.span) else {
                    return false;
                };
                s.block = next.blocks.start;
                if next.start > m.offset {
                    s.walk.seek_to(next.start);
                    if let Some(end) = next.end {
                        s.walk.get_mut().hint_to(end);
                    }
                    continue;
                }
                if let Some(end) = next.end {
                    s.walk.get_mut().hint_to(end);
                }
                // The next run starts at this very record (runs of the key
                // index can touch): it is the run's first.
                if next.end.is_some_and(|e| m.offset >= e) {
                    continue;
                }
            }
            if !f.entries.is_empty() {
                while f
                    .entries
                    .get(s.block + 1)
                    .is_some_and(|e| e.offset <= m.offset)
                {
                    s.block += 1;
                }
                if s.counted != Some(s.block) {
                    s.counted = Some(s.block);
                    self.stats.blocks_read += 1;
                }
            }
            if self.window.is_past(m.ts_ns) {
                if f.ordered {
                    return false;
                }
                continue;
            }
            if !self.window.contains(m.ts_ns) || !(self.preds[s.lt].1)(&s.data, m.orig_len, m.ts_ns)
            {
                continue;
            }
            if !f.entries.is_empty() && s.matched != Some(s.block) {
                s.matched = Some(s.block);
                self.stats.blocks_matched += 1;
            }
            s.ts_ns = m.ts_ns;
            s.orig_len = m.orig_len;
            s.offset = m.offset;
            return true;
        }
    }

    /// The walk of stream `i` stopped: notes what must be told; true if it
    /// goes on (from the next indexed block after damage).
    fn stopped(&mut self, i: usize, s: &mut Stream) -> bool {
        let Some(stop) = s.walk.stop() else {
            return false;
        };
        let at = stop.offset;
        let live = s.live || wiretape_files::is_being_written(s.walk.get_ref().file());
        let what = match &stop.end {
            End::Clean => return false,
            End::Io(e) => {
                let m = format!("read error at byte {at}: {e}");
                self.note(i, Some(at), NoteKind::Error, m);
                return false;
            }
            // Writes in flight end there: the rest comes with the next flush.
            _ if live => return false,
            End::Torn { what, .. } => format!(
                "torn tail (truncated {what}) at byte {at}: frames up to it extracted; \
                 `wiretape repair` trims it"
            ),
            End::Zeros(_) => {
                format!("zero padding from byte {at} on: frames up to it extracted; `wiretape repair` trims it")
            }
            End::Corrupt(_) => {
                let len = s
                    .walk
                    .get_ref()
                    .file()
                    .metadata()
                    .map(|m| m.len())
                    .unwrap_or(0);
                let e = stop
                    .error(&self.files[i].path, len)
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                // The error names the file first; the note names it too.
                let why = e
                    .split_once(": ")
                    .map_or(e.as_str(), |(_, w)| w)
                    .to_string();
                format!("{why}; frames before byte {at} extracted")
            }
        };
        // With an index: go on at the next selected block after the damage.
        let f = &self.files[i];
        let resume = f.spans.iter().enumerate().skip(s.span).find_map(|(k, sp)| {
            if sp.blocks.is_empty() {
                return None;
            }
            let j = sp.blocks.clone().find(|&j| f.entries[j].offset > at)?;
            // A key index's run may start inside its block.
            Some((k, j, f.entries[j].offset.max(sp.start)))
        });
        match resume {
            Some((k, j, off)) => {
                let m = format!("{what}; resumed at byte {off} (the next indexed block)");
                self.note(i, Some(at), NoteKind::Damage, m);
                s.span = k;
                s.block = j;
                s.walk.seek_to(off);
                s.walk.stop().is_none()
            }
            None => {
                let m = if f.entries.is_empty() {
                    format!("{what}; the rest of the file is not read (no index to resume from)")
                } else {
                    what
                };
                self.note(i, Some(at), NoteKind::Damage, m);
                false
            }
        }
    }

    fn close(&mut self, i: usize, mut s: Stream) {
        s.walk.get_mut().settle();
        self.stats.bytes_read += s.walk.get_ref().bytes_read();
        self.stats.blocks_decompressed += s.walk.get_ref().blocks_decompressed();
        self.stats.chunks_decrypted += s.walk.get_ref().chunks_decrypted();
        if s.out_of_order > 0 {
            let how = if self.files[i].ordered {
                "; the time cut assumed time order, so frames may be missing"
            } else {
                ""
            };
            let m = format!(
                "{} records stamped before the record before them: merged in the file's order there{how}",
                s.out_of_order
            );
            self.stats.out_of_order += s.out_of_order;
            self.note(i, None, NoteKind::OutOfOrder, m);
        }
    }

    /// Finishes the counts (blocks not read) and returns them; call after
    /// [`Merge::next`] returned None, or to end the merge early: files
    /// still open are closed (their reads ahead waited for, their bytes
    /// read counted).
    pub fn finish(&mut self) -> Stats {
        self.current = None;
        self.heap.clear();
        for k in 0..self.streams.len() {
            if let Some(mut s) = self.streams[k].take() {
                let r = s.walk.get_mut();
                r.settle();
                self.stats.bytes_read += r.bytes_read();
                self.stats.blocks_decompressed += r.blocks_decompressed();
                self.stats.chunks_decrypted += r.chunks_decrypted();
            }
        }
        let opened: u64 = self
            .files
            .iter()
            .filter(|f| f.skip.is_none())
            .map(|f| f.blocks_total)
            .sum();
        let mut st = self.stats;
        st.blocks_skipped += opened.saturating_sub(st.blocks_read);
        st
    }
}

#[cfg(test)]
mod tests {
    //! The planner and the merge on files written by the crate's own writer
    //! (with and without index, ns/µs/pcapng, torn, corrupt, being written,
    //! rotated), against a brute-force reference: every record of every
    //! file read whole, cut to the window and the predicate, sorted by
    //! (stamp, file order), stably.
    use super::*;

    /// Everything of `d`'s store, planned with no window and default options.
    fn plan_all(d: &Dir) -> Plan {
        plan(
            &d.inputs(),
            Window::default(),
            None,
            &ReadOptions::default(),
        )
        .unwrap()
    }
    use std::fs::File;
    use wiretape_files::walk::Walker;
    use wiretape_files::Format;
    use wiretape_storage::{FileSink, PcapWriter};

    struct Dir(PathBuf);
    impl Dir {
        fn new(tag: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("wt-extract-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Dir(d)
        }
        fn inputs(&self) -> Vec<PathBuf> {
            vec![self.0.clone()]
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const T0: u64 = 1_763_806_210_000_000_000;

    fn frame(q: u32, i: u64) -> Vec<u8> {
        let len = 60 + ((i * 37 + q as u64 * 11) % 200) as usize;
        let mut f = vec![(i as u8) ^ (q as u8) << 7; len];
        f[..8].copy_from_slice(&i.to_be_bytes());
        f[8] = q as u8;
        f
    }

    /// A file of ours for queue `q` with frames stamped `stamps`, 4 KiB
    /// blocks, an index unless `no_index`.
    fn write(dir: &Path, q: u32, stamps: &[u64], fmt: Format, no_index: bool) -> PathBuf {
        let name = naming::file_name("wt", "eth-0", q, stamps[0], fmt);
        let p = dir.join(name);
        let sink = FileSink::with_block_size(&p, 4096).unwrap();
        let mut w = PcapWriter::with_format(sink, 65535, fmt, "eth-0");
        if !no_index {
            w = w.with_index(&p);
        }
        for (i, &ts) in stamps.iter().enumerate() {
            w.write(ts, &frame(q, i as u64)).unwrap();
        }
        w.close().unwrap();
        p
    }

    type Pred<'a> = &'a dyn Fn(&[u8]) -> bool;

    /// Every record of `files` (read whole, up to any damage) as (stamp,
    /// file, data, wire length).
    type Rec = (u64, usize, Vec<u8>, u32);
    fn all_records(files: &[PathBuf]) -> Vec<Rec> {
        let mut out = Vec::new();
        for (k, f) in files.iter().enumerate() {
            let mut w = Walker::new(std::io::BufReader::new(File::open(f).unwrap()));
            let mut d = Vec::new();
            while let Some(m) = w.next_into(&mut d) {
                out.push((m.ts_ns, k, d.clone(), m.orig_len));
            }
        }
        out
    }

    fn reference(recs: &[Rec], w: Window, pred: &dyn Fn(&[u8]) -> bool) -> Vec<Rec> {
        let mut v: Vec<Rec> = recs
            .iter()
            .filter(|r| w.contains(r.0) && pred(&r.2))
            .cloned()
            .collect();
        v.sort_by_key(|r| (r.0, r.1)); // stable: file order within a file
        v
    }

    fn run(
        inputs: &[PathBuf],
        w: Window,
        pred: &dyn Fn(&[u8]) -> bool,
    ) -> (Vec<Rec>, Stats, Vec<Note>, Vec<PathBuf>) {
        let plan = plan(inputs, w, None, &ReadOptions::default()).unwrap();
        let files: Vec<PathBuf> = plan.files.iter().map(|f| f.path.clone()).collect();
        let mut m = Merge::new(plan, 1, |d: &[u8], _, _| pred(d));
        let mut out = Vec::new();
        while let Some(f) = m.next() {
            out.push((f.ts_ns, f.file, f.data.to_vec(), f.orig_len));
        }
        let st = m.finish();
        (out, st, m.take_notes(), files)
    }

    /// Windows with edges on frames, between frames, before and after everything.
    fn windows(stamps: &[u64]) -> Vec<Window> {
        let mut s: Vec<u64> = stamps.to_vec();
        s.sort();
        let at = |f: f64| s[((s.len() - 1) as f64 * f) as usize];
        let mut v = vec![
            Window::default(),
            Window {
                from_ns: Some(at(0.3)),
                to_ns: None,
            },
            Window {
                from_ns: None,
                to_ns: Some(at(0.6)),
            },
            Window {
                from_ns: Some(at(0.25)),
                to_ns: Some(at(0.26)),
            },
            Window {
                from_ns: Some(at(0.5) + 1),
                to_ns: Some(at(0.7) + 1),
            },
            Window {
                from_ns: Some(at(0.5) - 1),
                to_ns: Some(at(0.5)),
            },
            Window {
                from_ns: Some(at(0.5)),
                to_ns: Some(at(0.5) + 1),
            },
            Window {
                from_ns: Some(s[0]),
                to_ns: Some(s[s.len() - 1]),
            },
            Window {
                from_ns: Some(s[s.len() - 1] + 1),
                to_ns: None,
            },
            Window {
                from_ns: None,
                to_ns: Some(s[0]),
            },
        ];
        for k in 1..12 {
            let f = at(k as f64 / 12.0);
            v.push(Window {
                from_ns: Some(f),
                to_ns: Some(f + 3_000_000),
            });
        }
        v
    }

    /// Two queues, interleaved, with equal stamps across queues and within
    /// one, each rotated into two files.
    fn store(dir: &Path, fmt: Format, no_index: bool) -> (Vec<PathBuf>, Vec<u64>) {
        let unit = if fmt == Format::PcapUs { 1000 } else { 1 };
        let q0: Vec<u64> = (0..1500u64)
            .map(|i| T0 + (i * 10_007 / unit) * unit)
            .collect();
        let mut q1: Vec<u64> = (0..1200u64).map(|i| T0 + 3_000 + i * 12_500).collect();
        // Ties: some of q1's stamps equal q0's; runs of equal stamps in q1.
        for i in (0..1200).step_by(50) {
            q1[i] = q0[i];
        }
        for i in (100..1200).step_by(97) {
            q1[i + 1] = q1[i];
        }
        let q1: Vec<u64> = q1.iter().map(|t| t / unit * unit).collect();
        let mut q1s = q1.clone();
        q1s.sort();
        let files = vec![
            write(dir, 0, &q0[..700], fmt, no_index),
            write(dir, 0, &q0[700..], fmt, no_index),
            write(dir, 1, &q1s[..500], fmt, no_index),
            write(dir, 1, &q1s[500..], fmt, no_index),
        ];
        let mut all: Vec<u64> = q0.iter().chain(&q1s).copied().collect();
        all.sort();
        (files, all)
    }

    #[test]
    fn missed_only_when_nothing_found_outside_the_span() {
        let store = StoreSpan {
            first_ns: 1_000,
            last_ns: 2_000,
        };
        let span = Some(store);
        let before = Window {
            from_ns: Some(0),
            to_ns: Some(500),
        };
        let inside = Window {
            from_ns: Some(1_500),
            to_ns: None,
        };
        assert_eq!(StoreSpan::missed(span, 0, &before), span);
        assert_eq!(StoreSpan::missed(span, 3, &before), None);
        assert_eq!(StoreSpan::missed(span, 0, &inside), None);
        assert_eq!(StoreSpan::missed(None, 0, &before), None);
        let line = store.missed_line(&before);
        assert!(line.ends_with("misses the store, which holds 1970-01-01T00:00:00.000001000Z to 1970-01-01T00:00:00.000002000Z: nothing was read"), "{line}");
    }

    #[test]
    fn merge_equals_the_reference_for_every_window_and_format() {
        for fmt in [Format::PcapNs, Format::PcapUs, Format::PcapNg] {
            for no_index in [false, true] {
                let d = Dir::new(&format!("all-{fmt:?}-{no_index}"));
                let (_, stamps) = store(&d.0, fmt, no_index);
                let preds: [Pred; 2] = [&|_| true, &|d| d[7] % 3 == 0];
                for w in windows(&stamps) {
                    for pred in preds {
                        let (got, st, notes, files) = run(&d.inputs(), w, pred);
                        let want = reference(&all_records(&files), w, pred);
                        assert_eq!(got.len(), want.len(), "{fmt:?} {no_index} {w:?}");
                        assert!(got == want, "{fmt:?} {no_index} {w:?}");
                        assert_eq!(st.frames, got.len() as u64);
                        assert_eq!(st.out_of_order, 0);
                        assert!(notes.iter().all(|n| n.kind == NoteKind::NoIndex));
                        if no_index {
                            assert_eq!(st.files_without_index, st.files - st.files_skipped);
                        } else {
                            assert_eq!(st.files_without_index, 0, "{notes:?}");
                            assert_eq!(
                                st.blocks_read + st.blocks_skipped,
                                files
                                    .iter()
                                    .map(|f| index::read(&index::path_for(f)).unwrap().len() as u64)
                                    .sum::<u64>()
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_index_and_the_names_skip_what_is_outside_the_window() {
        let d = Dir::new("skip");
        let (files, stamps) = store(&d.0, Format::PcapNs, false);
        let total: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        let mid = stamps[stamps.len() / 2];
        let w = Window {
            from_ns: Some(mid),
            to_ns: Some(mid + 200_000),
        };
        let (got, st, _, _) = run(&d.inputs(), w, &|_| true);
        assert!(!got.is_empty());
        // Narrow: a few blocks of the files that overlap it.
        assert!(st.blocks_read <= 8, "{st:?}");
        assert!(st.blocks_skipped > 50, "{st:?}");
        assert!(st.bytes_read < total / 3, "{st:?} of {total}");
        // After the first files of each queue: those are not opened.
        let late = Window {
            from_ns: Some(stamps[stamps.len() - 10]),
            to_ns: None,
        };
        let (got, st, _, _) = run(&d.inputs(), late, &|_| true);
        assert_eq!(got.len(), 10);
        assert_eq!(st.files_skipped, 2, "{st:?}");
        // Before the second files: those are not opened.
        let early = Window {
            from_ns: None,
            to_ns: Some(stamps[5]),
        };
        let (got, st, _, _) = run(&d.inputs(), early, &|_| true);
        assert_eq!(got.len(), 5);
        assert_eq!(st.files_skipped, 2, "{st:?}");
        // The plan says why.
        let p = plan(&d.inputs(), late, None, &ReadOptions::default()).unwrap();
        let skips: Vec<_> = p.files.iter().map(|f| f.skip).collect();
        assert_eq!(
            skips,
            [Some(Skip::EndsBefore), Some(Skip::EndsBefore), None, None],
            "files by start: the first of q0 and q1, then the second ones"
        );
        // A block check that refuses everything: with every index current,
        // nothing is read.
        let refuse_all = |asked: &mut u64| {
            plan_with(
                &d.inputs(),
                Window::default(),
                None,
                &ReadOptions::default(),
                &mut |_, _| {
                    *asked += 1;
                    false
                },
            )
            .unwrap()
        };
        let mut asked = 0;
        let p = refuse_all(&mut asked);
        assert!(asked > 50);
        assert!(
            p.files.iter().all(|f| f.skip == Some(Skip::NoBlock)),
            "{:?}",
            p.files.iter().map(|f| f.skip).collect::<Vec<_>>()
        );
        // An index older than its capture (a crash between a block and its
        // entry) may lag it: the last file of each series is read from its
        // last entry on; nothing of the first files is.
        for f in &p.files[2..] {
            let m = std::fs::metadata(&f.path).unwrap().modified().unwrap();
            File::options()
                .write(true)
                .open(index::path_for(&f.path))
                .unwrap()
                .set_modified(m - std::time::Duration::from_secs(5))
                .unwrap();
        }
        let p = refuse_all(&mut asked);
        assert_eq!(p.files[0].skip, Some(Skip::NoBlock));
        assert_eq!(p.files[1].skip, Some(Skip::NoBlock));
        for f in &p.files[2..] {
            let n = f.entries.len();
            assert_eq!(
                f.spans,
                [Span {
                    start: f.entries[n - 1].offset,
                    end: None,
                    blocks: n - 1..n
                }],
                "the last block and what follows"
            );
        }
    }

    #[test]
    fn only_our_names_in_a_directory_any_name_given_explicitly() {
        let d = Dir::new("names");
        let (files, _) = store(&d.0, Format::PcapNs, false);
        let other = d.0.join("trace.pcap");
        std::fs::copy(&files[0], &other).unwrap();
        std::fs::write(d.0.join("notes.txt"), "x").unwrap();
        let p = plan_all(&d);
        assert_eq!(p.files.len(), 4);
        let p = plan(
            &[d.0.clone(), other.clone(), files[0].clone()],
            Window::default(),
            None,
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(p.files.len(), 5, "the file of the directory once");
        assert_eq!(p.files[4].path, other);
        assert_eq!(p.files[4].index, IndexUse::Missing);
        assert!(!p.files[4].ordered);
        assert!(plan(
            &[d.0.join("nope")],
            Window::default(),
            None,
            &ReadOptions::default()
        )
        .is_err());
        let p = plan(
            &d.inputs(),
            Window::default(),
            Some("other"),
            &ReadOptions::default(),
        )
        .unwrap();
        assert!(p.files.is_empty());
    }

    #[test]
    fn a_foreign_file_out_of_order_is_read_whole_and_counted() {
        let d = Dir::new("ooo");
        let p = d.0.join("trace.pcap");
        let mut w = PcapWriter::new(FileSink::with_block_size(&p, 4096).unwrap(), 65535);
        let stamps: Vec<u64> = (0..300u64).map(|i| T0 + (i * 7919 % 300) * 1000).collect();
        for (i, &t) in stamps.iter().enumerate() {
            w.write(t, &frame(0, i as u64)).unwrap();
        }
        w.close().unwrap();
        let win = Window {
            from_ns: Some(T0 + 100_000),
            to_ns: Some(T0 + 200_000),
        };
        let (got, st, notes, _) = run(std::slice::from_ref(&p), win, &|_| true);
        assert_eq!(got.len(), 100, "every frame in the window, wherever it is");
        assert!(st.out_of_order > 0);
        assert!(notes.iter().any(|n| n.kind == NoteKind::OutOfOrder));
        assert!(notes.iter().any(|n| n.kind == NoteKind::NoIndex));
    }

    /// Bytes of the record that starts at the `k`-th record of a file.
    fn offsets(p: &Path) -> Vec<u64> {
        let mut w = Walker::new(std::io::BufReader::new(File::open(p).unwrap()));
        std::iter::from_fn(|| w.next().map(|m| m.offset)).collect()
    }

    #[test]
    fn damage_is_noted_and_what_is_valid_extracted() {
        for fmt in [Format::PcapNs, Format::PcapNg] {
            for no_index in [false, true] {
                let d = Dir::new(&format!("dmg-{fmt:?}-{no_index}"));
                let (files, _) = store(&d.0, fmt, no_index);
                // A corrupt record in the middle of q0's first file, a torn
                // tail on q1's last.
                let offs = offsets(&files[0]);
                let bad_at = offs[300];
                let mut b = std::fs::read(&files[0]).unwrap();
                let l = if fmt == Format::PcapNg { 4 } else { 8 };
                b[bad_at as usize + l..bad_at as usize + l + 4].copy_from_slice(&[0xff; 4]);
                std::fs::write(&files[0], &b).unwrap();
                let len = std::fs::metadata(&files[3]).unwrap().len();
                let torn_at = *offsets(&files[3]).last().unwrap();
                File::options()
                    .write(true)
                    .open(&files[3])
                    .unwrap()
                    .set_len(len - 3)
                    .unwrap();
                let (got, st, notes, fs) = run(&d.inputs(), Window::default(), &|_| true);
                let dmg: Vec<_> = notes
                    .iter()
                    .filter(|n| n.kind == NoteKind::Damage)
                    .collect();
                assert_eq!(dmg.len(), 2, "{notes:#?}");
                assert_eq!(st.damaged_files, 2);
                assert_eq!(
                    (dmg[0].path.clone(), dmg[0].offset),
                    (files[0].clone(), Some(bad_at))
                );
                assert!(
                    dmg[0].message.contains(&format!("byte {bad_at}")),
                    "{}",
                    dmg[0].message
                );
                assert_eq!(
                    (dmg[1].path.clone(), dmg[1].offset),
                    (files[3].clone(), Some(torn_at))
                );
                assert!(dmg[1].message.contains("torn"), "{}", dmg[1].message);
                // The reference: the valid records; with an index, those of the
                // blocks after the damage too.
                let mut recs = all_records(&fs);
                if !no_index {
                    let idx = index::read(&index::path_for(&files[0])).unwrap();
                    let resume = idx.iter().find(|e| e.offset > bad_at).unwrap().offset;
                    assert!(dmg[0]
                        .message
                        .contains(&format!("resumed at byte {resume}")));
                    let mut w =
                        Walker::new(std::io::BufReader::new(File::open(&files[0]).unwrap()));
                    w.seek_to(resume);
                    let mut dd = Vec::new();
                    while let Some(m) = w.next_into(&mut dd) {
                        recs.push((m.ts_ns, 0, dd.clone(), m.orig_len));
                    }
                    assert!(recs.len() > 2600);
                }
                let want = reference(&recs, Window::default(), &|_| true);
                assert!(
                    got == want,
                    "{fmt:?} {no_index}: {} vs {}",
                    got.len(),
                    want.len()
                );
            }
        }
    }

    /// One run per frame of `f` that `wanted` keeps: from the frame to the
    /// record after it, in the index block that holds it.
    fn runs_of(f: &FilePlan, wanted: &dyn Fn(&[u8]) -> bool) -> Vec<Span> {
        let offs = offsets(&f.path);
        let mut w = Walker::new(std::io::BufReader::new(File::open(&f.path).unwrap()));
        let mut data = Vec::new();
        let mut spans = Vec::new();
        let mut k = 0;
        while let Some(m) = w.next_into(&mut data) {
            k += 1;
            if !wanted(&data) {
                continue;
            }
            let end = offs
                .get(k)
                .copied()
                .unwrap_or(m.offset + 16 + data.len() as u64);
            let j = f
                .entries
                .iter()
                .rposition(|e| e.offset <= m.offset)
                .unwrap();
            spans.push(Span {
                start: m.offset,
                end: Some(end),
                blocks: j..j + 1,
            });
        }
        spans
    }

    /// A plan of one run per wanted frame (hundreds per file, as the key
    /// index plans a rare protocol): the runs are read ahead, and the merge
    /// gives exactly a full scan's frames; stopped after a few frames, it
    /// counts the bytes it read (reads ahead included) and leaves none.
    #[test]
    fn a_plan_of_many_runs_read_ahead_equals_a_full_scan() {
        let d = Dir::new("many-runs");
        store(&d.0, Format::PcapNs, false);
        let wanted = |data: &[u8]| u64::from_be_bytes(data[..8].try_into().unwrap()) % 3 == 0;
        let mut p = plan_all(&d);
        let files: Vec<PathBuf> = p.files.iter().map(|f| f.path.clone()).collect();
        let want = reference(&all_records(&files), Window::default(), &wanted);
        let mut size = 0;
        for f in &mut p.files {
            size += std::fs::metadata(&f.path).unwrap().len();
            f.spans = runs_of(f, &wanted);
            assert!(f.spans.len() > 100, "{} runs", f.spans.len());
        }
        let run_many = |p: Plan, stop_after: Option<usize>| {
            let mut m = Merge::new(p, 1, |d: &[u8], _, _| wanted(d));
            let mut out = Vec::new();
            while let Some(f) = m.next() {
                out.push((f.ts_ns, f.file, f.data.to_vec(), f.orig_len));
                if stop_after.is_some_and(|n| out.len() == n) {
                    break;
                }
            }
            (out, m.finish())
        };
        let (got, st) = run_many(p.clone(), None);
        assert_eq!(got.len(), want.len());
        assert!(
            got == want,
            "the merge of many runs differs from the full scan"
        );
        assert!(
            st.bytes_read < size,
            "{} of {size} bytes read",
            st.bytes_read
        );
        let (got, early) = run_many(p, Some(10));
        assert!(got[..] == want[..10]);
        assert!(early.bytes_read > 0 && early.bytes_read <= st.bytes_read * 2);
    }

    /// A file listed and deleted before the plan looks at it (retention,
    /// while a recorder writes: the soak's local extract once failed with
    /// "cannot read FILE: No such file or directory") is left out, as if
    /// listed a moment later; a file the caller names that is not there is
    /// still an error. The listing here is a server's of a Stenographer
    /// packets directory, whose files' states are kept at the directory's
    /// mtime (put back after the delete): it names the file gone, as a
    /// listing taken just before a delete does.
    #[test]
    fn a_file_deleted_after_the_listing_is_left_out() {
        let d = Dir::new("gone");
        let pk = d.0.join("thread0/packets");
        std::fs::create_dir_all(&pk).unwrap();
        let files: Vec<PathBuf> = (0..3u64)
            .map(|i| {
                let us = 1_795_813_946_000_000 + i * 60_000_000;
                let frame = [i as u8; 100];
                let block =
                    wiretape_files::steno::encode_block(&[(us * 1000 + 5, &frame[..])], 4096, 1);
                let f = pk.join(us.to_string());
                std::fs::write(&f, block).unwrap();
                f
            })
            .collect();
        // Settled (a listing is kept once its directory is 2 s old).
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let age = || File::open(&pk).unwrap().set_modified(past).unwrap();
        age();
        let opts = ReadOptions::default().with_kept_listings();
        let p = plan(&d.inputs(), Window::default(), None, &opts).unwrap();
        assert_eq!(p.files.len(), 3);
        std::fs::remove_file(&files[0]).unwrap();
        age();
        let p = plan(&d.inputs(), Window::default(), None, &opts).unwrap();
        let left: Vec<&PathBuf> = p.files.iter().map(|f| &f.path).collect();
        assert_eq!(left, files[1..].iter().collect::<Vec<_>>());
        let e = plan(&files[..1], Window::default(), None, &opts).unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
    }

    /// A selective plan over several files: every file's runs are asked
    /// of the read pool at the merge's start (not each when the merge
    /// reaches its file), and the merge gives the very frames of a full
    /// scan; a plan that reads a file to its end, or more than
    /// [`EARLY_RUNS`] runs or [`EARLY_BYTES`] in all, asks nothing ahead.
    #[test]
    fn a_selective_plan_asks_every_file_s_runs_at_the_start() {
        let d = Dir::new("early");
        store(&d.0, Format::PcapNs, false);
        let wanted = |data: &[u8]| u64::from_be_bytes(data[..8].try_into().unwrap()) % 97 == 5;
        let mut p = plan_all(&d);
        let files: Vec<PathBuf> = p.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(files.len(), 4);
        let want = reference(&all_records(&files), Window::default(), &wanted);
        for f in &mut p.files {
            f.spans = runs_of(f, &wanted);
            assert!(!f.spans.is_empty());
        }
        let open_all = |p: &Plan| -> HashMap<PathBuf, Opened> {
            p.files
                .iter()
                .map(|f| (f.path.clone(), open_for_merge(&f.path, &p.read).unwrap()))
                .collect()
        };
        let asked = |o: &HashMap<PathBuf, Opened>| {
            o.values()
                .filter(|(w, _)| w.get_ref().prefetching())
                .count()
        };
        // Selective: all four asked for at once; the frames of a full scan.
        let mut opened = open_all(&p);
        assert_eq!(asked(&opened), 0);
        read_early(&p.files, &mut opened, &ReadPool::new());
        assert_eq!(asked(&opened), 4, "every file's runs asked for");
        let mut m = Merge::new(p.clone(), 1, |d: &[u8], _, _| wanted(d)).with_opened(open_all(&p));
        let mut got = Vec::new();
        while let Some(f) = m.next() {
            got.push((f.ts_ns, f.file, f.data.to_vec(), f.orig_len));
        }
        assert_eq!(got.len(), want.len());
        assert!(
            got == want,
            "the merge read early differs from the full scan"
        );
        // A file read to its end: nothing asked ahead.
        let mut whole = p.clone();
        whole.files[2].spans.last_mut().unwrap().end = None;
        let mut opened = open_all(&whole);
        read_early(&whole.files, &mut opened, &ReadPool::new());
        assert_eq!(asked(&opened), 0);
        // More than EARLY_RUNS runs in all: nothing asked ahead.
        let runs: usize = p.files.iter().map(|f| f.spans.len()).sum();
        assert!(runs <= EARLY_RUNS, "{runs} runs");
        let mut many = p.clone();
        let extra = many.files[1].spans[0].clone();
        many.files[1]
            .spans
            .extend(std::iter::repeat_n(extra, EARLY_RUNS + 1 - runs));
        let mut opened = open_all(&many);
        read_early(&many.files, &mut opened, &ReadPool::new());
        assert_eq!(asked(&opened), 0);
        // Runs of more than EARLY_BYTES in all: nothing asked ahead.
        let mut big = p.clone();
        big.files[3].spans[0].end = Some(big.files[3].spans[0].start + EARLY_BYTES + 1);
        let mut opened = open_all(&big);
        read_early(&big.files, &mut opened, &ReadPool::new());
        assert_eq!(asked(&opened), 0);
    }

    /// A run ends at the record that follows it: the walk stops there
    /// without reading it, so a run of one frame costs the pages of that
    /// frame and nothing past them (the old walk read the record after each
    /// run, a page or a read more per run for frames of 3,000 B).
    #[test]
    fn runs_read_their_own_pages_not_the_record_after_them() {
        let d = Dir::new("run-ends");
        let p = d.0.join("trace.pcap");
        let mut w = PcapWriter::new(FileSink::with_block_size(&p, 4096).unwrap(), 65535);
        for i in 0..2000u64 {
            let mut f = vec![(i % 251) as u8; 3000];
            f[..8].copy_from_slice(&i.to_be_bytes());
            w.write(T0 + i * 1000, &f).unwrap();
        }
        w.close().unwrap();
        let offs = offsets(&p);
        let size = std::fs::metadata(&p).unwrap().len();
        let mut plan = plan(
            std::slice::from_ref(&p),
            Window::default(),
            None,
            &ReadOptions::default(),
        )
        .unwrap();
        let page = 4096u64;
        // Every 37th frame, each a run up to the next record: the bytes a
        // run can cost at most, with O_DIRECT (from its page's start, counted
        // from the run's start, to its end's page end) or without (its length
        // in whole pages); plus the file's head read.
        let mut bound = page;
        let spans: Vec<Span> = (5..offs.len() - 1)
            .step_by(37)
            .map(|k| {
                let (s, e) = (offs[k], offs[k + 1]);
                bound += (e.div_ceil(page) * page - s).max((e - s).div_ceil(page) * page);
                Span {
                    start: s,
                    end: Some(e),
                    blocks: 0..0,
                }
            })
            .collect();
        let n = spans.len();
        plan.files[0].spans = spans;
        let mut m = Merge::new(plan, 1, |_: &[u8], _, _| true);
        let mut got = Vec::new();
        while let Some(f) = m.next() {
            got.push(u64::from_be_bytes(f.data[..8].try_into().unwrap()));
        }
        let st = m.finish();
        let want: Vec<u64> = (5..offs.len() as u64 - 1).step_by(37).collect();
        assert_eq!(got, want, "the runs' frames");
        assert_eq!(st.records_read, n as u64, "a record past a run was read");
        assert!(
            st.bytes_read <= bound,
            "{} bytes read for {n} runs of one 3,000 B frame: more than their pages ({bound}) of {size}",
            st.bytes_read
        );
    }

    #[test]
    fn a_window_past_the_store_reads_nothing_and_knows_its_span() {
        let d = Dir::new("span");
        let (files, stamps) = store(&d.0, Format::PcapNs, false);
        let first = *stamps.iter().min().unwrap();
        let last = *stamps.iter().max().unwrap();
        let p = plan_all(&d);
        assert_eq!(
            p.span(),
            Some(StoreSpan {
                first_ns: first,
                last_ns: last
            })
        );
        for w in [
            Window {
                from_ns: Some(last + 1),
                to_ns: None,
            },
            Window {
                from_ns: None,
                to_ns: Some(first),
            },
        ] {
            let (got, st, _, _) = run(&d.inputs(), w, &|_| true);
            assert!(got.is_empty());
            assert_eq!(
                (
                    st.files_read,
                    st.blocks_read,
                    st.bytes_read,
                    st.records_read
                ),
                (0, 0, 0, 0),
                "{w:?}: {st:?}"
            );
            assert!(st.store_span.unwrap().misses(&w));
        }
        // The last frame itself is in a window that starts at it.
        let at_last = Window {
            from_ns: Some(last),
            to_ns: None,
        };
        let (got, _, _, _) = run(&d.inputs(), at_last, &|_| true);
        assert_eq!(got.len(), 1);
        assert!(!plan(&d.inputs(), at_last, None, &ReadOptions::default())
            .unwrap()
            .span()
            .unwrap()
            .misses(&at_last));
        assert_eq!(files.len(), 4);
    }

    #[test]
    fn a_file_being_written_ends_quietly_and_past_its_index() {
        let d = Dir::new("live");
        let stamps: Vec<u64> = (0..2000u64).map(|i| T0 + i * 1000).collect();
        let p = write(&d.0, 0, &stamps, Format::PcapNs, false);
        // The index lags: only its first entries were written.
        let ip = index::path_for(&p);
        let idx = std::fs::read(&ip).unwrap();
        std::fs::write(&ip, &idx[..index::HEADER_LEN + 3 * index::ENTRY_LEN]).unwrap();
        // A write in flight: half a record at the end.
        let mut b = std::fs::read(&p).unwrap();
        b.extend_from_within(24..40);
        b.extend_from_slice(&[7; 5]);
        std::fs::write(&p, &b).unwrap();
        // The index older than the capture (as after a crash).
        let m = std::fs::metadata(&p).unwrap().modified().unwrap();
        File::options()
            .write(true)
            .open(&ip)
            .unwrap()
            .set_modified(m - std::time::Duration::from_secs(5))
            .unwrap();
        let late = Window {
            from_ns: Some(stamps[1900]),
            to_ns: None,
        };
        // The writer holds it.
        let holder = File::open(&p).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: flock on our own open descriptor.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::flock(holder.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(rc, 0);
        assert!(wiretape_files::is_being_written(&File::open(&p).unwrap()));
        let (got, st, notes, _) = run(std::slice::from_ref(&p), late, &|_| true);
        assert_eq!(got.len(), 100, "past the last index entry to the end");
        assert_eq!(got[0].0, stamps[1900]);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(st.files_live, 1);
        drop(holder);
        // Finished (nobody holds it): the torn tail is damage.
        let (got, _, notes, _) = run(std::slice::from_ref(&p), late, &|_| true);
        assert_eq!(got.len(), 100);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].kind, NoteKind::Damage);
        // Our writer holds its files while it writes them.
        let q = d.0.join("wt-x-q0-20251122T101010.000000000Z.pcap");
        let sink = FileSink::with_block_size(&q, 4096).unwrap();
        assert!(wiretape_files::is_being_written(&File::open(&q).unwrap()));
        let w = PcapWriter::new(sink, 100);
        w.close().unwrap();
        assert!(!wiretape_files::is_being_written(&File::open(&q).unwrap()));
    }

    #[test]
    fn another_link_type_is_an_error_not_a_silent_skip() {
        let d = Dir::new("link");
        let (files, _) = store(&d.0, Format::PcapNs, true);
        let mut b = std::fs::read(&files[0]).unwrap();
        b[20] = 105;
        std::fs::write(&files[0], &b).unwrap();
        let (got, st, notes, _) = run(&d.inputs(), Window::default(), &|_| true);
        assert_eq!(got.len(), 2700 - 700);
        assert_eq!(st.error_files, 1);
        assert!(notes
            .iter()
            .any(|n| n.kind == NoteKind::Error && n.message.contains("link type 105")));
    }
}
