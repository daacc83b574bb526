//! Stenographer's packet files as inputs, on crafted stores (no
//! Stenographer needed; tests/steno.rs reads the real stenotype's files):
//! a thread directory, its parent and its packets directory read by `info`
//! and `extract` (checked by tcpdump), the dot-file stenotype still writes,
//! `index --index-dir` (and nothing written beside Stenographer's files),
//! `repair` refusing, and the bad inputs: a file cut short, a bad block
//! descriptor, an empty packets directory. Under a second.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape::files::steno::encode_block;
use wiretape_testbed::frames;

const BLOCK: usize = 64 << 10;
const T0: u64 = 1_795_813_946_000_000_000;

/// Frames `from..to`: stamp, bytes (flow = seq % 7: UDP source port 10000 + flow).
fn frames_of(from: u64, to: u64) -> Vec<(u64, Vec<u8>)> {
    (from..to)
        .map(|s| {
            (
                T0 + s * 1_000_117,
                frames::build(s, 60 + (s as usize * 37) % 1400, (s % 7) as u16),
            )
        })
        .collect()
}

/// A stenotype file of `blocks` blocks of `per` frames from frame `first`.
fn steno_file(p: &Path, first: u64, blocks: u64, per: u64) -> Vec<(u64, Vec<u8>)> {
    let all = frames_of(first, first + blocks * per);
    let mut out = Vec::new();
    for (b, ch) in all.chunks(per as usize).enumerate() {
        let refs: Vec<(u64, &[u8])> = ch.iter().map(|(t, d)| (*t, d.as_slice())).collect();
        out.extend(encode_block(&refs, BLOCK, first + b as u64));
    }
    std::fs::write(p, out).unwrap();
    all
}

/// A store as Debian's server lays it out: <root>/thread0/{packets,index}.
/// Two finished files and the dot-file stenotype writes; its leveldb index
/// files are there but not read (garbage here).
fn store(root: &Path) -> (PathBuf, Vec<(u64, Vec<u8>)>) {
    let pk = root.join("thread0/packets");
    std::fs::create_dir_all(&pk).unwrap();
    std::fs::create_dir_all(root.join("thread0/index")).unwrap();
    let mut all = steno_file(&pk.join("1795813946000000"), 0, 3, 40);
    all.extend(steno_file(&pk.join("1795813956000000"), 120, 2, 40));
    all.extend(steno_file(&pk.join(".1795813966000000"), 200, 1, 40));
    for n in ["1795813946000000", "1795813956000000"] {
        std::fs::write(root.join("thread0/index").join(n), b"not leveldb").unwrap();
    }
    (pk, all)
}

/// Every file under `d` (path, length), to see that nothing changed.
fn tree(d: &Path) -> Vec<(PathBuf, u64)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(tree(&p));
        } else {
            v.push((p.clone(), p.metadata().unwrap().len()));
        }
    }
    v.sort();
    v
}

/// tcpdump's reading of a pcap: one line per frame, stamp and bytes.
fn tcpdump(p: &Path, filter: &[&str]) -> Vec<String> {
    let o = Command::new("tcpdump")
        .args(["-nn", "-tt", "--nano", "-x", "-r"])
        .arg(p)
        .args(filter)
        .output()
        .expect("tcpdump");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut frames: Vec<String> = Vec::new();
    for l in text.lines() {
        if l.starts_with('\t') {
            frames.last_mut().unwrap().push_str(l.trim());
        } else {
            frames.push(l.to_string());
        }
    }
    frames
}

/// The frames as tcpdump prints them, from a pcap we write ourselves.
fn expected(frames: &[(u64, Vec<u8>)], dir: &Path, filter: &[&str]) -> Vec<String> {
    let p = dir.join("want.pcap");
    write_ns_pcap(&p, frames);
    tcpdump(&p, filter)
}

