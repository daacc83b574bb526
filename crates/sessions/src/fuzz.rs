//! The bodies of the fuzz target `sessions` (`fuzz/fuzz_targets/sessions.rs`,
//! run with `cargo +nightly fuzz run sessions`), also run on stable over
//! generated and mutated inputs by the crate's tests. Each must return on
//! any input, never panic, and keep what it stores escaped and bounded.

use crate::names::Names;
use crate::track::{Config, Tracker};
use crate::{dns, http, quic, table, text, tls};

/// Whether a stored name is as [`crate::text`] promises: no control or
/// hidden characters, at most `max` bytes of input (an escape makes one
/// byte up to 8, `\u{001b}`; plus an ellipsis).
fn check(what: &str, s: &str, max: usize) {
    assert!(
        !s.chars().any(|c| c.is_control()),
        "{what}: a raw control character in {s:?}"
    );
    assert!(s.len() <= 8 * max + 3, "{what}: {} bytes", s.len());
    assert!(!s.is_empty(), "{what}: stored empty");
}

/// Checks every name of `n`.
pub fn check_names(n: &Names) {
    for (what, v, max) in [
        ("dns_query", &n.dns_query, dns::MAX_NAME),
        ("tls_sni", &n.tls_sni, dns::MAX_NAME),
        ("quic_sni", &n.quic_sni, dns::MAX_NAME),
        ("http_host", &n.http_host, dns::MAX_NAME),
        ("http_method", &n.http_method, 16),
        ("http_path", &n.http_path, http::MAX_PATH),
        ("http_user_agent", &n.http_user_agent, http::MAX_AGENT),
        ("ja4", &n.ja4, 64),
    ] {
        if let Some(s) = v {
            check(what, s, max);
        }
    }
    assert!(n.dns_answers.len() <= dns::MAX_ANSWERS);
    assert!(n.dns_queries.len() <= dns::MAX_QUERIES);
    assert_eq!(
        n.dns_queries.first(),
        n.dns_query.as_ref().filter(|_| !n.dns_queries.is_empty()),
        "dns_queries starts with dns_query"
    );
    assert!(n.tls_alpn.len() <= tls::MAX_ALPN);
    for a in n
        .dns_answers
        .iter()
        .chain(&n.tls_alpn)
        .chain(&n.dns_queries)
    {
        check("list item", a, dns::MAX_NAME);
    }
}

/// Every parser on `data` as it stands: a DNS message, TLS records, a
/// ClientHello body, an HTTP request (more to come, and not), a QUIC
/// datagram, a name to escape.
pub fn parsers(data: &[u8]) {
    let mut n = Names::default();
    let (mut s1, mut s2) = (Vec::new(), Vec::new());
    dns::message(data, &mut n, &mut s1);
    if tls::records(data, &mut s1) == tls::Stream::Hello {
        assert!(s1.len() <= tls::MAX_HELLO + 4);
        if let Some(h) = s1.get(4..).and_then(tls::client_hello) {
            tls::store(&h, false, &mut n);
        }
    }
    if let Some(h) = tls::client_hello(data) {
        let j = tls::ja4(&h, 'q');
        assert!(j.is_ascii() && j.len() == 36, "{j}");
        tls::store(&h, true, &mut n);
    }
    for last in [false, true] {
        let mut m = Names::default();
        http::request(data, last, &mut m);
        check_names(&m);
    }
    let mut q = quic::Quic::default();
    q.datagram(data, &mut s1, &mut s2);
    if let Some(s) = text::escape(data, 64) {
        check("escape", &s, 64);
    }
    check_names(&n);
}

/// `data` as frames for the tracker: the first byte picks the link type
/// (Ethernet, raw IP, Linux cooked v1/v2, loopback, or IPv4/IPv6), then
/// frames of (2-byte length, bytes) to the end. The table is small (8
/// connections, 3 frames named per direction, 512 bytes of stream) so
/// that eviction and the bounds are reached; every frame must land in
/// exactly one row or a counter.
pub fn tracker(data: &[u8]) {
    const LINKS: [u32; 8] = [1, 1, 1, 101, 113, 276, 0, 229];
    let Some((&first, mut rest)) = data.split_first() else {
        return;
    };
    let linktype = LINKS[first as usize % LINKS.len()];
    let mut t = Tracker::new(Config {
        max_connections: 8,
        name_frames: 3,
        name_bytes: 512,
        buffer_budget: 4096,
        idle_ns: 1_000,
    });
    let mut ts = 1_000_000u64;
    let mut frames = 0u64;
    let mut tables = Vec::new();
    while rest.len() >= 2 {
        let len = u16::from_be_bytes([rest[0], rest[1]]) as usize;
        let f = &rest[2..];
        let f = &f[..len.min(f.len())];
        rest = &rest[2 + f.len()..];
        ts += u64::from(first) * 100;
        t.add(linktype, ts, f, f.len() as u32 + (len & 3) as u32);
        frames += 1;
        assert!(t.connections() <= 8);
        assert!(t.buffered() <= 4096 + 2 * 512, "{} buffered", t.buffered());
        if frames.is_multiple_of(16) {
            tables.push(t.cut("a.pcap"));
        }
    }
    tables.push(t.cut("b.pcap"));
    let mut seen = 0;
    for tb in &tables {
        let s = &tb.stats;
        let rows: u64 = tb
            .rows
            .iter()
            .map(|r| r.client_packets + r.server_packets)
            .sum();
        assert_eq!(rows + s.not_ip + s.fragments, s.frames, "{s:?}");
        seen += s.frames;
        for r in &tb.rows {
            if let Some(n) = &r.names {
                check_names(n);
            }
        }
        let b = table::to_batch(tb).expect("a batch of any table");
        assert_eq!(b.num_rows(), tb.rows.len());
    }
    assert_eq!(seen, frames);
}

