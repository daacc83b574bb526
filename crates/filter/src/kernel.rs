//! Loads an eBPF XDP program with the raw `bpf(2)` syscall and runs it on a
//! frame with `BPF_PROG_TEST_RUN`: how the tests check the translation
//! against the kernel's verifier and interpreter/JIT, without attaching
//! anything to an interface. Needs CAP_BPF + CAP_NET_ADMIN (+ CAP_PERFMON for
//! programs that use `len`), i.e. root.
#![allow(unsafe_code)]

use crate::ebpf::EbpfInsn;
use std::ffi::c_long;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use thiserror::Error;

const BPF_PROG_LOAD: c_long = 5;
const BPF_PROG_TEST_RUN: c_long = 10;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// Verifier log buffer for a failed load (log_level 1 on a large program
/// says a lot).
const LOG_SIZE: usize = 16 << 20;

/// Why a program could not be loaded or run.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum KernelError {
    /// `BPF_PROG_LOAD` failed; `log` is the verifier's log (log level 1).
    #[error("BPF_PROG_LOAD failed: {errno}\nverifier log:\n{log}")]
    Load {
        /// The syscall's error.
        errno: io::Error,
        /// The verifier log.
        log: String,
    },
    /// `BPF_PROG_TEST_RUN` failed.
    #[error("BPF_PROG_TEST_RUN failed: {0}")]
    TestRun(io::Error),
    /// More instructions or data than the syscall can describe.
    #[error("program or frame too large")]
    TooLarge,
}

impl KernelError {
    /// The last `n` non-empty lines of the verifier's log (a refused
    /// load), where the verifier says why; None for other errors.
    pub fn verifier_tail(&self, n: usize) -> Option<Vec<String>> {
        let KernelError::Load { log, .. } = self else {
            return None;
        };
        let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
        let from = lines.len().saturating_sub(n);
        Some(lines[from..].iter().map(|l| l.to_string()).collect())
    }
}

/// The `BPF_PROG_LOAD` part of `union bpf_attr` (up to
/// `expected_attach_type`; the kernel zero-fills the rest).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The `BPF_PROG_TEST_RUN` part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `bpf(cmd, attr, size_of::<T>())`.
///
/// # Safety
///
/// `attr` must be the attribute struct the kernel expects for `cmd`, and
/// every pointer inside it must be valid for the access the kernel makes
/// (reads of the described length, writes of the described buffer size)
/// for the duration of the call.
unsafe fn bpf<T>(cmd: c_long, attr: &mut T) -> io::Result<i64> {
    // SAFETY: the caller vouches for attr's contents; attr itself is a live,
    // writable T of the size we pass.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as i64)
    }
}

/// True when running as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// How [`XdpProgram::load_with`] loads a program, beyond its instructions.
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// The program's name (up to 15 bytes are kept); empty: `wt_filter`.
    pub name: String,
    /// `expected_attach_type` (`BPF_XDP` = 37 is what libbpf gives a
    /// `SEC("xdp")` program; a tail-call target must have its caller's).
    pub expected_attach_type: u32,
    /// `prog_ifindex`: the device a device-bound program is bound to (0: none).
    pub ifindex: u32,
    /// `prog_flags` (e.g. `BPF_F_XDP_DEV_BOUND_ONLY`).
    pub flags: u32,
}

/// Input and output of one [`XdpProgram::test_run_with`].
#[derive(Clone, Copy, Debug, Default)]
pub struct TestRun {
    /// The program's return value (an XDP action) on the last run.
    pub retval: u32,
    /// Mean time per run in ns, as the kernel measured it.
    pub duration_ns: u32,
}

/// The context of a test run: the `struct xdp_md` fields the kernel lets a
/// test set (0 = not set).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpMd {
    /// Always 0 (the kernel refuses anything else).
    pub data: u32,
    /// The frame's length (newer kernels take it as the length of the
    /// linear part and put the rest of the frame into fragments).
    pub data_end: u32,
    /// Always 0.
    pub data_meta: u32,
    /// The receiving device (in the caller's network namespace); needed
    /// for `rx_queue_index`.
    pub ingress_ifindex: u32,
    /// The RX queue (below the device's queue count).
    pub rx_queue_index: u32,
    /// Must be 0.
    pub egress_ifindex: u32,
}

/// A loaded XDP program (not attached anywhere); closed on drop.
#[derive(Debug)]
pub struct XdpProgram {
    fd: OwnedFd,
}

