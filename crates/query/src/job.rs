//! One query over local stores, as `wiretape extract` and the API's
//! `/v1/extract`, `/v1/count` and `/v1/plan` run it: a [`Request`] (inputs,
//! window, filter) becomes a [`Job`] (the filter compiled by libpcap, the
//! flow index asked which blocks can match, the [`Plan`]); running it
//! merges the frames in time order into a callback and ends in an
//! [`Outcome`] (counts, notes). The JSON the command prints is built here
//! too ([`Job::plan_json`], [`summary_json`]), so the API answers exactly
//! what the command prints.

use crate::extract::{Frame, Merge, Note, NoteKind, Plan, Stats, Window};
/// Files opened by the planner for the merge, by path.
type Opened = std::collections::HashMap<PathBuf, crate::extract::Opened>;
/// Link types, each with its files, in plan order.
type LinkTypes = Vec<(u32, Vec<PathBuf>)>;
use crate::narrow::Narrow;
pub use crate::narrow::PlanStats;
use crate::steno::Selection;
use crate::QueryError;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;
use wiretape_files::pcap::MAX_SNAPLEN;
use wiretape_files::Format;
use wiretape_files::ReadOptions;
use wiretape_filter::flow::Needs;
use wiretape_filter::{Program, LINKTYPE_ETHERNET};
use wiretape_storage::{PcapWriter, WriteSink};

/// The frame predicate of a job's merge (`data`, wire length, stamp): the
/// compiled filter, a Stenographer query's pieces, or every frame.
pub type Pred = Box<dyn FnMut(&[u8], u32, u64) -> bool + Send>;

/// What to extract.
#[derive(Clone, Debug)]
pub struct Request {
    /// Directories and capture files.
    pub inputs: Vec<PathBuf>,
    /// The time window.
    pub window: Window,
    /// A filter expression (tcpdump's language), if any.
    pub filter: Option<String>,
    /// In directories, only files of this prefix (default: any of ours).
    pub prefix: Option<String>,
    /// Skip blocks whose flow sets rule the filter out (default true).
    pub flow_index: bool,
    /// Use the exact key index (`.kdx`) where a file has one (default
    /// true; with `flow_index` only).
    pub key_index: bool,
    /// Keep the list of planned blocks (for [`Job::plan_json`]).
    pub list_blocks: bool,
    /// A Stenographer query instead of `filter` ([`crate::steno`]): its
    /// time pieces within `window`, Ethernet frames only.
    pub steno: Option<Arc<Selection>>,
    /// Only the frames of the sessions this `--where` expression chooses
    /// in the session tables of `inputs` ([`crate::sessions`]), within
    /// `window` (and the filter, when there is one too).
    pub session_where: Option<crate::sessions::Where>,
    /// How the inputs are read: the identities of encrypted files, where
    /// the indexes of Stenographer's files are.
    pub read: ReadOptions,
}

impl Request {
    /// Everything of `inputs`, no filter, the flow index on.
    pub fn new(inputs: Vec<PathBuf>) -> Self {
        Request {
            inputs,
            window: Window::default(),
            filter: None,
            prefix: None,
            flow_index: true,
            key_index: true,
            list_blocks: false,
            steno: None,
            session_where: None,
            read: ReadOptions::default(),
        }
    }
}

/// One block the plan reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedBlock {
    /// The file (canonical path).
    pub file: PathBuf,
    /// Its index entry.
    pub offset: u64,
    /// First stamp in it.
    pub first_ns: u64,
    /// Last stamp in it.
    pub last_ns: u64,
    /// Frames in it.
    pub frames: u64,
    /// Byte ranges `[start, end)` of the file read in it, when the key
    /// index picked places in the block (empty: the whole block).
    pub ranges: Vec<(u64, u64)>,
}

