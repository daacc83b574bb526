//! The compiled form against the reference: random queries over small
//! pools of values, random frames built from the same pools (any stack of
//! Ethernet, VLAN tags of the five types, MPLS labels, pseudowires; IPv4
//! of any header length; IPv6 with extension headers and fragments;
//! TCP/UDP), cut anywhere, and the filter crate's mixed frames; every
//! frame at stamps on, beside and between the query's bounds.
//! [`Selection::matches`] must equal [`eval`] of [`Decoded::of`] on every
//! one.

use super::*;
use crate::Window;

#[allow(dead_code, unreachable_pub)]
#[path = "../../../filter/tests/common/frames.rs"]
mod mixed;

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

const V4: [u32; 5] = [
    0x0a00_0001,
    0x0a00_0002,
    0x0a01_0203,
    0xc0a8_0101,
    0x0808_0808,
];
const V6: [u128; 4] = [
    0x2001_0db8 << 96 | 1,
    0x2001_0db8 << 96 | 2,
    0xfe80 << 112 | 0xabcd,
    (0xffff << 32) | 0x0a00_0001,
];
const PORTS: [u16; 5] = [53, 80, 443, 514, 0];
const PROTOS: [u8; 8] = [6, 17, 1, 58, 44, 0, 47, 132];
const VLANS: [u16; 4] = [1, 7, 100, 4095];
const LABELS: [u32; 3] = [16, 1000, 0xfffff];
const T0: u64 = 1_700_000_000_000_000_000;
const TIMES: [u64; 4] = [T0, T0 + 1_000, T0 + 60_000_000_000, T0 + 3_600_000_000_000];

fn be16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_be_bytes());
}

/// A transport header (or some bytes).
fn l4(r: &mut Rng, proto: u8) -> Vec<u8> {
    let mut v = Vec::new();
    be16(&mut v, r.pick(&PORTS));
    be16(&mut v, r.pick(&PORTS));
    let n = match proto {
        6 => 16,
        17 => 4,
        _ => r.below(12) as usize,
    };
    v.extend((0..n).map(|_| r.next() as u8));
    v
}

