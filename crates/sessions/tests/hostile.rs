#![allow(unused_crate_dependencies)] // the library's own dependencies, seen from a test
//! Malformed and hostile input for the session parsers, on stable (the
//! fuzz target `sessions` in `fuzz/` runs the same bodies under
//! libFuzzer): named cases (truncated ClientHellos, DNS compression
//! loops, 64 KiB header lines, invalid UTF-8 and control characters in
//! names) with what must be stored, then property-based mutations of
//! valid frames and streams through [`wiretape_sessions::fuzz`]: no
//! panic, every frame in exactly one row or counter, names escaped and
//! bounded. Cases: 256 per property (`WIRETAPE_FUZZ_CASES=N` for more).

use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};
use wiretape_sessions::synth::{self, Hello, Tcp};
use wiretape_sessions::{fuzz, Config, Tracker};

fn ip(d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 51, 100, d))
}

fn names_of(frames: &[Vec<u8>]) -> wiretape_sessions::Names {
    let mut t = Tracker::new(Config::default());
    for (i, f) in frames.iter().enumerate() {
        t.add(1, i as u64, f, f.len() as u32);
    }
    let tb = t.cut("x");
    let n = tb
        .rows
        .iter()
        .find_map(|r| r.names.as_deref().cloned())
        .unwrap_or_default();
    fuzz::check_names(&n);
    n
}

#[test]
fn named_hostile_cases() {
    // An SNI of control characters, a bidi override and invalid UTF-8:
    // stored escaped.
    let mut t = Tcp::new((ip(1), 1000), (ip(2), 443), None, 1);
    let h = Hello::browser(
        Some(b"evil\x1b[2J\xe2\x80\xaecom\xff.example"),
        &[b"h2"],
        0x0a0a,
    );
    let n = names_of(&[t.seg(false, 0x18, &h.records(1 << 14))]);
    assert_eq!(
        n.tls_sni.as_deref(),
        Some("evil\\u{001b}[2J\\u{202e}com\\xff.example")
    );
    // The same ClientHello cut anywhere: nothing stored, no panic.
    let whole = h.records(1 << 14);
    for cut in 1..whole.len() {
        let mut t = Tcp::new((ip(1), 1000), (ip(2), 443), None, 1);
        let n = names_of(&[t.seg(false, 0x18, &whole[..cut])]);
        assert_eq!(n.tls_sni, None, "cut at {cut}");
        assert_eq!(n.ja4, None, "cut at {cut}");
    }
    // A record claiming more than the ClientHello holds, followed by junk.
    let mut bad = whole.clone();
    bad[3] = 0xff;
    let mut t = Tcp::new((ip(1), 1000), (ip(2), 443), None, 1);
    assert_eq!(names_of(&[t.seg(false, 0x18, &bad)]).tls_sni, None);
    // DNS: a pointer loop in the question, and one in an answer.
    let mut q = synth::dns_query(1, "a.example", 1);
    q.truncate(12);
    q.extend_from_slice(&[1, b'a', 0xc0, 12, 0, 1, 0, 1]);
    let n = names_of(&[synth::udp(None, (ip(1), 5000), (ip(3), 53), &q)]);
    assert_eq!(n.dns_query, None);
    let mut r = synth::dns_response(
        2,
        "b.example",
        1,
        &[synth::Answer::Cname("c.example".into())],
    );
    let at = r.len() - 11; // the CNAME's first label
    r[at] = 0xc0;
    r[at + 1] = at as u8; // points at itself
    let n = names_of(&[synth::udp(None, (ip(3), 53), (ip(1), 5001), &r)]);
    assert_eq!(n.dns_query.as_deref(), Some("b.example"));
    assert!(n.dns_answers.is_empty(), "{:?}", n.dns_answers);
    // HTTP: a 64 KiB request line over many segments: the target is cut
    // at the buffer, the rest never held.
    let mut t = Tcp::new((ip(1), 1002), (ip(2), 80), None, 1);
    let mut req = b"GET /".to_vec();
    req.resize(64 << 10, b'a');
    let frames: Vec<Vec<u8>> = req.chunks(1400).map(|c| t.seg(false, 0x18, c)).collect();
    let n = names_of(&frames);
    assert_eq!(n.http_method.as_deref(), Some("GET"));
    assert!(n
        .http_path
        .as_deref()
        .is_some_and(|p| p.ends_with('\u{2026}') && p.len() < 4096));
    // A 64 KiB header line before Host: the request is cut; no Host.
    let mut t = Tcp::new((ip(1), 1003), (ip(2), 80), None, 1);
    let mut req = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
    req.resize(64 << 10, b'x');
    req.extend_from_slice(b"\r\nHost: late.example\r\n\r\n");
    let frames: Vec<Vec<u8>> = req.chunks(1400).map(|c| t.seg(false, 0x18, c)).collect();
    let n = names_of(&frames);
    assert_eq!(
        (n.http_method.as_deref(), n.http_host.as_deref()),
        (Some("GET"), None)
    );
    // A User-Agent of invalid UTF-8 and a NUL: escaped.
    let mut t = Tcp::new((ip(1), 1004), (ip(2), 80), None, 1);
    let n = names_of(&[t.seg(
        false,
        0x18,
        b"GET / HTTP/1.1\r\nHost: h\r\nUser-Agent: a\x00b\xc3\x28\r\n\r\n",
    )]);
    assert_eq!(n.http_user_agent.as_deref(), Some("a\\u{0000}b\\xc3("));
    // A QUIC Initial with one bit flipped: not opened, nothing stored.
    let mut d = synth::quic_initial(
        &[9; 8],
        &Hello::browser(Some(b"q.example"), &[b"h3"], 0x0a0a),
    );
    d[300] ^= 0x40;
    let n = names_of(&[synth::udp(None, (ip(1), 5002), (ip(2), 443), &d)]);
    assert_eq!(n.quic_sni, None);
}

