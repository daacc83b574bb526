//! The storage engine end to end: O_DIRECT by default, buffered fallback
//! where a filesystem refuses it, a full disk stops cleanly with valid files
//! and exact accounting, and a torn tail after SIGKILL is trimmed on restart.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape_testbed::{SizeFn, Testbed, CAP_IF};

/// Frames tshark reads from `f` (an independent reader).
fn tshark_count(f: &Path) -> u64 {
    let o = Command::new("tshark")
        .args([
            "-r",
            f.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
        .expect("tshark");
    assert!(
        o.status.success(),
        "tshark could not read {}: {}",
        f.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).lines().count() as u64
}

#[test]
fn o_direct_is_the_default() {
    require_root();
    let tb = Testbed::create("odir", 1).unwrap();
    let out = TempDir::new("odir");
    let json = out.path().join("s.json");
    let dir = out.path().join("cap");
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "-c",
            "20000",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    tb.send(0..20_000, SizeFn::Mixed, 1, Some(100_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_eq!(j["write_engine"], "direct", "{j}");
    assert!(
        j["per_queue"][0]["writer"]["block_writes"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_identity(&j);
    let v = verify_dir(&dir, 20_000, usize::MAX, t0, now_ns());
    assert_eq!(v.frames, 20_000);
    assert_eq!(tshark_count(&pcaps(&dir)[0]), 20_000);
}

#[test]
fn buffered_fallback_where_o_direct_is_refused_says_so() {
    require_root();
    // ramfs has no direct I/O (tmpfs has it since Linux 6.6).
    let m = Mount::fs("ramfs", "size=64m", "ramfs");
    let tb = Testbed::create("ramfs", 1).unwrap();
    let json = std::env::temp_dir().join(format!("wt-ramfs-{}.json", std::process::id()));
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            m.path().to_str().unwrap(),
            "-c",
            "5000",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(
        rec.stderr_text().contains("does not take O_DIRECT"),
        "a notice: {}",
        rec.stderr_text()
    );
    tb.send(0..5000, SizeFn::Mixed, 1, Some(100_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    let _ = std::fs::remove_file(&json);
    assert_eq!(j["write_engine"], "buffered");
    assert_identity(&j);
    assert_eq!(
        verify_dir(m.path(), 5000, usize::MAX, t0, now_ns()).frames,
        5000
    );
}

/// Fills a small filesystem: wiretape stops cleanly, says "disk full", the
/// file ends at a complete record, and the summary counts exactly the
/// frames in it; the rest are counted as drops.disk_full.
fn disk_full(m: &Mount, tag: &str, extra: &[&str], engine: &str) {
    let tb = Testbed::create(tag, 1).unwrap();
    let json = std::env::temp_dir().join(format!("wt-{tag}-{}.json", std::process::id()));
    let t0 = now_ns();
    let mut args = vec![
        "-w",
        m.path().to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut rec = Recorder::start(&tb, &args);
    // ~30 MB of frames into a filesystem of a few MB.
    tb.send(0..20_000, SizeFn::Fixed(1500), 1, Some(50_000))
        .unwrap();
    let st = rec.wait(30);
    let err = rec.stderr_text();
    assert_eq!(st.code(), Some(1), "exit 1 on a full disk: {err}");
    // The library's DiskFull in the command's words (its output flag), in
    // the error line and in the summary's errors alike.
    assert!(
        err.contains("disk full while writing")
            && err.contains("free space or point -w at another disk"),
        "{err}"
    );
    let j = read_json(&json);
    let _ = std::fs::remove_file(&json);
    assert!(
        j["errors"][0]
            .as_str()
            .is_some_and(|e| e.ends_with("free space or point -w at another disk")),
        "{j}"
    );
    assert_eq!(j["stop_reason"], "output failed");
    assert_eq!(j["write_engine"], engine);
    assert_identity(&j);
    assert!(j["drops"]["disk_full"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(j["drops"]["write_error"].as_u64(), Some(0), "{j}");
    let written = j["packets_written"].as_u64().unwrap();
    assert!(written > 100, "some frames made it: {j}");
    let v = verify_dir(m.path(), 20_000, usize::MAX, t0, now_ns());
    assert_eq!(
        v.frames, written,
        "the summary counts exactly the frames in the file"
    );
    assert_eq!(tshark_count(&pcaps(m.path())[0]), written);
    assert!(!xdp_attached(&tb));
}

#[test]
fn disk_full_on_ext4_with_o_direct() {
    require_root();
    let m = Mount::ext4(8, "full");
    disk_full(&m, "fullx", &[], "direct");
}

#[test]
fn disk_full_on_tmpfs_buffered() {
    require_root();
    let m = Mount::fs("tmpfs", "size=4m", "fullt");
    disk_full(&m, "fullt", &["--io", "buffered"], "buffered");
}

#[test]
fn sigkill_mid_write_then_restart_trims_the_torn_tail() {
    require_root();
    let tb = Testbed::create("kill", 1).unwrap();
    let out = TempDir::new("kill");
    let t0 = now_ns();
    // A short flush interval so that most frames are on disk when killed.
    let rec = Recorder::start(
        &tb,
        &[
            "-w",
            out.path().to_str().unwrap(),
            "--flush-interval",
            "0.2",
        ],
    );
    tb.send(0..30_000, SizeFn::Mixed, 1, Some(30_000)).unwrap();
    rec.signal(9);
    drop(rec);
    assert!(
        !xdp_attached(&tb),
        "a killed recorder leaves no XDP program behind (bpf_link)"
    );
    let f = pcaps(out.path()).remove(0);
    let torn = wiretape::files::FileInfo::scan(&f).is_err();
    // A new recording in the same directory repairs the old file first.
    let json = out.path().join("s.json");
    let mut again = Recorder::start(
        &tb,
        &[
            "-w",
            out.path().to_str().unwrap(),
            "-d",
            "0.3",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(again.wait(20).success(), "{}", again.stderr_text());
    let notes = again.stderr_text();
    if torn {
        assert!(
            notes.contains("repaired") && notes.contains("trimmed"),
            "says what it trimmed: {notes}"
        );
    }
    // Every complete record is intact; both readers agree.
    let v = verify_dir(out.path(), 30_000, usize::MAX, t0, now_ns());
    assert!(
        v.frames > 20_000,
        "most frames were on disk before the kill: {}",
        v.frames
    );
    assert_eq!(tshark_count(&f), *v.per_file.get(&f).unwrap());
    let (code, o, e) = run_wiretape(None, &["repair", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    assert!(o.contains("intact"), "{o}");
}

/// Records n frames of one flow with rotation `args`; the files, read in
/// name order, hold exactly the frames sent, in order, none twice or missing.
fn rotation(tag: &str, args: &[&str]) -> (Vec<PathBuf>, TempDir) {
    require_root();
    let n = 30_000u64;
    let tb = Testbed::create(tag, 1).unwrap();
    let out = TempDir::new(tag);
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let mut a = vec![
        "-w",
        dir.to_str().unwrap(),
        "-c",
        "30000",
        "--summary-json",
        json.to_str().unwrap(),
    ];
    a.extend_from_slice(args);
    let mut rec = Recorder::start(&tb, &a);
    tb.send(0..n, SizeFn::Mixed, 1, Some(20_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    let files = pcaps(&dir);
    assert_eq!(
        j["files"].as_array().unwrap().len(),
        files.len(),
        "the summary lists every file"
    );
    let mut seqs = Vec::new();
    let mut rec = wiretape::files::Record::default();
    for f in &files {
        let mut r = wiretape::files::PcapReader::open(f).unwrap();
        let before = seqs.len();
        while r.next_into(&mut rec).unwrap() {
            seqs.push(wiretape_testbed::frames::parse(&rec.data).unwrap().0);
        }
        assert!(seqs.len() > before, "{} is empty", f.display());
    }
    assert_eq!(
        seqs,
        (0..n).collect::<Vec<_>>(),
        "in order across files, no gap, no duplicate"
    );
    (files, out) // the caller checks the files; the TempDir removes them when dropped
}

#[test]
fn rotation_by_size() {
    let (files, _out) = rotation("rots", &["--rotate-size", "4M"]);
    assert!(files.len() >= 5, "{} files", files.len());
    for f in &files {
        let len = std::fs::metadata(f).unwrap().len();
        assert!(len <= 4 << 20, "{} is {len} bytes", f.display());
        assert_eq!(
            tshark_count(f),
            wiretape::files::FileInfo::scan(f).unwrap().packets
        );
    }
}

#[test]
fn rotation_by_time() {
    let (files, _out) = rotation("rott", &["--rotate-time", "0.3s"]);
    // 30k frames at 20k/s: 1.5 s of packet time, a file per 0.3 s.
    assert!(files.len() >= 4, "{} files", files.len());
    for f in &files {
        let i = wiretape::files::FileInfo::scan(f).unwrap();
        let span = i.last_ns.unwrap() - i.first_ns.unwrap();
        assert!(span < 300_000_000, "{} spans {span} ns", f.display());
    }
}

/// tshark's view of a file: (frames, epoch times as printed).
fn tshark_times(f: &Path) -> Vec<String> {
    let o = Command::new("tshark")
        .args([
            "-r",
            f.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
        ])
        .output()
        .expect("tshark");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Sub-second digits of tshark's epoch times (padded to 9) end in "000"
/// for every frame: µs precision.
fn all_whole_microseconds(times: &[String]) -> bool {
    times.iter().all(|t| {
        let frac = t.split('.').nth(1).unwrap_or("");
        let frac = format!("{frac:0<9}");
        frac.ends_with("000")
    })
}

#[test]
fn pcapng_with_ns_and_pcap_with_us_read_by_tshark() {
    require_root();
    let n = 5000u64;
    for (fmt, prec, nanos) in [("pcapng", "ns", true), ("pcap", "us", false)] {
        let tag = format!("fmt{fmt}{prec}");
        let tb = Testbed::create(&tag, 1).unwrap();
        let out = TempDir::new(&tag);
        let dir = out.path().join("cap");
        let json = out.path().join("s.json");
        let t0 = now_ns();
        let mut rec = Recorder::start(
            &tb,
            &[
                "-w",
                dir.to_str().unwrap(),
                "-c",
                "5000",
                "--format",
                fmt,
                "--tsprec",
                prec,
                "--writer-cpus",
                "1",
                "--summary-json",
                json.to_str().unwrap(),
            ],
        );
        tb.send(0..n, SizeFn::Mixed, 1, Some(50_000)).unwrap();
        assert!(rec.wait(30).success(), "{}", rec.stderr_text());
        let j = read_json(&json);
        assert_identity(&j);
        assert_eq!(j["per_queue"][0]["writer"]["cpu"].as_u64(), Some(1), "{j}");
        let files = pcaps(&dir);
        assert_eq!(files.len(), 1);
        let f = &files[0];
        assert_eq!(f.extension().unwrap(), fmt);
        let head = std::fs::read(f).unwrap();
        let magic = u32::from_le_bytes(head[0..4].try_into().unwrap());
        let want = match fmt {
            "pcapng" => 0x0A0D0D0A,
            _ => 0xa1b2c3d4,
        };
        assert_eq!(magic, want, "{fmt} magic");
        // Our reader: every frame, byte-identical, in order, right precision.
        let v = verify_files(&files, n, usize::MAX, t0, now_ns(), nanos);
        assert_eq!(v.frames, n);
        assert_eq!(j["bytes_written"].as_u64(), Some(v.captured_bytes));
        // tshark: same count; ns files show sub-microsecond digits.
        let times = tshark_times(f);
        assert_eq!(times.len() as u64, n, "tshark reads every frame of {fmt}");
        assert_eq!(
            all_whole_microseconds(&times),
            !nanos,
            "{fmt}/{prec}: precision as tshark sees it ({:?})",
            &times[..3]
        );
        if fmt == "pcapng" {
            let o = Command::new("capinfos")
                .args(["-M", "-I", f.to_str().unwrap()])
                .output()
                .expect("capinfos");
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains(CAP_IF), "if_name in the IDB: {text}");
        }
        // The sidecar index covers every frame; info reads it.
        let (code, o, e) = run_wiretape(None, &["info", "--json", f.to_str().unwrap()]);
        assert_eq!(code, 0, "{e}");
        let info: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
        assert_eq!(info["packets"].as_u64(), Some(n));
        assert_eq!(info["index"]["packets"].as_u64(), Some(n), "{info}");
        assert_eq!(
            info["index"]["agrees"],
            serde_json::Value::Bool(true),
            "{info}"
        );
    }
}

/// An old file of ours (from an "earlier run"), and files that are not ours
/// but look close: retention may delete only the first.
fn plant_files(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    std::fs::create_dir_all(dir).unwrap();
    let hdr = wiretape::files::FileHeader::new(65535, true).encode();
    let old = dir.join(format!(
        "wiretape-{CAP_IF}-q0-20200101T000000.000000000Z.pcap"
    ));
    std::fs::write(&old, hdr).unwrap();
    let foreign = vec![
        dir.join("notes.txt"),
        dir.join(format!("other-{CAP_IF}-q0-20200101T000000.000000000Z.pcap")),
        dir.join("wiretape-manual-copy.pcap"),
    ];
    for f in &foreign {
        std::fs::write(f, hdr).unwrap();
    }
    (old, foreign)
}

/// Our files of this run, sorted by name (time).
fn ours(dir: &Path) -> Vec<PathBuf> {
    pcaps(dir)
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            wiretape::files::naming::parse(n, "wiretape").is_some()
        })
        .collect()
}

/// The frames left are the newest ones: a contiguous run ending at n-1.
fn newest_kept(files: &[PathBuf], n: u64) -> u64 {
    let v = verify_files(files, n, usize::MAX, 0, u64::MAX, true);
    let mut seqs = Vec::new();
    let mut rec = wiretape::files::Record::default();
    for f in files {
        let mut r = wiretape::files::PcapReader::open(f).unwrap();
        while r.next_into(&mut rec).unwrap() {
            seqs.push(wiretape_testbed::frames::parse(&rec.data).unwrap().0);
        }
    }
    assert_eq!(seqs.len() as u64, v.frames);
    let first = *seqs.first().expect("frames kept");
    assert!(
        seqs.iter().copied().eq(first..n),
        "kept frames are {first}..{n} in order"
    );
    v.frames
}

#[test]
fn retention_keep_files_deletes_only_our_oldest() {
    require_root();
    let n = 30_000u64;
    let tb = Testbed::create("keep", 1).unwrap();
    let out = TempDir::new("keep");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let (old, foreign) = plant_files(&dir);
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "-c",
            "30000",
            "--rotate-size",
            "512K",
            "--keep-files",
            "3",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    tb.send(0..n, SizeFn::Mixed, 1, Some(30_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    let made = j["files"].as_array().unwrap().len();
    assert!(made > 6, "rotation made {made} files");
    let kept = ours(&dir);
    assert_eq!(kept.len(), 3, "--keep-files 3: {kept:?}");
    assert!(
        !old.exists(),
        "the oldest file of ours (an earlier run) went first"
    );
    for f in &foreign {
        assert!(f.exists(), "{} is not ours: untouched", f.display());
    }
    for f in &kept {
        assert!(wiretape::files::index::path_for(f).exists());
        let ours = verify_files(std::slice::from_ref(f), n, usize::MAX, 0, u64::MAX, true);
        assert_eq!(
            tshark_count(f),
            ours.frames,
            "tshark agrees on {}",
            f.display()
        );
    }
    let idx_left = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "idx")
        })
        .count();
    assert_eq!(idx_left, 3, "sidecars go with their files");
    newest_kept(&kept, n);
    assert_eq!(
        j["retention"]["deleted_files"].as_u64(),
        Some(made as u64 + 1 - 3),
        "{j}"
    );
}

#[test]
fn on_full_rotate_keeps_recording_on_a_full_disk() {
    require_root();
    let m = Mount::fs("tmpfs", "size=6m", "onfull");
    let n = 20_000u64;
    let tb = Testbed::create("onfull", 1).unwrap();
    let json = std::env::temp_dir().join(format!("wt-onfull-{}.json", std::process::id()));
    let (_, foreign) = plant_files(m.path());
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            m.path().to_str().unwrap(),
            "-c",
            "20000",
            "--rotate-size",
            "1M",
            "--on-full",
            "rotate",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    // ~30 MB into 6 MB.
    tb.send(0..n, SizeFn::Fixed(1500), 1, Some(30_000)).unwrap();
    let st = rec.wait(30);
    let err = rec.stderr_text();
    assert!(st.success(), "goes on through a full disk: {err}");
    let j = read_json(&json);
    let _ = std::fs::remove_file(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n), "{j}");
    assert_eq!(j["drops"]["disk_full"].as_u64(), Some(0));
    assert!(
        j["retention"]["deleted_files"].as_u64().unwrap() >= 15,
        "{j}"
    );
    for f in &foreign {
        assert!(f.exists(), "{} is not ours: untouched", f.display());
    }
    let kept = ours(m.path());
    let frames = newest_kept(&kept, n);
    assert!(frames > 1000, "the newest {frames} frames are kept");
    let t: u64 = kept.iter().map(|f| tshark_count(f)).sum();
    assert_eq!(t, frames, "tshark agrees");
}

#[test]
fn rotation_by_size_pcapng_counts_pcapng_records() {
    let (files, _out) = rotation("rotng", &["--rotate-size", "1M", "--format", "pcapng"]);
    assert!(files.len() >= 10, "{} files", files.len());
    for f in &files {
        assert_eq!(f.extension().unwrap(), "pcapng");
        let len = std::fs::metadata(f).unwrap().len();
        assert!(len <= 1 << 20, "{} is {len} bytes", f.display());
        assert_eq!(
            tshark_count(f),
            wiretape::files::FileInfo::scan(f).unwrap().packets
        );
    }
}

/// Capture files in `dirs` (our names), all volumes together.
fn pcaps_in(dirs: &[&Path]) -> Vec<PathBuf> {
    dirs.iter().flat_map(|d| pcaps(d)).collect()
}

/// Frames and captured bytes capinfos counts in `files` (an independent
/// reader).
fn capinfos_totals(files: &[PathBuf]) -> (u64, u64) {
    let (mut frames, mut bytes) = (0, 0);
    for f in files {
        let out = Command::new("capinfos")
            .args(["-M", "-T", "-r", "-c", "-d"])
            .arg(f)
            .output()
            .expect("capinfos (apt: wireshark-common)");
        let text = String::from_utf8_lossy(&out.stdout);
        let cols: Vec<&str> = text.trim().split('\t').collect();
        assert_eq!(cols.len(), 3, "capinfos: {text}");
        frames += cols[1].trim().parse::<u64>().unwrap();
        bytes += cols[2].trim().parse::<u64>().unwrap();
    }
    (frames, bytes)
}

/// Two volumes, one a small tmpfs that fills mid-run: it is taken out
/// (counted in volume_failed), the blocks its failed write left in RAM and
/// every later frame go to the other volume, and no frame is lost: the
/// union of both volumes holds every frame sent, byte-identical (and
/// capinfos counts them and their bytes). The full volume's files stay
/// readable.
#[test]
fn a_full_volume_is_taken_out_and_the_other_takes_its_share() {
    require_root();
    let small = Mount::fs("tmpfs", "size=8m", "volfull");
    let big = TempDir::new("volbig");
    let n = 20_000u64;
    let tb = Testbed::create("volfull", 1).unwrap();
    let json = std::env::temp_dir().join(format!("wt-volfull-{}.json", std::process::id()));
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            small.path().to_str().unwrap(),
            "-w",
            big.path().to_str().unwrap(),
            "-c",
            "20000",
            "--rotate-size",
            "1M",
            "--io",
            "buffered",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    // ~30 MB of frames: the 8 MiB volume fills after its share of ~4 MB.
    tb.send(0..n, SizeFn::Fixed(1500), 1, Some(30_000)).unwrap();
    let st = rec.wait(60);
    let err = rec.stderr_text();
    assert!(st.success(), "goes on on the other volume: {err}");
    let j = read_json(&json);
    let _ = std::fs::remove_file(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n), "{j}");
    assert_eq!(j["drops"]["disk_full"].as_u64(), Some(0), "{j}");
    assert_eq!(j["drops"]["write_error"].as_u64(), Some(0), "{j}");
    let (s, b) = (
        small.path().display().to_string(),
        big.path().display().to_string(),
    );
    assert_eq!(j["volume_failed"][&s].as_u64(), Some(1), "{j}");
    assert_eq!(j["volume_failed"][&b].as_u64(), Some(0), "{j}");
    let failed = j["volumes"][0]["failed"].as_str().unwrap_or_default();
    assert!(failed.contains("full") || failed.contains("space"), "{j}");
    assert!(
        err.contains(&format!("volume {s}")) && err.contains("FAILED"),
        "the text summary names it: {err}"
    );
    let files = pcaps_in(&[small.path(), big.path()]);
    assert!(!pcaps(small.path()).is_empty() && !pcaps(big.path()).is_empty());
    let v = verify_files(&files, n, usize::MAX, t0, now_ns(), true);
    assert_eq!(v.frames, n, "every frame in the union of the volumes");
    assert_eq!(v.captured_bytes, n * 1500);
    assert_eq!(capinfos_totals(&files), (n, n * 1500), "capinfos agrees");
    assert!(!xdp_attached(&tb));
}

/// Two volumes: a busy queue's files alternate between them (both get a
/// share of the bytes), each names the store (store.toml), retention
/// deletes oldest first over both, and `extract` given one volume reads
/// both: every frame sent, once, in time order (tcpdump reads the result).
#[test]
fn two_volumes_spread_keep_and_read_back_as_one_store() {
    require_root();
    let (a, b) = (TempDir::new("vola"), TempDir::new("volb"));
    let n = 6_000u64;
    let tb = Testbed::create("vols", 1).unwrap();
    let json = std::env::temp_dir().join(format!("wt-vols-{}.json", std::process::id()));
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            a.path().to_str().unwrap(),
            "-w",
            b.path().to_str().unwrap(),
            "-c",
            "6000",
            "--rotate-size",
            "1M",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    tb.send(0..n, SizeFn::Fixed(1000), 1, Some(30_000)).unwrap();
    let st = rec.wait(60);
    assert!(st.success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    let _ = std::fs::remove_file(&json);
    assert_eq!(j["packets_written"].as_u64(), Some(n), "{j}");
    let per: Vec<u64> = (0..2)
        .map(|i| j["volumes"][i]["bytes"].as_u64().unwrap())
        .collect();
    // ~6 MB in 1 MiB files, round-robin: each volume about half.
    assert!(per.iter().all(|&x| x > 2 << 20), "both volumes used: {j}");
    let (fa, fb) = (pcaps(a.path()), pcaps(b.path()));
    assert!(fa.len() >= 2 && fb.len() >= 2, "{fa:?} {fb:?}");
    for d in [a.path(), b.path()] {
        let desc = std::fs::read_to_string(d.join("store.toml")).unwrap();
        for v in [a.path(), b.path()] {
            let v = v.canonicalize().unwrap();
            assert!(desc.contains(v.to_str().unwrap()), "{desc}");
        }
    }
    // extract given one volume reads the store.
    let out = std::env::temp_dir().join(format!("wt-vols-{}.pcap", std::process::id()));
    let (code, _, e) = run_wiretape(
        None,
        &[
            "extract",
            b.path().to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{e}");
    let v = verify_files(
        std::slice::from_ref(&out),
        n,
        usize::MAX,
        t0,
        now_ns(),
        true,
    );
    assert_eq!((v.frames, v.captured_bytes), (n, n * 1000));
    assert_eq!(tshark_count(&out), n, "tshark reads them all");
    let _ = std::fs::remove_file(&out);
    // Retention over the store: the oldest go, whichever volume holds them.
    let all: Vec<PathBuf> = {
        let mut v = pcaps_in(&[a.path(), b.path()]);
        v.sort_by_key(|p| p.file_name().unwrap().to_owned());
        v
    };
    let (code, _, e) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "-w",
            a.path().to_str().unwrap(),
            "-w",
            b.path().to_str().unwrap(),
            "-i",
            CAP_IF,
            "-d",
            "0.5",
            "--keep-files",
            "3",
        ],
    );
    assert_eq!(code, 0, "{e}");
    // The files kept of the first run are its newest (2 or 3: this run's
    // own file counts while it is written), on both volumes' side of the
    // deletions: the oldest went, whichever volume held them.
    let kept: Vec<&PathBuf> = all.iter().filter(|f| f.exists()).collect();
    let k = kept.len();
    assert!((2..=3).contains(&k), "{kept:?}");
    assert_eq!(kept, all[all.len() - k..].iter().collect::<Vec<_>>());
    let gone = &all[..all.len() - k];
    assert!(
        gone.iter().any(|f| f.starts_with(a.path()))
            && gone.iter().any(|f| f.starts_with(b.path()))
    );
    assert!(!xdp_attached(&tb));
}

/// Bytes of queue `q`'s capture files in `dir`.
fn queue_bytes(dir: &Path, q: u32) -> u64 {
    pcaps(dir)
        .iter()
        .filter(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            name.contains(&format!("-q{q}-"))
        })
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum()
}

/// Four volumes, each its own ext4 filesystem on a loop device whose writes
/// the kernel's block throttle holds to R = 5 MB/s (one cgroup for the
/// recorder, a limit per loop device), take ~3R (18,000 frames/s: even
/// frames 1500 B, odd 160 B, on two queues: queue 0 carries 90 % of the
/// bytes, 2.7R) for 7 s without losing a frame; the same traffic into one
/// such volume alone loses (else the throttle did not hold and the test
/// proves nothing). Queue 0 gets past one volume's rate: its files go to
/// every volume and are written in parallel; what one volume alone would
/// leave waiting (1.7R x 7 s = 60 MB) is more than the RAM buffer the run
/// is given (32 MiB, and 8192 frames of UMEM per queue: 12 MB), so its
/// frames all written is that proof. `extract`
/// over the four volumes gives every frame, byte-identical and in time
/// order (tshark reads it), and retention over the set deletes the oldest
/// files first, whichever volume holds them.
#[test]
fn four_throttled_volumes_take_what_one_cannot() {
    require_root();
    const R: u64 = 5_000_000;
    let n = 126_000u64;
    let pps = 18_000;
    let (even, odd) = (1500usize, 160usize);
    let want_bytes = n / 2 * (even + odd) as u64;
    let vols: Vec<Mount> = (0..4)
        .map(|i| Mount::ext4_in_ram(96, &format!("thr{i}")))
        .collect();
    let dirs: Vec<&Path> = vols.iter().map(|m| m.path()).collect();
    let tb = Testbed::create("volthr", 2).unwrap();
    let run = |tag: &str, dirs: &[&Path], lift_after_send: bool| {
        let json = std::env::temp_dir().join(format!("wt-{tag}-{}.json", std::process::id()));
        let mut args: Vec<&str> = Vec::new();
        for d in dirs {
            args.extend(["-w", d.to_str().unwrap()]);
        }
        let js = json.to_str().unwrap().to_owned();
        args.extend([
            "--rotate-size",
            "4M",
            "--block-kib",
            "256",
            "--write-buffers",
            "4",
            "--buffer-mib",
            "32",
            "--frames",
            "8192",
            "-q",
            "--summary-json",
            &js,
        ]);
        let throttle = DiskThrottle::disks(tag, dirs, R);
        let t0 = now_ns();
        let mut rec = throttle.record(&tb, &args);
        let sent = tb
            .send(0..n, SizeFn::EvenOdd(even, odd), 2, Some(pps))
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        if lift_after_send {
            // What waits in RAM goes out now: the run's loss is already
            // counted, and the test does not wait for one disk to drain it.
            throttle.lift();
        }
        rec.signal(libc::SIGINT);
        let st = rec.wait(60);
        assert!(st.success(), "{tag}: {}", rec.stderr_text());
        drop(throttle);
        let j = read_json(&json);
        let _ = std::fs::remove_file(&json);
        (j, sent, t0, now_ns())
    };
    // One volume alone: the same traffic, frames lost and counted.
    let (j, sent, _, _) = run("volthr1", &dirs[..1], true);
    assert_identity(&j);
    assert_eq!(sent.sent, n);
    let written = j["packets_written"].as_u64().unwrap();
    let drops = j["drops"]["total"].as_u64().unwrap();
    assert!(
        written < n && drops > 0,
        "one volume held to {R} B/s takes 3x that without loss: the throttle did not hold ({j})"
    );
    eprintln!("one volume: {written} of {n} frames written, {drops} dropped");
    for f in pcaps(dirs[0]) {
        std::fs::remove_file(&f).unwrap();
        wiretape::files::naming::remove_sidecars(&f);
    }
    // Four: nothing lost.
    let (j, sent, t0, t1) = run("volthr4", &dirs, false);
    assert_identity(&j);
    let q0 = sent.per_queue[0] as f64 * even as f64;
    let q1 = sent.per_queue[1] as f64 * odd as f64;
    assert!(
        q0 / (q0 + q1) > 0.85,
        "queue 0 carries ~90 %: {:?}",
        sent.per_queue
    );
    assert_eq!(j["packets_written"].as_u64(), Some(n), "{j}");
    for (k, v) in j["drops"].as_object().unwrap() {
        assert_eq!(v.as_u64(), Some(0), "drops.{k}: {j}");
    }
    for (i, d) in dirs.iter().enumerate() {
        assert_eq!(j["volume_failed"][d.to_str().unwrap()], 0, "{j}");
        assert!(
            queue_bytes(d, 0) > 0,
            "queue 0's files on volume {i} too: {}",
            d.display()
        );
    }
    eprintln!(
        "four volumes: {n} of {n} written; bytes per volume {:?}",
        j["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["bytes"].as_u64().unwrap())
            .collect::<Vec<_>>()
    );
    // Every frame, read back over the set, byte-identical and in time order.
    let out = std::env::temp_dir().join(format!("wt-volthr-{}.pcap", std::process::id()));
    let (code, _, e) = run_wiretape(
        None,
        &[
            "extract",
            dirs[2].to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{e}");
    let v = verify_files(std::slice::from_ref(&out), n, usize::MAX, t0, t1, true);
    assert_eq!((v.frames, v.captured_bytes), (n, want_bytes));
    assert_eq!(tshark_count(&out), n, "tshark reads them all");
    let _ = std::fs::remove_file(&out);
    // Retention over the set: the oldest go, whichever volume holds them.
    let all: Vec<PathBuf> = {
        let mut v = pcaps_in(&dirs);
        v.sort_by_key(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            // By start time (the name's stamp), over both queues.
            name.rsplit('-').next().unwrap().to_owned()
        });
        v
    };
    assert!(all.len() >= 12, "{all:?}");
    let mut args = vec!["record"];
    for d in &dirs {
        args.extend(["-w", d.to_str().unwrap()]);
    }
    args.extend(["-i", CAP_IF, "-d", "0.5", "--keep-files", "6"]);
    let (code, _, e) = run_wiretape(Some(&tb), &args);
    assert_eq!(code, 0, "{e}");
    // This run's own files (one per queue) count while written: 4 or 6 of
    // the first run's are kept, its newest.
    let kept: Vec<&PathBuf> = all.iter().filter(|f| f.exists()).collect();
    let k = kept.len();
    assert!((4..=6).contains(&k), "{kept:?}");
    assert_eq!(kept, all[all.len() - k..].iter().collect::<Vec<_>>());
    let gone = &all[..all.len() - k];
    let on = |d: &Path| gone.iter().filter(|f| f.starts_with(d)).count();
    assert!(
        dirs.iter().filter(|d| on(d) > 0).count() >= 3,
        "deleted on most volumes: {gone:?}"
    );
    assert!(!xdp_attached(&tb));
}

/// The preflight checks every volume, each on its own line: `--check`
/// names both (O_DIRECT on one, buffered writes on a ramfs one, which
/// refuses O_DIRECT), and `--io direct` is refused naming the volume that
/// cannot take it, not only the first, before anything is attached.
#[test]
fn preflight_checks_every_volume() {
    require_root();
    let a = TempDir::new("prefa");
    let r = Mount::fs("ramfs", "size=16m", "prefr");
    let tb = Testbed::create("prefv", 1).unwrap();
    let (ad, rd) = (a.path().to_str().unwrap(), r.path().to_str().unwrap());
    let (code, out, err) = run_wiretape(
        Some(&tb),
        &["record", "-i", CAP_IF, "-w", ad, "-w", rd, "--check"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("volume {ad} (O_DIRECT, ")), "{out}");
    assert!(
        out.contains(&format!(
            "volume {rd} (buffered writes (no O_DIRECT there), "
        )),
        "{out}"
    );
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record", "-i", CAP_IF, "-w", ad, "-w", rd, "--io", "direct", "--check",
        ],
    );
    assert_ne!(code, 0, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(
        err.contains(&format!(
            "output directory {rd} is on a filesystem that refuses O_DIRECT"
        )),
        "{err}"
    );
    // A run: refused too, naming it, nothing recorded.
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record", "-i", CAP_IF, "-w", ad, "-w", rd, "--io", "direct", "-d", "1",
        ],
    );
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains(rd) && err.contains("refuses O_DIRECT"),
        "{err}"
    );
    assert!(pcaps(a.path()).is_empty(), "nothing recorded");
    assert!(!xdp_attached(&tb));
}

/// Bytes of our files in `dir` (capture files with their sidecars: what
/// retention counts), the store's description left out.
fn our_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("wiretape-"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

/// A smaller disk: `--keep-bytes B=3M` keeps volume b under 3 MiB (its
/// own oldest files go) while volume a keeps every file it got; the
/// summary names b's cap and counts the deletions; `extract` over the set
/// gives exactly the frames still on disk (count and bytes, capinfos
/// agreeing); `--check` names each volume's own limits. The file engine,
/// two directories: no privileges, about a second.
#[test]
fn a_volume_s_own_keep_bytes_keeps_that_volume_under_it() {
    let t = TempDir::new("volown");
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let (ad, bd) = (a.to_str().unwrap(), b.to_str().unwrap());
    let tr = t.path().join("trace.pcap");
    let n = 8_000u64;
    let frames: Vec<(u64, Vec<u8>)> = (0..n)
        .map(|i| {
            (
                1_700_000_000_000_000_000 + i * 1_000_000,
                wiretape_testbed::frames::build(i, 1000, 4),
            )
        })
        .collect();
    write_ns_pcap(&tr, &frames);
    let json = t.path().join("summary.json");
    let cap = format!("{bd}=3M");
    let own = [
        "-w",
        bd,
        "--rotate-size",
        "1M",
        "--keep-bytes",
        &cap,
        "--min-free",
        &format!("{ad}=1%"),
    ];
    // The preflight line of each volume names its own limits.
    let o = record_file_command(&tr, &a, &[&own[..], &["--check"]].concat())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains(&format!("--min-free {ad}=1%)")), "{out}");
    assert!(out.contains(&format!("--keep-bytes {bd}=3M)")), "{out}");
    let args = [&own[..], &["--summary-json", json.to_str().unwrap()]].concat();
    record_file(&tr, &a, &args);
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n), "{j}");
    assert_eq!(j["volumes"][1]["keep_bytes"].as_u64(), Some(3 << 20), "{j}");
    assert_eq!(j["volumes"][0]["min_free"]["percent"].as_f64(), Some(1.0));
    assert!(j["volumes"][0].get("keep_bytes").is_none(), "{j}");
    assert!(j["volumes"][1].get("min_free").is_none(), "{j}");
    // b is under its cap; a keeps every file it got; what went was b's
    // and its oldest.
    let held = our_bytes(&b);
    assert!(held <= 3 << 20, "b holds {held} bytes");
    let (fa, fb) = (pcaps(&a), pcaps(&b));
    assert_eq!(j["volumes"][0]["files"].as_u64(), Some(fa.len() as u64));
    let deleted = j["retention"]["deleted_files"].as_u64().unwrap();
    assert!(deleted >= 1 && !fb.is_empty(), "{j}");
    assert_eq!(
        j["volumes"][1]["files"].as_u64(),
        Some(fb.len() as u64 + deleted)
    );
    let gone: Vec<String> = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .filter(|f| !Path::new(f).exists())
        .collect();
    assert_eq!(gone.len() as u64, deleted, "{gone:?}");
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    for g in &gone {
        assert!(Path::new(g).starts_with(&b), "only b's files go: {g}");
        assert!(fb.iter().all(|k| name(k) > name(Path::new(g))), "{g}");
    }
    // extract over the set = the frames still on disk.
    let kept = pcaps_in(&[&a, &b]);
    let (frames_kept, bytes_kept) = capinfos_totals(&kept);
    assert!(frames_kept < n && frames_kept > n / 2, "{frames_kept}");
    let x = t.path().join("x.pcap");
    let (code, _, e) = run_wiretape(None, &["extract", bd, "-w", x.to_str().unwrap()]);
    assert_eq!(code, 0, "{e}");
    assert_eq!(
        capinfos_totals(std::slice::from_ref(&x)),
        (frames_kept, bytes_kept)
    );
    let got = read_all(&x);
    assert_eq!(got.len() as u64, frames_kept);
    assert!(
        got.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns),
        "in time order"
    );
    for r in &got {
        let i = ((r.ts_ns - frames[0].0) / 1_000_000) as usize;
        assert_eq!(r.data, frames[i].1, "frame {i} byte-identical");
    }
    assert_eq!(got.last().unwrap().ts_ns, frames[n as usize - 1].0);
}
