//! `wiretape repair`: trim torn tails (a crash, a full disk) off capture
//! files, and remove the files a crash left without a complete header.

use anyhow::Result;
use std::path::PathBuf;
use wiretape::storage::repair;

#[derive(clap::Args)]
#[command(
    after_help = "A torn tail is a half-written last record, or zero padding from an interrupted \
aligned write, after the last complete record; it is cut off (a compressed file is closed at its \
last whole block). A file without a complete header (empty, zeros, a header cut short, a \
compressed stream without one whole block: what a crash right after the file was created leaves) \
holds no frame and no reader can open it: it is removed, with its .idx, and named. A damaged \
record followed by more data is corruption: the file is left as it is and the command exits 1. \
A file a running recorder holds (it is being written) is left alone. `wiretape record` does this \
by itself for its own files in its output directory. A directory stands for the capture files in \
it named like wiretape's (compressed ones too), as every other command reads a store; with more \
than one file a total closes the output.\n\n\
Examples:\n  wiretape repair /data        # after a crash: every capture in /data\n  \
wiretape repair trace.pcap"
)]
pub(crate) struct Args {
    #[command(flatten)]
    id: crate::common::IdentityArg,
    /// Capture files (pcap, pcapng; plain or compressed) and directories
    /// of them.
    #[arg(required = true, value_name = "FILE|DIR")]
    files: Vec<PathBuf>,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let read = a.id.options()?;
    let files = crate::common::captures(&a.files)?;
    let (mut intact, mut repaired, mut removed, mut busy, mut failed) = (0, 0, 0, 0, 0);
    for f in &files {
        match repair::repair_with(f, &read) {
            Ok(r) if r.busy => {
                busy += 1;
                println!(
                    "{}: being written by a running recorder: left alone",
                    f.display()
                );
            }
            Ok(r) if r.removed => {
                removed += 1;
                println!(
                    "{}: removed ({} bytes, no complete file header: a crash right after it was created; it held no frame)",
                    f.display(),
                    r.len_before
                );
            }
            Ok(r) if r.changed() && r.len_after > r.len_before => {
                repaired += 1;
                println!(
                    "{}: closed a compressed stream cut short (cut at its last whole block, end mark written); {} complete records kept ({} bytes)",
                    f.display(),
                    r.records,
                    r.len_after
                );
            }
            Ok(r) if r.changed() => {
                repaired += 1;
                println!(
                    "{}: trimmed {} bytes of torn tail; {} complete records kept ({} bytes)",
                    f.display(),
                    r.trimmed(),
                    r.records,
                    r.len_after
                );
            }
            Ok(r) => {
                intact += 1;
                println!("{}: intact, {} records", f.display(), r.records);
            }
            Err(e) => {
                eprintln!(
                    "wiretape: error: {}",
                    crate::common::flags::storage_text(&e)
                );
                failed += 1;
            }
        }
    }
    if files.len() > 1 {
        println!(
            "{} capture files: {intact} intact, {repaired} repaired, {removed} removed (no complete header), \
             {busy} being written (left alone), {failed} refused",
            files.len()
        );
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
