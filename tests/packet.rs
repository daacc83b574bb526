//! The TPACKET_V3 engine (`record --engine packet`) on real veth pairs in
//! private namespaces: every frame of every queue recorded byte-identical
//! with kernel stamps inside the run, accounted (seen = written + filtered +
//! drops), read by tshark; VLAN tags the kernel takes off put back as
//! libpcap puts them; the filter in user space exact; frames the kernel
//! drops for a full ring counted, never lost from the books; several
//! interfaces in one run; the PCAP-over-IP stream read by tcpdump; bad input
//! refused before anything is opened.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;
use wiretape::files::{PcapReader, Record};
use wiretape_testbed::{frames, SizeFn, Testbed, CAP_IF, GEN_IF};

/// The throttled-disk test holds this alone (its verdict depends on the
/// disk's pace); every other test of this file shares it.
static DISK: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared_disk() -> std::sync::RwLockReadGuard<'static, ()> {
    DISK.read().unwrap_or_else(|e| e.into_inner())
}

/// tshark's frame count over `files`.
fn tshark_count(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| {
            let out = Command::new("tshark")
                .args(["-n", "-r"])
                .arg(f)
                .args(["-T", "fields", "-e", "frame.number"])
                .output()
                .expect("tshark runs");
            assert!(out.status.success(), "tshark reads {}", f.display());
            String::from_utf8_lossy(&out.stdout).lines().count() as u64
        })
        .sum()
}

fn records(files: &[PathBuf]) -> Vec<Record> {
    let mut out = Vec::new();
    for f in files {
        let mut r = PcapReader::open(f).unwrap();
        let mut rec = Record::default();
        while r.next_into(&mut rec).unwrap() {
            out.push(rec.clone());
        }
    }
    out
}

#[test]
fn records_every_frame_of_every_queue_with_kernel_stamps() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pkt", 2).unwrap();
    let out = TempDir::new("pkt");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let n = 30_000u64;
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "--engine",
            "packet",
            "-w",
            dir.to_str().unwrap(),
            "-c",
            &n.to_string(),
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(
        rec.stderr.iter().any(|l| l.contains("packet (TPACKET_V3")),
        "the start line names the engine: {:?}",
        rec.stderr
    );
    assert!(
        !xdp_attached(&tb),
        "the packet engine attaches no XDP program"
    );
    let sent = tb.send(0..n, SizeFn::Mixed, 16, Some(100_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let t1 = now_ns();
    let v = verify_dir(&dir, n, usize::MAX, t0, t1);
    assert_eq!(v.frames, n, "every frame sent is in the files");
    assert_eq!(v.original_bytes, sent.bytes, "every byte");
    assert_eq!(tshark_count(&pcaps(&dir)), n, "tshark reads them all");
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["engine"], "packet");
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    assert_eq!(j["bytes_written"].as_u64(), Some(sent.bytes));
    assert_eq!(
        j["per_queue"].as_array().unwrap().len(),
        2,
        "a file per queue"
    );
}

