//! The system calls of the readers on descriptors (flock, fadvise): each
//! one small, its invariant beside it. A writer holds an exclusive advisory
//! lock on each file while it writes it (`wiretape-storage` takes it);
//! these tell a reader whether that writer is still there.

/// Whether the process that took `file`'s exclusive lock has ended (the
/// lock then only outlives it until the kernel has torn down its io_uring,
/// whose writes in flight complete first: tens of ms after a SIGKILL).
/// Read from /proc/locks (its pid, in our pid namespace); false when the
/// owner lives, or is not known (another pid namespace, no /proc).
pub fn lock_owner_gone(file: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = file.metadata() else {
        return false;
    };
    let dev = m.dev();
    // Linux's dev_t: major in bits 8-19 and 32-43, minor in 0-7 and 12-31.
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
    let id = format!("{major:02x}:{minor:02x}:{}", m.ino());
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return false;
    };
    // "1: FLOCK  ADVISORY  WRITE 4242 fe:00:123 0 EOF"; waiters have "->".
    let owners: Vec<u32> = locks
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 6 && w[1] == "FLOCK" && w[3] == "WRITE" && w[5] == id)
                .then(|| w[4].parse().ok())
                .flatten()
        })
        .collect();
    !owners.is_empty()
        && owners
            .iter()
            .all(|&pid| pid > 0 && !std::path::Path::new(&format!("/proc/{pid}")).exists())
}

/// Whether a writer (wiretape's, while it has the file open) holds the
/// file: it is being written, and its end may be a write in flight. Tested
/// with a non-blocking shared `flock`, released at once.
pub fn is_being_written(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: flock on a descriptor the caller keeps open; no memory involved.
    let rc = unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) };
    if rc == 0 {
        // SAFETY: as above; releases the lock just taken.
        unsafe { libc::flock(fd, libc::LOCK_UN) };
        return false;
    }
    std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
}

/// Tells the kernel `file` is read at random places (a key index: a few
/// pages per lookup), so that it does not read ahead around each page.
pub(crate) fn advise_random(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: advice on a descriptor the caller keeps open; no memory involved.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
}

/// Undoes [`advise_random`]: `file` is read in order again (the kernel
/// reads ahead).
pub(crate) fn advise_normal(file: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: advice on a descriptor the caller keeps open; no memory involved.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_NORMAL) };
}
