//! A whole extraction as `wiretape extract` asks for it, as a value: the
//! inputs in order (runs of local paths, each one merge, and sensors), the
//! window, the filter or Stenographer query and the index switches
//! ([`Extraction`]); from it the local [`Job`]s, the link types of the
//! output, the query string the sensors are asked with and the merge over
//! all of them ([`Extraction::sources`]); the run itself, written
//! ([`Extraction::run`]) or counted ([`Extraction::count`]), with what it
//! did as a [`Report`] (the source of `--json`), what happens on the way
//! as [`Event`]s and what its session tables and damage say as
//! [`Notice`]s. A tool embedding the query side
//! builds the same extraction as the command; the command keeps its flags
//! and what it prints.

use crate::job::{self, Job, Outcome, Output, PlanStats, Pred, Request};
use crate::remote::{self, Client, Remote, RemoteSource, RemoteStream, Source, Sources};
use crate::steno::Selection;
use crate::{Merge, Note, QueryError, Stats, StoreSpan, Window};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wiretape_files::{Format, ReadOptions};
use wiretape_filter::{Program, LINKTYPE_ETHERNET};
use wiretape_storage::StorageError;

/// One input of an extraction.
#[derive(Clone, Debug)]
pub enum Input {
    /// Local directories and capture files, merged as one job.
    Local(Vec<PathBuf>),
    /// A sensor (`https://…`).
    Remote(Remote),
}

/// The inputs of `words` in order: each run of local paths one
/// [`Input::Local`], each `https://` word a sensor. The error is a sensor
/// address that does not parse.
pub fn group_inputs(words: &[String]) -> Result<Vec<Input>, remote::AddressError> {
    let mut out: Vec<Input> = Vec::new();
    for w in words {
        if remote::is_url(w) {
            out.push(Input::Remote(Remote::parse(w)?));
        } else if let Some(Input::Local(v)) = out.last_mut() {
            v.push(PathBuf::from(w));
        } else {
            out.push(Input::Local(vec![PathBuf::from(w)]));
        }
    }
    Ok(out)
}

/// What to extract, from where (see the module docs).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Extraction {
    /// The inputs, in order (ties between equal stamps keep it).
    pub inputs: Vec<Input>,
    /// The time window.
    pub window: Window,
    /// A filter expression (tcpdump's language), if any.
    pub filter: Option<String>,
    /// `filter` compiled for Ethernet (None: compiled by each job for its
    /// files' link type).
    pub program: Option<Program>,
    /// A Stenographer query instead of `filter`, compiled.
    pub steno: Option<Arc<Selection>>,
    /// In directories, only files of this prefix (default: any of ours).
    pub prefix: Option<String>,
    /// Skip blocks whose flow sets rule the filter out (default true).
    pub flow_index: bool,
    /// Use the exact key index (`.kdx`) where a file has one (default true).
    pub key_index: bool,
    /// Keep the list of planned blocks (for a plan's JSON).
    pub list_blocks: bool,
    /// Only the frames of the sessions this expression chooses, each
    /// store (and each sensor, server side) in its own session tables
    /// ([`Request::session_where`]).
    pub session_where: Option<(crate::sessions::Where, String)>,
    /// How local inputs are read: the identities of encrypted files, where
    /// the indexes of Stenographer's files are ([`Request::read`]).
    pub read: ReadOptions,
}

impl Extraction {
    /// Everything of `inputs`: no window, no filter, the indexes on.
    pub fn new(inputs: Vec<Input>) -> Extraction {
        Extraction {
            inputs,
            window: Window::default(),
            filter: None,
            program: None,
            steno: None,
            prefix: None,
            flow_index: true,
            key_index: true,
            list_blocks: false,
            session_where: None,
            read: ReadOptions::default(),
        }
    }

    /// The sensors among the inputs, in order.
    pub fn remotes(&self) -> Vec<&Remote> {
        self.inputs
            .iter()
            .filter_map(|i| match i {
                Input::Remote(r) => Some(r),
                Input::Local(_) => None,
            })
            .collect()
    }