/// Fewer sockets than queues: one socket per CPU the poll threads may use
/// by default (no fanout with one), or --packet-sockets; every frame of
/// every queue still recorded once, byte-identical, and accounted.
#[test]
fn fewer_sockets_than_queues_record_every_queue() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktsock", 4).unwrap();
    // The ring per socket: 64 blocks per queue it reads (socket 0 of 3
    // reads queues 0 and 3).
    for (extra, sockets, line, ring) in [
        (
            &["--cpus", "0"][..],
            1usize,
            "4 RX queues on 1 socket [q0@0]",
            "256 blocks x 1024 KiB per socket",
        ),
        (
            &["--packet-sockets", "3"][..],
            3,
            "4 RX queues on 3 sockets [0, 1, 2]",
            "128 blocks x 1024 KiB per socket",
        ),
    ] {
        let out = TempDir::new("pktsock");
        let dir = out.path().join("cap");
        let json = out.path().join("s.json");
        let n = 20_000u64;
        let mut args = vec![
            "--engine",
            "packet",
            "-w",
            dir.to_str().unwrap(),
            "-c",
            "20000",
            "--summary-json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let mut rec = Recorder::start(&tb, &args);
        assert!(
            rec.stderr
                .iter()
                .any(|l| l.contains(line) && l.contains(ring)),
            "{extra:?}: the start line says how the queues are read: {:?}",
            rec.stderr
        );
        // 64 flows: every queue of the pair gets frames (16 flows each).
        let sent = tb.send(0..n, SizeFn::Mixed, 64, Some(100_000)).unwrap();
        sent.require_queues(0..4).unwrap();
        assert!(rec.wait(30).success(), "{}", rec.stderr_text());
        let files = pcaps(&dir);
        assert_eq!(files.len(), sockets, "{extra:?}: a file per socket");
        let mut seqs: Vec<u64> = records(&files)
            .iter()
            .map(|r| frames::parse(&r.data).expect("one of ours").0)
            .collect();
        seqs.sort_unstable();
        assert_eq!(
            seqs,
            (0..n).collect::<Vec<_>>(),
            "{extra:?}: each frame once"
        );
        let j = read_json(&json);
        assert_identity(&j);
        assert_eq!(j["packets_written"].as_u64(), Some(n));
        assert_eq!(j["bytes_written"].as_u64(), Some(sent.bytes));
        assert_eq!(j["rx_queues"].as_u64(), Some(4));
        assert_eq!(j["per_queue"].as_array().unwrap().len(), sockets);
    }
}

/// `frame` with an 802.1Q tag (TPID `tpid`, VLAN `vid`) after its addresses.
fn tagged(frame: &[u8], tpid: u16, vid: u16) -> Vec<u8> {
    let mut v = frame[..12].to_vec();
    v.extend_from_slice(&tpid.to_be_bytes());
    v.extend_from_slice(&(vid | 0x2000).to_be_bytes());
    v.extend_from_slice(&frame[12..]);
    v
}

/// Sends `frames` raw from the generator end.
fn send_raw(tb: &Testbed, frames: Vec<Vec<u8>>) {
    let ns = tb.netns().to_owned();
    std::thread::spawn(move || {
        wiretape_testbed::sys::enter_netns(&ns).unwrap();
        let s = wiretape_testbed::sys::PacketSender::open(GEN_IF).unwrap();
        for f in &frames {
            s.send(f).unwrap();
        }
    })
    .join()
    .unwrap();
}

#[test]
fn vlan_tags_the_kernel_takes_off_are_put_back() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktvlan", 1).unwrap();
    let out = TempDir::new("pktvlan");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    // 600 frames: plain, 802.1Q VLAN 7, 802.1ad (QinQ outer TPID) VLAN 9.
    let mut sent = Vec::new();
    for seq in 0..600u64 {
        let f = frames::build(seq, frames::mixed_size(seq).max(64), 0);
        sent.push(match seq % 3 {
            0 => f,
            1 => tagged(&f, 0x8100, 7),
            _ => tagged(&f, 0x88a8, 9),
        });
    }
    let mut rec = Recorder::start(
        &tb,
        &[
            "--engine",
            "packet",
            "-w",
            dir.to_str().unwrap(),
            "-c",
            "600",
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ],
    );
    send_raw(&tb, sent.clone());
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let got = records(&pcaps(&dir));
    assert_eq!(got.len(), sent.len());
    for (i, (r, want)) in got.iter().zip(&sent).enumerate() {
        assert!(
            r.data == *want,
            "frame {i}: bytes differ from what was sent (tag put back?)\n got {:02x?}\nwant {:02x?}",
            &r.data[..r.data.len().min(20)],
            &want[..20]
        );
        assert_eq!(
            r.orig_len as usize,
            want.len(),
            "frame {i}: original length"
        );
    }
    // An independent reader agrees: 200 frames in VLAN 7.
    let f = &pcaps(&dir)[0];
    let o = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(f)
        .arg("vlan 7")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 200);
    assert_identity(&read_json(&json));
}

