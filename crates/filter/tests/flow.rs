//! The flow index must never skip a block that holds a matching frame: for
//! every expression of the differential corpus and thousands of generated
//! frames (all protocols, VLANs, truncated and garbage frames), a frame that
//! libpcap's program accepts must pass [`Needs::may_match`] against the set
//! of its own block. Frames are grouped into blocks of a few dozen, as a
//! writer would; the same check runs on one-frame blocks. And the index
//! must narrow what it claims to: selective filters skip most blocks.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

mod common;

use common::frames::{frame, Frame, Rng};
use common::EXPRESSIONS;
use wiretape_filter::flow::{FlowCollector, FlowSet, Key, Needs};
use wiretape_filter::{compile, LINKTYPE_ETHERNET};

const FRAMES: usize = 6000;

fn blocks(frames: &[Frame], per: usize) -> Vec<(FlowSet, std::ops::Range<usize>)> {
    let mut c = FlowCollector::new();
    let mut out = Vec::new();
    for (b, chunk) in frames.chunks(per).enumerate() {
        for f in chunk {
            c.add(&f.data);
        }
        out.push((c.finish(), b * per..b * per + chunk.len()));
    }
    out
}

#[test]
fn never_skips_a_block_with_a_match() {
    let mut rng = Rng::new(0x5eed_f10e);
    let frames: Vec<Frame> = (0..FRAMES).map(|_| frame(&mut rng)).collect();
    let sets_1 = blocks(&frames, 1);
    let sets_40 = blocks(&frames, 40);
    let mut narrowing = 0;
    let mut skipped = 0;
    for expr in EXPRESSIONS {
        let prog = compile(expr, LINKTYPE_ETHERNET, 262_144).expect(expr);
        let Some(needs) = Needs::of(prog.insns()) else {
            continue;
        };
        narrowing += 1;
        for sets in [&sets_1, &sets_40] {
            for (set, range) in sets {
                let matched = frames[range.clone()]
                    .iter()
                    .position(|f| prog.matches(&f.data, f.wire_len));
                skipped += usize::from(!needs.may_match(set));
                if let Some(i) = matched {
                    assert!(
                        needs.may_match(set),
                        "{expr:?}: block {range:?} skipped, but frame {} matches: {:02x?}\nneeds {:?}\nset {set:?}",
                        range.start + i,
                        frames[range.start + i].data,
                        needs.alternatives()
                    );
                }
            }
        }
    }
    assert!(narrowing >= 15, "only {narrowing} expressions narrow");
    // Not vacuous: the index does skip blocks of this corpus.
    assert!(skipped > FRAMES, "only {skipped} blocks skipped");
    eprintln!(
        "{narrowing} of {} expressions narrow; {skipped} blocks skipped",
        EXPRESSIONS.len()
    );
}

#[test]
fn selective_filters_narrow() {
    let cases: &[(&str, &[Key])] = &[
        ("host 10.1.2.3", &[Key::Ip4(0x0a01_0203)]),
        ("tcp port 443", &[Key::Port(443), Key::Proto(6)]),
        ("udp", &[Key::Proto(17)]),
        ("vlan 100", &[Key::Vlan(100)]),
        ("arp", &[Key::EtherType(0x806)]),
        (
            "ip6 host 2001:db8::1",
            &[Key::Ip6(0x2001_0db8_0000_0000_0000_0000_0000_0001)],
        ),
        (
            "host 10.1.2.3 and tcp port 443",
            &[Key::Ip4(0x0a01_0203), Key::Port(443), Key::Proto(6)],
        ),
    ];
    for (expr, keys) in cases {
        let prog = compile(expr, LINKTYPE_ETHERNET, 262_144).unwrap();
        let needs = Needs::of(prog.insns()).unwrap_or_else(|| panic!("{expr}: no narrowing"));
        // Every alternative asks for at least one of the keys that make the
        // filter selective, so a block without them is skipped...
        let mut without = FlowSet::anything();
        without.any = [false; 6];
        without.ether_types = vec![0x0800, 0x86dd, 0x8100];
        without.protos = vec![1, 58];
        without.vlans = vec![5];
        without.ip4 = vec![0x0a00_0001];
        without.ports = vec![80];
        without.normalize();
        let skips = !keys.iter().all(|k| without.may_hold(k));
        assert!(skips, "{expr}: test set holds the keys");
        assert!(
            !needs.may_match(&without),
            "{expr}: a block without {keys:?} is not skipped: {:?}",
            needs.alternatives()
        );
        // ...and a block with them is read.
        let mut with = without.clone();
        for k in *keys {
            with.push(*k);
        }
        with.normalize();
        assert!(
            needs.may_match(&with),
            "{expr}: a block with {keys:?} is skipped: {:?}",
            needs.alternatives()
        );
    }
    // Filters on payload or length cannot narrow.
    for expr in [
        "",
        "less 100",
        "tcp[13] & 2 != 0 or len > 3",
        "not host 10.0.0.1",
    ] {
        let prog = compile(expr, LINKTYPE_ETHERNET, 262_144).unwrap();
        let n = Needs::of(prog.insns());
        assert!(
            n.is_none() || n.as_ref().is_some_and(|n| n.may_match(&FlowSet::default())),
            "{expr}: {n:?}"
        );
    }
}
