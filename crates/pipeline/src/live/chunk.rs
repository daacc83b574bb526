//! The memory every live consumer reads: large aligned chunks of pcap-ns
//! records, written once by a queue's writer thread and read in place by
//! subscribers, the time-travel ring, dumps and the PCAP-over-IP server.
//! All the `unsafe` of the live path is in this module.
//!
//! # Invariants
//! - A [`Region`] is one anonymous `mmap` (huge pages where the kernel gives
//!   them), unmapped when the last [`Chunk`] cut from it is gone. Chunks cut
//!   from one region never overlap: [`Pool::grow`] hands out each range once.
//! - A [`Chunk`] has exactly one writer: the [`OpenChunk`] made from it when
//!   it was taken out of its pool by value (nobody else held it then). The
//!   writer appends at `len >= committed` and publishes by storing
//!   `committed = len` with `Release`; readers load `committed` with
//!   `Acquire` and read only below it. Bytes below `committed` are never
//!   written again while anyone can read them.
//! - A chunk goes back to its pool only by value, when the last
//!   [`ChunkRef`] to it is dropped (`Arc::into_inner` gives it to exactly one
//!   dropper), so a recycled chunk has no readers left; [`Chunk::reset`]
//!   then takes `&mut self`.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Bytes of a record header: seconds, nanoseconds, captured length,
/// original length (u32 little-endian each), as in a pcap-ns file.
pub(crate) const RECORD_HEADER: usize = 16;

/// How the kernel backs a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugePages {
    /// Explicit huge pages (`MAP_HUGETLB`, from `vm.nr_hugepages`).
    HugeTlb,
    /// Ordinary pages with transparent huge pages asked for (`MADV_HUGEPAGE`).
    Transparent,
    /// Ordinary pages.
    No,
}

impl HugePages {
    /// `hugetlb`, `transparent` or `no`.
    pub fn name(self) -> &'static str {
        match self {
            HugePages::HugeTlb => "hugetlb",
            HugePages::Transparent => "transparent",
            HugePages::No => "no",
        }
    }
}

const HUGE_2M: usize = 2 << 20;

/// One anonymous mapping, populated at creation.
pub(crate) struct Region {
    ptr: NonNull<u8>,
    len: usize,
    huge: HugePages,
}

// SAFETY: a Region is plain memory owned by this value; all access to its
// bytes goes through Chunks, whose invariants (module docs) rule out data
// races: one writer per chunk, above what readers read.
unsafe impl Send for Region {}
// SAFETY: as above; &Region itself gives no access to the bytes.
unsafe impl Sync for Region {}

impl Region {
    /// Maps `len` bytes (rounded up to a page; to 2 MiB when huge pages
    /// are tried), touched so that no page fault is left for the data path.
    fn map(len: usize) -> std::io::Result<Region> {
        let page = 4096usize;
        let len = len.max(page).div_ceil(page) * page;
        if len >= HUGE_2M {
            let hl = len.div_ceil(HUGE_2M) * HUGE_2M;
            // SAFETY: an anonymous private mapping at an address the kernel
            // chooses; no memory of ours is involved. The result is checked.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    hl,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE
                        | libc::MAP_ANONYMOUS
                        | libc::MAP_HUGETLB
                        | libc::MAP_POPULATE,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                if let Some(ptr) = NonNull::new(p.cast::<u8>()) {
                    return Ok(Region {
                        ptr,
                        len: hl,
                        huge: HugePages::HugeTlb,
                    });
                }
            }
        }
        // SAFETY: as above, without huge pages.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(std::io::Error::last_os_error)?;
        let mut huge = HugePages::No;
        if len >= HUGE_2M {
            // SAFETY: advice on the mapping just made, which we own.
            if unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) } == 0 {
                huge = HugePages::Transparent;
            }
        }
        let r = Region { ptr, len, huge };
        // Fault every page in now (MADV_POPULATE_WRITE, else one write per
        // page), so that the writer thread never takes a page fault.
        // SAFETY: advice on our own mapping; failure is handled below.
        if unsafe {
            libc::madvise(p, len, 23 /* MADV_POPULATE_WRITE */)
        } != 0
        {
            for off in (0..len).step_by(page) {
                // SAFETY: off < len: inside the mapping, which nothing else
                // references yet (the Region was just made).
                unsafe { r.ptr.as_ptr().add(off).write_volatile(0) };
            }
        }
        Ok(r)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, with its length; the last
        // reference to it is going (Chunks hold an Arc<Region>).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Where chunks of one queue come from and go back to.
