//! A time-free query ([`Formula`]) compiled to a classic BPF program that
//! selects exactly the frames [`super::eval`] selects on their
//! [`super::Decoded`] keys.
//!
//! libpcap's language cannot say what stenotype indexes (VLAN tags and
//! MPLS labels to any depth, five tag types, pseudowires, IPv6 extension
//! headers, and "a layer counts only when all its bytes are captured"), so
//! the program is written here and run by the same evaluator
//! ([`Program`]) as libpcap's. It walks the frame as stenotype does
//! ([`super::decode`]), with loops (backward `ja`, bounded by the
//! evaluator: each pass takes at least 4 bytes, so a 256 KiB frame stays
//! within [`wiretape_filter::MAX_BACK_JUMPS`]); VLAN and MPLS conditions
//! are set as bits in scratch memory as tags and labels go by; addresses,
//! the protocol and ports are tested in place once their layer is read.
//!
//! # Bounds
//!
//! A classic BPF load past the captured bytes rejects the frame at once,
//! while stenotype keeps what it found before the short layer. So before
//! each layer the program asks the query with what it knows so far (what
//! comes later taken as false: the query has no negation, so more
//! knowledge only turns false into true): if that already holds, the frame
//! is accepted; then the layer's last byte is loaded, which rejects the
//! frame exactly when stenotype would stop there, and the query could not
//! hold any more. A final test at each end of the walk asks the query with
//! everything found.

use wiretape_filter::op::*;
use wiretape_filter::{Insn, Program};

/// One condition on a frame's keys: any of its values of `kind` in `set`
/// (sorted, disjoint, inclusive ranges).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Atom {
    pub(crate) kind: Kind,
    pub(crate) set: Vec<(u128, u128)>,
}

/// What an [`Atom`] looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    Vlan,
    Mpls,
    Ip4,
    Ip6,
    Proto,
    Port,
}

impl Kind {
    fn bit(self) -> u8 {
        match self {
            Kind::Vlan | Kind::Mpls => L2,
            Kind::Ip4 => IP4,
            Kind::Ip6 => IP6,
            Kind::Proto => PROTO,
            Kind::Port => PORT,
        }
    }
}

/// A query without time: atoms (indexes into a table) under and/or.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Formula {
    True,
    False,
    Atom(usize),
    And(Vec<Formula>),
    Or(Vec<Formula>),
}

// What is known at a point of the walk (bits of a mask).
const L2: u8 = 1;
const IP4: u8 = 2;
const IP6: u8 = 4;
const PROTO: u8 = 8;
const PORT: u8 = 16;

impl Formula {
    /// `self` with every atom whose kind is not in `known` false, folded.
    pub(crate) fn fold(&self, atoms: &[Atom], known: u8) -> Formula {
        match self {
            Formula::Atom(i) if atoms[*i].kind.bit() & known == 0 => Formula::False,
            Formula::And(v) => {
                let mut out = Vec::new();
                for f in v {
                    match f.fold(atoms, known) {
                        Formula::True => {}
                        Formula::False => return Formula::False,
                        Formula::And(w) => out.extend(w),
                        g => out.push(g),
                    }
                }
                match out.len() {
                    0 => Formula::True,
                    1 => out.pop().unwrap_or(Formula::True),
                    _ => Formula::And(out),
                }
            }
            Formula::Or(v) => {
                let mut out = Vec::new();
                for f in v {
                    match f.fold(atoms, known) {
                        Formula::False => {}
                        Formula::True => return Formula::True,
                        Formula::Or(w) => out.extend(w),
                        g => out.push(g),
                    }
                }
                match out.len() {
                    0 => Formula::False,
                    1 => out.pop().unwrap_or(Formula::False),
                    _ => Formula::Or(out),
                }
            }
            f => f.clone(),
        }
    }

