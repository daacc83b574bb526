//! Retention: keeping a bounded ring of capture files, the way recorders run
//! for months. Only wiretape's own files are ever deleted: names of the exact
//! form `<prefix>-<iface>-q<N>-<YYYYMMDDTHHMMSS.nnnnnnnnnZ>.pcap[ng]` (what
//! [`wiretape_files::naming::file_name`] makes) in the output directory, with their
//! `.idx` and `.kdx` sidecars and `.sessions.parquet` table; any other file is left
//! alone, whatever its name or age.
//! Files being written are never deleted. Oldest first, by the UTC start
//! time in the name (files of earlier runs with the same prefix included:
//! they are part of the ring); a queue's file still being finished after a
//! rotation holds back that queue's newer files, so that no limit leaves a
//! hole in a queue's history (only the free-space floor and a full disk,
//! emergencies, pass it by).
//!
//! The directory is listed once (the first pass), then kept as a catalogue
//! in memory: the writers report the files they open and close, a pass
//! stats only the files being written (their sizes grow) and deletes from
//! the catalogue's oldest end. A directory of 100,000 files (50,000 ours)
//! took 170-320 ms per pass when every pass listed it, four passes a
//! second; a pass now costs microseconds. Files another process adds or
//! removes are seen at the next full listing, every [`RESCAN`] (a file
//! that vanished meanwhile is dropped when deleting it fails).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// A limit of the retention, as a deletion's notice names it (the limit
/// that had the file deleted), or of rotation, as the store's notices at
/// opening name it ([`crate::Store::open`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`Policy::keep_files`].
    KeepFiles,
    /// [`Policy::keep_bytes`] and [`VolumeLimits::keep_bytes`].
    KeepBytes,
    /// [`Policy::keep_age`].
    KeepAge,
    /// [`Policy::min_free`] and [`VolumeLimits::min_free`].
    MinFree,
    /// Deleting the oldest files on a full disk and going on
    /// ([`crate::StorageConfig::on_full_rotate`]).
    OnFullRotate,
    /// A file's size cap ([`crate::StorageConfig::rotate_size`]).
    RotateSize,
    /// A file's time cap ([`crate::StorageConfig::rotate_time`]).
    RotateTime,
}

impl Limit {
    const ALL: [Limit; 7] = [
        Limit::KeepFiles,
        Limit::KeepBytes,
        Limit::KeepAge,
        Limit::MinFree,
        Limit::OnFullRotate,
        Limit::RotateSize,
        Limit::RotateTime,
    ];
}

impl std::fmt::Display for Limit {
    /// The field's name (`keep_bytes`, `on_full_rotate`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Limit::KeepFiles => "keep_files",
            Limit::KeepBytes => "keep_bytes",
            Limit::KeepAge => "keep_age",
            Limit::MinFree => "min_free",
            Limit::OnFullRotate => "on_full_rotate",
            Limit::RotateSize => "rotate_size",
            Limit::RotateTime => "rotate_time",
        })
    }
}

/// What the notices of deletions call each [`Limit`]: by default its
/// field's name ([`Limit`]'s `Display`); an embedder names them its own
/// way ([`LimitWords::naming`]; the CLI: its flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitWords([String; Limit::ALL.len()]);

impl Default for LimitWords {
    fn default() -> Self {
        LimitWords::naming(&|l| l.to_string())
    }
}

impl LimitWords {
    /// Each limit called as `name` says.
    pub fn naming(name: &dyn Fn(Limit) -> String) -> Self {
        LimitWords(Limit::ALL.map(name))
    }

    /// What `l` is called.
    pub fn of(&self, l: Limit) -> &str {
        let i = Limit::ALL.iter().position(|x| *x == l).unwrap_or(0);
        &self.0[i]
    }
}

/// Free space to keep on the output filesystem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MinFree {
    /// At least this many bytes free for unprivileged users (`--min-free 10G`).
    Bytes(u64),
    /// At least this percentage (0 to 100) of the filesystem's size free
    /// (`--min-free 5%`).
    Percent(f64),
}

/// What to keep (all limits together; unset ones do not apply).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Policy {
    /// At most this many of our files.
    pub keep_files: Option<usize>,
    /// At most this many bytes in our files (sidecars included), all
    /// volumes together.
    pub keep_bytes: Option<u64>,
    /// Files whose last write is older than this go.
    pub keep_age: Option<Duration>,
    /// Delete our oldest files while the filesystem has less free space
    /// (each volume's own, unless [`VolumeLimits::min_free`] sets its own).
    pub min_free: Option<MinFree>,
    /// One volume's own limits (`--keep-bytes DIR=SIZE`, `--min-free
    /// DIR=SIZE|PCT%`), by its directory exactly as in the store's list
    /// ([`Retention::dirs`]); a volume not named has only the store's.
    pub volumes: BTreeMap<PathBuf, VolumeLimits>,
}

