//! The one naming scheme of wiretape's files: made, parsed and listed here
//! and nowhere else.
//!
//! A capture file is `<prefix>-<iface>-q<queue>-<YYYYMMDDTHHMMSS.nnnnnnnnnZ>.<ext>`
//! (`ext` = `pcap` or `pcapng`), the time being the UTC stamp of its first
//! frame, so names sort by time. Its sidecar indexes are `<file>.idx` and
//! `<file>.kdx`, its session table `<file>.sessions.parquet`.
//! Retention deletes only names that [`parse`] accepts.

use crate::kept::Kept;
use crate::pcap::Format;
use crate::ReadOptions;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The file name of `queue`'s capture of `ifname` starting at `start_ns` (UTC).
pub fn file_name(prefix: &str, ifname: &str, queue: u32, start_ns: u64, format: Format) -> String {
    format!(
        "{prefix}-{ifname}-q{queue}-{}.{}",
        wiretape_timestamp::format_compact(start_ns),
        format.extension()
    )
}

/// The file name of a dump of the time-travel ring of `ifname` (all queues
/// merged) whose first frame is stamped `first_ns` (UTC):
/// `<prefix>-<iface>-dump-<YYYYMMDDTHHMMSS.nnnnnnnnnZ>.<ext>`; `n` > 1 adds
/// `-<n>` (a second dump with the same first frame). Not a queue's series:
/// [`parse`] refuses it, so retention never deletes a dump.
pub fn dump_name(prefix: &str, ifname: &str, first_ns: u64, n: u32, format: Format) -> String {
    let extra = if n > 1 {
        format!("-{n}")
    } else {
        String::new()
    };
    format!(
        "{prefix}-{ifname}-dump-{}{extra}.{}",
        wiretape_timestamp::format_compact(first_ns),
        format.extension()
    )
}

/// The extensions of our capture files: plain, compressed
/// ([`crate::compress`]), and either encrypted ([`crate::crypt`]).
pub const EXTENSIONS: [&str; 12] = [
    "pcap",
    "pcapng",
    "pcap.lz4",
    "pcapng.lz4",
    "pcap.zst",
    "pcapng.zst",
    "pcap.age",
    "pcapng.age",
    "pcap.lz4.age",
    "pcapng.lz4.age",
    "pcap.zst.age",
    "pcapng.zst.age",
];

/// `name` without its capture extension, and the extension (`pcap`,
/// `pcapng`, or either with `.lz4` / `.zst`, and any of those with `.age`).
fn split_extension(name: &str) -> Option<(&str, &'static str)> {
    EXTENSIONS.iter().find_map(|e| {
        let r = name.strip_suffix(e)?.strip_suffix('.')?;
        Some((r, *e))
    })
}

/// The parts of one of our file names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name<'a> {
    /// The interface.
    pub ifname: &'a str,
    /// The RX queue.
    pub queue: u32,
    /// The UTC start, `YYYYMMDDTHHMMSS.nnnnnnnnnZ` (sorts by time).
    pub start: &'a str,
    /// `pcap` or `pcapng`, maybe with `.lz4` / `.zst` ([`EXTENSIONS`]).
    pub extension: &'a str,
}

/// Is `name` one of ours for `prefix`? Its parts, if so.
pub fn parse<'a>(name: &'a str, prefix: &str) -> Option<Name<'a>> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let (rest, extension) = split_extension(rest)?;
    let (head, ts) = rest.rsplit_once('-')?;
    let (ifname, q) = head.rsplit_once('-')?;
    let q = q.strip_prefix('q')?;
    if ifname.is_empty() || q.is_empty() || !q.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let queue = q.parse().ok()?;
    let b = ts.as_bytes();
    let ok = b.len() == 26
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'.'
        && b[16..25].iter().all(u8::is_ascii_digit)
        && b[25] == b'Z';
    ok.then_some(Name {
        ifname,
        queue,
        start: ts,
        extension,
    })
}

