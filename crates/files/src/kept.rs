//! What a reader keeps of one store's directories between reads: held by
//! its [`crate::ReadOptions`] (shared by their clones), never by the
//! process. Two stores read with two options keep nothing in common; what
//! is kept is only of the directories read through those options (the
//! store's own), and each entry is used only while its directory is the
//! same (its identity or mtime, as each kind says).

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

/// A directory's kept listing: its mtime and its names.
type Listing = (SystemTime, Vec<OsString>);

/// A directory's symbolic links resolved: its (device, inode) then, and
/// its resolution.
type Resolved = ((u64, u64), PathBuf);

/// A packets directory's final names' states at its mtime
/// ([`crate::steno`]'s `list`).
type States = (SystemTime, HashMap<OsString, bool>);

/// The kept state of one store's directories (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// Whether directory listings (and stenotype's file states) are kept:
    /// a long-running reader's choice ([`crate::ReadOptions::with_kept_listings`]).
    pub(crate) listings_on: bool,
    /// A capture directory's symbolic links resolved, by its path: its
    /// (device, inode) then and its resolution.
    pub(crate) dirs: Mutex<HashMap<PathBuf, Resolved>>,
    /// Directory listings, by path.
    pub(crate) listings: Mutex<HashMap<PathBuf, Listing>>,
    /// stenotype's packets directories' file states, by path.
    pub(crate) states: Mutex<HashMap<PathBuf, States>>,
    /// The upper pages of the key indexes opened, when kept
    /// ([`crate::ReadOptions::with_kept_index_pages`]).
    pub(crate) index_pages: Option<Mutex<crate::keys::KeptSet>>,
    /// The key indexes kept open, when their upper pages are kept: a
    /// query then opens no `.kdx` it opened before (an open on a cold
    /// cache reads the inode's table, and more of it around the inode).
    pub(crate) open: Option<Arc<Mutex<OpenFiles>>>,
    /// Capture files' first pages, when key index pages are kept (a
    /// server): a query then reads no file's head it read before
    /// ([`Kept::head`]).
    pub(crate) heads: Option<Mutex<Heads>>,
}

/// Capture files' heads kept at most (of [`HEAD_BYTES`] each: 4 MiB).
pub(crate) const HEADS: usize = 1024;

/// Bytes of a capture file's head kept: its first page (the header and,
/// for a Stenographer file, its first block's descriptor).
pub(crate) const HEAD_BYTES: usize = 4096;

/// A file's identity for its kept head: device, inode, length, mtime (ns).
/// A file replaced, grown, cut or rewritten has another.
pub(crate) type FileId = (u64, u64, u64, i128);

/// The identity of the file `m` describes.
pub(crate) fn file_id(m: &std::fs::Metadata) -> FileId {
    (
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
    )
}

/// Capture files' heads ([`Kept::head`]), by path.
#[derive(Debug, Default)]
pub(crate) struct Heads {
    /// Ticks at each use: the least recently used has the lowest.
    clock: u64,
    by_path: HashMap<PathBuf, (FileId, Arc<[u8]>, u64)>,
}

/// Files one reader's options keep open at most (the least recently used
/// closed first).
pub(crate) const OPEN_FILES: usize = 256;

/// How often a reader's kept open files are checked: a file deleted (or
/// replaced by a rename) since is closed then, its space freed. A file
/// looked up by a query is checked then too (by its path: gone, or another
/// file now, it is closed before the query goes on).
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Files kept open ([`Kept::open`]), by path.
#[derive(Debug)]
pub(crate) struct OpenFiles {
    cap: usize,
    /// Ticks at each use: the least recently used has the lowest.
    clock: u64,
    by_path: HashMap<PathBuf, OpenFile>,
    /// Held while these live: the sweeper thread ends when it is dropped.
    sweeper: Option<mpsc::Sender<()>>,
}