/// The limits of one volume of a store, where a disk is smaller than the
/// others.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumeLimits {
    /// At most this many bytes of our files on this volume (sidecars
    /// included): its oldest go, whatever the other volumes hold.
    pub keep_bytes: Option<u64>,
    /// Its free-space floor, in place of [`Policy::min_free`].
    pub min_free: Option<MinFree>,
}

impl Policy {
    /// Whether no limit is set (then [`Retention::enforce`] deletes nothing).
    pub fn is_empty(&self) -> bool {
        *self == Policy::default()
    }

    /// The limits volume `dir` has of its own (none set: the store's only).
    pub fn of_volume(&self, dir: &Path) -> VolumeLimits {
        self.volumes.get(dir).cloned().unwrap_or_default()
    }

    /// The free-space floor of volume `dir`: its own, else the store's.
    pub fn min_free_of(&self, dir: &Path) -> Option<MinFree> {
        self.of_volume(dir).min_free.or(self.min_free)
    }
}

impl MinFree {
    /// Whether `free` of `total` bytes is below this floor.
    pub fn below(self, free: u64, total: u64) -> bool {
        match self {
            MinFree::Bytes(b) => free < b,
            MinFree::Percent(p) => (free as f64) < total as f64 * p / 100.0,
        }
    }
}

use crate::sys::fs_space;
pub use wiretape_files::naming::OurFile;

/// Our files in `dir`, oldest first (see [`wiretape_files::naming::list`]).
pub fn our_files(dir: &Path, prefix: &str) -> Vec<OurFile> {
    wiretape_files::naming::list(dir, prefix)
}

/// How often the directory is listed again (files added or removed by
/// someone else).
pub const RESCAN: Duration = Duration::from_secs(600);

/// Our files, oldest first: (start in the name, path) -> (bytes with the
/// sidecar, last write).
#[derive(Debug, Default)]
struct Catalog {
    files: BTreeMap<(String, PathBuf), (u64, SystemTime)>,
    listed: Option<std::time::Instant>,
}

impl Catalog {
    fn key(&self, p: &Path, prefix: &str) -> Option<(String, PathBuf)> {
        let name = p.file_name()?.to_str()?;
        let start = wiretape_files::naming::parse(name, prefix)?
            .start
            .to_string();
        Some((start, p.to_owned()))
    }

    /// The file's state now (gone: out of the catalogue).
    fn refresh(&mut self, p: &Path, prefix: &str) {
        let Some(k) = self.key(p, prefix) else { return };
        match std::fs::metadata(p) {
            Ok(md) if md.is_file() => {
                let side = wiretape_files::naming::sidecar_bytes(p);
                let at = md.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                self.files.insert(k, (md.len() + side, at));
            }
            _ => {
                self.files.remove(&k);
            }
        }
    }

    /// The oldest file `keep` accepts.
    fn oldest(&self, mut keep: impl FnMut(&Path) -> bool) -> Option<OurFile> {
        self.files
            .iter()
            .find(|((_, p), _)| keep(p))
            .map(|((start, path), (bytes, modified))| OurFile {
                path: path.clone(),
                start: start.clone(),
                bytes: *bytes,
                modified: *modified,
            })
    }

    /// The oldest file `keep` accepts that is not `open` and has no open
    /// file of its own series (interface and queue) before it. A queue's
    /// rotated-out file is still being finished (its last writes, its
    /// fsync) while its next ones are written and closed: deleting those
    /// first would leave a hole in that queue's history, and the next pass
    /// deletes the older one anyway once it is closed. Other queues' files
    /// go on being deleted oldest first meanwhile.
    fn oldest_in_order(
        &self,
        open: &HashSet<PathBuf>,
        keep: impl Fn(&Path) -> bool,
    ) -> Option<OurFile> {
        /// `<prefix>-<iface>-q<N>`: the name before its start time.
        fn series(p: &Path) -> Option<&str> {
            let name = p.file_name()?.to_str()?;
            name.rsplit_once('-').map(|(s, _)| s)
        }
        // Owned only for the few queues held back (a pass may walk a
        // large catalogue).
        let mut waiting: HashSet<String> = HashSet::new();
        self.oldest(|p| {
            let s = series(p);
            if open.contains(p) {
                waiting.extend(s.map(str::to_owned));
                return false;
            }
            s.is_none_or(|s| !waiting.contains(s)) && keep(p)
        })
    }
}

