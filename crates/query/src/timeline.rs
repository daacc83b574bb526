//! `wiretape timeline` and `/v1/timeline`: frames and bytes per time bin
//! over a window of a store, from the `.idx` sidecars (no capture data is
//! read but the records of the blocks that the window's edges cut, so that
//! the totals are the window's frames exactly).
//!
//! - Bins are round widths (1-2-5 steps of ns up to 500 ms, then 1 s, 2 s,
//!   5 s, 10 s, 15 s, 30 s, 1 min ... 1 day, 7 days) aligned on the epoch,
//!   the finest that gives at most one bin per [`PX_PER_BIN`] pixels of the
//!   picture's width: a wider picture or a narrower window gives finer bins.
//! - A block (one `.idx` entry: first and last stamp, frames, and its bytes
//!   from the next entry's offset) lying in one bin counts there whole; a
//!   block crossing bin edges is apportioned over the bins it spans, in
//!   proportion to time (its frames taken as evenly spread from its first
//!   stamp to its last), in whole frames and bytes whose sum is the
//!   block's. A block that the window's edge cuts is read: its frames are
//!   binned by their own stamps, those outside the window left out.
//! - `bytes` are the bytes the records take in the file (record headers
//!   included: 16 per frame in pcap, the packet block in pcapng).
//! - With a filter ([`Request::filter_index`]), per bin the frames of the
//!   blocks that may hold a match: an upper bound of the matching frames,
//!   never below them. A file with a key index (`.kdx`) says exactly which
//!   blocks hold a frame with all the keys of one of the filter's
//!   alternatives (so `host X` counts only X's blocks, however busy the
//!   link); elsewhere the blocks whose flow sets may hold them (blocks of
//!   a version 1 index, with no flow sets, always may).
//! - Files without an `.idx` count nothing (they are listed); a file being
//!   written counts up to its last index entry.

use crate::extract::{StoreSpan, Window};
use crate::QueryError;
use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use wiretape_files::index::{self, Entry};
use wiretape_files::naming;
use wiretape_files::walk::Walker;
use wiretape_files::zread::{self, Source};
use wiretape_filter::flow::Needs;

/// Pixels of the picture's width per bin, at least.
pub const PX_PER_BIN: u32 = 4;
/// The most bins one timeline has.
pub const MAX_BINS: u64 = 100_000;

/// How the frames are split into series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum By {
    /// One series: everything.
    #[default]
    None,
    /// One series per interface (from the file names).
    Iface,
    /// One series per interface and RX queue (`eth0-q1`).
    Queue,
}

impl By {
    /// `none`, `iface` or `queue`.
    pub fn parse(s: &str) -> Option<By> {
        match s {
            "none" => Some(By::None),
            "iface" => Some(By::Iface),
            "queue" => Some(By::Queue),
            _ => None,
        }
    }

    /// The word [`By::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            By::None => "none",
            By::Iface => "iface",
            By::Queue => "queue",
        }
    }
}

/// What to draw.
#[derive(Clone, Debug)]
pub struct Request {
    /// Directories and capture files.
    pub inputs: Vec<PathBuf>,
    /// In directories, only files of this prefix (default: any of ours).
    pub prefix: Option<String>,
    /// The window (open ends: the store's first frame, its last).
    pub window: Window,
    /// The series.
    pub by: By,
    /// A filter expression: per bin, the frames of the blocks whose flow
    /// sets may hold a match.
    pub filter_index: Option<String>,
    /// With `filter_index`: use the files' key indexes where they have
    /// them (default true; else the `.idx` flow sets alone).
    pub key_index: bool,
    /// The picture's width in pixels (it chooses the bin width).
    pub width: u32,
    /// The bin width, given (for a timeline that must line up with
    /// another's: the sensors of one picture); else chosen from the window
    /// and the width.
    pub bin_ns: Option<u64>,
    /// How the inputs are read: the identities of encrypted files (a
    /// filtered timeline reads blocks), where the indexes of Stenographer's
    /// files are.
    pub read: wiretape_files::ReadOptions,
}