#[test]
fn filter_runs_in_user_space_and_counts_exactly() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktflt", 2).unwrap();
    let out = TempDir::new("pktflt");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let n = 8_000u64;
    let mut rec = Recorder::start(
        &tb,
        &[
            "--engine",
            "packet",
            "-w",
            dir.to_str().unwrap(),
            "-d",
            "4",
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
            "udp",
            "src",
            "port",
            "10001",
        ],
    );
    tb.send(0..n, SizeFn::Mixed, 4, Some(50_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let got = records(&pcaps(&dir));
    // Flows round robin over source ports 10000..10003: a quarter is port 10001.
    assert_eq!(got.len() as u64, n / 4);
    for r in &got {
        let (seq, _, flow) = frames::parse(&r.data).expect("a test frame");
        assert_eq!(flow, 1, "frame {seq} of flow {flow} passed the filter");
    }
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_seen"].as_u64(), Some(n));
    assert_eq!(j["packets_filtered"].as_u64(), Some(n - n / 4));
}

#[test]
fn frames_dropped_for_a_full_ring_are_counted() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktfull", 1).unwrap();
    let out = TempDir::new("pktfull");
    // pcap: frames copied; pcapng with --packet-in-place: laid out in
    // place (blocks held until their run is on disk).
    for fmt in ["pcap", "pcapng"] {
        let dir = out.path().join(fmt);
        let json = out.path().join(format!("{fmt}.json"));
        // Two blocks of 64 KiB: ~80 frames of 1514 B; the recorder is
        // stopped (SIGSTOP) while 3,000 frames arrive, so most of them find
        // no block.
        let mut args = vec![
            "--engine",
            "packet",
            "--packet-blocks",
            "2",
            "--packet-block-kib",
            "64",
            "--format",
            fmt,
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ];
        if fmt == "pcapng" {
            args.push("--packet-in-place");
        }
        let mut rec = Recorder::start(&tb, &args);
        rec.signal(libc::SIGSTOP);
        let n = 3_000u64;
        tb.send(0..n, SizeFn::Fixed(1514), 1, Some(50_000)).unwrap();
        rec.signal(libc::SIGCONT);
        std::thread::sleep(Duration::from_millis(500));
        rec.signal(libc::SIGINT);
        assert!(rec.wait(30).success(), "{fmt}: {}", rec.stderr_text());
        let j = read_json(&json);
        assert_identity(&j);
        assert_eq!(j["in_place"], fmt == "pcapng", "{fmt}");
        let written = j["packets_written"].as_u64().unwrap();
        let full = j["drops"]["rx_ring_full"].as_u64().unwrap();
        assert_eq!(
            j["packets_seen"].as_u64(),
            Some(n),
            "{fmt}: every frame sent is in the books: {}",
            j["per_queue"]
        );
        assert_eq!(written + full, n, "{fmt}");
        assert!(
            full > 0 && written > 0,
            "{fmt}: written {written}, ring full {full}"
        );
        let v = verify_dir(&dir, n, usize::MAX, 0, u64::MAX);
        assert_eq!(
            v.frames, written,
            "{fmt}: the files hold what the summary says"
        );
    }
}

