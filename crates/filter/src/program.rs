//! A validated classic BPF program and its safe evaluator.

use crate::insn::{op::*, Insn};
use thiserror::Error;

/// Why a classic BPF program was refused (by [`Program::new`], and by the
/// eBPF translator, which validates the same way).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ProgramError {
    /// No instructions at all.
    #[error("empty BPF program")]
    Empty,
    /// An opcode that is not classic BPF, or one we cannot evaluate.
    #[error("instruction {index} ({insn}): {reason}")]
    Unsupported {
        /// Index of the instruction in the program.
        index: usize,
        /// The instruction.
        insn: Insn,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A jump backwards or beyond the last instruction.
    #[error("instruction {index} ({insn}): jump to {target} is {why}")]
    BadJump {
        /// Index of the jump.
        index: usize,
        /// The instruction.
        insn: Insn,
        /// Index it would jump to.
        target: u64,
        /// "backwards" or "past the end of the program".
        why: &'static str,
    },
    /// The last instruction is not a `ret`: execution could run off the end.
    #[error("the last instruction ({insn}) is not a ret")]
    NoFinalRet {
        /// The last instruction.
        insn: Insn,
    },
}

/// A classic BPF program, checked once at construction so that [`run`](Self::run)
/// needs no allocation and no validation per frame.
///
/// Guarantees after construction: every opcode is one the evaluator knows;
/// every jump goes forward and lands inside the program; scratch memory
/// indices are < 16; constant division/modulo is not by zero and constant
/// shifts are < 32 (libpcap's `bpf_validate` rules); the last instruction is
/// a `ret`. Backward jumps (libpcap emits one `ja` back for `protochain`)
/// must land inside the program too; they are run as libpcap's `bpf_filter`
/// runs them (sign-extended `k`), with a bound on the jumps taken back
/// ([`MAX_BACK_JUMPS`]: past it the frame is rejected), so that no program
/// loops for ever. The XDP translation refuses them ([`Program::loops`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    insns: Vec<Insn>,
}

impl Program {
    /// Validates `insns` (see the type's documentation) and wraps them.
    pub fn new(insns: Vec<Insn>) -> Result<Program, ProgramError> {
        validate(&insns, true)?;
        Ok(Program { insns })
    }

    /// Whether the program jumps backwards (loops, as libpcap's
    /// `protochain` does): the classic evaluator runs it; the XDP
    /// translation refuses it.
    pub fn loops(&self) -> bool {
        self.insns
            .iter()
            .any(|i| i.code == JMP | JA && (i.k as i32) < 0)
    }

    /// The instructions.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Consumes the program, returning its instructions.
    pub fn into_insns(self) -> Vec<Insn> {
        self.insns
    }

