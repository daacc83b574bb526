//! Classic BPF to eBPF translation, for running a libpcap filter in XDP.
//!
//! # What the translation produces
//!
//! [`translate`] turns a classic program into the body of a BPF function
//! `u32 f(void *data, void *data_end)`: it expects R1 = packet start and
//! R2 = packet end (XDP's `ctx->data` and `ctx->data_end`), never modifies
//! them, and returns (`exit`) with R0 = the classic return value
//! (0 = reject). It can be loaded as a BPF-to-BPF subprogram, or inlined.
//! [`xdp_program`] wraps it into a complete XDP program: the prologue loads
//! `data`/`data_end` from `struct xdp_md` (32-bit loads at offsets 0 and 4),
//! the body is inlined with every `ret` jumping to an epilogue that returns
//! `XDP_PASS` (2) for a nonzero result and `XDP_DROP` (1) for 0.
//!
//! # Design (after cloudflare/cbpfc and the kernel's `bpf_convert_filter`)
//!
//! * Registers: A = R6, X = R7 (callee-saved, so they survive helper calls if
//!   an integration ever adds some; a BPF-to-BPF callee's R6-R9 are saved by
//!   the JIT/interpreter), both set to 0 at entry as classic BPF does (and as
//!   the verifier demands before any read). R3 and R4 are scratch for address
//!   computations, R0 carries the result, R5 and R8/R9 are unused.
//! * A and X hold 32-bit values zero-extended to 64 bits at all times: they
//!   are only written by 32-bit ALU operations (which zero the upper half)
//!   and by loads of 4 bytes or less. So 64-bit jumps compare the same as
//!   classic 32-bit ones, and `jset` with a sign-extended immediate is exact.
//!   Jump immediates above `i32::MAX` (which eBPF would sign-extend) go
//!   through R3 with a zero-extending 32-bit `mov`. No `BPF_JMP32` is needed.
//! * Scratch memory M[0..16] lives at R10-64 .. R10-4 (M\[i\] at
//!   R10 - 64 + 4*i). It is zeroed at entry (8 double-word stores), only if
//!   the program touches it, so the verifier accepts every read.
//! * Every packet load is bounds-checked against `data_end` right before it,
//!   with the pattern the verifier understands (`p = data + off;
//!   if p + size > data_end goto reject`); a failing check returns 0, exactly
//!   like classic BPF's out-of-bounds load. Indirect loads (`[x + k]`) first
//!   check `X + k <= 0xffff - size` (computed in 64 bits, so no wrap-around),
//!   which also gives the verifier the bounded offset it needs
//!   (`MAX_PACKET_OFF`). Loads at constant offsets that can never be inside
//!   an XDP frame (offset + size > 0xffff) become a jump to the reject block.
//! * Loads of 2 and 4 bytes are followed by `BPF_END | BPF_TO_BE` (be16 /
//!   be32): network to host order (a no-op on big-endian hosts). Packet loads
//!   may be unaligned (an IP header after a 14-byte Ethernet header): fine on
//!   architectures with efficient unaligned access (x86-64, arm64), refused
//!   on others or with `BPF_F_STRICT_ALIGNMENT`.
//! * Division and modulo by X are preceded by `if X == 0 goto reject` (eBPF
//!   would quietly give 0 / leave A unchanged; classic BPF returns 0).
//!   Division by a constant 0 is refused at validation, as libpcap's
//!   `bpf_validate` and the kernel do.
//! * Shifts by X >= 32 give 0 (libpcap's `bpf_filter`: checked against
//!   libpcap 1.10.3), where eBPF would shift by X mod 32: the translation
//!   tests X first.
//! * `ld #pktlen` / `ldx #pktlen` (`len`, `less`, `greater`) load
//!   `data_end - data`: the bytes XDP sees, which for a single-buffer XDP frame
//!   is the whole frame, but not the frame's original length when the NIC
//!   split it over several buffers (XDP multi-buffer: only the first buffer
//!   is between `data` and `data_end`). Subtracting two packet pointers needs
//!   the loader to have CAP_PERFMON (the verifier's `allow_ptr_leaks`); as
//!   root that is a given.
//! * Jumps: classic BPF only jumps forward, so the result has no loops. One
//!   classic instruction becomes several eBPF ones, so jumps are emitted with
//!   a placeholder offset and a fixup entry (classic target index, the shared
//!   reject block, or the end of the body), resolved once every classic
//!   instruction's eBPF start is known. A conditional jump falls through when
//!   one of its targets is the next instruction (using the inverse condition
//!   when that is the `jt` side: `jeq`/`jne`, `jgt`/`jle`, `jge`/`jlt`;
//!   `jset` has no inverse and takes two instructions). Offsets must fit in
//!   16 bits, else [`TranslateError::TooLarge`].
//! * The verifier refuses unreachable instructions, so classic instructions
//!   that no path reaches (including those only reachable after a load that
//!   always fails) are not emitted, and the reject block only if used.
//!
//! # Not supported
//!
//! Whatever [`Program::new`](crate::Program::new) refuses: backward jumps
//! (libpcap's `protochain`), Linux ancillary loads (`SKF_AD_*`, negative
//! offsets), opcodes outside classic BPF. These give
//! [`TranslateError::Unsupported`] or [`TranslateError::Invalid`].

use crate::insn::{op, Insn};
use crate::program::{validate, ProgramError};
use thiserror::Error;

/// One eBPF instruction, laid out as the kernel's `struct bpf_insn` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EbpfInsn {
    /// Opcode (see [`eop`]).
    pub code: u8,
    /// Registers: the kernel's `dst_reg:4, src_reg:4` bit-fields. On
    /// little-endian hosts dst is the low nibble and src the high one; use
    /// [`EbpfInsn::new`], [`dst`](Self::dst), [`src`](Self::src), which also
    /// handle big-endian hosts.
    pub regs: u8,
    /// Signed offset (memory accesses, jumps).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