#[test]
fn several_interfaces_and_a_live_stream() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktmulti", 2).unwrap();
    tb.add_pair("wt-gen2", "wt-cap2", 1, 0x10).unwrap();
    let out = TempDir::new("pktmulti");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let mut rec = Recorder::start_raw(
        &tb,
        &[
            "--engine",
            "packet",
            "-i",
            CAP_IF,
            "-i",
            "wt-cap2",
            "-w",
            dir.to_str().unwrap(),
            "--serve",
            "127.0.0.1:57013",
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ],
    );
    let client_pcap = out.path().join("client.pcap");
    let mut client = tb
        .command("sh")
        .arg("-c")
        .arg(format!(
            "nc -d 127.0.0.1 57013 | tcpdump --time-stamp-precision=nano -r - -w {}",
            client_pcap.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rec.wait_for_line("serve: client", 10);
    // Phase A on both interfaces, a pause, phase B: the stream starts at a
    // chunk boundary after the client joins (as with AF_XDP), so phase B
    // must be there whole.
    let (n1, n2) = (4_000u64, 3_000u64);
    tb.send(0..2_000, SizeFn::Mixed, 8, Some(50_000)).unwrap();
    tb.send_from("wt-gen2", n1..n1 + 1_500, SizeFn::Mixed, 8, Some(50_000))
        .unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    tb.send(2_000..n1, SizeFn::Mixed, 8, Some(50_000)).unwrap();
    tb.send_from(
        "wt-gen2",
        n1 + 1_500..n1 + n2,
        SizeFn::Mixed,
        8,
        Some(50_000),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    rec.signal(libc::SIGINT);
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let _ = client.wait();
    let files_of = |ifname: &str| -> Vec<PathBuf> {
        pcaps(&dir)
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("wiretape-{ifname}-q"))
            })
            .collect()
    };
    let seqs = |files: &[PathBuf]| -> Vec<u64> {
        let mut v: Vec<u64> = records(files)
            .iter()
            .map(|r| frames::parse(&r.data).expect("a test frame").0)
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(seqs(&files_of(CAP_IF)), (0..n1).collect::<Vec<_>>());
    assert_eq!(
        seqs(&files_of("wt-cap2")),
        (n1..n1 + n2).collect::<Vec<_>>()
    );
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n1 + n2));
    assert_eq!(j["per_queue"].as_array().unwrap().len(), 3);
    // The stream, as tcpdump read it: frames sent, none twice, as many as
    // the server says it sent, and every frame of phase B.
    let streamed = seqs(std::slice::from_ref(&client_pcap));
    let mut distinct = streamed.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), streamed.len(), "no frame streamed twice");
    assert_eq!(
        Some(streamed.len() as u64),
        j["serve"]["frames_sent"].as_u64(),
        "serve: {}",
        j["serve"]
    );
    let phase_b: Vec<u64> = (2_000..n1).chain(n1 + 1_500..n1 + n2).collect();
    let missing: Vec<&u64> = phase_b
        .iter()
        .filter(|s| streamed.binary_search(s).is_err())
        .collect();
    assert!(
        missing.is_empty(),
        "{} frames of phase B missing from the stream, first {:?}; serve: {}",
        missing.len(),
        &missing[..missing.len().min(10)],
        j["serve"]
    );
}

/// `--engine auto` (the default) on veth picks the packet engine and says
/// why; an option only AF_XDP has makes it pick afxdp.
#[test]
fn auto_picks_the_packet_engine_on_veth() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktauto", 1).unwrap();
    let out = TempDir::new("pktauto");
    for (extra, engine, why) in [
        (
            None,
            "packet",
            "auto: packet, wt-cap (veth) has no AF_XDP zero-copy",
        ),
        (
            Some("--busy-poll=20"),
            "afxdp",
            "auto: afxdp, as --busy-poll needs it",
        ),
    ] {
        let dir = out.path().join(engine);
        let json = out.path().join(format!("{engine}.json"));
        let mut c = tb.command(bin().to_str().unwrap());
        c.env_remove("WIRETAPE_ENGINE").args([
            "record",
            "-i",
            CAP_IF,
            "-w",
            dir.to_str().unwrap(),
            "-c",
            "500",
            "--summary-json",
            json.to_str().unwrap(),
        ]);
        c.args(extra);
        let mut rec = Recorder::started(Recorder::spawn_command(c));
        let start = rec.stderr.join("\n");
        assert!(start.contains(why), "{start}");
        tb.send(0..500, SizeFn::Mixed, 4, Some(20_000)).unwrap();
        assert!(rec.wait(30).success(), "{}", rec.stderr_text());
        let j = read_json(&json);
        assert_eq!(j["engine"], engine);
        assert!(j["engine_reason"].as_str().unwrap().contains(why));
        assert_eq!(j["packets_written"].as_u64(), Some(500));
        assert_identity(&j);
    }
}