#[test]
fn stenographer_stores_are_read_by_info_extract_index_and_left_unchanged() {
    let d = TempDir::new("stenofiles");
    let root = d.path().join("steno");
    let (pk, all) = store(&root);
    let before = tree(&root);
    // info over the thread directory's parent: every file, the dot-file last.
    let (code, out, err) = run_wiretape(None, &["info", "--json", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let n: Vec<u64> = rows
        .iter()
        .map(|r| r["packets"].as_u64().unwrap())
        .collect();
    assert_eq!(n, [120, 80, 40]);
    assert!(rows[2]["file"]
        .as_str()
        .unwrap()
        .ends_with("/.1795813966000000"));
    assert!(rows
        .iter()
        .all(|r| r["format"] == "stenotype (TPACKET_V3 blocks)"));
    assert_eq!(rows[0]["first_ns"], all[0].0);
    // extract from each way of naming the store: all frames, as tcpdump reads them.
    let want = expected(&all, d.path(), &[]);
    assert_eq!(want.len(), 240);
    for input in [root.clone(), root.join("thread0"), pk.clone()] {
        let out = d.path().join("all.pcap");
        let _ = std::fs::remove_file(&out);
        let (code, _, err) = run_wiretape(
            None,
            &[
                "extract",
                input.to_str().unwrap(),
                "-w",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(tcpdump(&out, &[]), want, "extract {}", input.display());
    }
    // A filter (tcpdump's language and Stenographer's): tcpdump agrees.
    let want = expected(&all, d.path(), &["udp", "port", "10003"]);
    assert_eq!(want.len(), (0..240).filter(|s| s % 7 == 3).count());
    // `extract [FLAGS] STORE --steno-query 'port 10003'`: tcpdump's lines.
    let port_10003 = |flags: &[&str]| {
        let sel = d.path().join("sel.pcap");
        let _ = std::fs::remove_file(&sel);
        let mut a = vec!["extract"];
        a.extend(flags);
        a.extend([root.to_str().unwrap(), "--steno-query", "port 10003"]);
        a.extend(["-w", sel.to_str().unwrap()]);
        let (code, _, err) = run_wiretape(None, &a);
        assert_eq!(code, 0, "{err}");
        tcpdump(&sel, &[])
    };
    assert_eq!(port_10003(&[]), want);
    // index without --index-dir: refused, one line per file, nothing written.
    let (code, _, err) = run_wiretape(None, &["index", "-q", root.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("never changes it, nor writes beside it") && err.contains("--index-dir"),
        "{err}"
    );
    assert_eq!(tree(&root), before);
    // With --index-dir: the sidecars there, none beside the files.
    let idx = d.path().join("idx");
    let (code, _, err) = run_wiretape(
        None,
        &[
            "index",
            "-q",
            "--index-dir",
            idx.to_str().unwrap(),
            root.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(tree(&root), before);
    let sidecars = tree(&idx);
    // Flat: one file in DIR per store file, named after its absolute path
    // (`%` as `%25`, `/` as `%2F`), no directory per path component.
    let abs = std::fs::canonicalize(&pk).unwrap();
    let escaped = abs.to_str().unwrap()[1..]
        .replace('%', "%25")
        .replace('/', "%2F");
    assert!(
        sidecars.iter().all(|(s, _)| s.parent() == Some(&*idx)),
        "{sidecars:?}"
    );
    for f in ["1795813946000000", "1795813956000000", ".1795813966000000"] {
        let p = idx.join(format!("{escaped}%2F{f}.idx"));
        assert!(
            sidecars.iter().any(|(s, _)| *s == p),
            "{} in {sidecars:?}",
            p.display()
        );
    }
    // extract by the index: the same frames.
    assert_eq!(port_10003(&["--index-dir", idx.to_str().unwrap()]), want);
    // A time window by the index: exactly the frames in it.
    let rfc = wiretape::timestamp::format_rfc3339;
    let (from, to) = (rfc(all[50].0), rfc(all[130].0));
    let win = d.path().join("win.pcap");
    let (code, _, err) = run_wiretape(
        None,
        &[
            "extract",
            "--index-dir",
            idx.to_str().unwrap(),
            root.to_str().unwrap(),
            "--from",
            &from,
            "--to",
            &to,
            "-w",
            win.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(tcpdump(&win, &[]), expected(&all[50..130], d.path(), &[]));
    // Planned by the index (an entry per MiB of a file: one per file
    // here): the dot-file (frames 200-239) starts after the window, unread.
    assert!(
        err.contains("2 of 3 files read (1 skipped by name or index")
            && err.contains("2 of 3 indexed blocks read"),
        "{err}"
    );
    // repair refuses, one line per file, and changes nothing.
    let (code, _, err) = run_wiretape(None, &["repair", root.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("Stenographer's packet file"))
            .count(),
        3,
        "{err}"
    );
    assert_eq!(tree(&root), before);
}

#[test]
fn a_cut_file_a_bad_descriptor_and_an_empty_packets_directory_are_one_line_each() {
    let d = TempDir::new("stenobad");
    let pk = d.path().join("thread0/packets");
    std::fs::create_dir_all(&pk).unwrap();
    // An empty packets directory: said so.
    let (code, out, err) = run_wiretape(None, &["info", d.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.is_empty());
    assert!(
        err.contains("a Stenographer store without packet files yet"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    // A file cut inside its third block's frames, and one whose second
    // block's descriptor is bad.
    let cut = pk.join("1795813946000000");
    let a = steno_file(&cut, 0, 3, 40);
    let bytes = std::fs::read(&cut).unwrap();
    let at = 2 * BLOCK + 3000;
    std::fs::write(&cut, &bytes[..at]).unwrap();
    let bad = pk.join("1795813956000000");
    let b = steno_file(&bad, 120, 3, 40);
    let mut bytes = std::fs::read(&bad).unwrap();
    bytes[BLOCK] = 0x55;
    std::fs::write(&bad, &bytes).unwrap();
    let out = d.path().join("out.pcap");
    let (code, _, err) = run_wiretape(
        None,
        &[
            "extract",
            d.path().to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("wiretape: damaged:"))
        .collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].contains("1795813946000000") && lines[0].contains("cut short"),
        "{err}"
    );
    assert!(
        lines[1].contains("1795813956000000")
            && lines[1].contains(&format!("at byte {BLOCK}"))
            && lines[1].contains("bad block descriptor"),
        "{err}"
    );
    // The whole frames before each: those of the cut block that are whole,
    // the first block of the bad file.
    let got = tcpdump(&out, &[]);
    let whole = got.len() - 40;
    assert!((80..120).contains(&whole), "{}", got.len());
    let mut want: Vec<(u64, Vec<u8>)> = a[..whole].to_vec();
    want.extend(b[..40].iter().cloned());
    assert_eq!(got, expected(&want, d.path(), &[]));
}

/// Two reader options in one process, side by side (a tool reading one
/// Stenographer store by two teams' indexes): each plans by the indexes
/// in its own sidecar directory and reads every frame. A process-wide
/// directory would have given both the first one's.
#[test]
fn two_sidecar_directories_are_read_side_by_side() {
    use wiretape::files::ReadOptions;
    use wiretape::query::extract::{plan, IndexUse};
    use wiretape::query::{fleet, Merge, Window};
    let d = TempDir::new("stenoopts");
    let root = d.path().join("steno");
    let (_pk, all) = store(&root);
    let before = tree(&root);
    let (a, b) = (d.path().join("idx-a"), d.path().join("idx-b"));
    let oa = ReadOptions::new().with_steno_sidecar_dir(&a);
    let ob = ReadOptions::new().with_steno_sidecar_dir(&b);
    let files = fleet::captures(std::slice::from_ref(&root), None).unwrap();
    assert_eq!(files.len(), 3);
    // A indexes the whole store, B its first file only.
    let fail = &mut |f: &Path, e: &wiretape::storage::StorageError| panic!("{}: {e}", f.display());
    let ra = fleet::rebuild(&files, &oa, false, &mut |_, _| {}, fail);
    let rb = fleet::rebuild(&files[..1], &ob, false, &mut |_, _| {}, fail);
    assert_eq!((ra.files.len(), rb.files.len()), (3, 1));
    assert_eq!(tree(&root), before, "nothing written beside the files");
    for f in &files {
        assert!(oa.index_path(f).starts_with(&a) && oa.index_path(f).exists());
        assert!(ob.index_path(f).starts_with(&b));
    }
    assert!(ob.index_path(&files[0]).exists() && !ob.index_path(&files[1]).exists());
    // Both at once: each plan by its own indexes, every frame and byte read.
    let run = |o: ReadOptions| {
        let root = root.clone();
        std::thread::spawn(move || {
            let p = plan(&[root], Window::default(), None, &o).unwrap();
            let used: Vec<bool> = p.files.iter().map(|f| f.index == IndexUse::Used).collect();
            let mut m = Merge::new(p, wiretape::files::LINKTYPE_ETHERNET, |_: &[u8], _, _| true);
            let (mut frames, mut bytes) = (0u64, 0u64);
            while let Some(f) = m.next() {
                frames += 1;
                bytes += f.data.len() as u64;
            }
            (used, frames, bytes)
        })
    };
    let (ta, tb) = (run(oa.clone()), run(ob.clone()));
    let (ua, fa, ba) = ta.join().unwrap();
    let (ub, fb, bb) = tb.join().unwrap();
    assert_eq!(ua, [true, true, true], "A: every file by its index");
    assert_eq!(ub, [true, false, false], "B: the first file only");
    let want_bytes: u64 = all.iter().map(|(_, d)| d.len() as u64).sum();
    assert_eq!((fa, ba), (all.len() as u64, want_bytes));
    assert_eq!((fb, bb), (all.len() as u64, want_bytes));
}
