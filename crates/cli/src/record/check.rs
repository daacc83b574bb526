//! `wiretape record ... --check`: the library's preflight
//! ([`wiretape::pipeline::preflight`]) printed: exit 0 with one line saying
//! what was checked, or the first problem as the error line a real run
//! would print.

use anyhow::{anyhow, Result};
use std::net::SocketAddr;
use wiretape::pipeline::{preflight, PreflightError};
use wiretape::RecordConfig;

/// Runs the checks (see the module docs).
pub(crate) fn run(opts: &RecordConfig, metrics: Option<SocketAddr>) -> Result<i32> {
    match preflight(opts, metrics) {
        Ok(p) => {
            println!("wiretape: check passed: {}", p.passed.join(", "));
            Ok(0)
        }
        // As a recording: a filter libpcap refuses is a usage error.
        Err(PreflightError::Filter(e)) => {
            eprintln!("wiretape: error: {e}");
            Ok(crate::common::exit_code(&e))
        }
        Err(e) => Err(in_flags(e)),
    }
}

/// The preflight's error in the command's words: where the library says
/// what is wrong in its own terms, the flag that mends it (the text a real
/// run prints).
pub(super) fn in_flags(e: PreflightError) -> anyhow::Error {
    use wiretape::pipeline::summary::bytes_h;
    match e {
        PreflightError::VolumeTwice { given, first } => crate::usage(format!(
            "-w {} is given twice (as {}): give each volume once",
            given.display(),
            first.display()
        )),
        PreflightError::VolumesNest { inner, outer } => crate::usage(format!(
            "-w {} is inside -w {}: volumes must not nest (give separate directories, \
             normally one per disk)",
            inner.display(),
            outer.display()
        )),
        PreflightError::NoQueue {
            ifname,
            queue,
            count,
            asked,
        } => {
            let list: Vec<String> = asked.iter().map(u32::to_string).collect();
            crate::usage(format!(
                "--queues {}: interface {ifname} has no RX queue {queue}: it has {count} ({}): \
                 name queues below {count}, or leave --queues out to record them all \
                 (`ethtool -l {ifname}` lists them)",
                list.join(","),
                preflight::queue_range(count)
            ))
        }
        PreflightError::NoParent { dir, parent } => crate::usage(format!(
            "-w {}: its parent {} does not exist (a typo?): give an existing path, or --mkdir \
             to create the whole path (in a --config file: create = true)",
            dir.display(),
            parent.display()
        )),
        PreflightError::Twice(i) => anyhow!("interface {i} is given twice: give each -i once"),
        PreflightError::NoDirect(d) => anyhow!(
            "output directory {} is on a filesystem that refuses O_DIRECT: use --io auto or buffered",
            d.display()
        ),
        PreflightError::Space {
            dir,
            free,
            need,
            queues,
        } => anyhow!(
            "output directory {}: only {} free, less than the {} its {queues} queue(s) write at \
             once: free space or choose another -w",
            dir.display(),
            bytes_h(free),
            bytes_h(need)
        ),
        PreflightError::MetricsAddress { addr, source } => {
            let text = format!("cannot listen on {addr} for --metrics: {source}");
            anyhow::Error::new(source).context(text)
        }
        PreflightError::InputFile { path, problem } => {
            use preflight::InputProblem;
            let d = path.display();
            match problem {
                InputProblem::Missing => {
                    anyhow!("cannot read {d}: no such file (give -r a pcap or pcapng file)")
                }
                InputProblem::Directory => {
                    anyhow!("cannot read {d}: a directory (give -r a pcap or pcapng file)")
                }
                InputProblem::Empty => anyhow!(
                    "cannot read {d}: it is empty, not a pcap or pcapng file (give -r a capture file)"
                ),
                problem => anyhow!("cannot read {d}: {problem}"),
            }
        }
        e => e.into(),
    }
}
