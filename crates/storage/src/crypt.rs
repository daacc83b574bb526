//! Encryption at rest (`record --encrypt-to`), the writing: an
//! [`AgeSink`] sits in front of a file's [`BlockSink`] (behind the
//! compressor when both are on) and turns the stream it is given into an
//! age file (the format and the readers are `wiretape_files::crypt`'s).
//! The ciphertext fills the file sink's aligned blocks like any other
//! bytes, so O_DIRECT and io_uring write it unchanged.
//!
//! The age STREAM seals 64 KiB chunks: a chunk goes to the file once it is
//! full (and the next byte has come), the last one when the file closes.
//! So a flush (a quiet link) puts every whole chunk in the file, and up to
//! 64 KiB of records wait in memory until their chunk fills or the file is
//! closed; a crash loses those (the file is read up to its last whole
//! chunk, as a torn tail: see `wiretape_files::crypt`).
//!
//! A volume that fails: the sink keeps the plain blocks it was handed
//! until the chunks that hold them are written (the inner sink's
//! [`BlockSink::written`]), so it gives back ([`BlockSink::take_unwritten`])
//! every record its file does not keep: the file keeps the chunks that end
//! at or before the inner sink's `kept` offset (a torn tail after them,
//! which readers stop at and `repair --identity` closes), and the records
//! from the one that straddles that chunk boundary on go to another
//! volume. What the file keeps is the file's truth, not the sink's belief:
//! a failed write, one in flight beside it, or the last writes of a file
//! whose close failed may have landed all the same, and readers read
//! every chunk that decrypts. So the file is cut at `kept`, and where it
//! cannot be (a volume gone read-only) each chunk past it is read back once
//! every write has ended and its hash compared with the one noted when it
//! was sealed: those on disk whole stay with the file, and only the records
//! past the last of them are given back. The plain blocks kept meanwhile
//! are at most what the inner sink has waiting for the disk, plus one chunk
//! and one block (and a hash for each of those chunks).

use crate::sink::{Block, BlockSink, SinkStats, Unwritten};
use std::collections::VecDeque;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use wiretape_files::crypt::{Recipients, CHUNK, CHUNK_SEALED};
use wiretape_files::StorageError;

/// Where the age writer puts its ciphertext: a buffer the sink empties
/// into its file's blocks after each write (one lock per block written,
/// never per frame).
#[derive(Clone, Default)]
struct Spill(Arc<Mutex<Vec<u8>>>);

impl Write for Spill {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A [`BlockSink`] that encrypts its stream into the file's real sink.
pub struct AgeSink<S: BlockSink> {
    inner: S,
    /// The inner sink's block being filled with ciphertext.
    out: Option<Block>,
    age: Option<age::stream::StreamWriter<Spill>>,
    spill: Spill,
    /// Ciphertext taken from the spill, to be put in blocks.
    sealed: Vec<u8>,
    block_size: usize,
    /// Free blocks for the builder.
    free: Vec<Block>,
    /// The age header and the payload's nonce: where chunk 0 starts.
    payload: u64,
    /// Plain bytes handed in so far.
    plain: u64,
    /// The plain blocks whose chunks are not all written yet, each with
    /// the plain offset of its first byte, in order (and, after a failure,
    /// every block handed in): what a failure gives back.
    held: VecDeque<(u64, Block)>,
    /// A write failed: nothing more goes to the inner sink.
    failed: bool,
    /// Ciphertext bytes made so far (the header included).
    sealed_at: u64,
    /// The hash of the chunk being sealed, so far.
    xxh: twox_hash::XxHash32,
    /// Each chunk (the header first, as one) not known written yet: its
    /// file range and the hash of its bytes, to tell after a failure
    /// whether it is on disk whole (`keep_landed`).
    sums: VecDeque<(u64, u64, u32)>,
}

/// The plain bytes that whole chunks of a payload starting at `payload`
/// hold in an age file's first `c` bytes.
fn plain_in(payload: u64, c: u64) -> u64 {
    c.saturating_sub(payload) / CHUNK_SEALED * CHUNK
}

impl<S: BlockSink> AgeSink<S> {
    /// Encrypts into `inner` to `to` (at least one recipient): the age
    /// header is the file's first bytes.
    pub fn new(inner: S, to: &Recipients) -> Result<Self, StorageError> {
        let path = inner.path().to_owned();
        let enc = age::Encryptor::with_recipients(to.0.iter().map(|r| r as &dyn age::Recipient))
            .map_err(|e| StorageError::Write {
                path: path.clone(),
                source: std::io::Error::other(format!("age: {e}")),
            })?;
        let spill = Spill::default();
        let age = enc
            .wrap_output(spill.clone())
            .map_err(|e| StorageError::from_write(&path, e))?;
        let block_size = inner.block_size();
        // The header and the nonce, written by `wrap_output`.
        let payload = spill.0.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
        let mut s = AgeSink {
            inner,
            out: None,
            age: Some(age),
            spill,
            sealed: Vec::new(),
            block_size,
            free: Vec::new(),
            payload,
            plain: 0,
            held: VecDeque::new(),
            failed: false,
            sealed_at: 0,
            xxh: twox_hash::XxHash32::with_seed(0),
            sums: VecDeque::new(),
        };
        s.out = Some(s.inner.first_block());
        s.put_sealed()?;
        Ok(s)
    }

