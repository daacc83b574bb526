//! How a reader reads a store: the age identities it decrypts with and
//! where the sidecars of Stenographer's files are ([`ReadOptions`]).
//!
//! A value, handed to every reader that needs it (no process-wide
//! setting): a tool with two stores and two keys reads both side by side,
//! each with its own options. Cheap to clone (shared inside).
//!
//! The options also hold what a reader keeps of the store's directories
//! between reads (their symbolic links resolved; with
//! [`ReadOptions::with_kept_listings`], their listings): shared by their
//! clones, never by two options made apart, and gone with the last clone.

use crate::crypt::Identity;
use crate::kept::Kept;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a reader needs beyond a file's path (see the module docs). The
/// default decrypts nothing and looks for every sidecar beside its capture.
#[derive(Clone, Default)]
pub struct ReadOptions(Arc<Inner>);

#[derive(Clone, Default)]
struct Inner {
    identities: Vec<Identity>,
    steno_sidecars: Option<PathBuf>,
    kept: Arc<Kept>,
}

impl ReadOptions {
    /// No identity, sidecars beside their captures.
    pub fn new() -> Self {
        Self::default()
    }

    /// These options decrypting age files with `ids` (replacing any before;
    /// what `age-keygen` writes, [`crate::crypt::read_identity_file`]).
    pub fn with_identities(mut self, ids: Vec<Identity>) -> Self {
        Arc::make_mut(&mut self.0).identities = ids;
        self
    }

    /// These options with the sidecars of Stenographer's files
    /// ([`crate::steno`]) under `dir` (made absolute): never beside them,
    /// in Stenographer's directories ([`crate::naming`] says where in it).
    pub fn with_steno_sidecar_dir(mut self, dir: &Path) -> Self {
        let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
        Arc::make_mut(&mut self.0).steno_sidecars = Some(abs);
        self
    }

    /// The identities age files are decrypted with.
    pub fn identities(&self) -> &[Identity] {
        &self.0.identities
    }

    /// Where the sidecars of Stenographer's files are, if given.
    pub fn steno_sidecar_dir(&self) -> Option<&Path> {
        self.0.steno_sidecars.as_deref()
    }

    /// These options keeping, for as long as they (or a clone) live, the
    /// names in each store directory they list ([`ReadOptions::list_any`]),
    /// listing one again only when its mtime moved, and the state of each
    /// of stenotype's finished files while its directory's mtime holds: a
    /// long-running server (`wiretape api`) then reads no directory block
    /// for a query on a cold page cache, as Stenographer's server lists its
    /// directories on its own schedule, not per query. A listing is kept
    /// only when the directory was last changed more than 2 s before it (a
    /// change within the same tick of the mtime clock would otherwise go
    /// unseen). What was kept before is dropped.
    pub fn with_kept_listings(mut self) -> Self {
        let cap = self.0.kept.pages_cap();
        Arc::make_mut(&mut self.0).kept = Arc::new(Kept::new(true, cap));
        self
    }

    /// These options keeping, for as long as they (or a clone) live, the
    /// upper pages of every key index opened with them
    /// ([`crate::keys::KeyIndex::open`]: segment headers with their root
    /// pages, fence levels; never data pages) in memory, up to `cap_bytes`
    /// in all: a long-running server (`wiretape api`) then reads only a
    /// lookup's data pages from disk, as Stenographer's server keeps its
    /// leveldb tables' index blocks. A file's are reused only while its
    /// inode, length and mtime are the same. What was kept before is
    /// dropped.
    pub fn with_kept_index_pages(mut self, cap_bytes: usize) -> Self {
        let on = self.0.kept.listings_on;
        Arc::make_mut(&mut self.0).kept = Arc::new(Kept::new(on, Some(cap_bytes)));
        self
    }

    /// The capture files in `dir`, as [`crate::naming::list_any`] lists
    /// them, its directories' listings kept where these options say
    /// ([`ReadOptions::with_kept_listings`]).
    pub fn list_any(&self, dir: &Path, prefix: Option<&str>) -> std::io::Result<Vec<PathBuf>> {
        crate::naming::list_any_in(dir, prefix, Some(&self.0.kept))
    }

    /// The directories a reader given `inputs` reads, as
    /// [`crate::store::expand_inputs`] says; where these options keep
    /// listings ([`ReadOptions::with_kept_listings`]), a directory whose
    /// kept listing (at its mtime now) names no description is not asked
    /// for one.
    pub fn expand_inputs(&self, inputs: &[PathBuf]) -> Vec<PathBuf> {
        crate::store::expand_inputs_in(inputs, Some(&self.0.kept))
    }

    /// A capture file's metadata, as [`std::fs::metadata`] says. Where
    /// these options keep key indexes open
    /// ([`ReadOptions::with_kept_index_pages`]: a long-running server's),
    /// one of Stenographer's files ([`crate::steno`]) is kept open as they
    /// are (as Stenographer's server holds its files): a query on a cold
    /// page cache then asks no inode of it from the disk (while they keep
    /// fewer files than their cap: a capture file never closes a key
    /// index). Answered by the path every time (a file gone is an error; a
    /// deleted one is closed within seconds). Files of ours are never
    /// held: retention frees their space the moment it deletes them.
    pub fn capture_metadata(&self, path: &Path) -> std::io::Result<std::fs::Metadata> {
        if crate::naming::is_steno(path) {
            self.0.kept.stat_if_room(path)
        } else {
            std::fs::metadata(path)
        }
    }

    /// Whether the sidecar `path` (such as [`ReadOptions::index_path`]'s)
    /// is there. Where these options keep key indexes open
    /// ([`ReadOptions::with_kept_index_pages`]: a long-running server's),
    /// the sidecar found is kept open as the key indexes are (the least
    /// recently used closed first, a deleted one closed within seconds): a
    /// query on a cold page cache then asks no inode of it from the disk.
    pub fn sidecar_exists(&self, path: &Path) -> bool {
        self.0.kept.exists(path)
    }

    /// What these options keep (crate-internal readers).
    pub(crate) fn kept(&self) -> &Kept {
        &self.0.kept
    }

    /// The same, to hold beyond a borrow of these options.
    pub(crate) fn kept_arc(&self) -> &Arc<Kept> {
        &self.0.kept
    }
}

impl std::fmt::Debug for ReadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The public keys only: a secret key in a log is a secret key lost.
        let ids: Vec<String> = self
            .0
            .identities
            .iter()
            .map(|i| i.to_public().to_string())
            .collect();
        f.debug_struct("ReadOptions")
            .field("identities", &ids)
            .field("steno_sidecar_dir", &self.0.steno_sidecars)
            .field("kept_listings", &self.0.kept.listings_on)
            .field("kept_index_pages", &self.0.kept.pages_cap())
            .finish()
    }
}
