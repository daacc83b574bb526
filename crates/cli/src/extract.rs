//! `wiretape extract`: the frames of a time window (and a filter) from a
//! store of captures, merged in time order into one file or stdout. The
//! planning, merging and the JSON are the query crate's (`query::job`);
//! this is the command line around them.

use crate::report::{bytes_h, thousands};
use anyhow::{anyhow, bail, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use wiretape::query::job::{self, Job, Request};
use wiretape::query::{Plan, QueryError, Window};
use wiretape::storage::Format;
use wiretape::timestamp::{format_rfc3339, parse_time, realtime_ns};

#[derive(clap::Args)]
#[command(
    after_help = "Inputs first, then the filter: every leading word that names an existing file or \
directory (or starts with / or ., or ends in .pcap or .pcapng) is an input; the filter starts at the \
first word that is none of these. In a directory only files named like wiretape's \
(<prefix>-<iface>-q<N>-<UTC>.pcap[ng]) are read; a file named on the command line is read whatever \
its name. Files of several queues, interfaces, rotations and runs are merged in timestamp order; \
equal timestamps keep the order of the inputs (in a directory: by the start in the file name, then \
the name). Each file's .idx picks the blocks that can hold the window; a file without one is read \
whole (said on stderr). Files being written are read up to what has been flushed.\n\n\
TIME: RFC 3339 (2026-11-22T14:02:00.123456789Z, offsets like +01:00), Unix seconds \
(1700000000.123456789) or back from now (-90s, -5m, -2h, -1d). --from is inclusive, --to exclusive, \
to the nanosecond.\n\n\
Exit codes: 0 done; 1 a runtime error (an input missing, a file damaged: what is valid is still \
extracted, the file and byte offset named on stderr; --ignore-corrupt makes damage exit 0); \
2 a usage error (a filter libpcap refuses, --to not after --from, an unreadable TIME).\n\n\
Examples:\n  \
wiretape extract /data --from -5m -w last5min.pcap\n  \
wiretape extract /data --from 2026-11-22T14:02:00Z --to 2026-11-22T14:03:00Z -w - tcp port 443 | tshark -r -\n  \
wiretape extract /data /old/run1 --from -1h --count-only host 10.0.0.1 and udp\n  \
wiretape extract /data/wiretape-eth0-q0-*.pcap -w q0.pcapng --format pcapng --json icmp"
)]
pub struct Args {
    /// Directories and capture files (pcap ns/µs, pcapng), then an optional
    /// filter expression (tcpdump's language, man pcap-filter), e.g.
    /// `/data tcp port 443`.
    #[arg(value_name = "DIR|FILE... [FILTER EXPRESSION...]", required = true)]
    words: Vec<String>,
    /// Frames stamped at or after TIME (inclusive).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    from: Option<String>,
    /// Frames stamped before TIME (exclusive).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    to: Option<String>,
    /// Output file (overwritten), or - for stdout (e.g. `| tshark -r -`).
    #[arg(
        short = 'w',
        long = "write",
        value_name = "OUT|-",
        required_unless_present_any = ["count_only", "plan"],
        conflicts_with_all = ["count_only", "plan"]
    )]
    out: Option<PathBuf>,
    /// Output format: pcap (ns stamps unless --tsprec us) or pcapng.
    #[arg(long, value_name = "FORMAT", default_value = "pcap", value_parser = ["pcap", "pcapng"])]
    format: String,
    /// pcap timestamp precision: ns (default) or us (stamps cut to µs).
    #[arg(long, value_name = "PREC", default_value = "ns", value_parser = ["ns", "us"])]
    tsprec: String,
    /// Print the number of matching frames and their bytes; write nothing.
    #[arg(long)]
    count_only: bool,
    /// A JSON summary (frames, bytes, files read/skipped/read without
    /// index, blocks read/skipped, bytes read, seconds, damaged files with
    /// offsets) on stdout; on stderr with -w - (stdout carries the capture).
    #[arg(long)]
    json: bool,
    /// Damaged files (corrupt records, torn tails) do not make the exit
    /// code 1 (they are still named on stderr).
    #[arg(long)]
    ignore_corrupt: bool,
    /// In directories, only files of this prefix (default: any of ours).
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// Read the filter expression from FILE (`#` starts a comment).
    #[arg(short = 'F', value_name = "FILE")]
    filter_file: Option<PathBuf>,
    /// No summary line on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Do not use the indexes' flow sets to skip blocks the filter cannot
    /// match (read every block of the window; for comparisons).
    #[arg(long)]
    no_flow_index: bool,
    /// Print the plan as JSON and read nothing: the index blocks that the
    /// window and the flow index select (file, offset, first_ns, last_ns,
    /// frames), and the files to be read whole. The blocks a fleet-wide
    /// SQL query over `wiretape index --parquet` tables finds.
    #[arg(long, conflicts_with = "count_only")]
    plan: bool,
}