impl EbpfInsn {
    /// An instruction from its parts.
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> EbpfInsn {
        let regs = if cfg!(target_endian = "little") {
            (dst & 0xf) | (src << 4)
        } else {
            (dst << 4) | (src & 0xf)
        };
        EbpfInsn {
            code,
            regs,
            off,
            imm,
        }
    }

    /// Destination register.
    pub const fn dst(&self) -> u8 {
        if cfg!(target_endian = "little") {
            self.regs & 0xf
        } else {
            self.regs >> 4
        }
    }

    /// Source register.
    pub const fn src(&self) -> u8 {
        if cfg!(target_endian = "little") {
            self.regs >> 4
        } else {
            self.regs & 0xf
        }
    }
}

/// eBPF opcode parts (`linux/bpf.h`) beyond the classic ones.
#[allow(missing_docs)]
pub mod eop {
    pub const LD: u8 = 0x00;
    pub const LDX: u8 = 0x01;
    pub const ST: u8 = 0x02;
    pub const STX: u8 = 0x03;
    pub const ALU: u8 = 0x04;
    pub const JMP: u8 = 0x05;
    pub const JMP32: u8 = 0x06;
    pub const ALU64: u8 = 0x07;
    pub const W: u8 = 0x00;
    pub const H: u8 = 0x08;
    pub const B: u8 = 0x10;
    pub const DW: u8 = 0x18;
    pub const MEM: u8 = 0x60;
    pub const K: u8 = 0x00;
    pub const X: u8 = 0x08;
    pub const ADD: u8 = 0x00;
    pub const SUB: u8 = 0x10;
    pub const MUL: u8 = 0x20;
    pub const DIV: u8 = 0x30;
    pub const OR: u8 = 0x40;
    pub const AND: u8 = 0x50;
    pub const LSH: u8 = 0x60;
    pub const RSH: u8 = 0x70;
    pub const NEG: u8 = 0x80;
    pub const MOD: u8 = 0x90;
    pub const XOR: u8 = 0xa0;
    pub const MOV: u8 = 0xb0;
    pub const END: u8 = 0xd0;
    pub const TO_BE: u8 = 0x08;
    pub const JA: u8 = 0x00;
    pub const JEQ: u8 = 0x10;
    pub const JGT: u8 = 0x20;
    pub const JGE: u8 = 0x30;
    pub const JSET: u8 = 0x40;
    pub const JNE: u8 = 0x50;
    pub const EXIT: u8 = 0x90;
    pub const JLT: u8 = 0xa0;
    pub const JLE: u8 = 0xb0;
    pub const CALL: u8 = 0x80;
    pub const IMM: u8 = 0x00;
    /// `src_reg` of a 64-bit immediate load (`LD | IMM | DW`, two
    /// instructions) whose immediate is a map file descriptor.
    pub const PSEUDO_MAP_FD: u8 = 1;
    /// `XDP_DROP`.
    pub const XDP_DROP: i32 = 1;
    /// `XDP_PASS`.
    pub const XDP_PASS: i32 = 2;
}

use eop::*;

/// R0: return value.
const R0: u8 = 0;
/// R1: packet start (`data`).
const R_DATA: u8 = 1;
/// R2: packet end (`data_end`).
const R_END: u8 = 2;
/// Scratch registers.
const R3: u8 = 3;
const R4: u8 = 4;
/// Classic A and X.
const R_A: u8 = 6;
const R_X: u8 = 7;
/// Frame pointer.
const R10: u8 = 10;
/// The verifier's `MAX_PACKET_OFF`: no packet offset can be beyond it.
const MAX_PACKET_OFF: u64 = 0xffff;
/// Where M[0] is, relative to R10.
const MEM_BASE: i16 = -64;

/// Why a classic program could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TranslateError {
    /// An instruction the translation does not handle.
    #[error("instruction {index} ({insn}) cannot be translated to eBPF: {reason}")]
    Unsupported {
        /// Its index in the classic program.
        index: usize,
        /// The instruction.
        insn: Insn,
        /// Why.
        reason: &'static str,
    },
    /// The classic program itself is invalid (empty, bad jump, no final ret).
    #[error("invalid classic BPF program: {0}")]
    Invalid(ProgramError),
    /// A jump target was not emitted: a bug in the translator, reported
    /// instead of emitting a wild jump.
    #[error("internal translator error: {0}")]
    Internal(&'static str),
    /// A jump would need an offset beyond eBPF's 16 bits.
    #[error("the eBPF translation ({len} instructions) is too large for 16-bit jump offsets")]
    TooLarge {
        /// Instructions emitted so far.
        len: usize,
    },
}

impl From<ProgramError> for TranslateError {
    fn from(e: ProgramError) -> Self {
        match e {
            ProgramError::Unsupported {
                index,
                insn,
                reason,
            } => TranslateError::Unsupported {
                index,
                insn,
                reason,
            },
            e => TranslateError::Invalid(e),
        }
    }
}

/// Translates a classic program into a function body: R1 = data, R2 =
/// data_end in, R0 = the classic return value out (see the module docs).
pub fn translate(insns: &[Insn]) -> Result<Vec<EbpfInsn>, TranslateError> {
    body(insns, Ret::Exit)
}

/// Translates a classic program into a body meant to be inlined: R1 = data,
/// R2 = data_end in; every classic `ret` jumps to just after the body with
/// R0 = the classic return value (0 = reject), so the caller appends its
/// own epilogue. R1-R4, R6, R7 and the stack slots R10-64 .. R10-1 are
/// clobbered; R5, R8 and R9 are not touched.
pub fn inline_body(insns: &[Insn]) -> Result<Vec<EbpfInsn>, TranslateError> {
    body(insns, Ret::ToEnd)
}