    /// Moves the ciphertext the age writer made into the inner sink.
    fn put_sealed(&mut self) -> Result<(), StorageError> {
        {
            let mut g = self.spill.0.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::swap(&mut *g, &mut self.sealed);
        }
        self.note_sealed();
        let mut bytes = &self.sealed[..];
        while !bytes.is_empty() {
            let mut b = self.out.take().unwrap_or_else(|| self.inner.first_block());
            let (buf, len) = b.space();
            let k = bytes.len().min(buf.len() - *len);
            buf[*len..*len + k].copy_from_slice(&bytes[..k]);
            *len += k;
            bytes = &bytes[k..];
            if *len == buf.len() {
                match self.inner.submit(b) {
                    Ok(n) => b = n,
                    Err(e) => {
                        self.sealed.clear();
                        self.failed = true;
                        return Err(e);
                    }
                }
            }
            self.out = Some(b);
        }
        self.sealed.clear();
        Ok(())
    }

    /// Hashes the ciphertext in `sealed` chunk by chunk (once per chunk,
    /// never per frame), noting each chunk's range and hash as it ends (the
    /// last one, shorter, once the stream is finished).
    fn note_sealed(&mut self) {
        use std::hash::Hasher;
        let sealed = std::mem::take(&mut self.sealed);
        let mut bytes = &sealed[..];
        while !bytes.is_empty() {
            let end = match self.sealed_at.checked_sub(self.payload) {
                None => self.payload,
                Some(p) => self.payload + (p / CHUNK_SEALED + 1) * CHUNK_SEALED,
            };
            let k = bytes.len().min((end - self.sealed_at) as usize);
            self.xxh.write(&bytes[..k]);
            bytes = &bytes[k..];
            self.sealed_at += k as u64;
            if self.sealed_at == end {
                self.end_chunk();
            }
        }
        self.sealed = sealed;
        if self.age.is_none() && self.sums.back().is_none_or(|s| s.1 < self.sealed_at) {
            self.end_chunk();
        }
    }

    /// The chunk being hashed ends at `sealed_at`.
    fn end_chunk(&mut self) {
        let start = match self.sealed_at.checked_sub(self.payload) {
            Some(p) if p > 0 => self.payload + (p - 1) / CHUNK_SEALED * CHUNK_SEALED,
            _ => 0,
        };
        let sum = self.xxh.finish_32();
        self.sums.push_back((start, self.sealed_at, sum));
        self.xxh = twox_hash::XxHash32::with_seed(0);
    }

    /// Encrypts `data` (what the writer handed on).
    fn seal(&mut self, data: &[u8]) -> Result<(), StorageError> {
        let path = self.inner.path().to_owned();
        let w = self
            .age
            .as_mut()
            .ok_or(StorageError::Internal("an age file written after its end"))?;
        w.write_all(data)
            .map_err(|e| StorageError::from_write(&path, e))?;
        self.put_sealed()
    }

    /// Frees the plain blocks whose chunks are all written.
    fn release(&mut self) {
        let done = self.inner.written();
        while self.sums.front().is_some_and(|s| s.1 <= done) {
            self.sums.pop_front();
        }
        self.release_to(plain_in(self.payload, done));
    }

    /// Frees the plain blocks that end by plain offset `done`.
    fn release_to(&mut self, done: u64) {
        while let Some((at, b)) = self.held.front() {
            if at + b.len() as u64 > done {
                break;
            }
            let (_, mut b) = self.held.pop_front().expect("a front");
            b.clear();
            self.free.push(b);
        }
    }

