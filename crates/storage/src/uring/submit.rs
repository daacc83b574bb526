//! The kernel-facing part of [`UringSink`](super::UringSink): the
//! registration of its blocks with the ring, and the write and fallocate
//! submission entries that point into them. All of the `uring` module's
//! `unsafe` is here; the policy around it (when to grow the file, merge,
//! register a lazy slab, what a completion means) is safe code in the
//! parent module.
//!
//! The invariant the blocks below rely on: a buffer whose write is in
//! flight is owned by `in_flight[slot]` (a merged write: the slot of its
//! first block holds them all, see `UringSink::pump`) or, for runs lent by
//! their owner, by `ext_flight[slot]`, and is neither touched nor freed
//! until its completion is reaped; all buffers outlive the ring (drop
//! order: the ring is dropped after every write completed, see the sink's
//! `Drop`).

use super::*;

/// The iovecs of a merged write: pointers into the blocks of the same
/// [`InFlight`].
pub(super) struct Iovecs {
    _iov: Box<[libc::iovec]>,
}

// SAFETY: the pointers name the buffers of the blocks held next to them in
// the same InFlight (which are Send); they move together, and only the
// kernel reads through them.
unsafe impl Send for Iovecs {}

/// Registers `iov` with `ring` as its fixed buffers; false if the kernel
/// refuses (the blocks are then written as plain buffers).
///
/// # Safety
/// Every iovec must point to memory that outlives the registration (the
/// ring): an engine's (then its sink's) own blocks, or the slab they are
/// carved from, which lives as long as any of them.
unsafe fn register(ring: &IoUring, iov: &[libc::iovec]) -> bool {
    // SAFETY: the caller's promise above.
    unsafe { ring.submitter().register_buffers(iov) }.is_ok()
}

