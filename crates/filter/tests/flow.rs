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
use wiretape_filter::flow::{FlowCollector, FlowSet, FrameKeys, Key, Needs};
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

/// Nets and port ranges beside the corpus: prefixes of every length, a
/// mask that is not a prefix, ranges of one and many ports, both
/// directions, mixed with hosts and negations.
const RANGES: &[&str] = &[
    "net 10.0.0.0/8",
    "net 10.1.0.0/16",
    "src net 192.168.0.0/24",
    "dst net 172.16.0.0/12",
    "net 10.0.0.0/31",
    "net 10.0.2.0 mask 255.0.255.0",
    "net 0.0.0.0/0 and tcp",
    "ip6 net 2001:db8::/32",
    "ip6 net 2001:db8:0:1::/64",
    "ip6 net fe80::/10",
    "ip6 net 2001:db8::/120",
    "ip6 src net 2001:db8::2/127",
    "portrange 1-1023",
    "portrange 5000-5010",
    "tcp portrange 80-443",
    "udp dst portrange 50-60",
    "src portrange 1024-65535 and net 10.0.0.0/8",
    "portrange 0-65535",
    "net 10.1.0.0/16 and portrange 400-500",
    "net 10.1.0.0/16 and not portrange 1-1023",
    "not net 10.0.0.0/8 and udp",
    "host 10.1.2.3 or net 192.168.0.0/16 or ip6 net 2001:db8::/32",
];

#[test]
fn every_matching_frame_holds_an_alternative_all_of_it() {
    // The key index decides per row (a frame's keys, [`FrameKeys::of`]),
    // exactly: it is sound only if every frame the program accepts holds
    // every key of one alternative, ranges (nets, port ranges) included.
    let mut rng = Rng::new(0x05ee_d5e7);
    let frames: Vec<Frame> = (0..FRAMES).map(|_| frame(&mut rng)).collect();
    let keys: Vec<FrameKeys> = frames.iter().map(|f| FrameKeys::of(&f.data)).collect();
    let (mut narrowing, mut ruled_out, mut ranged) = (0, 0usize, 0);
    for expr in EXPRESSIONS.iter().chain(RANGES) {
        let prog = compile(expr, LINKTYPE_ETHERNET, 262_144).expect(expr);
        let Some(needs) = Needs::of(prog.insns()) else {
            continue;
        };
        narrowing += 1;
        ranged += usize::from(needs.alternatives().iter().flatten().any(|k| k.width() > 1));
        for (f, k) in frames.iter().zip(&keys) {
            let held = needs
                .alternatives()
                .iter()
                .any(|alt| alt.iter().all(|x| k.holds(x)));
            if prog.matches(&f.data, f.wire_len) {
                assert!(
                    held,
                    "{expr:?}: frame {:02x?} matches but holds no alternative of {:?}\nkeys {k:?}",
                    f.data,
                    needs.alternatives()
                );
            }
            ruled_out += usize::from(!held);
        }
    }
    assert!(narrowing >= 30, "only {narrowing} expressions narrow");
    assert!(ranged >= 15, "only {ranged} expressions need a range");
    assert!(ruled_out > FRAMES * 10, "only {ruled_out} frames ruled out");
}

#[test]
fn nets_and_port_ranges_are_key_ranges() {
    let cases: &[(&str, Key)] = &[
        ("net 10.1.0.0/16", Key::Net4(0x0a01_0000, 0x0a01_ffff)),
        (
            "dst net 192.168.7.0/24",
            Key::Net4(0xc0a8_0700, 0xc0a8_07ff),
        ),
        ("net 10.1.2.3/32", Key::Ip4(0x0a01_0203)),
        (
            "ip6 net 2001:db8::100/120",
            Key::Net6(0x2001_0db8 << 96 | 0x100, 0x2001_0db8 << 96 | 0x1ff),
        ),
        (
            "ip6 net 2001:db8::6/127",
            Key::Net6(0x2001_0db8 << 96 | 6, 0x2001_0db8 << 96 | 7),
        ),
        ("portrange 5000-5010", Key::Ports(5000, 5010)),
        ("tcp dst portrange 1-1023", Key::Ports(1, 1023)),
    ];
    for (expr, key) in cases {
        let prog = compile(expr, LINKTYPE_ETHERNET, 262_144).unwrap();
        let needs = Needs::of(prog.insns()).unwrap_or_else(|| panic!("{expr}: no narrowing"));
        // Every alternative that can hold an address or port of the
        // expression's kind asks for the range.
        for alt in needs.alternatives() {
            assert!(alt.contains(key), "{expr}: {alt:?} lacks {key:?}");
        }
        // A block of flow sets with values outside the range is skipped;
        // one with a value inside it (its ends included) is read.
        let (lo, hi): (Key, Key) = match *key {
            Key::Net4(a, b) => (Key::Ip4(a), Key::Ip4(b)),
            Key::Ip4(a) => (Key::Ip4(a), Key::Ip4(a)),
            Key::Net6(a, b) => (Key::Ip6(a), Key::Ip6(b)),
            Key::Ports(a, b) => (Key::Port(a), Key::Port(b)),
            _ => unreachable!(),
        };
        let outside = |k: Key| match k {
            Key::Ip4(a) => Key::Ip4(a.wrapping_add(0x100_0000)),
            Key::Ip6(a) => Key::Ip6(a ^ 1 << 127),
            Key::Port(p) => Key::Port(p.wrapping_add(20_000)),
            k => k,
        };
        let set = |k: &[Key]| {
            let mut s = FlowSet::default();
            for e in [0x0800, 0x86dd] {
                s.push(Key::EtherType(e));
            }
            for p in [6, 17] {
                s.push(Key::Proto(p));
            }
            s.push(Key::Ip4(0x0101_0101));
            s.push(Key::Ip6(1));
            s.push(Key::Port(30_000));
            for x in k {
                s.push(*x);
            }
            s.normalize();
            s
        };
        assert!(
            !needs.may_match(&set(&[outside(lo), outside(hi)])),
            "{expr}"
        );
        assert!(needs.may_match(&set(&[lo])), "{expr}: low end");
        assert!(needs.may_match(&set(&[hi])), "{expr}: high end");
    }
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