fn ip4(r: &mut Rng) -> Vec<u8> {
    let proto = r.pick(&PROTOS);
    let ihl = if r.chance(80) { 5 } else { r.below(16) as u8 };
    let mut h = vec![0x40 | ihl, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
    h.extend_from_slice(&r.pick(&V4).to_be_bytes());
    h.extend_from_slice(&r.pick(&V4).to_be_bytes());
    if ihl > 5 {
        h.resize(usize::from(ihl) * 4, 1);
    }
    if r.chance(10) {
        h[6] = 0x20 | (r.next() as u8 & 0x1f); // a fragment
    }
    h.extend(l4(r, proto));
    h
}

fn ip6(r: &mut Rng) -> Vec<u8> {
    let mut exts = Vec::new();
    for _ in 0..r.pick(&[0, 0, 1, 2, 3]) {
        exts.push(r.pick(&[0u8, 43, 44, 60, 135, 44]));
    }
    let proto = r.pick(&PROTOS);
    let first = exts.first().copied().unwrap_or(proto);
    let mut h = vec![0x60, 0, 0, 0, 0, 0, first, 64];
    h.extend_from_slice(&r.pick(&V6).to_be_bytes());
    h.extend_from_slice(&r.pick(&V6).to_be_bytes());
    for (i, &e) in exts.iter().enumerate() {
        let next = exts.get(i + 1).copied().unwrap_or(proto);
        if e == 44 {
            let later = r.chance(40);
            h.extend_from_slice(&[next, 0, if later { 0x01 } else { 0 }, r.pick(&[0, 1, 8])]);
            h.extend_from_slice(&[0, 0, 0, 7]);
        } else {
            let len = r.pick(&[0u8, 0, 1, 2]);
            h.push(next);
            h.push(len);
            h.extend((0..usize::from(len) * 8 + 6).map(|_| r.next() as u8));
        }
    }
    h.extend(l4(r, proto));
    h
}

/// A frame from byte `0`: Ethernet, then layers.
fn frame(r: &mut Rng, depth: u32) -> Vec<u8> {
    let mut f: Vec<u8> = (0..12).map(|_| r.next() as u8).collect();
    let mut layers = 0;
    loop {
        let t = if depth > 2 || layers > 5 {
            r.pick(&[0x0800u16, 0x86dd])
        } else {
            r.pick(&[
                0x0800u16, 0x0800, 0x86dd, 0x86dd, 0x8100, 0x8100, 0x88a8, 0x9100, 0x9200, 0x9300,
                0x8847, 0x8848, 0x0000, 0x0806, 0x1234,
            ])
        };
        be16(&mut f, t);
        layers += 1;
        match t {
            0x8100 | 0x88a8 | 0x9100 | 0x9200 | 0x9300 => {
                be16(&mut f, (r.next() as u16 & 0xf000) | r.pick(&VLANS));
                continue;
            }
            0x8847 | 0x8848 => {
                let n = r.pick(&[1, 1, 2, 3]);
                for i in 0..n {
                    let bos = if i + 1 == n { 0x100 } else { 0 };
                    let h = (r.pick(&LABELS) << 12) | bos | 0x40;
                    f.extend_from_slice(&h.to_be_bytes());
                }
                match r.below(5) {
                    0 => {
                        f.extend_from_slice(&[0, 0, 0, 0]);
                        f.extend(frame(r, depth + 1));
                    }
                    1 => f.extend(ip4(r)),
                    2 => f.extend(ip6(r)),
                    _ => f.extend((0..r.below(30)).map(|_| r.next() as u8)),
                }
            }
            0x0000 => f.extend(frame(r, depth + 1)),
            0x0800 => f.extend(ip4(r)),
            0x86dd => f.extend(ip6(r)),
            _ => f.extend((0..r.below(40)).map(|_| r.next() as u8)),
        }
        return f;
    }
}

fn any_frame(r: &mut Rng, mixed: &mut mixed::Rng) -> Vec<u8> {
    let mut f = if r.chance(25) {
        mixed::frame(mixed).data
    } else {
        frame(r, 0)
    };
    if r.chance(25) {
        let cut = r.below(f.len() as u64 + 1) as usize;
        f.truncate(cut);
    }
    f
}

fn prim(r: &mut Rng, times: bool) -> String {
    let k = r.below(if times { 13 } else { 11 });
    match k {
        0 | 1 => format!("host {}", std::net::Ipv4Addr::from(r.pick(&V4))),
        2 => format!("host {}", std::net::Ipv6Addr::from(r.pick(&V6))),
        3 => r
            .pick(&[
                "net 10.0.0.0/8",
                "net 10.0.0.0/31",
                "net 10.0.0.2 mask 255.255.255.254",
                "net 10.1.2.3 mask 255.0.255.0",
                "net 2001:db8::/32",
                "net ::/0",
                "net 0.0.0.0/0",
                "net fe80::/10",
                "net 2001:db8:: mask ffff:ffff:0:0:0:0:0:fffe",
            ])
            .to_string(),
        4 | 5 => format!("port {}", r.pick(&PORTS)),
        6 => format!("ip proto {}", r.pick(&PROTOS)),
        7 => r.pick(&["tcp", "udp", "icmp"]).to_string(),
        8 => format!("vlan {}", r.pick(&[1u32, 7, 100, 4095, 5000])),
        9 => format!("mpls {}", r.pick(&LABELS)),
        10 => format!(
            "host {}",
            r.pick(&["10.0.0.1", "::ffff:10.0.0.2", "2001:db8::1"])
        ),
        _ => {
            let t = r
                .pick(&TIMES)
                .wrapping_add_signed(i64::from(r.pick(&[0i8, 1, -1])));
            let when = wiretape_timestamp::format_rfc3339(t);
            format!("{} {when}", r.pick(&["after", "before"]))
        }
    }
}

fn query(r: &mut Rng, depth: u32, times: bool) -> String {
    if depth == 0 || r.chance(35) {
        return prim(r, times);
    }
    let n = r.pick(&[2, 2, 3, 4]);
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push_str(r.pick(&[" and ", " or ", " && ", " || "]));
        }
        let q = query(r, depth - 1, times);
        if r.chance(60) {
            s.push_str(&format!("({q})"));
        } else {
            s.push_str(&q);
        }
    }
    s
}