/// True if the program reads the frame length (`len`, `less`, `greater`):
/// its translation subtracts packet pointers, which the verifier allows
/// only to a loader with CAP_PERFMON (see the module docs).
pub fn uses_len(insns: &[Insn]) -> bool {
    insns
        .iter()
        .any(|i| matches!(i.code & 0x07, op::LD | op::LDX) && i.code & 0xe0 == op::LEN)
}

/// A complete XDP program running the classic program: `XDP_PASS` if it
/// returns nonzero, `XDP_DROP` if it returns 0 (see the module docs). Load it
/// with license "GPL"-compatible or not: it calls no helper.
pub fn xdp_program(insns: &[Insn]) -> Result<Vec<EbpfInsn>, TranslateError> {
    let mut out = vec![
        // r2 = ctx->data_end; r1 = ctx->data (struct xdp_md, u32 fields).
        EbpfInsn::new(LDX | MEM | W, R_END, 1, 4, 0),
        EbpfInsn::new(LDX | MEM | W, R_DATA, 1, 0, 0),
    ];
    out.extend(body(insns, Ret::ToEnd)?);
    out.extend([
        EbpfInsn::new(JMP | JEQ | K, R0, 0, 2, 0),
        EbpfInsn::new(ALU | MOV | K, R0, 0, 0, XDP_PASS),
        EbpfInsn::new(JMP | EXIT, 0, 0, 0, 0),
        EbpfInsn::new(ALU | MOV | K, R0, 0, 0, XDP_DROP),
        EbpfInsn::new(JMP | EXIT, 0, 0, 0, 0),
    ]);
    Ok(out)
}

/// How a classic `ret` ends the body.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ret {
    /// `exit`: a function of its own.
    Exit,
    /// `ja` to just after the body: inlined.
    ToEnd,
}

/// A jump target, resolved after emission.
#[derive(Clone, Copy)]
enum Label {
    Classic(usize),
    Reject,
    End,
}

struct Emitter {
    out: Vec<EbpfInsn>,
    fixups: Vec<(usize, Label)>,
    reject_used: bool,
}

impl Emitter {
    fn emit(&mut self, i: EbpfInsn) {
        self.out.push(i);
    }

    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        if matches!(to, Label::Reject) {
            self.reject_used = true;
        }
        self.fixups.push((self.out.len(), to));
        self.emit(EbpfInsn::new(code, dst, src, 0, imm));
    }

    fn ret(&mut self, mode: Ret) {
        match mode {
            Ret::Exit => self.emit(EbpfInsn::new(JMP | EXIT, 0, 0, 0, 0)),
            Ret::ToEnd => self.jump(JMP | JA, 0, 0, 0, Label::End),
        }
    }

    /// `dst = size bytes at data + off`, bounds-checked, converted to host
    /// order if `swap`. `off + size <= MAX_PACKET_OFF`.
    fn load_abs(&mut self, dst: u8, off: u32, size: u8, swap: bool) {
        let end = off + u32::from(size); // <= 0xffff: fits i32
        let sz = size_code(size);
        if let Ok(off16) = i16::try_from(off) {
            // r4 = data + off + size; if r4 > data_end reject; dst = *(data + off)
            self.emit(EbpfInsn::new(ALU64 | MOV | X, R4, R_DATA, 0, 0));
            self.emit(EbpfInsn::new(ALU64 | ADD | K, R4, 0, 0, end as i32));
            self.jump(JMP | JGT | X, R4, R_END, 0, Label::Reject);
            self.emit(EbpfInsn::new(LDX | MEM | sz, dst, R_DATA, off16, 0));
        } else {
            self.emit(EbpfInsn::new(ALU64 | MOV | X, R3, R_DATA, 0, 0));
            self.emit(EbpfInsn::new(ALU64 | ADD | K, R3, 0, 0, off as i32));
            self.emit(EbpfInsn::new(ALU64 | MOV | X, R4, R3, 0, 0));
            self.emit(EbpfInsn::new(ALU64 | ADD | K, R4, 0, 0, i32::from(size)));
            self.jump(JMP | JGT | X, R4, R_END, 0, Label::Reject);
            self.emit(EbpfInsn::new(LDX | MEM | sz, dst, R3, 0, 0));
        }
        if swap && size > 1 {
            self.emit(EbpfInsn::new(
                ALU | END | TO_BE,
                dst,
                0,
                0,
                i32::from(size) * 8,
            ));
        }
    }

    /// `A = size bytes at data + X + k`, bounds-checked, host order.
    /// `k + size <= MAX_PACKET_OFF`.
    fn load_ind(&mut self, k: u32, size: u8) {
        let sz = size_code(size);
        // r3 = X + k (64-bit: no wrap); bounded for the verifier.
        self.emit(EbpfInsn::new(ALU64 | MOV | X, R3, R_X, 0, 0));
        if k != 0 {
            self.emit(EbpfInsn::new(ALU64 | ADD | K, R3, 0, 0, k as i32));
        }
        let max = (MAX_PACKET_OFF - u64::from(size)) as i32;
        self.jump(JMP | JGT | K, R3, 0, max, Label::Reject);
        // r4 = data + r3; r3 = r4 + size; if r3 > data_end reject; A = *r4
        self.emit(EbpfInsn::new(ALU64 | MOV | X, R4, R_DATA, 0, 0));
        self.emit(EbpfInsn::new(ALU64 | ADD | X, R4, R3, 0, 0));
        self.emit(EbpfInsn::new(ALU64 | MOV | X, R3, R4, 0, 0));
        self.emit(EbpfInsn::new(ALU64 | ADD | K, R3, 0, 0, i32::from(size)));
        self.jump(JMP | JGT | X, R3, R_END, 0, Label::Reject);
        self.emit(EbpfInsn::new(LDX | MEM | sz, R_A, R4, 0, 0));
        if size > 1 {
            self.emit(EbpfInsn::new(
                ALU | END | TO_BE,
                R_A,
                0,
                0,
                i32::from(size) * 8,
            ));
        }
    }

    /// `if A <op> operand` goes to `t`, else to `f`; `next` is the classic
    /// instruction emitted right after this one (a fall-through target).
    fn cond(&mut self, insn: &Insn, pc: usize) {
        let jop = match insn.code & 0xf0 {
            op::JEQ => JEQ,
            op::JGT => JGT,
            op::JGE => JGE,
            _ => JSET,
        };
        let inverse = match jop {
            JEQ => Some(JNE),
            JGT => Some(JLE),
            JGE => Some(JLT),
            _ => None,
        };
        let next = pc + 1;
        let t = next + usize::from(insn.jt);
        let f = next + usize::from(insn.jf);
        if t == f {
            if t != next {
                self.jump(JMP | JA, 0, 0, 0, Label::Classic(t));
            }
            return;
        }
        // Operand: X, an immediate, or R3 for constants eBPF would
        // sign-extend into something else (jset is exact either way).
        let (src_bit, src, imm) = if insn.code & op::X != 0 {
            (X, R_X, 0)
        } else if insn.k <= i32::MAX as u32 || jop == JSET {
            (K, 0, insn.k as i32)
        } else {
            self.emit(EbpfInsn::new(ALU | MOV | K, R3, 0, 0, insn.k as i32));
            (X, R3, 0)
        };
        match (f == next, t == next, inverse) {
            (true, _, _) => self.jump(JMP | jop | src_bit, R_A, src, imm, Label::Classic(t)),
            (false, true, Some(inv)) => {
                self.jump(JMP | inv | src_bit, R_A, src, imm, Label::Classic(f))
            }
            _ => {
                self.jump(JMP | jop | src_bit, R_A, src, imm, Label::Classic(t));
                self.jump(JMP | JA, 0, 0, 0, Label::Classic(f));
            }
        }
    }
}