/// The retention of one recording: shared by its writer threads (which
/// register the files they write and ask for room on a full disk) and its
/// control loop (which applies the policy about once a second).
#[derive(Debug)]
pub struct Retention {
    /// The output directory the ring of files is in (the first volume).
    pub dir: PathBuf,
    /// Every volume of the store ([`crate::volume`]): one catalogue over
    /// all of them, oldest first; `--min-free` holds on each one's own
    /// filesystem, and room on a full disk is made on that disk.
    pub dirs: Vec<PathBuf>,
    /// File name prefix of the recording: only our names with it are deleted.
    pub prefix: String,
    /// The limits [`Retention::enforce`] applies.
    pub policy: Policy,
    open: Mutex<HashSet<PathBuf>>,
    /// Of `open`: rotated out, being finished on a helper thread.
    closing: Mutex<HashSet<PathBuf>>,
    deleted_files: AtomicU64,
    deleted_bytes: AtomicU64,
    /// Deleted (files, bytes) per interface and queue (from the names).
    by_series: Mutex<std::collections::BTreeMap<(String, u32), (u64, u64)>>,
    /// Our files as last seen; also serialises deleting (the writer
    /// threads and the control loop).
    lock: Mutex<Catalog>,
    /// Files opened or closed since the last pass (the writers report them
    /// here, never waiting for a pass that deletes).
    changed: Mutex<Vec<PathBuf>>,
    /// Full listings of the directory so far.
    listings: AtomicU64,
    log: Mutex<Vec<String>>,
    /// What the notices in `log` call the limits.
    words: LimitWords,
}

impl Retention {
    /// Retention of our `prefix` files in `dir` under `policy`; no file is
    /// open yet and nothing is deleted until asked.
    pub fn new(dir: &Path, prefix: &str, policy: Policy) -> Self {
        Self::with_dirs(&[dir.to_owned()], prefix, policy)
    }

    /// As [`Retention::new`], over the volumes `dirs` (at least one).
    pub fn with_dirs(dirs: &[PathBuf], prefix: &str, policy: Policy) -> Self {
        Retention {
            dir: dirs[0].clone(),
            dirs: dirs.to_vec(),
            prefix: prefix.to_owned(),
            policy,
            open: Mutex::new(HashSet::new()),
            closing: Mutex::new(HashSet::new()),
            deleted_files: AtomicU64::new(0),
            deleted_bytes: AtomicU64::new(0),
            by_series: Mutex::new(Default::default()),
            lock: Mutex::new(Catalog::default()),
            changed: Mutex::new(Vec::new()),
            listings: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            words: LimitWords::default(),
        }
    }

    /// The notices of deletions ([`Retention::take_log`]) call the limits
    /// as `words` says (by default: the fields' names).
    pub fn with_words(mut self, words: LimitWords) -> Self {
        self.words = words;
        self
    }

    /// A file is being written (never deleted until [`Retention::closed`]).
    pub fn opened(&self, p: &Path) {
        self.open.lock().unwrap().insert(p.to_owned());
        self.changed.lock().unwrap().push(p.to_owned());
    }

    /// `p` is finished and closed (or given up): it may be deleted from now on.
    pub fn closed(&self, p: &Path) {
        self.open.lock().unwrap().remove(p);
        self.closing.lock().unwrap().remove(p);
        self.changed.lock().unwrap().push(p.to_owned());
    }

    /// Times the directory was listed in full (the first pass, then every
    /// [`RESCAN`]).
    pub fn listings(&self) -> u64 {
        self.listings.load(Ordering::Relaxed)
    }

    /// Brings the catalogue up to date: the directory listed in full the
    /// first time and every [`RESCAN`], else only the files reported since
    /// and those being written are looked at.
    fn update(&self, cat: &mut Catalog) {
        let changed = std::mem::take(&mut *self.changed.lock().unwrap());
        if cat.listed.is_none_or(|t| t.elapsed() >= RESCAN) {
            cat.files = self
                .dirs
                .iter()
                .flat_map(|d| our_files(d, &self.prefix))
                .map(|f| ((f.start, f.path), (f.bytes, f.modified)))
                .collect();
            cat.listed = Some(std::time::Instant::now());
            self.listings.fetch_add(1, Ordering::Relaxed);
        } else {
            for p in changed {
                cat.refresh(&p, &self.prefix);
            }
            let open: Vec<PathBuf> = self.open.lock().unwrap().iter().cloned().collect();
            for p in open {
                cat.refresh(&p, &self.prefix);
            }
        }
    }

    /// (files, bytes) deleted so far.
    pub fn deleted(&self) -> (u64, u64) {
        (
            self.deleted_files.load(Ordering::Relaxed),
            self.deleted_bytes.load(Ordering::Relaxed),
        )
    }

    /// (interface, queue, files, bytes) deleted so far, per interface and
    /// queue named in the files' names.
    pub fn deleted_by_series(&self) -> Vec<(String, u32, u64, u64)> {
        self.by_series
            .lock()
            .unwrap()
            .iter()
            .map(|((i, q), (f, b))| (i.clone(), *q, *f, *b))
            .collect()
    }