/// A file kept open: the file, its (device, inode), its last use.
#[derive(Debug)]
struct OpenFile {
    file: Arc<File>,
    id: (u64, u64),
    used: u64,
}

impl OpenFiles {
    fn new(cap: usize) -> Self {
        OpenFiles {
            cap: cap.max(1),
            clock: 0,
            by_path: HashMap::new(),
            sweeper: None,
        }
    }

    /// Closes the files deleted since they were opened (no name left).
    pub(crate) fn sweep(&mut self) {
        self.by_path
            .retain(|_, f| f.file.metadata().is_ok_and(|m| m.nlink() > 0));
    }

    /// The paths kept open now.
    #[cfg(test)]
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.by_path.keys().cloned().collect()
    }
}

/// Starts the thread that sweeps `open` every [`SWEEP_EVERY`] until it is
/// dropped; the sender it ends with.
fn start_sweeper(open: Weak<Mutex<OpenFiles>>) -> Option<mpsc::Sender<()>> {
    let (tx, rx) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("wt-kept-sweep".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(SWEEP_EVERY) {
                let Some(o) = open.upgrade() else {
                    return;
                };
                o.lock().unwrap_or_else(|e| e.into_inner()).sweep();
            }
        })
        .ok()?;
    Some(tx)
}

/// Drops the least recently used entry of `by_path` (the lowest `used`)
/// when it holds `cap` entries and `path` is not one of them: room for
/// `path`.
fn make_room<V>(
    by_path: &mut HashMap<PathBuf, V>,
    cap: usize,
    path: &Path,
    used: impl Fn(&V) -> u64,
) {
    if by_path.len() >= cap && !by_path.contains_key(path) {
        let old = by_path.iter().min_by_key(|(_, v)| used(v));
        if let Some(old) = old.map(|(p, _)| p.clone()) {
            by_path.remove(&old);
        }
    }
}

/// Opens `path` for random reads: the file and its metadata.
fn open_random(path: &Path) -> std::io::Result<(File, std::fs::Metadata)> {
    let f = File::open(path)?;
    crate::sys::advise_random(&f);
    let m = f.metadata()?;
    Ok((f, m))
}

impl Kept {
    /// Kept with listings on.
    #[cfg(test)]
    pub(crate) fn with_listings() -> Self {
        Kept::new(true, None)
    }

    /// Nothing kept yet: listings when `listings_on`, key indexes' upper
    /// pages up to `pages_cap` bytes when given.
    pub(crate) fn new(listings_on: bool, pages_cap: Option<usize>) -> Self {
        Kept {
            listings_on,
            index_pages: pages_cap.map(|c| Mutex::new(crate::keys::KeptSet::new(c))),
            open: pages_cap.map(|_| Arc::new(Mutex::new(OpenFiles::new(OPEN_FILES)))),
            heads: pages_cap.map(|_| Mutex::new(Heads::default())),
            ..Kept::default()
        }
    }

    /// `path` opened for random reads (a key index), and its metadata now.
    /// Where these keep files open: the file kept since an earlier open
    /// while `path` still names it (same device and inode: a `stat`, which
    /// the kept file's cached inode answers), else opened and kept (the
    /// least recently used closed beyond [`OPEN_FILES`]); a path gone
    /// closes its file.
    pub(crate) fn open(&self, path: &Path) -> std::io::Result<(Arc<File>, std::fs::Metadata)> {
        let Some(open) = &self.open else {
            let (f, m) = open_random(path)?;
            return Ok((Arc::new(f), m));
        };
        let now = std::fs::metadata(path);
        let mut g = open.lock().unwrap_or_else(|e| e.into_inner());
        let now = match now {
            Ok(m) => m,
            Err(e) => {
                g.by_path.remove(path);
                return Err(e);
            }
        };
        g.clock += 1;
        let tick = g.clock;
        if let Some(f) = g.by_path.get_mut(path) {
            if f.id == (now.dev(), now.ino()) {
                f.used = tick;
                return Ok((f.file.clone(), now));
            }
        }
        // Another file now: the old one closed.
        g.by_path.remove(path);
        drop(g);
        let (f, m) = open_random(path)?;
        let f = Arc::new(f);
        let mut g = open.lock().unwrap_or_else(|e| e.into_inner());
        if g.sweeper.is_none() {
            g.sweeper = start_sweeper(Arc::downgrade(open));
        }
        // No sweeper thread: nothing kept (a deleted file would stay open).
        if g.sweeper.is_some() {
            let cap = g.cap;
            make_room(&mut g.by_path, cap, path, |f| f.used);
            let id = (m.dev(), m.ino());
            let file = f.clone();
            g.by_path.insert(
                path.to_owned(),
                OpenFile {
                    file,
                    id,
                    used: tick,
                },
            );
        }
        Ok((f, m))
    }

