//! The readers under fuzzing: what `info`, `repair`, `replay`, `extract`
//! and the `.idx` reader do with mutated pcap (µs and ns, either byte
//! order), pcapng and index files. Property-based (proptest): a valid file
//! of random records (and its index) is built, then bits flipped, bytes and
//! length fields overwritten, ranges cut, duplicated or inserted, the file
//! truncated; every reader must then answer (Ok or an error), never panic,
//! never hang (a watchdog aborts a case that runs 20 s), and what it does
//! answer must hold together:
//! - `info` (FileInfo::scan) and the index reader: Ok or an error;
//! - `repair`: if it says Ok, the file then reads to its end without error
//!   and holds as many records as it said it kept;
//! - `replay`'s source: frames as long as the reader said;
//! - `extract` (planner + merge, the index used when it is readable): every
//!   frame inside the window, in timestamp order when the file was;
//! - `index::rebuild` then `index::read`: entries that add up to the
//!   records the reader counts.
//!
//! Safe Rust turns an out-of-bounds read into a panic, which fails the
//! property (the storage readers hold no `unsafe`). Cases per property:
//! 64 by default (CI), `WIRETAPE_FUZZ_CASES=N` for a long run.

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use wiretape::files::index;
use wiretape::files::{FileInfo, PcapReader, Record};
use wiretape::query::extract::{self, Merge, Window};
use wiretape::storage::repair;

const T0: u64 = 1_795_000_000_000_000_000;

fn cases() -> u32 {
    std::env::var("WIRETAPE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        // Shrinking a hang or a big input can take long: bound it.
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    }
}

/// A case's start (ms since the watchdog started; 0: none running), per
/// test thread slot.
static RUNNING: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
static SLOT: AtomicU64 = AtomicU64::new(0);
static CASES_RUN: AtomicU64 = AtomicU64::new(0);

fn watchdog() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_secs(1));
            let now = watchdog().elapsed().as_millis() as u64;
            for s in &RUNNING {
                let t = s.load(Ordering::Relaxed);
                if t != 0 && now.saturating_sub(t) > 20_000 {
                    eprintln!("fuzz: a case has run 20 s: a reader hangs");
                    std::process::abort();
                }
            }
        });
        Instant::now()
    })
}

/// Times one case (the watchdog aborts the process if it hangs).
/// Its scratch directory is removed when it ends, whatever happened.
struct Case(usize, PathBuf);