    /// The sink the ciphertext goes to.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The same, mutably.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// After a failure, with the inner sink's cut at `c`: the plain bytes
    /// the file keeps. The file is cut at `c` (as the inner sink does when
    /// it finishes); where it cannot be (a volume that takes no more
    /// writes) the chunks past `c` that are on disk whole stay with the
    /// file: a write that failed (EIO from a filesystem that aborted
    /// mid-write), one in flight beside it, or the last ones of a file
    /// whose close failed after them may have landed, and readers read
    /// every chunk that decrypts, so giving their records back too would
    /// put them in two files. Each chunk, in order, is read back and its
    /// hash compared with the one noted when it was sealed; the first that
    /// differs or is not in the file whole ends what is kept. Called once
    /// the inner sink has nothing in flight (its `take_unwritten` waits for
    /// every write, its `finish` too). Once per failure.
    fn keep_landed(&mut self, c: u64) -> u64 {
        use std::os::unix::fs::FileExt;
        let mut kept = plain_in(self.payload, c);
        let Ok(f) = std::fs::File::open(self.inner.path()) else {
            return kept;
        };
        let Ok(len) = f.metadata().map(|m| m.len()) else {
            return kept;
        };
        if len <= c || !self.inner.offsets_in_file() || self.inner.cut_at(c).is_ok() {
            return kept;
        }
        let mut disk = Vec::new();
        for &(start, end, sum) in &self.sums {
            // The plain bytes up to the end of this chunk.
            let upto = if self.age.is_none() && end == self.sealed_at {
                self.plain
            } else {
                plain_in(self.payload, end)
            };
            if end <= c && upto <= kept {
                continue;
            }
            disk.resize((end - start) as usize, 0);
            if end > len
                || f.read_exact_at(&mut disk, start).is_err()
                || twox_hash::XxHash32::oneshot(0, &disk) != sum
            {
                break;
            }
            kept = kept.max(upto);
        }
        kept
    }

    fn take_free(&mut self) -> Block {
        self.free
            .pop()
            .unwrap_or_else(|| Block::new(self.block_size))
    }
}

impl<S: BlockSink> BlockSink for AgeSink<S> {
    fn submit(&mut self, block: Block) -> Result<Block, StorageError> {
        if block.is_empty() {
            return Ok(block);
        }
        let r = if self.failed {
            Err(crate::sink::failed_before(self.inner.path()))
        } else {
            self.seal(block.data())
        };
        // Kept until its chunks are written (given back on a failure).
        let len = block.len() as u64;
        self.held.push_back((self.plain, block));
        self.plain += len;
        if r.is_err() {
            self.failed = true;
        }
        r?;
        self.release();
        Ok(self.take_free())
    }

    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        let b = self.submit(block)?;
        let out = self.out.take().unwrap_or_else(|| self.inner.first_block());
        match self.inner.flush(out) {
            Ok(o) => self.out = Some(o),
            Err(e) => {
                self.failed = true;
                return Err(e);
            }
        }
        self.release();
        Ok(b)
    }

    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        let r = self.submit(block).and_then(|_| match self.age.take() {
            Some(w) => w
                .finish()
                .map_err(|e| StorageError::from_write(self.inner.path(), e))
                .and_then(|_| self.put_sealed()),
            None => Ok(()),
        });
        let mut out = self.out.take().unwrap_or_else(|| self.inner.first_block());
        if r.is_err() {
            // Nothing more after the failed write: the inner sink only
            // waits for its writes and cuts its file at the failure.
            out.clear();
        }
        let f = self.inner.finish(out);
        r.and(f)
    }

    fn bytes(&self) -> u64 {
        self.inner.bytes()
    }

    fn written(&self) -> u64 {
        plain_in(self.payload, self.inner.written())
    }

    fn offsets_in_file(&self) -> bool {
        false
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn first_block(&mut self) -> Block {
        self.take_free()
    }

    fn stats(&self) -> SinkStats {
        self.inner.stats()
    }

    fn latency(&self) -> Option<&wiretape_timestamp::hist::Histogram<u64>> {
        self.inner.latency()
    }

    fn write_after(&mut self, gate: Arc<crate::sink::Gate>) {
        self.inner.write_after(gate)
    }

    fn open_when_done(&mut self, gate: Arc<crate::sink::Gate>) {
        self.inner.open_when_done(gate)
    }

    /// The plain records from the one that straddles the end of the last
    /// chunk the file keeps whole (the inner sink's `kept`, or what it has
    /// written when it gives nothing back).
    fn take_unwritten(&mut self) -> Option<Unwritten> {
        self.failed = true;
        let c = match self.inner.take_unwritten() {
            Some(u) => u.kept,
            None => self.inner.written(),
        };
        let kept = self.keep_landed(c);
        self.release_to(kept);
        let Some(&(off, _)) = self.held.front() else {
            // The file keeps the whole stream (a close that failed after
            // its writes landed): nothing to give back, and it says so.
            return Some(Unwritten {
                off: self.plain,
                kept: self.plain,
                blocks: Vec::new(),
            });
        };
        Some(Unwritten {
            off,
            kept,
            blocks: self.held.drain(..).map(|(_, b)| b).collect(),
        })
    }
}