impl Request {
    /// The whole of `inputs`, one series, 1000 pixels wide.
    pub fn new(inputs: Vec<PathBuf>) -> Self {
        Request {
            inputs,
            prefix: None,
            window: Window::default(),
            by: By::None,
            filter_index: None,
            key_index: true,
            width: 1000,
            bin_ns: None,
            read: wiretape_files::ReadOptions::default(),
        }
    }
}

/// Frames and bytes (and the filter's bound) of one bin of one series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames.
    pub frames: u64,
    /// Bytes of their records.
    pub bytes: u64,
    /// Frames of blocks that may hold a match of the filter.
    pub may_match: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.frames += o.frames;
        self.bytes += o.bytes;
        self.may_match += o.may_match;
    }
}

/// A timeline: the window, the bins, the series.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// The window's start (inclusive), UTC ns.
    pub from_ns: u64,
    /// The window's end (exclusive), UTC ns.
    pub to_ns: u64,
    /// The bin width.
    pub bin_ns: u64,
    /// The first bin's start (a multiple of `bin_ns`, at or before `from_ns`).
    pub start_ns: u64,
    /// Bins: from `start_ns` on, `bin_ns` each, until `to_ns` is covered.
    pub bins: usize,
    /// The series' names (one, "all", without [`By`]).
    pub series: Vec<String>,
    /// Per series, per bin.
    pub counts: Vec<Vec<Counts>>,
    /// The series.
    pub by: By,
    /// The filter of the bound, normalized.
    pub filter: Option<String>,
    /// Capture files looked at.
    pub files: u64,
    /// Files without a readable `.idx` (not counted).
    pub files_without_index: Vec<PathBuf>,
    /// Index blocks in the window.
    pub blocks: u64,
    /// Blocks the window's edges cut, read to bin their frames exactly.
    pub blocks_read: u64,
    /// The first and last stamps of the store, from its indexes (what an
    /// empty window is told against).
    pub store_span: Option<StoreSpan>,
}

impl Timeline {
    /// Bins.
    pub fn len(&self) -> usize {
        self.bins
    }

    /// No bins (an empty store).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bin `i` summed over the series.
    pub fn bin(&self, i: usize) -> Counts {
        let mut c = Counts::default();
        for s in &self.counts {
            if let Some(x) = s.get(i) {
                c += *x;
            }
        }
        c
    }

    /// The window's totals.
    pub fn totals(&self) -> Counts {
        let mut c = Counts::default();
        for i in 0..self.len() {
            c += self.bin(i);
        }
        c
    }

    /// The start of bin `i`.
    pub fn bin_start(&self, i: usize) -> u64 {
        self.start_ns + i as u64 * self.bin_ns
    }

    /// Adds `o` (the same bins: window and bin width; e.g. another
    /// sensor's) to this one, series by name.
    pub fn merge(&mut self, o: &Timeline) -> Result<(), String> {
        if (o.start_ns, o.bin_ns, o.len()) != (self.start_ns, self.bin_ns, self.len()) {
            return Err(format!(
                "bins differ: {} of {} ns from {} here, {} of {} ns from {} there",
                self.len(),
                self.bin_ns,
                self.start_ns,
                o.len(),
                o.bin_ns,
                o.start_ns
            ));
        }
        for (name, c) in o.series.iter().zip(&o.counts) {
            let k = match self.series.iter().position(|s| s == name) {
                Some(k) => k,
                None => {
                    self.series.push(name.clone());
                    self.counts.push(vec![Counts::default(); self.len()]);
                    self.series.len() - 1
                }
            };
            for (a, b) in self.counts[k].iter_mut().zip(c) {
                *a += *b;
            }
        }
        // Series in name order, as [`build`] gives them.
        let mut pairs: Vec<(String, Vec<Counts>)> = std::mem::take(&mut self.series)
            .into_iter()
            .zip(std::mem::take(&mut self.counts))
            .collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        (self.series, self.counts) = pairs.into_iter().unzip();
        self.files += o.files;
        self.files_without_index
            .extend(o.files_without_index.iter().cloned());
        self.blocks += o.blocks;
        self.blocks_read += o.blocks_read;
        self.store_span = StoreSpan::union(self.store_span, o.store_span);
        Ok(())
    }

