//! Classic BPF instructions: the [`Insn`] layout, the opcode constants and the
//! `tcpdump -d` style disassembly.

use std::fmt;

/// One classic BPF instruction, laid out exactly like `struct bpf_insn` of
/// libpcap and `struct sock_filter` of Linux (8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Insn {
    /// Opcode: class | size | mode, or class | operation | source (see [`op`]).
    pub code: u16,
    /// Conditional jumps: instructions to skip when the condition holds.
    pub jt: u8,
    /// Conditional jumps: instructions to skip when it does not.
    pub jf: u8,
    /// The constant operand (offset, immediate, scratch index, jump distance).
    pub k: u32,
}

impl Insn {
    /// An instruction without jump offsets.
    pub const fn stmt(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// A conditional jump.
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
        Insn { code, jt, jf, k }
    }

    /// The instruction as `tcpdump -d` (libpcap's `bpf_image`) prints it when
    /// it sits at index `pc`, e.g. `(000) ldh      [12]`.
    pub fn image(&self, pc: usize) -> String {
        let (opname, operand) = self.parts(pc);
        if self.is_conditional_jump() {
            format!(
                "({pc:03}) {opname:<8} {operand:<16} jt {}\tjf {}",
                pc.saturating_add(1 + usize::from(self.jt)),
                pc.saturating_add(1 + usize::from(self.jf))
            )
        } else {
            format!("({pc:03}) {opname:<8} {operand}")
        }
    }

    /// The short form used in error messages: `ldx M[3]`, `jeq #0x800`.
    pub fn mnemonic(&self) -> String {
        let (opname, operand) = self.parts(0);
        if operand.is_empty() {
            opname.to_string()
        } else {
            format!("{opname} {operand}")
        }
    }

    pub(crate) fn is_conditional_jump(&self) -> bool {
        self.code & 0x07 == op::JMP && self.code & 0xf0 != op::JA
    }

    /// Operation name and operand text, with libpcap's printf conventions
    /// (`%d` of the signed value, `0x%x` of the unsigned one).
    fn parts(&self, pc: usize) -> (&'static str, String) {
        use op::*;
        let d = self.k as i32;
        let x = self.k;
        let (name, operand) = match self.code {
            c if c == RET | K => ("ret", format!("#{d}")),
            c if c == RET | A => ("ret", String::new()),
            c if c == LD | W | ABS => ("ld", format!("[{d}]")),
            c if c == LD | H | ABS => ("ldh", format!("[{d}]")),
            c if c == LD | B | ABS => ("ldb", format!("[{d}]")),
            c if c == LD | W | LEN => ("ld", "#pktlen".to_string()),
            c if c == LD | W | IND => ("ld", format!("[x + {d}]")),
            c if c == LD | H | IND => ("ldh", format!("[x + {d}]")),
            c if c == LD | B | IND => ("ldb", format!("[x + {d}]")),
            c if c == LD | IMM => ("ld", format!("#0x{x:x}")),
            c if c == LDX | IMM => ("ldx", format!("#0x{x:x}")),
            c if c == LDX | W | LEN => ("ldx", "#pktlen".to_string()),
            c if c == LDX | B | MSH => ("ldxb", format!("4*([{d}]&0xf)")),
            c if c == LD | MEM => ("ld", format!("M[{d}]")),
            c if c == LDX | MEM => ("ldx", format!("M[{d}]")),
            c if c == ST => ("st", format!("M[{d}]")),
            c if c == STX => ("stx", format!("M[{d}]")),
            c if c == JMP | JA => (
                "ja",
                format!("{}", (pc as i64).wrapping_add(1 + i64::from(self.k)) as i32),
            ),
            c if c == JMP | JGT | K => ("jgt", format!("#0x{x:x}")),
            c if c == JMP | JGE | K => ("jge", format!("#0x{x:x}")),
            c if c == JMP | JEQ | K => ("jeq", format!("#0x{x:x}")),
            c if c == JMP | JSET | K => ("jset", format!("#0x{x:x}")),
            c if c == JMP | JGT | X => ("jgt", "x".to_string()),
            c if c == JMP | JGE | X => ("jge", "x".to_string()),
            c if c == JMP | JEQ | X => ("jeq", "x".to_string()),
            c if c == JMP | JSET | X => ("jset", "x".to_string()),
            c if c == ALU | NEG => ("neg", String::new()),
            c if c == MISC | TAX => ("tax", String::new()),
            c if c == MISC | TXA => ("txa", String::new()),
            c if c & 0x07 == ALU && c & !0xf8 == ALU => {
                let name = match c & 0xf0 {
                    ADD => "add",
                    SUB => "sub",
                    MUL => "mul",
                    DIV => "div",
                    MOD => "mod",
                    AND => "and",
                    OR => "or",
                    XOR => "xor",
                    LSH => "lsh",
                    RSH => "rsh",
                    _ => return ("unimp", format!("0x{:x}", self.code)),
                };
                let operand = if c & X != 0 {
                    "x".to_string()
                } else if matches!(c & 0xf0, AND | OR | XOR) {
                    format!("#0x{x:x}")
                } else {
                    format!("#{d}")
                };
                (name, operand)
            }
            _ => ("unimp", format!("0x{:x}", self.code)),
        };
        (name, operand)
    }
}

impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.mnemonic())
    }
}

/// Classic BPF opcode parts (`linux/filter.h`, `pcap/bpf.h`). An opcode is
/// the OR of a class, then either a size and a mode (loads) or an operation
/// and a source (ALU, jumps).
#[allow(missing_docs)]
pub mod op {
    // Classes.
    pub const LD: u16 = 0x00;
    pub const LDX: u16 = 0x01;
    pub const ST: u16 = 0x02;
    pub const STX: u16 = 0x03;
    pub const ALU: u16 = 0x04;
    pub const JMP: u16 = 0x05;
    pub const RET: u16 = 0x06;
    pub const MISC: u16 = 0x07;
    // Load sizes.
    pub const W: u16 = 0x00;
    pub const H: u16 = 0x08;
    pub const B: u16 = 0x10;
    // Load modes.
    pub const IMM: u16 = 0x00;
    pub const ABS: u16 = 0x20;
    pub const IND: u16 = 0x40;
    pub const MEM: u16 = 0x60;
    pub const LEN: u16 = 0x80;
    pub const MSH: u16 = 0xa0;
    // ALU operations.
    pub const ADD: u16 = 0x00;
    pub const SUB: u16 = 0x10;
    pub const MUL: u16 = 0x20;
    pub const DIV: u16 = 0x30;
    pub const OR: u16 = 0x40;
    pub const AND: u16 = 0x50;
    pub const LSH: u16 = 0x60;
    pub const RSH: u16 = 0x70;
    pub const NEG: u16 = 0x80;
    pub const MOD: u16 = 0x90;
    pub const XOR: u16 = 0xa0;
    // Jump operations.
    pub const JA: u16 = 0x00;
    pub const JEQ: u16 = 0x10;
    pub const JGT: u16 = 0x20;
    pub const JGE: u16 = 0x30;
    pub const JSET: u16 = 0x40;
    // Sources (ALU, jumps) and return values.
    pub const K: u16 = 0x00;
    pub const X: u16 = 0x08;
    pub const A: u16 = 0x10;
    // MISC operations.
    pub const TAX: u16 = 0x00;
    pub const TXA: u16 = 0x80;
    /// Number of scratch memory words (`BPF_MEMWORDS`).
    pub const MEMWORDS: u32 = 16;
    /// Linux ancillary data and negative-offset loads start here
    /// (`SKF_LL_OFF` = -0x200000); neither libpcap nor XDP can evaluate them.
    pub const SKF_LL_OFF: u32 = 0xffe0_0000;
}
