//! Planning with the indexes: which blocks (and where in them) a filtered
//! query reads. A finished file with a complete key index (`.kdx`,
//! [`wiretape_files::keys`]) is planned from it alone: the filter's
//! [`Needs`] are looked up per segment, and the plan reads only the places
//! of the rows that hold them (a run per place, not per block), plus the
//! block entries it needs; its `.idx` is not read. A file being written is
//! planned from its key index's segments and, for the blocks after them,
//! from its `.idx` entries (read from where the last segment ends), whose
//! flow sets narrow as before: a block written a second ago is found. Any
//! other file (no key index, an old or incomplete one) is planned from its
//! `.idx` and its flow sets ([`crate::extract::plan_with`]), as stores
//! written before the key index existed are.

use crate::extract::{self, FilePlan, IndexUse, Plan, Skip, Span, Window};
use std::collections::btree_map::Entry::{Occupied, Vacant};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use wiretape_files::index::{self, Entry};
use wiretape_files::keys::{Hit, KeyIndex};
use wiretape_files::ReadOptions;
use wiretape_filter::flow::Needs;
use wiretape_storage::StorageError;

/// How a plan narrows.
#[derive(Clone, Copy, Debug, Default)]
pub struct Narrow<'a> {
    /// What the filter needs of a block (None: it cannot narrow).
    pub needs: Option<&'a Needs>,
    /// Use the key index where a file has a usable one (else the flow
    /// sets of the `.idx` alone).
    pub key_index: bool,
}

/// What planning found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanStats {
    /// Blocks in the window the flow sets of `.idx` entries ruled out.
    pub skipped_by_flow: u64,
    /// Blocks in the window the key index ruled out.
    pub skipped_by_keys: u64,
    /// Blocks the plan reads from (selected by the window and the indexes).
    pub selected: u64,
    /// Runs it reads (a key index selects places inside blocks).
    pub runs: u64,
    /// Files planned by their key index.
    pub files_key_index: u64,
    /// Bytes read from index files (`.idx` and `.kdx`) to plan.
    pub index_bytes_read: u64,
}

impl std::ops::AddAssign for PlanStats {
    /// The stats of two plans together (several inputs planned apart).
    fn add_assign(&mut self, o: PlanStats) {
        self.skipped_by_flow += o.skipped_by_flow;
        self.skipped_by_keys += o.skipped_by_keys;
        self.selected += o.selected;
        self.runs += o.runs;
        self.files_key_index += o.files_key_index;
        self.index_bytes_read += o.index_bytes_read;
    }
}

/// What one more read costs, in bytes read: a block whose places would
/// cost more than reading it whole (each place this much, plus its bytes)
/// is read whole, in one sequential run with its neighbours. Measured with
/// `benches/steno.sh` (2.2 GB, cold cache): a busy host's ~45 places per
/// 1 MiB block read one by one took 7.9 s, whole blocks 3.4 s (Stenographer
/// 5.9 s); a small read costs about what 64 KiB more of a sequential one
/// does here. On a disk that seeks it costs far more, on NVMe about this.
const READ_COST: u32 = 64 << 10;
/// Places closer than this in one block are read as one run (a page and a
/// record's worth: reading the gap costs less than another read; wider
/// gaps doubled the bytes of `udp or icmp` for no time gained).
const JOIN_GAP: u32 = 8 << 10;

/// One piece of time of a query and what a block must hold in it (a
/// Stenographer query is several: its time bounds cut the time line, and
/// in each piece its formula differs).
#[derive(Clone, Copy, Debug)]
pub struct Piece<'a> {
    /// The piece's window.
    pub window: Window,
    /// What a block must hold in it (None: every block of the piece).
    pub needs: Option<&'a Needs>,
}

impl Piece<'_> {
    /// Whether a block of stamps `first..=last` may hold a frame of the
    /// piece, by time.
    fn overlaps(&self, first: u64, last: u64) -> bool {
        self.window.overlaps(first, last)
    }
}

