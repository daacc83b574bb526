//! `wiretape record ... --check`: the library's preflight
//! ([`wiretape::pipeline::preflight`]) printed: exit 0 with one line saying
//! what was checked, or the first problem as the error line a real run
//! would print.

use anyhow::Result;
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
        Err(e) => Err(e.into()),
    }
}