impl Case {
    fn start(slot: usize, dir: &Path) -> Case {
        let t = watchdog().elapsed().as_millis() as u64 + 1;
        RUNNING[slot].store(t, Ordering::Relaxed);
        CASES_RUN.fetch_add(1, Ordering::Relaxed);
        std::fs::create_dir_all(dir).unwrap();
        Case(slot, dir.to_owned())
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        RUNNING[self.0].store(0, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// A scratch directory for one test, on tmpfs where there is one.
fn scratch(tag: &str) -> (PathBuf, usize) {
    let slot = SLOT.fetch_add(1, Ordering::Relaxed) as usize % RUNNING.len();
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    // Directories of earlier runs whose process is gone.
    for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name
            .strip_prefix("wt-fuzz-")
            .and_then(|r| r.rsplit('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let d = base.join(format!("wt-fuzz-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    (d, slot)
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    NsLe,
    UsLe,
    NsBe,
    Ng,
}

#[derive(Clone, Debug)]
struct Base {
    kind: Kind,
    /// (captured length, extra wire bytes, gap to the previous stamp in ns)
    recs: Vec<(u16, u16, u32)>,
    /// Records per index entry.
    per_entry: usize,
    /// The index in format 2 (with flow sets, written by `index::rebuild`
    /// from the file), else format 1 (written here).
    v2: bool,
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip {
        at: u32,
        bit: u8,
    },
    Byte {
        at: u32,
        v: u8,
    },
    Word {
        at: u32,
        v: u32,
    },
    Truncate {
        at: u32,
    },
    Cut {
        at: u32,
        len: u16,
    },
    Dup {
        at: u32,
        len: u16,
    },
    Insert {
        at: u32,
        bytes: Vec<u8>,
    },
    /// A word of a record's header (pcap: seconds, fraction, caplen,
    /// orig_len; pcapng: type, length, interface, stamp high, low, caplen,
    /// orig_len), in the file's byte order or not.
    Field {
        rec: u16,
        field: u8,
        v: u32,
        swap: bool,
    },
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::NsLe),
        Just(Kind::UsLe),
        Just(Kind::NsBe),
        Just(Kind::Ng)
    ]
}

fn base() -> impl Strategy<Value = Base> {
    (
        kind(),
        prop::collection::vec((0u16..300, 0u16..100, 0u32..5_000_000), 0..40),
        1usize..8,
        any::<bool>(),
    )
        .prop_map(|(kind, recs, per_entry, v2)| Base {
            kind,
            recs,
            per_entry,
            v2,
        })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Interesting words: lengths that are huge, zero, just past a block.
    let word = prop_oneof![
        any::<u32>(),
        Just(0u32),
        Just(u32::MAX),
        Just(0x7fff_ffff),
        Just(65_536),
        Just(262_145),
        Just(28),
        Just(0x0a0d_0d0a),
        Just(0x1a2b_3c4d),
        Just(0xa1b2_3c4d),
    ];
    let field_word = prop_oneof![
        any::<u32>(),
        Just(0u32),
        Just(u32::MAX),
        Just(0x7fff_ffff),
        Just(262_145),
        Just(4),
        Just(12),
        Just(28),
        Just(31),
        Just(1_000_000_000),
    ];
    prop_oneof![
        (any::<u16>(), 0u8..7, field_word, any::<bool>()).prop_map(|(rec, field, v, swap)| {
            Mutation::Field {
                rec,
                field,
                v,
                swap,
            }
        }),
        (any::<u32>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (any::<u32>(), any::<u8>()).prop_map(|(at, v)| Mutation::Byte { at, v }),
        (any::<u32>(), word).prop_map(|(at, v)| Mutation::Word { at, v }),
        any::<u32>().prop_map(|at| Mutation::Truncate { at }),
        (any::<u32>(), 1u16..200).prop_map(|(at, len)| Mutation::Cut { at, len }),
        (any::<u32>(), 1u16..200).prop_map(|(at, len)| Mutation::Dup { at, len }),
        (any::<u32>(), prop::collection::vec(any::<u8>(), 1..64))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
    ]
}

fn mutate(b: &mut Vec<u8>, m: &Mutation, recs: &[usize], be: bool) {
    let pos = |at: u32, n: usize| if n == 0 { 0 } else { at as usize % n };
    match m {
        Mutation::Field {
            rec,
            field,
            v,
            swap,
        } if !recs.is_empty() => {
            let at = recs[*rec as usize % recs.len()] + 4 * *field as usize;
            if at + 4 <= b.len() {
                let v = if be != *swap {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                };
                b[at..at + 4].copy_from_slice(&v);
            }
        }
        Mutation::Flip { at, bit } if !b.is_empty() => {
            let i = pos(*at, b.len());
            b[i] ^= 1 << bit;
        }
        Mutation::Byte { at, v } if !b.is_empty() => {
            let i = pos(*at, b.len());
            b[i] = *v;
        }
        Mutation::Word { at, v } if b.len() >= 4 => {
            // Aligned to 4: where pcap and pcapng keep their length fields.
            let i = pos(*at, b.len() - 3) & !3;
            b[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        Mutation::Truncate { at } => {
            let n = pos(*at, b.len() + 1);
            b.truncate(n);
        }
        Mutation::Cut { at, len } if !b.is_empty() => {
            let i = pos(*at, b.len());
            let e = (i + *len as usize).min(b.len());
            b.drain(i..e);
        }
        Mutation::Dup { at, len } if !b.is_empty() => {
            let i = pos(*at, b.len());
            let e = (i + *len as usize).min(b.len());
            let part = b[i..e].to_vec();
            b.splice(e..e, part);
        }
        Mutation::Insert { at, bytes } => {
            let i = pos(*at, b.len() + 1);
            b.splice(i..i, bytes.iter().copied());
        }
        _ => {}
    }
}

/// The file's bytes, its index's bytes, and the offsets of its records.
fn build(base: &Base) -> (Vec<u8>, Vec<u8>, Vec<usize>) {
    let mut b = Vec::new();
    let be = matches!(base.kind, Kind::NsBe);
    let u32b = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let u16b = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let unit: u64 = if matches!(base.kind, Kind::UsLe) {
        1000
    } else {
        1
    };
    match base.kind {
        Kind::Ng => {
            // SHB (28 bytes), IDB (20 bytes + if_tsresol option = 32).
            b.extend(0x0a0d_0d0au32.to_le_bytes());
            b.extend(28u32.to_le_bytes());
            b.extend(0x1a2b_3c4du32.to_le_bytes());
            b.extend(1u16.to_le_bytes());
            b.extend(0u16.to_le_bytes());
            b.extend((-1i64).to_le_bytes());
            b.extend(28u32.to_le_bytes());
            b.extend(1u32.to_le_bytes());
            b.extend(32u32.to_le_bytes());
            b.extend(1u16.to_le_bytes());
            b.extend(0u16.to_le_bytes());
            b.extend(262_144u32.to_le_bytes());
            b.extend(9u16.to_le_bytes()); // if_tsresol
            b.extend(1u16.to_le_bytes());
            b.extend([9u8, 0, 0, 0]);
            b.extend(0u32.to_le_bytes()); // opt_endofopt
            b.extend(32u32.to_le_bytes());
        }
        _ => {
            let magic = if unit == 1000 {
                0xa1b2_c3d4u32
            } else {
                0xa1b2_3c4d
            };
            b.extend(u32b(magic));
            b.extend(u16b(2));
            b.extend(u16b(4));
            b.extend([0u8; 8]);
            b.extend(u32b(262_144));
            b.extend(u32b(1));
        }
    }
    let mut ts = T0;
    let mut offsets = Vec::new();
    let mut idx = index::MAGIC_V1.to_vec();
    idx.extend(32u32.to_le_bytes());
    idx.extend(0u32.to_le_bytes());
    let mut entry: Option<(u64, u64, u64, u64)> = None;
    for (k, &(len, extra, gap)) in base.recs.iter().enumerate() {
        ts += gap as u64 * unit;
        let t = ts / unit * unit;
        let off = b.len() as u64;
        offsets.push(b.len());
        // Real Ethernet/IPv4/UDP frames where long enough (the flow sets of
        // a format-2 index then hold something), else arbitrary bytes.
        let data: Vec<u8> = if len as usize >= wiretape::capture::frames::MIN_LEN {
            wiretape::capture::frames::build(k as u64, len as usize, (k % 5) as u16)
        } else {
            (0..len).map(|i| (i as u8) ^ (k as u8)).collect()
        };
        // No frame is 0 bytes long on the wire (the walker takes a 0/0
        // record header for zero padding, not a record).
        let wire = (len as u32 + extra as u32).max(1);
        match base.kind {
            Kind::Ng => {
                let padded = (len as usize).div_ceil(4) * 4;
                let total = (32 + padded) as u32;
                b.extend(6u32.to_le_bytes());
                b.extend(total.to_le_bytes());
                b.extend(0u32.to_le_bytes());
                b.extend(((t >> 32) as u32).to_le_bytes());
                b.extend((t as u32).to_le_bytes());
                b.extend((len as u32).to_le_bytes());
                b.extend(wire.to_le_bytes());
                b.extend(&data);
                b.extend(vec![0u8; padded - len as usize]);
                b.extend(total.to_le_bytes());
            }
            _ => {
                b.extend(u32b((t / 1_000_000_000) as u32));
                b.extend(u32b(((t % 1_000_000_000) / unit) as u32));
                b.extend(u32b(len as u32));
                b.extend(u32b(wire));
                b.extend(&data);
            }
        }
        let e = entry.get_or_insert((off, t, t, 0));
        e.2 = t;
        e.3 += 1;
        if e.3 as usize == base.per_entry {
            let (o, f, l, c) = entry.take().unwrap();
            for v in [o, f, l, c] {
                idx.extend(v.to_le_bytes());
            }
        }
    }
    if let Some((o, f, l, c)) = entry {
        for v in [o, f, l, c] {
            idx.extend(v.to_le_bytes());
        }
    }
    (b, idx, offsets)
}

/// Our name (so extract's planner uses the index).
fn our_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Ng => "wt-eth0-q0-20261122T101000.000000000Z.pcapng",
        _ => "wt-eth0-q0-20261122T101000.000000000Z.pcap",
    }
}

/// Writes the (mutated) file and index into a fresh `dir`; their paths.
fn lay_out(
    dir: &Path,
    base: &Base,
    file_muts: &[Mutation],
    idx_muts: &[Mutation],
) -> (PathBuf, PathBuf) {
    let (mut b, mut idx, recs) = build(base);
    let f = dir.join(our_name(base.kind));
    let i = index::path_for(&f);
    if base.v2 {
        // Format 2 as the writer makes it: rebuilt from the intact file.
        std::fs::write(&f, &b).unwrap();
        wiretape::storage::index::rebuild(&f, 512).unwrap();
        idx = std::fs::read(&i).unwrap();
    }
    let be = matches!(base.kind, Kind::NsBe);
    for m in file_muts {
        mutate(&mut b, m, &recs, be);
    }
    // Index entries are 32 bytes after a 16-byte header: their words.
    let entries: Vec<usize> = (16..idx.len()).step_by(32).collect();
    for m in idx_muts {
        mutate(&mut idx, m, &entries, false);
    }
    std::fs::write(&f, &b).unwrap();
    std::fs::write(&i, &idx).unwrap();
    (f, i)
}

/// Records a reader gets before its first error (count, and the error).
fn read_records(p: &Path) -> (u64, Option<String>) {
    let mut r = match PcapReader::open(p) {
        Ok(r) => r,
        Err(e) => return (0, Some(e.to_string())),
    };
    let mut rec = Record::default();
    let mut n = 0;
    loop {
        match r.next_into(&mut rec) {
            Ok(true) => {
                n += 1;
                assert!(
                    rec.data.len() <= 262_144 + 65_536,
                    "a record of {} bytes",
                    rec.data.len()
                );
            }
            Ok(false) => return (n, None),
            Err(e) => return (n, Some(e.to_string())),
        }
    }
}

fn muts() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 0..6)
}

proptest! {
    #![proptest_config(config())]

    /// `info` and the index reader.
    #[test]
    fn info_and_index_reader_never_panic(base in base(), fm in muts(), im in muts()) {
        let (dir, slot) = scratch_once("info");
        let _c = Case::start(slot, &dir);
        let (f, i) = lay_out(&dir, &base, &fm, &im);
        if let Ok(info) = FileInfo::scan(&f) {
            // A clean scan agrees with a record-by-record read.
            let (n, err) = read_records(&f);
            prop_assert!(err.is_none());
            prop_assert_eq!(n, info.packets);
        }
        if let Ok(es) = index::read(&i) {
            prop_assert!(es.len() <= 1 + std::fs::metadata(&i).unwrap().len() as usize / 32);
        }
    }

    /// `repair`: Ok means a file that reads to its end.
    #[test]
    fn repair_leaves_a_readable_file_or_says_why(base in base(), fm in muts()) {
        let (dir, slot) = scratch_once("repair");
        let _c = Case::start(slot, &dir);
        let (f, _) = lay_out(&dir, &base, &fm, &[]);
        if let Ok(r) = repair::repair(&f) {
            if r.removed {
                // No complete header, so nothing in it.
                prop_assert!(!f.exists());
                prop_assert_eq!(r.records, 0);
                return Ok(());
            }
            prop_assert_eq!(std::fs::metadata(&f).unwrap().len(), r.len_after);
            let (n, err) = read_records(&f);
            prop_assert!(err.is_none(), "repaired, yet: {:?}", err);
            prop_assert_eq!(n, r.records);
            // Idempotent.
            let again = repair::repair(&f).unwrap();
            prop_assert_eq!(again.trimmed(), 0);
        }
    }

    /// `replay`'s source: as many frames as the reader reads, each as long
    /// as it said.
    #[test]
    fn replay_source_never_panics(base in base(), fm in muts()) {
        use wiretape::capture::tx::Source;
        let (dir, slot) = scratch_once("replay");
        let _c = Case::start(slot, &dir);
        let (f, _) = lay_out(&dir, &base, &fm, &[]);
        let (n, _) = read_records(&f);
        if let Ok(mut s) = wiretape::pipeline::ReplaySource::open(&f, 1) {
            let mut buf = vec![0u8; 1 << 20];
            let mut k = 0u64;
            while let Some((len, _due)) = s.next() {
                prop_assert!(len <= buf.len());
                s.fill(&mut buf[..len], T0);
                k += 1;
                prop_assert!(k <= n);
            }
            prop_assert_eq!(k, n);
        }
    }

    /// `extract`: planner and merge over the mutated file and index.
    #[test]
    fn extract_keeps_to_its_window(base in base(), fm in muts(), im in muts(),
                                   from in 0u64..200_000_000, span in 0u64..200_000_000,
                                   open_from: bool, open_to: bool) {
        let (dir, slot) = scratch_once("extract");
        let _c = Case::start(slot, &dir);
        let (f, _) = lay_out(&dir, &base, &fm, &im);
        let window = Window {
            from_ns: (!open_from).then_some(T0 + from),
            to_ns: (!open_to).then_some(T0 + from + span + 1),
        };
        for input in [dir.clone(), f.clone()] {
            let Ok(plan) = extract::plan(&[input], window, None, &Default::default()) else { continue };
            let mut m = Merge::new(plan, 1, |_: &[u8], _: u32, _: u64| true);
            let mut k = 0u64;
            let most = std::fs::metadata(&f).unwrap().len() / 16 + 1;
            while let Some(fr) = m.next() {
                prop_assert!(window.contains(fr.ts_ns), "{} outside {:?}", fr.ts_ns, window);
                k += 1;
                prop_assert!(k <= most, "more frames than the file can hold");
            }
            m.finish();
        }
    }

    /// The index rebuilt from a mutated file adds up to what the reader reads.
    #[test]
    fn index_rebuild_agrees_with_the_reader(base in base(), fm in muts(), block in 64u64..4096) {
        let (dir, slot) = scratch_once("idx");
        let _c = Case::start(slot, &dir);
        let (f, i) = lay_out(&dir, &base, &fm, &[]);
        if wiretape::storage::index::rebuild(&f, block).is_ok() {
            let es = index::read(&i).unwrap();
            let (n, err) = read_records(&f);
            if err.is_none() {
                prop_assert_eq!(es.iter().map(|e| e.count).sum::<u64>(), n);
            }
        }
    }
}

/// One scratch directory per test (proptest runs a test's cases in turn).
fn scratch_once(tag: &'static str) -> (PathBuf, usize) {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static DIRS: OnceLock<Mutex<HashMap<&'static str, (PathBuf, usize)>>> = OnceLock::new();
    let m = DIRS.get_or_init(|| Mutex::new(HashMap::new()));
    m.lock()
        .unwrap()
        .entry(tag)
        .or_insert_with(|| scratch(tag))
        .clone()
}

/// The unmutated files read back whole by every reader (the properties
/// above are not vacuous: without damage everything is found).
#[test]
fn unmutated_files_read_back_whole() {
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let (dir, slot) = scratch("whole");
    runner
        .run(&base(), |base| {
            let _c = Case::start(slot, &dir);
            let (f, i) = lay_out(&dir, &base, &[], &[]);
            let n = base.recs.len() as u64;
            let info = FileInfo::scan(&f).unwrap();
            prop_assert_eq!(info.packets, n);
            let es = index::read(&i).unwrap();
            prop_assert_eq!(es.iter().map(|e| e.count).sum::<u64>(), n);
            let plan = extract::plan(
                std::slice::from_ref(&dir),
                Window::default(),
                None,
                &Default::default(),
            )
            .unwrap();
            let mut m = Merge::new(plan, 1, |_: &[u8], _: u32, _: u64| true);
            let mut k = 0;
            while m.next().is_some() {
                k += 1;
            }
            prop_assert_eq!(k, n);
            prop_assert_eq!(repair::repair(&f).unwrap().trimmed(), 0);
            Ok(())
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