    /// The job request of one local input.
    pub fn request(&self, paths: &[PathBuf]) -> Request {
        Request {
            inputs: paths.to_vec(),
            window: self.window,
            filter: self.filter.clone(),
            prefix: self.prefix.clone(),
            flow_index: self.flow_index,
            key_index: self.key_index,
            list_blocks: self.list_blocks,
            steno: self.steno.clone(),
            session_where: self.session_where.as_ref().map(|w| w.0.clone()),
            read: self.read.clone(),
        }
    }

    /// Plans every local input, in order (each must exist), calling
    /// `planned` with each job as it is planned (before the next is).
    pub fn plan_local(&self, mut planned: impl FnMut(&Job)) -> Result<Vec<Job>, QueryError> {
        let mut jobs = Vec::new();
        for i in &self.inputs {
            if let Input::Local(paths) = i {
                let req = self.request(paths);
                let job = match &self.steno {
                    Some(_) => Job::plan(&req)?,
                    None => Job::plan_with(&req, self.filter.clone(), self.program.clone())?,
                };
                planned(&job);
                jobs.push(job);
            }
        }
        Ok(jobs)
    }

    /// The query string the sensors are asked with (`frames`: for
    /// `/v1/extract`, else for a count or a plan); a Stenographer query
    /// goes with its times made absolute when it reads back so, else as
    /// `text` gave it.
    pub fn sensor_query(&self, frames: bool, text: Option<&str>) -> String {
        let query = remote::query_string(&self.window, self.filter.as_deref(), frames);
        let query = match (&self.steno, text) {
            (Some(sel), Some(text)) => {
                let canon = sel.query.to_string();
                let same = crate::steno::parse(&canon, 0).is_ok_and(|q| q == sel.query);
                remote::with_param(&query, "steno", if same { &canon } else { text })
            }
            _ => query,
        };
        match &self.session_where {
            // Each sensor chooses the sessions from its own tables.
            Some((_, text)) => remote::with_param(&query, "session_where", text),
            None => query,
        }
    }

    /// The merge over every input in order: `jobs` are the local inputs'
    /// ([`Extraction::plan_local`]), `streams` the sensors' answers (one
    /// per sensor, in order).
    pub fn sources(
        &self,
        jobs: Vec<Job>,
        streams: impl IntoIterator<Item = RemoteStream>,
    ) -> Sources {
        let mut jobs = jobs.into_iter();
        let mut streams = streams.into_iter();
        let sources: Vec<Source> = self
            .inputs
            .iter()
            .map(|i| match i {
                Input::Local(_) => {
                    let (m, _): (Merge<Pred>, _) =
                        jobs.next().expect("a job per local input").into_merge();
                    Source::Local(Box::new(m))
                }
                Input::Remote(r) => {
                    let s = streams.next().expect("a stream per sensor");
                    Source::Remote(Box::new(RemoteSource::new(r.clone(), s)))
                }
            })
            .collect();
        Sources::new(sources)
    }
}

/// The link types of the jobs' files, each with its files, in order.
pub fn input_linktypes(jobs: &[Job]) -> Vec<(u32, Vec<PathBuf>)> {
    let mut linktypes: Vec<(u32, Vec<PathBuf>)> = Vec::new();
    for (lt, files) in jobs.iter().flat_map(|j| j.linktypes.iter()) {
        match linktypes.iter_mut().find(|(l, _)| l == lt) {
            Some((_, v)) => v.extend(files.iter().cloned()),
            None => linktypes.push((*lt, files.clone())),
        }
    }
    linktypes
}

/// The output's link types (its pcapng interfaces), in order, each with a
/// frame count of 0: the inputs' (`input_linktypes`), and Ethernet where
/// there are none or `sensors` (they send Ethernet) and it is missing.
pub fn output_linktypes(inputs: &[(u32, Vec<PathBuf>)], sensors: bool) -> Vec<(u32, u64)> {
    let mut written: Vec<(u32, u64)> = inputs.iter().map(|l| (l.0, 0)).collect();
    if written.is_empty() || (sensors && !written.iter().any(|l| l.0 == LINKTYPE_ETHERNET)) {
        written.push((LINKTYPE_ETHERNET, 0));
    }
    written
}

