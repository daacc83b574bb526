//! Crash at any instant (issue 34): `wiretape record` killed with SIGKILL,
//! by pid, at random instants of its run, across every writer path: pcap ns
//! and µs, pcapng, the packet engine laying pcapng out in place, lz4, zstd,
//! rotation by size and by time, retention deleting; and `record -r` (the
//! file engine). Besides instants drawn from the whole run, some kills come
//! right at the start (before the first file is opened, or the moment it
//! appears) and right after a rotation (the moment a new file appears):
//! where files without a complete header come from.
//!
//! After each kill: `wiretape repair DIR` exits 0; every file it kept holds
//! exactly the frames that led the file before the repair (nothing libpcap
//! reads cut, nothing else kept), and a file it removed held none; tcpdump
//! reads every file to its end (through `lz4 -dc` / `zstdcat` when
//! compressed) and counts the same frames; `wiretape info` exits 0 on each;
//! `wiretape extract DIR` gives the frames sent before the kill up to the
//! last block that landed: consecutive sequence numbers from the first one
//! sent (the oldest files may be gone with retention), nothing duplicated
//! or out of order, each byte-identical to what was sent.
//!
//! The instants come from a seed, printed on stderr (also when the test
//! passes); `WIRETAPE_CRASH_SEED=N` runs the same draws again.

mod common;

use common::*;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wiretape::files::walk::Walker;
use wiretape::files::{zread, Format};
use wiretape::storage::PcapWriter;
use wiretape_testbed::{frames, SizeFn, Testbed};

/// splitmix64: the kill instants and modes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, n).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The run's seed: `WIRETAPE_CRASH_SEED`, else drawn from the clock.
fn base_seed() -> u64 {
    match std::env::var("WIRETAPE_CRASH_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .expect("WIRETAPE_CRASH_SEED is a number (the seed a run printed)"),
        Err(_) => now_ns() ^ (std::process::id() as u64) << 32,
    }
}

/// A line on the real stderr: the test harness captures `eprintln!`, and
/// the seed must be seen when the test passes too.
fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A path's own seed, from the run's and its name.
fn seed_for(base: u64, name: &str) -> u64 {
    name.bytes()
        .fold(base, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01B3))
}

/// Capture files in `dir` (plain and compressed), sorted.
fn captures(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    [".pcap", ".pcapng", ".lz4", ".zst"]
                        .iter()
                        .any(|e| n.ends_with(e))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Where the first hole of `f` starts (its length if it has none): the
/// writes that were in flight at the kill (an O_DIRECT file is allocated
/// ahead of its writes, and they run in parallel).
fn first_hole(f: &Path) -> u64 {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(f).unwrap();
    // SAFETY: advice and a seek on a descriptor we keep open; no memory is
    // involved. Cached clean pages are dropped first: the kernel counts a
    // cached page over a hole as data.
    let at = unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        libc::lseek(file.as_raw_fd(), 0, libc::SEEK_HOLE)
    };
    // An empty file has no offset 0 to seek from (ENXIO).
    if at < 0 {
        return 0;
    }
    at as u64
}

/// The frames that lead the data of `f` as the kill left it: records read
/// from its start up to its first hole, as long as each is one of the test
/// frames sent, whole and byte-identical (compressed: in units wholly
/// written). What a repair must keep, no more, no less.
fn leading_frames(f: &Path) -> u64 {
    let copy = f.with_file_name(format!(
        ".lead-{}",
        f.file_name().unwrap().to_string_lossy()
    ));
    {
        let mut from = std::fs::File::open(f).unwrap();
        let mut to = std::fs::File::create(&copy).unwrap();
        std::io::copy(&mut std::io::Read::take(&mut from, first_hole(f)), &mut to).unwrap();
    }
    let n = leading_frames_of(&copy);
    std::fs::remove_file(&copy).unwrap();
    n
}

