//! `wiretape timeline`: frames and bytes per time bin of a store, from its
//! `.idx` sidecars (`query::timeline`), as a table, JSON, an SVG or a PNG;
//! https:// inputs are asked `/v1/timeline` with the same window and bins,
//! so that one picture spans sensors.

use crate::common::usage_exit as usage;
use anyhow::{anyhow, Result};
use std::path::PathBuf;
use wiretape::pipeline::summary::thousands;
use wiretape::query::chart;
use wiretape::query::remote::{self, Remote};
use wiretape::query::timeline::{self, By, Request};
use wiretape::query::QueryError;
use wiretape::timestamp::format_rfc3339;

#[derive(clap::Args)]
#[command(
    mut_arg("from", |a| a.help("The window's start (inclusive; default: the first frame)")),
    mut_arg("to", |a| a.help("The window's end (exclusive; default: after the last frame)")),
    after_help = "Drawn from the .idx sidecars alone (plus the records of the few blocks \
the window's edges cut), so it is instant on a store of terabytes. Bins are round widths (1 ms, \
10 ms, 1 s, 1 min, ...), about one per 4 pixels of --width: a wider picture or a narrower window \
gives finer bins. A block crossing a bin edge is apportioned over its bins in proportion to time; \
the totals are the window's frames. bytes: the bytes the records take in the files (headers \
included). Files without an .idx count nothing (listed in the JSON); a file being written counts up \
to its last index entry.\n\n\
--filter-index EXPR: per bin, the frames of the blocks that may hold a match of EXPR: an upper \
bound of the matching frames (`extract --count-only` gives the exact count). Files with a key index \
(.kdx) say exactly which blocks hold a frame with EXPR's hosts, ports and protocols together; \
others, which blocks' flow sets may.\n\n\
TIME as extract takes it: RFC 3339 (with a zone, or --utc), Unix seconds, or back from now (-5m, \
-1h). A window that misses the store draws nothing and says the store's span (stderr, and \
store_span in --json).\n\n\
INPUTS: every word is an input (a directory, a capture file, an https:// sensor); timeline takes no \
filter words (--filter-index EXPR bounds the matches per bin). A word that is both an existing file \
or directory here and a filter word (tcp, host, ...) is refused as ambiguous: write ./WORD for the \
file.\n\n\
Examples:\n  \
wiretape timeline /data --json\n  \
wiretape timeline /data --from -1h -o last-hour.svg --by queue\n  \
wiretape timeline /data --filter-index 'host 10.1.2.3' -o when.png --width 1600 --height 400\n  \
wiretape timeline https://s1:8443 https://s2:8443 --cert c.pem --key c.key --ca ca.pem -o fleet.svg"
)]
pub(crate) struct Args {
    #[command(flatten)]
    read: crate::common::ReadArgs,
    /// Directories and capture files of stores, and https://HOST:PORT sensors.
    #[arg(value_name = "DIR|FILE|https://HOST:PORT", required = true)]
    inputs: Vec<String>,
    #[command(flatten)]
    window: crate::common::WindowArgs,
    /// One series per interface or per RX queue (from the file names).
    #[arg(long, value_name = "none|iface|queue", default_value = "none", value_parser = ["none", "iface", "queue"])]
    by: String,
    /// Per bin, an upper bound of the frames matching EXPR (tcpdump's
    /// language) from the flow index.
    #[arg(long, value_name = "EXPR")]
    filter_index: Option<String>,
    /// Write the picture: OUT.svg (self-contained SVG) or OUT.png.
    #[arg(short = 'o', value_name = "OUT.svg|OUT.png")]
    out: Option<PathBuf>,
    /// The picture's width in pixels (it chooses the bins).
    #[arg(long, value_name = "PX", default_value_t = 1000)]
    width: u32,
    /// The picture's height in pixels.
    #[arg(long, value_name = "PX", default_value_t = 320)]
    height: u32,
    /// The bins as JSON on stdout (bin_ns, bins with start_ns, end_ns,
    /// frames, bytes, totals).
    #[arg(long)]
    json: bool,
    /// In directories, only files of this prefix (default: any of ours).
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    #[command(flatten)]
    tls: crate::common::tls::ClientTls,
}