/// Why the conditions of an extraction cannot be taken together, or do not
/// compile ([`Extraction::select`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// A Stenographer query and a filter expression at once.
    #[error("a Stenographer query and a filter expression ('{filter}'): give the conditions in one language, not both")]
    Both {
        /// The filter expression.
        filter: String,
    },
    /// The Stenographer query does not compile.
    #[error("the Stenographer query: {0}")]
    Steno(#[source] crate::steno::StenoError),
    /// The sessions' expression does not parse.
    #[error("the sessions' expression: {0}")]
    SessionWhere(#[source] crate::sessions::WhereError),
    /// The filter expression does not compile (libpcap's message).
    #[error(transparent)]
    Filter(#[from] wiretape_filter::FilterError),
}

/// Why the output cannot be written as asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// Several link types for a pcap output (a pcap file holds one).
    #[error("{0}")]
    Mixed(job::MixedLinkTypes),
    /// Local inputs of a link type other than Ethernet, and sensors (which
    /// send Ethernet), for a pcap output.
    #[error("local inputs of link type {} and sensors (ethernet): a pcap file holds one link type; write pcapng or extract them on their own", wiretape_filter::linktype::name(*linktype))]
    LocalAndSensors {
        /// The local inputs' link type.
        linktype: u32,
    },
    /// The output is a directory.
    #[error("{} is a directory: the output is a file", path.display())]
    IsDirectory {
        /// The output.
        path: PathBuf,
    },
    /// The output is one of the inputs.
    #[error("{} is one of the inputs ({})", path.display(), input.display())]
    IsInput {
        /// The output.
        path: PathBuf,
        /// The input it is.
        input: PathBuf,
    },
    /// The output cannot be created.
    #[error("cannot create {}: {source}", path.display())]
    Create {
        /// The output.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl Extraction {
    /// Sets the conditions: a filter expression, or a Stenographer query
    /// (compiled at `now_ns` for its relative times), and the sessions'
    /// expression, each checked in that order before anything is read.
    pub fn select(
        &mut self,
        filter: Option<String>,
        steno: Option<&str>,
        session_where: Option<&str>,
        now_ns: u64,
    ) -> Result<(), SelectError> {
        self.steno = match (steno, &filter) {
            (None, _) => None,
            (Some(_), Some(f)) => return Err(SelectError::Both { filter: f.clone() }),
            (Some(q), None) => Some(Arc::new(
                crate::steno::compile(q, now_ns).map_err(SelectError::Steno)?,
            )),
        };
        self.session_where = match session_where {
            Some(w) => Some((
                crate::sessions::Where::parse(w).map_err(SelectError::SessionWhere)?,
                w.to_string(),
            )),
            None => None,
        };
        self.program = match &filter {
            Some(e) => Some(wiretape_filter::compile(
                e,
                LINKTYPE_ETHERNET,
                wiretape_files::pcap::MAX_SNAPLEN,
            )?),
            None => None,
        };
        self.filter = filter;
        Ok(())
    }

    /// The output's link types (its pcapng interfaces), in order
    /// ([`output_linktypes`] of the jobs' [`input_linktypes`]). Err where a
    /// pcap output (not `pcapng`) cannot hold them: several link types
    /// when frames are written (`writes`: not a count or a plan), or local
    /// inputs of another link type than Ethernet with sensors.
    pub fn output_linktypes(
        &self,
        jobs: &[Job],
        pcapng: bool,
        writes: bool,
    ) -> Result<Vec<(u32, u64)>, OutputError> {
        let linktypes = input_linktypes(jobs);
        let linktype = linktypes.first().map_or(LINKTYPE_ETHERNET, |l| l.0);
        let sensors = !self.remotes().is_empty();
        if let Some(m) = job::mixed_linktypes(&linktypes) {
            if !pcapng && writes {
                return Err(OutputError::Mixed(m));
            }
        }
        if linktype != LINKTYPE_ETHERNET && sensors && !pcapng {
            return Err(OutputError::LocalAndSensors { linktype });
        }
        Ok(output_linktypes(&linktypes, sensors))
    }
}

/// The output file `out` created (or overwritten): never a directory, nor
/// one of `inputs` (the same file by device and inode).
pub fn create_output(out: &Path, inputs: &[&Path]) -> Result<std::fs::File, OutputError> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(m) = std::fs::metadata(out) {
        if m.is_dir() {
            return Err(OutputError::IsDirectory { path: out.into() });
        }
        let same =
            |p: &Path| std::fs::metadata(p).is_ok_and(|i| (i.dev(), i.ino()) == (m.dev(), m.ino()));
        if let Some(f) = inputs.iter().find(|f| same(f)) {
            return Err(OutputError::IsInput {
                path: out.into(),
                input: f.to_path_buf(),
            });
        }
    }
    std::fs::File::create(out).map_err(|source| OutputError::Create {
        path: out.into(),
        source,
    })
}

/// The plans of several jobs as one plan's JSON (one job: its own).
pub fn plan_json(jobs: &[Job]) -> serde_json::Value {
    if let [one] = jobs {
        return one.plan_json();
    }
    let mut all = serde_json::json!({
        "blocks": [], "blocks_skipped_by_flow_index": 0, "filter_narrows": false,
        "files_read_whole": [], "from_ns": null, "to_ns": null,
    });
    for job in jobs {
        let p = job.plan_json();
        for k in ["blocks", "files_read_whole"] {
            if let (Some(a), Some(b)) = (all[k].as_array_mut(), p[k].as_array()) {
                a.extend(b.iter().cloned());
            }
        }
        for k in [
            "blocks_skipped_by_flow_index",
            "blocks_skipped_by_key_index",
            "blocks_selected",
            "runs",
            "files_key_index",
            "index_bytes_read",
        ] {
            all[k] = (all[k].as_u64().unwrap_or(0) + p[k].as_u64().unwrap_or(0)).into();
        }
        all["filter_narrows"] = p["filter_narrows"].clone();
        all["from_ns"] = p["from_ns"].clone();
        all["to_ns"] = p["to_ns"].clone();
    }
    all
}

/// What happens while an extraction runs, as it happens, in order (the
/// command prints each on stderr).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A local file's note: no index, damage, an error, out of order.
    Note(&'a Note),
    /// A sensor failed: its address and what went wrong.
    SensorFailed {
        /// The sensor's address.
        url: &'a str,
        /// What went wrong.
        error: &'a str,
    },
}

/// What an extraction ([`Extraction::run`]) or a count
/// ([`Extraction::count`]) did, over every input.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Report {
    /// The counts (the sensors' included), every local note, the seconds.
    pub outcome: Outcome,
    /// Whether a local job's filter narrowed its plan through the indexes.
    pub filter_narrows: bool,
    /// The local plans' block counts, summed.
    pub plan: PlanStats,
    /// The output's link types with the frames of each, in order.
    pub linktypes: Vec<(u32, u64)>,
    /// Per sensor, in order, its part as `--json` says it (`sensors`).
    pub sensors: Vec<serde_json::Value>,
    /// How many sensors failed.
    pub sensors_failed: usize,
    /// How many local inputs (jobs) there were.
    pub local_inputs: usize,
    /// The sessions `session_where` chose in each local store.
    pub sessions: Vec<Arc<crate::sessions::Selected>>,
}