fn size_code(size: u8) -> u8 {
    match size {
        1 => B,
        2 => H,
        _ => W,
    }
}

fn load_size(code: u16) -> u8 {
    match code & 0x18 {
        op::B => 1,
        op::H => 2,
        _ => 4,
    }
}

/// True for a packet load that can never be inside an XDP frame.
fn always_out_of_bounds(insn: &Insn) -> bool {
    let mode = insn.code & 0xe0;
    matches!(insn.code & 0x07, op::LD | op::LDX)
        && matches!(mode, op::ABS | op::IND | op::MSH)
        && u64::from(insn.k) + u64::from(load_size(insn.code)) > MAX_PACKET_OFF
}

fn uses_scratch(insn: &Insn) -> bool {
    match insn.code & 0x07 {
        op::ST | op::STX => true,
        op::LD | op::LDX => insn.code & 0xe0 == op::MEM,
        _ => false,
    }
}

/// Which classic instructions some path from the first one reaches.
fn reachable(insns: &[Insn]) -> Vec<bool> {
    let mut reach = vec![false; insns.len()];
    if let Some(r) = reach.first_mut() {
        *r = true;
    }
    for pc in 0..insns.len() {
        if !reach[pc] {
            continue;
        }
        let insn = &insns[pc];
        let next = pc + 1;
        let mut mark = |t: usize| {
            if let Some(r) = reach.get_mut(t) {
                *r = true;
            }
        };
        match insn.code & 0x07 {
            op::RET => {}
            _ if always_out_of_bounds(insn) => {}
            op::JMP if insn.code & 0xf0 == op::JA => mark(next + insn.k as usize),
            op::JMP => {
                mark(next + usize::from(insn.jt));
                mark(next + usize::from(insn.jf));
            }
            _ => mark(next),
        }
    }
    reach
}