impl AsFd for XdpProgram {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl XdpProgram {
    /// Loads `insns` as a `BPF_PROG_TYPE_XDP` program, license "GPL". On a
    /// verifier refusal, loads again with a log (level 1) and returns it.
    pub fn load(insns: &[EbpfInsn]) -> Result<XdpProgram, KernelError> {
        Self::load_with(insns, &LoadOptions::default())
    }

    /// [`load`](Self::load) with a name, an expected attach type, a device
    /// binding or flags.
    pub fn load_with(insns: &[EbpfInsn], opts: &LoadOptions) -> Result<XdpProgram, KernelError> {
        match Self::load_with_log(insns, opts, None) {
            Ok(p) => Ok(p),
            Err(_) => {
                let mut log = vec![0u8; LOG_SIZE];
                let errno = match Self::load_with_log(insns, opts, Some(&mut log)) {
                    Ok(p) => return Ok(p),
                    Err(e) => e,
                };
                let n = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                Err(KernelError::Load {
                    errno,
                    log: String::from_utf8_lossy(&log[..n]).into_owned(),
                })
            }
        }
    }

    fn load_with_log(
        insns: &[EbpfInsn],
        opts: &LoadOptions,
        log: Option<&mut [u8]>,
    ) -> io::Result<XdpProgram> {
        const LICENSE: &[u8] = b"GPL\0";
        let mut name = [0u8; 16];
        let given = if opts.name.is_empty() {
            "wt_filter"
        } else {
            opts.name.as_str()
        };
        // At most 15 bytes, keeping the NUL; the kernel takes [A-Za-z0-9_.].
        for (d, c) in name[..15].iter_mut().zip(given.bytes()) {
            *d = if c.is_ascii_alphanumeric() || c == b'.' {
                c
            } else {
                b'_'
            };
        }
        let insn_cnt =
            u32::try_from(insns.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt,
            insns: insns.as_ptr() as u64,
            license: LICENSE.as_ptr() as u64,
            prog_name: name,
            expected_attach_type: opts.expected_attach_type,
            prog_ifindex: opts.ifindex,
            prog_flags: opts.flags,
            ..Default::default()
        };
        if let Some(log) = log {
            attr.log_level = 1;
            attr.log_size = log.len().min(u32::MAX as usize) as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
        }
        // SAFETY: attr is a BPF_PROG_LOAD attribute: insns points to insn_cnt
        // EbpfInsn (#[repr(C)], the layout of struct bpf_insn), license to a
        // NUL-terminated string, log_buf (if set) to log_size writable bytes;
        // all outlive the call.
        let fd = unsafe { bpf(BPF_PROG_LOAD, &mut attr)? };
        // SAFETY: a successful BPF_PROG_LOAD returns a new file descriptor
        // that nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        Ok(XdpProgram { fd })
    }

    /// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`) and returns
    /// its return value (an XDP action). The kernel wants at least 14 bytes
    /// (ETH_HLEN) and at most about a page.
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, KernelError> {
        Ok(self.test_run_with(frame, None, 1)?.retval)
    }

    /// Runs the program `repeat` times (at least once) on `frame`, with the
    /// context `ctx` if given (the receiving device and RX queue), and
    /// returns the last return value and the kernel's mean time per run.
    pub fn test_run_with(
        &self,
        frame: &[u8],
        ctx: Option<&XdpMd>,
        repeat: u32,
    ) -> Result<TestRun, KernelError> {
        let data_size_in = u32::try_from(frame.len()).map_err(|_| KernelError::TooLarge)?;
        let mut attr = TestRunAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            data_size_in,
            data_in: frame.as_ptr() as u64,
            repeat: repeat.max(1),
            ..Default::default()
        };
        if let Some(ctx) = ctx {
            attr.ctx_size_in = std::mem::size_of::<XdpMd>() as u32;
            attr.ctx_in = ctx as *const XdpMd as u64;
        }
        // SAFETY: attr is a BPF_PROG_TEST_RUN attribute: prog_fd is our live
        // program, data_in points to data_size_in readable bytes and ctx_in
        // (if set) to one #[repr(C)] struct xdp_md of ctx_size_in bytes, all
        // outliving the call; data_out and ctx_out are NULL with size 0, so
        // the kernel writes nothing but attr itself.
        unsafe { bpf(BPF_PROG_TEST_RUN, &mut attr) }.map_err(KernelError::TestRun)?;
        Ok(TestRun {
            retval: attr.retval,
            duration_ns: attr.duration,
        })
    }
}