impl Report {
    fn new(jobs: &[Job], linktypes: Vec<(u32, u64)>) -> Report {
        Report {
            outcome: Outcome {
                stats: Stats::default(),
                notes: Vec::new(),
                seconds: 0.0,
                stopped: false,
            },
            filter_narrows: jobs.iter().any(|j| j.filter_narrows),
            plan: jobs.iter().fold(PlanStats::default(), |mut a, j| {
                a += j.plan_stats;
                a
            }),
            linktypes,
            sensors: Vec::new(),
            sensors_failed: 0,
            local_inputs: jobs.len(),
            sessions: jobs.iter().filter_map(|j| j.sessions.clone()).collect(),
        }
    }

    /// The damage the run met, if any ([`Notice::Damaged`]).
    pub fn damage(&self) -> Option<Notice> {
        let files = self.outcome.stats.damaged_files;
        (files > 0).then_some(Notice::Damaged { files })
    }

    /// 1 when a file could not be read, was damaged (unless
    /// `ignore_corrupt`) or a sensor failed; else 0.
    pub fn exit_code(&self, ignore_corrupt: bool) -> i32 {
        self.outcome
            .exit_code(ignore_corrupt)
            .max(i32::from(self.sensors_failed > 0))
    }

    /// The JSON of `wiretape extract --json` (`output`: the output's name,
    /// None for a count; `steno_query`: the query as the user wrote it).
    pub fn summary_json(
        &self,
        ex: &Extraction,
        output: Option<&str>,
        format: Format,
        steno_query: Option<&str>,
    ) -> serde_json::Value {
        let mut j = job::summary_json(
            ex.filter.as_deref(),
            self.filter_narrows,
            &self.plan,
            &ex.window,
            &self.outcome,
            output,
            format,
        );
        j["linktypes"] = job::linktypes_json(&self.linktypes);
        if let Some(q) = steno_query {
            j["steno_query"] = q.into();
        }
        if let Some((_, w)) = &ex.session_where {
            j["session_where"] = w.as_str().into();
            j["sessions"] = sessions_json(&self.sessions);
        }
        if ex.inputs.iter().any(|i| matches!(i, Input::Remote(_))) {
            j["sensors"] = self.sensors.clone().into();
        }
        j
    }
}