fn body(insns: &[Insn], mode: Ret) -> Result<Vec<EbpfInsn>, TranslateError> {
    validate(insns, false)?;
    let reach = reachable(insns);
    let mut e = Emitter {
        out: Vec::with_capacity(insns.len() * 4 + 16),
        fixups: Vec::new(),
        reject_used: false,
    };
    // A = X = 0.
    e.emit(EbpfInsn::new(ALU | MOV | K, R_A, 0, 0, 0));
    e.emit(EbpfInsn::new(ALU | MOV | K, R_X, 0, 0, 0));
    if insns.iter().zip(&reach).any(|(i, &r)| r && uses_scratch(i)) {
        for slot in 1..=8i16 {
            e.emit(EbpfInsn::new(ST | MEM | DW, R10, 0, -8 * slot, 0));
        }
    }

    let mut start = vec![usize::MAX; insns.len()];
    for (pc, insn) in insns.iter().enumerate() {
        if !reach[pc] {
            continue;
        }
        start[pc] = e.out.len();
        let code = insn.code;
        let k = insn.k;
        let class = code & 0x07;
        let mode_bits = code & 0xe0;
        let mem_off = MEM_BASE + 4 * (k & 15) as i16;
        match class {
            op::LD | op::LDX if always_out_of_bounds(insn) => {
                e.jump(JMP | JA, 0, 0, 0, Label::Reject)
            }
            op::LD => match mode_bits {
                op::ABS => e.load_abs(R_A, k, load_size(code), true),
                op::IND => e.load_ind(k, load_size(code)),
                op::LEN => len(&mut e, R_A),
                op::IMM => e.emit(EbpfInsn::new(ALU | MOV | K, R_A, 0, 0, k as i32)),
                _ => e.emit(EbpfInsn::new(LDX | MEM | W, R_A, R10, mem_off, 0)),
            },
            op::LDX => match mode_bits {
                op::MSH => {
                    e.load_abs(R_X, k, 1, false);
                    e.emit(EbpfInsn::new(ALU | AND | K, R_X, 0, 0, 0xf));
                    e.emit(EbpfInsn::new(ALU | LSH | K, R_X, 0, 0, 2));
                }
                op::LEN => len(&mut e, R_X),
                op::IMM => e.emit(EbpfInsn::new(ALU | MOV | K, R_X, 0, 0, k as i32)),
                _ => e.emit(EbpfInsn::new(LDX | MEM | W, R_X, R10, mem_off, 0)),
            },
            op::ST => e.emit(EbpfInsn::new(STX | MEM | W, R10, R_A, mem_off, 0)),
            op::STX => e.emit(EbpfInsn::new(STX | MEM | W, R10, R_X, mem_off, 0)),
            op::ALU => {
                let aop = (code & 0xf0) as u8;
                if aop == NEG {
                    e.emit(EbpfInsn::new(ALU | NEG, R_A, 0, 0, 0));
                } else if code & op::X == 0 {
                    // Validated: no constant division by 0, shifts < 32.
                    e.emit(EbpfInsn::new(ALU | aop | K, R_A, 0, 0, k as i32));
                } else if aop == DIV || aop == MOD {
                    e.jump(JMP | JEQ | K, R_X, 0, 0, Label::Reject);
                    e.emit(EbpfInsn::new(ALU | aop | X, R_A, R_X, 0, 0));
                } else if aop == LSH || aop == RSH {
                    // if X >= 32 { A = 0 } else { A <<= X }
                    e.emit(EbpfInsn::new(JMP | JGE | K, R_X, 0, 2, 32));
                    e.emit(EbpfInsn::new(ALU | aop | X, R_A, R_X, 0, 0));
                    e.emit(EbpfInsn::new(JMP | JA, 0, 0, 1, 0));
                    e.emit(EbpfInsn::new(ALU | MOV | K, R_A, 0, 0, 0));
                } else {
                    e.emit(EbpfInsn::new(ALU | aop | X, R_A, R_X, 0, 0));
                }
            }
            op::JMP if code & 0xf0 == op::JA => {
                if k != 0 {
                    e.jump(JMP | JA, 0, 0, 0, Label::Classic(pc + 1 + k as usize));
                }
            }
            op::JMP => e.cond(insn, pc),
            op::RET => {
                if code & 0x18 == op::A {
                    e.emit(EbpfInsn::new(ALU | MOV | X, R0, R_A, 0, 0));
                } else {
                    e.emit(EbpfInsn::new(ALU | MOV | K, R0, 0, 0, k as i32));
                }
                e.ret(mode);
            }
            _ => {
                // MISC (validated: tax or txa).
                if code & 0xf8 == op::TXA {
                    e.emit(EbpfInsn::new(ALU | MOV | X, R_A, R_X, 0, 0));
                } else {
                    e.emit(EbpfInsn::new(ALU | MOV | X, R_X, R_A, 0, 0));
                }
            }
        }
    }

    let reject = e.out.len();
    if e.reject_used {
        e.emit(EbpfInsn::new(ALU | MOV | K, R0, 0, 0, 0));
        e.ret(mode);
    }
    let end = e.out.len();
    let fixups = std::mem::take(&mut e.fixups);
    for (at, label) in fixups {
        let target = match label {
            Label::Classic(pc) => start.get(pc).copied().unwrap_or(usize::MAX),
            Label::Reject => reject,
            Label::End => end,
        };
        // Validation and reachability make a missing target impossible;
        // report it rather than emit a wild jump.
        if target == usize::MAX || target <= at {
            return Err(TranslateError::Internal(
                "jump to an instruction not emitted",
            ));
        }
        let off = i16::try_from(target - at - 1)
            .map_err(|_| TranslateError::TooLarge { len: e.out.len() })?;
        e.out[at].off = off;
    }
    Ok(e.out)
}

/// `dst = data_end - data` (32 bits).
fn len(e: &mut Emitter, dst: u8) {
    e.emit(EbpfInsn::new(ALU64 | MOV | X, dst, R_END, 0, 0));
    e.emit(EbpfInsn::new(ALU64 | SUB | X, dst, R_DATA, 0, 0));
    e.emit(EbpfInsn::new(ALU | MOV | X, dst, dst, 0, 0));
}

/// A readable listing of an eBPF program, one instruction per line, in the
/// style of the kernel's verifier log (`r4 = r1`, `if r4 > r2 goto +7 <12>`,
/// `r6 = *(u16 *)(r1 +12)`). `map_name` names the map of a map-fd load
/// (`r1 = map[xsks] ll`); None prints the fd. A 64-bit immediate load takes
/// two instructions: the second is listed as `(second half)`.
pub fn listing(insns: &[EbpfInsn], map_name: &dyn Fn(i32) -> Option<String>) -> String {
    let mut s = String::new();
    let mut pc = 0;
    while pc < insns.len() {
        let (text, width) = insn_text(insns, pc, map_name);
        s.push_str(&format!("{pc:4}: {text}\n"));
        if width == 2 {
            s.push_str(&format!("{:4}: (second half)\n", pc + 1));
        }
        pc += width;
    }
    s
}