/// One of our file names, whatever its prefix: what [`parse_any`] finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnyName<'a> {
    /// `<prefix>-<iface>-q<N>`: the files of one queue of one recorder
    /// (rotated files and later runs share it). Prefix and interface are
    /// not told apart (either may hold a '-').
    pub series: &'a str,
    /// The RX queue.
    pub queue: u32,
    /// The UTC start, `YYYYMMDDTHHMMSS.nnnnnnnnnZ`: the stamp of the file's
    /// first frame.
    pub start: &'a str,
    /// `pcap` or `pcapng`, maybe with `.lz4` / `.zst` ([`EXTENSIONS`]).
    pub extension: &'a str,
}

impl AnyName<'_> {
    /// The start as UTC ns since the epoch (the first frame's stamp,
    /// before a µs file cut it to its microsecond).
    pub fn start_ns(&self) -> Option<u64> {
        compact_ns(self.start)
    }
}

/// Is `name` named like wiretape's files (`<prefix>-<iface>-q<N>-<UTC>.pcap[ng]`,
/// any non-empty prefix)? Its parts, if so. What `extract` reads in a directory.
pub fn parse_any(name: &str) -> Option<AnyName<'_>> {
    let (rest, extension) = split_extension(name)?;
    let (series, ts) = rest.rsplit_once('-')?;
    let (head, q) = series.rsplit_once('-')?;
    let (prefix, ifname) = head.split_once('-')?;
    if prefix.is_empty() || ifname.is_empty() {
        return None;
    }
    let parsed = parse(name, prefix)?;
    (parsed.start == ts).then_some(AnyName {
        series,
        queue: q[1..].parse().ok()?,
        start: ts,
        extension,
    })
}

/// `YYYYMMDDTHHMMSS.nnnnnnnnnZ` (as [`parse`] checks it) to UTC ns.
fn compact_ns(ts: &str) -> Option<u64> {
    let b = ts.get(..26)?;
    let rfc = format!(
        "{}-{}-{}T{}:{}:{}{}",
        &b[0..4],
        &b[4..6],
        &b[6..8],
        &b[9..11],
        &b[11..13],
        &b[13..15],
        &b[15..26]
    );
    wiretape_timestamp::parse_time(&rfc, 0).ok()
}

/// Files named like ours ([`parse_any`]: any prefix, or only `prefix`'s
/// when given) in `dir`, regular files only, oldest first (by the start in
/// the name, then the path). Without a prefix, a Stenographer store in `dir`
/// counts too ([`crate::steno::layout`]: a thread directory, its parent, a
/// packets directory): stenotype's files after ours, packets directory by
/// packets directory, each oldest first. Err: `dir` cannot be read.
/// Every directory is listed afresh: a long-running reader keeps them
/// with [`ReadOptions::list_any`] ([`ReadOptions::with_kept_listings`]).
pub fn list_any(dir: &Path, prefix: Option<&str>) -> std::io::Result<Vec<PathBuf>> {
    list_any_in(dir, prefix, None)
}

/// [`list_any`], listings kept where `kept` says.
pub(crate) fn list_any_in(
    dir: &Path,
    prefix: Option<&str>,
    kept: Option<&Kept>,
) -> std::io::Result<Vec<PathBuf>> {
    let mut v = list_ours(dir, prefix, kept)?;
    if prefix.is_none() {
        if let crate::steno::Layout::Packets(dirs) = crate::steno::layout_in(dir, kept) {
            for d in dirs {
                v.extend(crate::steno::list_in(&d, kept)?);
            }
        }
    }
    Ok(v)
}

