#![allow(unused_crate_dependencies)] // the library's own dependencies, seen from a test
//! Names a connection holds beyond its first message: every distinct DNS
//! question of a resolver that reuses its source port (bounded, the rest
//! counted, a repeated name allocating nothing), and HTTP requests over
//! UDP (SSDP on port 1900, as tshark reads them; nowhere else). The fuzz
//! seeds run clean through the fuzz bodies.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use wiretape_sessions::synth;
use wiretape_sessions::{dns, fuzz, Config, Names, Tracker};

/// Counts this thread's allocations (tests run on threads of their own).
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the counter is a
// const-initialized thread-local Cell (no allocation, no lock).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: p came from System.alloc with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: as GlobalAlloc::realloc requires, from the caller.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

fn ip(d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 51, 100, d))
}

/// The names of the one row `frames` make.
fn names(t: &mut Tracker) -> Names {
    let tb = t.cut("x.pcap");
    assert_eq!(tb.rows.len(), 1, "{:?}", tb.rows);
    tb.rows[0].names.as_deref().cloned().unwrap_or_default()
}

fn add(t: &mut Tracker, f: &[u8]) {
    t.add(1, 1_000, f, f.len() as u32);
}

#[test]
fn every_distinct_question_of_a_connection_bounded_and_repeats_allocate_nothing() {
    let (c, s) = ((ip(1), 5301), (ip(2), 53));
    let q = |i: u16, name: &str| synth::udp(None, c, s, &synth::dns_query(i, name, 1));
    let mut t = Tracker::new(Config::default());
    let first = q(1, "first.example");
    add(&mut t, &first);
    // The same question again (a retry, its response's question): no
    // allocation in the tracker.
    let frames: Vec<Vec<u8>> = (0..20).map(|_| first.clone()).collect();
    let before = allocs();
    for f in &frames {
        add(&mut t, f);
    }
    assert_eq!(allocs() - before, 0, "a repeated question allocated");
    // Distinct names up to the bound, then more: the first 16 kept (the
    // first being dns_query), the rest counted as cut.
    let more: Vec<String> = (1..20).map(|i| format!("n{i}.example")).collect();
    for (i, n) in more.iter().enumerate() {
        add(&mut t, &q(100 + i as u16, n));
    }
    // A cut name repeated is counted again; a kept one is not.
    add(&mut t, &q(200, "n19.example"));
    add(&mut t, &q(201, "n3.example"));
    let before = allocs();
    add(&mut t, &first);
    assert_eq!(allocs() - before, 0, "a repeated question allocated");
    let n = names(&mut t);
    assert_eq!(n.dns_query.as_deref(), Some("first.example"));
    let mut want = vec!["first.example".to_string()];
    want.extend(more[..dns::MAX_QUERIES - 1].iter().cloned());
    assert_eq!(n.dns_queries, want);
    assert_eq!(n.dns_queries_cut, 19 - 15 + 1);
    fuzz::check_names(&n);
}

#[test]
fn dns_questions_are_read_beyond_the_name_frames_up_to_their_own_bound() {
    let (c, s) = ((ip(1), 5302), (ip(2), 53));
    let mut t = Tracker::new(Config {
        name_frames: 2,
        ..Config::default()
    });
    for i in 0..dns::MAX_FRAMES as u16 + 5 {
        // A new name only at frame 10, and past the bound.
        let name = match i {
            10 => "ten.example",
            i if i == dns::MAX_FRAMES as u16 => "late.example",
            _ => "same.example",
        };
        add(
            &mut t,
            &synth::udp(None, c, s, &synth::dns_query(i, name, 1)),
        );
    }
    let n = names(&mut t);
    assert_eq!(n.dns_queries, ["same.example", "ten.example"]);
    assert_eq!(n.dns_queries_cut, 0);
}

