//! Where blocks go. [`BlockSink`] is the seam between block building and the
//! engine that writes blocks; [`FileSink`] is the plain write(2) engine.

use crate::StorageError;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes whole blocks of records, in order, to one file.
pub trait BlockSink: Send {
    /// Writes one block. On error nothing of the block may be assumed written.
    fn write_block(&mut self, block: &[u8]) -> Result<(), StorageError>;
    /// Makes everything written so far durable and closes the file.
    fn finish(&mut self) -> Result<(), StorageError>;
    /// Bytes handed to the file so far.
    fn bytes(&self) -> u64;
    /// The file's path.
    fn path(&self) -> &Path;
}

/// A file written with plain `write(2)` (buffered by the page cache).
pub struct FileSink {
    file: Option<File>,
    path: PathBuf,
    bytes: u64,
}

impl FileSink {
    /// Creates `path`; fails if it exists (wiretape never overwrites a capture).
    pub fn create(path: impl Into<PathBuf>) -> Result<Self, StorageError> {
        let path = path.into();
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| StorageError::Create {
                path: path.clone(),
                source,
            })?;
        Ok(FileSink {
            file: Some(file),
            path,
            bytes: 0,
        })
    }
}

impl BlockSink for FileSink {
    fn write_block(&mut self, block: &[u8]) -> Result<(), StorageError> {
        let f = self.file.as_mut().ok_or_else(|| StorageError::Write {
            path: self.path.clone(),
            source: std::io::Error::other("file already closed"),
        })?;
        match f.write_all(block) {
            Ok(()) => {
                self.bytes += block.len() as u64;
                Ok(())
            }
            Err(e) => {
                // A short write leaves part of the block in the file: cut the
                // file back to the last whole block so it stays valid.
                let _ = f.set_len(self.bytes);
                Err(StorageError::from_write(&self.path, e))
            }
        }
    }

    fn finish(&mut self) -> Result<(), StorageError> {
        if let Some(f) = self.file.take() {
            f.sync_data()
                .map_err(|e| StorageError::from_write(&self.path, e))?;
        }
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn path(&self) -> &Path {
        &self.path
    }
}
