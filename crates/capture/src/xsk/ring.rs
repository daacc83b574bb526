//! One single-producer/single-consumer ring over memory shared with the
//! kernel, generic over its entry type (`xdp_desc` for RX and TX, `u64` frame
//! addresses for fill and completion) and over which end is ours ([`Prod`]:
//! fill, TX; [`Cons`]: RX, completion). All the index arithmetic of the four
//! rings is here, once.
//!
//! Layout (as the kernel reports it in `XDP_MMAP_OFFSETS`): a `u32` producer
//! index, a `u32` consumer index and a `u32` flags word at their offsets, and
//! `size` (a power of two) entries from offset `desc`. Indices are free-running
//! `u32`s that wrap; entry `i` lives in slot `i & (size - 1)`. The producer
//! writes entries in `[producer, consumer + size)` and then publishes them by
//! storing its index with Release; the consumer reads entries in
//! `[consumer, producer)` after loading the producer index with Acquire, and
//! gives the slots back by storing its index with Release. Each side writes
//! only its own index.

use super::mmap::Mmap;
use std::io;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// The type of a ring's entries.
///
/// # Safety
///
/// Plain data that the other side writes as raw bytes: every bit pattern
/// must be a valid value, with no padding and no pointers.
pub(super) unsafe trait Entry: Copy {}

// SAFETY: a u64 frame address: plain data, any bit pattern is valid.
unsafe impl Entry for u64 {}
// SAFETY: xdp_desc is { u64 addr, u32 len, u32 options }: plain data, no
// padding, any bit pattern is valid.
unsafe impl Entry for libc::xdp_desc {}

/// Which end of a ring is ours.
pub(super) trait End {
    /// True when we produce (fill, TX), false when we consume (RX, completion).
    const PRODUCER: bool;
}

/// We produce: fill and TX rings.
pub(super) enum Prod {}
/// We consume: RX and completion rings.
pub(super) enum Cons {}

impl End for Prod {
    const PRODUCER: bool = true;
}
impl End for Cons {
    const PRODUCER: bool = false;
}

/// Our end of one ring; owns its mapping.
pub(super) struct Ring<T: Entry, E: End> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    size: u32,
    /// Our index: the producer index on a [`Prod`] ring (ahead of the
    /// published one until [`Ring::publish`]), the consumer index on a
    /// [`Cons`] ring.
    local: u32,
    _map: Mmap,
    _end: PhantomData<E>,
}

// SAFETY: the pointers point into the mapping owned by `_map`, which moves
// with the ring; one end of a ring is used by the one thread that owns it
// (no `&Ring` is shared across threads: not Sync).
unsafe impl<T: Entry, E: End> Send for Ring<T, E> {}

impl<T: Entry, E: End> Ring<T, E> {
    /// Our end of a ring of `size` entries laid out in `map` as `off` says.
    /// Our index starts where the mapping has it (0 on a fresh kernel ring).
    ///
    /// Panics unless `size` is a power of two and every index word and the
    /// entry array lie, aligned, inside `map`.
    ///
    /// # Safety
    ///
    /// The other party using `map` (the kernel; a test playing the kernel)
    /// follows the ring protocol of the module docs for the other end: it
    /// writes entries only between the indices it owns, writes only its own
    /// index word, and never the entries of ours. Nothing else touches the
    /// memory: this is the only `Ring` over it.
    pub(super) unsafe fn new(map: Mmap, off: &libc::xdp_ring_offset, size: u32) -> Self {
        assert!(size.is_power_of_two(), "ring size must be a power of two");
        let word = |o: u64| {
            assert!(
                o & 3 == 0 && o + 4 <= map.len() as u64,
                "ring index word outside the mapping"
            );
            // SAFETY: o + 4 <= len, so the pointer stays inside the mapping;
            // map.as_ptr() is page-aligned and o a multiple of 4.
            unsafe { NonNull::new_unchecked(map.as_ptr().add(o as usize).cast::<AtomicU32>()) }
        };
        let (producer, consumer, flags) = (word(off.producer), word(off.consumer), word(off.flags));
        let entry = std::mem::size_of::<T>() as u64;
        assert!(
            off.desc & (std::mem::align_of::<T>() as u64 - 1) == 0
                && off.desc + size as u64 * entry <= map.len() as u64,
            "ring entries outside the mapping"
        );
        // SAFETY: off.desc + size * entry <= len (checked above).
        let entries =
            unsafe { NonNull::new_unchecked(map.as_ptr().add(off.desc as usize).cast::<T>()) };
        let mut ring = Ring {
            producer,
            consumer,
            flags,
            entries,
            mask: size - 1,
            size,
            local: 0,
            _map: map,
            _end: PhantomData,
        };
        // Our own index: nobody else writes it (Relaxed is enough).
        ring.local = if E::PRODUCER {
            ring.producer().load(Ordering::Relaxed)
        } else {
            ring.consumer().load(Ordering::Relaxed)
        };
        ring
    }

