//! Volumes: the directories of one store (`record -w A -w B`), normally one
//! disk each. Each has its own O_DIRECT probe and free-space floor
//! (`--min-free`, applied by [`crate::retention`] to each volume's own
//! filesystem), a state (in use, or failed with its cause) and the files
//! in flight on it.
//!
//! How the load is spread: whole files. Each new file of a queue (its
//! first, and each rotation's) goes to the healthy volume with the fewest
//! files in flight (being written, or finished on a helper thread after a
//! rotation: a slow disk keeps its files in flight longer and so gets fewer
//! new ones); ties go round-robin. A file stays on one volume, so every
//! file is in time order as before and readers merge files by time as they
//! always did. A queue carrying most of the traffic spreads over the
//! volumes by rotating: with several volumes and no `--rotate-size` or
//! `--rotate-time`, files rotate at [`DEFAULT_ROTATE_SIZE`]. Its next
//! file goes to another volume than the one before unless that one is
//! busier ([`Volumes::pick_after`]) and is written there at once, beside
//! the closing file: only a file on the same volume waits for the one
//! before it, so one queue writes to several disks at a time. Names stay
//! unique across volumes: a queue's successive file names are strictly
//! increasing times, and the names carry the interface and queue.
//!
//! A volume whose write or file creation fails (ENOSPC, EIO, EROFS, gone)
//! is taken out at once ([`Volumes::fail`]): the writer moves to a new file
//! on another volume, with the frames of its blocks that the failed write
//! left in RAM or in flight (both engines give them back, from the record
//! that straddles the failed offset, or, where the volume refuses to cut
//! the file there, from the first record that is not on disk as it was
//! written: none is both in the file and given back; the compressing and
//! the age layers
//! give back the records of every unit or chunk their file does not keep
//! whole; see [`crate::sink::BlockSink::take_unwritten`]). Runs laid out
//! in place ([`crate::external`]) whose write failed, was queued, or came
//! after the failure are given back too: the sink copies them out of their
//! owner's memory (a packet ring's block) then, and only then; a run
//! written while a write below it was on its way keeps that memory until
//! the write is done. Frames are lost only when no volume is left.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Rotation size when a store has several volumes and none was given: a
/// busy queue's files then alternate between the volumes.
pub const DEFAULT_ROTATE_SIZE: u64 = 1 << 30;

/// What a failed volume's cause ends with once its filesystem is read-only.
const RO_NOW: &str = "; its filesystem is read-only now";

/// One directory of a store.
#[derive(Debug)]
pub struct Volume {
    /// The directory.
    pub dir: PathBuf,
    /// Whether its filesystem takes O_DIRECT (probed at open).
    pub direct_ok: bool,
    /// Why it was taken out (None: in use).
    failed: Mutex<Option<String>>,
    /// Times it was taken out (0 or 1 in a run: a failed volume stays out).
    failures: AtomicU64,
    /// Files being written on it or being finished.
    in_flight: AtomicU64,
    /// ... of which being finished after a rotation (their blocks still
    /// draining to the disk).
    closing: AtomicU64,
    /// Files put on it (this run).
    files: AtomicU64,
    /// Bytes of its closed files (this run).
    bytes: AtomicU64,
}

/// A volume's numbers now (for the summary, `ctl status` and `/metrics`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumeState {
    /// The directory.
    pub dir: PathBuf,
    /// Why it was taken out (None: in use).
    pub failed: Option<String>,
    /// Times it was taken out (`volume_failed`).
    pub failures: u64,
    /// Files being written or finished on it now.
    pub files_in_flight: u64,
    /// Files put on it this run.
    pub files: u64,
    /// Bytes of its files closed this run.
    pub bytes: u64,
    /// Its own cap on our bytes (`--keep-bytes DIR=SIZE`; none: the
    /// store's only).
    pub keep_bytes: Option<u64>,
    /// Its own free-space floor (`--min-free DIR=SIZE|PCT%`; none: the
    /// store's).
    pub min_free: Option<crate::MinFree>,
}

