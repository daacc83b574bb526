//! `wiretape extract`: the frames of a time window (and a filter) from a
//! store of captures, merged in time order into one file or stdout. The
//! planning, merging and the JSON are the query crate's (`query::job`);
//! this is the command line around them.

use crate::common::flags::identity_words;
use crate::common::usage_exit as usage;
use anyhow::{anyhow, bail, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use wiretape::files::Format;
use wiretape::pipeline::summary::{bytes_h, thousands};
use wiretape::query::extraction::{
    self, Event, Extraction, Notice, OutputError, Report, SelectError,
};
use wiretape::query::job;
use wiretape::query::{QueryError, Window};
use wiretape::timestamp::realtime_ns;

#[derive(clap::Args)]
#[command(
    mut_arg("from", |a| a.help("Frames stamped at or after TIME (inclusive)")),
    mut_arg("to", |a| a.help("Frames stamped before TIME (exclusive)")),
    after_help = "INPUTS AND FILTER: every leading word that is an https:// sensor, starts with /, . \
or ~, ends in .pcap or .pcapng (.lz4, .zst), or names an existing file or directory is an input; \
the filter starts at the first word that is none of these, and everything after -- is the filter. \
A word that is both an existing file or directory here and a filter word (tcp, host, port, not, \
( ...) is refused as ambiguous: write ./WORD for the file, or put the filter after -- \
(wiretape extract /data --count-only -- tcp). In a directory only files named like \
wiretape's (<prefix>-<iface>-q<N>-<UTC>.pcap[ng]) are read; a file named on the command line is \
read whatever its name. Files of several queues, interfaces, rotations and runs are merged in \
timestamp order; equal timestamps keep the order of the inputs (in a directory: by the start in \
the file name, then the name). Each file's .idx picks the blocks that can hold the window; a file \
without one is read whole (said on stderr). Files being written are read up to what has been \
flushed. A window that misses the store reads nothing and says the store's span (stderr, and \
store_span in --json).\n\n\
TIME: RFC 3339 (2026-11-22T14:02:00.123456789Z or 2026-11-22 14:02:00+01:00: a zone is \
needed, or --utc), Unix seconds (1700000000.123456789) or back from now (-90s, -5m, -2h, -1d). \
--from is inclusive, --to exclusive, to the nanosecond.\n\n\
Exit codes: 0 done; 1 a runtime error (an input missing, a file damaged: what is valid is still \
extracted, the file and byte offset named on stderr; --ignore-corrupt makes damage exit 0); \
2 a usage error (a filter libpcap refuses, --to not after --from, an unreadable TIME, an ambiguous \
word). Every message, its cause and its fix: docs/errors.md.\n\n\
Examples:\n  \
wiretape extract /data --from -5m -w last5min.pcap\n  \
wiretape extract /data --from 2026-11-22T14:02:00Z --to 2026-11-22T14:03:00Z -w - tcp port 443 | tshark -r -\n  \
wiretape extract /data /old/run1 --from -1h --count-only host 10.0.0.1 and udp\n  \
wiretape extract /data/wiretape-eth0-q0-*.pcap -w q0.pcapng --format pcapng --json icmp\n  \
wiretape extract /data --from '2026-11-22 14:02:00' --utc --count-only -- tcp\n  \
wiretape extract /data https://sensor2:8443 --steno-query 'host 10.0.0.1 and after 3h ago' -w case.pcap"
)]
pub(crate) struct Args {
    #[command(flatten)]
    read: crate::common::ReadArgs,
    /// Directories and capture files (pcap ns/µs, pcapng), then an optional
    /// filter expression (tcpdump's language, man pcap-filter), e.g.
    /// `/data tcp port 443` (see INPUTS AND FILTER below).
    #[arg(value_name = "DIR|FILE... [FILTER EXPRESSION...]", required = true)]
    words: Vec<String>,
    /// The filter expression, after `--` (never read as an input).
    #[arg(last = true, value_name = "FILTER")]
    after: Vec<String>,
    #[command(flatten)]
    window: crate::common::WindowArgs,
    /// Output file (overwritten), or - for stdout (e.g. `| tshark -r -`).
    #[arg(
        short = 'w',
        long = "write",
        value_name = "OUT|-",
        required_unless_present_any = ["count_only", "plan"],
        conflicts_with_all = ["count_only", "plan"]
    )]
    out: Option<PathBuf>,
    /// Output format: pcap (ns stamps unless --tsprec us) or pcapng
    /// (inputs of several link types: one interface per link type).
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
    /// Select with a query in Stenographer's language instead of a filter
    /// (e.g. 'host 10.0.0.1 and port 53 and after 3h ago'; `before`/`after`
    /// exact to the ns, within --from/--to), on local stores and sensors
    /// alike. Ethernet frames only.
    #[arg(long, value_name = "QUERY", conflicts_with = "filter_file")]
    steno_query: Option<String>,
    /// Only the frames of the sessions EXPR chooses in the session tables
    /// (`wiretape sessions --where` language, e.g. "tls_sni ~
    /// '*.evil-cdn.net'"): each session's connection (addresses, protocol,
    /// ports, both directions) from its first to its last frame, within
    /// --from/--to; with a filter too, the frames both keep. Each store
    /// (and each sensor, server side) chooses from its own tables.
    #[arg(long, value_name = "EXPR", conflicts_with = "steno_query")]
    session_where: Option<String>,
    /// No summary line on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Do not use the indexes (key index and flow sets) to skip blocks the
    /// filter cannot match (read every block of the window; for comparisons).
    #[arg(long)]
    no_flow_index: bool,
    /// Do not use the exact key index (`.kdx`): only the `.idx` flow sets
    /// narrow (for comparisons).
    #[arg(long)]
    no_key_index: bool,
    /// Print the plan as JSON and read nothing: the index blocks that the
    /// window and the indexes select (file, offset, first_ns, last_ns,
    /// frames; with the key index, the byte ranges read in the block), and
    /// the files to be read whole. The blocks a fleet-wide SQL query over
    /// `wiretape index --parquet` tables finds.
    #[arg(long, conflicts_with = "count_only")]
    plan: bool,
    #[command(flatten)]
    tls: crate::common::tls::ClientTls,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let read = a.read.options()?;
    let format = match Format::from_flags(&a.format, &a.tsprec) {
        Ok(f) => f,
        Err(e) => return usage(e.named("--format", "--tsprec")),
    };
    let (words, filter_words) = match crate::common::inputs::split(&a.words, &a.after) {
        Ok(w) => w,
        Err(e) => return usage(e),
    };
    let expr = match crate::common::filter_expression(&filter_words, a.filter_file.as_deref()) {
        Ok(e) => e,
        Err(e) => return usage(e),
    };
    // The conditions are compiled before anything is read, written or asked.
    let mut ex = Extraction::new(Vec::new());
    let (steno, wh) = (a.steno_query.as_deref(), a.session_where.as_deref());
    match ex.select(expr, steno, wh, realtime_ns()) {
        Ok(()) => {}
        Err(SelectError::Both { filter }) => {
            return usage(format!(
                "--steno-query and a filter expression ('{filter}'): give the conditions in one \
                 language, a Stenographer query or tcpdump's filter, not both"
            ))
        }
        Err(SelectError::Steno(e)) => return usage(format!("--steno-query: {e}")),
        Err(SelectError::SessionWhere(e)) => return usage(format!("--session-where: {e}")),
        Err(SelectError::Filter(e)) => {
            eprintln!("wiretape: error: {e}");
            return Ok(QueryError::from(e).exit_code());
        }
        Err(e) => return usage(e),
    }
    let window = match a.window.window() {
        Ok(w) => w,
        Err(e) => return usage(e),
    };
    ex.inputs = match extraction::group_inputs(&words) {
        Ok(i) => i,
        Err(e) => return usage(crate::common::flags::address_line(&e)),
    };
    ex.window = window;
    ex.prefix = a.prefix.clone();
    ex.flow_index = !a.no_flow_index;
    ex.key_index = !a.no_key_index;
    ex.list_blocks = a.plan;
    ex.read = read;
    let remotes = ex.remotes();
    let client = match a.tls.client(&remotes) {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    // Every local input must exist before anything is written.
    let planned = ex.plan_local(|job| {
        if let Some(n) = extraction::plan_notice(job) {
            say_notice(&n, a.quiet, a.ignore_corrupt);
        }
    });
    let jobs = match planned {
        Ok(j) => j,
        // The filter refused for the files' own link type.
        Err(e @ QueryError::Filter(_)) => {
            eprintln!("wiretape: error: {e}");
            return Ok(e.exit_code());
        }
        Err(e) => bail!("{e}"),
    };
    // A pcap file states one link type; pcapng has an interface per link
    // type (sensors send Ethernet): the output's link types, in order.
    let written =
        match ex.output_linktypes(&jobs, format == Format::PcapNg, !a.plan && !a.count_only) {
            Ok(w) => w,
            Err(OutputError::Mixed(m)) => return usage(m.with_fix(crate::common::flags::PCAPNG)),
            Err(OutputError::LocalAndSensors { linktype }) => {
                return usage(format!(
                    "local inputs of link type {} and sensors (ethernet): a pcap file holds one \
                 link type; write pcapng (--format pcapng) or extract them on their own",
                    wiretape::filter::linktype::name(linktype)
                ))
            }
            Err(e) => bail!("{e}"),
        };
    let query = ex.sensor_query(!a.plan && !a.count_only, a.steno_query.as_deref());
    for n in extraction::session_notices(&jobs) {
        say_notice(&n, a.quiet, a.ignore_corrupt);
    }
    if a.plan {
        let (j, failed) = ex.plan_all(&jobs, client.as_ref(), &query, say);
        println!("{}", serde_json::to_string(&j)?);
        return Ok(i32::from(failed > 0));
    }
    if a.count_only {
        let r = ex.count(jobs, client.as_ref(), &query, written, say);
        if a.json {
            let j = r.summary_json(&ex, None, format, a.steno_query.as_deref());
            println!("{}", serde_json::to_string(&j)?);
        } else {
            let st = &r.outcome.stats;
            println!("{} frames, {} bytes", st.frames, st.bytes);
        }
        return Ok(ending(&a, &r, &window));
    }
    let to_stdout = a.out.as_deref() == Some(Path::new("-"));
    let out = a
        .out
        .as_ref()
        .expect("clap: -w unless --count-only or --plan");
    let files: Vec<&Path> = jobs
        .iter()
        .flat_map(|j| j.plan.files.iter().map(|f| f.path.as_path()))
        .collect();
    // Every sensor is asked now, at once; their answers stream meanwhile.
    let streams = ex.ask_sensors(client.as_ref(), &query);
    let lts: Vec<u32> = written.iter().map(|l| l.0).collect();
    let writer = open_output(out, to_stdout, format, &files, &lts)?;
    let r = ex
        .run(jobs, streams, writer, written, say)
        .map_err(|e| anyhow!("{e}"))?;
    let (stats, seconds) = (&r.outcome.stats, r.outcome.seconds);
    let out_name = out.display().to_string();
    if a.json {
        let j = r.summary_json(&ex, Some(&out_name), format, a.steno_query.as_deref());
        let text = serde_json::to_string(&j)?;
        if to_stdout {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }
    let to = if to_stdout { "stdout" } else { &out_name };
    if !a.quiet && !a.json && r.local_inputs == 0 {
        eprintln!(
            "wiretape: extracted {} frames ({} bytes) to {to} from {} sensor(s) in {seconds:.3} s",
            thousands(stats.frames),
            thousands(stats.bytes),
            remotes.len(),
        );
    } else if !a.quiet && !a.json {
        let from_sensors = if remotes.is_empty() {
            String::new()
        } else {
            format!(", and {} sensor(s)", remotes.len())
        };
        eprintln!(
            "wiretape: extracted {} frames ({} bytes) to {to}: {} of {} files read ({} skipped by name \
             or index, {} read whole without index), {} of {} indexed blocks read ({} skipped by the \
             flow index), {} read in {seconds:.3} s{from_sensors}",
            thousands(stats.frames),
            thousands(stats.bytes),
            stats.files_read,
            stats.files,
            stats.files_skipped,
            stats.files_without_index,
            stats.blocks_read,
            stats.blocks_read + stats.blocks_skipped,
            r.plan.skipped_by_flow + r.plan.skipped_by_keys,
            bytes_h(stats.bytes_read),
        );
    }
    Ok(ending(&a, &r, &window))
}

/// Each note and sensor failure on stderr, as it happens.
fn say(e: Event<'_>) {
    match e {
        Event::Note(n) => eprintln!("wiretape: {}", identity_words(&job::note_line(n))),
        Event::SensorFailed { url, error } => eprintln!("wiretape: error: sensor {url}: {error}"),
        _ => {}
    }
}

/// The lines after the summary (damage; a window that missed the store)
/// and the exit code.
fn ending(a: &Args, r: &Report, window: &Window) -> i32 {
    if let Some(n) = r.damage() {
        say_notice(&n, a.quiet, a.ignore_corrupt);
    }
    if !a.quiet {
        let stats = &r.outcome.stats;
        crate::common::say_missed(stats.store_span, stats.frames, window);
    }
    r.exit_code(a.ignore_corrupt)
}

/// A notice on stderr, with the flags it names: `--session-where` for the
/// session tables', `--ignore-corrupt` for damage (`quiet`: no summary).
fn say_notice(n: &Notice, quiet: bool, ignore_corrupt: bool) {
    let level = if n.is_warning() { "warning: " } else { "" };
    match n {
        _ if quiet && n.is_summary() => {}
        Notice::Damaged { .. } if ignore_corrupt => {
            eprintln!("wiretape: {n} (--ignore-corrupt: exit 0)")
        }
        Notice::Damaged { .. } => eprintln!("wiretape: {n}; --ignore-corrupt exits 0 on this"),
        Notice::TablesIncomplete { .. }
        | Notice::FilesWithoutTable { .. }
        | Notice::SessionsChosen { .. } => eprintln!("wiretape: {level}--session-where: {n}"),
        _ => eprintln!("wiretape: {level}{n}"),
    }
}

/// The output: stdout, or OUT created (or overwritten; never one of the
/// inputs).
fn open_output(
    out: &Path,
    to_stdout: bool,
    format: Format,
    inputs: &[&Path],
    linktypes: &[u32],
) -> Result<job::Output> {
    let (w, name): (Box<dyn Write + Send>, PathBuf) = if to_stdout {
        (Box::new(std::io::stdout()), "<stdout>".into())
    } else {
        let f = extraction::create_output(out, inputs).map_err(|e| match e {
            OutputError::IsDirectory { path } => anyhow!(
                "-w {} is a directory: give a file name (or - for stdout)",
                path.display()
            ),
            OutputError::IsInput { path, input } => anyhow!(
                "-w {} is one of the inputs ({}): give another output file",
                path.display(),
                input.display()
            ),
            e => anyhow!("{e}"),
        })?;
        (Box::new(f), out.to_owned())
    };
    Ok(job::output_links(w, name, format, 1 << 20, linktypes))
}