/// What an extraction's selection or result says besides its counts, with
/// the numbers it says (the command prints each on stderr, with its flags'
/// words; `Display` is the library's words).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// A store's session table could not be read.
    TableUnreadable {
        /// The table.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// Session tables written while frames were skipped: sessions may be
    /// missing from the choice.
    TablesIncomplete {
        /// Their capture files' names.
        tables: Vec<String>,
    },
    /// Capture files without a session table: their frames cannot be chosen.
    FilesWithoutTable {
        /// How many.
        files: usize,
    },
    /// The sessions chosen from a store's tables.
    SessionsChosen {
        /// Distinct sessions.
        sessions: usize,
        /// Their connections.
        connections: usize,
        /// The tables read.
        tables: usize,
    },
    /// Damaged files: every valid frame before (and, with an index, after)
    /// the damage was extracted.
    Damaged {
        /// How many.
        files: u64,
    },
    /// Files of other link types than Ethernet that a Stenographer query
    /// leaves unread ([`Job::not_ethernet`]).
    NotEthernet {
        /// The files, in the plan's order.
        files: Vec<PathBuf>,
    },
}

impl Notice {
    /// Whether the notice warns (the result may lack frames it should hold).
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            Notice::TablesIncomplete { .. } | Notice::FilesWithoutTable { .. }
        )
    }

    /// Whether the notice is one of a summary (the command's `--quiet`
    /// leaves it out).
    pub fn is_summary(&self) -> bool {
        matches!(self, Notice::SessionsChosen { .. })
    }
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::TableUnreadable { path, error } => {
                write!(f, "sessions: {}: {error}", path.display())
            }
            Notice::TablesIncomplete { tables } => write!(
                f,
                "{} session tables incomplete (frames skipped while recording: sessions may be \
                 missing; `wiretape index --force FILE` rebuilds one): {}",
                tables.len(),
                tables.join(", ")
            ),
            Notice::FilesWithoutTable { files } => write!(
                f,
                "{files} capture files have no session table (their frames cannot be chosen; \
                 `wiretape index` writes them)"
            ),
            Notice::SessionsChosen {
                sessions,
                connections,
                tables,
            } => write!(
                f,
                "{sessions} sessions ({connections} connections) chosen from {tables} tables"
            ),
            Notice::Damaged { files } => write!(
                f,
                "{files} damaged file(s): every valid frame before (and, with an index, after) \
                 the damage was extracted"
            ),
            Notice::NotEthernet { files } => write!(
                f,
                "note: {} file(s) of other link types than Ethernet not read (a Stenographer \
                 query selects Ethernet frames): {}",
                files.len(),
                files
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        }
    }
}

/// What a planned job says before anything is read: the files of other
/// link types than Ethernet a Stenographer query leaves unread, if any
/// ([`Extraction::plan_local`] hands each job as it is planned).
pub fn plan_notice(job: &Job) -> Option<Notice> {
    (!job.not_ethernet.is_empty()).then(|| Notice::NotEthernet {
        files: job.not_ethernet.clone(),
    })
}