fn list_ours(
    dir: &Path,
    prefix: Option<&str>,
    kept: Option<&Kept>,
) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<(String, PathBuf)> = Vec::new();
    for name in crate::steno::dir_names(dir, kept)? {
        let path = dir.join(&name);
        let Ok(name) = name.into_string() else {
            continue;
        };
        let start = match prefix {
            Some(p) => parse(&name, p).map(|n| n.start.to_string()),
            None => parse_any(&name).map(|n| n.start.to_string()),
        };
        let Some(start) = start else { continue };
        // Follows symlinks: a link to a capture is read like the capture.
        if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            v.push((start, path));
        }
    }
    v.sort();
    Ok(v.into_iter().map(|(_, p)| p).collect())
}

/// The path a capture's sidecars are named after (before their suffix):
/// the capture itself, or for one of Stenographer's files with a sidecar
/// directory `steno_dir` ([`ReadOptions::steno_sidecar_dir`]), a file
/// directly in that directory named after the capture's absolute path
/// ([`flat_name`]). A capture whose sidecars are only in the layout
/// before (`<dir>/<absolute path>`, a directory per path component) gets
/// that old path, so an index built then keeps being read; `wiretape
/// index` moves it to the flat name ([`migrate_steno_sidecars`]).
fn sidecar_base(
    capture: &Path,
    steno_dir: Option<&Path>,
    suffix: &str,
    kept: Option<&Kept>,
) -> PathBuf {
    let (flat, deep) = sidecar_bases(capture, steno_dir, kept);
    match deep {
        Some(deep) if !with(&flat, suffix).exists() && with(&deep, suffix).exists() => deep,
        _ => flat,
    }
}

/// The paths a capture's sidecars may be named after ([`sidecar_base`]):
/// the current layout's, and for one of Stenographer's files with a
/// sidecar directory, the old layout's.
fn sidecar_bases(
    capture: &Path,
    steno_dir: Option<&Path>,
    kept: Option<&Kept>,
) -> (PathBuf, Option<PathBuf>) {
    match steno_dir {
        Some(d) if is_steno(capture) => {
            let abs = steno_abs(capture, kept);
            (d.join(flat_name(&abs)), Some(deep_base(d, &abs)))
        }
        _ => (capture.to_owned(), None),
    }
}

/// Where a capture's sidecar with `suffix` is looked for: the path
/// [`with_suffix`] gives when it is there, and (one of Stenographer's
/// files with a sidecar directory) the old layout's, which it gives when
/// only that one is there. A reader that opens the first and falls back
/// to the second when the first is not found opens what [`with_suffix`]
/// names, with one `stat` where the sidecar is in the current layout.
pub(crate) fn sidecar_choices(
    capture: &Path,
    suffix: &str,
    steno_dir: Option<&Path>,
    kept: Option<&Kept>,
) -> (PathBuf, Option<PathBuf>) {
    let (flat, deep) = sidecar_bases(capture, steno_dir, kept);
    (with(&flat, suffix), deep.map(|d| with(&d, suffix)))
}

/// Whether `capture` is named as stenotype names its files.
pub(crate) fn is_steno(capture: &Path) -> bool {
    capture
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(crate::steno::is_file_name)
}

/// `capture`'s absolute path, its directory's symbolic links resolved:
/// the directory resolved once and kept (in `kept`, the reader's
/// [`ReadOptions`]; resolved every time without) by its (device, inode), so that a
/// query over a store's files costs one `stat` of their directory per
/// file, not a `readlink` per path component per sidecar (ten and more
/// each; a cold query over a store of a few files made 250 of them).
/// The directory's kept resolution is used while the path still names
/// the same directory (a link above it moved elsewhere resolves anew).
/// The file's own name is kept as given: a Stenographer file is a file in
/// its packets directory, not a link.
fn steno_abs(capture: &Path, kept: Option<&Kept>) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let whole = || {
        std::fs::canonicalize(capture)
            .or_else(|_| std::path::absolute(capture))
            .unwrap_or_else(|_| capture.to_owned())
    };
    let (Some(dir), Some(name)) = (capture.parent(), capture.file_name()) else {
        return whole();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(id) = std::fs::metadata(dir).map(|m| (m.dev(), m.ino())) else {
        return whole();
    };
    let resolved = match kept.and_then(|k| k.dir(dir, id)) {
        Some(r) => r,
        None => {
            let Ok(r) = std::fs::canonicalize(dir) else {
                return whole();
            };
            if let Some(k) = kept {
                k.keep_dir(dir, id, &r);
            }
            r
        }
    };
    resolved.join(name)
}