#[test]
fn bad_input_is_refused_before_anything_is_opened() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktbad", 2).unwrap();
    let out = TempDir::new("pktbad");
    let dir = out.path().join("cap");
    let d = dir.to_str().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (
            &["--packet-in-place"],
            "--packet-in-place: it writes pcapng",
        ),
        (
            &[
                "--packet-in-place",
                "--format",
                "pcapng",
                "--compress",
                "lz4",
            ],
            "leave --compress out",
        ),
        (&["--queues", "0"], "records every queue"),
        (&["--cutoff", "1K"], "--cutoff"),
        (&["--packet-block-kib", "100"], "power of two"),
        (&["--packet-sockets", "3"], "give 1 to 2 sockets"),
        (&["--packet-sockets", "0"], "give 1 to 2 sockets"),
        (&["--packet-retire-ms", "0"], "1 to 60000 ms"),
        (
            &["--frames", "4096"],
            "--frames applies to --engine afxdp only",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec![
            "record", "--engine", "packet", "-i", CAP_IF, "-w", d, "-c", "1",
        ];
        args.extend_from_slice(extra);
        let (code, _, err) = run_wiretape(Some(&tb), &args);
        assert_ne!(code, 0, "{extra:?} refused");
        assert!(err.contains(want), "{extra:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{extra:?}: one line: {err}");
        assert!(!dir.exists(), "{extra:?}: refused before -w is created");
    }
    // --packet-blocks with another engine.
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "--engine",
            "afxdp",
            "-i",
            CAP_IF,
            "-w",
            d,
            "-c",
            "1",
            "--packet-blocks",
            "8",
        ],
    );
    assert_ne!(code, 0);
    assert!(err.contains("--engine packet"), "{err}");
}

/// The pcapng block types in `file`, in order (a walk over block lengths).
fn block_types(file: &std::path::Path) -> Vec<u32> {
    let b = std::fs::read(file).unwrap();
    let rd = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let mut out = Vec::new();
    let mut o = 0;
    while o + 12 <= b.len() {
        let (kind, len) = (rd(o), rd(o + 4) as usize);
        assert!(
            len >= 12 && len % 4 == 0 && o + len <= b.len(),
            "{}: a block of {len} bytes at {o}",
            file.display()
        );
        assert_eq!(rd(o + len - 4) as usize, len, "trailing length at {o}");
        out.push(kind);
        o += len;
    }
    assert_eq!(o, b.len(), "{}: ends on a block", file.display());
    out
}

/// The filler blocks frames laid out in place leave between packet blocks.
const FILL: u32 = 0x8000_5754;

/// Frames tcpdump (libpcap) reads from `files`, optionally selecting `expr`.
fn tcpdump_count(files: &[PathBuf], expr: &[&str]) -> u64 {
    files
        .iter()
        .map(|f| {
            let o = Command::new("tcpdump")
                .args(["-nn", "-r"])
                .arg(f)
                .args(expr)
                .output()
                .unwrap();
            assert!(o.status.success(), "tcpdump reads {}", f.display());
            String::from_utf8_lossy(&o.stdout).lines().count() as u64
        })
        .sum()
}

#[test]
fn frames_laid_out_in_place_are_pcapng_every_reader_reads() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktip", 2).unwrap();
    let out = TempDir::new("pktip");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let n = 30_000u64;
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "--engine",
            "packet",
            "--format",
            "pcapng",
            "--packet-in-place",
            // Every block laid out, whatever its frames' sizes.
            "--packet-in-place-min",
            "0",
            "--rotate-size",
            "4M",
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(
        rec.stderr
            .iter()
            .any(|l| l.contains("pcapng laid out in place")),
        "the start line says frames are laid out in place: {:?}",
        rec.stderr
    );
    // 4 flows on 2 queues: flows 0 and 2 on queue 0, 1 and 3 on queue 1.
    let sent = tb.send(0..n, SizeFn::Mixed, 4, Some(100_000)).unwrap();
    sent.require_queues(0..2).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    rec.signal(libc::SIGINT);
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let t1 = now_ns();
    let files = pcaps(&dir);
    assert!(files.len() > 2, "rotation made several files: {files:?}");
    // Our reader: every frame, byte for byte, kernel stamps inside the run.
    let v = verify_dir(&dir, n, usize::MAX, t0, t1);
    assert_eq!(v.frames, n, "every frame sent is in the files");
    assert_eq!(v.original_bytes, sent.bytes, "every byte");
    // Wireshark's and libpcap's readers: every frame, none more.
    assert_eq!(tshark_count(&files), n, "tshark reads them all");
    assert_eq!(tcpdump_count(&files, &[]), n, "tcpdump reads them all");
    // Laid out in place: each file is SHB, IDB, then packet blocks with
    // fillers between them.
    for f in &files {
        let kinds = block_types(f);
        assert_eq!(&kinds[..2], &[0x0A0D_0D0A, 1], "{}", f.display());
        let epbs = kinds.iter().filter(|&&k| k == 6).count();
        let fills = kinds.iter().filter(|&&k| k == FILL).count();
        assert!(
            epbs > 0 && fills >= epbs,
            "{}: {epbs} packet blocks, {fills} fillers",
            f.display()
        );
        assert_eq!(
            epbs + fills + 2,
            kinds.len(),
            "{}: nothing else",
            f.display()
        );
    }
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["in_place"], true);
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    assert_eq!(j["bytes_written"].as_u64(), Some(sent.bytes));
    // The index leads extract to the same frames tcpdump selects.
    let want = tcpdump_count(&files, &["udp", "src", "port", "10001"]);
    assert_eq!(want, n / 4, "a quarter of the flows");
    let x = out.path().join("x.pcap");
    let (code, _, e) = run_wiretape(
        None,
        &[
            "extract",
            dir.to_str().unwrap(),
            "-w",
            x.to_str().unwrap(),
            "-q",
            "udp",
            "src",
            "port",
            "10001",
        ],
    );
    assert_eq!(code, 0, "extract: {e}");
    let got = records(&[x]);
    assert_eq!(got.len() as u64, want, "extract selects what tcpdump does");
    for r in &got {
        let (seq, _, flow) = frames::parse(&r.data).expect("a test frame");
        assert_eq!(flow, 1, "frame {seq}");
    }
}

