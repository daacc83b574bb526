//! `wiretape index`: (re)builds missing or outdated `.idx` sidecars (block
//! times and flow sets) with a progress bar, and exports the block index of
//! a store as a Parquet table for fleet-wide queries (`--parquet`). The
//! rebuild and the table are the query crate's (`query::fleet`).

use anyhow::{anyhow, bail, Result};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wiretape::pipeline::summary::{bytes_h, thousands};
use wiretape::query::fleet;
use wiretape::query::index::{Event, Indexing, Meter, Table};
use wiretape::query::remote;

#[derive(clap::Args)]
#[command(
    after_help = "Each capture file has two indexes: its .idx (per block: time, offset, frames, and \
flow sets of at most 1,024 values of a kind) and its key index, .kdx (every host, port, protocol, \
VLAN and EtherType to the places of its frames, however many a block holds). They are rebuilt \
(both, in one read of the file) when the .idx is missing, unreadable, of an older format (no flow \
sets) or older than its capture file, or the .kdx is missing, incomplete (a crash, or its builder \
fell behind while recording) or stale; --force rebuilds every one. Files being written are left to \
their writer (its indexes grow as blocks go out). A file without its session table (.sessions.parquet: one row per connection with its names, see `wiretape sessions --help`; missing when recorded with --no-sessions or before) is read again too, and gets one; connections go on from one file of a queue's series to the next, with their session_id, when both are rebuilt in one run. In a directory only files named like wiretape's \
are indexed; a file named on the command line is indexed whatever its name.\n\n\
--parquet writes one row per block: node, file, iface, queue, block, offset, bytes, frames, \
first_ns, last_ns, first_time, last_time, and the flow keys ether_types, vlans, protos, ip4, ip6, \
ports (lists). A file with a key index has exact lists: every value of the block, never NULL. \
Otherwise they are the .idx flow sets: NULL when the block held too many of that kind to list, or \
its index has no flow sets (such a block may hold anything). Every sensor writes its own table to \
a shared place; one SQL query over all of them says which sensors and files hold what:\n\n  \
SELECT node, file, offset FROM 'idx/*.parquet'\n   \
WHERE last_ns >= 1763820120000000000 AND first_ns < 1763820300000000000\n     \
AND (ip4 IS NULL OR list_contains(ip4, '10.1.2.3'))\n\n\
--parquet OUT also gathers the inputs' session tables (local files', and every sensor's \
/v1/sessions) into one Parquet file, sessions/NAME in OUT's directory (NAME: OUT's file name): \
the columns of a session table (see `wiretape sessions --help`) after node. Every sensor writing \
its own makes a data set one glob reads:\n\n  \
SELECT node, client_ip, server_ip, tls_sni FROM 'idx/sessions/*.parquet' WHERE tls_sni LIKE '%.evil-cdn.net'\n\n\
INPUTS: every word is an input (a directory, a capture file, with --parquet an https:// sensor); \
index takes no filter words. A word that is both an existing file or directory here and a filter \
word (tcp, host, ...) is refused as ambiguous: write ./WORD for the file.\n\n\
Examples:\n  \
wiretape index /data\n  \
wiretape index --force /data/wiretape-eth0-q0-20261122T140200.000000000Z.pcap\n  \
wiretape index --parquet /shared/idx/$(hostname).parquet /data"
)]
pub(crate) struct Args {
    #[command(flatten)]
    read: crate::common::ReadArgs,
    /// Directories and capture files; with --parquet also sensors
    /// (https://HOST:PORT: their fresh /v1/index.parquet joins the table).
    #[arg(value_name = "DIR|FILE|URL", required = true)]
    inputs: Vec<String>,
    /// Rebuild every index, up to date or not.
    #[arg(long)]
    force: bool,
    /// Also write the block index of all inputs as a Parquet table to OUT.
    #[arg(long, value_name = "OUT.parquet")]
    parquet: Option<PathBuf>,
    /// The node (sensor) name in the Parquet table. Default: the host name.
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// In directories, only files of this prefix (default: any of ours).
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// A JSON summary on stdout.
    #[arg(long)]
    json: bool,
    /// No progress and no summary on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    #[command(flatten)]
    tls: crate::common::tls::ClientTls,
}

/// The progress bar on stderr (the library's [`Meter`] line): redrawn at
/// most 5 times a second on a terminal, a line every 10 s otherwise.
struct Bar {
    meter: Meter,
    start: Instant,
    last: Instant,
    tty: bool,
    quiet: bool,
}