fn leading_frames_of(f: &Path) -> u64 {
    let Ok(src) = zread::open_buffered(f, &Default::default()) else {
        return 0;
    };
    let mut w = Walker::new(src);
    let mut d = Vec::new();
    let mut n = 0;
    while let Some(m) = w.next_into(&mut d) {
        let exact = frames::parse(&d).is_some_and(|(seq, len, flow)| {
            m.orig_len as usize == len && d == frames::build(seq, len, flow)
        });
        if !exact {
            break;
        }
        n += 1;
    }
    n
}

/// `tcpdump --count -r` over `f` (decompressed by `lz4 -dc` or `zstdcat`
/// into its stdin when compressed): the frames it read, and its complaint
/// if it did not read to the end cleanly.
fn tcpdump_count(f: &Path) -> Result<u64, String> {
    let name = f.to_string_lossy();
    let unpack = if name.ends_with(".lz4") {
        Some(("lz4", ["-dc"]))
    } else if name.ends_with(".zst") {
        Some(("zstd", ["-dc"]))
    } else {
        None
    };
    let mut td = Command::new("tcpdump");
    td.args(["--count", "-r"]);
    let (out, unpacked) = match unpack {
        None => (td.arg(f).output().expect("tcpdump"), None),
        Some((tool, args)) => {
            let mut z = Command::new(tool)
                .args(args)
                .arg(f)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{tool}: {e}"));
            let out = td
                .arg("-")
                .stdin(z.stdout.take().unwrap())
                .output()
                .expect("tcpdump");
            (out, Some((tool, z.wait_with_output().unwrap())))
        }
    };
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    if let Some((tool, z)) = unpacked {
        if !z.status.success() {
            return Err(format!(
                "{tool}: {}",
                String::from_utf8_lossy(&z.stderr).trim()
            ));
        }
    }
    if !out.status.success() || err.contains("truncated") || err.contains("tcpdump:") {
        return Err(format!("tcpdump: {}", err.trim()));
    }
    let s = String::from_utf8_lossy(&out.stdout);
    s.trim()
        .strip_suffix(" packets")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("tcpdump --count said {s:?}"))
}

/// What one kill left, checked.
#[derive(Default)]
struct Tally {
    kills: u64,
    frames_kept: u64,
    frames_sent: u64,
    files: u64,
    removed: u64,
    repaired: u64,
    /// Most files of one run that repair changed (trimmed or removed).
    most_changed: u64,
}