#[test]
fn vlan_tags_and_the_filter_in_place_and_copied() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktipv", 1).unwrap();
    let out = TempDir::new("pktipv");
    // 900 frames: plain, 802.1Q VLAN 7, 802.1ad VLAN 9; the filter drops VLAN 9.
    let mut sent = Vec::new();
    for seq in 0..900u64 {
        let f = frames::build(seq, frames::mixed_size(seq).max(64), 0);
        sent.push(match seq % 3 {
            0 => f,
            1 => tagged(&f, 0x8100, 7),
            _ => tagged(&f, 0x88a8, 9),
        });
    }
    let kept: Vec<&Vec<u8>> = sent
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 2)
        .map(|(_, f)| f)
        .collect();
    // Batches of one frame: a block's end (its last frame filtered) is
    // then walked in a take of its own, after the writer took the block's
    // last kept frame; its run must still go out, before anything later.
    let modes: [(&str, bool, &[&str]); 3] = [
        ("in-place", true, &[]),
        ("in-place-batch1", true, &["--batch", "1"]),
        ("copy", false, &[]),
    ];
    for (mode, in_place, extra) in modes {
        let dir = out.path().join(mode);
        let json = out.path().join(format!("{mode}.json"));
        let mut args = vec![
            "--engine",
            "packet",
            "--format",
            "pcapng",
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ];
        if in_place {
            args.extend(["--packet-in-place", "--packet-in-place-min", "0"]);
        }
        args.extend_from_slice(extra);
        args.extend(["not", "vlan", "9"]);
        let mut rec = Recorder::start(&tb, &args);
        send_raw(&tb, sent.clone());
        std::thread::sleep(Duration::from_millis(300));
        rec.signal(libc::SIGINT);
        assert!(rec.wait(30).success(), "{mode}: {}", rec.stderr_text());
        let files = pcaps(&dir);
        let got = records(&files);
        assert_eq!(got.len(), kept.len(), "{mode}: the frames the filter keeps");
        for (i, (r, want)) in got.iter().zip(&kept).enumerate() {
            assert!(
                r.data == **want,
                "{mode}: frame {i}: bytes differ from what was sent\n got {:02x?}\nwant {:02x?}",
                &r.data[..r.data.len().min(20)],
                &want[..20]
            );
            assert_eq!(r.orig_len as usize, want.len(), "{mode}: frame {i}");
        }
        assert_eq!(tcpdump_count(&files, &["vlan", "7"]), 300, "{mode}: VLAN 7");
        assert_eq!(tshark_count(&files), 600, "{mode}: tshark");
        let fills = files
            .iter()
            .flat_map(|f| block_types(f))
            .filter(|&k| k == FILL)
            .count();
        assert_eq!(fills > 0, in_place, "{mode}: {fills} fillers");
        let j = read_json(&json);
        assert_identity(&j);
        assert_eq!(j["in_place"], in_place, "{mode}");
        assert_eq!(j["packets_seen"].as_u64(), Some(900), "{mode}");
        assert_eq!(j["packets_filtered"].as_u64(), Some(300), "{mode}");
        assert_eq!(j["packets_written"].as_u64(), Some(600), "{mode}");
    }
}

