//! wiretape's give-back side: everything that answers questions about a
//! store of captures, and needs no capture engine and no privileges.
//!
//! ```text
//! cli ─▶ wiretape (facade) ─┬─▶ query ─┬─▶ storage ─▶ timestamp, filter   (the give-back side)
//!                           │          ├─▶ filter
//!                           │          └─▶ timestamp
//!                           └─▶ pipeline ─┬─▶ capture ─▶ timestamp, filter
//!                                         └─▶ storage
//! ```
//!
//! - [`extract`]: the planner (which files and which `.idx` blocks can hold
//!   frames of a window) and the k-way merge of their records in time order.
//! - [`narrow`]: the plan narrowed by the indexes: the exact key index
//!   (`.kdx`) where a file has one, the `.idx` flow sets elsewhere.
//! - [`job`]: one query as the command and the API run it: the filter
//!   compiled, the indexes asked, the plan, the merge, and the JSON that
//!   `extract --json`, `--count-only --json` and `--plan` print.
//! - [`extraction`]: a whole extraction over local stores and sensors as
//!   a value (inputs, window, filter, indexes), what `wiretape extract`
//!   builds from its flags: its jobs, output link types, sensor query, merge.
//! - [`fleet`]: the index rebuild over a store and the block index as a
//!   Parquet table (`wiretape index`, `/v1/index.parquet`).
//! - [`index`]: `wiretape index` as a value: the rebuild with its
//!   progress, the fleet's block and session tables gathered, a typed
//!   [`index::Report`] (the one source of `index --json`).
//! - [`info`]: one capture file described (`wiretape info`): its counts,
//!   its `.idx` and `.kdx` summed up, as a typed [`info::FileReport`].
//! - [`status`]: what a store holds, from its names and indexes.
//! - [`timeline`]: frames and bytes per time bin from the indexes
//!   (`wiretape timeline`, `/v1/timeline`, the console's picture).
//! - [`steno`]: Stenographer's query language (`POST /query`,
//!   `extract --steno-query`), compiled to exact time pieces and programs.
//! - [`api`]: `wiretape api`, the stores of a sensor over HTTPS with mutual
//!   TLS ([`tls`]: configurations, client names, `wiretape certs`).
//! - [`words`]: which words of a command line are inputs and which a
//!   filter expression (the one rule, its ambiguities as typed errors).
//!
//! It reads the files `wiretape record` writes, including those being
//! written (up to what has been flushed); it never writes into a store
//! except the `.idx` and `.kdx` sidecars the rebuild makes.

#![deny(unsafe_code)]

pub mod api;
pub mod chart;
pub mod extract;
pub mod extraction;
pub mod fleet;
pub mod index;
pub mod info;
pub mod job;
pub mod narrow;
pub mod remote;
pub mod sessions;
pub mod status;
pub mod steno;
pub mod text;
pub mod timeline;
pub mod tls;
pub mod words;

pub use extract::{Frame, Merge, Note, NoteKind, Plan, Stats, StoreSpan, Window};
pub use job::{Job, Outcome, Request};

use std::path::PathBuf;

/// Errors of the give-back side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The filter expression does not compile (libpcap's message), or its
    /// program cannot run.
    #[error(transparent)]
    Filter(#[from] wiretape_filter::FilterError),
    /// A store could not be read or listed (an input missing, a directory
    /// that cannot be listed, a file that cannot be read).
    #[error(transparent)]
    Storage(#[from] wiretape_storage::StorageError),
    /// The Parquet table could not be built or written.
    #[error("{path}: cannot write the Parquet table: {why}")]
    Parquet {
        /// The table being written.
        path: PathBuf,
        /// What failed.
        why: String,
    },
    /// A timeline that cannot be drawn (too many bins).
    #[error("timeline: {0}")]
    Timeline(String),
    /// Inputs of several link types for an output that holds one (pcap):
    /// the files and their link types.
    #[error("{0}")]
    MixedLinkTypes(job::MixedLinkTypes),
    /// A file or directory could not be created (an output beside which
    /// more is written: `index --parquet`'s `sessions/`).
    #[error("cannot create {}: {source}", path.display())]
    Create {
        /// What could not be created.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A sensor's answer could not be had or used: its address and why.
    #[error("sensor {url}: {why}")]
    Sensor {
        /// The sensor's address.
        url: String,
        /// What went wrong.
        why: String,
    },
    /// Writing an answer failed (the output file, or a client that went away).
    #[error("cannot write {what}: {source}")]
    Output {
        /// What was being written.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl QueryError {
    /// The exit code a command gives for this error: 2 for a filter
    /// refused (usage: libpcap refuses it, or compiles it into what a
    /// saved file cannot run, such as `inbound`) and for link types an
    /// output cannot hold, 1 for the rest.
    pub fn exit_code(&self) -> i32 {
        match self {
            QueryError::Filter(_) | QueryError::MixedLinkTypes(_) => 2,
            _ => 1,
        }
    }
}
use rustls_pki_types as _;