/// `frames` framed as [`tracker`] reads them: `link` (0: Ethernet), then
/// each frame's 2-byte length and bytes.
pub fn framed(link: u8, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut d = vec![link];
    for f in frames {
        let f = &f[..f.len().min(usize::from(u16::MAX))];
        d.extend_from_slice(&(f.len() as u16).to_be_bytes());
        d.extend_from_slice(f);
    }
    d
}

/// The seed corpus of the fuzz target (`fuzz/seed.sh` writes it through
/// `cargo run --example fuzz-seeds`), named: each parser's valid input
/// (a DNS response with a compressed name, a ClientHello in records,
/// its handshake body, an HTTP request, a QUIC Initial), and whole
/// connections as [`tracker`] frames: DNS over IPv4 and IPv6 in a VLAN,
/// two questions on one resolver port (and the first again),
/// TLS 1.3 with GREASE in one segment and split over records and three
/// segments, TLS 1.2 without SNI, an HTTP GET, SSDP's M-SEARCH over UDP
/// and its answer, a QUIC Initial. The
/// largest is below 4 KiB (`-max_len=4096` covers a ClientHello across
/// segments).
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use crate::synth::{self, Answer, Hello, Tcp};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let v4 = |d: u8| IpAddr::V4(Ipv4Addr::new(198, 51, 100, d));
    let v6 = |d: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, d));
    let browser = Hello::browser(Some(b"a.example"), &[b"h2", b"http/1.1"], 0x1a1a);
    let dns = synth::dns_response(
        7,
        "www.example.com",
        1,
        &[
            Answer::Cname("edge.example.net".into()),
            Answer::Addr(v4(9)),
        ],
    );
    let get = synth::http_get("h.example", "/index.html?q=1", "curl/8.0");
    let quic = synth::quic_initial(
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &Hello::browser(Some(b"q.example"), &[b"h3"], 0x2a2a),
    );
    let mut out = vec![
        ("dns-response", dns.clone()),
        ("tls-records", browser.records(300)),
        ("tls-hello-body", browser.message()[4..].to_vec()),
        ("http-get", get.clone()),
        ("quic-initial", quic.clone()),
    ];
    let q = synth::dns_query(7, "www.example.com", 1);
    let (c, s) = ((v4(1), 53001), (v4(2), 53));
    out.push((
        "frames-dns-v4",
        framed(
            0,
            &[synth::udp(None, c, s, &q), synth::udp(None, s, c, &dns)],
        ),
    ));
    let (c, s) = ((v6(1), 53002), (v6(2), 53));
    out.push((
        "frames-dns-v6-vlan",
        framed(
            0,
            &[
                synth::udp(Some(100), c, s, &synth::dns_query(8, "v6.example", 28)),
                synth::udp(
                    Some(100),
                    s,
                    c,
                    &[0x00, 0x08, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0],
                ),
            ],
        ),
    ));
    let tcp = |hello: &[Vec<u8>], vlan: Option<u16>, port: u16| {
        let mut t = Tcp::new((v4(3), port), (v4(4), 443), vlan, 1000 + u32::from(port));
        let mut f = t.open();
        for h in hello {
            f.push(t.seg(false, 0x18, h));
        }
        f.push(t.seg(true, 0x18, &[22, 3, 3, 0, 4, 2, 0, 0, 0]));
        f.extend(t.close());
        f
    };
    out.push((
        "frames-tls13",
        framed(0, &tcp(&[browser.records(16384)], None, 40001)),
    ));
    let split = browser.records(200);
    let third = split.len() / 3;
    out.push((
        "frames-tls13-split",
        framed(
            0,
            &tcp(
                &[
                    split[..third].to_vec(),
                    split[third..2 * third].to_vec(),
                    split[2 * third..].to_vec(),
                ],
                None,
                40002,
            ),
        ),
    ));
    out.push((
        "frames-tls12-nosni-vlan",
        framed(
            0,
            &tcp(&[Hello::tls12(None).records(16384)], Some(200), 40003),
        ),
    ));
    let mut t = Tcp::new((v6(3), 40004), (v6(4), 80), None, 9);
    let mut f = t.open();
    f.push(t.seg(false, 0x18, &get));
    f.push(t.seg(true, 0x18, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
    f.extend(t.close());
    out.push(("frames-http-v6", framed(0, &f)));
    let (c, s) = ((v4(1), 53003), (v4(2), 53));
    out.push((
        "frames-dns-two-questions",
        framed(
            0,
            &[
                synth::udp(None, c, s, &q),
                synth::udp(None, c, s, &synth::dns_query(9, "second.example", 28)),
                synth::udp(None, c, s, &q),
            ],
        ),
    ));
    out.push(("ssdp-m-search", synth::ssdp_search("wiretape/1 UPnP/1.1")));
    let (c, s) = ((v4(7), 50001), (v4(250), 1900));
    out.push((
        "frames-ssdp",
        framed(
            0,
            &[
                synth::udp(None, c, s, &synth::ssdp_search("wiretape/1 UPnP/1.1")),
                synth::udp(
                    None,
                    s,
                    c,
                    b"HTTP/1.1 200 OK\r\nST: ssdp:all\r\nLOCATION: http://198.51.100.250/d.xml\r\n\r\n",
                ),
            ],
        ),
    ));
    out.push((
        "frames-quic",
        framed(0, &[synth::udp(None, (v4(5), 50000), (v4(6), 443), &quic)]),
    ));
    out
}