fn check(queries: usize, frames: usize, times: bool, seed: u64) -> (u64, u64) {
    let mut r = Rng(seed);
    let mut m = mixed::Rng::new(seed ^ 0x55);
    let pool: Vec<Vec<u8>> = (0..frames).map(|_| any_frame(&mut r, &mut m)).collect();
    let keys: Vec<Decoded> = pool.iter().map(|f| Decoded::of(f)).collect();
    let (mut yes, mut total) = (0u64, 0u64);
    for _ in 0..queries {
        let text = query(&mut r, 3, times);
        let q = parse(&text, T0).unwrap_or_else(|e| panic!("{text}: {e}"));
        let sel = Selection::new(q.clone()).unwrap_or_else(|e| panic!("{text}: {e}"));
        let stamps: Vec<u64> = if times {
            let mut s = vec![0, u64::MAX, T0 - 5];
            for t in TIMES {
                s.extend([t - 2, t - 1, t, t + 1, t + 2, t + 7_000_000]);
            }
            s
        } else {
            vec![T0]
        };
        for (f, d) in pool.iter().zip(&keys) {
            for &ts in &stamps {
                let want = eval(&q, d, ts);
                let got = sel.matches(f, ts);
                if want != got {
                    let prog = sel.part(ts).and_then(|p| p.program.as_ref());
                    panic!(
                        "{text}\nframe {f:02x?}\nkeys {d:?}\nts {ts}: reference {want}, compiled {got}\n{}",
                        prog.map(|p| p.dump()).unwrap_or_default()
                    );
                }
                yes += u64::from(want);
                total += 1;
            }
        }
    }
    (yes, total)
}

#[test]
fn compiled_queries_select_exactly_what_the_reference_does() {
    let (yes, total) = check(1500, 400, false, 0x5743_0001);
    // Both answers occur often: the comparison is not all "no".
    assert!(
        yes * 20 > total && yes * 20 < total * 19,
        "{yes} of {total}"
    );
}

#[test]
fn time_bounds_are_exact_pieces() {
    let (yes, total) = check(600, 120, true, 0x5743_0002);
    assert!(
        yes * 20 > total && yes * 20 < total * 19,
        "{yes} of {total}"
    );
}

#[test]
fn every_primitive_selects_through_every_layer_kind() {
    // Each primitive, alone, against frames that hold its value behind
    // tags, labels, pseudowires and extension headers, matches some and
    // misses some.
    let mut r = Rng(0x5743_0003);
    let mut m = mixed::Rng::new(3);
    let pool: Vec<Vec<u8>> = (0..3000).map(|_| any_frame(&mut r, &mut m)).collect();
    for q in [
        "host 10.0.0.1",
        "host 2001:db8::1",
        "net 10.0.0.0/8",
        "port 53",
        "ip proto 44",
        "tcp",
        "udp",
        "icmp",
        "vlan 7",
        "vlan 4095",
        "mpls 16",
        "mpls 1048575",
    ] {
        let sel = compile(q, T0).unwrap();
        let n = pool.iter().filter(|f| sel.matches(f, T0)).count();
        let want = pool
            .iter()
            .filter(|f| eval(&sel.query, &Decoded::of(f), T0))
            .count();
        assert_eq!(n, want, "{q}");
        assert!(n > 0 && n < pool.len(), "{q}: {n}");
    }
}