fn insn_text(
    insns: &[EbpfInsn],
    pc: usize,
    map_name: &dyn Fn(i32) -> Option<String>,
) -> (String, usize) {
    let i = insns[pc];
    let (dst, src) = (i.dst(), i.src());
    let class = i.code & 0x07;
    let size = match i.code & 0x18 {
        W => "u32",
        H => "u16",
        B => "u8",
        _ => "u64",
    };
    let mem = |reg: u8, off: i16| format!("*({size} *)(r{reg} {off:+})");
    let alu_name = |o: u8| match o {
        ADD => "+=",
        SUB => "-=",
        MUL => "*=",
        DIV => "/=",
        OR => "|=",
        AND => "&=",
        LSH => "<<=",
        RSH => ">>=",
        MOD => "%=",
        XOR => "^=",
        MOV => "=",
        _ => "?=",
    };
    let text = match class {
        LD if i.code == LD | IMM | DW => {
            let hi = insns.get(pc + 1).map(|n| n.imm).unwrap_or(0);
            let t = if src == PSEUDO_MAP_FD {
                match map_name(i.imm) {
                    Some(n) => format!("r{dst} = map[{n}] ll"),
                    None => format!("r{dst} = map[fd {}] ll", i.imm),
                }
            } else {
                let v = (u64::from(hi as u32) << 32) | u64::from(i.imm as u32);
                format!("r{dst} = {v:#x} ll")
            };
            return (t, 2);
        }
        LDX => format!("r{dst} = {}", mem(src, i.off)),
        ST => format!("{} = {}", mem(dst, i.off), i.imm),
        STX => format!("{} = r{src}", mem(dst, i.off)),
        ALU | ALU64 => {
            let r = if class == ALU64 { "r" } else { "w" };
            let o = i.code & 0xf0;
            if o == NEG {
                format!("{r}{dst} = -{r}{dst}")
            } else if o == END {
                format!("{r}{dst} = be{} {r}{dst}", i.imm)
            } else if i.code & X != 0 {
                format!("{r}{dst} {} {r}{src}", alu_name(o))
            } else {
                format!("{r}{dst} {} {}", alu_name(o), i.imm)
            }
        }
        JMP | JMP32 => {
            let o = i.code & 0xf0;
            let target = pc as i64 + 1 + i64::from(i.off);
            match o {
                EXIT => "exit".to_string(),
                CALL => format!("call {}", helper_name(i.imm)),
                JA => format!("goto {:+} <{target}>", i.off),
                _ => {
                    let cmp = match o {
                        JEQ => "==",
                        JGT => ">",
                        JGE => ">=",
                        JSET => "&",
                        JNE => "!=",
                        JLT => "<",
                        JLE => "<=",
                        _ => "?",
                    };
                    let r = if class == JMP32 { "w" } else { "r" };
                    let rhs = if i.code & X != 0 {
                        format!("{r}{src}")
                    } else {
                        format!("{:#x}", i.imm)
                    };
                    format!("if {r}{dst} {cmp} {rhs} goto {:+} <{target}>", i.off)
                }
            }
        }
        _ => format!(
            "(code {:#04x} dst r{dst} src r{src} off {} imm {})",
            i.code, i.off, i.imm
        ),
    };
    (text, 1)
}