/// A planned query, ready to run.
pub struct Job {
    /// The files and blocks to read.
    pub plan: Plan,
    /// The expression, normalized (None: every frame).
    pub filter: Option<String>,
    /// The filter compiled for each link type of [`Job::linktypes`] (in
    /// that order; one for Ethernet when there are none).
    progs: Vec<(u32, Option<Program>)>,
    /// Whether the flow index narrowed the plan (the filter needs keys).
    pub filter_narrows: bool,
    /// Index blocks in the window that the indexes ruled out (flow sets
    /// and key index together).
    pub skipped_by_flow: u64,
    /// What planning found (blocks selected, ruled out by each index,
    /// index bytes read).
    pub plan_stats: PlanStats,
    /// The blocks read (with [`Request::list_blocks`]).
    pub blocks: Vec<PlannedBlock>,
    /// The link types of the files to read, each with its files (in plan
    /// order). The merge reads them all, each frame under its own link
    /// type; a pcap output holds one ([`Job::check_output`]).
    pub linktypes: Vec<(u32, Vec<PathBuf>)>,
    started: Instant,
    stop: Option<Arc<AtomicBool>>,
    /// The Stenographer query run instead of the filter.
    pub steno: Option<Arc<Selection>>,
    /// Files of other link types than Ethernet, not read (a Stenographer
    /// query selects Ethernet frames only).
    pub not_ethernet: Vec<PathBuf>,
    /// The sessions chosen by [`Request::session_where`]: only their
    /// frames are given.
    pub sessions: Option<Arc<crate::sessions::Selected>>,
    /// Files opened while planning, kept for the merge.
    opened: Opened,
}

/// What a finished job did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The merge's counts.
    pub stats: Stats,
    /// Every note (no index, damage, errors, out of order), in order.
    pub notes: Vec<Note>,
    /// Seconds from planning to the end.
    pub seconds: f64,
    /// Ended early by the stop flag ([`Job::stop_on`]): not every frame.
    pub stopped: bool,
}

impl Outcome {
    /// 1 when a file could not be read, or was damaged (unless
    /// `ignore_corrupt`); else 0.
    pub fn exit_code(&self, ignore_corrupt: bool) -> i32 {
        let s = &self.stats;
        i32::from(s.error_files > 0 || (s.damaged_files > 0 && !ignore_corrupt))
    }
}

/// The expression's words joined by single spaces (None when empty).
pub fn normalize_filter(expr: &str) -> Option<String> {
    let e = expr.split_whitespace().collect::<Vec<_>>().join(" ");
    (!e.is_empty()).then_some(e)
}

impl Job {
    /// Compiles the filter (libpcap, for Ethernet) and plans the query.
    /// Err: a filter libpcap refuses ([`QueryError::Filter`]), an input that
    /// does not exist or a directory that cannot be listed.
    pub fn plan(req: &Request) -> Result<Job, QueryError> {
        if let Some(sel) = &req.steno {
            return Self::plan_steno(req, sel);
        }
        let filter = req.filter.as_deref().and_then(normalize_filter);
        let prog = match &filter {
            Some(e) => Some(wiretape_filter::compile(e, LINKTYPE_ETHERNET, MAX_SNAPLEN)?),
            None => None,
        };
        Self::plan_with(req, filter, prog)
    }

    /// The plan of [`Request::session_where`]: the sessions it chooses in
    /// the tables of the inputs (in the window) become pieces of time, one
    /// per span of a connection, each needing the connection's addresses,
    /// protocol and ports (the key index where a file has a usable one,
    /// else the `.idx` flow sets), as a Stenographer query's pieces are.
    fn plan_sessions(
        req: &Request,
        w: &crate::sessions::Where,
        filter: Option<String>,
        prog: Option<Program>,
    ) -> Result<Job, QueryError> {
        let started = Instant::now();
        let files = crate::fleet::captures_with(&req.inputs, req.prefix.as_deref(), &req.read)?;
        let listing =
            crate::sessions::list(&files, &req.read, req.window.from_ns, req.window.to_ns, w)?;
        let sel = crate::sessions::Selected::of(listing, req.window);
        let needs_on = req.flow_index;
        let pieces: Vec<crate::narrow::Piece<'_>> = sel
            .pieces()
            .map(|(window, needs)| crate::narrow::Piece {
                window,
                needs: needs_on.then_some(needs),
            })
            .collect();
        let hull = sel.hull();
        let (mut plan, mut plan_stats) = crate::narrow::plan_pieces(
            &req.inputs,
            hull.unwrap_or(req.window),
            req.prefix.as_deref(),
            &req.read,
            &pieces,
            req.flow_index && req.key_index,
        )?;
        drop(pieces);
        if hull.is_none() {
            // No session chosen: nothing to read.
            plan.files.clear();
            plan_stats = PlanStats::default();
        }
        let (linktypes, opened) = linktypes_of(&plan)?;
        let progs = progs_for(&linktypes, &filter, prog)?;
        Ok(Job {
            filter,
            progs,
            filter_narrows: needs_on && !sel.is_empty(),
            sessions: Some(Arc::new(sel)),
            ..Job::of_plan(req, plan, plan_stats, (linktypes, opened), started)
        })
    }