pub(crate) struct Pool {
    free: Mutex<Vec<Chunk>>,
    chunk_size: usize,
    /// Chunks made so far (all regions).
    made: AtomicUsize,
    /// How the first (largest) region is backed.
    huge: Mutex<Option<HugePages>>,
}

impl Pool {
    /// An empty pool of chunks of `chunk_size` bytes.
    pub(crate) fn new(chunk_size: usize) -> Arc<Pool> {
        Arc::new(Pool {
            free: Mutex::new(Vec::new()),
            chunk_size,
            made: AtomicUsize::new(0),
            huge: Mutex::new(None),
        })
    }

    /// Makes `n` more chunks in one region and puts them in the free list.
    pub(crate) fn grow(self: &Arc<Self>, n: usize) -> std::io::Result<()> {
        if n == 0 {
            return Ok(());
        }
        let region = Arc::new(Region::map(n * self.chunk_size)?);
        let mut huge = self.huge.lock().expect("pool");
        huge.get_or_insert(region.huge);
        drop(huge);
        let mut free = self.free.lock().expect("pool");
        for i in 0..n {
            free.push(Chunk {
                region: region.clone(),
                off: i * self.chunk_size,
                cap: self.chunk_size,
                committed: AtomicUsize::new(0),
                frames: AtomicU32::new(0),
                first_ts: AtomicU64::new(0),
                last_ts: AtomicU64::new(0),
                seq: 0,
                home: Arc::downgrade(self),
            });
        }
        self.made.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    /// A free chunk, if one is.
    pub(crate) fn take(&self) -> Option<Chunk> {
        self.free.lock().expect("pool").pop()
    }

    /// Chunks made so far.
    #[cfg(test)]
    pub(crate) fn made(&self) -> usize {
        self.made.load(Ordering::Relaxed)
    }

    /// Chunks free now.
    #[cfg(test)]
    pub(crate) fn free_count(&self) -> usize {
        self.free.lock().expect("pool").len()
    }

    /// Bytes per chunk.
    pub(crate) fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    /// How the first region is backed (None before any).
    pub(crate) fn huge(&self) -> Option<HugePages> {
        *self.huge.lock().expect("pool")
    }
}

/// A fixed slice of a region holding pcap-ns records (see the module docs).
pub(crate) struct Chunk {
    region: Arc<Region>,
    off: usize,
    cap: usize,
    /// Bytes readers may read.
    committed: AtomicUsize,
    /// Records below `committed` (updated just before it).
    frames: AtomicU32,
    /// Stamp of the first record (0: none yet).
    first_ts: AtomicU64,
    /// Stamp of the last committed record.
    last_ts: AtomicU64,
    /// Its place in its queue's sequence of chunks.
    seq: u64,
    home: Weak<Pool>,
}

impl Chunk {
    fn reset(&mut self, seq: u64) {
        *self.committed.get_mut() = 0;
        *self.frames.get_mut() = 0;
        *self.first_ts.get_mut() = 0;
        *self.last_ts.get_mut() = 0;
        self.seq = seq;
    }

    /// The committed records (bytes `[0, committed)`).
    pub(crate) fn committed(&self) -> &[u8] {
        let n = self.committed.load(Ordering::Acquire);
        self.bytes(0, n)
    }