/// Does `w` name an input rather than start the filter?
fn is_input(w: &str) -> bool {
    Path::new(w).exists()
        || w.starts_with('/')
        || w.starts_with('.')
        || w.ends_with(".pcap")
        || w.ends_with(".pcapng")
}

/// The inputs (the first word, and every following one that [`is_input`])
/// and the filter words (the rest).
fn split_words(words: &[String]) -> (Vec<PathBuf>, Vec<String>) {
    let k = words
        .iter()
        .skip(1)
        .position(|w| !is_input(w))
        .map_or(words.len(), |k| k + 1);
    (
        words[..k].iter().map(PathBuf::from).collect(),
        words[k..].to_vec(),
    )
}

/// A usage error: one line, exit 2.
fn usage(msg: impl std::fmt::Display) -> Result<i32> {
    eprintln!("wiretape: error: {msg}");
    Ok(2)
}

pub fn run(a: Args) -> Result<i32> {
    let format = match Format::from_flags(&a.format, &a.tsprec) {
        Ok(f) => f,
        Err(e) => return usage(e),
    };
    let (inputs, filter_words) = split_words(&a.words);
    let expr = match crate::record::filter_expression(&filter_words, a.filter_file.as_deref()) {
        Ok(e) => e,
        Err(e) => return usage(e),
    };
    let now = realtime_ns();
    let time = |s: &Option<String>, what: &str| -> std::result::Result<Option<u64>, String> {
        s.as_deref()
            .map(|s| parse_time(s, now).map_err(|e| format!("--{what}: {e}")))
            .transpose()
    };
    let window = match (time(&a.from, "from"), time(&a.to, "to")) {
        (Ok(from_ns), Ok(to_ns)) => Window { from_ns, to_ns },
        (Err(e), _) | (_, Err(e)) => return usage(e),
    };
    if let (Some(f), Some(t)) = (window.from_ns, window.to_ns) {
        if t <= f {
            return usage(format!(
                "--to {} is not after --from {}: the window [from, to) is empty",
                format_rfc3339(t),
                format_rfc3339(f)
            ));
        }
    }
    let req = Request {
        inputs,
        window,
        filter: expr,
        prefix: a.prefix.clone(),
        flow_index: !a.no_flow_index,
        list_blocks: a.plan,
    };
    // The filter is compiled before anything is read or written.
    let job = match Job::plan(&req) {
        Ok(j) => j,
        Err(e @ QueryError::Filter(_)) => {
            eprintln!("wiretape: error: {e}");
            return Ok(e.exit_code());
        }
        Err(e) => return Err(anyhow!("{e}")),
    };
    if a.plan {
        println!("{}", serde_json::to_string(&job.plan_json())?);
        return Ok(0);
    }
    let to_stdout = a.out.as_deref() == Some(Path::new("-"));
    let mut writer = match (&a.out, a.count_only) {
        (Some(out), false) => Some(open_output(out, to_stdout, format, &job.plan)?),
        _ => None,
    };
    let (filter, narrows, by_flow) = (job.filter.clone(), job.filter_narrows, job.skipped_by_flow);
    let outcome = job.run(
        |f| match writer.as_mut() {
            Some(w) => w.write_wire(f.ts_ns, f.data, f.orig_len),
            None => Ok(()),
        },
        |n| eprintln!("wiretape: {}", job::note_line(n)),
    );
    let outcome = outcome.map_err(|e| anyhow!("{e}"))?;
    if let Some(mut w) = writer {
        w.flush().map_err(|e| anyhow!("{e}"))?;
        w.close().map_err(|(_, e)| anyhow!("{e}"))?;
    }
    let stats = &outcome.stats;
    let code = outcome.exit_code(a.ignore_corrupt);
    let out_name = a
        .out
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if a.json {
        let output = (!a.count_only).then_some(out_name.as_str());
        let j = job::summary_json(
            filter.as_deref(),
            narrows,
            by_flow,
            &window,
            &outcome,
            output,
            format,
        );
        let text = serde_json::to_string(&j)?;
        if to_stdout {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    } else if a.count_only {
        println!("{} frames, {} bytes", stats.frames, stats.bytes);
    }
    if !a.quiet && !a.json && !a.count_only {
        eprintln!(
            "wiretape: extracted {} frames ({} bytes) to {}: {} of {} files read ({} skipped by name \
             or index, {} read whole without index), {} of {} indexed blocks read ({} skipped by the \
             flow index), {} read in {:.3} s",
            thousands(stats.frames),
            thousands(stats.bytes),
            if to_stdout { "stdout" } else { &out_name },
            stats.files_read,
            stats.files,
            stats.files_skipped,
            stats.files_without_index,
            stats.blocks_read,
            stats.blocks_read + stats.blocks_skipped,
            by_flow,
            bytes_h(stats.bytes_read),
            outcome.seconds
        );
    }
    if stats.damaged_files > 0 {
        eprintln!(
            "wiretape: {} damaged file(s): every valid frame before (and, with an index, after) the \
             damage was extracted{}",
            stats.damaged_files,
            if a.ignore_corrupt {
                " (--ignore-corrupt: exit 0)"
            } else {
                "; --ignore-corrupt exits 0 on this"
            }
        );
    }
    Ok(code)
}

/// The output: stdout, or OUT created (or overwritten; never one of the
/// inputs).
fn open_output(out: &Path, to_stdout: bool, format: Format, plan: &Plan) -> Result<job::Output> {
    let (w, name): (Box<dyn Write + Send>, PathBuf) = if to_stdout {
        (Box::new(std::io::stdout()), "<stdout>".into())
    } else {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::metadata(out) {
            if m.is_dir() {
                bail!(
                    "-w {} is a directory: give a file name (or - for stdout)",
                    out.display()
                );
            }
            let same = |p: &Path| {
                std::fs::metadata(p).is_ok_and(|i| (i.dev(), i.ino()) == (m.dev(), m.ino()))
            };
            if let Some(f) = plan.files.iter().find(|f| same(&f.path)) {
                bail!(
                    "-w {} is one of the inputs ({}): give another output file",
                    out.display(),
                    f.path.display()
                );
            }
        }
        let f = std::fs::File::create(out)
            .map_err(|e| anyhow!("cannot create {}: {e}", out.display()))?;
        (Box::new(f), out.to_owned())
    };
    Ok(job::output(w, name, format, 1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_then_filter_words() {
        let w = |v: &[&str]| split_words(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let (i, f) = w(&["/no/such", "tcp", "port", "80"]);
        assert_eq!(
            (i.len(), f),
            (1, vec!["tcp".into(), "port".into(), "80".into()])
        );
        let (i, f) = w(&["/tmp", "/no/such", "x.pcap", "net", "10.0.0.0/8"]);
        assert_eq!((i.len(), f.len()), (3, 2));
        let (i, f) = w(&["data", "tcp port 80"]);
        assert_eq!((i.len(), f.len()), (1, 1));
        let (i, f) = w(&["/tmp"]);
        assert_eq!((i.len(), f.len()), (1, 0));
    }
}