/// What each local store's session tables (`session_where`'s choice in
/// `jobs`) say, store by store: the tables that could not be read, the
/// incomplete ones, the files without one, then the sessions chosen.
pub fn session_notices(jobs: &[Job]) -> Vec<Notice> {
    let mut v = Vec::new();
    for s in jobs.iter().filter_map(|j| j.sessions.as_deref()) {
        for (path, error) in &s.unreadable {
            v.push(Notice::TableUnreadable {
                path: path.clone(),
                error: error.clone(),
            });
        }
        if !s.incomplete.is_empty() {
            v.push(Notice::TablesIncomplete {
                tables: s.incomplete.clone(),
            });
        }
        if !s.without.is_empty() {
            v.push(Notice::FilesWithoutTable {
                files: s.without.len(),
            });
        }
        v.push(Notice::SessionsChosen {
            sessions: s.sessions,
            connections: s.connections(),
            tables: s.tables,
        });
    }
    v
}

/// The sessions `session_where` chose in the local stores, summed, as
/// `extract --json` says them (`sessions`).
pub fn sessions_json(sel: &[Arc<crate::sessions::Selected>]) -> serde_json::Value {
    let mut j = serde_json::json!({"matched": 0, "connections": 0, "tables": 0, "incomplete": [], "files_without_table": []});
    for s in sel {
        let v = s.to_json();
        for k in ["matched", "connections", "tables"] {
            j[k] = (j[k].as_u64().unwrap_or(0) + v[k].as_u64().unwrap_or(0)).into();
        }
        for k in ["incomplete", "files_without_table"] {
            if let (Some(a), Some(b)) = (j[k].as_array_mut(), v[k].as_array()) {
                a.extend(b.iter().cloned());
            }
        }
    }
    j
}

