//! What a reader keeps of one store's directories between reads: held by
//! its [`crate::ReadOptions`] (shared by their clones), never by the
//! process. Two stores read with two options keep nothing in common; what
//! is kept is only of the directories read through those options (the
//! store's own), and each entry is used only while its directory is the
//! same (its identity or mtime, as each kind says).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

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
            ..Kept::default()
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