    /// Bytes `[start, end)`; panics unless `end` is committed.
    pub(crate) fn bytes(&self, start: usize, end: usize) -> &[u8] {
        let c = self.committed.load(Ordering::Acquire);
        assert!(
            start <= end && end <= c,
            "live chunk: bytes {start}..{end} read above the committed {c}"
        );
        // SAFETY: [off + start, off + end) lies inside the region (end <=
        // committed <= cap, off + cap <= region.len by construction), below
        // `committed` (Acquire: the writer's bytes are visible), where the
        // single writer never writes again until the chunk is recycled, which
        // needs every reference (including this &self's) gone.
        unsafe {
            std::slice::from_raw_parts(self.region.ptr.as_ptr().add(self.off + start), end - start)
        }
    }

    /// Records committed.
    pub(crate) fn frames(&self) -> u32 {
        self.frames.load(Ordering::Acquire)
    }

    /// Stamps of the first and last committed records (0, 0 when none).
    pub(crate) fn span(&self) -> (u64, u64) {
        (
            self.first_ts.load(Ordering::Acquire),
            self.last_ts.load(Ordering::Acquire),
        )
    }

    /// Its place in its queue's sequence.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }
}

/// A shared reference to a chunk; the last one dropped gives the chunk back
/// to its pool.
pub(crate) struct ChunkRef(Option<Arc<Chunk>>);

impl Clone for ChunkRef {
    fn clone(&self) -> Self {
        ChunkRef(self.0.clone())
    }
}

impl std::ops::Deref for ChunkRef {
    type Target = Chunk;
    fn deref(&self) -> &Chunk {
        self.0.as_ref().expect("a live ChunkRef")
    }
}

impl Drop for ChunkRef {
    fn drop(&mut self) {
        if let Some(a) = self.0.take() {
            if let Some(c) = Arc::into_inner(a) {
                if let Some(pool) = c.home.upgrade() {
                    pool.free.lock().expect("pool").push(c);
                }
            }
        }
    }
}

/// The writer's side of the chunk being filled: the only way to write into
/// a chunk (see the module docs).
pub(crate) struct OpenChunk {
    r: ChunkRef,
    base: *mut u8,
    cap: usize,
    len: usize,
    frames: u32,
    first_ts: u64,
    last_ts: u64,
}

// SAFETY: `base` points into the region kept alive by `r`; an OpenChunk is
// the single writer of its chunk wherever it lives.
unsafe impl Send for OpenChunk {}

impl OpenChunk {
    /// Opens `c` (taken out of its pool by value: nobody else holds it) as
    /// chunk number `seq` of its queue.
    pub(crate) fn new(mut c: Chunk, seq: u64) -> OpenChunk {
        c.reset(seq);
        // SAFETY: off < region.len (made by Pool::grow): an in-bounds pointer.
        let base = unsafe { c.region.ptr.as_ptr().add(c.off) };
        let cap = c.cap;
        OpenChunk {
            r: ChunkRef(Some(Arc::new(c))),
            base,
            cap,
            len: 0,
            frames: 0,
            first_ts: 0,
            last_ts: 0,
        }
    }

    /// Appends one record; false (nothing appended) when it does not fit.
    #[inline(always)]
    pub(crate) fn push(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> bool {
        let rec = RECORD_HEADER + data.len();
        if rec > self.cap - self.len {
            return false;
        }
        let mut h = [0u8; RECORD_HEADER];
        h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.max(data.len() as u32).to_le_bytes());
        // SAFETY: [len, len + rec) is inside the chunk (checked above) and at
        // or above `committed` (== a previous len), where no reader reads;
        // this OpenChunk is the chunk's only writer; `data` cannot overlap
        // the chunk (it is a frame of the engine's memory).
        unsafe {
            let dst = self.base.add(self.len);
            std::ptr::copy_nonoverlapping(h.as_ptr(), dst, RECORD_HEADER);
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst.add(RECORD_HEADER), data.len());
        }
        if self.frames == 0 {
            self.first_ts = ts_ns;
        }
        self.last_ts = ts_ns;
        self.len += rec;
        self.frames += 1;
        true
    }