#[test]
fn small_frames_are_copied_and_large_ones_laid_out_by_default() {
    require_root();
    let _disk = shared_disk();
    let tb = Testbed::create("pktmix", 1).unwrap();
    let out = TempDir::new("pktmix");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "--engine",
            "packet",
            "--format",
            "pcapng",
            "--packet-in-place",
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ],
    );
    // 2,000 frames of 64 B (their blocks copied), a pause longer than the
    // retire timeout, then 2,000 of 1514 B (laid out in place).
    let small = tb
        .send(0..2000, SizeFn::Fixed(64), 1, Some(50_000))
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let big = tb
        .send(2000..4000, SizeFn::Fixed(1514), 1, Some(50_000))
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    rec.signal(libc::SIGINT);
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let v = verify_dir(&dir, 4000, usize::MAX, 0, u64::MAX);
    assert_eq!(v.frames, 4000);
    assert_eq!(v.original_bytes, small.bytes + big.bytes);
    let files = pcaps(&dir);
    assert_eq!(tshark_count(&files), 4000);
    // A packet block laid out in place follows a filler; copied ones follow
    // each other (the first after the file header).
    let kinds = block_types(&files[0]);
    let after_fill = kinds
        .windows(2)
        .filter(|w| w[0] == FILL && w[1] == 6)
        .count();
    assert_eq!(
        after_fill, 2000,
        "the 1514 B frames laid out, the 64 B ones copied"
    );
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["in_place"], true);
}

#[test]
fn a_disk_that_falls_behind_gets_copies_not_the_ring() {
    require_root();
    // It measures the disk: no other test of this file runs beside it.
    let _disk = DISK.write().unwrap_or_else(|e| e.into_inner());
    let tb = Testbed::create("pktslow", 1).unwrap();
    let out = TempDir::new("pktslow");
    // The recorder's disk held to 24 MB/s while ~45 MB/s arrive (30 kpps of
    // 1514 B) for 4 s, into a ring of 32 MiB (128 blocks of 256 KiB): blocks
    // written from the ring would pile up in the disk's queue, the kernel
    // would lap back to one still held after a second or two, and drop.
    // (16 MiB lost a few thousand frames even copying, in some full-suite
    // runs: the throttle holds writes for over a second at times, p50 1.1 s,
    // and 4 MiB may be queued from the ring before that shows.)
    // Laid out in place, a block is copied into the RAM buffer instead once
    // more than a quarter of the ring waits for the disk: nothing is lost.
    // Files rotate meanwhile (a closing file's writes count as waiting).
    // Checked against the same run with that fallback off (it must lose,
    // else the throttle did not hold the disk back and the test proves
    // nothing).
    let n = 120_000u64;
    for fallback in [true, false] {
        let tag = if fallback { "copies" } else { "ring-only" };
        let dir = out.path().join(tag);
        let json = out.path().join(format!("{tag}.json"));
        std::fs::create_dir_all(&dir).unwrap();
        let throttle = DiskThrottle::new("pktslow", &dir, 24_000_000);
        let mut args = vec![
            "--engine",
            "packet",
            "--format",
            "pcapng",
            "--packet-in-place",
            "--packet-blocks",
            "128",
            "--packet-block-kib",
            "256",
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ];
        if fallback {
            // Files rotate: the file closing drains behind the next one,
            // whose runs must wait behind it too.
            args.extend(["--rotate-size", "32M"]);
        } else {
            args.extend(["--packet-in-place-backlog", "18446744073709551615"]);
        }
        let mut rec = Recorder::start(&tb, &args);
        throttle.add(rec.child.id());
        let sent = tb.send(0..n, SizeFn::Fixed(1514), 1, Some(30_000)).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        rec.signal(libc::SIGINT);
        assert!(rec.wait(120).success(), "{tag}: {}", rec.stderr_text());
        drop(throttle);
        let j = read_json(&json);
        assert_identity(&j);
        assert_eq!(
            j["packets_seen"].as_u64(),
            Some(n),
            "{tag}: {}",
            j["per_queue"]
        );
        let written = j["packets_written"].as_u64().unwrap();
        let full = j["drops"]["rx_ring_full"].as_u64().unwrap();
        assert_eq!(written + full, n, "{tag}");
        let w = &j["per_queue"][0]["writer"];
        let (laid, copied) = (
            w["runs_laid_out"].as_u64().unwrap(),
            w["runs_copied"].as_u64().unwrap(),
        );
        let v = verify_dir(&dir, n, usize::MAX, 0, u64::MAX);
        eprintln!("{tag}: written {written}, ring full {full}, runs {laid} ({copied} copied)");
        assert_eq!(
            v.frames, written,
            "{tag}: the files hold what the summary says"
        );
        if fallback {
            assert_eq!(full, 0, "{tag}: nothing lost: {w}");
            assert_eq!(v.original_bytes, sent.bytes, "{tag}: every byte");
            assert!(
                copied > 0 && copied < laid,
                "{tag}: some blocks written from the ring, the rest copied: {w}"
            );
            assert_eq!(
                tshark_count(&pcaps(&dir)),
                n,
                "{tag}: tshark reads them all"
            );
        } else {
            assert_eq!(copied, 0, "{tag}: {w}");
            assert!(
                full > n / 10,
                "{tag}: blocks held for a disk that falls behind make the kernel drop \
                 (else the throttle did not work): written {written}, ring full {full}"
            );
        }
    }
}

