//! `wiretape repair`: trim torn tails (a crash, a full disk) off capture files.

use anyhow::Result;
use std::path::PathBuf;
use wiretape::storage::repair;

#[derive(clap::Args)]
#[command(
    after_help = "A torn tail is a half-written last record, or zero padding from an interrupted \
aligned write, after the last complete record; it is cut off. A damaged record followed by more data \
is corruption: the file is left as it is and the command exits 1. `wiretape record` does this by \
itself for its own files in its output directory. A directory stands for the capture files in it \
named like wiretape's (compressed ones too), as every other command reads a store.\n\n\
Examples:\n  wiretape repair /data\n  wiretape repair trace.pcap"
)]
pub struct Args {
    /// Capture files (pcap, pcapng; plain or compressed) and directories
    /// of them.
    #[arg(required = true, value_name = "FILE|DIR")]
    files: Vec<PathBuf>,
}

pub fn run(a: Args) -> Result<i32> {
    let mut failed = 0;
    for f in &crate::info::captures(&a.files)? {
        match repair::repair(f) {
            Ok(r) if r.changed() && r.len_after > r.len_before => println!(
                "{}: closed a compressed stream cut short (cut at its last whole block, end mark written); {} complete records kept ({} bytes)",
                f.display(),
                r.records,
                r.len_after
            ),
            Ok(r) if r.changed() => println!(
                "{}: trimmed {} bytes of torn tail; {} complete records kept ({} bytes)",
                f.display(),
                r.trimmed(),
                r.records,
                r.len_after
            ),
            Ok(r) => println!("{}: intact, {} records", f.display(), r.records),
            Err(e) => {
                eprintln!("wiretape: error: {e}");
                failed += 1;
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
