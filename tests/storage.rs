//! The storage engine end to end: O_DIRECT by default, buffered fallback
//! where a filesystem refuses it, a full disk stops cleanly with valid files
//! and exact accounting, and a torn tail after SIGKILL is trimmed on restart.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape::capture::testbed::{SizeFn, Testbed};

/// A mount made for one test, unmounted (and its image removed) on drop.
struct Mount {
    dir: PathBuf,
    image: Option<PathBuf>,
}

impl Mount {
    fn fs(kind: &str, opts: &str, tag: &str) -> Mount {
        let dir = TempDir::new(tag).0.clone();
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", kind, "-o", opts, kind, dir.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(st.success(), "mount -t {kind}");
        Mount { dir, image: None }
    }

    /// A small ext4 filesystem in a file, loop-mounted.
    fn ext4(mib: u64, tag: &str) -> Mount {
        let base = std::env::temp_dir().join(format!("wt-img-{tag}-{}", std::process::id()));
        let image = base.with_extension("img");
        let dir = base.with_extension("mnt");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::File::create(&image)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        let ok = Command::new("mkfs.ext4")
            .args(["-q", "-F", image.to_str().unwrap()])
            .status()
            .unwrap()
            .success()
            && Command::new("mount")
                .args(["-o", "loop", image.to_str().unwrap(), dir.to_str().unwrap()])
                .status()
                .unwrap()
                .success();
        assert!(ok, "mkfs.ext4 + loop mount");
        Mount {
            dir,
            image: Some(image),
        }
    }

    fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(i) = &self.image {
            let _ = std::fs::remove_file(i);
        }
    }
}

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
/// frames in it; the rest are write errors.
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
    assert!(err.contains("disk full"), "{err}");
    let j = read_json(&json);
    let _ = std::fs::remove_file(&json);
    assert_eq!(j["stop_reason"], "output failed");
    assert_eq!(j["write_engine"], engine);
    assert_identity(&j);
    assert!(j["drops"]["write_error"].as_u64().unwrap() > 0, "{j}");
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
    let torn = wiretape::storage::FileInfo::scan(&f).is_err();
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
    let mut rec = wiretape::storage::Record::default();
    for f in &files {
        let mut r = wiretape::storage::PcapReader::open(f).unwrap();
        let before = seqs.len();
        while r.next_into(&mut rec).unwrap() {
            seqs.push(
                wiretape::capture::testbed::frames::parse(&rec.data)
                    .unwrap()
                    .0,
            );
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
            wiretape::storage::FileInfo::scan(f).unwrap().packets
        );
    }
}

#[test]
fn rotation_by_time() {
    let (files, _out) = rotation("rott", &["--rotate-time", "0.3s"]);
    // 30k frames at 20k/s: 1.5 s of packet time, a file per 0.3 s.
    assert!(files.len() >= 4, "{} files", files.len());
    for f in &files {
        let i = wiretape::storage::FileInfo::scan(f).unwrap();
        let span = i.last_ns.unwrap() - i.first_ns.unwrap();
        assert!(span < 300_000_000, "{} spans {span} ns", f.display());
    }
}
