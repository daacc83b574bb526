//! Reading the CPU's time-stamp counter: the crate's one `unsafe`.

/// The TSC, or None where the architecture has none.
#[inline(always)]
pub(crate) fn read() -> Option<u64> {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86_64 (every x86_64 CPU has
        // it; user-space access is only disabled by CR4.TSD, which Linux does
        // not set); it reads a counter and touches no memory.
        Some(unsafe { core::arch::x86_64::_rdtsc() })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// True when the TSC runs at a constant rate across P- and C-states
/// (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo): only then is it a clock.
pub fn invariant() -> bool {
    read().is_some()
        && std::fs::read_to_string("/proc/cpuinfo")
            .map(|s| {
                s.lines().find(|l| l.starts_with("flags")).is_some_and(|l| {
                    l.split_whitespace().any(|f| f == "constant_tsc")
                        && l.split_whitespace().any(|f| f == "nonstop_tsc")
                })
            })
            .unwrap_or(false)
}