impl Bar {
    fn show(&mut self, force: bool) {
        if self.quiet {
            return;
        }
        let every = if self.tty {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(10)
        };
        if !force && self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        let line = self.meter.line(self.start.elapsed());
        if self.tty {
            eprint!("\r{line}\x1b[K");
        } else {
            eprintln!("wiretape: index: {line}");
        }
    }

    /// Ends the bar's line on a terminal (before another line).
    fn break_line(&self) {
        if self.tty && !self.quiet {
            eprintln!();
        }
    }
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let read = a.read.options()?;
    let words = match crate::common::inputs::inputs_only(&a.inputs, "index", "") {
        Ok(w) => w,
        Err(e) => return crate::common::usage_exit(e),
    };
    let (local, remotes) = match remote::split_inputs(&words) {
        Ok(s) => s,
        Err(e) => return crate::common::usage_exit(crate::common::flags::address_line(&e)),
    };
    if !remotes.is_empty() && a.parquet.is_none() {
        return crate::common::usage_exit(format!(
            "{}: a sensor's indexes are its own to rebuild: give --parquet OUT to gather its table",
            remotes[0].url
        ));
    }
    let client = match a.tls.client(&remotes.iter().collect::<Vec<_>>()) {
        Ok(c) => c,
        Err(e) => return crate::common::usage_exit(e),
    };
    let files = fleet::captures(&local, a.prefix.as_deref()).map_err(|e| anyhow!("{e}"))?;
    if let Some(out) = &a.parquet {
        if out.is_dir() {
            bail!(
                "--parquet {} is a directory: give a file name, e.g. {}/$(hostname).parquet",
                out.display(),
                out.display()
            );
        }
    }
    let mut ix = Indexing::new(files, read);
    ix.local = !local.is_empty();
    ix.remotes = remotes;
    ix.force = a.force;
    ix.parquet = a.parquet.clone();
    ix.node = a.node.clone().unwrap_or_else(fleet::hostname);
    let mut bar = Bar {
        meter: Meter::new(),
        start: Instant::now(),
        last: Instant::now() - Duration::from_secs(60),
        tty: std::io::stderr().is_terminal(),
        quiet: a.quiet,
    };
    let r = ix
        .run(client.as_ref(), &mut |e| {
            bar.meter.update(&e);
            match e {
                Event::Start { files, .. } => bar.quiet |= files == 0,
                Event::Progress { .. } => bar.show(false),
                Event::Failed { file, error } => {
                    bar.break_line();
                    eprintln!(
                        "wiretape: index: {}: {}",
                        file.display(),
                        crate::common::flags::storage_text(error)
                    );
                }
                Event::Rebuilt => {
                    bar.show(true);
                    bar.break_line();
                }
                Event::NoIndex { file, error } => eprintln!(
                    "wiretape: index: {}: no usable index ({error}): not in the table",
                    file.display()
                ),
                Event::SessionsUnreadable { file, error } => eprintln!(
                    "wiretape: index: {}: {error}: not in the sessions table",
                    file.display()
                ),
                Event::SensorNote(n) => eprintln!("wiretape: sessions: {n}"),
                Event::SensorFailed { url, error, table } => eprintln!(
                    "wiretape: error: sensor {url}: {error}: not in the {}table",
                    if table == Table::Sessions {
                        "sessions "
                    } else {
                        ""
                    }
                ),
                _ => {}
            }
        })
        .map_err(|e| anyhow!("{e}"))?;
    if a.json {
        println!("{}", serde_json::to_string(&r.to_json())?);
    } else if !a.quiet {
        eprintln!(
            "wiretape: index: {} files: {} rebuilt ({} read in {:.1} s), {} up to date, {} being \
             written (left to their writer), {} failed{}{}",
            r.files,
            r.rebuilt,
            bytes_h(r.bytes_read),
            r.seconds,
            r.up_to_date,
            r.being_written,
            r.failed,
            r.parquet
                .as_ref()
                .map(|p| format!("; {} blocks to {p}", thousands(r.parquet_rows as u64)))
                .unwrap_or_default(),
            r.sessions_parquet
                .as_ref()
                .zip(r.sessions_parquet_rows)
                .map(|(p, n)| format!(", {} sessions to {p}", thousands(n as u64)))
                .unwrap_or_default()
        );
    }
    Ok(r.exit_code())
}