#[test]
fn pieces_of_time() {
    let t = |s: &str| compile(s, T0).unwrap();
    let sel = t("after 2023-11-14T22:13:20Z");
    assert_eq!(sel.parts.len(), 1);
    assert_eq!(sel.parts[0].window.from_ns, Some(T0));
    assert_eq!(sel.parts[0].window.to_ns, None);
    assert!(sel.parts[0].program.is_none());
    // Time inside `or`: two pieces, each with its own formula.
    let sel =
        t("(port 53 and before 2023-11-14T22:13:20Z) or (port 80 and after 2023-11-14T22:13:21Z)");
    assert_eq!(sel.parts.len(), 2, "{:?}", sel.parts);
    assert_eq!(sel.parts[0].window.to_ns, Some(T0));
    assert_eq!(sel.parts[1].window.from_ns, Some(T0 + 1_000_000_000));
    assert_eq!(sel.parts[0].text, "port 53");
    assert_eq!(sel.parts[1].text, "port 80");
    // Nothing, ever.
    assert!(
        t("before 2023-11-14T22:13:20Z and after 2023-11-14T22:13:21Z")
            .parts
            .is_empty()
    );
    assert!(t("before 1970-01-01T00:00:00Z").parts.is_empty());
    assert!(t("before 1969-01-01T00:00:00Z and tcp").parts.is_empty());
    // Stamps before 1970 do not exist: `after` then is every frame.
    let sel = t("after 1960-01-01T00:00:00Z");
    assert_eq!((sel.parts.len(), sel.parts[0].window.from_ns), (1, None));
    // Within a window.
    let sel = t("tcp").within(Window {
        from_ns: Some(5),
        to_ns: Some(9),
    });
    assert_eq!(
        sel.hull(),
        Some(Window {
            from_ns: Some(5),
            to_ns: Some(9)
        })
    );
    assert!(t("after 2023-11-14T22:13:20Z")
        .within(Window {
            from_ns: None,
            to_ns: Some(T0)
        })
        .parts
        .is_empty());
}

#[test]
fn host_sets_join_and_tag_conditions_are_bounded() {
    let many: Vec<String> = (0..3000)
        .map(|i| format!("host 10.{}.{}.1", i / 250, i % 250))
        .collect();
    let sel = compile(&many.join(" or "), T0).unwrap();
    let prog = sel.parts[0].program.as_ref().unwrap();
    // Two binary searches (source, destination) over the 3000 addresses:
    // a few instructions each.
    assert!(prog.insns().len() < 30_000, "{}", prog.insns().len());
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 11, 249, 1, 10, 99, 99, 99]);
    assert!(sel.matches(&f, T0));
    f[29] = 2;
    assert!(!sel.matches(&f, T0));
    let tags: Vec<String> = (0..=MAX_BITS)
        .map(|i| format!("(vlan {i} and mpls {i})"))
        .collect();
    let e = compile(&tags.join(" or "), T0).unwrap_err();
    assert!(e.to_string().contains("vlan/mpls conditions"), "{e}");
}

#[test]
fn needs_let_the_flow_index_skip_blocks_soundly() {
    use wiretape_filter::flow::FlowCollector;
    // For random queries and blocks of random frames: a block holding a
    // selected frame is never ruled out.
    let mut r = Rng(0x5743_0004);
    let mut m = mixed::Rng::new(4);
    let mut skipped = 0;
    for _ in 0..300 {
        let text = query(&mut r, 2, false);
        let sel = compile(&text, T0).unwrap();
        for _ in 0..8 {
            let frames: Vec<Vec<u8>> = (0..r.pick(&[1, 3, 20]))
                .map(|_| any_frame(&mut r, &mut m))
                .collect();
            let mut c = FlowCollector::new();
            for f in &frames {
                c.add(f);
            }
            let set = c.finish();
            let any = frames.iter().any(|f| sel.matches(f, T0));
            let may = sel.may_hold(T0, T0, |n| n.may_match(&set));
            assert!(may || !any, "{text}: a block with a match was ruled out");
            skipped += u64::from(!may);
        }
    }
    assert!(skipped > 100, "the needs never narrow: {skipped}");
}

