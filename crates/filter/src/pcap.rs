//! The few libpcap functions we call, and [`compile`] on top of them.
//!
//! libpcap's filter compiler (a yacc parser with global state in older
//! versions) is not reentrant everywhere: every call goes through one global
//! mutex.
#![allow(unsafe_code)]

use crate::insn::Insn;
use crate::program::{Program, ProgramError};
use std::ffi::{c_char, c_int, c_uint, CStr, CString};
use std::sync::Mutex;
use thiserror::Error;

pub use wiretape_format::pcap::LINKTYPE_ETHERNET;

/// The snap length [`compile`] uses when given 0 (libpcap's maximum, 256 KiB,
/// as `tcpdump -s 0`).
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Why a filter expression could not be turned into a [`Program`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FilterError {
    /// libpcap refused the expression; `message` is its own explanation.
    #[error("filter expression '{expr}': {message} (see man pcap-filter)")]
    Syntax {
        /// The expression as given.
        expr: String,
        /// libpcap's message (`pcap_geterr`).
        message: String,
    },
    /// The link type or snap length cannot be passed to libpcap.
    #[error("filter expression '{expr}': {message}")]
    Argument {
        /// The expression as given.
        expr: String,
        /// What is wrong.
        message: String,
    },
    /// libpcap produced a program we refuse (e.g. a backward jump for
    /// `protochain`).
    #[error("filter expression '{expr}': {source}")]
    Program {
        /// The expression as given.
        expr: String,
        /// Why the program was refused.
        source: ProgramError,
    },
}

impl FilterError {
    /// The expression refused, as given.
    pub fn expr(&self) -> &str {
        match self {
            FilterError::Syntax { expr, .. }
            | FilterError::Argument { expr, .. }
            | FilterError::Program { expr, .. } => expr,
        }
    }
}

/// Opaque `pcap_t`.
#[repr(C)]
struct PcapT {
    _private: [u8; 0],
}

/// `struct bpf_program`.
#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut Insn,
}

// Linked by build.rs (cargo:rustc-link-lib=pcap).
extern "C" {
    fn pcap_open_dead(linktype: c_int, snaplen: c_int) -> *mut PcapT;
    fn pcap_compile(
        p: *mut PcapT,
        fp: *mut BpfProgram,
        expr: *const c_char,
        optimize: c_int,
        netmask: c_uint,
    ) -> c_int;
    fn pcap_geterr(p: *mut PcapT) -> *mut c_char;
    fn pcap_freecode(fp: *mut BpfProgram);
    fn pcap_close(p: *mut PcapT);
}

static COMPILER: Mutex<()> = Mutex::new(());

/// Compiles a tcpdump filter expression (see `man pcap-filter`) with libpcap
/// for frames of link type `linktype` (the `LINKTYPE_` value a capture file
/// states; compiled for its `DLT_` as libpcap does, see
/// [`crate::linktype::linktype_to_dlt`]) captured with `snaplen` bytes
/// (0 = [`DEFAULT_SNAPLEN`]); accepting programs return `snaplen`.
///
/// Optimized (`-O` is not given to tcpdump), netmask 0 (what `tcpdump -r`
/// uses for a file; see [`compile_with_netmask`] for an interface). An
/// empty (or blank) expression accepts every frame.
pub fn compile(expr: &str, linktype: u32, snaplen: u32) -> Result<Program, FilterError> {
    compile_with_netmask(expr, linktype, snaplen, 0)
}