/// The old layout: `<dir>/<absolute path>` (a directory per component).
fn deep_base(dir: &Path, abs: &Path) -> PathBuf {
    dir.join(abs.strip_prefix("/").unwrap_or(abs))
}

fn with(base: &Path, suffix: &str) -> PathBuf {
    let mut p = base.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// Bytes of a flat name at most (before a sidecar's suffix, the longest
/// `.sessions.parquet.tmp`, within a file name's 255).
const FLAT_MAX: usize = 200;

/// The file name, in the sidecar directory, of the sidecars of the
/// Stenographer file at the absolute path `abs`: the path without its
/// leading `/`, `%` written `%25` and `/` written `%2F` (so
/// `/var/lib/stenographer/thread0/packets/1700000000000000` is
/// `var%2Flib%2Fstenographer%2Fthread0%2Fpackets%2F1700000000000000`):
/// one name per path and back, so two files never share one. A path whose
/// name would pass 200 bytes is named `%H<32 hex digits>-<its file
/// name>` instead, by a 128-bit hash of the path (no escaped name starts
/// with `%H`: an escaped `%` is always `%25`).
pub fn flat_name(abs: &Path) -> std::ffi::OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let b = abs.as_os_str().as_bytes();
    let b = b.strip_prefix(b"/").unwrap_or(b);
    let mut out = Vec::with_capacity(b.len() + 16);
    for &c in b {
        match c {
            b'%' => out.extend_from_slice(b"%25"),
            b'/' => out.extend_from_slice(b"%2F"),
            c => out.push(c),
        }
    }
    if out.len() > FLAT_MAX {
        let name = abs.file_name().map(|n| n.as_bytes()).unwrap_or_default();
        let name = &name[..name.len().min(FLAT_MAX - 35)];
        out = format!("%H{:032x}-", fnv1a128(b)).into_bytes();
        out.extend_from_slice(name);
    }
    std::ffi::OsString::from_vec(out)
}

/// FNV-1a, 128 bits: stable across builds and machines (a name on disk).
fn fnv1a128(b: &[u8]) -> u128 {
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for &c in b {
        h ^= c as u128;
        h = h.wrapping_mul(PRIME);
    }
    h
}

/// Sidecar suffixes, in the order a reader needs them.
const SUFFIXES: [&str; 3] = [".idx", ".kdx", ".sessions.parquet"];

/// Moves the sidecars of Stenographer's file `capture` from the layout
/// before (`<dir>/<absolute path>.idx`, ...) to their flat names in `dir`
/// ([`flat_name`]), where there is none there yet, and removes the old
/// directories left empty. Ok(n): sidecars moved (0: nothing to move).
pub fn migrate_steno_sidecars(capture: &Path, dir: &Path) -> std::io::Result<usize> {
    migrate_in(capture, dir, None)
}

fn migrate_in(capture: &Path, dir: &Path, kept: Option<&Kept>) -> std::io::Result<usize> {
    let abs = steno_abs(capture, kept);
    let deep = deep_base(dir, &abs);
    let flat = dir.join(flat_name(&abs));
    let mut n = 0;
    for s in SUFFIXES {
        let (from, to) = (with(&deep, s), with(&flat, s));
        if from.exists() && !to.exists() {
            std::fs::rename(&from, &to)?;
            n += 1;
        }
    }
    if n > 0 {
        // Old directories, innermost first, while empty (not `dir` itself).
        let mut d = deep.parent();
        while let Some(p) = d.filter(|p| p.starts_with(dir) && *p != dir) {
            if std::fs::remove_dir(p).is_err() {
                break;
            }
            d = p.parent();
        }
    }
    Ok(n)
}

