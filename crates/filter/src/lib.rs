//! tcpdump filter expressions for wiretape.
//!
//! * [`compile`]: an expression (`man pcap-filter`) to a classic BPF
//!   [`Program`], with libpcap's own compiler (linked through a small FFI;
//!   calls are serialized with a global mutex).
//! * [`Program`]: the validated instructions, [`Program::dump`] (as
//!   `tcpdump -d`), and a safe evaluator ([`Program::run`],
//!   [`Program::matches`]) with libpcap's `bpf_filter` semantics, for
//!   filtering frames in user space.
//! * [`ebpf`]: the translation of a classic program to eBPF, as a function
//!   body taking `data`/`data_end` or as a complete XDP program, for
//!   filtering in the kernel; its module docs describe the design.
//! * [`conn`]: a frame's connection (addresses, protocol, ports, TCP
//!   flags, the transport payload), the parser the per-connection cutoff
//!   and the session table share.
//! * [`kernel`]: loading an XDP program and running it on a frame with
//!   `BPF_PROG_TEST_RUN` (the raw `bpf(2)` syscall).
//!
//! ```no_run
//! let prog = wiretape_filter::compile("tcp port 80", wiretape_filter::LINKTYPE_ETHERNET, 0)?;
//! let frame = [0u8; 60];
//! let keep = prog.matches(&frame, frame.len() as u32);
//! # Ok::<(), wiretape_filter::FilterError>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod conn;
pub mod ebpf;
pub mod flow;
mod insn;
pub mod kernel;
pub mod linktype;
mod pcap;
mod program;
pub mod words;

pub use insn::{op, Insn};
pub use pcap::{compile, compile_with_netmask, FilterError, DEFAULT_SNAPLEN, LINKTYPE_ETHERNET};
pub use program::{Program, ProgramError, MAX_BACK_JUMPS};