/// [`compile`] with the IPv4 netmask `ip broadcast` needs (host byte
/// order, as `pcap_lookupnet` gives it): a live interface's, 0 when it has
/// no IPv4 address (as tcpdump does).
pub fn compile_with_netmask(
    expr: &str,
    linktype: u32,
    snaplen: u32,
    netmask: u32,
) -> Result<Program, FilterError> {
    let arg_err = |message: String| FilterError::Argument {
        expr: expr.to_string(),
        message,
    };
    let linktype = c_int::try_from(crate::linktype::linktype_to_dlt(linktype))
        .map_err(|_| arg_err(format!("link type {linktype} is out of range")))?;
    let snaplen = if snaplen == 0 {
        DEFAULT_SNAPLEN
    } else {
        snaplen
    };
    let snaplen = c_int::try_from(snaplen)
        .map_err(|_| arg_err(format!("snap length {snaplen} is out of range")))?;
    let cexpr = CString::new(expr).map_err(|_| FilterError::Syntax {
        expr: expr.to_string(),
        message: "contains a NUL byte".to_string(),
    })?;

    let raw = |e: &CStr| -> Result<Result<Vec<Insn>, String>, FilterError> {
        // A panic elsewhere while holding the lock leaves libpcap's state as
        // good as before: keep going with the poisoned lock.
        let _guard = COMPILER.lock().unwrap_or_else(|e| e.into_inner());
        let dead = Dead::open(linktype, snaplen).ok_or_else(|| {
            arg_err(format!(
                "pcap_open_dead({linktype}, {snaplen}) failed (out of memory?)"
            ))
        })?;
        Ok(dead.compile(e, netmask))
    };
    let insns = match raw(&cexpr)? {
        Ok(insns) => insns,
        Err(mut message) => {
            // libpcap says "syntax error" and no more: find the word.
            if message.ends_with("syntax error") {
                // Parsed: compiled, or refused for another reason than syntax.
                let mut parses = |e: &str| {
                    CString::new(e).is_ok_and(|c| match raw(&c) {
                        Ok(Ok(_)) => true,
                        Ok(Err(m)) => !m.contains("syntax error"),
                        Err(_) => false,
                    })
                };
                if let Some(at) = crate::words::locate_syntax_error(expr, &mut parses) {
                    message = format!("{message} {at}");
                }
            }
            return Err(FilterError::Syntax {
                expr: expr.to_string(),
                message,
            });
        }
    };
    Program::new(insns).map_err(|source| FilterError::Program {
        expr: expr.to_string(),
        source,
    })
}

/// A `pcap_t` from `pcap_open_dead`, closed on drop.
struct Dead(*mut PcapT);

impl Dead {
    fn open(linktype: c_int, snaplen: c_int) -> Option<Dead> {
        // SAFETY: pcap_open_dead takes plain integers and returns a new
        // handle or NULL; we own the handle and close it in Drop.
        let p = unsafe { pcap_open_dead(linktype, snaplen) };
        (!p.is_null()).then_some(Dead(p))
    }