    /// The kinds of its atoms (a mask).
    fn kinds(&self, atoms: &[Atom]) -> u8 {
        match self {
            Formula::Atom(i) => atoms[*i].kind.bit(),
            Formula::And(v) | Formula::Or(v) => v.iter().fold(0, |m, f| m | f.kinds(atoms)),
            _ => 0,
        }
    }
}

/// Why a query cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// More VLAN/MPLS conditions than scratch memory holds bits for.
    #[error(
        "the query has {0} different vlan/mpls conditions: at most {MAX_BITS} are taken (join \
         several values of one kind with `or`: they count as one)"
    )]
    TooManyTagConditions(usize),
}

/// Scratch words: the next type, a tag or label, the IP header's offset,
/// the protocol, the TCP/UDP header's offset, a saved offset; then bits.
const M_T: u32 = 0;
const M_TAG: u32 = 1;
const M_L3: u32 = 2;
const M_PROTO: u32 = 3;
const M_L4: u32 = 4;
const M_SAVE: u32 = 5;
const M_BITS: u32 = 6;
/// VLAN/MPLS conditions a program can hold.
pub const MAX_BITS: usize = (MEMWORDS - M_BITS) as usize * 32;
/// What an accepting program returns (libpcap's: the snap length).
const ACCEPT_K: u32 = 262_144;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct L(usize);

enum Item {
    I(Insn),
    J { code: u16, k: u32, t: L, f: L },
    Ja(L),
    Mark(L),
}

/// Instructions with symbolic jumps, laid out at the end: a conditional
/// jump whose target is behind it or more than 255 instructions ahead
/// becomes `jxx 0,1; ja T; ja F`.
#[derive(Default)]
struct Asm {
    items: Vec<Item>,
    labels: usize,
}

impl Asm {
    fn label(&mut self) -> L {
        self.labels += 1;
        L(self.labels - 1)
    }
    fn mark(&mut self, l: L) {
        self.items.push(Item::Mark(l));
    }
    fn op(&mut self, code: u16, k: u32) {
        self.items.push(Item::I(Insn::stmt(code, k)));
    }
    fn jump(&mut self, code: u16, k: u32, t: L, f: L) {
        if t == f {
            return self.ja(t);
        }
        self.items.push(Item::J {
            code: JMP | code | K,
            k,
            t,
            f,
        });
    }
    fn ja(&mut self, l: L) {
        self.items.push(Item::Ja(l));
    }

    fn assemble(self) -> Vec<Insn> {
        let mut wide = vec![false; self.items.len()];
        let size = |it: &Item, w: bool| match it {
            Item::Mark(_) => 0,
            Item::J { .. } if w => 3,
            _ => 1,
        };
        let (pos, at) = loop {
            let mut pos = Vec::with_capacity(self.items.len());
            let mut at = vec![0usize; self.labels];
            let mut p = 0usize;
            for (i, it) in self.items.iter().enumerate() {
                pos.push(p);
                if let Item::Mark(l) = it {
                    at[l.0] = p;
                }
                p += size(it, wide[i]);
            }
            let mut changed = false;
            for (i, it) in self.items.iter().enumerate() {
                if let Item::J { t, f, .. } = it {
                    let fits = |l: &L| at[l.0] > pos[i] && at[l.0] - pos[i] - 1 <= 255;
                    if !(wide[i] || fits(t) && fits(f)) {
                        wide[i] = true;
                        changed = true;
                    }
                }
            }
            if !changed {
                break (pos, at);
            }
        };
        let ja = |from: usize, to: usize| {
            Insn::stmt(JMP | JA, (to as i64 - from as i64 - 1) as i32 as u32)
        };
        let mut out = Vec::new();
        for (i, it) in self.items.iter().enumerate() {
            let p = pos[i];
            match it {
                Item::I(x) => out.push(*x),
                Item::Mark(_) => {}
                Item::Ja(l) => out.push(ja(p, at[l.0])),
                Item::J { code, k, t, f } if wide[i] => {
                    out.push(Insn::jump(*code, *k, 0, 1));
                    out.push(ja(p + 1, at[t.0]));
                    out.push(ja(p + 2, at[f.0]));
                }
                Item::J { code, k, t, f } => out.push(Insn::jump(
                    *code,
                    *k,
                    (at[t.0] - p - 1) as u8,
                    (at[f.0] - p - 1) as u8,
                )),
            }
        }
        out
    }
}