#[test]
fn ssdp_requests_over_udp_and_what_is_not_http() {
    let ssdp = (ip(250), 1900);
    // M-SEARCH: method, target, Host, User-Agent; the response names
    // nothing.
    let mut t = Tracker::new(Config::default());
    let m = synth::ssdp_search("Linux/6 UPnP/1.1 x/1");
    add(&mut t, &synth::udp(None, (ip(1), 50000), ssdp, &m));
    add(
        &mut t,
        &synth::udp(
            None,
            ssdp,
            (ip(1), 50000),
            b"HTTP/1.1 200 OK\r\nST: x\r\n\r\n",
        ),
    );
    let n = names(&mut t);
    assert_eq!(n.http_method.as_deref(), Some("M-SEARCH"));
    assert_eq!(n.http_path.as_deref(), Some("*"));
    assert_eq!(n.http_host.as_deref(), Some("239.255.255.250:1900"));
    assert_eq!(n.http_user_agent.as_deref(), Some("Linux/6 UPnP/1.1 x/1"));
    // NOTIFY from port 1900 to port 1900.
    let notify = b"NOTIFY * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nNT: upnp:rootdevice\r\n\r\n";
    let mut t = Tracker::new(Config::default());
    add(&mut t, &synth::udp(None, (ip(3), 1900), ssdp, notify));
    let n = names(&mut t);
    assert_eq!(n.http_method.as_deref(), Some("NOTIFY"));
    assert_eq!(n.http_host.as_deref(), Some("239.255.255.250:1900"));
    assert_eq!(n.http_user_agent, None);
    // A datagram cut inside its headers (a snap length): the complete
    // lines are kept, the cut one is not.
    let cut = &m[..m.len() - 20];
    let mut t = Tracker::new(Config::default());
    add(&mut t, &synth::udp(None, (ip(1), 50001), ssdp, cut));
    let n = names(&mut t);
    assert_eq!(n.http_host.as_deref(), Some("239.255.255.250:1900"));
    assert_eq!(n.http_user_agent, None);
    // Cut inside the request line: the method and what there is of the
    // target.
    let mut t = Tracker::new(Config::default());
    add(
        &mut t,
        &synth::udp(None, (ip(1), 50002), ssdp, b"M-SEARCH *"),
    );
    let n = names(&mut t);
    assert_eq!(n.http_method.as_deref(), Some("M-SEARCH"));
    assert_eq!(n.http_host, None);
    // Starts with "GET " but is no HTTP request: nothing; a real request
    // in a later datagram of the connection still is read.
    let mut t = Tracker::new(Config::default());
    add(
        &mut t,
        &synth::udp(None, (ip(1), 50003), ssdp, b"GET nothing here\r\n\r\n"),
    );
    add(
        &mut t,
        &synth::udp(None, (ip(1), 50003), ssdp, b"GETAWAY\r\n"),
    );
    assert!(names(&mut t).is_empty());
    let mut t = Tracker::new(Config::default());
    add(
        &mut t,
        &synth::udp(None, (ip(1), 50004), ssdp, b"GET nothing\r\n"),
    );
    add(&mut t, &synth::udp(None, (ip(1), 50004), ssdp, &m));
    assert_eq!(names(&mut t).http_method.as_deref(), Some("M-SEARCH"));
    // HTTP over UDP on another port: not read (tshark's HTTP dissector
    // is on UDP port 1900 only).
    let mut t = Tracker::new(Config::default());
    let get = synth::http_get("h.example", "/", "ua");
    add(
        &mut t,
        &synth::udp(None, (ip(1), 50005), (ip(2), 8080), &get),
    );
    assert!(names(&mut t).is_empty());
}

#[test]
fn the_fuzz_seeds_run_clean() {
    let seeds = fuzz::seeds();
    for name in ["frames-dns-two-questions", "frames-ssdp", "ssdp-m-search"] {
        assert!(seeds.iter().any(|s| s.0 == name), "seed {name}");
    }
    for (name, data) in &seeds {
        if name.starts_with("frames-") {
            fuzz::tracker(data);
        } else {
            fuzz::parsers(data);
        }
    }
}