fn with_suffix(
    capture: &Path,
    suffix: &str,
    steno_dir: Option<&Path>,
    kept: Option<&Kept>,
) -> PathBuf {
    with(&sidecar_base(capture, steno_dir, suffix, kept), suffix)
}

/// The sidecar index of a capture file beside it: `<file>.idx` (where a
/// reader looks: [`ReadOptions::index_path`]).
pub fn index_path(capture: &Path) -> PathBuf {
    with_suffix(capture, ".idx", None, None)
}

/// The key index of a capture file beside it: `<file>.kdx`
/// ([`crate::keys`]; a reader's: [`ReadOptions::keys_path`]).
pub fn keys_path(capture: &Path) -> PathBuf {
    with_suffix(capture, ".kdx", None, None)
}

/// The session table of a capture file beside it:
/// `<file>.sessions.parquet` (`wiretape_storage::sessions`; a reader's:
/// [`ReadOptions::sessions_path`]).
pub fn sessions_path(capture: &Path) -> PathBuf {
    with_suffix(capture, ".sessions.parquet", None, None)
}

impl ReadOptions {
    /// The sidecar index of a capture file: `<file>.idx`, or for one of
    /// Stenographer's files with a sidecar directory
    /// ([`ReadOptions::with_steno_sidecar_dir`]) `<dir>/<flat name>.idx`
    /// ([`flat_name`]: its absolute path, escaped into one file name).
    pub fn index_path(&self, capture: &Path) -> PathBuf {
        with_suffix(capture, ".idx", self.steno_sidecar_dir(), Some(self.kept()))
    }

    /// Whether a capture file's sidecar index ([`ReadOptions::index_path`])
    /// is there, as [`ReadOptions::sidecar_exists`] says of it (and kept
    /// open as it keeps one): one `stat` where it is in the current
    /// layout (the path, then whether it exists, were two).
    pub fn index_exists(&self, capture: &Path) -> bool {
        let (first, old) =
            sidecar_choices(capture, ".idx", self.steno_sidecar_dir(), Some(self.kept()));
        self.sidecar_exists(&first) || old.is_some_and(|o| self.sidecar_exists(&o))
    }

    /// The key index of a capture file: `<file>.kdx` (Stenographer's
    /// files: as [`ReadOptions::index_path`]).
    pub fn keys_path(&self, capture: &Path) -> PathBuf {
        with_suffix(capture, ".kdx", self.steno_sidecar_dir(), Some(self.kept()))
    }

    /// The session table of a capture file: `<file>.sessions.parquet`
    /// (Stenographer's files: as [`ReadOptions::index_path`]).
    pub fn sessions_path(&self, capture: &Path) -> PathBuf {
        with_suffix(
            capture,
            ".sessions.parquet",
            self.steno_sidecar_dir(),
            Some(self.kept()),
        )
    }

    /// [`migrate_steno_sidecars`] into these options' sidecar directory
    /// ([`ReadOptions::with_steno_sidecar_dir`]; none: Ok(0)), the
    /// capture's directory resolved once for these options.
    pub fn migrate_steno_sidecars(&self, capture: &Path) -> std::io::Result<usize> {
        match self.steno_sidecar_dir() {
            Some(dir) => migrate_in(capture, dir, Some(self.kept())),
            None => Ok(0),
        }
    }
}

/// Bytes of a capture file's sidecars (its `.idx`, `.kdx` and
/// `.sessions.parquet`).
pub fn sidecar_bytes(capture: &Path) -> u64 {
    [
        index_path(capture),
        keys_path(capture),
        sessions_path(capture),
    ]
    .iter()
    .filter_map(|p| std::fs::metadata(p).ok())
    .map(|m| m.len())
    .sum()
}

