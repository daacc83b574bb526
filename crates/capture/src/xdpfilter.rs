//! The capture filter in the XDP program: a tcpdump expression, compiled by
//! libpcap to classic BPF and translated to eBPF (`wiretape-filter`), run on
//! every frame of a captured queue before it is redirected.
//!
//! # Design: a tail call into a generated program
//!
//! The steering program (`bpf/steer.bpf.c`) counts the frame as `seen`,
//! stamps it into the metadata, then does `bpf_tail_call(ctx, &filter_prog, 0)`.
//! [`tail_program`] builds the program in that slot, loaded raw with
//! `bpf(2)` (map references as `BPF_PSEUDO_MAP_FD` 64-bit immediates):
//!
//! ```text
//! r9 = ctx; r2 = ctx->data_end; r1 = ctx->data      prologue
//! <classic program translated, inlined>              R0 = classic result
//! if r0 == 0 goto reject
//! [--cutoff: bpf_tail_call(ctx, &filter_prog, 1)]     the cutoff decides
//! return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)
//! reject: qstats[ctx->rx_queue_index].filtered++; return XDP_PASS
//! ```
//!
//! With `--cutoff` the accept path first tail-calls `wiretape_cutoff`
//! (slot 1 of the same program array, see `bpf/steer.bpf.c`), which
//! redirects or drops the frame; so the filter runs first and the cutoff
//! counts only the frames it keeps. Should that tail call fail, the frame
//! is redirected (kept).
//!
//! With no filter the slot is empty, the tail call falls through and the
//! steering program redirects as it always did; so the unfiltered path is
//! unchanged but for one failed tail call.
//!
//! Why a tail call and not the alternatives:
//! - Replacing the instructions of a `__noinline` stub before load
//!   (`bpf_program__set_insns`): libbpf-rs 0.27.2 does not wrap it, and a
//!   stub is a BPF-to-BPF subprogram whose code libbpf appends at load, with
//!   BTF func and line info the new length would have to match; fragile.
//! - `freplace` of a global function: needs a BTF-described target and an
//!   extension program with its own BTF (we load raw, without BTF), and an
//!   extension of a device-bound program must be bound to the same device.
//! - A tail call needs only that the target be an XDP program with the
//!   caller's `expected_attach_type` (kernel 6.18 checks it for program
//!   arrays: `__bpf_prog_map_compatible`), the same JIT state and the same
//!   `xdp_has_frags`. The target stays an ordinary (not device-bound)
//!   program, also under the device-bound `wiretape_steer_hw`: the kernel
//!   refuses device-bound programs in program arrays
//!   (`bpf_prog_map_compatible`: "Until device checks are implemented,
//!   prohibit adding dev-bound programs to program maps"), and a
//!   device-bound caller may tail-call an unbound target (the caller's
//!   check, `bpf_check_tail_call`, does not compare device binding); the
//!   filter calls no device kfunc, so it needs none. Checked on 6.18: a
//!   target loaded device-bound to the same ifindex
//!   (`BPF_F_XDP_DEV_BOUND_ONLY`), or with `expected_attach_type` 0 instead
//!   of `BPF_XDP`, is refused by the program-array update (EINVAL); the
//!   unbound `BPF_XDP` target works under both steering programs (the
//!   integration tests run both). Cost: one indirect jump, a few ns,
//!   measured by `benches/filter_cost.rs`.
//!
//! The metadata is reserved in front of `ctx->data` (`bpf_xdp_adjust_meta`
//! moves `data_meta` only), so the filter sees the frame from its first
//! byte and `len` is the frame's length.
//!
//! Rights: loading needs CAP_BPF (and CAP_NET_ADMIN, as the steering
//! program does); an expression that reads the length (`len`, `less`,
//! `greater`) subtracts packet pointers, which the verifier allows only to
//! a loader with CAP_PERFMON (root has it).

use crate::CaptureError;
use wiretape_filter::ebpf::{self, eop::*, EbpfInsn, TranslateError};
use wiretape_filter::{FilterError, Program};

/// A compiled capture filter: the expression and libpcap's classic program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureFilter {
    /// The expression, as given.
    pub expr: String,
    /// Its classic BPF program.
    pub program: Program,
}

impl CaptureFilter {
    /// Compiles `expr` with libpcap for frames of `linktype` captured with
    /// `snaplen` bytes (see [`wiretape_filter::compile`]).
    pub fn compile(expr: &str, linktype: u32, snaplen: u32) -> Result<Self, FilterError> {
        Ok(CaptureFilter {
            expr: expr.to_string(),
            program: wiretape_filter::compile(expr, linktype, snaplen)?,
        })
    }