/// Whether a block (by its `.idx` entry, its flow sets) is read: (in the
/// pieces' time, kept).
fn keep_entry(pieces: &[Piece<'_>], e: &Entry) -> (bool, bool) {
    let mut in_time = false;
    for p in pieces.iter().filter(|p| p.overlaps(e.first_ns, e.last_ns)) {
        in_time = true;
        if p.needs.is_none_or(|n| e.may_match(n)) {
            return (true, true);
        }
    }
    (in_time, false)
}

/// Plans a query over `inputs` (see [`extract::plan_with`] for the
/// listing and the time rules), narrowed as `narrow` says.
pub fn plan(
    inputs: &[PathBuf],
    window: Window,
    prefix: Option<&str>,
    opts: &ReadOptions,
    narrow: Narrow<'_>,
) -> Result<(Plan, PlanStats), StorageError> {
    let piece = Piece {
        window,
        needs: narrow.needs,
    };
    plan_pieces(inputs, window, prefix, opts, &[piece], narrow.key_index)
}

/// Plans a query of several pieces of time over `inputs`: files and blocks
/// in `hull` (the window holding every piece), a block read when one
/// piece it overlaps may match in it (by the key index where a file has a
/// usable one and `key_index`, else by the flow sets of its `.idx`); the
/// indexes where `opts` says, and the files read with it.
pub fn plan_pieces(
    inputs: &[PathBuf],
    hull: Window,
    prefix: Option<&str>,
    opts: &ReadOptions,
    pieces: &[Piece<'_>],
    key_index: bool,
) -> Result<(Plan, PlanStats), StorageError> {
    let mut st = PlanStats::default();
    // The key index lookups of the files are independent: done on this
    // thread while they are quick, on a few threads at once once they read
    // the disk (on a cold disk each is a chain of dependent page reads; one
    // file after another waits for every chain in turn), then handed to the
    // plan in its order.
    // The files listed and stat'ed once: the lookups' jobs and the plan.
    let found = extract::find_files(inputs, prefix, opts)?;
    let mut looked: HashMap<PathBuf, (Option<FilePlan>, PlanStats)> = HashMap::new();
    if key_index {
        let jobs: Vec<(PathBuf, u64, Option<u64>)> = found
            .iter()
            .filter_map(|f| match f {
                extract::Found::Indexed { path, start, next } => {
                    Some((path.clone(), *start, *next))
                }
                extract::Found::Whole(_) => None,
            })
            .collect();
        looked = lookup_all(&jobs, &hull, opts, pieces);
    }
    let plan = extract::plan_found(found, hull, opts, &mut |path, start, next| {
        if key_index {
            let (p, s) = looked
                .remove(&path)
                .unwrap_or_else(|| plan_keys_alone(&path, start, next, &hull, opts, pieces));
            st += s;
            if let Some(p) = p {
                return p;
            }
        }
        let ip = opts.index_path(&path);
        st.index_bytes_read += std::fs::metadata(&ip).map_or(0, |m| m.len());
        let mut skipped = 0u64;
        let p = extract::plan_ours(path, start, next, &hull, opts, &mut |_, e| {
            let (in_time, keep) = keep_entry(pieces, e);
            skipped += u64::from(in_time && !keep);
            keep
        });
        st.skipped_by_flow += skipped;
        if p.skip.is_none() {
            let mut blocks: Vec<usize> = p.spans.iter().flat_map(|s| s.blocks.clone()).collect();
            blocks.dedup();
            st.selected += blocks.len() as u64;
            st.runs += p.spans.len() as u64;
        }
        p
    });
    Ok((plan, st))
}

/// Threads the key index lookups of a plan take at most.
const LOOKUP_THREADS: usize = 8;

/// How long the calling thread looks up alone before it starts helpers: a
/// plan's lookups in sidecars already cached (or kept open by a server)
/// take microseconds each, less than starting and joining a thread.
const LOOKUP_ALONE: std::time::Duration = std::time::Duration::from_millis(1);

/// A lookup that took this long read the disk (a cached one takes tens of
/// microseconds; one page read from a cold disk about 100): the rest are
/// likely to, and helpers start then, not after [`LOOKUP_ALONE`].
const LOOKUP_COLD: std::time::Duration = std::time::Duration::from_micros(150);

/// Plans of this many files or more start their helpers before the first
/// lookup: on a cold cache the first lookup alone is a chain of 3-4
/// dependent page reads that would hold back every other file's chain,
/// and on a warm one the helpers share the lookups (measured on the rare
/// host's 8 files, warm: 2.40 ms median with helpers at once, 2.45 ms
/// with none; cold: 3.55 ms against 3.75 ms with helpers after the first
/// lookup).
const LOOKUP_AT_ONCE: usize = 4;

/// [`plan_keys`] of each of `jobs` (path, start, next start): on the
/// calling thread, joined by up to [`LOOKUP_THREADS`] - 1 more at once
/// when there are [`LOOKUP_AT_ONCE`] jobs or more, else once one lookup
/// took [`LOOKUP_COLD`] or all so far [`LOOKUP_ALONE`] (lookups that read
/// the disk); by path, each with its stats. Which thread does a job
/// changes nothing in its result.
fn lookup_all(
    jobs: &[(PathBuf, u64, Option<u64>)],
    w: &Window,
    opts: &ReadOptions,
    pieces: &[Piece<'_>],
) -> HashMap<PathBuf, (Option<FilePlan>, PlanStats)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || {
        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        jobs.get(i)
    };
    let run = |(path, start, nx): &(PathBuf, u64, Option<u64>)| {
        (
            path.clone(),
            plan_keys_alone(path, *start, *nx, w, opts, pieces),
        )
    };
    let mut out = HashMap::with_capacity(jobs.len());
    let t0 = std::time::Instant::now();
    std::thread::scope(|sc| {
        // Helpers for `left` jobs besides the calling thread's.
        let start = |left: usize| {
            (0..left.min(LOOKUP_THREADS - 1))
                .map(|_| {
                    sc.spawn(|| {
                        let mut done = Vec::new();
                        while let Some(job) = take() {
                            done.push(run(job));
                        }
                        done
                    })
                })
                .collect::<Vec<_>>()
        };
        let mut helpers = Vec::new();
        if jobs.len() >= LOOKUP_AT_ONCE {
            helpers = start(jobs.len() - 1);
        }
        while let Some(job) = take() {
            let t1 = std::time::Instant::now();
            // A lookup that panicked is done again in the plan's order.
            if let Ok((path, r)) =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(job)))
            {
                out.insert(path, r);
            }
            let left = jobs
                .len()
                .saturating_sub(next.load(std::sync::atomic::Ordering::Relaxed));
            let slow = t1.elapsed() >= LOOKUP_COLD || t0.elapsed() >= LOOKUP_ALONE;
            if helpers.is_empty() && left > 0 && slow {
                helpers = start(left);
            }
        }
        for h in helpers {
            // A lookup that panicked is done again in the plan's order.
            out.extend(h.join().unwrap_or_default());
        }
    });
    out
}

