//! The test bed's spread over queues, read by the kernel's own counters:
//! with GRO on the capture end (and TSO off on the generator end, so that
//! veth takes every frame through its per-queue NAPI path), `ethtool -S`
//! counts the frames each RX queue of the capture end received. Flow `f`
//! must land on queue `f % queues`, exactly, on every machine.
#![allow(unused_crate_dependencies)] // the library's own dependencies

use std::collections::BTreeMap;
use wiretape_testbed::{SizeFn, Testbed, CAP_IF, GEN_IF};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Frames per RX queue of the capture end, from `ethtool -S`.
fn rx_per_queue(tb: &Testbed) -> BTreeMap<u32, u64> {
    let out = tb.exec(&["ethtool", "-S", CAP_IF]).expect("ethtool -S");
    out.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            let q = k.strip_prefix("rx_queue_")?.strip_suffix("_xdp_packets")?;
            Some((q.parse().ok()?, v.trim().parse().ok()?))
        })
        .collect()
}

fn spread(queues: u32, flows: u16, n: u64) {
    let tb = Testbed::create("spread", queues).unwrap();
    tb.exec(&["ethtool", "-K", GEN_IF, "tso", "off"]).unwrap();
    tb.exec(&["ethtool", "-K", CAP_IF, "gro", "on"]).unwrap();
    let before = rx_per_queue(&tb);
    let rep = tb.send(0..n, SizeFn::Mixed, flows, Some(50_000)).unwrap();
    assert_eq!(rep.sent, n);
    let after = rx_per_queue(&tb);
    let got: Vec<u64> = (0..queues)
        .map(|q| after.get(&q).copied().unwrap_or(0) - before.get(&q).copied().unwrap_or(0))
        .collect();
    // What each queue must get: the frames of the flows f with f % queues == q.
    let want: Vec<u64> = (0..queues as u64)
        .map(|q| {
            (0..n)
                .filter(|s| (s % flows as u64) % queues as u64 == q)
                .count() as u64
        })
        .collect();
    assert_eq!(
        rep.per_queue, want,
        "{queues} queues, {flows} flows: what the sender says it sent per queue"
    );
    assert_eq!(
        got, want,
        "{queues} queues, {flows} flows: frames per RX queue of the capture end (ethtool -S)"
    );
}

#[test]
fn two_queues_get_their_flows_exactly() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    spread(2, 4, 4_000);
    // An odd flow count: queue 0 gets flows 0 and 2, queue 1 flow 1.
    spread(2, 3, 3_000);
}

#[test]
fn four_queues_get_their_flows_exactly() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    spread(4, 16, 8_000);
    // Fewer flows than queues: the last queues get nothing, as stated.
    spread(4, 2, 1_000);
}

#[test]
fn a_test_that_needs_a_queue_the_traffic_missed_is_told_so() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let tb = Testbed::create("spreadneed", 2).unwrap();
    let rep = tb
        .send(0..100, SizeFn::Fixed(100), 1, Some(50_000))
        .unwrap();
    assert_eq!(rep.per_queue, vec![100, 0]);
    let e = rep.require_queues(0..2).unwrap_err().to_string();
    assert!(e.contains("none on [1]"), "{e}");
    rep.require_queues(0..1).unwrap();
}
