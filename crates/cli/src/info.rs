//! `wiretape info`.

use crate::report::{bytes_h, thousands};
use anyhow::Result;
use std::path::PathBuf;
use wiretape::storage::FileInfo;
use wiretape::timestamp::format_rfc3339;

#[derive(clap::Args)]
pub struct Args {
    /// Capture files (pcap, ns or µs, either byte order).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print JSON, one object per file.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<i32> {
    let mut failed = 0;
    for f in &a.files {
        match FileInfo::scan(f) {
            Ok(i) => {
                let link = if i.linktype == 1 {
                    "Ethernet".to_string()
                } else {
                    format!("{}", i.linktype)
                };
                let res = if i.nanos { "ns" } else { "us" };
                if a.json {
                    println!(
                        "{}",
                        serde_json::json!({
                            "file": f.display().to_string(), "packets": i.packets,
                            "captured_bytes": i.captured_bytes, "original_bytes": i.original_bytes,
                            "first_ns": i.first_ns, "last_ns": i.last_ns, "resolution": res,
                            "linktype": i.linktype, "snaplen": i.snaplen, "file_bytes": i.file_bytes,
                            "out_of_order": i.out_of_order,
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
                println!("  resolution   {res}");
                println!(
                    "  link type    {link} ({}), snaplen {}",
                    i.linktype, i.snaplen
                );
                if i.out_of_order > 0 {
                    println!(
                        "  note         {} records earlier than the one before",
                        i.out_of_order
                    );
                }
            }
            Err(e) => {
                eprintln!("wiretape: error: {e}");
                failed += 1;
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