    /// A job reading `plan` (its blocks listed if the request asks), no
    /// filter: what the constructors share (each sets what is its own).
    fn of_plan(
        req: &Request,
        plan: Plan,
        plan_stats: PlanStats,
        (linktypes, opened): (LinkTypes, Opened),
        started: Instant,
    ) -> Job {
        let blocks = if req.list_blocks {
            planned_blocks(&plan)
        } else {
            Vec::new()
        };
        Job {
            skipped_by_flow: plan_stats.skipped_by_flow + plan_stats.skipped_by_keys,
            plan,
            filter: None,
            progs: Vec::new(),
            filter_narrows: false,
            linktypes,
            plan_stats,
            blocks,
            started,
            stop: None,
            steno: None,
            not_ethernet: Vec::new(),
            sessions: None,
            opened,
        }
    }

    /// As [`Job::plan`] with the filter already compiled (`prog` of `filter`).
    pub fn plan_with(
        req: &Request,
        filter: Option<String>,
        prog: Option<Program>,
    ) -> Result<Job, QueryError> {
        if let Some(w) = &req.session_where {
            return Self::plan_sessions(req, w, filter, prog);
        }
        // The keys (hosts, ports, protocols...) the filter needs: blocks
        // (and places in them) that lack them are not read.
        let needs = match (&prog, req.flow_index) {
            (Some(p), true) => Needs::of(p.insns()),
            _ => None,
        };
        let started = Instant::now();
        let narrow = Narrow {
            needs: needs.as_ref(),
            key_index: req.flow_index && req.key_index,
        };
        let (plan, plan_stats) = crate::narrow::plan(
            &req.inputs,
            req.window,
            req.prefix.as_deref(),
            &req.read,
            narrow,
        )?;
        let (linktypes, opened) = linktypes_of(&plan)?;
        let progs = progs_for(&linktypes, &filter, prog)?;
        let ethernet = progs.iter().any(|p| p.0 == LINKTYPE_ETHERNET);
        Ok(Job {
            filter,
            progs,
            filter_narrows: needs.is_some() && ethernet,
            ..Job::of_plan(req, plan, plan_stats, (linktypes, opened), started)
        })
    }

    /// [`Job::plan`] of a Stenographer query: the plan covers its pieces
    /// of time, each piece narrowed by its needs as a filter's are (the
    /// key index where a file has a usable one, else the flow sets of its
    /// `.idx`): blocks outside the pieces, or that cannot hold a selected
    /// frame, are not read. Files of other link types are left out
    /// ([`Job::not_ethernet`]).
    fn plan_steno(req: &Request, sel: &Selection) -> Result<Job, QueryError> {
        let sel = Arc::new(sel.within(req.window));
        let started = Instant::now();
        let hull = sel.hull();
        let pieces: Vec<crate::narrow::Piece<'_>> = sel
            .parts
            .iter()
            .map(|p| crate::narrow::Piece {
                window: p.window,
                needs: p.needs.as_ref().filter(|_| req.flow_index),
            })
            .collect();
        let (mut plan, mut plan_stats) = crate::narrow::plan_pieces(
            &req.inputs,
            hull.unwrap_or(req.window),
            req.prefix.as_deref(),
            &req.read,
            &pieces,
            req.flow_index && req.key_index,
        )?;
        if hull.is_none() {
            // No piece of time: nothing to read.
            plan.files.clear();
            plan_stats = PlanStats::default();
        }
        let (mut linktypes, mut opened) = linktypes_of(&plan)?;
        let mut not_ethernet = Vec::new();
        linktypes.retain(|(lt, files)| {
            if *lt != LINKTYPE_ETHERNET {
                not_ethernet.extend(files.iter().cloned());
            }
            *lt == LINKTYPE_ETHERNET
        });
        plan.files.retain(|f| !not_ethernet.contains(&f.path));
        opened.retain(|p, _| !not_ethernet.contains(p));
        let narrows = req.flow_index && sel.parts.iter().any(|p| p.needs.is_some());
        let blocks = if req.list_blocks {
            planned_blocks(&plan)
        } else {
            Vec::new()
        };
        if !not_ethernet.is_empty() {
            // Their blocks are not read: not counted as selected.
            plan_stats.selected = blocks_selected(&plan);
            plan_stats.runs = plan
                .files
                .iter()
                .filter(|f| f.skip.is_none())
                .map(|f| f.spans.len() as u64)
                .sum();
        }
        let skipped_by_flow = plan_stats.skipped_by_flow + plan_stats.skipped_by_keys;
        Ok(Job {
            plan,
            filter: None,
            progs: vec![(LINKTYPE_ETHERNET, None)],
            filter_narrows: narrows,
            skipped_by_flow,
            plan_stats,
            blocks,
            linktypes,
            started,
            stop: None,
            steno: Some(sel),
            not_ethernet,
            sessions: None,
            opened,
        })
    }

