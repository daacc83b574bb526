//! `wiretape extract`: the frames of a time window (and a filter) from a
//! store of captures, merged in time order into one file or stdout. The
//! planning and merging are the storage crate's (`storage::extract`); this
//! is the command line around them.

use crate::report::{bytes_h, thousands};
use anyhow::{anyhow, bail, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use wiretape::filter::flow::Needs;
use wiretape::filter::LINKTYPE_ETHERNET;
use wiretape::storage::extract::{self, Merge, NoteKind, Stats, Window};
use wiretape::storage::index::Entry;
use wiretape::storage::pcap::MAX_SNAPLEN;
use wiretape::storage::{Format, PcapWriter, WriteSink};
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
    let started = Instant::now();
    let format = match Format::from_flags(&a.format, &a.tsprec) {
        Ok(f) => f,
        Err(e) => return usage(e),
    };
    let (inputs, filter_words) = split_words(&a.words);
    let expr = match crate::record::filter_expression(&filter_words, a.filter_file.as_deref()) {
        Ok(e) => e,
        Err(e) => return usage(e),
    };
    let prog = match &expr {
        Some(e) => match wiretape::filter::compile(e, LINKTYPE_ETHERNET, MAX_SNAPLEN) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("wiretape: error: {e}");
                return Ok(crate::filter::exit_code(&e));
            }
        },
        None => None,
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
    // Every input must exist before anything is written.
    // The keys (hosts, ports, protocols...) the filter needs: blocks whose
    // flow set lacks them are not read.
    let needs = match (&prog, a.no_flow_index) {
        (Some(p), false) => Needs::of(p.insns()),
        _ => None,
    };
    let mut by_flow = 0u64;
    let mut chosen = Vec::new();
    let mut check = |p: &Path, e: &Entry| {
        let keep = needs.as_ref().is_none_or(|n| e.may_match(n));
        by_flow += u64::from(!keep);
        if keep && a.plan {
            chosen.push(serde_json::json!({
                "file": std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned()).display().to_string(),
                "offset": e.offset,
                "first_ns": e.first_ns,
                "last_ns": e.last_ns,
                "frames": e.count,
            }));
        }
        keep
    };
    let plan = extract::plan_with(&inputs, window, a.prefix.as_deref(), &mut check)
        .map_err(|e| anyhow!("{e}"))?;
    if a.plan {
        let whole: Vec<String> = plan
            .files
            .iter()
            .filter(|f| f.skip.is_none() && f.entries.is_empty())
            .map(|f| f.path.display().to_string())
            .collect();
        let j = serde_json::json!({
            "blocks": chosen,
            "blocks_skipped_by_flow_index": by_flow,
            "filter_narrows": needs.is_some(),
            "files_read_whole": whole,
            "from_ns": window.from_ns,
            "to_ns": window.to_ns,
        });
        println!("{}", serde_json::to_string(&j)?);
        return Ok(0);
    }
    let to_stdout = a.out.as_deref() == Some(Path::new("-"));
    let mut writer = match (&a.out, a.count_only) {
        (Some(out), false) => Some(open_output(out, to_stdout, format, &plan)?),
        _ => None,
    };
    let mut merge = Merge::new(plan, LINKTYPE_ETHERNET, |data: &[u8], wire: u32| {
        prog.as_ref().is_none_or(|p| p.matches(data, wire))
    });
    let mut notes = Vec::new();
    let mut say = |n: extract::Note| {
        let at = n.offset.map(|o| format!(" (byte {o})")).unwrap_or_default();
        let what = match n.kind {
            NoteKind::NoIndex => "note",
            NoteKind::OutOfOrder => "warning",
            NoteKind::Damage => "damaged",
            NoteKind::Error => "error",
        };
        eprintln!("wiretape: {what}: {}{at}: {}", n.path.display(), n.message);
        notes.push(n);
    };
    while let Some(f) = merge.next() {
        if let Some(w) = writer.as_mut() {
            w.write_wire(f.ts_ns, f.data, f.orig_len)
                .map_err(|e| anyhow!("{e}"))?;
        }
        if !merge.notes().is_empty() {
            merge.take_notes().into_iter().for_each(&mut say);
        }
    }
    merge.take_notes().into_iter().for_each(&mut say);
    let stats = merge.finish();
    if let Some(mut w) = writer {
        w.flush().map_err(|e| anyhow!("{e}"))?;
        w.close().map_err(|(_, e)| anyhow!("{e}"))?;
    }
    let secs = started.elapsed().as_secs_f64();
    let damaged = stats.damaged_files > 0;
    let code = if stats.error_files > 0 || (damaged && !a.ignore_corrupt) {
        1
    } else {
        0
    };
    let out_name = a
        .out
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    if a.json {
        let mut j = summary_json(&stats, &notes, secs, &window, expr.as_deref(), &a, format);
        j["blocks_skipped_by_flow_index"] = by_flow.into();
        j["filter_narrows"] = needs.is_some().into();
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
            secs
        );
    }
    if damaged {
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

type Output = PcapWriter<WriteSink<Box<dyn Write + Send>>>;

/// The output: stdout, or OUT created (or overwritten; never one of the
/// inputs).
fn open_output(
    out: &Path,
    to_stdout: bool,
    format: Format,
    plan: &extract::Plan,
) -> Result<Output> {
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
    let sink = WriteSink::new(w, name, 1 << 20);
    Ok(PcapWriter::with_format(
        sink,
        MAX_SNAPLEN,
        format,
        "wiretape-extract",
    ))
}

fn summary_json(
    st: &Stats,
    notes: &[extract::Note],
    secs: f64,
    w: &Window,
    filter: Option<&str>,
    a: &Args,
    format: Format,
) -> serde_json::Value {
    let list = |k: NoteKind| -> Vec<serde_json::Value> {
        notes
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
    let without: Vec<String> = notes
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
        "records_read": st.records_read,
        "out_of_order": st.out_of_order,
        "seconds": secs,
        "from_ns": w.from_ns,
        "to_ns": w.to_ns,
        "filter": filter,
        "output": if a.count_only { None } else { a.out.as_ref().map(|p| p.display().to_string()) },
        "format": match format {
            Format::PcapNs => "pcap-ns",
            Format::PcapUs => "pcap-us",
            Format::PcapNg => "pcapng",
        },
        "corrupt": list(NoteKind::Damage),
        "errors": list(NoteKind::Error),
    })
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