    /// For a live interface `ifname` (Ethernet, run in XDP): compiled
    /// with the interface's IPv4 netmask (0 without one, as tcpdump does),
    /// refusing a program that loops (libpcap's `protochain`), which XDP
    /// cannot run, in one line saying what can.
    pub fn compile_live(expr: &str, ifname: &str, snaplen: u32) -> Result<Self, FilterError> {
        let netmask = crate::sys::ipv4_netmask(ifname);
        let program = wiretape_filter::compile_with_netmask(
            expr,
            wiretape_filter::LINKTYPE_ETHERNET,
            snaplen,
            netmask,
        )?;
        if program.loops() {
            return Err(FilterError::Argument {
                expr: expr.to_string(),
                message: "a loop (libpcap's protochain) cannot run in XDP on a live interface; \
                          record -r and extract take it"
                    .into(),
            });
        }
        Ok(CaptureFilter {
            expr: expr.to_string(),
            program,
        })
    }

    /// True when the loaded program needs CAP_PERFMON (it reads the length).
    pub fn needs_perfmon(&self) -> bool {
        ebpf::uses_len(self.program.insns())
    }
}

/// The map file descriptors the generated program refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilterMaps {
    /// The XSKMAP `xsks` (queue -> socket).
    pub xsks: i32,
    /// The per-CPU array `qstats` (queue -> `struct qstats`).
    pub qstats: i32,
    /// The program array `filter_prog` when the cutoff is on: the accept
    /// path tail-calls its slot 1 (`wiretape_cutoff`) before redirecting.
    pub cutoff: Option<i32>,
}

/// Offset of `filtered` in `struct qstats` (the sixth `__u64`).
pub(crate) const QSTATS_FILTERED_OFF: i16 = 5 * 8;
/// Offset of `rx_queue_index` in `struct xdp_md`.
const XDP_MD_RX_QUEUE: i16 = 16;
/// Helper ids (`enum bpf_func_id`).
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_FUNC_TAIL_CALL: i32 = 12;