    /// The program as `tcpdump -d` prints it: one line per instruction,
    /// each ending in a newline.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for (pc, insn) in self.insns.iter().enumerate() {
            s.push_str(&insn.image(pc));
            s.push('\n');
        }
        s
    }

    /// True if the program accepts the frame (its return value is not 0).
    ///
    /// `pkt` holds the captured bytes, `wire_len` the frame's original length
    /// (what `len`, `less` and `greater` look at).
    #[inline]
    pub fn matches(&self, pkt: &[u8], wire_len: u32) -> bool {
        self.run(pkt, wire_len) != 0
    }

    /// Runs the program on one frame and returns the classic BPF return value
    /// (0 = reject; libpcap's programs return the snap length to accept).
    ///
    /// Semantics are libpcap's `bpf_filter`: a load beyond the captured bytes,
    /// or a division or modulo by X = 0, returns 0; a shift by X >= 32 gives 0.
    pub fn run(&self, pkt: &[u8], wire_len: u32) -> u32 {
        let insns = self.insns.as_slice();
        let mut a: u32 = 0;
        let mut x: u32 = 0;
        let mut mem = [0u32; MEMWORDS as usize];
        let mut pc = 0usize;
        let mut back_jumps = 0u32;
        // Loads return 0 (reject) when the bytes are not all captured.
        macro_rules! load {
            ($off:expr, $size:expr) => {
                match load(pkt, $off, $size) {
                    Some(v) => v,
                    None => return 0,
                }
            };
        }
        // `get` instead of indexing: validation makes it always Some, and a
        // miss returns 0 instead of panicking. Opcodes are matched as
        // constants (one jump table), `& 15` on scratch indices (validated
        // < 16) only spares a bounds check.
        while let Some(insn) = insns.get(pc) {
            pc += 1;
            let k = insn.k;
            match insn.code {
                c::LD_W_ABS => a = load!(u64::from(k), 4),
                c::LD_H_ABS => a = load!(u64::from(k), 2),
                c::LD_B_ABS => a = load!(u64::from(k), 1),
                c::LD_W_IND => a = load!(u64::from(x) + u64::from(k), 4),
                c::LD_H_IND => a = load!(u64::from(x) + u64::from(k), 2),
                c::LD_B_IND => a = load!(u64::from(x) + u64::from(k), 1),
                c::LDX_B_MSH => x = (load!(u64::from(k), 1) & 0xf) << 2,
                c::LD_W_LEN => a = wire_len,
                c::LDX_W_LEN => x = wire_len,
                c::LD_IMM => a = k,
                c::LDX_IMM => x = k,
                c::LD_MEM => a = mem[(k & 15) as usize],
                c::LDX_MEM => x = mem[(k & 15) as usize],
                c::ST => mem[(k & 15) as usize] = a,
                c::STX => mem[(k & 15) as usize] = x,
                c::ADD_K => a = a.wrapping_add(k),
                c::SUB_K => a = a.wrapping_sub(k),
                c::MUL_K => a = a.wrapping_mul(k),
                c::DIV_K => a = a.checked_div(k).unwrap_or(0),
                c::MOD_K => a = a.checked_rem(k).unwrap_or(0),
                c::AND_K => a &= k,
                c::OR_K => a |= k,
                c::XOR_K => a ^= k,
                c::LSH_K => a = a.checked_shl(k).unwrap_or(0),
                c::RSH_K => a = a.checked_shr(k).unwrap_or(0),
                c::ADD_X => a = a.wrapping_add(x),
                c::SUB_X => a = a.wrapping_sub(x),
                c::MUL_X => a = a.wrapping_mul(x),
                c::DIV_X => match a.checked_div(x) {
                    Some(r) => a = r,
                    None => return 0,
                },
                c::MOD_X => match a.checked_rem(x) {
                    Some(r) => a = r,
                    None => return 0,
                },
                c::AND_X => a &= x,
                c::OR_X => a |= x,
                c::XOR_X => a ^= x,
                // libpcap: a shift by 32 or more gives 0.
                c::LSH_X => a = a.checked_shl(x).unwrap_or(0),
                c::RSH_X => a = a.checked_shr(x).unwrap_or(0),
                c::NEG => a = a.wrapping_neg(),
                c::JA if (k as i32) >= 0 => pc += k as usize,
                // A loop (protochain): validated to land inside the program.
                c::JA => {
                    back_jumps += 1;
                    if back_jumps > MAX_BACK_JUMPS {
                        return 0;
                    }
                    pc = pc.wrapping_add(k as i32 as isize as usize);
                }
                c::JEQ_K => pc += usize::from(if a == k { insn.jt } else { insn.jf }),
                c::JGT_K => pc += usize::from(if a > k { insn.jt } else { insn.jf }),
                c::JGE_K => pc += usize::from(if a >= k { insn.jt } else { insn.jf }),
                c::JSET_K => pc += usize::from(if a & k != 0 { insn.jt } else { insn.jf }),
                c::JEQ_X => pc += usize::from(if a == x { insn.jt } else { insn.jf }),
                c::JGT_X => pc += usize::from(if a > x { insn.jt } else { insn.jf }),
                c::JGE_X => pc += usize::from(if a >= x { insn.jt } else { insn.jf }),
                c::JSET_X => pc += usize::from(if a & x != 0 { insn.jt } else { insn.jf }),
                c::RET_K => return k,
                c::RET_A => return a,
                c::TAX => x = a,
                c::TXA => a = x,
                _ => return 0,
            }
        }
        0
    }
}

