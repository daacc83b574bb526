//! Stenographer's query language, as Stenographer 1.0.1 (Debian's
//! `stenographer`) reads it, run by wiretape's merge: `POST /query`,
//! `/v1/extract?steno=...` and `wiretape extract --steno-query`.
//!
//! * [`parse`]: the text to a [`Query`] (Stenographer's lexer and grammar;
//!   errors name the byte position; bounded size and depth).
//! * [`Selection`]: a query made into pieces of time, each with a classic
//!   BPF program (module `bpf`) that selects exactly the frames stenotype's index
//!   would ([`Decoded`], [`eval`]), and what the flow index may skip.
//! * [`client_config`]: the files Debian's `stenoread` and `stenocurl` read,
//!   for `wiretape certs client ... --stenographer OUT`.
//!
//! Where wiretape differs from Stenographer: time bounds are exact
//! (`after T`: stamped at or after `T`, to the nanosecond; Stenographer
//! reads whole files whose first packet is within a minute of the bound);
//! and what Stenographer's lexer silently drops (the rest of a query from
//! a character it cannot read, e.g. `port 80 AND tcp` is `port 80` there)
//! is refused here.

mod bpf;
mod config;
mod decode;
mod eval;
mod parse;
mod select;

pub use bpf::{CompileError, MAX_BITS};
pub use config::{client_config, ConfigError, StenoConfig};
pub use decode::Decoded;
pub use eval::eval;
pub use parse::{parse, ParseError, Query, MAX_DEPTH, MAX_QUERY_BYTES};
pub use select::{Part, SelectError, Selection, MAX_PARTS};

/// Why a query text cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StenoError {
    /// It does not parse.
    #[error("could not parse query: {0}")]
    Parse(#[from] ParseError),
    /// It parses but cannot be compiled.
    #[error("cannot run the query: {0}")]
    Select(#[from] SelectError),
}

/// Parses and compiles `text` (`N m ago` counted back from `now_ns`).
pub fn compile(text: &str, now_ns: u64) -> Result<Selection, StenoError> {
    Ok(Selection::new(parse(text, now_ns)?)?)
}

#[cfg(test)]
mod tests;