    /// Whether `path` (a sidecar) is there, as [`Path::exists`] says.
    /// Where these keep files open, an existing one is kept open as a key
    /// index is ([`Kept::open`]): its inode then stays in memory, and the
    /// next query's check reads nothing from the disk (a `stat` of a file
    /// no one holds, on a cold cache, reads its inode's table block, and
    /// ext4 reads up to `inode_readahead_blks` blocks of the table with
    /// it: 128 KiB by default). An error other than "not found" (a file
    /// not readable) answers as `exists` does.
    pub(crate) fn exists(&self, path: &Path) -> bool {
        self.stat(path).is_ok()
    }

    /// Whether these keep capture files' heads ([`Kept::head`]).
    pub(crate) fn keeps_heads(&self) -> bool {
        self.heads.is_some()
    }

    /// The head kept of the capture at `path` while it is the file `id`
    /// (its first [`HEAD_BYTES`], or all of a shorter file).
    pub(crate) fn head(&self, path: &Path, id: FileId) -> Option<Arc<[u8]>> {
        let mut g = self
            .heads
            .as_ref()?
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        g.clock += 1;
        let tick = g.clock;
        let h = g.by_path.get_mut(path).filter(|h| h.0 == id)?;
        h.2 = tick;
        Some(h.1.clone())
    }

    /// Keeps `head` as the head of the capture at `path`, the file `id`
    /// (the least recently used dropped beyond [`HEADS`]). Only a
    /// finished file's: a file being written may change its first page.
    pub(crate) fn keep_head(&self, path: &Path, id: FileId, head: &[u8]) {
        let Some(heads) = &self.heads else {
            return;
        };
        let mut g = heads.lock().unwrap_or_else(|e| e.into_inner());
        make_room(&mut g.by_path, HEADS, path, |h| h.2);
        g.clock += 1;
        let tick = g.clock;
        g.by_path.insert(path.to_owned(), (id, head.into(), tick));
    }