struct Gen<'a> {
    asm: Asm,
    f: &'a Formula,
    atoms: &'a [Atom],
    /// The bit of each VLAN/MPLS atom.
    bits: Vec<Option<usize>>,
    accept: L,
    /// The final tests emitted so far, by what they know.
    finals: Vec<(u8, L)>,
}

impl Gen<'_> {
    /// Jumps to `t` when A (a 32-bit value) is in `set`, else to `f`.
    fn member(&mut self, set: &[(u128, u128)], t: L, f: L) {
        let set: Vec<(u32, u32)> = set
            .iter()
            .filter(|r| r.0 <= u128::from(u32::MAX))
            .map(|&(lo, hi)| (lo as u32, hi.min(u128::from(u32::MAX)) as u32))
            .collect();
        self.member32(&set, t, f);
    }

    fn member32(&mut self, set: &[(u32, u32)], t: L, f: L) {
        match set {
            [] => self.asm.ja(f),
            [(lo, hi)] if lo == hi => self.asm.jump(JEQ, *lo, t, f),
            [(0, hi)] => self.asm.jump(JGT, *hi, f, t),
            [(lo, u32::MAX)] => self.asm.jump(JGE, *lo, t, f),
            [(lo, hi)] => {
                let l = self.asm.label();
                self.asm.jump(JGE, *lo, l, f);
                self.asm.mark(l);
                self.asm.jump(JGT, *hi, f, t);
            }
            _ => {
                let mid = set.len() / 2;
                let (lo, hi) = set[mid];
                let (right, left, here) = (self.asm.label(), self.asm.label(), self.asm.label());
                self.asm.jump(JGT, hi, right, here);
                self.asm.mark(here);
                if lo == hi {
                    self.asm.jump(JEQ, lo, t, left);
                } else {
                    self.asm.jump(JGE, lo, t, left);
                }
                self.asm.mark(left);
                self.member32(&set[..mid], t, f);
                self.asm.mark(right);
                self.member32(&set[mid + 1..], t, f);
            }
        }
    }

    /// The 128-bit word at `[x + off]` compared with `v`, word by word:
    /// jumps to `gt`, `eq` or `lt`.
    fn cmp128(&mut self, off: u32, v: u128, gt: L, eq: L, lt: L) {
        for i in 0..4u32 {
            let w = (v >> (96 - 32 * i)) as u32;
            self.asm.op(LD | W | IND, off + 4 * i);
            let same = self.asm.label();
            self.asm.jump(JGT, w, gt, same);
            self.asm.mark(same);
            let next = if i == 3 { eq } else { self.asm.label() };
            self.asm.jump(JEQ, w, next, lt);
            if i < 3 {
                self.asm.mark(next);
            }
        }
    }

    /// Jumps to `t` when the IPv6 address at `[x + off]` is in `set`.
    fn member128(&mut self, off: u32, set: &[(u128, u128)], t: L, f: L) {
        for (i, &(lo, hi)) in set.iter().enumerate() {
            let next = if i + 1 == set.len() {
                f
            } else {
                self.asm.label()
            };
            if lo == hi {
                let mut miss = next;
                for w in 0..4u32 {
                    let v = (lo >> (96 - 32 * w)) as u32;
                    self.asm.op(LD | W | IND, off + 4 * w);
                    let ok = if w == 3 { t } else { self.asm.label() };
                    self.asm.jump(JEQ, v, ok, miss);
                    if w < 3 {
                        self.asm.mark(ok);
                    }
                    miss = next;
                }
            } else {
                let ge = self.asm.label();
                if lo == 0 {
                    self.asm.ja(ge);
                } else {
                    self.cmp128(off, lo, ge, ge, next);
                }
                self.asm.mark(ge);
                if hi == u128::MAX {
                    self.asm.ja(t);
                } else {
                    self.cmp128(off, hi, next, t, t);
                }
            }
            if i + 1 < set.len() {
                self.asm.mark(next);
            }
        }
        if set.is_empty() {
            self.asm.ja(f);
        }
    }

    /// The test of atom `i` (its layer read): to `t` or `f`. Clobbers A
    /// and X.
    fn atom(&mut self, i: usize, t: L, f: L) {
        let a = &self.atoms[i];
        let set = a.set.clone();
        match a.kind {
            Kind::Vlan | Kind::Mpls => {
                let b = self.bits[i].unwrap_or(0);
                self.asm.op(LD | MEM, M_BITS + (b / 32) as u32);
                self.asm.jump(JSET, 1 << (b % 32), t, f);
            }
            Kind::Proto => {
                self.asm.op(LD | MEM, M_PROTO);
                self.member(&set, t, f);
            }
            Kind::Ip4 | Kind::Port => {
                let (base, offs, size) = if a.kind == Kind::Ip4 {
                    (M_L3, [12, 16], W)
                } else {
                    (M_L4, [0, 2], H)
                };
                self.asm.op(LDX | MEM, base);
                let second = self.asm.label();
                self.asm.op(LD | size | IND, offs[0]);
                self.member(&set, t, second);
                self.asm.mark(second);
                self.asm.op(LD | size | IND, offs[1]);
                self.member(&set, t, f);
            }
            Kind::Ip6 => {
                self.asm.op(LDX | MEM, M_L3);
                let second = self.asm.label();
                self.member128(8, &set, t, second);
                self.asm.mark(second);
                self.member128(24, &set, t, f);
            }
        }
    }

    /// A folded formula's test: to `t` or `f`.
    fn emit(&mut self, g: &Formula, t: L, f: L) {
        match g {
            Formula::True => self.asm.ja(t),
            Formula::False => self.asm.ja(f),
            Formula::Atom(i) => self.atom(*i, t, f),
            Formula::And(v) => {
                for (k, c) in v.iter().enumerate() {
                    if k + 1 == v.len() {
                        self.emit(c, t, f);
                    } else {
                        let next = self.asm.label();
                        self.emit(c, next, f);
                        self.asm.mark(next);
                    }
                }
            }
            Formula::Or(v) => {
                for (k, c) in v.iter().enumerate() {
                    if k + 1 == v.len() {
                        self.emit(c, t, f);
                    } else {
                        let next = self.asm.label();
                        self.emit(c, t, next);
                        self.asm.mark(next);
                    }
                }
            }
        }
    }

    /// Before a layer whose bytes may be missing: accept when what is
    /// known already makes the query true. `keep_x`: the scratch word X is
    /// restored from afterwards (saved first into M_SAVE when it is that).
    fn checkpoint(&mut self, known: u8, keep_x: Option<u32>) {
        let g = self.f.fold(self.atoms, known);
        match g {
            Formula::False => {}
            Formula::True => self.asm.ja(self.accept),
            g => {
                let clobbers = g.kinds(self.atoms) & (IP4 | IP6 | PORT) != 0;
                if clobbers && keep_x == Some(M_SAVE) {
                    self.asm.op(STX, M_SAVE);
                }
                let go_on = self.asm.label();
                self.emit(&g, self.accept, go_on);
                self.asm.mark(go_on);
                if let (true, Some(m)) = (clobbers, keep_x) {
                    self.asm.op(LDX | MEM, m);
                }
            }
        }
    }

    /// The end of the walk with `known`: jumps to that final test.
    fn final_test(&mut self, known: u8) {
        let l = match self.finals.iter().find(|(k, _)| *k == known) {
            Some((_, l)) => *l,
            None => {
                let l = self.asm.label();
                self.finals.push((known, l));
                l
            }
        };
        self.asm.ja(l);
    }

    /// Sets the bits of the atoms of `kind` whose set holds A (kept in M_TAG).
    fn set_bits(&mut self, kind: Kind) {
        for i in 0..self.atoms.len() {
            let Some(b) = self.bits[i] else { continue };
            if self.atoms[i].kind != kind {
                continue;
            }
            let (hit, next) = (self.asm.label(), self.asm.label());
            let set = self.atoms[i].set.clone();
            self.member(&set, hit, next);
            self.asm.mark(hit);
            let w = M_BITS + (b / 32) as u32;
            self.asm.op(LD | MEM, w);
            self.asm.op(ALU | OR | K, 1 << (b % 32));
            self.asm.op(ST, w);
            self.asm.op(LD | MEM, M_TAG);
            self.asm.mark(next);
        }
    }

    fn walk(&mut self) {
        let kinds = self.f.kinds(self.atoms);
        let needs_l3 = kinds & (IP4 | IP6 | PROTO | PORT) != 0;
        let needs_proto = kinds & (PROTO | PORT) != 0;
        let needs_ports = kinds & PORT != 0;
        let has = |k: Kind| self.atoms.iter().any(|a| a.kind == k);
        let (vlan_bits, mpls_bits) = (has(Kind::Vlan), has(Kind::Mpls));
        let a = &mut self.asm;
        let (eth, dispatch, vlan, mpls, bos, ip4, ip6) = (
            a.label(),
            a.label(),
            a.label(),
            a.label(),
            a.label(),
            a.label(),
            a.label(),
        );
        // Bits start cleared.
        let words = self
            .bits
            .iter()
            .flatten()
            .map(|b| b / 32 + 1)
            .max()
            .unwrap_or(0);
        for w in 0..words {
            self.asm.op(LD | IMM, 0);
            self.asm.op(ST, M_BITS + w as u32);
        }
        self.asm.op(LDX | IMM, 0);
        // An Ethernet header at X.
        self.asm.mark(eth);
        self.checkpoint(L2, None);
        // (The type's two bytes end the header: loading them is the bound.)
        self.asm.op(LD | H | IND, 12);
        self.asm.op(ST, M_T);
        self.asm.op(MISC | TXA, 0);
        self.asm.op(ALU | ADD | K, 14);
        self.asm.op(MISC | TAX, 0);
        self.asm.op(LD | MEM, M_T);
        // A: the next layer's type, X: its offset. IP first: the common case.
        self.asm.mark(dispatch);
        let (not4, not6, notv, notm, other) = (
            self.asm.label(),
            self.asm.label(),
            self.asm.label(),
            self.asm.label(),
            self.asm.label(),
        );
        let final_l2 = self.asm.label();
        let (to4, to6) = if needs_l3 {
            (ip4, ip6)
        } else {
            (final_l2, final_l2)
        };
        self.asm.jump(JEQ, 0x0800, to4, not4);
        self.asm.mark(not4);
        self.asm.jump(JEQ, 0x86dd, to6, not6);
        self.asm.mark(not6);
        let vt: Vec<(u128, u128)> = super::decode::VLAN_TYPES
            .iter()
            .map(|&t| (u128::from(t), u128::from(t)))
            .collect();
        self.member(&vt, vlan, notv);
        self.asm.mark(notv);
        self.member(&[(0x8847, 0x8848)], mpls, notm);
        self.asm.mark(notm);
        self.asm.jump(JEQ, 0, eth, other);
        self.asm.mark(other);
        self.asm.mark(final_l2);
        self.final_test(L2);
        // A VLAN tag.
        self.asm.mark(vlan);
        self.checkpoint(L2, None);
        self.asm.op(LD | H | IND, 2);
        self.asm.op(ST, M_T);
        if vlan_bits {
            self.asm.op(LD | H | IND, 0);
            self.asm.op(ALU | AND | K, 0x0fff);
            self.asm.op(ST, M_TAG);
            self.set_bits(Kind::Vlan);
        }
        self.asm.op(MISC | TXA, 0);
        self.asm.op(ALU | ADD | K, 4);
        self.asm.op(MISC | TAX, 0);
        self.asm.op(LD | MEM, M_T);
        self.asm.ja(dispatch);
        // An MPLS label (each needs the next byte too).
        self.asm.mark(mpls);
        self.checkpoint(L2, None);
        self.asm.op(LD | B | IND, 4);
        self.asm.op(LD | W | IND, 0);
        self.asm.op(ST, M_T);
        if mpls_bits {
            self.asm.op(ALU | RSH | K, 12);
            self.asm.op(ST, M_TAG);
            self.set_bits(Kind::Mpls);
        }
        self.asm.op(MISC | TXA, 0);
        self.asm.op(ALU | ADD | K, 4);
        self.asm.op(MISC | TAX, 0);
        self.asm.op(LD | MEM, M_T);
        self.asm.jump(JSET, 0x100, bos, mpls);
        // The bottom of the stack: the next nibble says what follows.
        self.asm.mark(bos);
        let (pw, n1, n2, other) = (
            self.asm.label(),
            self.asm.label(),
            self.asm.label(),
            self.asm.label(),
        );
        self.asm.op(LD | B | IND, 0);
        self.asm.op(ALU | RSH | K, 4);
        self.asm.jump(JEQ, 0, pw, n1);
        self.asm.mark(n1);
        let (go4, go6) = if needs_l3 { (ip4, ip6) } else { (other, other) };
        self.asm.jump(JEQ, 4, go4, n2);
        self.asm.mark(n2);
        self.asm.jump(JEQ, 6, go6, other);
        self.asm.mark(other);
        self.final_test(L2);
        self.asm.mark(pw);
        self.asm.op(MISC | TXA, 0);
        self.asm.op(ALU | ADD | K, 4);
        self.asm.op(MISC | TAX, 0);
        self.asm.ja(eth);
        if !needs_l3 {
            self.asm.mark(ip4);
            self.asm.mark(ip6);
            return;
        }
        // IPv4.
        self.asm.mark(ip4);
        self.checkpoint(L2, None);
        self.asm.op(LD | B | IND, 19);
        self.asm.op(STX, M_L3);
        if !needs_proto {
            self.final_test(L2 | IP4);
        } else {
            let (ok, short) = (self.asm.label(), self.asm.label());
            self.asm.op(LD | B | IND, 0);
            self.asm.op(ALU | AND | K, 0x0f);
            self.asm.jump(JGE, 5, ok, short);
            self.asm.mark(short);
            self.final_test(L2 | IP4);
            self.asm.mark(ok);
            self.asm.op(LD | B | IND, 9);
            self.asm.op(ST, M_PROTO);
            if !needs_ports {
                self.final_test(L2 | IP4 | PROTO);
            } else {
                self.asm.op(LD | B | IND, 0);
                self.asm.op(ALU | AND | K, 0x0f);
                self.asm.op(ALU | LSH | K, 2);
                self.asm.op(ALU | ADD | X, 0);
                self.asm.op(MISC | TAX, 0);
                self.transport(IP4);
            }
        }
        // IPv6.
        self.asm.mark(ip6);
        self.checkpoint(L2, None);
        self.asm.op(LD | B | IND, 39);
        self.asm.op(STX, M_L3);
        if !needs_proto {
            self.final_test(L2 | IP6);
        } else {
            let (ext, frag, hdr, next, after) = (
                self.asm.label(),
                self.asm.label(),
                self.asm.label(),
                self.asm.label(),
                self.asm.label(),
            );
            self.asm.op(LD | B | IND, 6);
            self.asm.op(ST, M_PROTO);
            self.asm.op(MISC | TXA, 0);
            self.asm.op(ALU | ADD | K, 40);
            self.asm.op(MISC | TAX, 0);
            self.asm.mark(ext);
            self.asm.op(LD | MEM, M_PROTO);
            let not44 = self.asm.label();
            self.asm.jump(JEQ, 44, frag, not44);
            self.asm.mark(not44);
            let e: Vec<(u128, u128)> = super::decode::IP6_EXT
                .iter()
                .map(|&p| (u128::from(p), u128::from(p)))
                .collect();
            self.member(&e, hdr, after);
            // A fragment header: a later fragment keeps 44.
            self.asm.mark(frag);
            self.checkpoint(L2 | IP6, Some(M_SAVE));
            self.asm.op(LD | B | IND, 7);
            self.asm.op(LD | H | IND, 2);
            self.asm.jump(JSET, 0xfff8, after, next);
            // Another extension header.
            self.asm.mark(hdr);
            self.checkpoint(L2 | IP6, Some(M_SAVE));
            self.asm.op(LD | B | IND, 1);
            self.asm.mark(next);
            self.asm.op(LD | B | IND, 0);
            self.asm.op(ST, M_PROTO);
            self.asm.op(LD | B | IND, 1);
            self.asm.op(ALU | ADD | K, 1);
            self.asm.op(ALU | LSH | K, 3);
            self.asm.op(ALU | ADD | X, 0);
            self.asm.op(MISC | TAX, 0);
            self.asm.ja(ext);
            self.asm.mark(after);
            if !needs_ports {
                self.final_test(L2 | IP6 | PROTO);
            } else {
                self.transport(IP6);
            }
        }
    }

    /// X at the layer after IP, M_PROTO the protocol: TCP (20 bytes) and
    /// UDP (8) give ports.
    fn transport(&mut self, ip: u8) {
        let (tcp, udp, n) = (self.asm.label(), self.asm.label(), self.asm.label());
        let known = L2 | ip | PROTO;
        self.asm.op(STX, M_L4);
        self.asm.op(LD | MEM, M_PROTO);
        self.asm.jump(JEQ, 6, tcp, n);
        self.asm.mark(n);
        let other = self.asm.label();
        self.asm.jump(JEQ, 17, udp, other);
        self.asm.mark(other);
        self.final_test(known);
        for (l, last) in [(tcp, 19), (udp, 7)] {
            self.asm.mark(l);
            self.checkpoint(known, Some(M_L4));
            self.asm.op(LD | B | IND, last);
            self.final_test(known | PORT);
        }
    }
}