/// Runs laid out in place (`--packet-in-place`) over four volumes, one of
/// which fills (an 8 MiB ext4 image) and another goes read-only mid-run
/// (ext4's `abort`, see `tests/metrics.rs`): the runs whose write failed,
/// was in flight or queued when their volume failed are given back (copied
/// out of the ring then, only then) and written to another volume, as
/// copied frames are. Every frame sent is written, none counted lost, and
/// `extract` over the set returns each once, byte-identical.
#[test]
fn runs_laid_out_in_place_on_a_failing_volume_are_given_back() {
    require_root();
    let _disk = shared_disk();
    let tag = "pktipf";
    let tb = Testbed::create(tag, 1).unwrap();
    let v = FourVolumes::new(tag);
    let (names, json) = (&v.names, &v.json);
    let mut args: Vec<&str> = vec![
        "--engine",
        "packet",
        "--format",
        "pcapng",
        "--packet-in-place",
        "--packet-in-place-min",
        "0",
        "--rotate-size",
        "1M",
        "-q",
        "--summary-json",
        json.to_str().unwrap(),
    ];
    args.extend(v.w_args());
    let t0 = now_ns();
    let mut rec = Recorder::start(&tb, &args);
    // 48 MB in all: the 8 MiB volume's share is more than it holds.
    let n = 32_000u64;
    let (a, b) = v.send_aborting_third(&tb, n);
    std::thread::sleep(Duration::from_millis(500));
    rec.signal(libc::SIGINT);
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let t1 = now_ns();
    let j = read_json(json);
    assert_identity(&j);
    assert_eq!(j["in_place"], true, "{j}");
    let (drops, vols) = (&j["drops"], &j["volumes"]);
    eprintln!(
        "sent {n}; written {}; drops {drops}; volumes {vols}",
        j["packets_written"]
    );
    assert_eq!(j["volume_failed"][&names[1]].as_u64(), Some(1), "{vols}");
    assert_eq!(j["volume_failed"][&names[2]].as_u64(), Some(1), "{vols}");
    assert_eq!(j["drops"]["total"].as_u64(), Some(0), "{drops}");
    assert_eq!(j["packets_written"].as_u64(), Some(n), "{drops}");
    assert_eq!(j["bytes_written"].as_u64(), Some(a.bytes + b.bytes));
    // The failed volumes' files stay readable and hold their frames; the
    // set holds each frame once.
    assert!(!captures(v.full.path()).is_empty() && !captures(v.ro.path()).is_empty());
    let x = v.out.path().join("all.pcap");
    let (code, _, e) = run_wiretape(None, &["extract", &names[3], "-w", x.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    let v = verify_files(std::slice::from_ref(&x), n, usize::MAX, t0, t1, true);
    assert_eq!((v.frames, v.captured_bytes), (n, n * 1500));
    assert!(!xdp_attached(&tb));
}
