//! wiretape's session table: one row per connection of a capture file,
//! with its endpoints, counts and the names its first frames carried,
//! written as Parquet beside the file (issue 38).
//!
//! - [`track`]: the connection table. A connection is the per-connection
//!   cutoff's (`wiretape_filter::conn`): IP version, the address pair, the
//!   protocol and the port pair, both directions; non-IP frames and
//!   non-first fragments are in no session. The client is the sender of
//!   the first frame, or of the SYN (a SYN-ACK seen first names its
//!   receiver). Per direction: frames and bytes on the wire; TCP flags
//!   or-ed.
//! - The parsers, each safe (no `unsafe`, every length checked, no panic
//!   on any input, bounded work and memory per connection):
//!   [`dns`] (the first question's name and type, the answers), [`tls`]
//!   (the ClientHello's SNI and ALPN, and JA4), [`http`] (the first
//!   HTTP/1.x request's method, target, Host and User-Agent), [`quic`]
//!   (the Initial's ClientHello, decrypted with the version's published
//!   Initial keys).
//! - [`text`]: names as stored: escaped and bounded, never raw control
//!   characters.
//! - [`table`]: the rows as Parquet (the column names).
//! - [`synth`]: frames and payloads for tests, the bench and fuzz seeds.
//! - [`fuzz`]: the bodies of the fuzz target `sessions` (`fuzz/`).
//!
//! Names come from the first frames of each connection only
//! ([`Config::name_frames`] per direction, [`Config::name_bytes`] of a
//! direction's stream put together in order): a ClientHello or a request
//! head split beyond them, or sent after a gap in the sequence numbers,
//! is not read; a TCP server's bytes are not read at all.
//!
//! Per frame the tracker allocates nothing for a known connection without
//! names to read: the key is built on the stack, the parsers borrow the
//! frame; a new connection costs its table entry, a named one a box for
//! its names, and a stream whose message spans frames a buffer (bounded
//! by [`Config::buffer_budget`] across all connections).

#![deny(unsafe_code)]

pub mod dns;
pub mod fuzz;
pub mod http;
pub mod names;
pub mod quic;
pub mod synth;
pub mod table;
pub mod text;
pub mod tls;
pub mod track;

#[cfg(test)]
use criterion as _;
#[cfg(test)]
use proptest as _;

pub use names::Names;
pub use table::{
    read_parquet, rows_batch, schema, to_batch, write_batch, write_parquet, write_parquet_file,
    TableError,
};
pub use track::{session_id, Config, Session, Table, TableStats, Tracker};