/// The tail-call target for `classic` (see the module docs), referring to
/// the maps `maps`.
pub fn tail_program(classic: &Program, maps: FilterMaps) -> Result<Vec<EbpfInsn>, TranslateError> {
    let i = EbpfInsn::new;
    let map = |reg: u8, fd: i32| {
        [
            i(LD | IMM | DW, reg, PSEUDO_MAP_FD, 0, fd),
            i(0, 0, 0, 0, 0),
        ]
    };
    let mut v = vec![
        i(ALU64 | MOV | X, 9, 1, 0, 0), // r9 = ctx
        i(LDX | MEM | W, 2, 1, 4, 0),   // r2 = ctx->data_end
        i(LDX | MEM | W, 1, 1, 0, 0),   // r1 = ctx->data
    ];
    v.extend(ebpf::inline_body(classic.insns())?);
    // Accept: the cutoff decides, if it is on (a tail call into
    // filter_prog[1], which redirects or drops); else, or if the tail call
    // fails, redirect to the queue's socket (XDP_PASS if it is gone).
    let mut accept = Vec::new();
    if let Some(fd) = maps.cutoff {
        accept.extend([
            i(ALU64 | MOV | X, 1, 9, 0, 0),
            map(2, fd)[0],
            map(2, fd)[1],
            i(ALU64 | MOV | K, 3, 0, 0, 1),
            i(JMP | CALL, 0, 0, 0, BPF_FUNC_TAIL_CALL),
        ]);
    }
    accept.extend([
        i(LDX | MEM | W, 2, 9, XDP_MD_RX_QUEUE, 0),
        map(1, maps.xsks)[0],
        map(1, maps.xsks)[1],
        i(ALU64 | MOV | K, 3, 0, 0, XDP_PASS),
        i(JMP | CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        i(JMP | EXIT, 0, 0, 0, 0),
    ]);
    v.push(i(JMP | JEQ | K, 0, 0, accept.len() as i16, 0));
    v.extend(accept);
    // Reject: count it on the queue, leave it to the stack.
    v.extend([
        i(LDX | MEM | W, 2, 9, XDP_MD_RX_QUEUE, 0),
        i(STX | MEM | W, 10, 2, -4, 0),
        i(ALU64 | MOV | X, 2, 10, 0, 0),
        i(ALU64 | ADD | K, 2, 0, 0, -4),
        map(1, maps.qstats)[0],
        map(1, maps.qstats)[1],
        i(JMP | CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM),
        i(JMP | JEQ | K, 0, 0, 3, 0),
        i(LDX | MEM | DW, 1, 0, QSTATS_FILTERED_OFF, 0),
        i(ALU64 | ADD | K, 1, 0, 0, 1),
        i(STX | MEM | DW, 0, 1, QSTATS_FILTERED_OFF, 0),
        i(ALU64 | MOV | K, 0, 0, 0, XDP_PASS),
        i(JMP | EXIT, 0, 0, 0, 0),
    ]);
    Ok(v)
}

/// `wiretape filter --explain`: the classic program (as `tcpdump -d`
/// prints it) and the eBPF program wiretape loads as the tail-call target,
/// one instruction per line, maps by name.
pub fn explain(f: &CaptureFilter) -> Result<String, CaptureError> {
    const XSKS: i32 = -1001;
    const QSTATS: i32 = -1002;
    let insns = tail_program(
        &f.program,
        FilterMaps {
            xsks: XSKS,
            qstats: QSTATS,
            cutoff: None,
        },
    )
    .map_err(|source| CaptureError::FilterTranslate {
        expr: f.expr.clone(),
        source,
    })?;
    let names = |fd: i32| match fd {
        XSKS => Some("xsks".to_string()),
        QSTATS => Some("qstats".to_string()),
        _ => None,
    };
    let mut s = format!(
        "expression: {}\n\nclassic BPF (libpcap, {} instructions; as tcpdump -d):\n{}\n",
        if f.expr.trim().is_empty() {
            "(empty: every frame)"
        } else {
            &f.expr
        },
        f.program.insns().len(),
        f.program.dump()
    );
    s += &format!(
        "eBPF loaded into the XDP program (tail call target of wiretape_steer / wiretape_steer_hw, \
         {} instructions; R1 = data, R2 = data_end, A = r6, X = r7, r9 = ctx, \
         scratch memory at r10-64):\n{}",
        insns.len(),
        ebpf::listing(&insns, &names)
    );
    s += &format!(
        "\nneeds: CAP_BPF and CAP_NET_ADMIN{}\n",
        if f.needs_perfmon() {
            ", and CAP_PERFMON (the expression reads the frame length: pointer subtraction)"
        } else {
            ""
        }
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiretape_filter::LINKTYPE_ETHERNET;

    #[test]
    fn generated_program_shape() {
        let f = CaptureFilter::compile("tcp port 80", LINKTYPE_ETHERNET, 65535).unwrap();
        let v = tail_program(
            &f.program,
            FilterMaps {
                xsks: 7,
                qstats: 8,
                cutoff: None,
            },
        )
        .unwrap();
        // Two map loads, two helper calls, both ends return.
        let loads: Vec<i32> = v
            .iter()
            .filter(|i| i.code == LD | IMM | DW)
            .map(|i| i.imm)
            .collect();
        assert_eq!(loads, vec![7, 8]);
        let calls: Vec<i32> = v
            .iter()
            .filter(|i| i.code == JMP | CALL)
            .map(|i| i.imm)
            .collect();
        assert_eq!(calls, vec![BPF_FUNC_REDIRECT_MAP, BPF_FUNC_MAP_LOOKUP_ELEM]);
        assert_eq!(v.last().unwrap().code, JMP | EXIT);
        let text = explain(&f).unwrap();
        assert!(text.contains("(000) ldh      [12]"), "{text}");
        assert!(text.contains("r1 = map[xsks] ll"), "{text}");
        assert!(text.contains("call bpf_redirect_map#51"), "{text}");
        assert!(!text.contains("CAP_PERFMON"), "{text}");
        // With the cutoff on, the accept path tail-calls its slot first.
        let maps = FilterMaps {
            xsks: 7,
            qstats: 8,
            cutoff: Some(9),
        };
        let v = tail_program(&f.program, maps).unwrap();
        let calls: Vec<i32> = v
            .iter()
            .filter(|i| i.code == JMP | CALL)
            .map(|i| i.imm)
            .collect();
        assert_eq!(
            calls,
            vec![
                BPF_FUNC_TAIL_CALL,
                BPF_FUNC_REDIRECT_MAP,
                BPF_FUNC_MAP_LOOKUP_ELEM
            ]
        );
        let f = CaptureFilter::compile("less 100", LINKTYPE_ETHERNET, 65535).unwrap();
        assert!(f.needs_perfmon());
        assert!(explain(&f).unwrap().contains("CAP_PERFMON"));
    }
}
