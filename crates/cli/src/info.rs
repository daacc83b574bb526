//! `wiretape info`.

use crate::common::captures;
use anyhow::Result;
use std::path::PathBuf;
use wiretape::files::index;
use wiretape::files::{FileInfo, Format};
use wiretape::pipeline::summary::{bytes_h, thousands};
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
        let (i, damage) = FileInfo::scan_to_damage_with(f, &opts);
        if let Some(e) = &damage {
            failed += 1;
            eprintln!("wiretape: error: {e}");
            if !a.json {
                continue;
            }
        }
        {
            {
                let link = wiretape::filter::linktype::name(i.linktype);
                let res = if i.nanos { "ns" } else { "us" };
                let fmt = match i.format {
                    Some(Format::PcapNg) => "pcapng",
                    Some(Format::Steno) => "stenotype (TPACKET_V3 blocks)",
                    _ => "pcap",
                };
                // The sidecar index: its totals, and whether they agree
                // with the file (after a crash they may not: `repair`).
                let ip = opts.index_path(f);
                let idx = ip.exists().then(|| index::read(&ip));
                let idx_json = match &idx {
                    None => serde_json::Value::Null,
                    Some(Err(e)) => serde_json::json!({ "error": e.to_string() }),
                    Some(Ok(es)) => {
                        let n: u64 = es.iter().map(|e| e.count).sum();
                        let agrees = n == i.packets
                            && es.first().map(|e| e.first_ns) == i.first_ns
                            && es.last().map(|e| e.last_ns) == i.last_ns;
                        serde_json::json!({
                            "entries": es.len(), "packets": n, "agrees": agrees,
                            "first_ns": es.first().map(|e| e.first_ns),
                            "last_ns": es.last().map(|e| e.last_ns),
                        })
                    }
                };
                // The key index: segments, blocks covered, complete or not.
                let kdx = wiretape::files::keys::KeyIndex::open(f, &opts);
                let keys_json = match &kdx {
                    Ok(None) => serde_json::Value::Null,
                    Err(e) => serde_json::json!({ "error": e.to_string() }),
                    Ok(Some(k)) => {
                        let segs = k.segments();
                        let rows: u64 = segs.iter().map(|s| s.header.rows).sum();
                        let blocks: u64 = segs.iter().map(|s| s.header.nblocks).sum();
                        serde_json::json!({
                            "segments": segs.len(), "blocks": blocks, "rows": rows,
                            "bytes": std::fs::metadata(k.path()).map_or(0, |m| m.len()),
                            "complete": k.complete_for(i.file_bytes),
                        })
                    }
                };
                if a.json {
                    println!(
                        "{}",
                        serde_json::json!({
                            "file": f.display().to_string(), "packets": i.packets,
                            "captured_bytes": i.captured_bytes, "original_bytes": i.original_bytes,
                            "first_ns": i.first_ns, "last_ns": i.last_ns, "resolution": res,
                            "linktype": i.linktype, "snaplen": i.snaplen, "file_bytes": i.file_bytes,
                            "out_of_order": i.out_of_order, "format": fmt,
                            "records_odd": i.records_odd,
                            "compression": i.compression,
                            "encrypted": i.encrypted,
                            "index": idx_json,
                            "key_index": keys_json,
                            "error": damage.as_ref().map(|e| e.to_string()),
                        })
                    );
                    continue;
                }
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
                    Some(c) => {
                        println!("  format       {fmt}, {res} timestamps, {c}-compressed{age}")
                    }
                    None => println!("  format       {fmt}, {res} timestamps{age}"),
                }
                match &idx {
                    None => {}
                    Some(Err(e)) => println!("  index        unreadable: {e}"),
                    Some(Ok(es)) => println!(
                        "  index        {} blocks, {} packets{}",
                        es.len(),
                        thousands(es.iter().map(|e| e.count).sum()),
                        if idx_json["agrees"] == true {
                            " (agrees with the file)"
                        } else {
                            " (DISAGREES with the file: `wiretape repair` rebuilds it)"
                        }
                    ),
                }
                match (&kdx, &keys_json) {
                    (Ok(None), _) => {}
                    (Err(e), _) => println!("  key index    unreadable: {e}"),
                    (Ok(Some(_)), j) => println!(
                        "  key index    {} segments, {} blocks, {} rows, {}{}",
                        j["segments"],
                        j["blocks"],
                        thousands(j["rows"].as_u64().unwrap_or(0)),
                        bytes_h(j["bytes"].as_u64().unwrap_or(0)),
                        if j["complete"] == true {
                            ""
                        } else {
                            " (not complete: being written, or `wiretape index` rebuilds it)"
                        }
                    ),
                }
                println!("  link type    {link}, snaplen {}", i.snaplen);
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
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