    /// Maps the ring of `size` entries that socket `fd` has at page offset
    /// `pgoff` (an `XDP_*PGOFF_*` constant) and takes our end of it.
    ///
    /// # Safety
    ///
    /// `fd` is an AF_XDP socket whose ring at `pgoff` was created with `size`
    /// entries of type `T`, we are its `E` end, `off` are the offsets the
    /// kernel reported for that ring, and the ring is mapped only here (one
    /// `Ring` per kernel ring).
    pub(super) unsafe fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
    ) -> io::Result<Self> {
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: fd/pgoff is one of the socket's rings, mapped once and
        // given to one Ring (the caller's contract).
        let map = unsafe { Mmap::shared(fd, len, pgoff)? };
        // SAFETY: the kernel is the other end and follows the ring protocol;
        // the mapping is laid out as `off` says (the caller's contract).
        Ok(unsafe { Ring::new(map, off, size) })
    }

    #[inline(always)]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: an aligned u32 inside the mapping `self` owns (checked in
        // new), only ever accessed atomically on our side.
        unsafe { self.producer.as_ref() }
    }

    #[inline(always)]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above, the consumer index.
        unsafe { self.consumer.as_ref() }
    }

    /// True when the kernel asks to be woken (XDP_RING_NEED_WAKEUP).
    #[inline(always)]
    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as above, the flags word.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

impl<T: Entry> Ring<T, Cons> {
    /// Entries published and not yet consumed.
    #[inline(always)]
    pub(super) fn available(&self) -> u32 {
        self.producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.local)
    }

    /// Reads up to `max` published entries in order, passing each to `f`,
    /// then gives their slots back to the producer. Returns how many.
    #[inline(always)]
    pub(super) fn consume(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        let n = (self.available() as usize).min(max);
        for i in 0..n as u32 {
            let idx = (self.local.wrapping_add(i) & self.mask) as usize;
            // SAFETY: idx <= mask < size, inside the entry array (new). The
            // entry lies in [consumer, producer): published before the
            // producer index we loaded with Acquire, and not written again
            // until we give the slot back below.
            f(unsafe { self.entries.as_ptr().add(idx).read() });
        }
        if n > 0 {
            self.local = self.local.wrapping_add(n as u32);
            // The entries are copied out: give the slots back.
            self.consumer().store(self.local, Ordering::Release);
        }
        n
    }
}