impl UringSink {
    /// The write of `bufs` (address, length) to the file at `off`: one
    /// buffer as WRITE, several as WRITEV with their iovecs (returned: they
    /// must live as long as the write is in flight); `fixed`: the registered
    /// buffer index they lie in (WRITE_FIXED, WRITEV_FIXED). The file is
    /// the registered one where it is.
    fn write_entry(
        &mut self,
        mut bufs: impl ExactSizeIterator<Item = (*const u8, usize)>,
        off: u64,
        fixed: Option<u16>,
    ) -> (io_uring::squeue::Entry, Box<[libc::iovec]>) {
        macro_rules! on_file {
            ($build:expr) => {
                if self.fixed_file {
                    $build(types::Fixed(0)).offset(off).build()
                } else {
                    $build(types::Fd(self.fd())).offset(off).build()
                }
            };
        }
        if bufs.len() == 1 {
            let (ptr, len) = bufs.next().expect("one");
            let len = len as u32;
            let e = match fixed {
                Some(i) => on_file!(|f| opcode::WriteFixed::new(f, ptr, len, i)),
                None => on_file!(|f| opcode::Write::new(f, ptr, len)),
            };
            return (e, Box::default());
        }
        let iov: Box<[libc::iovec]> = bufs
            .map(|(ptr, len)| libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: len,
            })
            .collect();
        let (p, n) = (iov.as_ptr(), iov.len() as u32);
        let e = match fixed {
            Some(i) => on_file!(|f| opcode::WritevFixed::new(f, p, n, i)),
            None => on_file!(|f| opcode::Writev::new(f, p, n)),
        };
        self.merged += 1;
        (e, iov)
    }

    /// As [`UringSink::prepare`]; `eager`: fault the blocks in and register
    /// them now. Else (a file that may never see a frame: a recording's
    /// first file per queue, opened at start for every RX queue, busy or
    /// not) their pages come as they are first written, and the blocks are
    /// registered only once the sink has written [`REGISTER_AFTER`] times
    /// its blocks' worth (then every block was used: pinning them faults
    /// nothing in). An idle queue's file then costs one page, not its
    /// blocks (16 MiB by default); on the rig, three of four queues never
    /// see a frame, and populating their blocks was a quarter of the
    /// recorder's start-up CPU.
    pub(super) fn build(
        block_size: usize,
        nbufs: usize,
        growth: Growth,
        budget: Option<Arc<AtomicI64>>,
        eager: bool,
    ) -> std::io::Result<UringEngine> {
        let block_size = block_size.max(ALIGN).div_ceil(ALIGN) * ALIGN;
        let nbufs = nbufs.clamp(2, 64);
        let ring = IoUring::new(nbufs as u32 * 2)?;
        let owner = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
        // The blocks back to back in one slab (on reserved huge pages where
        // there are), registered as one buffer (index 0) that every write of
        // them names, merged writes too (IORING_OP_WRITEV_FIXED, Linux
        // 6.15): the kernel then pins no pages per write. Else separate
        // buffers, one index each.
        let (bufs, slab, populated) = match Slab::carve(nbufs, block_size, eager) {
            Ok(c) => (c.bufs, Some((c.base, c.len)), c.populated),
            Err(_) => (
                (0..nbufs).map(|_| AlignedBuf::new(block_size)).collect(),
                None,
                true,
            ),
        };
        let free: Vec<Block> = bufs
            .into_iter()
            .enumerate()
            .map(|(i, b)| leased(owner, i, b))
            .collect();
        let iov: Vec<libc::iovec> = match slab {
            Some((base, len)) => vec![libc::iovec {
                iov_base: base as *mut _,
                iov_len: len,
            }],
            None => free
                .iter()
                .map(|b| libc::iovec {
                    iov_base: b.as_ptr() as *mut _,
                    iov_len: b.capacity(),
                })
                .collect(),
        };
        let mut probe = io_uring::Probe::new();
        let writev_fixed_ok = slab.is_some()
            && ring.submitter().register_probe(&mut probe).is_ok()
            && probe.is_supported(opcode::WritevFixed::CODE);
        // Registering pins the pages, faulting in any that are not: a lazy
        // slab is registered later (UringSink::register_late).
        let later = (!populated).then(|| iov[0]);
        // SAFETY: the iovecs are this engine's blocks (or their slab); they
        // are freed only after the ring (see Drop), never while a write
        // from one is in flight.
        let registered = later.is_none() && unsafe { register(&ring, &iov) };
        let one_buffer = registered && slab.is_some();
        Ok(UringEngine {
            ring,
            owner,
            free,
            n_registered: if registered { nbufs } else { 0 },
            one_buffer,
            writev_fixed: one_buffer && writev_fixed_ok,
            register_later: later.map(|v| LateSlab {
                base: v.iov_base as usize,
                len: v.iov_len,
                blocks: nbufs,
                writev_fixed: writev_fixed_ok,
            }),
            block_size,
            nbufs,
            growth,
            budget,
        })
    }

    /// Registers a lazy slab (see `build`): from now on its blocks are
    /// written as fixed buffers. Writes in flight from it, issued as plain
    /// ones, are unaffected. Should the kernel refuse (e.g. the memlock
    /// limit), the blocks stay plain: slower per write, never wrong.
    pub(super) fn register_late(&mut self) {
        let Some(late) = self.register_later.take() else {
            return;
        };
        let iov = [libc::iovec {
            iov_base: late.base as *mut libc::c_void,
            iov_len: late.len,
        }];
        // SAFETY: the slab our blocks are carved from: every block (free,
        // being filled, in flight) holds it alive, and the blocks outlive
        // the ring (see Drop).
        if unsafe { register(&self.ring, &iov) } {
            self.n_registered = late.blocks;
            self.one_buffer = true;
            self.writev_fixed = late.writev_fixed;
        }
    }

    /// Queues an fallocate of `[from, from+len)` (`mode`: 0 sets the size,
    /// or FALLOC_FL_KEEP_SIZE), completed in `reap_wait`.
    pub(super) fn fallocate(&mut self, from: u64, len: u64, mode: i32) {
        let e = if self.fixed_file {
            opcode::Fallocate::new(types::Fixed(0), len)
                .offset(from)
                .mode(mode)
                .build()
        } else {
            opcode::Fallocate::new(types::Fd(self.fd()), len)
                .offset(from)
                .mode(mode)
                .build()
        }
        .user_data(FALLOC_TAG);
        // SAFETY: the entry references no memory, only our fd.
        if unsafe { self.ring.submission().push(&e) }.is_ok() {
            self.fallocs += 1;
        }
    }

    /// Issues one write of `parts` (blocks of ours at consecutive offsets).
    pub(super) fn issue(&mut self, parts: Vec<(Block, u32, u64)>) -> Result<(), StorageError> {
        let off = parts[0].2;
        let len: u64 = parts.iter().map(|p| p.1 as u64).sum();
        self.grow(off, len);
        // Only our own blocks get here (submit/flush/finish copy others), so
        // each slot is ours and, the block being in our hands, not in
        // flight; checked anyway, as a bug here would let the kernel read
        // freed memory.
        for (block, _, _) in &parts {
            match block.lease() {
                Some(l) if l.owner == self.owner && !self.busy[l.slot as usize] => {}
                _ => panic!("UringSink::issue: not a free block of this sink"),
            }
        }
        self.blocks_written += parts.len() as u64;
        if let Some(late) = self.register_later {
            if self.blocks_written > REGISTER_AFTER * late.blocks as u64 {
                self.register_late();
            }
        }
        let idx = parts[0].0.lease().expect("checked").slot;
        // A registered buffer: a single block's own index, or, merged, the
        // slab all of them lie in (index 0) where WRITEV_FIXED is known.
        let fixed = if parts.len() == 1 {
            self.buf_index(idx)
        } else {
            (self.writev_fixed
                && parts
                    .iter()
                    .all(|(b, _, _)| self.buf_index(b.lease().expect("checked").slot) == Some(0)))
            .then_some(0)
        };
        let (entry, iov) = self.write_entry(
            parts.iter().map(|(b, len, _)| (b.as_ptr(), *len as usize)),
            off,
            fixed,
        );
        // Fault injection counts block writes: one per block of the write.
        let fault = parts.iter().fold(false, |f, _| inject_eio() | f);
        let entry = if fault {
            opcode::Nop::new().build()
        } else {
            entry
        }
        .user_data(idx as u64);
        for (block, _, _) in &parts {
            self.busy[block.lease().expect("checked").slot as usize] = true;
        }
        self.writes += parts.len() as u64;
        self.in_flight[idx as usize] = Some(InFlight {
            parts,
            _iov: Iovecs { _iov: iov },
            at: Instant::now(),
            stream: self.off,
            fault,
        });
        self.n_in_flight += 1;
        // SAFETY: the entry points into the buffers now owned by
        // in_flight[idx] (and, for a merged write, into its iovecs, also
        // kept there), which stay alive and untouched until its completion
        // is reaped (module invariant).
        unsafe { self.push_submit(&entry) }
    }

    /// Pushes `entry` (reaping completions while the queue is full) and
    /// submits it.
    ///
    /// # Safety
    /// The memory `entry` points to (buffers, iovecs) must stay alive and
    /// unchanged until its completion is reaped.
    unsafe fn push_submit(&mut self, entry: &io_uring::squeue::Entry) -> Result<(), StorageError> {
        // SAFETY: the caller's promise above.
        while unsafe { self.ring.submission().push(entry) }.is_err() {
            self.ring
                .submit()
                .map_err(|e| StorageError::from_write(&self.path, e))?;
            self.reap_wait(1)?;
        }
        self.ring
            .submit()
            .map_err(|e| StorageError::from_write(&self.path, e))?;
        Ok(())
    }

    /// Issues one write of `parts` (runs at consecutive offsets from
    /// `off`; plain buffers: the memory is their owners', not registered),
    /// in flight until its completion is reaped.
    pub(super) fn issue_external(
        &mut self,
        parts: Vec<crate::external::External>,
        off: u64,
    ) -> Result<(), StorageError> {
        let len: u64 = parts.iter().map(|e| e.len() as u64).sum();
        self.grow(off, len);
        let slot = match self.ext_flight.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.ext_flight.push(None);
                self.ext_flight.len() - 1
            }
        };
        let fault = parts.iter().fold(false, |f, _| inject_eio() | f);
        let bufs = parts.iter().map(|e| (e.as_ptr(), e.len()));
        let (entry, iov) = self.write_entry(bufs, off, None);
        let entry = if fault {
            opcode::Nop::new().build()
        } else {
            entry
        }
        .user_data(EXT_TAG | slot as u64);
        self.writes += parts.len() as u64;
        self.ext_flight[slot] = Some(ExtFlight {
            parts,
            off,
            _iov: Iovecs { _iov: iov },
            at: Instant::now(),
            stream: self.off,
            fault,
        });
        self.n_in_flight += 1;
        // SAFETY: the entry points into the runs held by ext_flight[slot]
        // (and, for a merged write, into its iovecs, also kept there) until
        // its completion is reaped; a run's bytes stay where they are while
        // it lives (External::new's contract).
        unsafe { self.push_submit(&entry) }
    }
}