    /// Lines about what was deleted since the last call.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    fn delete(&self, cat: &mut Catalog, f: &OurFile, why: &str) -> bool {
        let gone = std::fs::remove_file(&f.path);
        // Deleted, or vanished meanwhile: out of the catalogue either way.
        if gone.is_ok() || !f.path.exists() {
            cat.files.remove(&(f.start.clone(), f.path.clone()));
        }
        if gone.is_err() {
            return false;
        }
        wiretape_files::naming::remove_sidecars(&f.path);
        self.deleted_files.fetch_add(1, Ordering::Relaxed);
        self.deleted_bytes.fetch_add(f.bytes, Ordering::Relaxed);
        if let Some(n) = f
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| wiretape_files::naming::parse(n, &self.prefix))
        {
            let mut m = self.by_series.lock().unwrap();
            let e = m.entry((n.ifname.to_string(), n.queue)).or_default();
            e.0 += 1;
            e.1 += f.bytes;
        }
        self.log
            .lock()
            .unwrap()
            .push(format!("deleted {} ({why})", f.path.display()));
        true
    }

    /// The volume holding `p`.
    fn volume_of(&self, p: &Path) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|d| p.starts_with(d))
            .map(PathBuf::as_path)
    }

    fn low_on_space(&self, dir: &Path) -> bool {
        let Some(m) = self.policy.min_free_of(dir) else {
            return false;
        };
        fs_space(dir).is_some_and(|(free, total)| m.below(free, total))
    }

    /// Each volume's own `--keep-bytes`: while its files hold more, its
    /// oldest closed files go (the other volumes are not looked at).
    fn enforce_volume_bytes(&self, cat: &mut Catalog, open: &HashSet<PathBuf>) -> u64 {
        let mut n = 0;
        for dir in &self.dirs {
            let Some(keep) = self.policy.of_volume(dir).keep_bytes else {
                continue;
            };
            let mut bytes: u64 = cat
                .files
                .iter()
                .filter(|((_, p), _)| p.starts_with(dir))
                .map(|(_, v)| v.0)
                .sum();
            let why = format!(
                "{} of volume {}: {keep} bytes",
                self.words.of(Limit::KeepBytes),
                dir.display()
            );
            while bytes > keep {
                let Some(f) = cat.oldest_in_order(open, |p| p.starts_with(dir)) else {
                    break;
                };
                let deleted = self.delete(cat, &f, &why);
                if !deleted && f.path.exists() {
                    break;
                }
                bytes -= f.bytes;
                n += u64::from(deleted);
            }
        }
        n
    }

    /// Applies the policy: deletes our oldest closed files until every
    /// limit holds (or only open files are left, and the files of queues
    /// whose older file is still being finished: see `oldest_in_order`).
    /// Returns files deleted.
    pub fn enforce(&self) -> u64 {
        if self.policy.is_empty() {
            return 0;
        }
        let mut cat = self.lock.lock().unwrap();
        self.update(&mut cat);
        let open = self.open.lock().unwrap().clone();
        // A volume's own cap first: the store's limits then count what is
        // left (the other way round, an older file of another volume could
        // go for a total that this volume's deletions bring down anyway).
        let mut n = self.enforce_volume_bytes(&mut cat, &open);
        let mut count = cat.files.len();
        let mut bytes: u64 = cat.files.values().map(|v| v.0).sum();
        let now = SystemTime::now();
        // The oldest closed file, again after each deletion: open files are
        // few and the newest, so this stays at the catalogue's front.
        while let Some(f) = cat.oldest_in_order(&open, |_| true) {
            let why = if self.policy.keep_files.is_some_and(|k| count > k) {
                Limit::KeepFiles
            } else if self.policy.keep_bytes.is_some_and(|k| bytes > k) {
                Limit::KeepBytes
            } else if self
                .policy
                .keep_age
                .is_some_and(|a| now.duration_since(f.modified).unwrap_or_default() > a)
            {
                Limit::KeepAge
            } else {
                // Oldest first: the age test may still hold for a later
                // file only if clocks jumped; stop at the first one kept.
                break;
            };
            let deleted = self.delete(&mut cat, &f, self.words.of(why));
            if !deleted && f.path.exists() {
                break; // cannot be deleted (it stays): not forever
            }
            // Deleted, or gone already (someone else removed it).
            count -= 1;
            bytes -= f.bytes;
            n += u64::from(deleted);
        }
        // The free-space floor (the volume's own, else the store's), on each
        // volume's own filesystem: its oldest files go while it is below.
        for dir in &self.dirs {
            while self.low_on_space(dir) {
                let Some(f) = cat.oldest(|p| !open.contains(p) && p.starts_with(dir)) else {
                    break;
                };
                let deleted = self.delete(&mut cat, &f, self.words.of(Limit::MinFree));
                if !deleted && f.path.exists() {
                    break;
                }
                n += u64::from(deleted);
            }
        }
        n
    }

    /// The disk is full while writing `writing`: deletes our oldest closed
    /// file. If every other file of ours is still being finished (rotated
    /// out, its last block and fsync on a helper thread), waits for one to
    /// close, up to 5 s: deleting it earlier would free nothing, its fd is
    /// open. False when nothing of ours can go (the recording then stops).
    pub fn make_room(&self, writing: &Path) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            {
                let mut cat = self.lock.lock().unwrap();
                self.update(&mut cat);
                let open = self.open.lock().unwrap().clone();
                // The oldest that can go; one that cannot be deleted (it
                // stays in the catalogue) is passed over.
                let mut tried: HashSet<PathBuf> = HashSet::new();
                // Room on the disk being written: files of other volumes
                // free nothing there.
                let vol = self.volume_of(writing);
                while let Some(f) = cat.oldest(|p| {
                    p != writing
                        && !open.contains(p)
                        && !tried.contains(p)
                        && vol.is_none_or(|v| p.starts_with(v))
                }) {
                    let why = format!("disk full, {}", self.words.of(Limit::OnFullRotate));
                    if self.delete(&mut cat, &f, &why) {
                        return true;
                    }
                    tried.insert(f.path);
                }
            }
            let vol = self.volume_of(writing);
            let closing = self
                .closing
                .lock()
                .unwrap()
                .iter()
                .any(|p| p != writing && vol.is_none_or(|v| p.starts_with(v)));
            if !closing || std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `p` is no longer written; a helper thread is finishing it.
    pub fn closing(&self, p: &Path) {
        self.closing.lock().unwrap().insert(p.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Retention of the `wt` files in `d` keeping at most `n` of them.
    fn keeping_files(d: &Path, n: usize) -> Retention {
        Retention::new(
            d,
            "wt",
            Policy {
                keep_files: Some(n),
                ..Default::default()
            },
        )
    }

    #[test]
    fn keeps_newest_and_never_touches_foreign_or_open_files() {
        let d = std::env::temp_dir().join(format!("wt-ret-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let name = |i: u32| d.join(format!("wt-eth0-q0-20261122T1010{i:02}.000000000Z.pcap"));
        for i in 0..6 {
            std::fs::write(name(i), vec![0u8; 1000]).unwrap();
        }
        std::fs::write(wiretape_files::naming::index_path(&name(0)), b"x").unwrap();
        std::fs::write(wiretape_files::naming::keys_path(&name(0)), b"y").unwrap();
        let foreign = [
            d.join("notes.txt"),
            d.join("other-eth0-q0-20261122T101000.000000000Z.pcap"),
            d.join("wt-eth0-q0-old.pcap"),
        ];
        for f in &foreign {
            std::fs::write(f, b"keep me").unwrap();
        }
        let r = keeping_files(&d, 3);
        // Still being finished (rotated out, its fsync on its way): never
        // deleted, and its queue's newer files wait for it (deleting them
        // first would leave a hole in the queue's history).
        r.opened(&name(0));
        assert_eq!(r.enforce(), 0);
        assert!((0..6).all(|i| name(i).exists()));
        assert!(wiretape_files::naming::index_path(&name(0)).exists());
        // Being written, the newest: the oldest of the others go.
        r.closed(&name(0));
        r.opened(&name(5));
        assert_eq!(r.enforce(), 3);
        for i in [3, 4, 5] {
            assert!(name(i).exists(), "{i} kept");
        }
        for i in [0, 1, 2] {
            assert!(!name(i).exists(), "{i} deleted");
        }
        assert!(!wiretape_files::naming::index_path(&name(0)).exists());
        assert!(!wiretape_files::naming::keys_path(&name(0)).exists());
        r.closed(&name(5));
        std::fs::remove_file(name(3)).unwrap();
        std::fs::write(name(0), vec![0u8; 1000]).unwrap();
        std::fs::write(wiretape_files::naming::index_path(&name(0)), b"x").unwrap();
        std::fs::write(wiretape_files::naming::keys_path(&name(0)), b"y").unwrap();
        let r2 = Retention::new(
            &d,
            "wt",
            Policy {
                keep_bytes: Some(2000),
                ..Default::default()
            },
        );
        assert_eq!(r2.enforce(), 1); // 0 (with its sidecar) goes
        assert!(!name(0).exists() && !wiretape_files::naming::index_path(&name(0)).exists());
        assert!(!wiretape_files::naming::keys_path(&name(0)).exists());
        assert!(r2.make_room(&name(5)));
        assert!(!name(4).exists() && name(5).exists());
        assert!(!r2.make_room(&name(5)), "nothing else of ours to delete");
        for f in &foreign {
            assert!(f.exists(), "{} untouched", f.display());
        }
        std::fs::remove_dir_all(d).unwrap();
    }

    /// One queue's rotated-out file still being finished while its next
    /// ones are written and closed (a slow fsync): the limits delete the
    /// other queues' oldest files meanwhile, none of that queue's newer
    /// ones (a hole in its history: a crash test lost two files' frames
    /// between the first file and the rest so), and its oldest first once
    /// it is closed.
    #[test]
    fn a_file_being_finished_holds_back_its_queue_s_newer_files() {
        let d = std::env::temp_dir().join(format!("wt-ret-order-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let name =
            |q: u32, i: u32| d.join(format!("wt-eth0-q{q}-20261122T1010{i:02}.000000000Z.pcap"));
        for i in 0..6 {
            std::fs::write(name(0, i), vec![0u8; 1000]).unwrap();
            std::fs::write(name(1, i), vec![0u8; 1000]).unwrap();
        }
        let r = keeping_files(&d, 6);
        r.opened(&name(0, 1)); // q0's file 0 is closed, 1 is being finished
        r.opened(&name(0, 5));
        r.opened(&name(1, 5));
        assert_eq!(r.enforce(), 6);
        let left = |q| (0..6).filter(|&i| name(q, i).exists()).collect::<Vec<_>>();
        assert_eq!(
            left(0),
            [1, 2, 3, 4, 5],
            "q0: its closed oldest went, none after 1"
        );
        assert_eq!(left(1), [5], "q1: oldest first");
        // 6 files: within the limit.
        assert_eq!(r.enforce(), 0);
        r.closed(&name(0, 1));
        assert_eq!(r.enforce(), 0, "6 files: within the limit");
        let r = keeping_files(&d, 3);
        r.opened(&name(0, 5));
        r.opened(&name(1, 5));
        assert_eq!(r.enforce(), 3);
        assert_eq!(left(0), [4, 5], "q0: oldest first once 1 is closed");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn keep_age_and_min_free() {
        let d = std::env::temp_dir().join(format!("wt-ret-age-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let name = |i: u32| d.join(format!("wt-eth0-q0-20261122T1010{i:02}.000000000Z.pcap"));
        let now = SystemTime::now();
        for i in 0..4 {
            std::fs::write(name(i), vec![0u8; 100]).unwrap();
            // 0 and 1 last written two hours ago, 2 and 3 just now
            if i < 2 {
                let f = std::fs::File::options().write(true).open(name(i)).unwrap();
                f.set_modified(now - Duration::from_secs(7200)).unwrap();
            }
        }
        let r = Retention::new(
            &d,
            "wt",
            Policy {
                keep_age: Some(Duration::from_secs(3600)),
                ..Default::default()
            },
        );
        assert_eq!(r.enforce(), 2);
        assert!(!name(0).exists() && !name(1).exists());
        assert!(name(2).exists() && name(3).exists());
        // Free space can never reach 100 %: every closed file of ours goes,
        // the open one stays.
        let r = Retention::new(
            &d,
            "wt",
            Policy {
                min_free: Some(MinFree::Percent(99.999)),
                ..Default::default()
            },
        );
        r.opened(&name(3));
        assert_eq!(r.enforce(), 1);
        assert!(!name(2).exists() && name(3).exists());
        assert_eq!(r.deleted(), (1, 100));
        assert_eq!(r.take_log().len(), 1);
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A deletion's notice names the limit in the library's words (the
    /// fields' names, no command-line flag); an embedder's naming shows
    /// in its place, for every limit.
    #[test]
    fn notices_name_limits_in_library_words_or_the_embedder_s() {
        let base = std::env::temp_dir().join(format!("wt-ret-words-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dirs: Vec<PathBuf> = ["a", "b"].iter().map(|v| base.join(v)).collect();
        let name = |v: usize, i: u32| {
            dirs[v].join(format!("wt-eth0-q0-20261122T1010{i:02}.000000000Z.pcap"))
        };
        let now = SystemTime::now();
        // Each limit in turn over fresh files: 3 of 100 bytes on a (0 and
        // 1 written two hours ago), 3 on b; the newest of each is written.
        let cases = |p: &dyn Fn() -> Policy| {
            let mut out = Vec::new();
            for words in [None, Some(LimitWords::naming(&|l| format!("<{l:?}>")))] {
                let _ = std::fs::remove_dir_all(&base);
                for (v, d) in dirs.iter().enumerate() {
                    std::fs::create_dir_all(d).unwrap();
                    for i in 0..3 {
                        std::fs::write(name(v, i), vec![0u8; 100]).unwrap();
                        if i < 2 {
                            let f = std::fs::File::options().write(true).open(name(v, i));
                            f.unwrap()
                                .set_modified(now - Duration::from_secs(7200))
                                .unwrap();
                        }
                    }
                }
                let mut r = Retention::with_dirs(&dirs, "wt", p());
                if let Some(w) = words {
                    r = r.with_words(w);
                }
                r.opened(&name(0, 2));
                r.opened(&name(1, 2));
                let n = r.enforce();
                let room = r.make_room(&name(0, 2));
                let log = r.take_log();
                assert_eq!(log.len() as u64, n + u64::from(room), "{log:?}");
                out.push(log);
            }
            out
        };
        let why = |l: &String| l[l.find(" (").unwrap()..].to_string();
        let b = dirs[1].display();
        for (p, lib, own) in [
            (
                Policy {
                    keep_files: Some(3),
                    ..Default::default()
                },
                "keep_files",
                "<KeepFiles>",
            ),
            (
                Policy {
                    keep_bytes: Some(350),
                    ..Default::default()
                },
                "keep_bytes",
                "<KeepBytes>",
            ),
            (
                Policy {
                    keep_age: Some(Duration::from_secs(3600)),
                    ..Default::default()
                },
                "keep_age",
                "<KeepAge>",
            ),
            (
                Policy {
                    min_free: Some(MinFree::Percent(99.999)),
                    ..Default::default()
                },
                "min_free",
                "<MinFree>",
            ),
        ] {
            let [default, named] = <[Vec<String>; 2]>::try_from(cases(&|| p.clone())).unwrap();
            // The limit's deletions (at least 2), then one made room for
            // on a full disk if the limit left a closed file.
            assert_eq!(default.len(), named.len(), "{default:?} {named:?}");
            let by_limit = default.iter().filter(|d| why(d) == format!(" ({lib})"));
            assert!(by_limit.count() >= 2, "{default:?}");
            for (d, e) in default.iter().zip(&named) {
                assert!(!d.contains("--"), "no flag in the library's words: {d}");
                let full = " (disk full, on_full_rotate)";
                assert!(why(d) == format!(" ({lib})") || why(d) == full, "{d}");
                let theirs = d
                    .replace(lib, own)
                    .replace("on_full_rotate", "<OnFullRotate>");
                assert_eq!(theirs, *e);
            }
        }
        // A volume's own cap, and the full disk.
        let mut p = Policy::default();
        p.volumes.insert(
            dirs[1].clone(),
            VolumeLimits {
                keep_bytes: Some(150),
                ..Default::default()
            },
        );
        let [default, named] = <[Vec<String>; 2]>::try_from(cases(&|| p.clone())).unwrap();
        assert_eq!(default.len(), 3, "{default:?}");
        assert_eq!(
            why(&default[0]),
            format!(" (keep_bytes of volume {b}: 150 bytes)")
        );
        assert_eq!(
            why(&named[0]),
            format!(" (<KeepBytes> of volume {b}: 150 bytes)")
        );
        assert_eq!(why(&default[2]), " (disk full, on_full_rotate)");
        assert_eq!(why(&named[2]), " (disk full, <OnFullRotate>)");
        for l in default.iter() {
            assert!(!l.contains("--"), "{l}");
        }
        std::fs::remove_dir_all(base).unwrap();
    }

    /// The directory is listed once; later passes work from the catalogue
    /// and the files the writers report.
    #[test]
    fn passes_do_not_list_the_directory_again() {
        let d = std::env::temp_dir().join(format!("wt-ret-cat-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let name = |i: u32| {
            d.join(format!(
                "wt-eth0-q{}-20261122T{:02}{:02}{:02}.000000000Z.pcap",
                i % 2,
                10 + i / 3600,
                i / 60 % 60,
                i % 60
            ))
        };
        for i in 0..200 {
            std::fs::write(name(i), [0u8; 10]).unwrap();
        }
        for i in 0..50 {
            std::fs::write(d.join(format!("foreign-{i}")), b"x").unwrap();
        }
        let r = keeping_files(&d, 150);
        assert_eq!(r.enforce(), 50);
        assert!((0..50).all(|i| !name(i).exists()) && (50..200).all(|i| name(i).exists()));
        for _ in 0..10 {
            assert_eq!(r.enforce(), 0);
        }
        // A writer's new file: reported, not listed.
        r.opened(&name(200));
        std::fs::write(name(200), [0u8; 10]).unwrap();
        assert_eq!(r.enforce(), 1, "151 files: the oldest goes");
        assert!(!name(50).exists() && name(200).exists());
        r.closed(&name(200));
        // A file removed by someone else: passed over.
        std::fs::remove_file(name(51)).unwrap();
        r.opened(&name(201));
        std::fs::write(name(201), [0u8; 10]).unwrap();
        r.closed(&name(201));
        assert_eq!(
            r.enforce(),
            0,
            "151 in the catalogue, one vanished: 150 left"
        );
        assert_eq!(r.enforce(), 0);
        assert_eq!(r.listings(), 1);
        assert_eq!((52..=201).filter(|&i| name(i).exists()).count(), 150);
        std::fs::remove_dir_all(d).unwrap();
    }

    /// Two volumes, one catalogue: oldest first across both; room on a
    /// full disk is made on that disk only.
    #[test]
    fn one_catalogue_over_two_volumes() {
        let base = std::env::temp_dir().join(format!("wt-ret-vol-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        // Files alternate between the volumes, as a writer spreads them.
        let name = |i: u32| {
            let d = if i.is_multiple_of(2) { &a } else { &b };
            d.join(format!("wt-eth0-q0-20261122T1010{i:02}.000000000Z.pcap"))
        };
        for i in 0..8 {
            std::fs::write(name(i), vec![0u8; 100]).unwrap();
        }
        let r = Retention::with_dirs(
            &[a.clone(), b.clone()],
            "wt",
            Policy {
                keep_files: Some(5),
                ..Default::default()
            },
        );
        assert_eq!(r.enforce(), 3);
        assert!((0..3).all(|i| !name(i).exists()) && (3..8).all(|i| name(i).exists()));
        // Full while writing 7 (on b): the oldest of b goes (3), not 4 on a.
        assert!(r.make_room(&name(7)));
        assert!(!name(3).exists() && name(4).exists());
        assert!(r.make_room(&name(7)));
        assert!(!name(5).exists() && name(4).exists() && name(6).exists());
        assert!(!r.make_room(&name(7)), "nothing else of ours on b");
        std::fs::remove_dir_all(base).unwrap();
    }

    /// Three volumes, b the smaller disk: its own `--keep-bytes` deletes
    /// its oldest files only; the store's limits then count all three
    /// together; a volume's own `--min-free` replaces the store's there.
    #[test]
    fn a_volume_s_own_limits() {
        let base = std::env::temp_dir().join(format!("wt-ret-own-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dirs: Vec<PathBuf> = ["a", "b", "c"].iter().map(|v| base.join(v)).collect();
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        // File i on volume i % 3, 100 bytes, oldest first: a has 0, 3, 6,
        // 9; b has 1, 4, 7, 10; c has 2, 5, 8, 11.
        let name = |i: u32| {
            dirs[i as usize % 3].join(format!("wt-eth0-q0-20261122T1010{i:02}.000000000Z.pcap"))
        };
        for i in 0..12 {
            std::fs::write(name(i), vec![0u8; 100]).unwrap();
        }
        let exists = |i: u32| name(i).exists();
        let mut policy = Policy::default();
        policy.volumes.insert(
            dirs[1].clone(),
            VolumeLimits {
                keep_bytes: Some(250),
                ..Default::default()
            },
        );
        let r = Retention::with_dirs(&dirs, "wt", policy.clone());
        // b holds 400 > 250: its oldest closed files go (1, then 4); 10,
        // being written, stays and counts; a and c keep everything.
        r.opened(&name(10));
        assert_eq!(r.enforce(), 2);
        assert!(!exists(1) && !exists(4) && exists(7) && exists(10));
        assert!([0, 3, 6, 9, 2, 5, 8, 11].iter().all(|&i| exists(i)));
        assert_eq!(r.deleted(), (2, 200));
        let log = r.take_log();
        assert!(log[0].contains("(keep_bytes of volume ") && log[0].ends_with(": 250 bytes)"));
        assert_eq!(r.enforce(), 0, "b holds 200 now");
        r.closed(&name(10));
        // The store's --keep-bytes beside b's own, over what is left (10
        // files, 1000 bytes): b's holds already (200), the store's deletes
        // the oldest across the volumes (0 on a, 2 on c, 3 on a).
        policy.keep_bytes = Some(700);
        let r = Retention::with_dirs(&dirs, "wt", policy.clone());
        assert_eq!(r.enforce(), 3);
        assert!(!exists(0) && !exists(2) && !exists(3) && exists(5));
        // A volume's own --min-free replaces the store's: the store's can
        // never hold (99.999 % free), c's own always does (0 bytes), so a
        // and b lose every closed file, c none.
        policy.keep_bytes = None;
        policy.volumes.clear();
        policy.min_free = Some(MinFree::Percent(99.999));
        policy.volumes.insert(
            dirs[2].clone(),
            VolumeLimits {
                min_free: Some(MinFree::Bytes(0)),
                ..Default::default()
            },
        );
        let r = Retention::with_dirs(&dirs, "wt", policy);
        assert_eq!(r.enforce(), 4, "6, 9 on a and 7, 10 on b");
        assert!([6, 9, 7, 10].iter().all(|&i| !exists(i)));
        assert!([5, 8, 11].iter().all(|&i| exists(i)));
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn make_room_waits_for_a_file_being_finished() {
        let d = std::env::temp_dir().join(format!("wt-ret-wait-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let a = d.join("wt-eth0-q0-20261122T101000.000000000Z.pcap");
        let b = d.join("wt-eth0-q0-20261122T101001.000000000Z.pcap");
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        let r = std::sync::Arc::new(Retention::new(&d, "wt", Policy::default()));
        r.opened(&a);
        r.opened(&b);
        assert!(!r.make_room(&b), "a is being written: nothing to delete");
        r.closing(&a);
        let r2 = r.clone();
        let (a2, b2) = (a.clone(), b.clone());
        let h = std::thread::spawn(move || r2.make_room(&b2));
        std::thread::sleep(Duration::from_millis(50));
        assert!(a2.exists(), "not deleted while it is being finished");
        r.closed(&a);
        assert!(h.join().unwrap(), "room made once it closed");
        assert!(!a.exists() && b.exists());
        std::fs::remove_dir_all(d).unwrap();
    }
}