impl<T: Entry> Ring<T, Prod> {
    /// Writes entries taken from `next` into free slots until it returns
    /// `None` or no slot is free (`next` is not called then). They are not
    /// visible to the consumer until [`Ring::publish`]. Returns how many.
    #[inline(always)]
    pub(super) fn produce(&mut self, mut next: impl FnMut() -> Option<T>) -> u32 {
        let cons = self.consumer().load(Ordering::Acquire);
        let mut room = self.size - self.local.wrapping_sub(cons);
        let mut put = 0u32;
        while room > 0 {
            let Some(v) = next() else { break };
            let idx = (self.local.wrapping_add(put) & self.mask) as usize;
            // SAFETY: idx < size, inside the entry array (new). The slot is
            // free: `room` counts the slots from our index up to the consumer
            // index loaded with Acquire (the consumer is done with them), and
            // each is written once.
            unsafe { self.entries.as_ptr().add(idx).write(v) };
            put += 1;
            room -= 1;
        }
        self.local = self.local.wrapping_add(put);
        put
    }

    /// Writes one entry without looking at the consumer index.
    ///
    /// # Safety
    ///
    /// A slot is free: fewer than `size` entries have been produced and not
    /// yet consumed by the other side (the caller bounds what is in flight
    /// by other means).
    #[inline(always)]
    pub(super) unsafe fn push_unchecked(&mut self, v: T) {
        let idx = (self.local & self.mask) as usize;
        // SAFETY: idx < size, inside the entry array (new); the slot is free
        // (the caller's contract).
        unsafe { self.entries.as_ptr().add(idx).write(v) };
        self.local = self.local.wrapping_add(1);
    }

    /// Our producer index, published or not.
    #[inline(always)]
    pub(super) fn produced(&self) -> u32 {
        self.local
    }

    /// Entries published and not yet taken by the consumer.
    #[inline(always)]
    pub(super) fn unconsumed(&self) -> u32 {
        self.producer()
            .load(Ordering::Relaxed)
            .wrapping_sub(self.consumer().load(Ordering::Acquire))
    }

    /// Makes every entry produced so far visible to the consumer.
    #[inline(always)]
    pub(super) fn publish(&mut self) {
        self.producer().store(self.local, Ordering::Release);
    }
}

/// A ring in plain memory laid out as the kernel lays it out, and the
/// kernel's end of it, played by a test.
#[cfg(test)]
pub(super) mod synthetic {
    use super::*;

    /// Where the kernel puts the words of a ring on x86-64 (one cache line
    /// each), and its entries after them.
    pub(crate) const OFF: libc::xdp_ring_offset = libc::xdp_ring_offset {
        producer: 0,
        consumer: 64,
        flags: 128,
        desc: 192,
    };

    /// The other end of a synthetic ring: raw access to its words and slots.
    /// Valid while the ring it was made with lives (tests keep both in one
    /// scope, the ring declared first).
    pub(crate) struct Kernel<T> {
        base: *mut u8,
        mask: u32,
        _t: PhantomData<T>,
    }

    /// A ring of `size` entries whose producer and consumer indices both
    /// start at `start` (empty), and its kernel end.
    pub(crate) fn ring<T: Entry, E: End>(size: u32, start: u32) -> (Ring<T, E>, Kernel<T>) {
        let map = Mmap::anon(4096).unwrap();
        assert!(OFF.desc as usize + size as usize * std::mem::size_of::<T>() <= 4096);
        let k = Kernel {
            base: map.as_ptr(),
            mask: size - 1,
            _t: PhantomData,
        };
        k.producer().store(start, Ordering::Relaxed);
        k.consumer().store(start, Ordering::Relaxed);
        // SAFETY: the test is the only other party and plays the kernel's
        // end by the ring protocol; this is the only Ring over `map`.
        (unsafe { Ring::new(map, &OFF, size) }, k)
    }

