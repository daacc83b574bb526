//! Differential test of the capture filter as it is actually loaded: the
//! steering program (`wiretape_steer`, from `bpf/steer.bpf.c`) with the
//! generated filter program in its tail-call slot, run by the kernel with
//! `BPF_PROG_TEST_RUN` on generated frames, against libpcap's own
//! interpreter (`pcap_offline_filter`). Accepted frames must come back as
//! `XDP_REDIRECT` (to the queue's AF_XDP socket), rejected ones as
//! `XDP_PASS`, and the per-queue counters must say `seen` for every frame
//! and `filtered` for exactly the rejected ones.
//!
//! Root only (loads programs, opens an AF_XDP socket on the `lo` of a
//! private network namespace the test thread moves into, attaches
//! nothing): skipped with a note otherwise. The filter crate's own
//! differential test covers the translation alone.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

#[path = "../../filter/tests/common/mod.rs"]
mod common;

use common::frames::{frame, Rng};
use common::{libpcap_run, EXPRESSIONS};
use wiretape_capture::bpf::SteerProgram;
use wiretape_capture::xsk::{self, XskConfig};
use wiretape_capture::{sys, CaptureFilter};
use wiretape_filter::LINKTYPE_ETHERNET;

const FRAMES: usize = 1500;

/// Moves the calling thread into a new network namespace (gone when the
/// thread ends) and returns the ifindex of its `lo`: the test's sockets
/// never meet anything else on the host.
fn private_lo() -> u32 {
    // SAFETY: unshare takes no pointers; CLONE_NEWNET moves only this thread.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(
        rc,
        0,
        "unshare(CLONE_NEWNET): {}",
        std::io::Error::last_os_error()
    );
    sys::ifindex("lo").expect("lo exists in every namespace")
}
const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

#[test]
fn loaded_steering_and_filter_agree_with_libpcap() {
    if !sys::is_root() {
        eprintln!("note: not root: the loaded-program differential test is skipped");
        return;
    }
    // Frames XDP can see whole (test runs need at least 14 bytes).
    let mut rng = Rng::new(0x10ad_ed00_0000_0001);
    let frames: Vec<Vec<u8>> = std::iter::repeat_with(|| frame(&mut rng))
        .filter(|f| f.data.len() as u32 == f.wire_len && f.data.len() >= 14)
        .take(FRAMES)
        .map(|f| f.data)
        .collect();
    let lo = private_lo();
    let cfg = XskConfig {
        frames: 64,
        frame_size: 2048,
        zero_copy: Some(false),
    };
    // A socket for queue 0, so that the program takes the frame (the test
    // run only reports the redirect; nothing reaches the socket).
    let (sock, _) = xsk::open(lo, 0, &cfg).expect("AF_XDP socket on lo");
    let mut runs = 0u64;
    let mut failures = Vec::new();
    for &expr in EXPRESSIONS {
        let f = CaptureFilter::compile(expr, LINKTYPE_ETHERNET, 65535).unwrap();
        let mut prog = SteerProgram::load().expect("load the steering program");
        prog.register(0, sock.fd.raw()).unwrap();
        prog.install_filter(&f)
            .unwrap_or_else(|e| panic!("'{expr}': {e}\n{}", f.program.dump()));
        let before = prog.counters(0);
        let mut rejected = 0u64;
        for (i, data) in frames.iter().enumerate() {
            let want = libpcap_run(f.program.insns(), data, data.len() as u32) != 0;
            let (got, _) = prog.test_run(data, lo, 0, 1).unwrap();
            runs += 1;
            let want_ret = if want { XDP_REDIRECT } else { XDP_PASS };
            if !want {
                rejected += 1;
            }
            if got != want_ret && failures.len() < 20 {
                failures.push(format!(
                    "'{expr}' frame #{i}: XDP action {got}, libpcap says {}",
                    if want { "accept" } else { "reject" }
                ));
            }
        }
        let after = prog.counters(0);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        assert_eq!(after.seen - before.seen, frames.len() as u64, "'{expr}'");
        assert_eq!(
            after.filtered - before.filtered,
            rejected,
            "'{expr}': filtered"
        );
        assert_eq!(after.passed, 0);
    }
    eprintln!(
        "{} expressions x {} frames: {runs} runs of the loaded steering + filter programs agree with libpcap",
        EXPRESSIONS.len(),
        frames.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn without_a_filter_every_frame_is_redirected() {
    if !sys::is_root() {
        eprintln!("note: not root: skipped");
        return;
    }
    let lo = private_lo();
    let mut prog = SteerProgram::load().unwrap();
    let cfg = XskConfig {
        frames: 64,
        frame_size: 2048,
        zero_copy: Some(false),
    };
    let (sock, _) = xsk::open(lo, 0, &cfg).unwrap();
    prog.register(0, sock.fd.raw()).unwrap();
    let frame = [0u8; 60];
    assert_eq!(prog.test_run(&frame, lo, 0, 1).unwrap().0, XDP_REDIRECT);
    let c = prog.counters(0);
    assert_eq!((c.seen, c.filtered), (1, 0));
}
