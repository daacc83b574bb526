//! A whole extraction as `wiretape extract` asks for it, as a value: the
//! inputs in order (runs of local paths, each one merge, and sensors), the
//! window, the filter or Stenographer query and the index switches
//! ([`Extraction`]); from it the local [`Job`]s, the link types of the
//! output, the query string the sensors are asked with and the merge over
//! all of them ([`Extraction::sources`]). A tool embedding the query side
//! builds the same extraction as the command; the command keeps its flags
//! and what it prints.

use crate::job::{Job, Pred, Request};
use crate::remote::{self, Remote, RemoteSource, RemoteStream, Source, Sources};
use crate::steno::Selection;
use crate::{Merge, QueryError, Window};
use std::path::PathBuf;
use std::sync::Arc;
use wiretape_files::ReadOptions;
use wiretape_filter::{Program, LINKTYPE_ETHERNET};

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
pub fn group_inputs(words: &[String]) -> Result<Vec<Input>, String> {
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