impl Volume {
    /// A volume in `dir`, taking O_DIRECT or not.
    pub fn new(dir: &Path, direct_ok: bool) -> Self {
        Volume {
            dir: dir.to_owned(),
            direct_ok,
            failed: Mutex::new(None),
            failures: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            closing: AtomicU64::new(0),
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// Whether it is in use.
    pub fn ok(&self) -> bool {
        self.failed.lock().expect("volume").is_none()
    }

    /// A file was opened on it.
    pub fn file_opened(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.files.fetch_add(1, Ordering::Relaxed);
    }

    /// One of its files is being finished on a helper thread (after a
    /// rotation): until [`Volume::closing_done`] it counts twice in
    /// [`Volumes::pick`] (its blocks still drain to the disk; an open
    /// file of a slow queue may take little).
    pub fn closing_started(&self) {
        self.closing.fetch_add(1, Ordering::Relaxed);
    }

    /// See [`Volume::closing_started`].
    pub fn closing_done(&self) {
        self.closing.fetch_sub(1, Ordering::Relaxed);
    }

    /// How busy it is for [`Volumes::pick`]: files open, files being
    /// finished twice.
    fn load(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed) + self.closing.load(Ordering::Relaxed)
    }

    /// One of its files is closed, `bytes` long.
    pub fn file_closed(&self, bytes: u64) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Why it was taken out, if it was. A write in flight when the kernel
    /// turns a filesystem read-only (ext4's abort, `errors=remount-ro`)
    /// fails with EIO, the later ones with EROFS; ext4 sets the read-only
    /// flag a moment after the journal stops taking writes: the cause says
    /// so once the filesystem is read-only (one statvfs per look, only for
    /// a volume taken out for another cause than EROFS, until it is).
    fn cause(&self) -> Option<String> {
        let mut f = self.failed.lock().expect("volume");
        let c = f.as_mut()?;
        if !c.contains("Read-only file system")
            && !c.ends_with(RO_NOW)
            && crate::sys::fs_read_only(&self.dir)
        {
            c.push_str(RO_NOW);
        }
        Some(c.clone())
    }

    /// Its numbers now.
    pub fn state(&self) -> VolumeState {
        VolumeState {
            dir: self.dir.clone(),
            failed: self.cause(),
            failures: self.failures.load(Ordering::Relaxed),
            files_in_flight: self.in_flight.load(Ordering::Relaxed),
            files: self.files.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            ..Default::default()
        }
    }
}

/// The volumes of a store, shared by its writers.
#[derive(Debug)]
pub struct Volumes {
    list: Vec<Arc<Volume>>,
    /// Where the round-robin among equally loaded volumes goes on.
    next: AtomicUsize,
}

impl Volumes {
    /// The volumes, in the order given.
    pub fn new(list: Vec<Volume>) -> Self {
        Volumes {
            list: list.into_iter().map(Arc::new).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The `i`th volume.
    pub fn get(&self, i: usize) -> &Arc<Volume> {
        &self.list[i]
    }

    /// Every volume.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Volume>> {
        self.list.iter()
    }

    /// The volume for a new file: the healthy one with the fewest files in
    /// flight (a file being finished after a rotation counts twice: its
    /// blocks still drain to the disk), ties round-robin; None when every
    /// volume has failed.
    pub fn pick(&self) -> Option<usize> {
        self.pick_after(None)
    }

    /// [`Volumes::pick`] for the file after one on volume `prev`: `prev`
    /// counts one file more (the file before is about to be finished
    /// there), so a queue's next file goes to another volume unless that
    /// one is busier: there it is written beside the file before it, not
    /// behind it (on the same volume it waits until the file before is
    /// written, [`crate::sink::BlockSink::write_after`]).
    pub fn pick_after(&self, prev: Option<usize>) -> Option<usize> {
        let n = self.list.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut best: Option<(u64, usize)> = None;
        for k in 0..n {
            let i = (start + k) % n;
            let v = &self.list[i];
            if !v.ok() {
                continue;
            }
            let load = v.load() + u64::from(prev == Some(i));
            if best.is_none_or(|(l, _)| load < l) {
                best = Some((load, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// Takes volume `i` out for `cause` (the first cause is kept); whether
    /// this call took it out.
    pub fn fail(&self, i: usize, cause: &str) -> bool {
        let v = &self.list[i];
        let mut f = v.failed.lock().expect("volume");
        if f.is_some() {
            return false;
        }
        *f = Some(cause.to_owned());
        v.failures.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Whether any volume is in use.
    pub fn any_ok(&self) -> bool {
        self.list.iter().any(|v| v.ok())
    }

    /// Each volume's numbers now.
    pub fn states(&self) -> Vec<VolumeState> {
        self.list.iter().map(|v| v.state()).collect()
    }
}

/// Writes the store's description ([`wiretape_files::store`]) into each
/// volume, naming them all by absolute path (atomically: a temporary file
/// renamed over it). The failing path and error on failure.
pub fn write_description(dirs: &[PathBuf]) -> Result<(), (PathBuf, std::io::Error)> {
    let abs: Vec<PathBuf> = dirs
        .iter()
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.clone()))
        .collect();
    let text = wiretape_files::store::describe(&abs);
    for d in dirs {
        let path = d.join(wiretape_files::store::DESCRIPTION);
        let tmp = d.join(format!(".{}.tmp", wiretape_files::store::DESCRIPTION));
        std::fs::write(&tmp, &text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| (path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Volumes {
        Volumes::new(
            ["/a", "/b", "/c"]
                .iter()
                .map(|d| Volume::new(Path::new(d), true))
                .collect(),
        )
    }

    #[test]
    fn equal_loads_go_round_robin() {
        let v = three();
        let picks: Vec<usize> = (0..6).map(|_| v.pick().unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn the_least_loaded_volume_is_picked() {
        let v = three();
        v.get(0).file_opened();
        v.get(0).file_opened();
        v.get(1).file_opened();
        for _ in 0..4 {
            assert_eq!(v.pick(), Some(2));
        }
        v.get(0).file_closed(10);
        v.get(0).file_closed(10);
        assert_eq!(v.get(0).state().bytes, 20);
        assert_eq!(v.get(0).state().files, 2);
    }

    #[test]
    fn a_queues_next_file_goes_to_another_volume_unless_that_is_busier() {
        let v = three();
        // The current file on 1, one closing on 0 and one on 2: all equal
        // but 1 counts once more, so 0 or 2, never 1.
        for i in [0, 1, 2] {
            v.get(i).file_opened();
        }
        for _ in 0..6 {
            assert_ne!(v.pick_after(Some(1)), Some(1));
        }
        // Two more closing on 0 and on 2: 1 is the least busy after all.
        for i in [0, 0, 2, 2] {
            v.get(i).file_opened();
        }
        assert_eq!(v.pick_after(Some(1)), Some(1));
    }

    #[test]
    fn a_file_being_finished_counts_twice() {
        let v = three();
        // 0: one file finishing; 1: two files open (a slow queue's, say);
        // 2: three open.
        v.get(0).file_opened();
        v.get(0).closing_started();
        v.get(1).file_opened();
        v.get(1).file_opened();
        for _ in 0..3 {
            v.get(2).file_opened();
        }
        // 0 and 1 tie (2 each): round-robin between them, never 2.
        let picks: Vec<usize> = (0..4).map(|_| v.pick().unwrap()).collect();
        assert!(picks.contains(&0) && picks.contains(&1) && !picks.contains(&2));
        v.get(1).file_opened();
        assert_eq!(v.pick(), Some(0));
        v.get(0).closing_done();
        v.get(0).file_closed(1);
        assert_eq!(v.get(0).load(), 0);
    }

    #[test]
    fn a_failed_volume_is_never_picked_and_counted_once() {
        let v = three();
        assert!(v.fail(1, "EIO"));
        assert!(!v.fail(1, "again"));
        for _ in 0..6 {
            assert_ne!(v.pick(), Some(1));
        }
        let s = v.get(1).state();
        assert_eq!((s.failures, s.failed.as_deref()), (1, Some("EIO")));
        v.fail(0, "full");
        v.fail(2, "gone");
        assert_eq!(v.pick(), None);
        assert!(!v.any_ok());
    }
}