    /// The JSON of `timeline --json` and `/v1/timeline`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let fmt = wiretape_timestamp::format_rfc3339;
        let filter = self.filter.is_some();
        let counts = |c: Counts| {
            let mut v = json!({"frames": c.frames, "bytes": c.bytes});
            if filter {
                v["filter_frames_max"] = json!(c.may_match);
            }
            v
        };
        let by = self.by != By::None;
        let bins: Vec<serde_json::Value> = (0..self.len())
            .map(|i| {
                let s = self.bin_start(i);
                let mut v = counts(self.bin(i));
                v["start_ns"] = json!(s);
                v["end_ns"] = json!(s + self.bin_ns);
                if by {
                    let per: serde_json::Map<String, serde_json::Value> = self
                        .series
                        .iter()
                        .zip(&self.counts)
                        .map(|(n, c)| (n.clone(), counts(c[i])))
                        .collect();
                    v["series"] = per.into();
                }
                v
            })
            .collect();
        let mut totals = counts(self.totals());
        if by {
            let per: serde_json::Map<String, serde_json::Value> = self
                .series
                .iter()
                .zip(&self.counts)
                .map(|(n, c)| {
                    let mut t = Counts::default();
                    c.iter().for_each(|x| t += *x);
                    (n.clone(), counts(t))
                })
                .collect();
            totals["series"] = per.into();
        }
        json!({
            "from_ns": self.from_ns,
            "to_ns": self.to_ns,
            "from_time": fmt(self.from_ns),
            "to_time": fmt(self.to_ns),
            "bin_ns": self.bin_ns,
            "by": self.by.name(),
            "series": self.series,
            "filter": self.filter,
            "bins": bins,
            "totals": totals,
            "files": self.files,
            "files_without_index": self.files_without_index.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "blocks": self.blocks,
            "blocks_read": self.blocks_read,
            "store_span": self.store_span.map(|s| s.to_json()),
            "window_misses_store": self.store_span.is_some_and(|s| s.misses(&Window {
                from_ns: Some(self.from_ns),
                to_ns: Some(self.to_ns),
            })),
        })
    }

    /// Reads the JSON [`Timeline::to_json`] writes (a sensor's answer).
    pub fn from_json(v: &serde_json::Value) -> Result<Timeline, String> {
        let u = |v: &serde_json::Value, k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| format!("no `{k}` in the timeline"))
        };
        let by = v
            .get("by")
            .and_then(|b| b.as_str())
            .and_then(By::parse)
            .ok_or("no `by` in the timeline")?;
        let bins = v
            .get("bins")
            .and_then(|b| b.as_array())
            .ok_or("no `bins` in the timeline")?;
        let series: Vec<String> = v
            .get("series")
            .and_then(|s| s.as_array())
            .ok_or("no `series` in the timeline")?
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect();
        let count = |c: &serde_json::Value| -> Result<Counts, String> {
            Ok(Counts {
                frames: u(c, "frames")?,
                bytes: u(c, "bytes")?,
                may_match: c
                    .get("filter_frames_max")
                    .and_then(|x| x.as_u64())
                    .unwrap_or(0),
            })
        };
        let mut counts = vec![Vec::with_capacity(bins.len()); series.len()];
        for b in bins {
            if by == By::None {
                if let Some(s) = counts.first_mut() {
                    s.push(count(b)?);
                }
            } else {
                let per = b.get("series").ok_or("a bin without `series`")?;
                for (k, n) in series.iter().enumerate() {
                    counts[k].push(per.get(n).map(count).transpose()?.unwrap_or_default());
                }
            }
        }
        let start_ns = bins.first().map(|b| u(b, "start_ns")).transpose()?;
        let from_ns = u(v, "from_ns")?;
        let without = v
            .get("files_without_index")
            .and_then(|f| f.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(PathBuf::from))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Timeline {
            from_ns,
            to_ns: u(v, "to_ns")?,
            bin_ns: u(v, "bin_ns")?,
            start_ns: start_ns.unwrap_or(from_ns),
            bins: bins.len(),
            series,
            counts,
            by,
            filter: v.get("filter").and_then(|f| f.as_str()).map(str::to_owned),
            files: u(v, "files").unwrap_or(0),
            files_without_index: without,
            blocks: u(v, "blocks").unwrap_or(0),
            blocks_read: u(v, "blocks_read").unwrap_or(0),
            store_span: v.get("store_span").and_then(StoreSpan::from_json),
        })
    }
}