    /// The link type of the frames the job gives (its files'; Ethernet
    /// when it has none; the first of them when they are of several).
    pub fn linktype(&self) -> u32 {
        self.linktypes.first().map_or(LINKTYPE_ETHERNET, |l| l.0)
    }

    /// The link types of the frames the job gives, in the order of the
    /// plan (Ethernet alone when it has no file): the interfaces of a
    /// pcapng output, in that order.
    pub fn linktype_list(&self) -> Vec<u32> {
        self.progs.iter().map(|p| p.0).collect()
    }

    /// Whether the job's frames can be written in `format`: Err (the one
    /// line of [`mixed_linktypes`], a [`QueryError::MixedLinkTypes`]) for
    /// pcap over files of several link types; pcapng takes them all.
    pub fn check_output(&self, format: Format) -> Result<(), QueryError> {
        match mixed_linktypes(&self.linktypes) {
            Some(m) if format != Format::PcapNg => Err(QueryError::MixedLinkTypes(m)),
            _ => Ok(()),
        }
    }

    /// Ends the run early once `flag` is set (see [`Merge::stop_on`]): the
    /// outcome then says [`Outcome::stopped`].
    pub fn stop_on(&mut self, flag: Arc<AtomicBool>) {
        self.stop = Some(flag);
    }

    /// The merge of the plan, pull-style (for merging with other sources):
    /// frames the window and the filter keep.
    pub fn into_merge(self) -> (Merge<Pred>, Instant) {
        let preds = match self.steno {
            Some(sel) => {
                let pred: Pred =
                    Box::new(move |data: &[u8], _: u32, ts: u64| sel.matches(data, ts));
                vec![(LINKTYPE_ETHERNET, pred)]
            }
            None => {
                let sessions = self.sessions;
                self.progs
                    .into_iter()
                    .map(|(lt, prog)| {
                        let sessions = sessions.clone();
                        let pred: Pred = Box::new(move |data: &[u8], wire: u32, ts: u64| {
                            sessions.as_ref().is_none_or(|s| s.matches(lt, data, ts))
                                && prog.as_ref().is_none_or(|p| p.matches(data, wire))
                        });
                        (lt, pred)
                    })
                    .collect()
            }
        };
        let mut merge = Merge::per_linktype(self.plan, preds).with_opened(self.opened);
        if let Some(f) = self.stop {
            merge.stop_on(f);
        }
        (merge, self.started)
    }

    /// The JSON of `wiretape extract --plan`: the blocks the window and the
    /// flow index select and the files read whole.
    pub fn plan_json(&self) -> serde_json::Value {
        let whole: Vec<String> = self
            .plan
            .files
            .iter()
            .filter(|f| f.skip.is_none() && f.entries.is_empty())
            .map(|f| f.path.display().to_string())
            .collect();
        let blocks: Vec<serde_json::Value> = self
            .blocks
            .iter()
            .map(|b| {
                let mut j = serde_json::json!({
                    "file": b.file.display().to_string(),
                    "offset": b.offset,
                    "first_ns": b.first_ns,
                    "last_ns": b.last_ns,
                    "frames": b.frames,
                });
                if !b.ranges.is_empty() {
                    j["ranges"] = b
                        .ranges
                        .iter()
                        .map(|r| vec![r.0, r.1])
                        .collect::<Vec<_>>()
                        .into();
                }
                j
            })
            .collect();
        let st = &self.plan_stats;
        serde_json::json!({
            "blocks": blocks,
            "blocks_skipped_by_flow_index": self.skipped_by_flow,
            "blocks_skipped_by_key_index": st.skipped_by_keys,
            "blocks_selected": st.selected,
            "runs": st.runs,
            "files_key_index": st.files_key_index,
            "index_bytes_read": st.index_bytes_read,
            "filter_narrows": self.filter_narrows,
            "files_read_whole": whole,
            "from_ns": self.plan.window.from_ns,
            "to_ns": self.plan.window.to_ns,
        })
    }

