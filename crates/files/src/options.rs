//! How a reader reads a store: the age identities it decrypts with and
//! where the sidecars of Stenographer's files are ([`ReadOptions`]).
//!
//! A value, handed to every reader that needs it (no process-wide
//! setting): a tool with two stores and two keys reads both side by side,
//! each with its own options. Cheap to clone (shared inside).

use crate::crypt::Identity;
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
            .finish()
    }
}