const NS: u64 = 1;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const MIN: u64 = 60 * S;
const H: u64 = 60 * MIN;
const DAY: u64 = 24 * H;

/// The round widths bins (and the time axis' ticks) are made of.
pub const ROUND: &[u64] = &[
    NS,
    2 * NS,
    5 * NS,
    10 * NS,
    20 * NS,
    50 * NS,
    100 * NS,
    200 * NS,
    500 * NS,
    US,
    2 * US,
    5 * US,
    10 * US,
    20 * US,
    50 * US,
    100 * US,
    200 * US,
    500 * US,
    MS,
    2 * MS,
    5 * MS,
    10 * MS,
    20 * MS,
    50 * MS,
    100 * MS,
    200 * MS,
    500 * MS,
    S,
    2 * S,
    5 * S,
    10 * S,
    15 * S,
    30 * S,
    MIN,
    2 * MIN,
    5 * MIN,
    10 * MIN,
    15 * MIN,
    30 * MIN,
    H,
    2 * H,
    3 * H,
    6 * H,
    12 * H,
    DAY,
    2 * DAY,
    7 * DAY,
    14 * DAY,
    28 * DAY,
    91 * DAY,
    182 * DAY,
    364 * DAY,
];

/// The finest round width that cuts [from, to) into at most `max` bins
/// aligned on the epoch.
pub fn round_width(from: u64, to: u64, max: u64) -> u64 {
    let max = max.max(1);
    let bins = |w: u64| to.div_ceil(w) - from / w;
    ROUND
        .iter()
        .copied()
        .find(|&w| bins(w) <= max)
        .unwrap_or_else(|| {
            // Longer than the list: whole 364-day steps.
            let y = 364 * DAY;
            (to - from).div_ceil(max).div_ceil(y) * y + y
        })
}

/// The bin width for a window of [from, to) drawn `width` pixels wide.
pub fn bin_width(from: u64, to: u64, width: u32) -> u64 {
    round_width(from, to, u64::from((width / PX_PER_BIN).max(1)))
}

/// The series of a capture file: its interface (or interface and queue)
/// from its name; a file not named like ours is a series of its own name.
fn series_of(path: &Path, by: By) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if by == By::None {
        return "all".into();
    }
    let Some(n) = naming::parse_any(&name) else {
        return name;
    };
    // series = <prefix>-<iface>-q<N>; parse_any cut the prefix at its first '-'.
    let head = n.series.rsplit_once('-').map_or(n.series, |(h, _)| h);
    let iface = head.split_once('-').map_or(head, |(_, i)| i);
    match by {
        By::Queue => format!("{iface}-q{}", n.queue),
        _ => iface.to_string(),
    }
}