    /// Runs the merge: every frame in the window that the filter keeps goes
    /// to `each` in time order (an error from it ends the run and is
    /// returned); every note to `note` as it happens.
    pub fn run<E>(
        self,
        mut each: impl FnMut(&Frame<'_>) -> Result<(), E>,
        mut note: impl FnMut(&Note),
    ) -> Result<Outcome, E> {
        let (mut merge, started) = self.into_merge();
        let mut notes = Vec::new();
        while let Some(f) = merge.next() {
            each(&f)?;
            if !merge.notes().is_empty() {
                for n in merge.take_notes() {
                    note(&n);
                    notes.push(n);
                }
            }
        }
        for n in merge.take_notes() {
            note(&n);
            notes.push(n);
        }
        Ok(Outcome {
            stats: merge.finish(),
            notes,
            seconds: started.elapsed().as_secs_f64(),
            stopped: merge.stopped_early(),
        })
    }
}

/// The filter as libpcap compiles it for each of the files' link types
/// (`prog` is Ethernet's): its program differs per link type. Flow keys
/// are Ethernet's only (the indexes of other link types are time-only, so
/// never narrow). One for Ethernet when there are no files.
fn progs_for(
    linktypes: &[(u32, Vec<PathBuf>)],
    filter: &Option<String>,
    prog: Option<Program>,
) -> Result<Vec<(u32, Option<Program>)>, QueryError> {
    let mut progs = Vec::new();
    for (lt, files) in linktypes {
        let p = match filter {
            Some(e) if *lt != LINKTYPE_ETHERNET => Some(
                wiretape_filter::compile(e, *lt, MAX_SNAPLEN)
                    .map_err(|err| for_linktype(err, *lt, files))?,
            ),
            _ => prog.clone(),
        };
        progs.push((*lt, p));
    }
    if progs.is_empty() {
        progs.push((LINKTYPE_ETHERNET, prog));
    }
    Ok(progs)
}

/// A note as the command prints it on stderr (without the `wiretape: `).
pub fn note_line(n: &Note) -> String {
    let at = n.offset.map(|o| format!(" (byte {o})")).unwrap_or_default();
    let what = match n.kind {
        NoteKind::NoIndex => "note",
        NoteKind::OutOfOrder => "warning",
        NoteKind::Damage => "damaged",
        NoteKind::Error => "error",
    };
    format!("{what}: {}{at}: {}", n.path.display(), n.message)
}

/// The format's name in the JSON (`pcap-ns`, `pcap-us`, `pcapng`).
pub fn format_name(format: Format) -> &'static str {
    match format {
        Format::PcapNs => "pcap-ns",
        Format::PcapUs => "pcap-us",
        Format::PcapNg => "pcapng",
        Format::Steno => "steno",
    }
}