/// Every opcode the evaluator implements, as constants usable in patterns
/// (the set libpcap's `bpf_validate` accepts).
mod c {
    use crate::insn::op::*;
    pub(super) const LD_W_ABS: u16 = LD | W | ABS;
    pub(super) const LD_H_ABS: u16 = LD | H | ABS;
    pub(super) const LD_B_ABS: u16 = LD | B | ABS;
    pub(super) const LD_W_IND: u16 = LD | W | IND;
    pub(super) const LD_H_IND: u16 = LD | H | IND;
    pub(super) const LD_B_IND: u16 = LD | B | IND;
    pub(super) const LDX_B_MSH: u16 = LDX | B | MSH;
    pub(super) const LD_W_LEN: u16 = LD | W | LEN;
    pub(super) const LDX_W_LEN: u16 = LDX | W | LEN;
    pub(super) const LD_IMM: u16 = LD | IMM;
    pub(super) const LDX_IMM: u16 = LDX | IMM;
    pub(super) const LD_MEM: u16 = LD | MEM;
    pub(super) const LDX_MEM: u16 = LDX | MEM;
    pub(super) const ST: u16 = super::ST;
    pub(super) const STX: u16 = super::STX;
    pub(super) const ADD_K: u16 = ALU | ADD | K;
    pub(super) const SUB_K: u16 = ALU | SUB | K;
    pub(super) const MUL_K: u16 = ALU | MUL | K;
    pub(super) const DIV_K: u16 = ALU | DIV | K;
    pub(super) const MOD_K: u16 = ALU | MOD | K;
    pub(super) const AND_K: u16 = ALU | AND | K;
    pub(super) const OR_K: u16 = ALU | OR | K;
    pub(super) const XOR_K: u16 = ALU | XOR | K;
    pub(super) const LSH_K: u16 = ALU | LSH | K;
    pub(super) const RSH_K: u16 = ALU | RSH | K;
    pub(super) const ADD_X: u16 = ALU | ADD | X;
    pub(super) const SUB_X: u16 = ALU | SUB | X;
    pub(super) const MUL_X: u16 = ALU | MUL | X;
    pub(super) const DIV_X: u16 = ALU | DIV | X;
    pub(super) const MOD_X: u16 = ALU | MOD | X;
    pub(super) const AND_X: u16 = ALU | AND | X;
    pub(super) const OR_X: u16 = ALU | OR | X;
    pub(super) const XOR_X: u16 = ALU | XOR | X;
    pub(super) const LSH_X: u16 = ALU | LSH | X;
    pub(super) const RSH_X: u16 = ALU | RSH | X;
    pub(super) const NEG: u16 = ALU | super::NEG;
    pub(super) const JA: u16 = JMP | super::JA;
    pub(super) const JEQ_K: u16 = JMP | JEQ | K;
    pub(super) const JGT_K: u16 = JMP | JGT | K;
    pub(super) const JGE_K: u16 = JMP | JGE | K;
    pub(super) const JSET_K: u16 = JMP | JSET | K;
    pub(super) const JEQ_X: u16 = JMP | JEQ | X;
    pub(super) const JGT_X: u16 = JMP | JGT | X;
    pub(super) const JGE_X: u16 = JMP | JGE | X;
    pub(super) const JSET_X: u16 = JMP | JSET | X;
    pub(super) const RET_K: u16 = RET | K;
    pub(super) const RET_A: u16 = RET | A;
    pub(super) const TAX: u16 = MISC | super::TAX;
    pub(super) const TXA: u16 = MISC | super::TXA;

    /// All of them.
    pub(super) const ALL: [u16; 49] = [
        LD_W_ABS, LD_H_ABS, LD_B_ABS, LD_W_IND, LD_H_IND, LD_B_IND, LDX_B_MSH, LD_W_LEN, LDX_W_LEN,
        LD_IMM, LDX_IMM, LD_MEM, LDX_MEM, ST, STX, ADD_K, SUB_K, MUL_K, DIV_K, MOD_K, AND_K, OR_K,
        XOR_K, LSH_K, RSH_K, ADD_X, SUB_X, MUL_X, DIV_X, MOD_X, AND_X, OR_X, XOR_X, LSH_X, RSH_X,
        NEG, JA, JEQ_K, JGT_K, JGE_K, JSET_K, JEQ_X, JGT_X, JGE_X, JSET_X, RET_K, RET_A, TAX, TXA,
    ];
}

/// `size` big-endian bytes at `off`, or None if they are not all captured.
#[inline]
fn load(pkt: &[u8], off: u64, size: usize) -> Option<u32> {
    let off = usize::try_from(off).ok()?;
    let bytes = pkt.get(off..off.checked_add(size)?)?;
    Some(bytes.iter().fold(0u32, |v, &b| (v << 8) | u32::from(b)))
}