/// Spreads `c` (the counts of frames evenly spread over [first, last]) over
/// the bins, whole frames and bytes summing to `c`'s.
fn apportion(bins: &mut [Counts], start: u64, w: u64, first: u64, last: u64, c: Counts) {
    let span = u128::from(last - first + 1);
    let cum = |t: u64, n: u64| -> u64 {
        let t = t.clamp(first, last + 1);
        (u128::from(n) * u128::from(t - first) / span) as u64
    };
    let b0 = ((first - start) / w) as usize;
    let b1 = (((last - start) / w) as usize).min(bins.len() - 1);
    for (k, bin) in bins.iter_mut().enumerate().take(b1 + 1).skip(b0) {
        let s = start + k as u64 * w;
        let e = s + w;
        *bin += Counts {
            frames: cum(e, c.frames) - cum(s, c.frames),
            bytes: cum(e, c.bytes) - cum(s, c.bytes),
            may_match: cum(e, c.may_match) - cum(s, c.may_match),
        };
    }
}

/// One file's entries, its length, whether it is being written, whether
/// it is compressed (its offsets are then in the plain stream, whose
/// length the file's is not).
struct Indexed {
    path: PathBuf,
    entries: Vec<Entry>,
    len: u64,
    live: bool,
    compressed: bool,
}

/// The timeline of a request over local stores. Err: a filter libpcap
/// refuses, an input that does not exist, a bin width that makes more
/// than [`MAX_BINS`] bins.
pub fn build(req: &Request) -> Result<Timeline, QueryError> {
    let filter = req
        .filter_index
        .as_deref()
        .and_then(crate::job::normalize_filter);
    let needs = match &filter {
        Some(e) => {
            let p = wiretape_filter::compile(
                e,
                wiretape_filter::LINKTYPE_ETHERNET,
                wiretape_files::pcap::MAX_SNAPLEN,
            )?;
            Some(Needs::of(p.insns()))
        }
        None => None,
    };
    let files = crate::fleet::captures(&req.inputs, req.prefix.as_deref())?;
    let mut tl = Timeline {
        by: req.by,
        filter: filter.clone(),
        files: files.len() as u64,
        ..Timeline::default()
    };
    let mut indexed = Vec::new();
    for f in files {
        match index::read(&req.read.index_path(&f)) {
            Ok(entries) if !entries.is_empty() => indexed.push(Indexed {
                len: std::fs::metadata(&f).map_or(0, |m| m.len()),
                live: crate::fleet::being_written(&f),
                compressed: entries.iter().any(|e| e.z.is_some()),
                path: f,
                entries,
            }),
            Ok(_) if crate::fleet::being_written(&f) => {}
            _ => tl.files_without_index.push(f),
        }
    }
    let first = indexed.iter().map(|f| f.entries[0].first_ns).min();
    let last = indexed
        .iter()
        .flat_map(|f| f.entries.iter().map(|e| e.last_ns))
        .max();
    if let (Some(first_ns), Some(last_ns)) = (first, last) {
        tl.store_span = Some(StoreSpan { first_ns, last_ns });
    }
    let from = req.window.from_ns.or(first).unwrap_or(0);
    let to = req
        .window
        .to_ns
        .or(last.map(|l| l + 1))
        .unwrap_or(from)
        .max(from);
    tl.from_ns = from;
    tl.to_ns = to;
    if to == from {
        tl.bin_ns = req.bin_ns.unwrap_or(S).max(1);
        tl.start_ns = from - from % tl.bin_ns;
        return Ok(tl);
    }
    let w = match req.bin_ns {
        Some(w) => w.max(1),
        None => bin_width(from, to, req.width),
    };
    let start = from - from % w;
    let nbins = to.div_ceil(w) - start / w;
    if nbins > MAX_BINS {
        return Err(QueryError::Timeline(format!(
            "{nbins} bins of {w} ns over the window: at most {MAX_BINS}; a wider bin or a narrower window"
        )));
    }
    tl.bin_ns = w;
    tl.start_ns = start;
    tl.bins = nbins as usize;
    let mut by_series: BTreeMap<String, Vec<Counts>> = BTreeMap::new();
    if req.by == By::None {
        by_series.insert("all".into(), vec![Counts::default(); nbins as usize]);
    }
    let window = Window {
        from_ns: Some(from),
        to_ns: Some(to),
    };
    for f in &indexed {
        let bins = by_series
            .entry(series_of(&f.path, req.by))
            .or_insert_with(|| vec![Counts::default(); nbins as usize]);
        let mut walker: Option<Walker<Source<BufReader<std::fs::File>>>> = None;
        // The key index, where the file has one, says exactly which blocks
        // hold the filter's keys.
        let keyed = match &needs {
            Some(Some(n)) if req.key_index => {
                crate::narrow::blocks_with(&f.path, &req.read, n, &window)
            }
            _ => None,
        };
        for (i, e) in f.entries.iter().enumerate() {
            if !window.overlaps(e.first_ns, e.last_ns) {
                continue;
            }
            tl.blocks += 1;
            let may = match (&needs, &keyed) {
                (Some(Some(_)), Some((covered, hit))) if (i as u64) < *covered => {
                    hit.contains(&(i as u64))
                }
                _ => needs
                    .as_ref()
                    .is_some_and(|n| n.as_ref().is_none_or(|n| e.may_match(n))),
            };
            let next = f.entries.get(i + 1).map(|n| n.offset);
            let cut = e.first_ns < from || e.last_ns >= to;
            if cut || (next.is_none() && (f.live || f.compressed)) {
                // The block is read: the window cuts it, or it is the last
                // of a file being written or compressed (where its records
                // end is not known from the index).
                tl.blocks_read += 1;
                let w = walker.get_or_insert_with(|| open_walker(&f.path, &req.read));
                w.seek_to(e.offset);
                for _ in 0..e.count {
                    let Some(m) = w.next() else { break };
                    if window.contains(m.ts_ns) {
                        let b = &mut bins[((m.ts_ns - start) / tl.bin_ns) as usize];
                        *b += Counts {
                            frames: 1,
                            bytes: m.file_len,
                            may_match: u64::from(may),
                        };
                    }
                }
                continue;
            }
            let end = next.unwrap_or(f.len).max(e.offset);
            let c = Counts {
                frames: e.count,
                bytes: end - e.offset,
                may_match: if may { e.count } else { 0 },
            };
            apportion(bins, start, tl.bin_ns, e.first_ns, e.last_ns, c);
        }
    }
    for (name, c) in by_series {
        tl.series.push(name);
        tl.counts.push(c);
    }
    Ok(tl)
}