    /// Compiles `expr`; copies the instructions out and frees libpcap's copy.
    fn compile(&self, expr: &CStr, netmask: u32) -> Result<Vec<Insn>, String> {
        let mut prog = BpfProgram {
            bf_len: 0,
            bf_insns: std::ptr::null_mut(),
        };
        // SAFETY: self.0 is a live pcap_t (not closed before Drop); prog is a
        // valid, writable struct bpf_program; expr is NUL-terminated and
        // outlives the call. The caller holds COMPILER, so no other thread
        // is inside libpcap's compiler.
        let rc = unsafe { pcap_compile(self.0, &mut prog, expr.as_ptr(), 1, netmask as c_uint) };
        if rc != 0 {
            // SAFETY: pcap_geterr returns a pointer to the handle's
            // NUL-terminated error buffer, valid until the handle is used
            // again; we copy it at once.
            let msg = unsafe { CStr::from_ptr(pcap_geterr(self.0)) };
            let msg = msg.to_string_lossy();
            // One line: libpcap's messages have none, but be sure.
            return Err(msg.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        let insns = if prog.bf_insns.is_null() || prog.bf_len == 0 {
            Vec::new()
        } else {
            // SAFETY: on success pcap_compile set bf_insns to an array of
            // bf_len struct bpf_insn, which Insn mirrors (#[repr(C)], same
            // field types and order); it stays valid until pcap_freecode.
            unsafe { std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize) }.to_vec()
        };
        // SAFETY: prog was filled by a successful pcap_compile and is freed
        // once; its instructions were copied above.
        unsafe { pcap_freecode(&mut prog) };
        Ok(insns)
    }
}

impl Drop for Dead {
    fn drop(&mut self) {
        // SAFETY: self.0 came from pcap_open_dead and is closed exactly once.
        unsafe { pcap_close(self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insn_layout_matches_struct_bpf_insn() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(std::mem::align_of::<Insn>(), 4);
    }

    #[test]
    fn syntax_error_is_one_line_with_libpcaps_message() {
        let e = compile("tcp port 99999", LINKTYPE_ETHERNET, 0).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("filter expression 'tcp port 99999': "), "{s}");
        assert!(s.contains("99999"), "{s}");
        assert!(s.ends_with("(see man pcap-filter)"), "{s}");
        assert!(!s.contains('\n'), "{s}");
        assert!(matches!(e, FilterError::Syntax { .. }));
        for bad in ["tcp and", "host", "bogus", "nul\0byte"] {
            assert!(
                matches!(compile(bad, 1, 0), Err(FilterError::Syntax { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn empty_expression_accepts_everything() {
        for e in ["", "   "] {
            let p = compile(e, LINKTYPE_ETHERNET, 1500).unwrap();
            assert!(p.matches(&[], 0));
            assert_eq!(p.run(&[0u8; 60], 60), 1500);
        }
    }

    #[test]
    fn protochain_loops_and_xdp_refuses_it() {
        // libpcap implements protochain with a backward jump.
        let p = compile("ip6 protochain 6", LINKTYPE_ETHERNET, 0).unwrap();
        assert!(p.loops());
        let e = crate::ebpf::xdp_program(p.insns()).unwrap_err().to_string();
        assert!(e.contains("record -r and extract take it"), "{e}");
    }

    #[test]
    fn files_compile_with_netmask_0_and_their_dlt() {
        // tcpdump -r: netmask 0, so `ip broadcast` compiles.
        assert!(compile("ip broadcast", LINKTYPE_ETHERNET, 0).is_ok());
        // LINKTYPE_RAW (101) is DLT_RAW (12) on Linux: IPv4 at offset 0.
        let p = compile("ip", 101, 0).unwrap();
        assert!(p.matches(&[0x45, 0, 0, 20], 20));
        assert!(!p.matches(&[0x60, 0, 0, 0], 40));
    }

    #[test]
    fn bad_arguments() {
        assert!(matches!(
            compile("tcp", u32::MAX, 0),
            Err(FilterError::Argument { .. })
        ));
        assert!(matches!(
            compile("tcp", 1, u32::MAX),
            Err(FilterError::Argument { .. })
        ));
    }

    #[test]
    fn compiles_from_many_threads() {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    for j in 0..50 {
                        let p = compile(&format!("tcp port {}", i * 100 + j), 1, 0).unwrap();
                        assert!(p.insns().len() > 5);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}

#[cfg(test)]
mod syntax_position {
    /// libpcap says "syntax error" alone; the message adds the word and,
    /// for a typo of a keyword, the keyword.
    #[test]
    fn a_syntax_error_names_its_word_and_the_likely_fix() {
        for (e, want) in [
            (
                "tpc port 80",
                "syntax error at 'tpc' (word 1 of 3): did you mean 'tcp'?",
            ),
            (
                "tcp prt 80",
                "syntax error at 'prt' (word 2 of 3): did you mean 'port'?",
            ),
            (
                "udp prot 53",
                "at 'prot' (word 2 of 3): did you mean 'port' or 'proto'?",
            ),
            ("ip and and tcp", "syntax error at 'and' (word 3 of 4)"),
            ("tcp port 80 )", "syntax error at ')' (word 4 of 4)"),
            (
                "net 10.0.0.0/8 udp",
                "at 'udp' (word 3 of 3): 'and' or 'or' missing before it?",
            ),
            ("tcp and", "syntax error at its end: it stops after 'and'"),
            ("(tcp", "syntax error at its end"),
        ] {
            let m = super::compile(e, 1, 0).unwrap_err().to_string();
            assert!(m.contains(want), "{e}: {m}");
            assert!(m.contains(&format!("filter expression '{e}'")), "{m}");
        }
        // Other refusals are libpcap's own words, untouched.
        let m = super::compile("port 99999", 1, 0).unwrap_err().to_string();
        assert!(
            m.contains("illegal port number 99999") && !m.contains(" at "),
            "{m}"
        );
    }
}