impl Extraction {
    /// Asks every sensor at once for its frames (`query`: from
    /// [`Extraction::sensor_query`]); their answers stream meanwhile. None
    /// without a client (no sensors).
    pub fn ask_sensors(&self, client: Option<&Client>, query: &str) -> Vec<RemoteStream> {
        match client {
            Some(c) => self
                .remotes()
                .into_iter()
                .map(|r| c.stream(r, &format!("/v1/extract?{query}")))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Writes every frame of `jobs` (the local inputs',
    /// [`Extraction::plan_local`]) and of `streams` (the sensors',
    /// [`Extraction::ask_sensors`]) to `out` in time order, on the
    /// interface of its link type among `linktypes`
    /// ([`output_linktypes`]), then flushes and closes it. `event` hears
    /// each note and sensor failure as it happens. The error: the output
    /// could not be written.
    pub fn run(
        &self,
        jobs: Vec<Job>,
        streams: Vec<RemoteStream>,
        mut out: Output,
        linktypes: Vec<(u32, u64)>,
        mut event: impl FnMut(Event<'_>),
    ) -> Result<Report, StorageError> {
        let mut report = Report::new(&jobs, linktypes);
        let lts: Vec<u32> = report.linktypes.iter().map(|l| l.0).collect();
        let started = std::time::Instant::now();
        let mut merge = self.sources(jobs, streams);
        let mut notes = Vec::new();
        let mut say = |n: Note, event: &mut dyn FnMut(Event<'_>)| {
            event(Event::Note(&n));
            notes.push(n);
        };
        let mut wrote = Ok(());
        while let Some(f) = merge.next() {
            let i = f.source;
            let itf = lts.iter().position(|&l| l == f.linktype).unwrap_or(0);
            report.linktypes[itf].1 += 1;
            if let Err(e) = out.write_wire_on(itf as u32, f.ts_ns, f.data, f.orig_len) {
                wrote = Err(e);
                break;
            }
            if let Source::Local(m) = &mut merge.sources_mut()[i] {
                if !m.notes().is_empty() {
                    m.take_notes().into_iter().for_each(|n| say(n, &mut event));
                }
            }
        }
        wrote?;
        out.flush()?;
        out.close().map_err(|(_, e)| e)?;
        let mut stats = Stats::default();
        for s in merge.into_sources() {
            match s {
                Source::Local(mut m) => {
                    m.take_notes().into_iter().for_each(|n| say(n, &mut event));
                    stats += m.finish();
                }
                Source::Remote(r) => {
                    if let Some(f) = r.failure() {
                        report.sensors_failed += 1;
                        event(Event::SensorFailed {
                            url: &r.remote.url,
                            error: f,
                        });
                    }
                    stats.store_span = StoreSpan::union(
                        stats.store_span,
                        r.summary()
                            .and_then(|j| StoreSpan::from_json(&j["store_span"])),
                    );
                    report.sensors.push(serde_json::json!({
                        "url": r.remote.url,
                        "frames": r.frames,
                        "bytes": r.bytes,
                        "wire_bytes": r.wire_bytes,
                        "error": r.failure(),
                        "summary": r.summary(),
                    }));
                    stats.frames += r.frames;
                    stats.bytes += r.bytes;
                    stats.wire_bytes += r.wire_bytes;
                }
            }
        }
        report.outcome.stats = stats;
        report.outcome.notes = notes;
        report.outcome.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Counts the frames of `jobs` (the local inputs') per link type of
    /// `linktypes`, and asks each sensor's `/v1/count` (`query`: from
    /// [`Extraction::sensor_query`]), summed. `event` hears each note and
    /// sensor failure as it happens.
    pub fn count(
        &self,
        jobs: Vec<Job>,
        client: Option<&Client>,
        query: &str,
        linktypes: Vec<(u32, u64)>,
        mut event: impl FnMut(Event<'_>),
    ) -> Report {
        let mut report = Report::new(&jobs, linktypes);
        let started = std::time::Instant::now();
        let mut stats = Stats::default();
        for job in jobs {
            let counted = &mut report.linktypes;
            let o = job
                .run(
                    |f| {
                        if let Some(l) = counted.iter_mut().find(|l| l.0 == f.linktype) {
                            l.1 += 1;
                        }
                        Ok::<(), std::convert::Infallible>(())
                    },
                    |n| event(Event::Note(n)),
                )
                .unwrap_or_else(|never| match never {});
            stats += o.stats;
            report.outcome.notes.extend(o.notes);
        }
        if let Some(c) = client {
            for r in self.remotes() {
                match c.get_json(r, &format!("/v1/count?{query}")) {
                    Ok(v) => {
                        let n = |k: &str| v[k].as_u64().unwrap_or(0);
                        if let Some(l) = report
                            .linktypes
                            .iter_mut()
                            .find(|l| l.0 == LINKTYPE_ETHERNET)
                        {
                            l.1 += n("frames");
                        }
                        stats.frames += n("frames");
                        stats.bytes += n("bytes");
                        stats.wire_bytes += n("wire_bytes");
                        stats.store_span = StoreSpan::union(
                            stats.store_span,
                            StoreSpan::from_json(&v["store_span"]),
                        );
                        report
                            .sensors
                            .push(serde_json::json!({ "url": r.url, "count": v }));
                    }
                    Err(e) => {
                        report.sensors_failed += 1;
                        event(Event::SensorFailed {
                            url: &r.url,
                            error: &e.0,
                        });
                        report
                            .sensors
                            .push(serde_json::json!({ "url": r.url, "error": e.0 }));
                    }
                }
            }
        }
        report.outcome.stats = stats;
        report.outcome.seconds = started.elapsed().as_secs_f64();
        report
    }

    /// The plan of `jobs` ([`plan_json`]) and, with a client, each
    /// sensor's `/v1/plan` beside it (`sensors`); with how many sensors
    /// failed (`event` hears each failure).
    pub fn plan_all(
        &self,
        jobs: &[Job],
        client: Option<&Client>,
        query: &str,
        mut event: impl FnMut(Event<'_>),
    ) -> (serde_json::Value, usize) {
        let mut j = plan_json(jobs);
        let mut failed = 0;
        if let Some(c) = client {
            let mut sensors = Vec::new();
            for r in self.remotes() {
                match c.get_json(r, &format!("/v1/plan?{query}")) {
                    Ok(p) => sensors.push(serde_json::json!({ "url": r.url, "plan": p })),
                    Err(e) => {
                        failed += 1;
                        event(Event::SensorFailed {
                            url: &r.url,
                            error: &e.0,
                        });
                        sensors.push(serde_json::json!({ "url": r.url, "error": e.0 }));
                    }
                }
            }
            j["sensors"] = sensors.into();
        }
        (j, failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiretape_files::naming;
    use wiretape_storage::{FileSink, PcapWriter};

    /// A store of two capture files of ours (no session tables: the
    /// writer alone writes none), 50 frames each; the second is torn.
    #[test]
    fn notices_say_the_store_and_the_damage() {
        let d = std::env::temp_dir().join(format!("wt-notices-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let t0 = 1_763_806_210_000_000_000u64;
        let mut files = Vec::new();
        for q in 0..2u32 {
            let p = d.join(naming::file_name("wt", "eth-0", q, t0, Format::PcapNs));
            let sink = FileSink::with_block_size(&p, 4096).unwrap();
            let mut w =
                PcapWriter::with_format(sink, 65535, Format::PcapNs, "eth-0").with_index(&p);
            for i in 0..50u64 {
                w.write(t0 + i * 1_000, &[i as u8; 100]).unwrap();
            }
            w.close().unwrap();
            files.push(p);
        }
        let len = std::fs::metadata(&files[1]).unwrap().len();
        std::fs::File::options()
            .write(true)
            .open(&files[1])
            .unwrap()
            .set_len(len - 3)
            .unwrap();

        let mut ex = Extraction::new(vec![Input::Local(vec![d.clone()])]);
        ex.select(None, None, Some("server_port = 443"), t0)
            .unwrap();
        let jobs = ex.plan_local(|_| {}).unwrap();
        let notices = session_notices(&jobs);
        assert_eq!(
            notices,
            [
                Notice::FilesWithoutTable { files: 2 },
                Notice::SessionsChosen {
                    sessions: 0,
                    connections: 0,
                    tables: 0
                }
            ]
        );
        assert!(notices[0].is_warning() && !notices[0].is_summary());
        assert!(!notices[1].is_warning() && notices[1].is_summary());
        assert_eq!(
            notices[0].to_string(),
            "2 capture files have no session table (their frames cannot be chosen; \
             `wiretape index` writes them)"
        );
        assert_eq!(
            notices[1].to_string(),
            "0 sessions (0 connections) chosen from 0 tables"
        );

        // Every frame, counted: the torn file's last record is damage.
        let mut plain = Extraction::new(vec![Input::Local(vec![d.clone()])]);
        plain.select(None, None, None, t0).unwrap();
        let jobs = plain.plan_local(|_| {}).unwrap();
        assert!(session_notices(&jobs).is_empty());
        let lts = plain.output_linktypes(&jobs, false, false).unwrap();
        let r = plain.count(jobs, None, "", lts, |_| {});
        assert_eq!(r.outcome.stats.frames, 99);
        assert_eq!(r.damage(), Some(Notice::Damaged { files: 1 }));
        assert_eq!(
            r.damage().unwrap().to_string(),
            "1 damaged file(s): every valid frame before (and, with an index, after) the damage \
             was extracted"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A hand-made pcap file of `linktype` with `n` frames of 60 bytes.
    fn pcap(p: &Path, linktype: u32, n: u32) {
        let mut b = Vec::new();
        for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, linktype] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for i in 0..n {
            for v in [1_763_806_210 + i, 0, 60, 60] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(&[i as u8; 60]);
        }
        std::fs::write(p, b).unwrap();
    }

    #[test]
    fn a_stenographer_query_notes_the_files_of_other_link_types() {
        let d = std::env::temp_dir().join(format!("wt-notice-lt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let (eth, raw) = (d.join("eth.pcap"), d.join("raw.pcap"));
        pcap(&eth, wiretape_files::LINKTYPE_ETHERNET, 10);
        pcap(&raw, 101, 7);
        let inputs = vec![Input::Local(vec![eth.clone(), raw.clone()])];
        let mut ex = Extraction::new(inputs.clone());
        ex.select(None, Some("port 443"), None, 1_763_806_300_000_000_000)
            .unwrap();
        let jobs = ex.plan_local(|_| {}).unwrap();
        let n = plan_notice(&jobs[0]).unwrap();
        assert_eq!(
            n,
            Notice::NotEthernet {
                files: vec![raw.clone()]
            }
        );
        assert!(!n.is_warning() && !n.is_summary());
        assert_eq!(
            n.to_string(),
            format!(
                "note: 1 file(s) of other link types than Ethernet not read (a Stenographer \
                 query selects Ethernet frames): {}",
                raw.display()
            )
        );
        // tcpdump's filter reads every link type: nothing to note.
        let mut plain = Extraction::new(inputs);
        plain.select(None, None, None, 0).unwrap();
        let jobs = plain.plan_local(|_| {}).unwrap();
        assert_eq!(plan_notice(&jobs[0]), None);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