/// The query string of `/v1/timeline` asking for `req`'s window (both
/// ends given), series and filter in bins of `bin_ns`.
pub fn query_string(req: &Request, bin_ns: u64) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    if let Some(f) = req.window.from_ns {
        q.append_pair("from", &crate::remote::time_param(f));
    }
    if let Some(t) = req.window.to_ns {
        q.append_pair("to", &crate::remote::time_param(t));
    }
    q.append_pair("bin_ns", &bin_ns.to_string());
    q.append_pair("by", req.by.name());
    if let Some(f) = &req.filter_index {
        q.append_pair("filter_index", f);
    }
    q.finish()
}

fn open_walker(
    path: &Path,
    opts: &wiretape_files::ReadOptions,
) -> Walker<Source<BufReader<std::fs::File>>> {
    // Gone since it was listed: a walker over nothing reads no frame.
    let src = zread::open_buffered(path, opts).unwrap_or_else(|_| {
        Source::Plain(BufReader::new(
            std::fs::File::open("/dev/null").expect("/dev/null opens"),
        ))
    });
    Walker::new(src)
}

/// The timeline over local stores (`req.inputs`, none: sensors only) and
/// sensors: the window resolved first where it is open (each sensor's
/// first and last frame from `/v1/status`), then the bin width, then
/// every sensor asked `/v1/timeline` for the same bins and the answers
/// added up. Err: a local error as [`build`]'s, a sensor that cannot be
/// asked or answers what does not fit ([`QueryError::Sensor`]).
pub fn build_fleet(
    req: &mut Request,
    client: &crate::remote::Client,
    remotes: &[crate::remote::Remote],
) -> Result<Timeline, QueryError> {
    let sensor = |url: &str, why: String| QueryError::Sensor {
        url: url.to_string(),
        why,
    };
    let local = !req.inputs.is_empty();
    if req.window.from_ns.is_none() || req.window.to_ns.is_none() {
        let mut first = None::<u64>;
        let mut last = None::<u64>;
        if local {
            let t = build(req)?;
            if t.to_ns > t.from_ns {
                first = Some(t.from_ns);
                last = Some(t.to_ns - 1);
            }
        }
        for r in remotes {
            let s = client
                .get_json(r, "/v1/status")
                .map_err(|e| sensor(&r.url, e.to_string()))?;
            if let Some(f) = s["first_ns"].as_u64() {
                first = Some(first.map_or(f, |x| x.min(f)));
            }
            if let Some(l) = s["last_ns"].as_u64() {
                last = Some(last.map_or(l, |x| x.max(l)));
            }
        }
        let from = req.window.from_ns.or(first).unwrap_or(0);
        let to = req
            .window
            .to_ns
            .or(last.map(|l| l + 1))
            .unwrap_or(from + 1)
            .max(from + 1);
        req.window = Window {
            from_ns: Some(from),
            to_ns: Some(to),
        };
    }
    let (from, to) = (
        req.window.from_ns.unwrap_or(0),
        req.window.to_ns.unwrap_or(1),
    );
    let bin = bin_width(from, to, req.width);
    req.bin_ns = Some(bin);
    let mut tl = build(req)?;
    if !local {
        tl.series.clear();
        tl.counts.clear();
    }
    let q = format!("/v1/timeline?{}", query_string(req, bin));
    for r in remotes {
        let v = client
            .get_json(r, &q)
            .map_err(|e| sensor(&r.url, e.to_string()))?;
        let other = Timeline::from_json(&v).map_err(|e| sensor(&r.url, e))?;
        tl.merge(&other).map_err(|e| sensor(&r.url, e))?;
    }
    Ok(tl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_widths_give_at_most_the_bins_asked() {
        for (from, to, max) in [
            (0u64, 1_000u64, 10u64),
            (1_700_000_000 * S + 123, 1_700_000_000 * S + 5 * MIN, 250),
            (5, 6, 1),
            (0, 400 * 365 * DAY, 100),
        ] {
            let w = round_width(from, to, max);
            assert!(to.div_ceil(w) - from / w <= max, "{from} {to} {max}: {w}");
        }
        assert_eq!(round_width(0, 10 * S, 10), S);
        assert_eq!(round_width(0, 10 * S, 9), 2 * S);
        assert_eq!(round_width(0, 60 * MIN, 60), MIN);
    }

    #[test]
    fn apportioning_keeps_every_frame_and_byte() {
        let mut bins = vec![Counts::default(); 10];
        let c = Counts {
            frames: 1001,
            bytes: 77_777,
            may_match: 1001,
        };
        apportion(&mut bins, 100, 10, 113, 171, c);
        let mut t = Counts::default();
        bins.iter().for_each(|b| t += *b);
        assert_eq!(t, c);
        assert_eq!(bins[0], Counts::default());
        assert!(bins[1].frames > 0 && bins[7].frames > 0);
        assert_eq!(bins[8], Counts::default());
        // Evenly spread: the whole bins inside get 10/59 of the frames each.
        assert!((bins[3].frames as i64 - 1001 * 10 / 59).abs() <= 1);
    }

    #[test]
    fn series_come_from_the_file_names() {
        let p = Path::new("/d/wiretape-eth-0-q3-20261122T140200.000000000Z.pcap");
        assert_eq!(series_of(p, By::Iface), "eth-0");
        assert_eq!(series_of(p, By::Queue), "eth-0-q3");
        assert_eq!(series_of(p, By::None), "all");
        assert_eq!(
            series_of(Path::new("/x/trace.pcap"), By::Iface),
            "trace.pcap"
        );
    }
}