/// [`plan_keys`] with stats of its own.
fn plan_keys_alone(
    path: &Path,
    start: u64,
    next: Option<u64>,
    w: &Window,
    opts: &ReadOptions,
    pieces: &[Piece<'_>],
) -> (Option<FilePlan>, PlanStats) {
    let mut st = PlanStats::default();
    let p = plan_keys(path, start, next, w, opts, pieces, &mut st);
    (p, st)
}

/// Where in a block to read: None, all of it; else the places (first,
/// last record offsets from the block's first record).
type Places = Option<Vec<(u32, u32)>>;

/// One block to read: whole (to `end`), or at places.
struct Pick {
    block: u64,
    entry: Entry,
    /// None: the whole block; else places (first, last) in it.
    places: Option<Vec<(u32, u32)>>,
    /// A whole block read to the end of the file.
    to_eof: bool,
}

/// Plans `path` from its key index, or None when it has no usable one
/// (none, a gap, a finished file whose index is not final for it).
fn plan_keys(
    path: &Path,
    start_ns: u64,
    next_ns: Option<u64>,
    w: &Window,
    opts: &ReadOptions,
    pieces: &[Piece<'_>],
    st: &mut PlanStats,
) -> Option<FilePlan> {
    let kdx = KeyIndex::open(path, opts).ok()??;
    let r = plan_with_keys(&kdx, path, start_ns, next_ns, w, opts, pieces, st);
    st.index_bytes_read += kdx.bytes_read();
    r
}

#[allow(clippy::too_many_arguments)]
fn plan_with_keys(
    kdx: &KeyIndex,
    path: &Path,
    start_ns: u64,
    next_ns: Option<u64>,
    w: &Window,
    opts: &ReadOptions,
    pieces: &[Piece<'_>],
    st: &mut PlanStats,
) -> Option<FilePlan> {
    let segs = kdx.segments();
    let mut next = 0;
    for s in segs {
        if s.header.block0 != next {
            return None;
        }
        next += s.header.nblocks;
    }
    let covered = next;
    let len = std::fs::metadata(path).ok()?.len();
    let complete = kdx.complete_for(len);
    if !complete && !crate::fleet::being_written(path) {
        // A finished file whose key index is stale or was cut short.
        return None;
    }
    let lower = start_ns - start_ns % 1000;
    let mut plan = FilePlan {
        path: path.to_owned(),
        ordered: true,
        index: IndexUse::Used,
        entries: Vec::new(),
        spans: Vec::new(),
        skip: None,
        lower_ns: lower,
        blocks_total: covered,
        key_index: true,
    };
    // The blocks after the segments: the `.idx` from where they end.
    let tail = if complete {
        Vec::new()
    } else {
        let from = segs.last().map_or(0, |s| s.header.idx_next);
        let (t, n) = index::read_from(&opts.index_path(path), from).ok()?;
        st.index_bytes_read += n;
        t
    };
    plan.blocks_total += tail.len() as u64;
    // A file read for nothing still tells the store's span (its first and
    // last blocks, as the `.idx` would: `store_span` in `--json`).
    let ends = |plan: &mut FilePlan| -> Option<()> {
        let first = match kdx.entry(0).ok()? {
            Some(e) => Some(e),
            None => tail.first().cloned(),
        };
        let last = match tail.last() {
            Some(e) => Some(e.clone()),
            None if covered > 0 => kdx.entry(covered - 1).ok()?,
            None => None,
        };
        plan.entries.extend(first);
        plan.entries.extend(last);
        Some(())
    };
    if w.is_past(lower) {
        plan.skip = Some(Skip::StartsAfter);
        ends(&mut plan)?;
        return Some(plan);
    }
    if let (Some(next), Some(from)) = (next_ns, w.from_ns) {
        if next < from {
            plan.skip = Some(Skip::EndsBefore);
            ends(&mut plan)?;
            return Some(plan);
        }
    }
    let mut picks: Vec<Pick> = Vec::new();
    for seg in segs {
        let h = &seg.header;
        if h.nblocks == 0 || !w.overlaps(h.first_ns, h.last_ns) {
            continue;
        }
        let live: Vec<&Piece<'_>> = pieces
            .iter()
            .filter(|p| p.overlaps(h.first_ns, h.last_ns))
            .collect();
        // The blocks of the segment to read: whole (None) or at places.
        let mut want: BTreeMap<u64, (Entry, Places)> = BTreeMap::new();
        // Every entry of the segment, read once if needed.
        let mut all: Option<Vec<Entry>> = None;
        for p in &live {
            match p.needs {
                Some(n) => {
                    let hits = kdx.select(seg, n).ok()?;
                    let mut by_block: Vec<(u64, Vec<(u32, u32)>)> = Vec::new();
                    for Hit {
                        block, first, last, ..
                    } in hits
                    {
                        match by_block.last_mut() {
                            Some((b, v)) if *b == block => v.push((first, last)),
                            _ => by_block.push((block, vec![(first, last)])),
                        }
                    }
                    let rel: Vec<u64> = by_block.iter().map(|b| b.0 - h.block0).collect();
                    let entries = match &all {
                        Some(a) => rel.iter().map(|&r| a.get(r as usize).cloned()).collect(),
                        None => Some(kdx.entries_at(seg, &rel).ok()?),
                    }?;
                    for ((block, places), e) in by_block.into_iter().zip(entries) {
                        if !p.overlaps(e.first_ns, e.last_ns) {
                            continue;
                        }
                        match want.entry(block) {
                            Vacant(v) => {
                                v.insert((e, Some(places)));
                            }
                            Occupied(mut o) => {
                                if let Some(pl) = &mut o.get_mut().1 {
                                    pl.extend(places);
                                }
                            }
                        }
                    }
                }
                None => {
                    if all.is_none() {
                        all = Some(kdx.entries(seg, 0..h.nblocks).ok()?);
                    }
                    for (i, e) in all.iter().flatten().enumerate() {
                        if p.overlaps(e.first_ns, e.last_ns) {
                            want.insert(h.block0 + i as u64, (e.clone(), None));
                        }
                    }
                }
            }
        }
        if live.iter().any(|p| p.needs.is_some()) {
            // Blocks of the pieces' windows the key index ruled out.
            let inside = live.iter().any(|p| {
                p.window.from_ns.is_none_or(|f| h.first_ns >= f) && !p.window.is_past(h.last_ns)
            });
            let in_window = if inside {
                h.nblocks
            } else {
                if all.is_none() {
                    all = Some(kdx.entries(seg, 0..h.nblocks).ok()?);
                }
                all.iter()
                    .flatten()
                    .filter(|e| live.iter().any(|p| p.overlaps(e.first_ns, e.last_ns)))
                    .count() as u64
            };
            st.skipped_by_keys += in_window.saturating_sub(want.len() as u64);
        }
        for (block, (entry, places)) in want {
            picks.push(Pick {
                block,
                entry,
                places: places.map(join),
                to_eof: false,
            });
        }
    }
    for (i, e) in tail.iter().enumerate() {
        let (in_time, keep) = keep_entry(pieces, e);
        if !keep {
            st.skipped_by_flow += u64::from(in_time);
            continue;
        }
        picks.push(Pick {
            block: covered + i as u64,
            entry: e.clone(),
            places: None,
            to_eof: false,
        });
    }
    // The last file of a series may go on past its index (being written):
    // its last known block is read to the end, unless it starts after the
    // window.
    if !complete && next_ns.is_none() {
        let last_no = covered + tail.len() as u64;
        if last_no > 0 {
            let last = match tail.last() {
                Some(e) => Some(e.clone()),
                None => kdx.entry(last_no - 1).ok()?,
            };
            if let Some(e) = last.filter(|e| !w.is_past(e.first_ns)) {
                match picks.last_mut() {
                    Some(p) if p.block == last_no - 1 => {
                        p.places = None;
                        p.to_eof = true;
                    }
                    _ => picks.push(Pick {
                        block: last_no - 1,
                        entry: e,
                        places: None,
                        to_eof: true,
                    }),
                }
            }
        }
    }
    if picks.is_empty() {
        plan.skip = Some(Skip::NoBlock);
        ends(&mut plan)?;
        return Some(plan);
    }
    // A whole block's run ends where the next block starts.
    let mut offsets: HashMap<u64, Option<u64>> = HashMap::new();
    for p in &picks {
        offsets.insert(p.block, Some(p.entry.offset));
    }
    let mut start_of = |b: u64| -> Option<Option<u64>> {
        if let Some(o) = offsets.get(&b) {
            return Some(*o);
        }
        let o = if b < covered {
            kdx.entry(b).ok()?.map(|e| e.offset)
        } else {
            tail.get((b - covered) as usize).map(|e| e.offset)
        };
        offsets.insert(b, o);
        Some(o)
    };
    let mut blocks = 0u64;
    for p in picks {
        let k = plan.entries.len();
        let off = p.entry.offset;
        plan.entries.push(p.entry);
        blocks += 1;
        // Places that would cost more than the whole block: the block.
        let places = match p.places {
            Some(pl) => {
                let end = start_of(p.block + 1)?.unwrap_or(len);
                let runs = pl.len() as u64 * u64::from(READ_COST);
                let bytes: u64 = pl.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
                (runs + bytes < u64::from(READ_COST) + end.saturating_sub(off)).then_some(pl)
            }
            None => None,
        };
        match places {
            None => {
                let end = if p.to_eof {
                    None
                } else {
                    start_of(p.block + 1)?
                };
                // Whole blocks in a row: one run.
                let entries = &plan.entries;
                match plan.spans.last_mut() {
                    Some(s)
                        if s.end == Some(off)
                            && s.blocks.end == k
                            && entries[s.blocks.start].offset == s.start =>
                    {
                        s.end = end;
                        s.blocks.end = k + 1;
                    }
                    _ => plan.spans.push(Span {
                        start: off,
                        end,
                        blocks: k..k + 1,
                    }),
                }
            }
            Some(places) => {
                for (first, last) in places {
                    plan.spans.push(Span {
                        start: off + first as u64,
                        end: Some(off + last as u64 + 1),
                        blocks: k..k + 1,
                    });
                }
            }
        }
    }
    st.selected += blocks;
    st.runs += plan.spans.len() as u64;
    st.files_key_index += 1;
    plan.lower_ns = lower.max(plan.entries[0].first_ns);
    Some(plan)
}

/// The blocks of `capture` its key index covers (numbers `0..covered`),
/// and those of them in `window` that may hold a frame `needs` asks for:
/// exact for filters that are conjunctions of keys (a block holds a row
/// with all of them). None when the file has no usable key index (where
/// `opts` says it is).
pub fn blocks_with(
    capture: &Path,
    opts: &ReadOptions,
    needs: &Needs,
    window: &Window,
) -> Option<(u64, std::collections::HashSet<u64>)> {
    let kdx = KeyIndex::open(capture, opts).ok()??;
    let len = std::fs::metadata(capture).ok()?.len();
    if !kdx.complete_for(len) && !crate::fleet::being_written(capture) {
        return None;
    }
    let mut next = 0;
    let mut hit = std::collections::HashSet::new();
    for seg in kdx.segments() {
        let h = &seg.header;
        if h.block0 != next {
            return None;
        }
        next += h.nblocks;
        if h.nblocks == 0 || !window.overlaps(h.first_ns, h.last_ns) {
            continue;
        }
        hit.extend(kdx.select(seg, needs).ok()?.into_iter().map(|h| h.block));
    }
    Some((next, hit))
}

/// Places sorted and joined where they overlap or lie within
/// [`JOIN_GAP`] of each other.
fn join(mut v: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    v.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(l) if a <= l.1.saturating_add(JOIN_GAP) => l.1 = l.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}