/// Pictures are at least this and at most this many pixels a side.
const PX: std::ops::RangeInclusive<u32> = 200..=8000;

pub(crate) fn run(a: Args) -> Result<i32> {
    let read = a.read.options()?;
    // Every usage problem is found before anything is read or asked.
    let png = match a.out.as_ref().and_then(|o| o.extension()) {
        None if a.out.is_none() => false,
        Some(e) if e == "svg" => false,
        Some(e) if e == "png" => true,
        _ => {
            return usage(format!(
                "-o {}: the picture's name must end in .svg or .png",
                a.out
                    .as_ref()
                    .map(|o| o.display().to_string())
                    .unwrap_or_default()
            ))
        }
    };
    for (k, v) in [("--width", a.width), ("--height", a.height)] {
        if !PX.contains(&v) {
            return usage(format!(
                "{k} {v}: between {} and {} pixels",
                PX.start(),
                PX.end()
            ));
        }
    }
    let by = By::parse(&a.by).expect("clap checks --by");
    if let Some(e) = &a.filter_index {
        if let Err(e) = wiretape::filter::compile(
            e,
            wiretape::filter::LINKTYPE_ETHERNET,
            wiretape::files::pcap::MAX_SNAPLEN,
        ) {
            eprintln!("wiretape: error: --filter-index: {e}");
            return Ok(QueryError::from(e).exit_code());
        }
    }
    let window = match a.window.window() {
        Ok(w) => w,
        Err(e) => return usage(e),
    };
    let words = match crate::common::inputs::inputs_only(
        &a.inputs,
        "timeline",
        " (--filter-index EXPR bounds the frames matching a filter per bin)",
    ) {
        Ok(w) => w,
        Err(e) => return usage(e),
    };
    let (local, remotes) = match remote::split_inputs(&words) {
        Ok(s) => s,
        Err(e) => return usage(crate::common::flags::address_line(&e)),
    };
    let refs: Vec<&Remote> = remotes.iter().collect();
    let client = match a.tls.client(&refs) {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    let mut req = Request::new(local.clone());
    req.prefix = a.prefix.clone();
    req.window = window;
    req.by = by;
    req.filter_index = a.filter_index.clone();
    req.width = a.width;
    req.read = read;
    let tl = if remotes.is_empty() {
        timeline::build(&req).map_err(|e| anyhow!("{e}"))?
    } else {
        let client = client.expect("a client for the sensors");
        timeline::build_fleet(&mut req, &client, &remotes).map_err(|e| anyhow!("{e}"))?
    };
    if let Some(out) = &a.out {
        let svg = chart::svg(&tl, a.width, a.height);
        let bytes = if png {
            chart::png(&svg, a.width, a.height).map_err(|e| anyhow!("{e}"))?
        } else {
            svg.into_bytes()
        };
        std::fs::write(out, bytes).map_err(|e| anyhow!("cannot write {}: {e}", out.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&tl.to_json())?);
    } else if a.out.is_none() {
        print!("{}", chart::table(&tl));
    }
    let t = tl.totals();
    // Instead of "0 frames in 0 bins": why.
    if !crate::common::say_missed(tl.store_span, t.frames, &window) && !a.json {
        eprintln!(
            "wiretape: timeline {} to {}: {} frames, {} bytes in {} bins of {}{}{}",
            format_rfc3339(tl.from_ns),
            format_rfc3339(tl.to_ns),
            thousands(t.frames),
            thousands(t.bytes),
            tl.len(),
            chart::duration(tl.bin_ns),
            a.out
                .as_ref()
                .map(|o| format!(", drawn to {}", o.display()))
                .unwrap_or_default(),
            if tl.files_without_index.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} file(s) without .idx not counted (`wiretape index` makes them; for Stenographer's files `wiretape index --index-dir DIR`, then --index-dir DIR here)",
                    tl.files_without_index.len()
                )
            }
        );
    }
    Ok(0)
}
