//! `wiretape info`.

use crate::common::captures;
use crate::common::flags::identity_words;
use anyhow::Result;
use std::path::PathBuf;
use wiretape::pipeline::summary::{bytes_h, thousands};
use wiretape::query::info::{self, Sidecar};
use wiretape::timestamp::format_rfc3339;

#[derive(clap::Args)]
#[command(
    after_help = "A directory stands for the capture files in it named like wiretape's \
(<prefix>-<iface>-q<N>-<UTC>.pcap[ng], compressed .lz4/.zst too), oldest first, as every other \
command reads a store; a file named is read whatever its name. Exits 1 when a file is damaged \
(the byte where its last complete record ends is named; `wiretape repair` trims a torn tail).\n\n\
Examples:\n  wiretape info /data                 # every capture of the store\n  \
wiretape info /data/*.pcap*         # the same by a glob (.pcap* also takes .pcap.lz4, .pcapng.zst)\n  \
wiretape info --json trace.pcap"
)]
pub(crate) struct Args {
    #[command(flatten)]
    read: crate::common::ReadArgs,
    /// Capture files (pcap ns or µs, either byte order, or pcapng; plain
    /// or compressed) and directories of them. A wiretape `.idx` sidecar,
    /// if present, is read and checked too, and a `.kdx` key index summed
    /// up (segments, blocks, rows, complete).
    #[arg(required = true, value_name = "FILE|DIR")]
    files: Vec<PathBuf>,
    /// Print JSON, one object per file.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let opts = a.read.options()?;
    let mut failed = 0;
    for f in &captures(&a.files)? {
        let r = info::describe(f, &opts);
        if let Some(e) = &r.damage {
            failed += 1;
            eprintln!("wiretape: error: {}", identity_words(&e.to_string()));
            if !a.json {
                continue;
            }
        }
        if a.json {
            let mut j = r.to_json();
            if let Some(e) = j["error"].as_str().map(identity_words) {
                j["error"] = e.into();
            }
            println!("{j}");
            continue;
        }
        let i = &r.info;
        let (fmt, res) = (r.format_name(), r.resolution());
        println!("{}:", f.display());
        println!("  packets      {}", thousands(i.packets));
        println!(
            "  bytes        {} captured, {} on the wire, file {}",
            thousands(i.captured_bytes),
            thousands(i.original_bytes),
            bytes_h(i.file_bytes)
        );
        match (i.first_ns, i.last_ns) {
            (Some(a), Some(b)) => {
                println!("  first        {}", format_rfc3339(a));
                println!("  last         {}", format_rfc3339(b));
                println!("  span         {:.9} s", (b.saturating_sub(a)) as f64 / 1e9);
            }
            _ => println!("  first/last   (no packets)"),
        }
        let age = if i.encrypted { ", age-encrypted" } else { "" };
        match i.compression {
            Some(c) => println!("  format       {fmt}, {res} timestamps, {c}-compressed{age}"),
            None => println!("  format       {fmt}, {res} timestamps{age}"),
        }
        match &r.index {
            Sidecar::Unreadable(e) => println!("  index        unreadable: {e}"),
            Sidecar::Read(x) => println!(
                "  index        {} blocks, {} packets{}",
                x.entries,
                thousands(x.packets),
                if x.agrees {
                    " (agrees with the file)"
                } else {
                    " (DISAGREES with the file: `wiretape repair` rebuilds it)"
                }
            ),
            _ => {}
        }
        match &r.key_index {
            Sidecar::Unreadable(e) => println!("  key index    unreadable: {e}"),
            Sidecar::Read(k) => println!(
                "  key index    {} segments, {} blocks, {} rows, {}{}",
                k.segments,
                k.blocks,
                thousands(k.rows),
                bytes_h(k.bytes),
                if k.complete {
                    ""
                } else {
                    " (not complete: being written, or `wiretape index` rebuilds it)"
                }
            ),
            _ => {}
        }
        println!(
            "  link type    {}, snaplen {}",
            wiretape::filter::linktype::name(i.linktype),
            i.snaplen
        );
        if i.records_odd > 0 {
            println!(
                "  note         {} odd records read as frames, as libpcap reads them \
                 (orig_len 0 or below caplen, fraction out of range, or cut to the snaplen)",
                i.records_odd
            );
        }
        if i.out_of_order > 0 {
            println!(
                "  note         {} records earlier than the one before",
                i.out_of_order
            );
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