#[test]
fn needs_hold_for_every_selected_frame_row_by_row() {
    use wiretape_filter::flow::FrameKeys;
    // The key index answers a piece's needs per row (a frame's keys), with
    // nets as ranges of its sorted hosts: every selected frame must hold
    // all the keys of one alternative of its piece's needs.
    let mut r = Rng(0x5743_0005);
    let mut m = mixed::Rng::new(5);
    let pool: Vec<Vec<u8>> = (0..600).map(|_| any_frame(&mut r, &mut m)).collect();
    let keys: Vec<FrameKeys> = pool.iter().map(|f| FrameKeys::of(f)).collect();
    let (mut ruled_out, mut nets) = (0u64, 0u64);
    for _ in 0..400 {
        let text = query(&mut r, 2, true);
        let sel = compile(&text, T0).unwrap();
        for p in &sel.parts {
            let Some(n) = &p.needs else { continue };
            nets += u64::from(n.alternatives().iter().flatten().any(|k| k.width() > 1));
            for ts in [p.window.from_ns.unwrap_or(0), T0] {
                if !p.window.contains(ts) {
                    continue;
                }
                for (f, k) in pool.iter().zip(&keys) {
                    let held = n
                        .alternatives()
                        .iter()
                        .any(|alt| alt.iter().all(|x| k.holds(x)));
                    if sel.matches(f, ts) {
                        assert!(
                            held,
                            "{text}: frame {f:02x?} selected at {ts}, holds no alternative of {:?}",
                            n.alternatives()
                        );
                    }
                    ruled_out += u64::from(!held);
                }
            }
        }
    }
    assert!(nets > 20, "few nets: {nets}");
    assert!(ruled_out > 10_000, "the needs rule out little: {ruled_out}");
}

/// A parse as Stenographer's own parser prints it in golden.txt: and/or
/// binary, nested left to right; addresses as hex ranges; times as Unix
/// seconds with nine decimals.
fn as_go(q: &Query) -> String {
    let fold = |v: &[Query], op: &str| {
        let mut acc = as_go(&v[0]);
        for x in &v[1..] {
            acc = format!("({acc} {op} {})", as_go(x));
        }
        acc
    };
    let time = |t: i128| {
        format!(
            "{}.{:09}",
            t.div_euclid(1_000_000_000),
            t.rem_euclid(1_000_000_000)
        )
    };
    match q {
        Query::Net4(lo, hi) => format!("ip32 {lo:08x}-{hi:08x}"),
        Query::Net6(lo, hi) => format!("ip128 {lo:032x}-{hi:032x}"),
        Query::Port(p) => format!("port {p}"),
        Query::Proto(p) => format!("proto {p}"),
        Query::Vlan(v) => format!("vlan {v}"),
        Query::Mpls(m) => format!("mpls {m}"),
        Query::After(t) => format!("after {}", time(*t)),
        Query::Before(t) => format!("before {}", time(*t)),
        Query::And(v) => fold(v, "and"),
        Query::Or(v) => fold(v, "or"),
    }
}

#[test]
fn parses_as_stenographers_own_parser() {
    let (mut same, mut cut, mut refused) = (0, 0, 0);
    for line in include_str!("golden.txt").lines() {
        if line.starts_with('#') {
            continue;
        }
        let (q, want) = line.split_once('\t').unwrap();
        let q: String = serde_json::from_str(q).unwrap();
        match (parse(&q, T0), want) {
            (Err(_), "ERR") => refused += 1,
            (Ok(got), want) => {
                assert_eq!(as_go(&got), want, "{q:?}");
                same += 1;
            }
            // Where Stenographer cut the query short at a character its
            // lexer cannot read, we refuse; what it took is the part
            // before that character.
            (Err(e), want) if e.message.contains("would end the query here") => {
                let before = std::str::from_utf8(&q.as_bytes()[..e.pos]).unwrap();
                let got = parse(before, T0).unwrap_or_else(|e| panic!("{q:?}: {e}"));
                assert_eq!(as_go(&got), want, "{q:?}");
                cut += 1;
            }
            (Err(e), want) => panic!("{q:?}: refused ({e}), Stenographer: {want}"),
        }
    }
    assert!(
        same >= 300 && cut >= 80 && refused >= 240,
        "{same} {cut} {refused}"
    );
}