/// True for every opcode the evaluator implements.
pub(crate) fn known_opcode(code: u16) -> bool {
    c::ALL.contains(&code)
}

/// Jumps back a run of [`Program::run`] may take before it rejects the
/// frame: libpcap's `protochain` takes one per IPv6 extension header, of
/// which a frame of 256 KiB holds at most 32768.
pub const MAX_BACK_JUMPS: u32 = 1 << 16;

/// The checks behind [`Program::new`] (`loops`: backward jumps inside the
/// program are allowed); also run by the translator (which allows none).
pub(crate) fn validate(insns: &[Insn], loops: bool) -> Result<(), ProgramError> {
    let len = insns.len() as u64;
    let Some(last) = insns.last() else {
        return Err(ProgramError::Empty);
    };
    for (index, insn) in insns.iter().enumerate() {
        let unsupported = |reason| ProgramError::Unsupported {
            index,
            insn: *insn,
            reason,
        };
        let code = insn.code;
        let k = insn.k;
        if !known_opcode(code) {
            return Err(unsupported("unknown opcode"));
        }
        match code & 0x07 {
            LD | LDX if matches!(code & 0xe0, ABS | MSH) && k >= SKF_LL_OFF => {
                return Err(unsupported(
                    "Linux ancillary data / negative offset loads are not supported",
                ))
            }
            LD | LDX if code & 0xe0 == MEM && k >= MEMWORDS => {
                return Err(unsupported("scratch memory index out of range (0..15)"))
            }
            ST | STX if k >= MEMWORDS => {
                return Err(unsupported("scratch memory index out of range (0..15)"))
            }
            ALU if code & X == 0 && matches!(code & 0xf0, DIV | MOD) && k == 0 => {
                return Err(unsupported("division by constant 0"))
            }
            ALU if code & X == 0 && matches!(code & 0xf0, LSH | RSH) && k >= 32 => {
                return Err(unsupported("shift by 32 bits or more"))
            }
            JMP => {
                let here = index as u64 + 1;
                let targets: [u64; 2] = if code & 0xf0 == JA {
                    if (k as i32) < 0 {
                        // libpcap's `protochain` loops with a backward ja.
                        let target = here as i64 + i64::from(k as i32);
                        if !loops || target < 0 {
                            return Err(ProgramError::BadJump {
                                index,
                                insn: *insn,
                                target: target.max(0) as u64,
                                why: if loops {
                                    "before the start of the program"
                                } else {
                                    "backwards (a loop, such as libpcap's protochain, cannot run \
                                     in XDP; record -r and extract take it)"
                                },
                            });
                        }
                        [target as u64; 2]
                    } else {
                        [here + u64::from(k); 2]
                    }
                } else {
                    [here + u64::from(insn.jt), here + u64::from(insn.jf)]
                };
                for target in targets {
                    if target >= len {
                        return Err(ProgramError::BadJump {
                            index,
                            insn: *insn,
                            target,
                            why: "past the end of the program",
                        });
                    }
                }
            }
            _ => {}
        }
    }
    if last.code & 0x07 != RET {
        return Err(ProgramError::NoFinalRet { insn: *last });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(insns: &[Insn]) -> Program {
        Program::new(insns.to_vec()).unwrap()
    }

    /// Runs `insns` (which should end in `ret a`) on `pkt` with wire length = its length.
    fn run(insns: &[Insn], pkt: &[u8]) -> u32 {
        prog(insns).run(pkt, pkt.len() as u32)
    }

    const RET_A: Insn = Insn::stmt(RET | A, 0);
    const PKT: [u8; 8] = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];

    #[test]
    fn ld_abs_sizes_are_big_endian() {
        assert_eq!(
            run(&[Insn::stmt(LD | W | ABS, 1), RET_A], &PKT),
            0x2233_4455
        );
        assert_eq!(run(&[Insn::stmt(LD | H | ABS, 6), RET_A], &PKT), 0x7788);
        assert_eq!(run(&[Insn::stmt(LD | B | ABS, 7), RET_A], &PKT), 0x88);
    }

    #[test]
    fn ld_abs_out_of_bounds_returns_zero() {
        // Even a program that would return a constant after the load.
        let tail = Insn::stmt(RET | K, 7);
        assert_eq!(run(&[Insn::stmt(LD | W | ABS, 4), tail], &PKT), 7);
        assert_eq!(run(&[Insn::stmt(LD | W | ABS, 5), tail], &PKT), 0);
        assert_eq!(run(&[Insn::stmt(LD | H | ABS, 7), tail], &PKT), 0);
        assert_eq!(run(&[Insn::stmt(LD | B | ABS, 8), tail], &PKT), 0);
        assert_eq!(run(&[Insn::stmt(LD | W | ABS, 0x7fff_fffe), tail], &PKT), 0);
        assert_eq!(run(&[Insn::stmt(LD | B | ABS, 0), tail], &[]), 0);
    }

    #[test]
    fn ld_ind_adds_x_without_wrapping() {
        let p = |x: u32, k: u32, size: u16| {
            run(
                &[
                    Insn::stmt(LDX | IMM, x),
                    Insn::stmt(LD | size | IND, k),
                    RET_A,
                ],
                &PKT,
            )
        };
        assert_eq!(p(2, 1, W), 0x4455_6677);
        assert_eq!(p(3, 3, H), 0x7788);
        assert_eq!(p(7, 0, B), 0x88);
        assert_eq!(p(7, 1, B), 0);
        assert_eq!(p(5, 0, W), 0);
        // X + k wraps to 1 in 32 bits: libpcap rejects, so do we.
        assert_eq!(p(u32::MAX, 2, B), 0);
        assert_eq!(p(2, u32::MAX, H), 0);
    }

    #[test]
    fn ldx_msh_is_ip_header_length() {
        let pkt = [0x45, 0, 0xff];
        assert_eq!(
            run(
                &[
                    Insn::stmt(LDX | B | MSH, 0),
                    Insn::stmt(MISC | TXA, 0),
                    RET_A
                ],
                &pkt
            ),
            20
        );
        assert_eq!(
            run(
                &[
                    Insn::stmt(LDX | B | MSH, 2),
                    Insn::stmt(MISC | TXA, 0),
                    RET_A
                ],
                &pkt
            ),
            60
        );
        assert_eq!(run(&[Insn::stmt(LDX | B | MSH, 3), RET_A], &pkt), 0);
    }

    #[test]
    fn len_is_the_wire_length_not_the_captured_one() {
        let p = prog(&[Insn::stmt(LD | W | LEN, 0), RET_A]);
        assert_eq!(p.run(&PKT, 1514), 1514);
        let p = prog(&[
            Insn::stmt(LDX | W | LEN, 0),
            Insn::stmt(MISC | TXA, 0),
            RET_A,
        ]);
        assert_eq!(p.run(&PKT[..2], 60), 60);
    }

    #[test]
    fn immediates_and_scratch_memory() {
        assert_eq!(
            run(&[Insn::stmt(LD | IMM, 0xdead_beef), RET_A], &[]),
            0xdead_beef
        );
        let p = [
            Insn::stmt(LD | IMM, 5),
            Insn::stmt(ST, 15),
            Insn::stmt(LDX | IMM, 9),
            Insn::stmt(STX, 0),
            Insn::stmt(LD | MEM, 0),   // A = 9
            Insn::stmt(LDX | MEM, 15), // X = 5
            Insn::stmt(ALU | SUB | X, 0),
            RET_A,
        ];
        assert_eq!(run(&p, &[]), 4);
        // Scratch memory starts zeroed.
        assert_eq!(
            run(
                &[Insn::stmt(LD | IMM, 3), Insn::stmt(LD | MEM, 7), RET_A],
                &[]
            ),
            0
        );
    }

    fn alu(a: u32, code: u16, k: u32, x: u32) -> u32 {
        run(
            &[
                Insn::stmt(LD | IMM, a),
                Insn::stmt(LDX | IMM, x),
                Insn::stmt(ALU | code, k),
                RET_A,
            ],
            &[],
        )
    }

    #[test]
    fn alu_with_constant() {
        assert_eq!(alu(u32::MAX, ADD | K, 2, 0), 1);
        assert_eq!(alu(1, SUB | K, 2, 0), u32::MAX);
        assert_eq!(alu(0x1000_0001, MUL | K, 16, 0), 0x10);
        assert_eq!(alu(100, DIV | K, 7, 0), 14);
        assert_eq!(alu(100, MOD | K, 7, 0), 2);
        assert_eq!(alu(0xf0f0, AND | K, 0xff00, 0), 0xf000);
        assert_eq!(alu(0xf0f0, OR | K, 0x0f00, 0), 0xfff0);
        assert_eq!(alu(0xf0f0, XOR | K, 0xffff, 0), 0x0f0f);
        assert_eq!(alu(0x8000_0001, LSH | K, 1, 0), 2);
        assert_eq!(alu(0x8000_0000, RSH | K, 31, 0), 1);
        assert_eq!(alu(1, NEG, 0, 0), u32::MAX);
        assert_eq!(alu(0, NEG, 0, 0), 0);
    }

    #[test]
    fn alu_with_x() {
        assert_eq!(alu(3, ADD | X, 0, 4), 7);
        assert_eq!(alu(3, SUB | X, 0, 4), u32::MAX);
        assert_eq!(alu(3, MUL | X, 0, 4), 12);
        assert_eq!(alu(100, DIV | X, 0, 7), 14);
        assert_eq!(alu(100, MOD | X, 0, 7), 2);
        assert_eq!(alu(0b1100, AND | X, 0, 0b1010), 0b1000);
        assert_eq!(alu(0b1100, OR | X, 0, 0b1010), 0b1110);
        assert_eq!(alu(0b1100, XOR | X, 0, 0b1010), 0b0110);
        assert_eq!(alu(1, LSH | X, 0, 31), 0x8000_0000);
        assert_eq!(alu(0x8000_0000, RSH | X, 0, 31), 1);
        // libpcap: a shift by 32 or more gives 0 (not a shift modulo 32).
        assert_eq!(alu(3, LSH | X, 0, 32), 0);
        assert_eq!(alu(3, RSH | X, 0, 40), 0);
    }

    #[test]
    fn division_by_zero_x_rejects_the_frame() {
        for code in [DIV | X, MOD | X] {
            let p = [
                Insn::stmt(LD | IMM, 10),
                Insn::stmt(ALU | code, 0),
                Insn::stmt(RET | K, 99),
            ];
            assert_eq!(run(&p, &[]), 0);
        }
    }

    fn jump(code: u16, a: u32, k: u32, x: u32) -> u32 {
        run(
            &[
                Insn::stmt(LD | IMM, a),
                Insn::stmt(LDX | IMM, x),
                Insn::jump(JMP | code, k, 1, 2),
                Insn::stmt(RET | K, 100), // not taken into
                Insn::stmt(RET | K, 1),   // jt
                Insn::stmt(RET | K, 2),   // jf
            ],
            &[],
        )
    }

    #[test]
    fn conditional_jumps_with_constant_and_x() {
        assert_eq!(jump(JEQ | K, 5, 5, 0), 1);
        assert_eq!(jump(JEQ | K, 5, 6, 0), 2);
        assert_eq!(jump(JGT | K, 6, 5, 0), 1);
        assert_eq!(jump(JGT | K, 5, 5, 0), 2);
        assert_eq!(jump(JGE | K, 5, 5, 0), 1);
        assert_eq!(jump(JGE | K, 4, 5, 0), 2);
        assert_eq!(jump(JSET | K, 6, 2, 0), 1);
        assert_eq!(jump(JSET | K, 5, 2, 0), 2);
        // Unsigned comparisons.
        assert_eq!(jump(JGT | K, 0x8000_0000, 1, 0), 1);
        assert_eq!(jump(JEQ | X, 5, 0, 5), 1);
        assert_eq!(jump(JEQ | X, 5, 0, 6), 2);
        assert_eq!(jump(JGT | X, u32::MAX, 0, 5), 1);
        assert_eq!(jump(JGT | X, 5, 0, 5), 2);
        assert_eq!(jump(JGE | X, 5, 0, 5), 1);
        assert_eq!(jump(JGE | X, 4, 0, 5), 2);
        assert_eq!(jump(JSET | X, 6, 0, 2), 1);
        assert_eq!(jump(JSET | X, 5, 0, 2), 2);
    }

    #[test]
    fn ja_ret_and_misc() {
        let p = [
            Insn::stmt(LD | IMM, 42),
            Insn::stmt(JMP | JA, 1),
            Insn::stmt(RET | K, 0),
            Insn::stmt(MISC | TAX, 0),
            Insn::stmt(LD | IMM, 0),
            Insn::stmt(MISC | TXA, 0),
            RET_A,
        ];
        assert_eq!(run(&p, &[]), 42);
        assert_eq!(run(&[Insn::stmt(RET | K, 65535)], &[]), 65535);
        assert!(!prog(&[Insn::stmt(RET | K, 0)]).matches(&PKT, 8));
        assert!(prog(&[Insn::stmt(RET | K, 1)]).matches(&PKT, 8));
    }

    #[test]
    fn validation_refuses_bad_programs() {
        let ret = Insn::stmt(RET | K, 1);
        let err = |insns: &[Insn]| Program::new(insns.to_vec()).unwrap_err();
        assert_eq!(err(&[]), ProgramError::Empty);
        assert!(matches!(
            err(&[Insn::stmt(0xffff, 0), ret]),
            ProgramError::Unsupported { index: 0, .. }
        ));
        assert!(matches!(
            err(&[Insn::stmt(RET | X, 0)]),
            ProgramError::Unsupported { .. }
        ));
        assert!(matches!(
            err(&[Insn::stmt(LD | IMM, 0)]),
            ProgramError::NoFinalRet { .. }
        ));
        assert!(matches!(
            err(&[Insn::jump(JMP | JEQ | K, 0, 0, 1), ret]),
            ProgramError::BadJump {
                index: 0,
                target: 2,
                ..
            }
        ));
        assert!(matches!(
            err(&[Insn::stmt(JMP | JA, 1), ret]),
            ProgramError::BadJump { .. }
        ));
        assert!(matches!(
            err(&[ret, Insn::stmt(JMP | JA, u32::MAX - 2), ret]),
            ProgramError::BadJump { .. }
        ));
        for bad in [
            Insn::stmt(ST, 16),
            Insn::stmt(STX, 16),
            Insn::stmt(LD | MEM, 16),
            Insn::stmt(LDX | MEM, 100),
            Insn::stmt(ALU | DIV | K, 0),
            Insn::stmt(ALU | MOD | K, 0),
            Insn::stmt(ALU | LSH | K, 32),
            Insn::stmt(ALU | RSH | K, 99),
            Insn::stmt(LD | B | ABS, 0xffff_f000),
            Insn::stmt(LDX | B | MSH, 0xffe0_0000),
        ] {
            let e = err(&[bad, ret]);
            assert!(
                matches!(e, ProgramError::Unsupported { index: 0, .. }),
                "{bad:?}: {e}"
            );
        }
        let e = err(&[Insn::stmt(LD | IMM, 0), Insn::stmt(LDX | MEM, 16), ret]);
        assert_eq!(
            e.to_string(),
            "instruction 1 (ldx M[16]): scratch memory index out of range (0..15)"
        );
    }

    #[test]
    fn loops_run_as_libpcap_runs_them_and_end() {
        // x counts to 5 through a backward ja.
        let counting = [
            Insn::stmt(LDX | IMM, 0),
            Insn::stmt(MISC | TXA, 0),
            Insn::stmt(ALU | ADD | K, 1),
            Insn::stmt(MISC | TAX, 0),
            Insn::jump(JMP | JEQ | K, 5, 1, 0),
            Insn::stmt(JMP | JA, (-5i32) as u32),
            RET_A,
        ];
        let p = prog(&counting);
        assert!(p.loops());
        assert_eq!(run(&counting, &[]), 5);
        // A loop that never ends is cut off: the frame is rejected.
        let forever = [Insn::stmt(JMP | JA, u32::MAX), Insn::stmt(RET | K, 1)];
        assert_eq!(run(&forever, &[]), 0);
        assert!(!prog(&[Insn::stmt(RET | K, 1)]).loops());
        // The translator still refuses both.
        for insns in [&counting[..], &forever[..]] {
            assert!(matches!(
                validate(insns, false),
                Err(ProgramError::BadJump { .. })
            ));
        }
    }

    #[test]
    fn dump_looks_like_tcpdump() {
        let p = prog(&[
            Insn::stmt(LD | H | ABS, 12),
            Insn::jump(JMP | JEQ | K, 0x800, 0, 1),
            Insn::stmt(RET | K, 262144),
            Insn::stmt(RET | K, 0),
        ]);
        assert_eq!(
            p.dump(),
            "(000) ldh      [12]\n\
             (001) jeq      #0x800           jt 2\tjf 3\n\
             (002) ret      #262144\n\
             (003) ret      #0\n"
        );
    }
}