/// Closes an age file cut by a crash (`repair`): its plain stream is kept
/// up to `keep` bytes, `extra` bytes appended (an LZ4 frame's end mark),
/// and the last chunk sealed again with the STREAM's last flag, so that
/// the file is a whole age file again (`age -d` reads it). Needs an
/// identity of one of its recipients among `ids`: the payload key comes
/// from the file key its header wraps. Returns the file's new length.
pub fn close_cut(
    path: &Path,
    keep: u64,
    extra: &[u8],
    ids: &[wiretape_files::crypt::Identity],
) -> Result<u64, StorageError> {
    use age::secrecy::ExposeSecret;
    use chacha20poly1305::aead::{Aead, KeyInit};
    use std::io::{Read, Seek, SeekFrom};
    use wiretape_files::crypt::{AgeReader, CHUNK, CHUNK_SEALED};
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    let bad = |why: &str| {
        rd(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            why.to_owned(),
        ))
    };
    let mut f = std::fs::File::open(path).map_err(rd)?;
    let mut head = vec![0u8; 64 << 10];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]).map_err(rd)? {
            0 => break,
            k => n += k,
        }
    }
    head.truncate(n);
    // The header: the version line, the stanzas, the MAC line; then the
    // payload's 16-byte nonce.
    let mut at = wiretape_files::crypt::MAGIC.len();
    let mut stanzas = Vec::new();
    while !head[at..].starts_with(b"---") {
        match age_core::format::read::age_stanza(&head[at..]) {
            Ok((rest, s)) => {
                at = head.len() - rest.len();
                stanzas.push(age_core::format::Stanza::from(s));
            }
            Err(_) => return Err(bad("an age header wiretape cannot parse")),
        }
    }
    let eol = head[at..]
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| bad("an age header cut short"))?;
    let nonce_at = at + eol + 1;
    let payload = (nonce_at + 16) as u64;
    let nonce = head
        .get(nonce_at..nonce_at + 16)
        .ok_or_else(|| bad("an age header cut short"))?;
    let file_key = ids
        .iter()
        .find_map(|i| age::Identity::unwrap_stanzas(i, &stanzas))
        .and_then(Result::ok)
        .ok_or_else(|| rd(wiretape_files::crypt::identity_error(path, ids)))?;
    let key = age_core::primitives::hkdf(nonce, b"payload", file_key.expose_secret());
    // The plain bytes of the new last chunk (and of one before it when
    // `extra` spills over a chunk).
    let total = keep + extra.len() as u64;
    let first = if total == 0 { 0 } else { (total - 1) / CHUNK };
    let from = first.min(keep / CHUNK) * CHUNK;
    let mut tail = vec![0u8; (keep - from) as usize];
    let mut r = AgeReader::open(path, ids).map_err(rd)?;
    r.seek(SeekFrom::Start(from)).map_err(rd)?;
    r.read_exact(&mut tail)
        .map_err(|_| bad("the bytes to keep do not decrypt"))?;
    tail.extend_from_slice(extra);
    let aead = chacha20poly1305::ChaCha20Poly1305::new(&key.into());
    let mut sealed = Vec::with_capacity(tail.len() + 32);
    let chunks: Vec<&[u8]> = if tail.is_empty() {
        vec![&[][..]]
    } else {
        tail.chunks(CHUNK as usize).collect()
    };
    let last = chunks.len() - 1;
    for (i, c) in chunks.iter().enumerate() {
        let mut n12 = [0u8; 12];
        n12[3..11].copy_from_slice(&(from / CHUNK + i as u64).to_be_bytes());
        n12[11] = u8::from(i == last);
        let ct = aead
            .encrypt(&n12.into(), *c)
            .map_err(|_| bad("sealing the last chunk failed"))?;
        sealed.extend_from_slice(&ct);
    }
    let cut = payload + from / CHUNK * CHUNK_SEALED;
    crate::repair::truncate(path, cut)?;
    let mut w = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(rd)?;
    w.write_all(&sealed)
        .and_then(|()| w.sync_data())
        .map_err(|e| StorageError::from_write(path, e))?;
    Ok(cut + sealed.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::FileSink;

    /// A file whose writes all landed but whose close failed after them
    /// (its volume went read-only: the exact length or the fsync refused),
    /// as the io_uring sink then stands: no write failed, so it gives
    /// nothing back and knows written only up to `written` (its aligned
    /// offset, say); the file cannot be cut.
    struct ClosedBadly {
        inner: FileSink,
        written: u64,
    }

    impl BlockSink for ClosedBadly {
        fn submit(&mut self, block: Block) -> Result<Block, StorageError> {
            self.inner.submit(block)
        }
        fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
            self.inner.flush(block)
        }
        fn finish(&mut self, block: Block) -> Result<(), StorageError> {
            self.inner.finish(block)?;
            Err(StorageError::from_write(
                self.inner.path(),
                std::io::Error::from_raw_os_error(libc::EROFS),
            ))
        }
        fn bytes(&self) -> u64 {
            self.inner.bytes()
        }
        fn written(&self) -> u64 {
            self.written.min(self.inner.bytes())
        }
        fn path(&self) -> &Path {
            self.inner.path()
        }
        fn block_size(&self) -> usize {
            self.inner.block_size()
        }
        fn first_block(&mut self) -> Block {
            self.inner.first_block()
        }
        fn cut_at(&mut self, _off: u64) -> std::io::Result<()> {
            Err(std::io::Error::from_raw_os_error(libc::EROFS))
        }
    }

    /// The plain bytes a reader gets from the age file at `path`.
    fn readable(path: &Path, id: &wiretape_files::crypt::Identity) -> u64 {
        use std::io::Read;
        let mut r = wiretape_files::crypt::AgeReader::open(path, std::slice::from_ref(id)).unwrap();
        let (mut n, mut buf) = (0u64, vec![0u8; 1 << 16]);
        while let Ok(k) = r.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        n
    }

    /// A failed close whose writes landed (whole, or up to some chunk: the
    /// file cut short by hand, as a write that did not land leaves it):
    /// what the file holds and what the sink gives back are the stream,
    /// each byte once; nothing a reader reads is given back too (issue 37).
    #[test]
    fn a_file_whose_close_failed_keeps_the_chunks_that_landed_and_gives_back_only_the_rest() {
        let d = std::env::temp_dir().join(format!("wt-crypt-landed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let id = age::x25519::Identity::generate();
        let to = Recipients(vec![id.to_public()]);
        let total: u64 = 9 * 100_000 + 777;
        for (case, (written, cut)) in [
            (0u64, None),
            (300_000, None),
            (0, Some(5 * CHUNK_SEALED + 1000)),
            (200_000, Some(3 * CHUNK_SEALED)),
            (0, Some(100)),
        ]
        .into_iter()
        .enumerate()
        {
            let path = d.join(format!("f{case}.pcap.age"));
            let inner = ClosedBadly {
                inner: FileSink::with_block_size(&path, 1 << 16).unwrap(),
                written,
            };
            let mut s = AgeSink::new(inner, &to).unwrap();
            let mut left = total;
            let mut i = 0u8;
            while left > 0 {
                let n = (left as usize).min(100_000);
                let mut b = Block::new(n);
                let (buf, len) = b.space();
                buf[..n].fill(i);
                *len = n;
                i = i.wrapping_add(1);
                left -= n as u64;
                s.submit(b).unwrap();
            }
            assert!(s.finish(Block::new(4096)).is_err(), "the close fails");
            if let Some(c) = cut {
                crate::repair::truncate(&path, s.payload + c).unwrap();
            }
            let in_file = readable(&path, &id);
            let (kept, back) = match s.take_unwritten() {
                Some(u) => {
                    let end = u.off + u.blocks.iter().map(|b| b.len() as u64).sum::<u64>();
                    assert_eq!(end, total, "case {case}: given back to the end");
                    assert!(
                        u.off <= u.kept,
                        "case {case}: from a record at or before kept"
                    );
                    (u.kept, end - u.kept)
                }
                None => panic!("case {case}: a failed sink says what its file keeps"),
            };
            assert_eq!(
                (kept, kept + back),
                (in_file, total),
                "case {case}: kept, and kept + given back (written {written}, cut {cut:?})"
            );
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