/// The JSON of `wiretape extract --json` (and `--count-only --json`):
/// `output` is the output's name, None for a count.
pub fn summary_json(
    job_filter: Option<&str>,
    filter_narrows: bool,
    plan: &PlanStats,
    window: &Window,
    out: &Outcome,
    output: Option<&str>,
    format: Format,
) -> serde_json::Value {
    let st = &out.stats;
    let list = |k: NoteKind| -> Vec<serde_json::Value> {
        out.notes
            .iter()
            .filter(|n| n.kind == k)
            .map(|n| {
                serde_json::json!({
                    "file": n.path.display().to_string(),
                    "offset": n.offset,
                    "error": n.message,
                })
            })
            .collect()
    };
    let without: Vec<String> = out
        .notes
        .iter()
        .filter(|n| n.kind == NoteKind::NoIndex)
        .map(|n| n.path.display().to_string())
        .collect();
    serde_json::json!({
        "frames": st.frames,
        "bytes": st.bytes,
        "wire_bytes": st.wire_bytes,
        "files": st.files,
        "files_read": st.files_read,
        "files_skipped": st.files_skipped,
        "files_scanned_without_index": st.files_without_index,
        "files_without_index": without,
        "files_being_written": st.files_live,
        "blocks_read": st.blocks_read,
        "blocks_skipped": st.blocks_skipped,
        "bytes_read": st.bytes_read,
        "blocks_decompressed": st.blocks_decompressed,
        "chunks_decrypted": st.chunks_decrypted,
        "records_read": st.records_read,
        "records_odd": st.records_odd,
        "out_of_order": st.out_of_order,
        "seconds": out.seconds,
        "from_ns": window.from_ns,
        "to_ns": window.to_ns,
        "filter": job_filter,
        "output": output,
        "format": format_name(format),
        "corrupt": list(NoteKind::Damage),
        "errors": list(NoteKind::Error),
        "blocks_skipped_by_flow_index": plan.skipped_by_flow + plan.skipped_by_keys,
        "blocks_skipped_by_key_index": plan.skipped_by_keys,
        "blocks_selected": plan.selected,
        "blocks_matched": st.blocks_matched,
        "blocks_false_positive": st.blocks_read.saturating_sub(st.blocks_matched),
        "runs": plan.runs,
        "files_key_index": plan.files_key_index,
        "index_bytes_read": plan.index_bytes_read,
        "filter_narrows": filter_narrows,
        "store_span": st.store_span.map(|s| s.to_json()),
        "window_misses_store": st.store_span.is_some_and(|s| s.misses(window)),
    })
}

/// How many blocks `plan` reads from (each once).
fn blocks_selected(plan: &Plan) -> u64 {
    let mut n = 0;
    for f in plan.files.iter().filter(|f| f.skip.is_none()) {
        let mut last = None;
        for k in f.spans.iter().flat_map(|s| s.blocks.clone()) {
            n += u64::from(last != Some(k));
            last = Some(k);
        }
    }
    n
}

/// The blocks `plan` reads, each once, with the places read in it when
/// the key index picked them.
fn planned_blocks(plan: &Plan) -> Vec<PlannedBlock> {
    let mut out: Vec<PlannedBlock> = Vec::new();
    for f in plan.files.iter().filter(|f| f.skip.is_none()) {
        let file = std::fs::canonicalize(&f.path).unwrap_or_else(|_| f.path.clone());
        let mut last: Option<usize> = None;
        for sp in &f.spans {
            for k in sp.blocks.clone() {
                let e = &f.entries[k];
                if last != Some(k) {
                    last = Some(k);
                    out.push(PlannedBlock {
                        file: file.clone(),
                        offset: e.offset,
                        first_ns: e.first_ns,
                        last_ns: e.last_ns,
                        frames: e.count,
                        ranges: Vec::new(),
                    });
                }
                // A key index's run within one block: the bytes it reads.
                if f.key_index && sp.blocks.len() == 1 {
                    if let (Some(b), Some(end)) = (out.last_mut(), sp.end) {
                        b.ranges.push((sp.start, end));
                    }
                }
            }
        }
    }
    out
}

/// A capture writer into any byte stream (a file, stdout, an HTTP body),
/// as `extract` writes: snap length 262144, the given format, buffered in
/// `buffer` bytes.
pub type Output = PcapWriter<WriteSink<Box<dyn Write + Send>>>;

/// An [`Output`] over `w` of frames of link type `linktype`, named `name`
/// in errors.
pub fn output(
    w: Box<dyn Write + Send>,
    name: impl Into<PathBuf>,
    format: Format,
    buffer: usize,
    linktype: u32,
) -> Output {
    let sink = WriteSink::new(w, name, buffer);
    PcapWriter::with_link(sink, MAX_SNAPLEN, format, "wiretape-extract", linktype)
}

/// [`output`] of frames of the link types `linktypes` (pcapng: an
/// interface each, in that order; pcap: exactly one).
pub fn output_links(
    w: Box<dyn Write + Send>,
    name: impl Into<PathBuf>,
    format: Format,
    buffer: usize,
    linktypes: &[u32],
) -> Output {
    let sink = WriteSink::new(w, name, buffer);
    PcapWriter::with_links(sink, MAX_SNAPLEN, format, "wiretape-extract", linktypes)
}