/// Deletes a capture file's sidecars (its `.idx`, `.kdx` and
/// `.sessions.parquet`), if there.
pub fn remove_sidecars(capture: &Path) {
    let _ = std::fs::remove_file(index_path(capture));
    let _ = std::fs::remove_file(keys_path(capture));
    let _ = std::fs::remove_file(sessions_path(capture));
}

/// One of our files in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OurFile {
    /// Where it is.
    pub path: PathBuf,
    /// The UTC start in the name (`YYYYMMDDTHHMMSS.nnnnnnnnnZ`): sorts by time.
    pub start: String,
    /// Bytes of the file and its sidecar.
    pub bytes: u64,
    /// Last write.
    pub modified: SystemTime,
}

/// Our files (regular files named by [`parse`]) in `dir`, oldest first.
pub fn list(dir: &Path, prefix: &str) -> Vec<OurFile> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<OurFile> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let start = parse(&name, prefix)?.start.to_string();
            let md = e.metadata().ok()?;
            if !md.is_file() {
                return None;
            }
            let path = e.path();
            let side = sidecar_bytes(&path);
            Some(OurFile {
                path,
                start,
                bytes: md.len() + side,
                modified: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            })
        })
        .collect();
    v.sort_by(|a, b| a.start.cmp(&b.start).then(a.path.cmp(&b.path)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_names_are_not_a_queue_series() {
        let n = dump_name(
            "wiretape",
            "eth0",
            1_763_806_210_123_456_789,
            1,
            Format::PcapNs,
        );
        assert_eq!(n, "wiretape-eth0-dump-20251122T101010.123456789Z.pcap");
        assert!(parse(&n, "wiretape").is_none() && parse_any(&n).is_none());
        let n2 = dump_name(
            "wiretape",
            "eth0",
            1_763_806_210_123_456_789,
            2,
            Format::PcapNg,
        );
        assert!(n2.ends_with("Z-2.pcapng"), "{n2}");
    }

    #[test]
    fn made_names_parse_back() {
        let n = file_name("wt", "my-if", 12, 1_763_806_210_123_456_789, Format::PcapNg);
        assert_eq!(n, "wt-my-if-q12-20251122T101010.123456789Z.pcapng");
        let p = parse(&n, "wt").unwrap();
        assert_eq!(
            (p.ifname, p.queue, p.start, p.extension),
            ("my-if", 12, "20251122T101010.123456789Z", "pcapng")
        );
        assert_eq!(
            index_path(Path::new("/d/x.pcap")),
            PathBuf::from("/d/x.pcap.idx")
        );
    }

    #[test]
    fn any_prefix() {
        let ts = "20251122T101010.123456789Z";
        let name = format!("my-pre-fix-eth-0-q3-{ts}.pcapng");
        let n = parse_any(&name).unwrap();
        assert_eq!(
            (n.series, n.queue, n.start, n.extension),
            ("my-pre-fix-eth-0-q3", 3, ts, "pcapng")
        );
        assert_eq!(n.start_ns(), Some(1_763_806_210_123_456_789));
        let name = format!("trace-file-q0-{ts}.pcap");
        let n = parse_any(&name).unwrap();
        assert_eq!((n.series, n.queue), ("trace-file-q0", 0));
        for bad in [
            format!("eth0-q0-{ts}.pcap"),
            format!("-eth0-q0-{ts}.pcap"),
            format!("wt-eth0-q-{ts}.pcap"),
            format!("wt-eth0-q0-{ts}.pcap.idx"),
            "wt-eth0-q0-20261122T101010Z.pcap".into(),
            "trace.pcap".into(),
        ] {
            assert_eq!(parse_any(&bad), None, "{bad}");
        }
    }

    #[test]
    fn names() {
        let ts = "20261122T101010.123456789Z";
        assert_eq!(
            parse(&format!("wt-eth0-q0-{ts}.pcap"), "wt").map(|n| n.start),
            Some(ts)
        );
        assert_eq!(
            parse(&format!("wt-my-if-q12-{ts}.pcapng"), "wt").map(|n| n.start),
            Some(ts)
        );
        for bad in [
            format!("wt-eth0-q0-{ts}.pcap.idx"),
            format!("other-eth0-q0-{ts}.pcap"),
            format!("wt-eth0-qx-{ts}.pcap"),
            format!("wt-eth0-q0-{ts}.txt"),
            "wt-eth0-q0-20261122T101010Z.pcap".into(),
            format!("wt--q0-{ts}.pcap"),
            format!("wtx-eth0-q0-{ts}.pcap"),
        ] {
            assert_eq!(parse(&bad, "wt"), None, "{bad}");
        }
    }

    #[test]
    fn a_steno_files_absolute_path_follows_its_directorys_link() {
        let root = std::env::temp_dir().join(format!("wt-steno-abs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (a, b) = (root.join("a"), root.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let link = root.join("packets");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let f = link.join("1795813946878311");
        let kept = Kept::default();
        let k = Some(&kept);
        assert_eq!(steno_abs(&f, k), root.join("a/1795813946878311"));
        // Asked again: the kept resolution, the same answer.
        assert_eq!(steno_abs(&f, k), root.join("a/1795813946878311"));
        assert_eq!(kept.dirs.lock().unwrap().len(), 1);
        // The link now names another directory: resolved anew, with or
        // without what was kept.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&b, &link).unwrap();
        assert_eq!(steno_abs(&f, k), root.join("b/1795813946878311"));
        assert_eq!(steno_abs(&f, None), root.join("b/1795813946878311"));
        // A relative path in the current directory's terms.
        let here = std::env::current_dir().unwrap();
        assert_eq!(
            steno_abs(Path::new("1795813946878311"), k),
            std::fs::canonicalize(&here)
                .unwrap()
                .join("1795813946878311")
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A Stenographer capture under `<d>/steno/thread0/packets`, a sidecar
    /// directory `<d>/side` (not made) and the old layout's base for the
    /// capture in it (`<side>/<absolute path>`, its parent made).
    struct SidecarTree {
        d: PathBuf,
        cap: PathBuf,
        side: PathBuf,
        abs: PathBuf,
        deep: PathBuf,
    }

    impl SidecarTree {
        fn new(tag: &str) -> SidecarTree {
            let d = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            let pk = d.join("steno/thread0/packets");
            std::fs::create_dir_all(&pk).unwrap();
            let cap = pk.join("1700000000000000");
            std::fs::write(&cap, b"x").unwrap();
            let side = d.join("side");
            let abs = std::fs::canonicalize(&cap).unwrap();
            let deep = side.join(abs.strip_prefix("/").unwrap());
            std::fs::create_dir_all(deep.parent().unwrap()).unwrap();
            SidecarTree {
                d,
                cap,
                side,
                abs,
                deep,
            }
        }
    }

    #[test]
    fn steno_sidecars_are_flat_one_name_per_path_and_the_old_layout_moves() {
        let n = |p: &str| flat_name(Path::new(p)).into_string().unwrap();
        assert_eq!(
            n("/var/lib/stenographer/thread0/packets/1700000000000000"),
            "var%2Flib%2Fstenographer%2Fthread0%2Fpackets%2F1700000000000000"
        );
        // `%` is escaped too: `a%2Fb/1` and `a/b/1` do not meet.
        assert_eq!(n("/a%2Fb/1"), "a%252Fb%2F1");
        assert_ne!(n("/a%2Fb/1"), n("/a/b/1"));
        // A long path: a hash and the file name, within a file name's bytes.
        let long = format!("/{}/thread0/packets/1700000000000000", "d".repeat(300));
        let h = n(&long);
        assert!(
            h.starts_with("%H") && h.ends_with("-1700000000000000"),
            "{h}"
        );
        assert!(h.len() <= FLAT_MAX);
        assert_ne!(h, n(&long.replace("/thread0", "/thread1")));

        let SidecarTree {
            d,
            cap,
            side,
            abs,
            deep,
        } = SidecarTree::new("wt-flat");
        // An index made before: `<side>/<absolute path>.kdx` (and `.idx`).
        std::fs::write(with(&deep, ".kdx"), b"old kdx").unwrap();
        std::fs::write(with(&deep, ".idx"), b"old idx").unwrap();
        let opts = ReadOptions::new().with_steno_sidecar_dir(&side);
        // Read where it is until moved ...
        assert_eq!(opts.keys_path(&cap), with(&deep, ".kdx"));
        assert_eq!(
            opts.sessions_path(&cap),
            side.join(format!("{}.sessions.parquet", n(abs.to_str().unwrap())))
        );
        assert_eq!(migrate_steno_sidecars(&cap, &side).unwrap(), 2);
        // ... then in one directory, the old tree gone, nothing lost.
        let flat = side.join(flat_name(&abs));
        assert_eq!(opts.keys_path(&cap), with(&flat, ".kdx"));
        assert_eq!(std::fs::read(opts.keys_path(&cap)).unwrap(), b"old kdx");
        assert_eq!(std::fs::read(opts.index_path(&cap)).unwrap(), b"old idx");
        let mut left: Vec<_> = std::fs::read_dir(&side)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                with(Path::new(&flat_name(&abs)), ".idx").into_os_string(),
                with(Path::new(&flat_name(&abs)), ".kdx").into_os_string()
            ]
        );
        assert_eq!(migrate_steno_sidecars(&cap, &side).unwrap(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// The sidecar a reader opens by its choices (the current layout's
    /// path, else the old one's when the first is not found) is the one
    /// `with_suffix` names, and `index_exists` answers as `sidecar_exists`
    /// of `index_path` does, in every state: none, old only, current only,
    /// both; for a server's options (which hold what they find) and plain
    /// ones, and for a file of ours (beside it).
    #[test]
    fn sidecar_choices_find_what_the_paths_name() {
        let SidecarTree {
            d,
            cap,
            side,
            abs,
            deep,
        } = SidecarTree::new("wt-choices");
        let flat = side.join(flat_name(&abs));
        let plain = ReadOptions::new().with_steno_sidecar_dir(&side);
        let server = plain.clone().with_kept_index_pages(1 << 20);
        let opened = |o: &ReadOptions, c: &Path, s: &str| -> Option<PathBuf> {
            let (first, old) = sidecar_choices(c, s, o.steno_sidecar_dir(), Some(o.kept()));
            std::iter::once(first).chain(old).find(|p| p.exists())
        };
        for (old, new) in [(false, false), (true, false), (false, true), (true, true)] {
            for (base, there) in [(&deep, old), (&flat, new)] {
                for s in [".idx", ".kdx"] {
                    let p = with(base, s);
                    if there {
                        std::fs::write(&p, s).unwrap();
                    } else {
                        let _ = std::fs::remove_file(&p);
                    }
                }
            }
            for o in [&plain, &server] {
                let want = o.keys_path(&cap);
                let got = opened(o, &cap, ".kdx");
                assert_eq!(got.clone().unwrap_or(want.clone()), want, "{old} {new}");
                assert_eq!(got.is_some(), old || new);
                let want = o.sidecar_exists(&o.index_path(&cap));
                assert_eq!(o.index_exists(&cap), want, "{old} {new}");
                assert_eq!(want, old || new);
            }
        }
        // Ours: beside the capture, one choice.
        let ours = d.join("wt-20260101T000000.000000000Z.pcap");
        std::fs::write(&ours, b"x").unwrap();
        assert!(!server.index_exists(&ours));
        std::fs::write(with(&ours, ".idx"), b"i").unwrap();
        assert!(server.index_exists(&ours) && plain.index_exists(&ours));
        assert_eq!(
            sidecar_choices(&ours, ".kdx", Some(&side), None),
            (with(&ours, ".kdx"), None)
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