/// The program selecting exactly the frames whose keys satisfy `f` (a
/// formula that is neither true nor false) over `atoms`.
pub(crate) fn compile(f: &Formula, atoms: &[Atom]) -> Result<Program, CompileError> {
    let mut bits = vec![None; atoms.len()];
    let mut n = 0;
    for (i, a) in atoms.iter().enumerate() {
        if matches!(a.kind, Kind::Vlan | Kind::Mpls) {
            bits[i] = Some(n);
            n += 1;
        }
    }
    if n > MAX_BITS {
        return Err(CompileError::TooManyTagConditions(n));
    }
    let mut asm = Asm::default();
    let (accept, reject) = (asm.label(), asm.label());
    let mut g = Gen {
        asm,
        f,
        atoms,
        bits,
        accept,
        finals: Vec::new(),
    };
    g.walk();
    // The final tests, each once.
    let mut k = 0;
    while k < g.finals.len() {
        let (known, l) = g.finals[k];
        g.asm.mark(l);
        let h = f.fold(atoms, known);
        g.emit(&h, accept, reject);
        k += 1;
    }
    g.asm.mark(accept);
    g.asm.op(RET | K, ACCEPT_K);
    g.asm.mark(reject);
    g.asm.op(RET | K, 0);
    let insns = g.asm.assemble();
    Ok(Program::new(insns).expect("the generated program is valid classic BPF"))
}
