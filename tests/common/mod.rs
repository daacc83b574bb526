//! Shared parts of the integration tests: the `wiretape` binary run inside a
//! test bed namespace, its start line awaited, its output read back.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wiretape::files::{PcapReader, Record};
use wiretape_testbed::{frames, Testbed, CAP_IF};

/// The `wiretape` binary built beside the test executable (target/<profile>/wiretape).
pub fn bin() -> PathBuf {
    if let Ok(p) = std::env::var("WIRETAPE_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().unwrap().parent().unwrap().join("wiretape");
    assert!(
        p.exists(),
        "{} is missing: build it first with `cargo build --workspace` (same profile as the tests)",
        p.display()
    );
    p
}

pub fn require_root() {
    assert!(
        wiretape::capture::sys::is_root(),
        "these tests create network namespaces and attach XDP programs: run them as root"
    );
    // These tests were written for the AF_XDP engine (XDP attach errors, the
    // filter in XDP, AF_XDP stamps ...): on veth `--engine auto` would pick
    // the packet engine, so auto means afxdp for every `wiretape record`
    // they start. tests/packet.rs tests the packet engine and what auto
    // picks by itself (it removes the variable).
    if std::env::var_os("WIRETAPE_ENGINE").is_none() {
        std::env::set_var("WIRETAPE_ENGINE", "afxdp");
    }
}

/// A fresh output directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "wt-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `wiretape record`, killed on drop (a failing test leaves nothing running).
pub struct Recorder {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub stderr: Vec<String>,
}

impl Recorder {
    /// Starts `wiretape record -i wt-cap ARGS` inside the test bed and waits for its start line.
    pub fn start(tb: &Testbed, args: &[&str]) -> Recorder {
        let mut r = Self::spawn(tb, args);
        r.wait_start();
        r
    }

    /// Waits for the start line of a recorder just spawned.
    pub fn started(mut r: Recorder) -> Recorder {
        r.wait_start();
        r
    }

    fn wait_start(&mut self) {
        let r = self;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match r.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let started = l.starts_with("wiretape: recording");
                    r.stderr.push(l);
                    if started {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let st = r.child.wait().unwrap();
                    panic!(
                        "wiretape record exited ({st}) before starting:\n{}",
                        r.stderr.join("\n")
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "no start line within 20 s:\n{}",
                r.stderr.join("\n")
            );
        }
    }

    pub fn spawn(tb: &Testbed, args: &[&str]) -> Recorder {
        let mut all = vec!["-i", CAP_IF];
        all.extend_from_slice(args);
        Self::spawn_raw(tb, &all)
    }

    /// Starts `wiretape record ARGS` (interfaces included in ARGS) and waits
    /// for its start line.
    pub fn start_raw(tb: &Testbed, args: &[&str]) -> Recorder {
        let mut r = Self::spawn_raw(tb, args);
        r.wait_start();
        r
    }

    /// Starts `wiretape record ARGS` (interfaces included in ARGS).
    pub fn spawn_raw(tb: &Testbed, args: &[&str]) -> Recorder {
        let bin = bin();
        let mut c = tb.command(bin.to_str().unwrap());
        c.arg("record").args(args);
        Self::spawn_command(c)
    }

    /// Spawns a command (a `wiretape record` however it is run), its stderr
    /// read line by line.
    pub fn spawn_command(mut c: Command) -> Recorder {
        let mut child = c
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn wiretape");
        let err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Recorder {
            child,
            lines: rx,
            stderr: Vec::new(),
        }
    }

    /// Waits for the process to end by itself (up to `secs`), collecting stderr.
    pub fn wait(&mut self, secs: u64) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            while let Ok(l) = self.lines.try_recv() {
                self.stderr.push(l);
            }
            if let Some(st) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(50));
                while let Ok(l) = self.lines.try_recv() {
                    self.stderr.push(l);
                }
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "wiretape did not stop within {secs} s:\n{}",
                    self.stderr.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (up to `secs`) for a stderr line containing `pat`; returns it.
    pub fn wait_for_line(&mut self, pat: &str, secs: u64) -> String {
        self.wait_for_lines(pat, 1, secs)
    }

    /// Waits (up to `secs`) until `n` stderr lines contain `pat`; returns the last.
    pub fn wait_for_lines(&mut self, pat: &str, n: usize, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let found: Vec<&String> = self.stderr.iter().filter(|l| l.contains(pat)).collect();
            if found.len() >= n {
                return found[n - 1].clone();
            }
            assert!(
                Instant::now() < deadline,
                "not {n} lines with '{pat}' within {secs} s:\n{}",
                self.stderr.join("\n")
            );
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(50)) {
                self.stderr.push(l);
            }
        }
    }

    pub fn signal(&self, sig: i32) {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(st.success());
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.join("\n")
    }

    /// Every stderr line so far (waiting `settle` for lines on their way).
    pub fn drain(&mut self, settle: Duration) -> String {
        let deadline = Instant::now() + settle;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(20)) {
                Ok(l) => self.stderr.push(l),
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(_) => break,
            }
        }
        self.stderr.join("\n")
    }

    /// Collects stderr until a line containing `want` (up to `secs`);
    /// true if it came.
    pub fn wait_line(&mut self, want: &str, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(l) => {
                    let hit = l.contains(want);
                    self.stderr.push(l);
                    if hit {
                        return true;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
        false
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `wiretape` command run as uid/gid 65534 without capabilities (via
/// setpriv) when we are root, else as ourselves.
#[allow(dead_code)]
pub fn wiretape_unprivileged() -> Command {
    if wiretape::capture::sys::is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(bin());
        c
    } else {
        Command::new(bin())
    }
}

/// Runs `wiretape ARGS` to completion (inside the test bed when given).
pub fn run_wiretape(tb: Option<&Testbed>, args: &[&str]) -> (i32, String, String) {
    let bin = bin();
    let mut c = match tb {
        Some(tb) => tb.command(bin.to_str().unwrap()),
        None => Command::new(&bin),
    };
    let out = c.args(args).output().expect("run wiretape");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `wiretape ARGS` run in `dir` (relative paths are `dir`'s): (exit code,
/// stdout, stderr).
pub fn run_wiretape_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run wiretape");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

pub fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("summary json written"))
        .expect("valid json")
}

/// The independent reference for merging: `mergecap` (Wireshark) merges
/// `files` in time order into ns pcap at `out`.
pub fn mergecap(files: &[PathBuf], out: &Path) {
    let o = Command::new("mergecap")
        .args(["-F", "nsecpcap", "-w"])
        .arg(out)
        .args(files)
        .output()
        .expect("mergecap is installed (with tshark, scripts/setup.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Capture files (pcap and pcapng) in a directory, sorted.
/// An age key pair made by `age-keygen`: (identity file, recipient).
pub fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let p = dir.join(name);
    let o = std::process::Command::new("age-keygen")
        .arg("-o")
        .arg(&p)
        .output()
        .expect("age-keygen is installed (scripts/setup.sh installs Debian's age)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = std::process::Command::new("age-keygen")
        .arg("-y")
        .arg(&p)
        .output()
        .unwrap();
    (p, String::from_utf8(o.stdout).unwrap().trim().to_owned())
}

/// The capture files in `dir`, plain, compressed or encrypted (`.pcap`,
/// `.pcap.lz4`, `.pcap.zst`, `.pcap.age`, `.pcapng.lz4.age`...), by name.
pub fn captures(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            let n = n.strip_suffix(".age").unwrap_or(&n);
            let n = n
                .strip_suffix(".lz4")
                .or_else(|| n.strip_suffix(".zst"))
                .unwrap_or(n);
            n.ends_with(".pcap") || n.ends_with(".pcapng")
        })
        .collect();
    v.sort();
    v
}

pub fn pcaps(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    v.sort();
    v
}

/// What the files of a recording hold, checked against the frames sent.
#[derive(Debug, Default)]
pub struct Verified {
    pub frames: u64,
    pub captured_bytes: u64,
    pub original_bytes: u64,
    /// frames per file
    pub per_file: BTreeMap<PathBuf, u64>,
}

/// Reads every pcap in `dir` and asserts: each record is one of the frames
/// sent (seq < n), byte-identical to it (up to `snaplen`), orig_len right,
/// no duplicates, timestamps non-decreasing per file and within [t0, t1].
/// Returns the counts; the caller asserts completeness.
pub fn verify_dir(dir: &Path, n: u64, snaplen: usize, t0: u64, t1: u64) -> Verified {
    verify_files(&pcaps(dir), n, snaplen, t0, t1, true)
}

/// [`verify_dir`] over given files; `nanos`: the files must carry ns stamps
/// (else µs ones, and t0 is taken down to its microsecond).
pub fn verify_files(
    files: &[PathBuf],
    n: u64,
    snaplen: usize,
    t0: u64,
    t1: u64,
    nanos: bool,
) -> Verified {
    verify_files_with(files, &Default::default(), n, snaplen, t0, t1, nanos)
}

/// [`verify_files`] read with `opts` (encrypted files: its identities).
pub fn verify_files_with(
    files: &[PathBuf],
    opts: &wiretape::files::ReadOptions,
    n: u64,
    snaplen: usize,
    t0: u64,
    t1: u64,
    nanos: bool,
) -> Verified {
    let mut seen = vec![false; n as usize];
    let mut v = Verified::default();
    let mut rec = Record::default();
    let t0 = if nanos { t0 } else { t0 / 1000 * 1000 };
    for f in files.iter().cloned() {
        let mut r = PcapReader::open_with(&f, opts).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.header().nanos,
            nanos,
            "{}: timestamp precision (ns: {nanos})",
            f.display()
        );
        let mut last = 0u64;
        let mut k = 0u64;
        while r.next_into(&mut rec).unwrap_or_else(|e| panic!("{e}")) {
            k += 1;
            let (seq, len, flow) = frames::parse(&rec.data)
                .unwrap_or_else(|| panic!("{}: record {k} is not a test frame", f.display()));
            assert!(seq < n, "seq {seq} out of range");
            assert!(
                !std::mem::replace(&mut seen[seq as usize], true),
                "frame {seq} recorded twice"
            );
            let want = frames::build(seq, len, flow);
            assert_eq!(
                rec.orig_len as usize,
                want.len(),
                "frame {seq}: original length"
            );
            assert_eq!(
                rec.data.len(),
                want.len().min(snaplen),
                "frame {seq}: captured length"
            );
            assert!(
                rec.data[..] == want[..rec.data.len()],
                "frame {seq}: bytes differ from what was sent"
            );
            assert!(
                rec.ts_ns >= last,
                "{}: timestamp goes backwards at record {k}",
                f.display()
            );
            assert!(
                rec.ts_ns >= t0 && rec.ts_ns <= t1,
                "frame {seq}: timestamp {} outside the run [{t0}, {t1}]",
                rec.ts_ns
            );
            last = rec.ts_ns;
            v.captured_bytes += rec.data.len() as u64;
            v.original_bytes += rec.orig_len as u64;
        }
        v.frames += k;
        v.per_file.insert(f, k);
    }
    v
}

/// Asserts the accounting identity in a summary JSON, in total and per queue
/// (`packets_seen = packets_written + packets_filtered + packets_cutoff + drops`), and that
/// its numbers agree with each other.
pub fn assert_identity(j: &Value) {
    let d = |v: &Value| -> u64 {
        [
            "rx_ring_full",
            "fill_ring_empty",
            "other",
            "after_count",
            "write_error",
            "disk_full",
        ]
        .iter()
        .map(|k| {
            v["drops"][k]
                .as_u64()
                .unwrap_or_else(|| panic!("drops.{k} missing"))
        })
        .sum()
    };
    let filtered = |v: &Value| -> u64 {
        v["packets_filtered"]
            .as_u64()
            .unwrap_or_else(|| panic!("packets_filtered missing: {v:#}"))
    };
    let cut = |v: &Value| -> u64 {
        v["packets_cutoff"]
            .as_u64()
            .unwrap_or_else(|| panic!("packets_cutoff missing: {v:#}"))
    };
    let seen = j["packets_seen"].as_u64().unwrap();
    let written = j["packets_written"].as_u64().unwrap();
    assert_eq!(
        seen,
        written + filtered(j) + cut(j) + d(j),
        "total identity: {j:#}"
    );
    let (mut qs, mut qf, mut qc) = (0, 0, 0);
    for q in j["per_queue"].as_array().unwrap() {
        let s = q["packets_seen"].as_u64().unwrap();
        let w = q["packets_written"].as_u64().unwrap();
        assert_eq!(s, w + filtered(q) + cut(q) + d(q), "queue identity: {q:#}");
        assert_eq!(q["identity_holds"], Value::Bool(true));
        qs += s;
        qf += filtered(q);
        qc += cut(q);
    }
    assert_eq!(qs, seen, "per-queue seen adds up to the total");
    assert_eq!(qf, filtered(j), "per-queue filtered adds up to the total");
    assert_eq!(qc, cut(j), "per-queue cutoff adds up to the total");
    assert_eq!(j["identity_holds"], Value::Bool(true));
}

/// Is an XDP program attached to the capture end?
pub fn xdp_attached(tb: &Testbed) -> bool {
    let out = tb.ip(&["-d", "link", "show", "dev", CAP_IF]).unwrap();
    out.contains("prog/xdp") || out.contains(" xdp")
}

pub fn now_ns() -> u64 {
    wiretape::timestamp::realtime_ns()
}

/// A classic µs pcap (little-endian, Ethernet) written by hand, so that
/// records can be cut short (caplen < wire length): (bytes, wire length, µs).
pub fn write_us_pcap(path: &Path, frames: &[(Vec<u8>, u32, u64)]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (f, wire, us) in frames {
        b.extend_from_slice(&((us / 1_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((us % 1_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&wire.to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

/// A nanosecond pcap (little-endian, Ethernet) of `frames` (stamp in ns,
/// bytes), written by hand.
pub fn write_ns_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (ns, f) in frames {
        b.extend_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    std::fs::write(path, b).unwrap();
}

/// Every record of a capture file, in order (panics with the reader's error).
pub fn read_all(path: &Path) -> Vec<Record> {
    let mut r = PcapReader::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let mut rec = Record::default();
    while r.next_into(&mut rec).unwrap_or_else(|e| panic!("{e}")) {
        out.push(rec.clone());
    }
    out
}

/// capinfos' (an independent reader's) frame count and data bytes of one
/// capture file.
pub fn capinfos(f: &Path) -> (u64, u64) {
    let o = Command::new("capinfos")
        .args(["-M", "-T", "-r", "-c", "-d"])
        .arg(f)
        .output()
        .expect("capinfos is installed (with tshark, scripts/setup.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let cols: Vec<&str> = text.trim().split('\t').collect();
    (cols[1].parse().unwrap(), cols[2].parse().unwrap())
}

/// The independent reference: what `tcpdump -r FILE -w - EXPR` selects
/// (nanosecond stamps kept), read back.
pub fn tcpdump_select(file: &Path, expr: &str, scratch: &Path) -> Vec<Record> {
    let o = Command::new("tcpdump")
        .args(["--time-stamp-precision=nano", "-r"])
        .arg(file)
        .args(["-w", "-", expr])
        .output()
        .expect("tcpdump is installed (scripts/setup.sh installs it)");
    assert!(
        o.status.success(),
        "tcpdump '{expr}': {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let p = scratch.join("tcpdump.pcap");
    std::fs::write(&p, &o.stdout).unwrap();
    read_all(&p)
}

/// The command `wiretape record -r TRACE -w DIR -q EXTRA...` (the file
/// engine, no privileges).
pub fn record_file_command(trace: &Path, dir: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["record", "-r"])
        .arg(trace)
        .arg("-w")
        .arg(dir)
        .arg("-q")
        .args(extra);
    c
}

/// Runs [`record_file_command`], which must succeed.
pub fn record_file(trace: &Path, dir: &Path, extra: &[&str]) {
    let o = record_file_command(trace, dir, extra)
        .output()
        .expect("run wiretape");
    assert!(
        o.status.success(),
        "record -r {}: {}",
        trace.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A running `wiretape api`, killed on drop.
pub struct Api {
    pub proc: Recorder,
    pub url: String,
}

impl Api {
    pub fn start(args: &[&str]) -> Api {
        let mut c = Command::new(bin());
        c.arg("api").args(args);
        let mut proc = Recorder::spawn_command(c);
        let line = proc.wait_for_line("wiretape: api: serving", 10);
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http"))
            .expect("the start line names the URL")
            .to_string();
        Api { proc, url }
    }

    pub fn pid(&self) -> u32 {
        self.proc.child.id()
    }

    /// `wiretape api -w STORE --listen 127.0.0.1:0 [-q]`: plain HTTP on loopback.
    pub fn loopback(store: &Path, quiet: bool) -> Api {
        let mut a = vec!["-w", store.to_str().unwrap(), "--listen", "127.0.0.1:0"];
        if quiet {
            a.push("-q");
        }
        Api::start(&a)
    }
}

/// A PNG's width, height and the number of distinct pixel colours, decoded
/// by Python's zlib and the PNG row filters (an independent decoder).
pub fn png_info(p: &Path) -> (u64, u64, u64) {
    let script = r#"
import sys, struct, zlib
b = open(sys.argv[1], 'rb').read()
assert b[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat, ihdr = 8, b'', None
while pos < len(b):
    n, = struct.unpack('>I', b[pos:pos+4]); t = b[pos+4:pos+8]; d = b[pos+8:pos+8+n]
    if t == b'IHDR': ihdr = struct.unpack('>IIBBBBB', d)
    if t == b'IDAT': idat += d
    pos += 12 + n
w, h, depth, ctype = ihdr[0], ihdr[1], ihdr[2], ihdr[3]
assert depth == 8 and ctype in (2, 6), ihdr
bpp = 4 if ctype == 6 else 3
raw = zlib.decompress(idat); stride = w * bpp
prev = bytearray(stride); colours = set(); i = 0
for y in range(h):
    f = raw[i]; row = bytearray(raw[i+1:i+1+stride]); i += 1 + stride
    for x in range(stride):
        a = row[x-bpp] if x >= bpp else 0; up = prev[x]; c = prev[x-bpp] if x >= bpp else 0
        if f == 1: row[x] = (row[x] + a) & 255
        elif f == 2: row[x] = (row[x] + up) & 255
        elif f == 3: row[x] = (row[x] + (a + up) // 2) & 255
        elif f == 4:
            p = a + up - c; pa, pb, pc = abs(p-a), abs(p-up), abs(p-c)
            row[x] = (row[x] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
    for x in range(0, stride, bpp): colours.add(bytes(row[x:x+bpp]))
    prev = row
print(w, h, len(colours))
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = String::from_utf8_lossy(&o.stdout);
    let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

/// A connection's key: protocol and its two endpoints, ordered.
pub type ConnKey = (u8, (String, u16), (String, u16));

/// The key of endpoints `x` and `y`, and whether they were swapped.
pub fn conn_key(proto: u8, x: (String, u16), y: (String, u16)) -> (ConnKey, bool) {
    if x <= y {
        ((proto, x, y), false)
    } else {
        ((proto, y, x), true)
    }
}

/// A session row's (`sessions --json`) key and its frames and bytes from
/// the lower endpoint, then to it (as tshark's conversations count them).
pub fn row_conn(r: &Value) -> (ConnKey, [u64; 4]) {
    let ep = |ip: &str, port: &str| {
        (
            r[ip].as_str().unwrap().to_string(),
            r[port].as_u64().unwrap() as u16,
        )
    };
    let (k, swapped) = conn_key(
        r["proto"].as_u64().unwrap() as u8,
        ep("client_ip", "client_port"),
        ep("server_ip", "server_port"),
    );
    let g = |f: &str| r[f].as_u64().unwrap();
    let (c, s) = (
        [g("client_packets"), g("client_bytes")],
        [g("server_packets"), g("server_bytes")],
    );
    let v = if swapped {
        [s[0], s[1], c[0], c[1]]
    } else {
        [c[0], c[1], s[0], s[1]]
    };
    (k, v)
}

/// A mount made for one test, unmounted (and its image removed) on drop.
pub struct Mount {
    dir: PathBuf,
    image: Option<PathBuf>,
}

impl Mount {
    pub fn fs(kind: &str, opts: &str, tag: &str) -> Mount {
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
    pub fn ext4(mib: u64, tag: &str) -> Mount {
        Mount::ext4_in(&std::env::temp_dir(), mib, tag)
    }

    /// [`Mount::ext4`] with its image in RAM (/dev/shm): the loop device's
    /// own writes never wait for a real disk, busy with others' writes on
    /// a loaded machine, so a block throttle on it is the only limit.
    pub fn ext4_in_ram(mib: u64, tag: &str) -> Mount {
        Mount::ext4_in(Path::new("/dev/shm"), mib, tag)
    }

    fn ext4_in(dir: &Path, mib: u64, tag: &str) -> Mount {
        let base = dir.join(format!("wt-img-{tag}-{}", std::process::id()));
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

    pub fn path(&self) -> &Path {
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

/// The four volumes of the failing-volume tests (`tests/metrics.rs`,
/// `tests/packet.rs`): a directory, an 8 MiB ext4 image that fills, a
/// 64 MiB one made read-only mid-run ([`FourVolumes::send_aborting_third`]),
/// another directory; `json` for the summary.
pub struct FourVolumes {
    pub full: Mount,
    pub ro: Mount,
    pub out: TempDir,
    pub json: PathBuf,
    /// The four directories, in `-w` order.
    pub names: Vec<String>,
}

impl FourVolumes {
    pub fn new(tag: &str) -> FourVolumes {
        let full = Mount::ext4(8, &format!("{tag}full"));
        let ro = Mount::ext4(64, &format!("{tag}ro"));
        let out = TempDir::new(tag);
        let json = out.path().join("s.json");
        let dirs = [
            out.path().join("c"),
            full.path().to_owned(),
            ro.path().to_owned(),
            out.path().join("d"),
        ];
        let names = dirs.iter().map(|p| p.display().to_string()).collect();
        FourVolumes {
            full,
            ro,
            out,
            json,
            names,
        }
    }

    /// `-w DIR` for each volume, in order.
    pub fn w_args(&self) -> Vec<&str> {
        self.names.iter().flat_map(|n| ["-w", n.as_str()]).collect()
    }

    /// Sends frames `0..n` of 1,500 B at 20 kpps; after half, the third
    /// volume is aborted to read-only (`mount -o remount,abort`). What
    /// each half sent.
    pub fn send_aborting_third(
        &self,
        tb: &Testbed,
        n: u64,
    ) -> (wiretape_testbed::SendReport, wiretape_testbed::SendReport) {
        let a = tb
            .send(
                0..n / 2,
                wiretape_testbed::SizeFn::Fixed(1500),
                1,
                Some(20_000),
            )
            .unwrap();
        let st = Command::new("mount")
            .args(["-o", "remount,abort", &self.names[2]])
            .status()
            .unwrap();
        assert!(st.success(), "mount -o remount,abort");
        let b = tb
            .send(
                n / 2..n,
                wiretape_testbed::SizeFn::Fixed(1500),
                1,
                Some(20_000),
            )
            .unwrap();
        (a, b)
    }
}

/// A write-bandwidth limit on the disk under `dir` (each disk under
/// `dirs`, for [`DiskThrottle::disks`]) for the processes put in it, with
/// the kernel's block throttle (cgroup v1 `blkio` or v2 `io`); removed
/// (its processes moved back to the root) when dropped.
pub struct DiskThrottle {
    cg: PathBuf,
    root: PathBuf,
    /// The disks held back, and whether this is cgroup v1's `blkio`.
    devs: Vec<(u32, u32)>,
    v1: bool,
}

impl DiskThrottle {
    pub fn new(tag: &str, dir: &Path, bytes_per_s: u64) -> DiskThrottle {
        DiskThrottle::disks(tag, &[dir], bytes_per_s)
    }

    /// Each disk under `dirs` held to `bytes_per_s` (each on its own:
    /// together they write up to `dirs.len()` times that).
    pub fn disks(tag: &str, dirs: &[&Path], bytes_per_s: u64) -> DiskThrottle {
        use std::os::unix::fs::MetadataExt;
        let devs: Vec<(u32, u32)> = dirs
            .iter()
            .map(|dir| {
                let dev = std::fs::metadata(dir).unwrap().dev();
                let (mut maj, mut min) = (libc::major(dev), libc::minor(dev));
                // The throttle is set per disk: a partition's disk is its parent.
                let sys = PathBuf::from(format!("/sys/dev/block/{maj}:{min}"));
                if sys.join("partition").exists() {
                    let d = std::fs::read_to_string(sys.join("../dev")).unwrap();
                    let (a, b) = d.trim().split_once(':').unwrap();
                    (maj, min) = (a.parse().unwrap(), b.parse().unwrap());
                }
                (maj, min)
            })
            .collect();
        let v1 = PathBuf::from("/sys/fs/cgroup/blkio");
        let v2 = PathBuf::from("/sys/fs/cgroup");
        let name = format!("wt-test-{tag}-{}", std::process::id());
        if v1.join("blkio.throttle.write_bps_device").exists() {
            let cg = v1.join(&name);
            std::fs::create_dir_all(&cg).unwrap();
            for (maj, min) in &devs {
                std::fs::write(
                    cg.join("blkio.throttle.write_bps_device"),
                    format!("{maj}:{min} {bytes_per_s}"),
                )
                .unwrap();
            }
            return DiskThrottle {
                cg,
                root: v1,
                devs,
                v1: true,
            };
        }
        let controllers =
            std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        assert!(
            controllers.split_whitespace().any(|c| c == "io"),
            "no block throttle here: neither cgroup v1 blkio nor the v2 io controller"
        );
        let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+io");
        let cg = v2.join(&name);
        std::fs::create_dir_all(&cg).unwrap();
        for (maj, min) in &devs {
            std::fs::write(cg.join("io.max"), format!("{maj}:{min} wbps={bytes_per_s}")).unwrap();
        }
        DiskThrottle {
            cg,
            root: v2,
            devs,
            v1: false,
        }
    }

    /// Lifts the limit (its processes stay in the group): what waits in the
    /// throttle goes out at once.
    pub fn lift(&self) {
        for (maj, min) in &self.devs {
            let (file, rule) = if self.v1 {
                ("blkio.throttle.write_bps_device", format!("{maj}:{min} 0"))
            } else {
                ("io.max", format!("{maj}:{min} wbps=max"))
            };
            std::fs::write(self.cg.join(file), rule).unwrap();
        }
    }

    /// `wiretape record ARGS` on the test bed's capture end, in the group
    /// from its first instruction (a shell stops itself, joins the group
    /// and execs the recorder): every thread it makes, io_uring's workers
    /// too, is held.
    pub fn record(&self, tb: &Testbed, args: &[&str]) -> Recorder {
        let bin = bin();
        let mut c = tb.command("sh");
        c.args([
            "-c",
            "kill -STOP $$ && exec \"$0\" \"$@\"",
            bin.to_str().unwrap(),
            "record",
            "-i",
            CAP_IF,
        ])
        .args(args);
        let r = Recorder::spawn_command(c);
        let pid = r.child.id();
        // `ip netns exec` execs the shell: the child's pid is the shell's.
        let stopped = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('T')))
                .unwrap_or(false)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !stopped() {
            assert!(
                Instant::now() < deadline,
                "the recorder's shell never stopped"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        self.add(pid);
        let st = Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status();
        assert!(st.is_ok_and(|s| s.success()), "kill -CONT {pid}");
        Recorder::started(r)
    }

    pub fn add(&self, pid: u32) {
        std::fs::write(self.cg.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for DiskThrottle {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.cg.join("cgroup.procs")) {
            for p in procs.split_whitespace() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), p);
            }
        }
        let _ = std::fs::remove_dir(&self.cg);
    }
}