/// The checks after a kill (see the module docs). `first`: the sequence
/// number sent first; `sent`: frames sent (an upper bound of what can have
/// been recorded); `retention`: the oldest files may have been deleted.
fn check_after_kill(
    dir: &Path,
    first: u64,
    sent: u64,
    retention: bool,
    startup: bool,
    ctx: &str,
    t: &mut Tally,
) {
    let ctx = &format!(
        "{ctx}{}",
        if startup {
            ", record's repair at start"
        } else {
            ""
        }
    );
    // WIRETAPE_CRASH_KEEP=DIR: a copy of what each kill left, before repair.
    if let Ok(keep) = std::env::var("WIRETAPE_CRASH_KEEP") {
        let to = Path::new(&keep).join(ctx.replace(['/', ' ', '"', '[', ']', ','], "_"));
        std::fs::create_dir_all(&to).unwrap();
        Command::new("cp")
            .arg("-a")
            .arg(dir)
            .arg(&to)
            .status()
            .unwrap();
    }
    // The killed recorder's writes in flight complete while the kernel
    // tears its io_uring down (its locks go with it): the state to judge
    // is the one after that.
    let deadline = Instant::now() + Duration::from_secs(10);
    while captures(dir)
        .iter()
        .any(|f| std::fs::File::open(f).is_ok_and(|f| wiretape::files::is_being_written(&f)))
    {
        assert!(
            Instant::now() < deadline,
            "{ctx}: files still locked 10 s after the kill"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let before: Vec<(PathBuf, u64)> = captures(dir)
        .into_iter()
        .map(|f| {
            let n = leading_frames(&f);
            (f, n)
        })
        .collect();
    // What `record` does at start in its directory (only the newest files
    // of each series are read), then `wiretape repair DIR` (every file),
    // which must then find nothing left to do; or `repair DIR` alone.
    let notices = if startup {
        wiretape::storage::repair_dir(dir, "wiretape", &Default::default()).join("\n")
    } else {
        String::new()
    };
    let (code, out, err) = run_wiretape(None, &["repair", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{ctx}: repair DIR: {out}{err}");
    if startup {
        assert!(
            out.lines().all(|l| l.contains(": intact, ")
                || l.contains(" 0 repaired, 0 removed (no complete header), 0 being written")),
            "{ctx}: record's own repair at start left work: {notices}\n{out}"
        );
    }
    let out = format!("{notices}\n{out}");
    let mut changed = 0;
    let mut total = 0;
    let after = captures(dir);
    for (f, lead) in &before {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if !f.exists() {
            assert!(
                out.lines()
                    .any(|l| l.contains(&name) && l.contains("removed")),
                "{ctx}: {name} gone, not said: {out}"
            );
            assert_eq!(*lead, 0, "{ctx}: {name} removed with {lead} frames in it");
            assert!(
                !wiretape::files::index::path_for(f).exists(),
                "{ctx}: {name}: its index stays"
            );
            t.removed += 1;
            changed += 1;
            continue;
        }
        if out
            .lines()
            .any(|l| l.contains(&name) && (l.contains("trimmed") || l.contains("closed")))
        {
            t.repaired += 1;
            changed += 1;
        }
        let n = tcpdump_count(f).unwrap_or_else(|e| panic!("{ctx}: {name}: {e}"));
        assert_eq!(
            n, *lead,
            "{ctx}: {name}: tcpdump reads {n} frames, {lead} led the file before repair"
        );
        total += n;
    }
    assert!(
        after.iter().all(|f| before.iter().any(|(b, _)| b == f)),
        "{ctx}: repair made files"
    );
    // info: exit 0 on every file, and the counts tcpdump read.
    if !after.is_empty() {
        let mut a = vec!["info", "--json"];
        a.extend(after.iter().map(|f| f.to_str().unwrap()));
        let (code, out, err) = run_wiretape(None, &a);
        assert_eq!(code, 0, "{ctx}: info: {err}");
        let n: u64 = out
            .lines()
            .map(|l| {
                let j: serde_json::Value = serde_json::from_str(l).unwrap();
                j["packets"].as_u64().unwrap()
            })
            .sum();
        assert_eq!(n, total, "{ctx}: info and tcpdump count alike");
    }
    // extract: the frames sent, in order, none twice, none missing between
    // the first and the last kept, byte for byte.
    let x = dir.with_extension("extract.pcap");
    let (code, _, err) = run_wiretape(
        None,
        &[
            "extract",
            dir.to_str().unwrap(),
            "-q",
            "-w",
            x.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{ctx}: extract: {err}");
    let recs = read_all(&x);
    std::fs::remove_file(&x).unwrap();
    assert_eq!(
        recs.len() as u64,
        total,
        "{ctx}: extract gives every frame kept"
    );
    let mut expect = None;
    for (k, r) in recs.iter().enumerate() {
        let (seq, len, flow) = frames::parse(&r.data)
            .unwrap_or_else(|| panic!("{ctx}: extracted frame {k} is not a test frame"));
        assert!(
            r.data == frames::build(seq, len, flow) && r.orig_len as usize == len,
            "{ctx}: frame {seq}: bytes differ from what was sent"
        );
        let want = expect.unwrap_or(if retention { seq } else { first });
        assert_eq!(
            seq, want,
            "{ctx}: extracted frame {k}: sequence {seq} where {want} was due (a gap, a duplicate or out of order)"
        );
        assert!(
            seq < first + sent,
            "{ctx}: frame {seq} was never sent ({sent} sent from {first})"
        );
        expect = Some(seq + 1);
    }
    t.kills += 1;
    t.frames_kept += total;
    t.frames_sent += sent;
    t.files += after.len() as u64;
    t.most_changed = t.most_changed.max(changed);
}

/// How one kill is timed.
#[derive(Clone, Copy, Debug)]
enum Moment {
    /// Within the first 60 ms after the spawn: before or while the first
    /// file is opened; nothing sent.
    Start,
    /// The moment the first file appears; nothing sent.
    FirstFile,
    /// At a random instant of a run that sends frames from its start line.
    Random,
    /// The moment a rotation's new file appears, frames flowing.
    AfterRotation,
}

/// Polls `dir` (every 200 µs, up to 10 s) until it holds more than `n`
/// capture files.
fn wait_files(dir: &Path, n: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if captures(dir).len() > n {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// `kills` kills of `wiretape record -i wt-cap -w DIR ARGS` at 25 kpps.
fn crash_live(name: &str, args: &[&str], kills: usize, rotating: bool, retention: bool) {
    require_root();
    let base = base_seed();
    let seed = seed_for(base, name);
    say(&format!(
        "crash[{name}]: seed {base} (WIRETAPE_CRASH_SEED={base} draws the same instants)"
    ));
    let started = Instant::now();
    let mut rng = Rng(seed);
    let tb = Testbed::create(&format!("cr{}", &name[..name.len().min(4)]), 1).unwrap();
    let work = TempDir::new(&format!("crash-{name}"));
    let mut t = Tally::default();
    let mut moments = [0u64; 4];
    for k in 0..kills {
        let dir = work.path().join(format!("k{k}"));
        std::fs::create_dir_all(&dir).unwrap();
        let m = match rng.below(100) {
            0..=9 => Moment::Start,
            10..=19 => Moment::FirstFile,
            20..=44 if rotating => Moment::AfterRotation,
            _ => Moment::Random,
        };
        moments[m as usize] += 1;
        let first = k as u64 * 10_000_000;
        let mut a = vec!["-w", dir.to_str().unwrap(), "-q"];
        a.extend_from_slice(args);
        let mut rec = Recorder::spawn(&tb, &a);
        let mut stream = None;
        let mut at = Duration::ZERO;
        match m {
            Moment::Start => {
                at = Duration::from_micros(rng.below(60_000));
                std::thread::sleep(at);
            }
            Moment::FirstFile => {
                assert!(wait_files(&dir, 0), "seed {base}, {name} kill {k}: no file");
            }
            Moment::Random | Moment::AfterRotation => {
                rec = Recorder::started(rec);
                let s = tb.send_stream(first..first + 10_000_000, SizeFn::Mixed, 1, Some(25_000));
                if let Moment::Random = m {
                    at = Duration::from_micros(rng.below(800_000));
                    std::thread::sleep(at);
                } else {
                    let n = captures(&dir).len();
                    assert!(
                        wait_files(&dir, n),
                        "seed {base}, {name} kill {k}: no rotation"
                    );
                }
                stream = Some(s);
            }
        }
        // SIGKILL, by pid.
        rec.child.kill().unwrap();
        rec.child.wait().unwrap();
        let sent = stream.map_or(0, |s| s.stop().unwrap().sent);
        let ctx = format!("seed {base}, {name} kill {k} ({m:?} {at:?}, {sent} sent)");
        let startup = k % 2 == 1;
        check_after_kill(&dir, first, sent, retention, startup, &ctx, &mut t);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    say(&format!(
        "crash[{name}]: {} kills (start {}, first file {}, random {}, after rotation {}) in {:.1} s: \
         {} of {} frames sent kept, {} files, {} repaired, {} removed, at most {} changed after one kill",
        t.kills,
        moments[0],
        moments[1],
        moments[2],
        moments[3],
        started.elapsed().as_secs_f64(),
        t.frames_kept,
        t.frames_sent,
        t.files,
        t.repaired,
        t.removed,
        t.most_changed
    ));
}

#[test]
fn kill_pcap_ns() {
    crash_live("pcap-ns", &["--flush-interval", "0.1"], 30, false, false);
}

#[test]
fn kill_pcap_us_rotating_by_size_keeping_bytes() {
    crash_live(
        "pcap-us",
        &[
            "--tsprec",
            "us",
            "--flush-interval",
            "0.1",
            "--block-kib",
            "256",
            "--rotate-size",
            "2M",
            "--keep-bytes",
            "6M",
        ],
        30,
        true,
        true,
    );
}

#[test]
fn kill_pcapng_rotating_by_time() {
    crash_live(
        "pcapng",
        &[
            "--format",
            "pcapng",
            "--flush-interval",
            "0.1",
            "--rotate-time",
            "0.2",
        ],
        30,
        true,
        false,
    );
}

#[test]
fn kill_packet_engine_in_place() {
    crash_live(
        "in-place",
        &[
            "--engine",
            "packet",
            "--format",
            "pcapng",
            "--packet-in-place",
            "--flush-interval",
            "0.1",
            "--rotate-size",
            "4M",
        ],
        30,
        true,
        false,
    );
}

#[test]
fn kill_lz4_rotating_by_size_keeping_files() {
    crash_live(
        "lz4",
        &[
            "--compress",
            "lz4",
            "--flush-interval",
            "0.1",
            "--block-kib",
            "256",
            "--rotate-size",
            "1M",
            "--keep-files",
            "4",
        ],
        30,
        true,
        true,
    );
}

#[test]
fn kill_zstd_rotating_by_time() {
    crash_live(
        "zstd",
        &[
            "--compress",
            "zstd",
            "--format",
            "pcapng",
            "--flush-interval",
            "0.1",
            "--rotate-time",
            "0.25",
        ],
        30,
        true,
        false,
    );
}

/// `record -r` (the file engine, unprivileged parts only) killed mid-way
/// through a trace of known frames, plain pcap and pcapng rotating, lz4.
#[test]
fn kill_record_from_a_file() {
    let base = base_seed();
    let seed = seed_for(base, "record-r");
    say(&format!(
        "crash[record-r]: seed {base} (WIRETAPE_CRASH_SEED={base} draws the same instants)"
    ));
    let started = Instant::now();
    let mut rng = Rng(seed);
    let work = TempDir::new("crash-r");
    // The trace: frames 0.. of the test stream, 1 µs apart.
    let n = 60_000u64;
    let trace = work.path().join("trace.pcap");
    let t0 = 1_764_000_000_000_000_000u64;
    let mut w = PcapWriter::with_format(
        wiretape::storage::FileSink::create(&trace).unwrap(),
        65535,
        Format::PcapNs,
        "",
    );
    for seq in 0..n {
        w.write(
            t0 + seq * 1000,
            &frames::build(seq, frames::mixed_size(seq), 0),
        )
        .unwrap();
    }
    w.close().unwrap();
    let variants: [&[&str]; 3] = [
        &[],
        &["--format", "pcapng", "--rotate-size", "2M"],
        &["--compress", "lz4", "--rotate-size", "4M"],
    ];
    // How long a whole run takes (kills fall within it).
    let whole = {
        let dir = work.path().join("whole");
        let t = Instant::now();
        record_file(&trace, &dir, variants[1]);
        let d = t.elapsed();
        std::fs::remove_dir_all(&dir).unwrap();
        d
    };
    let mut t = Tally::default();
    for k in 0..30 {
        let dir = work.path().join(format!("k{k}"));
        std::fs::create_dir_all(&dir).unwrap();
        let v = variants[k % variants.len()];
        let mut child = record_file_command(&trace, &dir, v)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let at = Duration::from_micros(rng.below(whole.as_micros() as u64 * 11 / 10));
        std::thread::sleep(at);
        child.kill().unwrap();
        child.wait().unwrap();
        let ctx = format!("seed {base}, record -r {v:?} kill {k} ({at:?} of {whole:?})");
        check_after_kill(&dir, 0, n, false, k % 2 == 1, &ctx, &mut t);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    say(&format!(
        "crash[record-r]: {} kills in {:.1} s (a whole run {:?}): {} frames kept, {} files, {} repaired, {} removed, at most {} changed after one kill",
        t.kills,
        started.elapsed().as_secs_f64(),
        whole,
        t.frames_kept,
        t.files,
        t.repaired,
        t.removed,
        t.most_changed
    ));
}