fn helper_name(id: i32) -> String {
    match id {
        1 => "bpf_map_lookup_elem#1".into(),
        12 => "bpf_tail_call#12".into(),
        51 => "bpf_redirect_map#51".into(),
        n => format!("#{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::eop as e;
    use super::{
        translate, xdp_program, EbpfInsn, TranslateError, R0, R10, R4, R_A, R_DATA, R_END, R_X,
    };
    use crate::insn::op::{A as RA, B as OB, H as OH, W as OW, *};
    use crate::kernel::{is_root, XdpProgram};
    use crate::Insn;
    use crate::Program;

    const RET_A: Insn = Insn::stmt(RET | RA, 0);

    /// One small program per instruction class, each ending in `ret a` (or
    /// otherwise returning something that depends on the class).
    fn class_programs() -> Vec<(&'static str, Vec<Insn>)> {
        let s = Insn::stmt;
        let j = Insn::jump;
        let mut v: Vec<(&'static str, Vec<Insn>)> = vec![
            ("ld abs w", vec![s(LD | OW | ABS, 14), RET_A]),
            ("ld abs h", vec![s(LD | OH | ABS, 12), RET_A]),
            ("ld abs b", vec![s(LD | OB | ABS, 23), RET_A]),
            ("ld abs w at 40000", vec![s(LD | OW | ABS, 40000), RET_A]),
            ("ld abs b beyond 64k", vec![s(LD | OB | ABS, 70000), RET_A]),
            (
                "ld ind w/h/b",
                vec![
                    s(LDX | B | MSH, 14),
                    s(LD | OW | IND, 14),
                    s(ST, 0),
                    s(LD | OH | IND, 16),
                    s(ST, 1),
                    s(LD | OB | IND, 30),
                    s(LDX | MEM, 0),
                    s(ALU | ADD | X, 0),
                    s(LDX | MEM, 1),
                    s(ALU | XOR | X, 0),
                    RET_A,
                ],
            ),
            (
                "ld ind x from packet (large)",
                vec![
                    s(LD | OH | ABS, 12),
                    s(MISC | TAX, 0),
                    s(LD | OB | IND, 0),
                    RET_A,
                ],
            ),
            (
                "ld ind k beyond 64k",
                vec![s(LDX | IMM, 0), s(LD | OB | IND, 65535), RET_A],
            ),
            (
                "ldx msh",
                vec![s(LDX | B | MSH, 14), s(MISC | TXA, 0), RET_A],
            ),
            ("ld len", vec![s(LD | OW | LEN, 0), RET_A]),
            (
                "ldx len",
                vec![s(LDX | OW | LEN, 0), s(MISC | TXA, 0), RET_A],
            ),
            ("ld imm", vec![s(LD | IMM, 0xdead_beef), RET_A]),
            (
                "ldx imm + txa",
                vec![s(LDX | IMM, 0x8000_0001), s(MISC | TXA, 0), RET_A],
            ),
            (
                "st/stx/ld mem/ldx mem",
                vec![
                    s(LD | OB | ABS, 14),
                    s(ST, 15),
                    s(LDX | IMM, 7),
                    s(STX, 3),
                    s(LD | MEM, 9), // 0: never written
                    s(ALU | ADD | K, 1),
                    s(LDX | MEM, 15),
                    s(ALU | ADD | X, 0),
                    s(LDX | MEM, 3),
                    s(ALU | MUL | X, 0),
                    RET_A,
                ],
            ),
            ("neg", vec![s(LD | OB | ABS, 14), s(ALU | NEG, 0), RET_A]),
            (
                "tax + ret k",
                vec![
                    s(LD | OB | ABS, 14),
                    s(MISC | TAX, 0),
                    s(RET | K, 0xffff_fff0),
                ],
            ),
            (
                "ja",
                vec![s(LD | OB | ABS, 14), s(JMP | JA, 1), s(RET | K, 0), RET_A],
            ),
        ];
        for (name, aop) in [
            ("alu add", ADD),
            ("alu sub", SUB),
            ("alu mul", MUL),
            ("alu div", DIV),
            ("alu mod", MOD),
            ("alu and", AND),
            ("alu or", OR),
            ("alu xor", XOR),
            ("alu lsh", LSH),
            ("alu rsh", RSH),
        ] {
            // K form (k = 3, nonzero and a valid shift), X form with X from
            // the packet (zero, and >= 32, in some frames).
            v.push((
                name,
                vec![
                    s(LD | OW | ABS, 14),
                    s(ALU | aop | K, 3),
                    s(LDX | B | MSH, 20),
                    s(ALU | aop | X, 0),
                    s(ST, 0),
                    s(LD | OB | ABS, 21),
                    s(MISC | TAX, 0),
                    s(LD | MEM, 0),
                    s(ALU | aop | X, 0),
                    RET_A,
                ],
            ));
        }
        // Division by X = 0 must reject even when the program would then
        // return a constant (eBPF alone would give A = 0 / A and go on).
        for (name, aop) in [("div x then ret k", DIV), ("mod x then ret k", MOD)] {
            v.push((
                name,
                vec![
                    s(LD | OW | ABS, 14),
                    s(LDX | B | MSH, 20),
                    s(ALU | aop | X, 0),
                    s(RET | K, 1),
                ],
            ));
        }
        for (name, jop) in [("jeq", JEQ), ("jgt", JGT), ("jge", JGE), ("jset", JSET)] {
            for k in [0x40, 0x8000_0000, 0xffff_fff0] {
                // K and X forms, every fall-through shape: jt = 0, jf = 0,
                // both nonzero, both equal.
                v.push((
                    name,
                    vec![
                        s(LD | OB | ABS, 14),
                        s(ALU | LSH | K, 24),
                        s(ST, 2),
                        s(LD | OB | ABS, 15),
                        s(MISC | TAX, 0),
                        s(LD | MEM, 2),
                        j(JMP | jop | K, k, 0, 3),
                        j(JMP | jop | X, 0, 1, 0),
                        s(RET | K, 1),
                        j(JMP | jop | K, k & 0x7f, 2, 3),
                        s(RET | K, 2),
                        j(JMP | jop | X, 0, 1, 1),
                        s(RET | K, 3),
                        j(JMP | jop | K, k >> 1, 0, 1),
                        s(RET | K, 4),
                        s(RET | K, 5),
                    ],
                ));
            }
        }
        v
    }

    /// Deterministic frames: lengths around the interesting boundaries,
    /// bytes from a small xorshift generator.
    fn frames() -> Vec<Vec<u8>> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut byte = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        };
        let mut out = Vec::new();
        for len in [
            14usize, 15, 16, 17, 18, 21, 22, 24, 30, 31, 34, 60, 64, 100, 1500,
        ] {
            for variant in 0..6 {
                let mut f: Vec<u8> = (0..len).map(|_| byte()).collect();
                match variant {
                    // zeros where X comes from: division by zero, shift 0
                    0 => f.iter_mut().skip(14).for_each(|b| *b = 0),
                    // IPv4-ish header length nibble, big shift counts
                    1 if len > 21 => {
                        f[14] = 0x45;
                        f[20] = 0x0f;
                        f[21] = 40;
                    }
                    2 if len > 21 => {
                        f[20] = 0;
                        f[21] = 31;
                    }
                    _ => {}
                }
                out.push(f);
            }
        }
        out
    }

    /// prologue + function body: an XDP program returning the classic value.
    fn raw_xdp(insns: &[Insn]) -> Vec<EbpfInsn> {
        let mut v = vec![
            EbpfInsn::new(e::LDX | e::MEM | e::W, R_END, 1, 4, 0),
            EbpfInsn::new(e::LDX | e::MEM | e::W, R_DATA, 1, 0, 0),
        ];
        v.extend(translate(insns).unwrap());
        v
    }

    /// Every jump lands forward inside the program, every instruction is
    /// reachable, the last one is exit, and every packet load is preceded
    /// by a bounds check against R2 since the last label.
    fn check_structure(prog: &[EbpfInsn], name: &str) {
        let n = prog.len();
        let mut reach = vec![false; n];
        reach[0] = true;
        for (i, ins) in prog.iter().enumerate() {
            if !reach[i] {
                continue;
            }
            let class = ins.code & 7;
            let op = ins.code & 0xf0;
            let next = i + 1;
            if class == e::JMP && op == e::EXIT {
                continue;
            }
            if class == e::JMP {
                assert!(ins.off >= 0, "{name}: backward jump at {i}");
                let t = next + ins.off as usize;
                assert!(t < n, "{name}: jump at {i} past the end");
                reach[t] = true;
                if op == e::JA {
                    continue;
                }
            }
            assert!(next < n, "{name}: falls off the end at {i}");
            reach[next] = true;
        }
        assert!(reach.iter().all(|&r| r), "{name}: unreachable instructions");
        assert_eq!(prog[n - 1].code, e::JMP | e::EXIT, "{name}");
        for (i, ins) in prog.iter().enumerate() {
            // (the first two instructions of a raw/XDP program read ctx, not the packet)
            let is_pkt_load = ins.code & 0x07 == e::LDX && ins.src() != R10 && i > 1;
            if is_pkt_load {
                let guarded = prog[..i]
                    .iter()
                    .rev()
                    .take(8)
                    .any(|g| g.code == e::JMP | e::JGT | e::X && g.src() == R_END);
                assert!(guarded, "{name}: unguarded packet load at {i}");
            }
        }
    }

    #[test]
    fn structure_of_every_class_translation() {
        for (name, insns) in class_programs() {
            Program::new(insns.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
            check_structure(&raw_xdp(&insns), name);
            check_structure(&xdp_program(&insns).unwrap(), name);
        }
    }

    #[test]
    fn exact_code_for_a_small_program() {
        // ldh [12]; jeq #0x800 jt 2 jf 3; ret #1; ret #0
        let insns = [
            Insn::stmt(LD | OH | ABS, 12),
            Insn::jump(JMP | JEQ | K, 0x800, 0, 1),
            Insn::stmt(RET | K, 1),
            Insn::stmt(RET | K, 0),
        ];
        let i = EbpfInsn::new;
        let want = {
            use e::*;
            vec![
                i(ALU | MOV | K, R_A, 0, 0, 0),
                i(ALU | MOV | K, R_X, 0, 0, 0),
                i(ALU64 | MOV | X, R4, R_DATA, 0, 0),
                i(ALU64 | ADD | K, R4, 0, 0, 14),
                i(JMP | JGT | X, R4, R_END, 12 - 4 - 1, 0), // to the reject block
                i(LDX | MEM | H, R_A, R_DATA, 12, 0),
                i(ALU | END | TO_BE, R_A, 0, 0, 16),
                i(JMP | JNE | K, R_A, 0, 2, 0x800), // jt falls through
                i(ALU | MOV | K, R0, 0, 0, 1),
                i(JMP | EXIT, 0, 0, 0, 0),
                i(ALU | MOV | K, R0, 0, 0, 0), // ret #0
                i(JMP | EXIT, 0, 0, 0, 0),
                i(ALU | MOV | K, R0, 0, 0, 0), // reject block
                i(JMP | EXIT, 0, 0, 0, 0),
            ]
        };
        assert_eq!(translate(&insns).unwrap(), want);
    }

    #[test]
    fn errors_name_the_instruction() {
        let e = translate(&[
            Insn::stmt(LD | IMM, 0),
            Insn::stmt(LD | OB | ABS, 0xffff_f000 + 44),
            RET_A,
        ])
        .unwrap_err();
        assert!(matches!(e, TranslateError::Unsupported { index: 1, .. }));
        let msg = e.to_string();
        assert!(
            msg.starts_with("instruction 1 (ldb [-4052]) cannot be translated to eBPF"),
            "{msg}"
        );
        assert!(matches!(translate(&[]), Err(TranslateError::Invalid(_))));
        assert!(matches!(
            xdp_program(&[Insn::stmt(JMP | JA, 0xffff_fffe), RET_A]),
            Err(TranslateError::Invalid(_))
        ));
    }

    #[test]
    fn long_programs_report_too_large_jumps() {
        // 1: either jump over 10000 loads (4 eBPF instructions each) or run
        // them: both paths reachable, the ja needs an offset > 32767.
        let loads = 10_000u32;
        let mut p = vec![
            Insn::stmt(LD | OB | ABS, 14),
            Insn::jump(JMP | JEQ | K, 1, 0, 1),
            Insn::stmt(JMP | JA, loads),
        ];
        p.extend(std::iter::repeat_n(
            Insn::stmt(LD | OB | ABS, 14),
            loads as usize,
        ));
        p.push(RET_A);
        assert!(matches!(
            translate(&p),
            Err(TranslateError::TooLarge { .. })
        ));
        // The same with few loads is fine.
        let mut p = p[..3].to_vec();
        p[2].k = 10;
        p.extend(std::iter::repeat_n(Insn::stmt(LD | OB | ABS, 14), 10));
        p.push(RET_A);
        assert!(translate(&p).is_ok());
    }

    #[test]
    fn kernel_runs_every_class_like_the_evaluator() {
        if !is_root() {
            eprintln!("note: not root: skipping the BPF_PROG_TEST_RUN part of this test");
            return;
        }
        let frames = frames();
        let mut runs = 0;
        for (name, insns) in class_programs() {
            let prog = Program::new(insns.clone()).unwrap();
            let raw = XdpProgram::load(&raw_xdp(&insns))
                .unwrap_or_else(|e| panic!("{name}: {}\n{e}", prog.dump()));
            let xdp = XdpProgram::load(&xdp_program(&insns).unwrap())
                .unwrap_or_else(|e| panic!("{name}: {}\n{e}", prog.dump()));
            for f in &frames {
                let want = prog.run(f, f.len() as u32);
                let got = raw.test_run(f).unwrap();
                assert_eq!(got, want, "{name}: frame {f:02x?}\n{}", prog.dump());
                let verdict = xdp.test_run(f).unwrap();
                let want_verdict = if want != 0 { e::XDP_PASS } else { e::XDP_DROP } as u32;
                assert_eq!(verdict, want_verdict, "{name}: frame {f:02x?}");
                runs += 2;
            }
        }
        eprintln!("{runs} BPF_PROG_TEST_RUN runs agreed with the evaluator");
    }
}