fn cases() -> u32 {
    std::env::var("WIRETAPE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// Valid inputs to mutate: a DNS response, a ClientHello in records, an
/// HTTP request, a QUIC Initial, an SSDP M-SEARCH (HTTP over UDP).
fn seeds() -> Vec<Vec<u8>> {
    vec![
        synth::dns_response(1, "www.example.com", 1, &[synth::Answer::Addr(ip(9))]),
        Hello::browser(Some(b"a.example"), &[b"h2", b"http/1.1"], 0x1a1a).records(300),
        synth::http_get("h.example", "/x", "ua"),
        synth::quic_initial(
            &[1, 2, 3, 4],
            &Hello::browser(Some(b"q.example"), &[b"h3"], 0x2a2a),
        ),
        synth::ssdp_search("ua"),
    ]
}

fn mutate(mut v: Vec<u8>, edits: &[(u16, u8, u8)]) -> Vec<u8> {
    for &(at, kind, x) in edits {
        if v.is_empty() {
            break;
        }
        let i = at as usize % v.len();
        match kind % 4 {
            0 => v[i] = x,
            1 => v[i] ^= 1 << (x % 8),
            2 => v.truncate(i),
            _ => v.insert(i, x),
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_parser_on_mutated_messages(s in 0usize..5, edits in prop::collection::vec(any::<(u16, u8, u8)>(), 0..12)) {
        let v = mutate(seeds()[s].clone(), &edits);
        fuzz::parsers(&v);
    }

    #[test]
    fn the_tracker_on_mutated_frames(link in any::<u8>(), picks in prop::collection::vec((0usize..5, any::<bool>(), prop::collection::vec(any::<(u16, u8, u8)>(), 0..4)), 1..24)) {
        // Frames of a few connections carrying the seeds, mutated, framed
        // as the fuzz body reads them.
        let mut data = vec![link];
        let mut t = Tcp::new((ip(1), 1000), (ip(2), 443), Some(5), 7);
        for (s, server, edits) in picks {
            let payload = seeds()[s].clone();
            let f = if s == 3 || s == 0 || s == 4 {
                let port = [53, 0, 0, 4433, 1900][s];
                synth::udp(None, (ip(1), port), (ip(2), 443), &payload)
            } else {
                t.seg(server, 0x18, &payload)
            };
            let f = mutate(f, &edits);
            data.extend_from_slice(&(f.len() as u16).to_be_bytes());
            data.extend_from_slice(&f);
        }
        fuzz::tracker(&data);
    }

    #[test]
    fn the_tracker_on_random_bytes(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        fuzz::tracker(&data);
        fuzz::parsers(&data);
    }
}
