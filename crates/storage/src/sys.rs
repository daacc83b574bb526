//! The system calls of the write path on paths and descriptors (statvfs,
//! flock, fadvise, lseek, sysconf, setpriority): each one small, its
//! invariant beside it. The readers' (the lock tests, read advice) are
//! `wiretape_files::sys`'s.

use wiretape_files::StorageError;

/// The statvfs of the filesystem holding `dir`.
fn statvfs(dir: &std::path::Path) -> Option<libc::statvfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: libc::statvfs is a plain C struct of integers, for which all
    // zero bytes are a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call, and
    // `s` is a live, writable statvfs: the call only writes into it.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(s)
}

/// (free for unprivileged users, total) bytes of the filesystem holding `dir`.
pub fn fs_space(dir: &std::path::Path) -> Option<(u64, u64)> {
    let s = statvfs(dir)?;
    let f = s.f_frsize;
    Some((s.f_bavail * f, s.f_blocks * f))
}

/// Whether the filesystem holding `dir` is read-only now (`ST_RDONLY`: a
/// read-only mount, or one the kernel turned read-only after an error; or
/// ext4's `emergency_ro`: since Linux 6.x an ext4 that aborts refuses
/// writes with EROFS without setting `ST_RDONLY`, and says so only in its
/// mount options). False when it cannot be told.
pub(crate) fn fs_read_only(dir: &std::path::Path) -> bool {
    statvfs(dir).is_some_and(|s| s.f_flag & libc::ST_RDONLY != 0)
        || std::fs::read_to_string("/proc/self/mounts")
            .is_ok_and(|m| emergency_ro(&m, &dir.canonicalize().unwrap_or_default()))
}

/// Whether the mount holding `dir` (the longest mount point above it) in
/// `mounts` (`/proc/self/mounts`) has the option `emergency_ro`.
fn emergency_ro(mounts: &str, dir: &std::path::Path) -> bool {
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let at = f.nth(1)?.replace("\\040", " ");
            Some((at, f.nth(1)?.to_owned()))
        })
        .filter(|(at, _)| dir.starts_with(at))
        .max_by_key(|(at, _)| at.len())
        .is_some_and(|(_, opts)| opts.split(',').any(|o| o == "emergency_ro"))
}

/// Bytes free for unprivileged users on the filesystem holding `file`.
pub(crate) fn free_bytes(file: &std::fs::File) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: libc::statvfs is a plain C struct of integers, for which all
    // zero bytes are a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor the caller keeps open, and a live, writable
    // statvfs: the call only writes into it.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut s) } != 0 {
        return None;
    }
    Some(s.f_bavail * s.f_frsize)
}

/// Creates `path` for writing, never over an existing file (wiretape never
/// overwrites a capture), with extra open(2) `flags` (e.g. O_DIRECT).
pub(crate) fn create_new(
    path: &std::path::Path,
    flags: i32,
) -> Result<std::fs::File, StorageError> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(flags | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| StorageError::Create {
            path: path.to_owned(),
            source,
        })?;
    // While it is open, the file is being written: readers (extract) see the
    // lock and take a torn or zero tail for writes in flight, not damage.
    // Advisory, released when the descriptor closes (also on a crash);
    // where a filesystem has no locks, readers simply cannot tell.
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own and keep open; no memory involved.
    let _ = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    Ok(f)
}

/// The writer is done with `file` (complete and synced): drop its lock now.
/// Closing the descriptor would too, but a ring that registered the file
/// (io_uring fixed files) releases its reference only when the kernel
/// tears the ring down, asynchronously, possibly after the process exited:
/// a reader would take a finished file for one being written.
pub(crate) fn unlock(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor the caller keeps open; no memory involved.
    let _ = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

/// The offset of the first hole in `file` (of `len` bytes) if it lies
/// before the end. A file written with [`uring::Growth::Extend`] is
/// allocated ahead and written in parallel, so after a crash a write that
/// never completed is a hole (an unwritten extent, read as zeros) that can
/// sit before writes that did: everything from the first hole on is a
/// write in flight at the crash, not data. Clean cached pages are dropped
/// first, since the kernel counts a cached page over a hole as data.
/// None where the filesystem cannot tell (it then reports no hole).
pub(crate) fn first_hole(file: &std::fs::File, len: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: advice and a seek on a descriptor the caller keeps open; no
    // memory involved (the seek moves this descriptor's offset only).
    let at = unsafe {
        libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
        libc::lseek(fd, 0, libc::SEEK_HOLE)
    };
    (at >= 0 && (at as u64) < len).then_some(at as u64)
}

/// The machine's physical memory in bytes (0 if the system will not say).
pub(crate) fn physical_memory() -> u64 {
    // SAFETY: sysconf only reads system configuration; no memory involved.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(size.max(0) as u64)
}

/// Lowers the calling thread's priority (nice 10): the key index builder
/// runs beside the capture and writer threads and must yield to them.
/// Linux: the nice value is per thread, and `setpriority` on the thread id
/// sets this thread's only. Best effort (an error leaves it as it was).
pub(crate) fn lower_priority() {
    // SAFETY: gettid and setpriority take and return integers only; no
    // memory involved.
    unsafe {
        let tid = libc::gettid();
        let _ = libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
    }
}

/// CPU time the calling thread has used, ns (CLOCK_THREAD_CPUTIME_ID; 0 if
/// the clock cannot be read). Read once per index segment, never per frame.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec: the call only writes into it.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    /// ext4 after `mount -o remount,abort` (Linux 6.18): `emergency_ro`
    /// in its options, no `ro`; the longest mount point above wins.
    #[test]
    fn an_aborted_ext4_is_read_only() {
        let m = "/dev/vda / ext4 rw,relatime 0 0\n\
                 /dev/loop0 /tmp/a.mnt ext4 rw,relatime,abort,emergency_ro 0 0\n\
                 /dev/loop1 /tmp/a\\040b ext4 rw,relatime,emergency_ro 0 0\n";
        let p = std::path::Path::new;
        assert!(super::emergency_ro(m, p("/tmp/a.mnt/x")));
        assert!(super::emergency_ro(m, p("/tmp/a.mnt")));
        assert!(super::emergency_ro(m, p("/tmp/a b/c")));
        assert!(!super::emergency_ro(m, p("/tmp/a.mntx")));
        assert!(!super::emergency_ro(m, p("/tmp")));
    }
}