/// A filter libpcap refuses for link type `lt` (of `files`): its message,
/// naming the link type and the files (libpcap's program differs per link
/// type; one that does not compile for one of them refuses the query).
fn for_linktype(
    err: wiretape_filter::FilterError,
    lt: u32,
    files: &[PathBuf],
) -> wiretape_filter::FilterError {
    use wiretape_filter::FilterError as E;
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let on = format!(
        " (compiled for link type {}, of {})",
        wiretape_filter::linktype::name(lt),
        names.join(" ")
    );
    match err {
        E::Syntax { expr, message } => E::Syntax {
            expr,
            message: format!("{message}{on}"),
        },
        E::Argument { expr, message } => E::Argument {
            expr,
            message: format!("{message}{on}"),
        },
        other => other,
    }
}

/// The link types as `--json` lists them (`linktypes`): number, name and
/// frames of each, in the order of `list` (the output's interfaces).
pub fn linktypes_json(list: &[(u32, u64)]) -> serde_json::Value {
    list.iter()
        .map(|(lt, frames)| {
            serde_json::json!({
                "linktype": lt,
                "name": wiretape_filter::linktype::name(*lt),
                "frames": frames,
            })
        })
        .collect::<Vec<_>>()
        .into()
}

/// Inputs of several link types for an output that holds one (pcap): the
/// link types, each with its files. Its text is one line naming them and
/// the way out in the library's words ([`MixedLinkTypes::with_fix`]: how a
/// caller says to ask for pcapng).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MixedLinkTypes {
    /// The link types, each with its files, in plan order.
    pub linktypes: Vec<(u32, Vec<PathBuf>)>,
}

impl MixedLinkTypes {
    /// The line, `pcapng` saying how to ask for pcapng output (e.g. a
    /// command's flag).
    pub fn with_fix(&self, pcapng: &str) -> String {
        let each: Vec<String> = self
            .linktypes
            .iter()
            .map(|(lt, files)| {
                let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                format!(
                    "{}: {}",
                    wiretape_filter::linktype::name(*lt),
                    names.join(" ")
                )
            })
            .collect();
        format!(
            "inputs of different link types ({}): a pcap file holds one link type; \
             write pcapng ({pcapng}: one interface per link type) or extract each \
             link type on its own",
            each.join("; ")
        )
    }
}

impl std::fmt::Display for MixedLinkTypes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.with_fix("the pcapng format"))
    }
}

/// When `linktypes` (link types, each with its files) holds more than
/// one: what to refuse writing them into one pcap file with.
pub fn mixed_linktypes(linktypes: &[(u32, Vec<PathBuf>)]) -> Option<MixedLinkTypes> {
    (linktypes.len() >= 2).then(|| MixedLinkTypes {
        linktypes: linktypes.to_vec(),
    })
}

/// Files [`linktypes_of`] keeps open for the merge, at most (each holds
/// two descriptors and a read buffer until the merge reads it; files past
/// these are opened again by the merge as before).
const KEEP_OPEN: usize = 16;

/// The link types of the files `plan` reads (from their headers), each
/// with its files, in plan order; a file whose header cannot be read is
/// left to the merge (which notes it). The first [`KEEP_OPEN`] files are
/// kept open as read, for the merge ([`Merge::with_opened`]): a selective
/// query over a few files opens each once, not once here and once more
/// in the merge.
fn linktypes_of(plan: &Plan) -> Result<(LinkTypes, Opened), QueryError> {
    let mut out: LinkTypes = Vec::new();
    let mut opened = Opened::new();
    for f in plan.files.iter().filter(|f| f.skip.is_none()) {
        // Its header only (a compressed capture through its decompressor).
        let (w, live) = match crate::extract::open_for_merge(&f.path, &plan.read) {
            Ok(o) => o,
            // An encrypted file no identity given opens: refused before
            // anything is written (the error names it and its recipients).
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(QueryError::Storage(wiretape_storage::StorageError::Read {
                    path: f.path.clone(),
                    source: e,
                }))
            }
            Err(_) => continue,
        };
        if w.format().is_none() {
            continue;
        }
        let lt = w.header().linktype;
        match out.iter_mut().find(|(l, _)| *l == lt) {
            Some((_, v)) => v.push(f.path.clone()),
            None => out.push((lt, vec![f.path.clone()])),
        }
        if opened.len() < KEEP_OPEN {
            opened.insert(f.path.clone(), (w, live));
        }
    }
    Ok((out, opened))
}