    /// Publishes every record appended so far to readers.
    pub(crate) fn commit(&mut self) {
        let c: &Chunk = &self.r;
        if c.committed.load(Ordering::Relaxed) == self.len {
            return;
        }
        if c.first_ts.load(Ordering::Relaxed) == 0 {
            c.first_ts.store(self.first_ts.max(1), Ordering::Release);
        }
        c.last_ts.store(self.last_ts, Ordering::Release);
        c.frames.store(self.frames, Ordering::Release);
        c.committed.store(self.len, Ordering::Release);
    }

    /// Bytes appended so far (committed or not).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Records appended so far.
    pub(crate) fn frames(&self) -> u32 {
        self.frames
    }

    /// Stamp of the last record appended.
    pub(crate) fn last_ts(&self) -> u64 {
        self.last_ts
    }

    /// A reader's reference to the chunk.
    pub(crate) fn share(&self) -> ChunkRef {
        self.r.clone()
    }
}

/// One record read from chunk bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// UTC ns.
    pub ts_ns: u64,
    /// Length on the wire (at least `data.len()`).
    pub orig_len: u32,
    /// The captured bytes (cut to the snap length).
    pub data: &'a [u8],
}

/// Reads the record at `off` of `b` (records laid out by [`OpenChunk::push`]);
/// returns it and the offset of the next one.
#[inline]
pub(crate) fn record_at(b: &[u8], off: usize) -> (Frame<'_>, usize) {
    let h = &b[off..off + RECORD_HEADER];
    let u = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let caplen = u(8) as usize;
    let start = off + RECORD_HEADER;
    (
        Frame {
            ts_ns: u(0) as u64 * 1_000_000_000 + u(4) as u64,
            orig_len: u(12),
            data: &b[start..start + caplen],
        },
        start + caplen,
    )
}

/// The stamp of the record at `off` of `b`.
#[inline]
pub(crate) fn ts_at(b: &[u8], off: usize) -> u64 {
    let u =
        |i: usize| u32::from_le_bytes([b[off + i], b[off + i + 1], b[off + i + 2], b[off + i + 3]]);
    u(0) as u64 * 1_000_000_000 + u(4) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_commit_read_and_recycle() {
        let pool = Pool::new(4096);
        pool.grow(2).unwrap();
        assert_eq!((pool.made(), pool.free_count()), (2, 2));
        let mut o = OpenChunk::new(pool.take().unwrap(), 7);
        assert!(o.push(1_000_000_005, &[1, 2, 3], 60));
        let r = o.share();
        assert_eq!(r.committed().len(), 0, "nothing visible before commit");
        o.commit();
        assert_eq!(r.committed().len(), RECORD_HEADER + 3);
        let (f, next) = record_at(r.committed(), 0);
        assert_eq!(
            (f.ts_ns, f.orig_len, f.data),
            (1_000_000_005, 60, &[1u8, 2, 3][..])
        );
        assert_eq!(next, RECORD_HEADER + 3);
        assert_eq!(r.seq(), 7);
        assert_eq!(r.span(), (1_000_000_005, 1_000_000_005));
        // Fill it: a record that does not fit is refused whole.
        while o.push(2_000_000_000, &[9; 100], 100) {}
        assert!(o.len() <= 4096 && o.len() + RECORD_HEADER + 100 > 4096);
        o.commit();
        assert_eq!(r.frames(), o.frames());
        drop(o);
        assert_eq!(pool.free_count(), 1, "still held by a reader");
        drop(r);
        assert_eq!(pool.free_count(), 2, "the last reference gives it back");
        let o = OpenChunk::new(pool.take().unwrap(), 8);
        assert_eq!(o.share().committed().len(), 0, "reset on reuse");
    }

    #[test]
    #[should_panic(expected = "above the committed")]
    fn reading_above_committed_panics() {
        let pool = Pool::new(4096);
        pool.grow(1).unwrap();
        let mut o = OpenChunk::new(pool.take().unwrap(), 0);
        o.push(1, &[0; 10], 10);
        let r = o.share();
        let _ = r.bytes(0, 26);
    }
}