    /// `path`'s metadata, as [`std::fs::metadata`] says (links followed).
    /// Where these keep files open, the file or directory found is kept
    /// open as a key index is ([`Kept::open`]): its dentry and inode, and
    /// those of the directories above it, then stay in memory, and the
    /// next query's `stat` of it (on a cold page cache: a store directory,
    /// a packets directory, the file stenotype writes) reads nothing from
    /// the disk. Answered by the path every time: a file replaced or gone
    /// is seen as [`std::fs::metadata`] sees it (and its old fd closed).
    pub(crate) fn stat(&self, path: &Path) -> std::io::Result<std::fs::Metadata> {
        if self.open.is_none() {
            return std::fs::metadata(path);
        }
        match self.open(path) {
            Ok((_, m)) => Ok(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(e),
            // Not readable (a directory without `r`): stat'ed as before.
            Err(_) => std::fs::metadata(path),
        }
    }

    /// [`Kept::stat`] while the files kept open are fewer than their cap
    /// (or `path` is one of them), else a plain `stat`: a capture file
    /// held for its inode never closes a key index to make room (in a
    /// store of more files than the cap, every query would open again
    /// what the last one closed).
    pub(crate) fn stat_if_room(&self, path: &Path) -> std::io::Result<std::fs::Metadata> {
        let room = self.open.as_ref().is_some_and(|o| {
            let g = o.lock().unwrap_or_else(|e| e.into_inner());
            g.by_path.len() < g.cap || g.by_path.contains_key(path)
        });
        if room {
            self.stat(path)
        } else {
            std::fs::metadata(path)
        }
    }

    /// The cap of the kept upper pages, when kept.
    pub(crate) fn pages_cap(&self) -> Option<usize> {
        let p = self.index_pages.as_ref()?;
        Some(p.lock().unwrap_or_else(|e| e.into_inner()).cap())
    }

    /// The resolution of `dir` kept while it is the directory `id`.
    pub(crate) fn dir(&self, dir: &Path, id: (u64, u64)) -> Option<PathBuf> {
        let g = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        g.get(dir).filter(|(i, _)| *i == id).map(|(_, r)| r.clone())
    }

    /// Keeps `resolved` for `dir`, the directory `id`.
    pub(crate) fn keep_dir(&self, dir: &Path, id: (u64, u64), resolved: &Path) {
        let mut g = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        g.insert(dir.to_owned(), (id, resolved.to_owned()));
    }

    /// The names of `dir` kept at `mtime`.
    pub(crate) fn listing(&self, dir: &Path, mtime: SystemTime) -> Option<Vec<OsString>> {
        let g = self.listings.lock().unwrap_or_else(|e| e.into_inner());
        g.get(dir)
            .filter(|(t, _)| *t == mtime)
            .map(|(_, n)| n.clone())
    }

    /// Whether the listing of `dir` kept at `mtime` (its mtime now) lacks
    /// `name`: false when none is kept at that mtime (or listings are not
    /// kept).
    pub(crate) fn lacks(&self, dir: &Path, mtime: SystemTime, name: &str) -> bool {
        if !self.listings_on {
            return false;
        }
        let g = self.listings.lock().unwrap_or_else(|e| e.into_inner());
        g.get(dir)
            .is_some_and(|(t, names)| *t == mtime && !names.iter().any(|n| n == name))
    }

    /// Keeps `names` for `dir` at `mtime`.
    pub(crate) fn keep_listing(&self, dir: &Path, mtime: SystemTime, names: &[OsString]) {
        let mut g = self.listings.lock().unwrap_or_else(|e| e.into_inner());
        g.insert(dir.to_owned(), (mtime, names.to_vec()));
    }

    /// The file states of the packets directory `dir` kept at `mtime`.
    pub(crate) fn states(&self, dir: &Path, mtime: SystemTime) -> Option<HashMap<OsString, bool>> {
        let g = self.states.lock().unwrap_or_else(|e| e.into_inner());
        g.get(dir)
            .filter(|(t, _)| *t == mtime)
            .map(|(_, s)| s.clone())
    }

    /// Keeps `states` for the packets directory `dir` at `mtime`.
    pub(crate) fn keep_states(
        &self,
        dir: &Path,
        mtime: SystemTime,
        states: HashMap<OsString, bool>,
    ) {
        let mut g = self.states.lock().unwrap_or_else(|e| e.into_inner());
        g.insert(dir.to_owned(), (mtime, states));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Read;

    /// This process's open file descriptors on `path` (or on the file
    /// deleted from there).
    pub(crate) fn fds_on(path: &Path) -> usize {
        let deleted = format!("{} (deleted)", path.display());
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|l| l == path || l.as_os_str() == deleted.as_str())
            .count()
    }

    fn read_all(f: &File) -> String {
        use std::os::unix::fs::FileExt;
        let mut b = vec![0u8; 64];
        let n = f.read_at(&mut b, 0).unwrap();
        String::from_utf8(b[..n].to_vec()).unwrap()
    }

    /// A directory of the test's own, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let d = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Dir(d)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Kept open: a file is opened once for any number of opens while its
    /// path names it; replaced (renamed over), the new one is opened and
    /// the old one closed; deleted, its open fails and it is closed; gone
    /// without being asked for again, a sweep closes it. Without kept
    /// pages nothing stays open.
    #[test]
    fn a_kept_file_is_opened_once_and_closed_when_it_goes() {
        let dir = Dir::new("wt-kept-open");
        let p = dir.0.join("a.kdx");
        std::fs::write(&p, "first").unwrap();
        let kept = Kept::new(true, Some(1 << 20));
        let (f1, m1) = kept.open(&p).unwrap();
        let (f2, m2) = kept.open(&p).unwrap();
        assert!(Arc::ptr_eq(&f1, &f2), "opened once");
        assert_eq!((m1.ino(), m2.len()), (m2.ino(), 5));
        drop((f1, f2));
        assert_eq!(fds_on(&p), 1, "kept open between opens");
        // Appended in place (the same inode): the same file, its new length.
        std::io::Write::write_all(
            &mut std::fs::OpenOptions::new().append(true).open(&p).unwrap(),
            b"+",
        )
        .unwrap();
        let (f, m) = kept.open(&p).unwrap();
        assert_eq!((m.len(), read_all(&f).as_str()), (6, "first+"));
        drop(f);
        assert_eq!(fds_on(&p), 1);
        // Replaced by a rename: the new file, the old one closed.
        let q = dir.0.join("a.kdx.new");
        std::fs::write(&q, "second").unwrap();
        std::fs::rename(&q, &p).unwrap();
        let (f, _) = kept.open(&p).unwrap();
        assert_eq!(read_all(&f), "second");
        drop(f);
        assert_eq!(fds_on(&p), 1, "the replaced file closed");
        // Deleted, then asked for: not found, closed.
        std::fs::remove_file(&p).unwrap();
        let e = kept.open(&p).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(fds_on(&p), 0, "a deleted file's fd closed");
        // Deleted and not asked for again: closed by a sweep.
        std::fs::write(&p, "third").unwrap();
        drop(kept.open(&p).unwrap());
        std::fs::remove_file(&p).unwrap();
        assert_eq!(fds_on(&p), 1);
        let open = kept.open.as_ref().unwrap();
        open.lock().unwrap().sweep();
        assert_eq!(fds_on(&p), 0, "swept");
        assert!(open.lock().unwrap().paths().is_empty());
        // Options that keep no pages keep no file.
        std::fs::write(&p, "fourth").unwrap();
        let plain = Kept::with_listings();
        let (f, _) = plain.open(&p).unwrap();
        let mut s = String::new();
        (&*f).read_to_string(&mut s).unwrap();
        assert_eq!(s, "fourth");
        drop(f);
        assert_eq!(fds_on(&p), 0, "nothing kept");
    }

    /// A capture's head is kept by a server's options for that very file
    /// only (same device, inode, length and mtime), the least recently
    /// used dropped beyond [`HEADS`]; options that keep no pages keep none.
    #[test]
    fn a_head_is_kept_for_its_file_only_and_the_least_used_go_first() {
        let kept = Kept::new(false, Some(1 << 20));
        let p = Path::new("/nowhere/capture-0");
        let id: FileId = (1, 2, 4096, 7);
        kept.keep_head(p, id, b"head bytes");
        assert_eq!(kept.head(p, id).as_deref(), Some(&b"head bytes"[..]));
        for other in [
            (1, 3, 4096, 7),
            (1, 2, 8192, 7),
            (1, 2, 4096, 8),
            (9, 2, 4096, 7),
        ] {
            assert!(kept.head(p, other).is_none(), "{other:?}");
        }
        // Full: the least recently used goes (capture-1, not capture-0,
        // which was just asked for).
        let name = |i: usize| PathBuf::from(format!("/nowhere/capture-{i}"));
        for i in 1..HEADS {
            kept.keep_head(&name(i), id, &[i as u8]);
        }
        assert!(kept.head(p, id).is_some());
        kept.keep_head(&name(HEADS), id, b"new");
        assert!(kept.head(p, id).is_some());
        assert!(
            kept.head(&name(1), id).is_none(),
            "the least recently used dropped"
        );
        assert!(kept.head(&name(2), id).is_some());
        assert!(kept.head(&name(HEADS), id).is_some());
        // Options that keep no pages keep no heads.
        let plain = Kept::with_listings();
        assert!(!plain.keeps_heads());
        plain.keep_head(p, id, b"head bytes");
        assert!(plain.head(p, id).is_none());
    }

    /// A sidecar found by `exists` is kept open where key indexes are (once,
    /// however often asked), answers as `Path::exists` does (there, gone,
    /// a directory), and is closed once deleted; options that keep no
    /// pages hold nothing.
    #[test]
    fn a_sidecar_found_is_kept_open_where_key_indexes_are() {
        let dir = Dir::new("wt-kept-exists");
        let p = dir.0.join("a.idx");
        let kept = Kept::new(true, Some(1 << 20));
        assert!(!kept.exists(&p), "none yet");
        assert_eq!(fds_on(&p), 0);
        std::fs::write(&p, "idx").unwrap();
        assert!(kept.exists(&p));
        assert!(kept.exists(&p));
        assert_eq!(fds_on(&p), 1, "kept open once");
        assert!(
            kept.exists(&dir.0),
            "a directory exists, as Path::exists says"
        );
        std::fs::remove_file(&p).unwrap();
        assert!(!kept.exists(&p), "deleted");
        assert_eq!(fds_on(&p), 0, "its fd closed");
        std::fs::write(&p, "idx").unwrap();
        let plain = Kept::with_listings();
        assert!(plain.exists(&p));
        assert_eq!(fds_on(&p), 0, "nothing kept without kept pages");
        std::fs::remove_file(&p).unwrap();
        assert!(!plain.exists(&p));
    }

    /// `stat` answers as `std::fs::metadata` does (a file, a directory,
    /// gone), by the path each time; where files are kept it holds what it
    /// found open (once), closes a directory removed once asked again, and
    /// sees a file replaced by a rename; without kept pages it holds
    /// nothing.
    #[test]
    fn stat_answers_by_the_path_and_holds_what_it_found() {
        let dir = Dir::new("wt-kept-stat");
        let sub = dir.0.join("packets");
        std::fs::create_dir(&sub).unwrap();
        let f = sub.join(".1795813946878311");
        std::fs::write(&f, "ab").unwrap();
        let kept = Kept::new(true, Some(1 << 20));
        for _ in 0..2 {
            assert!(kept.stat(&sub).unwrap().is_dir());
            assert_eq!(kept.stat(&f).unwrap().len(), 2);
        }
        assert_eq!((fds_on(&sub), fds_on(&f)), (1, 1), "held once each");
        // Grown in place, then replaced by a rename: seen at once.
        std::io::Write::write_all(
            &mut std::fs::OpenOptions::new().append(true).open(&f).unwrap(),
            b"c",
        )
        .unwrap();
        assert_eq!(kept.stat(&f).unwrap().len(), 3);
        let g = dir.0.join("other");
        std::fs::write(&g, "abcdefg").unwrap();
        std::fs::rename(&g, &f).unwrap();
        let m = kept.stat(&f).unwrap();
        assert_eq!(
            (m.len(), m.ino()),
            (7, std::fs::metadata(&f).unwrap().ino())
        );
        assert_eq!(fds_on(&f), 1, "the replaced file closed");
        // Gone: not found, as metadata says, and closed.
        std::fs::remove_file(&f).unwrap();
        std::fs::remove_dir(&sub).unwrap();
        for p in [&f, &sub] {
            let e = kept.stat(p).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        }
        assert_eq!((fds_on(&sub), fds_on(&f)), (0, 0), "closed once gone");
        // Options that keep no pages hold nothing.
        std::fs::create_dir(&sub).unwrap();
        let plain = Kept::with_listings();
        assert!(plain.stat(&sub).unwrap().is_dir());
        assert_eq!(fds_on(&sub), 0);
    }

    /// A server's options hold one of Stenographer's files they stat
    /// (`capture_metadata`), never one of ours (retention frees its space
    /// when it deletes it); other options hold neither.
    #[test]
    fn capture_metadata_holds_stenographers_files_only() {
        let dir = Dir::new("wt-kept-capture");
        let steno = dir.0.join("1795813946878311");
        let ours = dir.0.join("wt-20260101T000000.000000000Z.pcap");
        std::fs::write(&steno, "steno").unwrap();
        std::fs::write(&ours, "ours!!").unwrap();
        let server = crate::ReadOptions::new().with_kept_index_pages(1 << 20);
        let plain = crate::ReadOptions::new();
        for o in [&server, &plain] {
            assert_eq!(o.capture_metadata(&steno).unwrap().len(), 5);
            assert_eq!(o.capture_metadata(&ours).unwrap().len(), 6);
        }
        assert_eq!((fds_on(&steno), fds_on(&ours)), (1, 0));
        drop(server);
        assert_eq!(fds_on(&steno), 0, "closed with the options");
        // Files kept up to their cap: a capture file is stat'ed, not held,
        // and closes no key index.
        let kept = Kept {
            open: Some(Arc::new(Mutex::new(OpenFiles::new(1)))),
            ..Kept::new(true, Some(1 << 20))
        };
        let kdx = dir.0.join("a.kdx");
        std::fs::write(&kdx, "k").unwrap();
        drop(kept.open(&kdx).unwrap());
        assert_eq!(kept.stat_if_room(&steno).unwrap().len(), 5);
        assert_eq!((fds_on(&kdx), fds_on(&steno)), (1, 0));
    }

    /// The sweeper thread closes a deleted file nobody asks for (within a
    /// few sweeps; waited for up to 120 s, for a loaded machine), and ends
    /// with the options.
    #[test]
    fn the_sweeper_closes_a_deleted_file_on_its_own() {
        let dir = Dir::new("wt-kept-sweep");
        let p = dir.0.join("b.kdx");
        std::fs::write(&p, "x").unwrap();
        let kept = Kept::new(true, Some(1 << 20));
        drop(kept.open(&p).unwrap());
        std::fs::remove_file(&p).unwrap();
        assert_eq!(fds_on(&p), 1);
        let t0 = std::time::Instant::now();
        while fds_on(&p) > 0 && t0.elapsed() < Duration::from_secs(120) {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(fds_on(&p), 0, "not swept");
    }

    /// Beyond the cap, the least recently used file is closed.
    #[test]
    fn beyond_the_cap_the_least_recently_used_is_closed() {
        let dir = Dir::new("wt-kept-cap");
        let kept = Kept {
            open: Some(Arc::new(Mutex::new(OpenFiles::new(2)))),
            ..Kept::new(true, Some(1 << 20))
        };
        let p: Vec<PathBuf> = (0..3).map(|i| dir.0.join(format!("{i}.kdx"))).collect();
        for q in &p {
            std::fs::write(q, "k").unwrap();
        }
        drop(kept.open(&p[0]).unwrap());
        drop(kept.open(&p[1]).unwrap());
        drop(kept.open(&p[0]).unwrap());
        drop(kept.open(&p[2]).unwrap());
        let n: Vec<usize> = p.iter().map(|q| fds_on(q)).collect();
        assert_eq!(n, [1, 0, 1], "the least recently used (1) closed");
    }
}
