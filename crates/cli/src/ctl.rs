//! `wiretape ctl`: talk to a running `wiretape record` over its control
//! socket (status; dump a window of the time-travel ring).

use crate::common::usage_exit as usage;
use anyhow::{bail, Result};
use std::path::PathBuf;
use wiretape::live::control::{self, Reply, Request};

#[derive(clap::Args)]
#[command(
    after_help = "The recorder is found by its control socket: --control PATH (as given to record), or \
-w DIR (record's output directory: DIR/.wiretape-control.sock), or $WIRETAPE_CONTROL, or \
./.wiretape-control.sock.\n\nExamples:\n  wiretape ctl -w /data status\n  \
wiretape ctl -w /data dump --last 30s\n  \
wiretape ctl -w /data dump --from 2026-11-22T14:02:00Z --to 2026-11-22T14:03:00Z host 10.0.0.1\n  \
wiretape ctl --control /run/wt.sock dump --from -5m tcp port 443\n\n\
TIME: RFC 3339 with a zone (or --utc), Unix seconds, or back from now (-5m). The trailing words are \
the filter; everything after -- is too. A first word that is both an existing file here and a \
filter word (tcp, host, ...) is refused as ambiguous: -F WORD reads the filter from the file, \
-- WORD takes it as the filter.\n\n\
Exit codes: 0 done (also a dump of an empty window: nothing written), 1 no recorder / no ring / \
the dump failed, 2 a usage error (a bad TIME, a filter libpcap refuses, --to not after --from)."
)]
pub(crate) struct Args {
    /// The recorder's output directory (its socket is DIR/.wiretape-control.sock).
    #[arg(short = 'w', long = "write", value_name = "DIR", global = true)]
    dir: Option<PathBuf>,
    /// The control socket (`record --control PATH`).
    #[arg(long, value_name = "PATH", global = true)]
    control: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// The live counters as JSON: per queue seen/written/dropped, the ring,
    /// subscribers, PCAP-over-IP clients.
    Status,
    /// Write the frames of a window of the ring (and a filter) into a capture
    /// file in the recorder's output directory, named by its first frame's
    /// time, merged across queues in time order; prints its report as JSON.
    Dump(DumpArgs),
}

#[derive(clap::Args)]
struct DumpArgs {
    /// From (inclusive): RFC 3339, Unix seconds, or back from now (-90s, -5m).
    /// Default: the oldest frame in the ring.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    from: Option<String>,
    /// To (exclusive). Default: now.
    #[arg(
        long,
        value_name = "TIME",
        allow_hyphen_values = true,
        conflicts_with = "last"
    )]
    to: Option<String>,
    /// The last DURATION up to now (e.g. 30s, 5m): --from now-DURATION --to now.
    #[arg(long, value_name = "DURATION", conflicts_with = "from")]
    last: Option<String>,
    /// A TIME without a zone (2026-11-22 14:02:00) is UTC.
    #[arg(long)]
    utc: bool,
    /// Read the filter expression from FILE (`#` starts a comment).
    #[arg(short = 'F', value_name = "FILE", conflicts_with = "expression")]
    filter_file: Option<PathBuf>,
    /// Only frames this tcpdump expression accepts (man pcap-filter).
    #[arg(value_name = "FILTER EXPRESSION")]
    expression: Vec<String>,
    /// The filter expression, after `--`.
    #[arg(last = true, value_name = "FILTER", conflicts_with = "filter_file")]
    after: Vec<String>,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let req = match &a.cmd {
        Cmd::Status => Request::Status,
        Cmd::Dump(d) => {
            let now = wiretape::timestamp::realtime_ns();
            let zone = crate::common::no_zone(d.utc);
            let (from, to) = match control::dump_window(
                d.last.as_deref(),
                d.from.as_deref(),
                d.to.as_deref(),
                now,
                zone,
            ) {
                Ok(w) => w,
                Err(e) => return usage(format!("--{} {e}", e.part())),
            };
            let words = match crate::common::inputs::filter_only(&d.expression, &d.after) {
                Ok(w) => w,
                Err(e) => return usage(e),
            };
            let filter = crate::common::filter_expression(&words, d.filter_file.as_deref())?;
            Request::dump(from, to, filter)
        }
    };
    // Usage problems first (above), then which recorder.
    let env = std::env::var_os("WIRETAPE_CONTROL").map(PathBuf::from);
    let Some(path) = control::find_socket(a.control.as_deref(), a.dir.as_deref(), env) else {
        return Err(crate::usage(
            "which recorder? give -w DIR (its output directory) or --control PATH",
        ));
    };
    let reply = match control::request(&path, &req, req.reply_timeout()) {
        Ok(r) => r,
        Err(e) => bail!(
            "cannot reach the recorder at {}: {e} (is `wiretape record` running with this -w DIR or --control PATH?)",
            path.display()
        ),
    };
    match reply {
        Reply::Refused { error, usage: true } => usage(error),
        Reply::Refused { error, .. } => bail!("{error}"),
        Reply::Status(v) => {
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(0)
        }
        Reply::Dump(d) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::to_value(&d)?)?
            );
            match &d.file {
                Some(f) => eprintln!(
                    "wiretape: dumped {} frames ({} bytes) to {}{}",
                    d.frames,
                    d.bytes,
                    f.display(),
                    d.window_note()
                ),
                None => eprintln!("wiretape: no frame in the window: nothing written"),
            }
            Ok(0)
        }
        _ => bail!("the recorder answered with a reply this wiretape does not know"),
    }
}