    impl<T: Entry> Kernel<T> {
        fn word(&self, off: u64) -> &AtomicU32 {
            // SAFETY: an aligned u32 inside the live mapping (see the type).
            unsafe { &*self.base.add(off as usize).cast::<AtomicU32>() }
        }
        pub(crate) fn producer(&self) -> &AtomicU32 {
            self.word(OFF.producer)
        }
        pub(crate) fn consumer(&self) -> &AtomicU32 {
            self.word(OFF.consumer)
        }
        pub(crate) fn flags(&self) -> &AtomicU32 {
            self.word(OFF.flags)
        }
        fn slot(&self, index: u32) -> *mut T {
            // SAFETY: index & mask < size: inside the entry array.
            unsafe {
                self.base
                    .add(OFF.desc as usize)
                    .cast::<T>()
                    .add((index & self.mask) as usize)
            }
        }
        /// Reads the entry at free-running index `index`.
        pub(crate) fn read(&self, index: u32) -> T {
            // SAFETY: a slot of the live mapping; single-threaded test.
            unsafe { self.slot(index).read() }
        }
        /// Writes the entry at free-running index `index`.
        pub(crate) fn write(&self, index: u32, v: T) {
            // SAFETY: a slot of the live mapping; single-threaded test.
            unsafe { self.slot(index).write(v) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::synthetic::{self, OFF};
    use super::*;

    fn desc(addr: u64, len: u32) -> libc::xdp_desc {
        libc::xdp_desc {
            addr,
            len,
            options: 0,
        }
    }

    /// Indices start 3 below u32::MAX, so the entries cross the wrap.
    const NEAR_MAX: u32 = u32::MAX - 2;

    #[test]
    fn consume_across_the_u32_wrap_in_batches() {
        let (mut ring, k) = synthetic::ring::<libc::xdp_desc, Cons>(8, NEAR_MAX);
        let mut got = Vec::new();
        // Empty: nothing read, nothing released.
        assert_eq!(ring.available(), 0);
        assert_eq!(ring.consume(64, |d| got.push(d.addr)), 0);
        assert!(got.is_empty());
        // The kernel publishes 5 entries: indices MAX-2 ..= MAX, 0, 1.
        for i in 0..5 {
            k.write(NEAR_MAX.wrapping_add(i), desc(1000 + i as u64, 60 + i));
        }
        k.producer()
            .store(NEAR_MAX.wrapping_add(5), Ordering::Release);
        assert_eq!(ring.available(), 5);
        // A batch smaller than what is there: the first 3, slots released.
        assert_eq!(ring.consume(3, |d| got.push(d.addr)), 3);
        assert_eq!(k.consumer().load(Ordering::Acquire), 0); // MAX-2 + 3, wrapped
        assert_eq!(ring.available(), 2);
        // A batch larger than what is there: the 2 left, across the wrap.
        assert_eq!(ring.consume(64, |d| got.push(d.addr)), 2);
        assert_eq!(k.consumer().load(Ordering::Acquire), 2);
        assert_eq!(got, vec![1000, 1001, 1002, 1003, 1004]);
        assert_eq!(ring.available(), 0);
        assert_eq!(ring.consume(64, |d| got.push(d.addr)), 0);
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn consume_a_full_ring() {
        let (mut ring, k) = synthetic::ring::<u64, Cons>(8, NEAR_MAX);
        for i in 0..8 {
            k.write(NEAR_MAX.wrapping_add(i), i as u64 * 2048);
        }
        k.producer()
            .store(NEAR_MAX.wrapping_add(8), Ordering::Release);
        assert_eq!(ring.available(), 8);
        let mut got = Vec::new();
        assert_eq!(ring.consume(usize::MAX, |a| got.push(a)), 8);
        assert_eq!(got, (0..8).map(|i| i * 2048).collect::<Vec<u64>>());
        assert_eq!(
            k.consumer().load(Ordering::Acquire),
            NEAR_MAX.wrapping_add(8)
        );
    }

    #[test]
    fn produce_until_full_across_the_u32_wrap() {
        let (mut ring, k) = synthetic::ring::<u64, Prod>(8, NEAR_MAX);
        // More offered than there is room for: 8 go in, the rest is not
        // even taken from the source.
        let mut src = 0..20u32;
        assert_eq!(ring.produce(|| src.next().map(u64::from)), 8);
        assert_eq!(src.len(), 12);
        // Not visible before publish.
        assert_eq!(k.producer().load(Ordering::Acquire), NEAR_MAX);
        ring.publish();
        assert_eq!(
            k.producer().load(Ordering::Acquire),
            NEAR_MAX.wrapping_add(8)
        );
        let seen: Vec<u64> = (0..8).map(|i| k.read(NEAR_MAX.wrapping_add(i))).collect();
        assert_eq!(seen, (0..8).collect::<Vec<u64>>());
        // Full: nothing written, the source untouched.
        assert_eq!(ring.produce(|| src.next().map(u64::from)), 0);
        assert_eq!(src.len(), 12);
        // The kernel takes 3: exactly 3 more go in, over the wrap.
        k.consumer()
            .store(NEAR_MAX.wrapping_add(3), Ordering::Release);
        assert_eq!(ring.produce(|| src.next().map(u64::from)), 3);
        ring.publish();
        assert_eq!(
            k.producer().load(Ordering::Acquire),
            NEAR_MAX.wrapping_add(11)
        );
        let seen: Vec<u64> = (8..11).map(|i| k.read(NEAR_MAX.wrapping_add(i))).collect();
        assert_eq!(seen, vec![8, 9, 10]);
        // A source that runs dry stops early.
        k.consumer()
            .store(NEAR_MAX.wrapping_add(11), Ordering::Release);
        let mut short = 100..102u64;
        assert_eq!(ring.produce(|| short.next()), 2);
        assert_eq!(ring.produced(), NEAR_MAX.wrapping_add(13));
    }

    #[test]
    fn push_unchecked_then_publish() {
        let (mut ring, k) = synthetic::ring::<libc::xdp_desc, Prod>(8, NEAR_MAX);
        for i in 0..8 {
            // SAFETY: 8 pushes into an empty ring of 8 slots.
            unsafe { ring.push_unchecked(desc(i * 4096, 100)) };
        }
        assert_eq!(ring.produced(), NEAR_MAX.wrapping_add(8));
        assert_eq!(k.producer().load(Ordering::Acquire), NEAR_MAX);
        ring.publish();
        assert_eq!(
            k.producer().load(Ordering::Acquire),
            NEAR_MAX.wrapping_add(8)
        );
        for i in 0..8u32 {
            let d = k.read(NEAR_MAX.wrapping_add(i));
            assert_eq!((d.addr, d.len), (i as u64 * 4096, 100));
        }
        // The producer's view of the room agrees: full.
        assert_eq!(ring.produce(|| Some(desc(0, 0))), 0);
        assert_eq!(ring.unconsumed(), 8);
        k.consumer()
            .store(NEAR_MAX.wrapping_add(5), Ordering::Release);
        assert_eq!(ring.unconsumed(), 3);
    }

    #[test]
    fn need_wakeup_follows_the_flags_word() {
        let (ring, k) = synthetic::ring::<u64, Prod>(8, 0);
        assert!(!ring.needs_wakeup());
        k.flags()
            .store(libc::XDP_RING_NEED_WAKEUP, Ordering::Relaxed);
        assert!(ring.needs_wakeup());
    }

    #[test]
    #[should_panic(expected = "ring entries outside the mapping")]
    fn new_refuses_entries_past_the_mapping() {
        let map = Mmap::anon(4096).unwrap();
        // 512 u64 entries from offset 192 end past 4096 bytes.
        // SAFETY: nobody else uses this fresh memory.
        let _ring = unsafe { Ring::<u64, Cons>::new(map, &OFF, 512) };
    }

    #[test]
    #[should_panic(expected = "power of two")]
    fn new_refuses_a_size_not_a_power_of_two() {
        let map = Mmap::anon(4096).unwrap();
        // SAFETY: nobody else uses this fresh memory.
        let _ring = unsafe { Ring::<u64, Cons>::new(map, &OFF, 6) };
    }
}
