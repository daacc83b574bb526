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
fn in_flags(e: PreflightError) -> anyhow::Error {
    use wiretape::pipeline::summary::bytes_h;
    match e {
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
        e => e.into(),
    }
}
