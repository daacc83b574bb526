//! `wiretape index`: (re)builds missing or outdated `.idx` sidecars (block
//! times and flow sets) with a progress bar, and exports the block index of
//! a store as a Parquet table for fleet-wide queries (`--parquet`). The
//! rebuild and the table are the query crate's (`query::fleet`).

use anyhow::{anyhow, bail, Result};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wiretape::pipeline::summary::{bytes_h, thousands};
use wiretape::query::fleet::{self, Outcome};
use wiretape::query::remote::{self, Remote};
use wiretape::query::Window;

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

/// A progress bar on stderr: redrawn at most 5 times a second on a
/// terminal, a line every 10 s otherwise.
struct Bar {
    total: u64,
    done: u64,
    start: Instant,
    last: Instant,
    tty: bool,
    quiet: bool,
    files: (usize, usize),
}

impl Bar {
    fn show(&mut self, now_in_file: u64, force: bool) {
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
        let done = self.done + now_in_file;
        let secs = self.start.elapsed().as_secs_f64().max(1e-3);
        let rate = done as f64 / secs;
        let frac = if self.total == 0 {
            1.0
        } else {
            (done as f64 / self.total as f64).min(1.0)
        };
        let eta = if rate > 0.0 {
            (self.total.saturating_sub(done)) as f64 / rate
        } else {
            0.0
        };
        let w = 30;
        let fill = (frac * w as f64) as usize;
        let line = format!(
            "[{}{}] {:>3.0}% {} of {}, {}/s, ETA {:.0} s, file {} of {}",
            "#".repeat(fill),
            " ".repeat(w - fill),
            frac * 100.0,
            bytes_h(done),
            bytes_h(self.total),
            bytes_h(rate as u64),
            eta,
            self.files.0,
            self.files.1
        );
        if self.tty {
            eprint!("\r{line}\x1b[K");
        } else {
            eprintln!("wiretape: index: {line}");
        }
    }
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let read = a.read.options()?;
    let words = match crate::common::inputs::inputs_only(&a.inputs, "index", "") {
        Ok(w) => w,
        Err(e) => return crate::common::usage_exit(e),
    };
    let mut local = Vec::new();
    let mut remotes = Vec::new();
    for i in &words {
        if remote::is_url(i) {
            match Remote::parse(i) {
                Ok(r) => remotes.push(r),
                Err(e) => return crate::common::usage_exit(e),
            }
        } else {
            local.push(PathBuf::from(i));
        }
    }
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
    let started = Instant::now();
    let (todo, _) = fleet::triage(&files, &read, a.force);
    let total: u64 = todo
        .iter()
        .map(|(f, _)| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let lens: Vec<u64> = todo
        .iter()
        .map(|(f, _)| std::fs::metadata(f).map_or(0, |m| m.len()))
        .collect();
    let mut bar = Bar {
        total,
        done: 0,
        start: Instant::now(),
        last: Instant::now() - Duration::from_secs(60),
        tty: std::io::stderr().is_terminal(),
        quiet: a.quiet || todo.is_empty(),
        files: (0, todo.len()),
    };
    let r = {
        let bar = std::cell::RefCell::new(&mut bar);
        fleet::rebuild(
            &files,
            &read,
            a.force,
            &mut |n, at| {
                let mut b = bar.borrow_mut();
                if b.files.0 != n {
                    // A new file: the one before is done.
                    if b.files.0 > 0 {
                        b.done += lens[b.files.0 - 1];
                    }
                    b.files.0 = n;
                }
                b.show(at, false);
            },
            &mut |f, e| {
                let b = bar.borrow();
                if b.tty && !b.quiet {
                    eprintln!();
                }
                eprintln!(
                    "wiretape: index: {}: {}",
                    f.display(),
                    crate::common::flags::storage_text(e)
                );
            },
        )
    };
    bar.done = total;
    bar.show(0, true);
    if bar.tty && !bar.quiet {
        eprintln!();
    }
    let mut failed = r.count(Outcome::Failed);
    let mut rows = 0;
    let mut session_rows: Option<(PathBuf, usize)> = None;
    if let Some(out) = &a.parquet {
        let node = a.node.clone().unwrap_or_else(fleet::hostname);
        let mut tables = Vec::new();
        if !local.is_empty() {
            let table =
                fleet::block_table(&node, &files, &read, &Window::default(), &mut |f, e| {
                    eprintln!(
                        "wiretape: index: {}: no usable index ({e}): not in the table",
                        f.display()
                    )
                })
                .map_err(|e| anyhow!("{e}"))?;
            tables.push(table);
        }
        if let Some(c) = &client {
            for r in &remotes {
                let got = c
                    .get_bytes(r, "/v1/index.parquet")
                    .map_err(|e| e.to_string())
                    .and_then(|b| fleet::read_table(b, &r.url).map_err(|e| e.to_string()));
                match got {
                    Ok(t) => tables.extend(t),
                    Err(e) => {
                        failed += 1;
                        eprintln!("wiretape: error: sensor {}: {e}: not in the table", r.url);
                    }
                }
            }
        }
        rows = tables.iter().map(|t| t.num_rows()).sum();
        fleet::write_table_file(out, &tables).map_err(|e| anyhow!("{e}"))?;
        // The session tables of the same inputs, one file in sessions/
        // beside OUT (a glob over OUT's directory never mixes the two).
        let (path, n, bad) =
            sessions_table(out, &node, &files, &read, &local, client.as_ref(), &remotes)?;
        failed += bad;
        session_rows = Some((path, n));
    }
    let secs = started.elapsed().as_secs_f64();
    if a.json {
        let j = serde_json::json!({
            "files": files.len(),
            "rebuilt": r.count(Outcome::Rebuilt),
            "up_to_date": r.count(Outcome::UpToDate),
            "being_written": r.count(Outcome::BeingWritten),
            "failed": failed,
            "entries_written": r.entries,
            "bytes_read": total,
            "seconds": secs,
            "parquet": a.parquet.as_ref().map(|p| p.display().to_string()),
            "parquet_rows": rows,
            "sessions_parquet": session_rows.as_ref().map(|s| s.0.display().to_string()),
            "sessions_parquet_rows": session_rows.as_ref().map(|s| s.1),
            "details": r.files.iter().filter(|o| o.outcome != Outcome::UpToDate).map(|o| serde_json::json!({
                "file": o.file.display().to_string(),
                "outcome": format!("{:?}", o.outcome).to_lowercase(),
                "why": o.why,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string(&j)?);
    } else if !a.quiet {
        eprintln!(
            "wiretape: index: {} files: {} rebuilt ({} read in {:.1} s), {} up to date, {} being \
             written (left to their writer), {} failed{}{}",
            files.len(),
            r.count(Outcome::Rebuilt),
            bytes_h(total),
            secs,
            r.count(Outcome::UpToDate),
            r.count(Outcome::BeingWritten),
            failed,
            a.parquet
                .as_ref()
                .map(|p| format!("; {} blocks to {}", thousands(rows as u64), p.display()))
                .unwrap_or_default(),
            session_rows
                .as_ref()
                .map(|(p, n)| format!(", {} sessions to {}", thousands(*n as u64), p.display()))
                .unwrap_or_default()
        );
    }
    Ok(i32::from(failed > 0))
}

/// Where `index --parquet OUT` puts the sessions: `sessions/NAME` in OUT's
/// directory (NAME: OUT's file name).
pub(crate) fn sessions_path(out: &std::path::Path) -> PathBuf {
    let dir = out.parent().unwrap_or(std::path::Path::new(""));
    dir.join("sessions").join(
        out.file_name()
            .unwrap_or_else(|| std::ffi::OsStr::new("sessions.parquet")),
    )
}

/// `--parquet`'s session part: the rows of the local captures' tables
/// (under `node`) and of every sensor's `/v1/sessions` (under its node
/// name) as one Parquet file at [`sessions_path`]. Returns the file, its
/// rows and the sensors that failed.
fn sessions_table(
    out: &std::path::Path,
    node: &str,
    files: &[PathBuf],
    read: &wiretape::files::ReadOptions,
    local: &[PathBuf],
    client: Option<&remote::Client>,
    remotes: &[Remote],
) -> Result<(PathBuf, usize, usize)> {
    use wiretape::query::sessions;
    let mut parts = Vec::new();
    let mut failed = 0;
    if !local.is_empty() {
        let l = sessions::list(files, read, None, None, &sessions::Where::default())
            .map_err(|e| anyhow!("{e}"))?;
        for (p, e) in &l.unreadable {
            eprintln!(
                "wiretape: index: {}: {e}: not in the sessions table",
                p.display()
            );
        }
        parts.push((node.to_string(), l.rows));
    }
    if let Some(c) = client {
        let q = sessions::sessions_query(&Window::default(), None);
        for r in remotes {
            match sessions::remote_rows(c, r, &q) {
                Ok(part) => {
                    for n in part.notes(&r.url) {
                        eprintln!("wiretape: sessions: {n}");
                    }
                    parts.push((part.node, part.rows));
                }
                Err(e) => {
                    failed += 1;
                    eprintln!(
                        "wiretape: error: sensor {}: {e}: not in the sessions table",
                        r.url
                    );
                }
            }
        }
    }
    let path = sessions_path(out);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| anyhow!("cannot create {}: {e}", d.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let f =
        std::fs::File::create(&tmp).map_err(|e| anyhow!("cannot create {}: {e}", tmp.display()))?;
    sessions::write_fleet_parquet(std::io::BufWriter::new(f), &parts, &path)
        .map_err(|e| anyhow!("{e}"))?;
    std::fs::rename(&tmp, &path).map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    let n = parts.iter().map(|p| p.1.len()).sum();
    Ok((path, n, failed))
}
