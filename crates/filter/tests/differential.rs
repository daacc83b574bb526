//! Differential test: for many filter expressions and thousands of generated
//! frames, three implementations must agree on every frame:
//!
//! 1. libpcap's own interpreter (`pcap_offline_filter`),
//! 2. our classic BPF evaluator ([`Program::run`]),
//! 3. our eBPF translation, loaded into the kernel as an XDP program and run
//!    with `BPF_PROG_TEST_RUN` (as root only; skipped with a note otherwise):
//!    both the function body returning the classic value (compared exactly)
//!    and the complete XDP program (XDP_PASS / XDP_DROP).
//!
//! Nothing here knows the expected verdicts: libpcap is the reference.
//! XDP only knows the captured bytes (`len` = data_end - data), so the kernel
//! answers are compared with libpcap run with wire length = captured length;
//! frames under 14 bytes (BPF_PROG_TEST_RUN refuses them) are compared
//! between libpcap and the evaluator only.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

mod common;

use common::frames::{frame, Frame, Rng};
use common::{libpcap_run, EXPRESSIONS};
use wiretape_filter::ebpf::{self, eop, EbpfInsn};
use wiretape_filter::kernel::{is_root, XdpProgram};
use wiretape_filter::{compile, Program, LINKTYPE_ETHERNET};

const FRAMES: usize = 6000;
const SNAPLEN: u32 = 262_144;

/// An XDP program that returns the classic return value itself: the
/// prologue, then the function body from `ebpf::translate`.
fn raw_xdp(insns: &[wiretape_filter::Insn]) -> Vec<EbpfInsn> {
    let mut v = vec![
        EbpfInsn::new(eop::LDX | eop::MEM | eop::W, 2, 1, 4, 0),
        EbpfInsn::new(eop::LDX | eop::MEM | eop::W, 1, 1, 0, 0),
    ];
    v.extend(ebpf::translate(insns).expect("translate"));
    v
}

struct Kernel {
    raw: XdpProgram,
    xdp: XdpProgram,
}

fn load(expr: &str, prog: &Program) -> Kernel {
    let insns = prog.insns();
    let load = |what: &str, e: Vec<EbpfInsn>| {
        XdpProgram::load(&e).unwrap_or_else(|err| {
            panic!(
                "expression '{expr}': the verifier refused the {what} ({} eBPF instructions): {err}\n\
                 classic program:\n{}",
                e.len(),
                prog.dump()
            )
        })
    };
    Kernel {
        raw: load("translated body", raw_xdp(insns)),
        xdp: load(
            "XDP program",
            ebpf::xdp_program(insns).unwrap_or_else(|e| panic!("'{expr}': {e}")),
        ),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn libpcap_evaluator_and_kernel_agree() {
    assert!(EXPRESSIONS.len() >= 30);
    let root = is_root();
    if !root {
        eprintln!(
            "note: not root: the eBPF translation is NOT run in the kernel \
             (BPF_PROG_LOAD/BPF_PROG_TEST_RUN need root); comparing libpcap and the evaluator only"
        );
    }
    let mut rng = Rng::new(0x5eed_f11e_0000_0001);
    let frames: Vec<Frame> = (0..FRAMES).map(|_| frame(&mut rng)).collect();
    let short = frames.iter().filter(|f| f.data.len() < 14).count();
    let truncated = frames
        .iter()
        .filter(|f| f.data.len() as u32 != f.wire_len)
        .count();

    let mut failures: Vec<String> = Vec::new();
    let mut compared = 0u64;
    let mut kernel_runs = 0u64;
    let mut never_both: Vec<&str> = Vec::new();
    for &expr in EXPRESSIONS {
        let prog = compile(expr, LINKTYPE_ETHERNET, SNAPLEN).unwrap_or_else(|e| panic!("{e}"));
        let insns = prog.insns();
        let kernel = root.then(|| load(expr, &prog));
        let (mut accepted, mut rejected) = (0, 0);
        for (i, f) in frames.iter().enumerate() {
            let caplen = f.data.len() as u32;
            let want = libpcap_run(insns, &f.data, f.wire_len);
            let ours = prog.run(&f.data, f.wire_len);
            compared += 1;
            if want != 0 {
                accepted += 1;
            } else {
                rejected += 1;
            }
            let mut bad = Vec::new();
            if ours != want {
                bad.push(format!("evaluator {ours} != libpcap {want}"));
            }
            if let (Some(k), true) = (&kernel, caplen >= 14) {
                // XDP sees only the captured bytes.
                let want = if caplen == f.wire_len {
                    want
                } else {
                    libpcap_run(insns, &f.data, caplen)
                };
                let raw = k.raw.test_run(&f.data).expect("BPF_PROG_TEST_RUN");
                let verdict = k.xdp.test_run(&f.data).expect("BPF_PROG_TEST_RUN");
                kernel_runs += 2;
                if raw != want {
                    bad.push(format!("eBPF body {raw} != libpcap {want} (len = caplen)"));
                }
                let want_verdict = if want != 0 {
                    eop::XDP_PASS
                } else {
                    eop::XDP_DROP
                };
                if verdict != want_verdict as u32 {
                    bad.push(format!("XDP verdict {verdict} != {want_verdict}"));
                }
            }
            if !bad.is_empty() && failures.len() < 20 {
                failures.push(format!(
                    "'{expr}' frame #{i} (caplen {caplen}, wire {}): {}\n  {}",
                    f.wire_len,
                    bad.join("; "),
                    hex(&f.data)
                ));
            }
        }
        eprintln!("{accepted:5} accepted {rejected:5} rejected  '{expr}'");
        if !expr.is_empty() && (accepted == 0 || rejected == 0) {
            never_both.push(expr);
        }
    }
    eprintln!(
        "{} expressions x {FRAMES} frames ({short} shorter than 14 bytes, {truncated} truncated): \
         {compared} libpcap/evaluator comparisons, {kernel_runs} BPF_PROG_TEST_RUN runs",
        EXPRESSIONS.len()
    );
    assert!(
        failures.is_empty(),
        "disagreements (first {}):\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The frames must exercise every expression both ways, or the
    // comparison proves little.
    assert!(
        never_both.is_empty(),
        "expressions the frames never both accept and reject: {never_both:?}"
    );
    if root {
        assert!(kernel_runs > 0);
    }
}

/// A random valid classic program: forward jumps only, every opcode class,
/// offsets around and beyond the frame sizes, X from the packet (so
/// division by zero and shifts >= 32 happen). Scratch memory is written
/// first (libpcap 1.10 does not zero it; we and the kernel code do).
fn random_program(rng: &mut Rng) -> Vec<wiretape_filter::Insn> {
    use wiretape_filter::{op::*, Insn};
    let n = 16 + 2 + rng.below(40) as usize;
    let mut p: Vec<Insn> = (0..16).map(|i| Insn::stmt(ST, i)).collect();
    let off = |rng: &mut Rng| -> u32 {
        match rng.below(10) {
            0 => rng.pick(&[1500, 65534, 65535, 70000, 0x7fff_ffff]),
            _ => rng.below(80) as u32,
        }
    };
    while p.len() < n - 1 {
        let pc = p.len();
        let room = (n - 2 - pc) as u64; // farthest jump still lands on an insn
        let size = rng.pick(&[W, H, B]);
        let insn = match rng.below(16) {
            0 | 1 => Insn::stmt(LD | size | ABS, off(rng)),
            2 | 3 => Insn::stmt(LD | size | IND, off(rng)),
            4 => Insn::stmt(LDX | B | MSH, off(rng)),
            5 => Insn::stmt(rng.pick(&[LD | W | LEN, LDX | W | LEN]), 0),
            6 => {
                let k = rng.pick(&[0, 1, 3, 31, 32, 0x8000_0000, u32::MAX]);
                Insn::stmt(rng.pick(&[LD | IMM, LDX | IMM]), k)
            }
            7 => Insn::stmt(
                rng.pick(&[LD | MEM, LDX | MEM, ST, STX]),
                rng.below(16) as u32,
            ),
            8..=10 => {
                let aop = rng.pick(&[ADD, SUB, MUL, DIV, MOD, AND, OR, XOR, LSH, RSH, NEG]);
                if aop == NEG {
                    Insn::stmt(ALU | NEG, 0)
                } else if rng.chance(50) {
                    Insn::stmt(ALU | aop | X, 0)
                } else {
                    let k = match aop {
                        LSH | RSH => rng.below(32) as u32,
                        DIV | MOD => 1 + rng.below(20) as u32,
                        _ => rng.pick(&[1, 2, 0xff, 0x8000_0000, 0xffff_fff0]),
                    };
                    Insn::stmt(ALU | aop | K, k)
                }
            }
            11 => Insn::stmt(rng.pick(&[MISC | TAX, MISC | TXA]), 0),
            12 => Insn::stmt(JMP | JA, rng.below(room + 1) as u32),
            13 => Insn::stmt(RET | rng.pick(&[A, K]), rng.below(3) as u32),
            _ => {
                let jop = rng.pick(&[JEQ, JGT, JGE, JSET]);
                let src = rng.pick(&[K, X]);
                let k = rng.pick(&[0, 1, 0x45, 0x800, 0x7fff_ffff, 0x8000_0000, u32::MAX]);
                let jt = rng.below(room.min(255) + 1) as u8;
                let jf = rng.below(room.min(255) + 1) as u8;
                Insn::jump(JMP | jop | src, k, jt, jf)
            }
        };
        p.push(insn);
    }
    p.push(Insn::stmt(RET | rng.pick(&[A, K]), 1));
    debug_assert_eq!(p.len(), n);
    p
}

#[test]
fn random_programs_agree_with_libpcap_and_the_kernel() {
    const PROGRAMS: usize = 400;
    const PER_PROGRAM: usize = 150;
    let root = is_root();
    if !root {
        eprintln!(
            "note: not root: random programs compared between libpcap and the evaluator only"
        );
    }
    let mut rng = Rng::new(0xc1a5_51c0_0000_0002);
    let frames: Vec<Frame> = (0..PER_PROGRAM * 4).map(|_| frame(&mut rng)).collect();
    let (mut compared, mut kernel_runs, mut nonzero) = (0u64, 0u64, 0u64);
    for n in 0..PROGRAMS {
        let insns = random_program(&mut rng);
        let prog = Program::new(insns.clone()).unwrap_or_else(|e| panic!("program {n}: {e}"));
        let raw = root.then(|| {
            XdpProgram::load(&raw_xdp(&insns))
                .unwrap_or_else(|e| panic!("random program {n} refused: {e}\n{}", prog.dump()))
        });
        let start = rng.below((frames.len() - PER_PROGRAM) as u64) as usize;
        for f in &frames[start..start + PER_PROGRAM] {
            let want = libpcap_run(&insns, &f.data, f.wire_len);
            let ours = prog.run(&f.data, f.wire_len);
            assert_eq!(
                ours,
                want,
                "random program {n}, frame {} (wire {}):\n{}",
                hex(&f.data),
                f.wire_len,
                prog.dump()
            );
            compared += 1;
            nonzero += u64::from(want != 0);
            if let (Some(raw), true) = (&raw, f.data.len() >= 14) {
                let want = libpcap_run(&insns, &f.data, f.data.len() as u32);
                let got = raw.test_run(&f.data).expect("BPF_PROG_TEST_RUN");
                assert_eq!(
                    got,
                    want,
                    "random program {n} in the kernel, frame {}:\n{}",
                    hex(&f.data),
                    prog.dump()
                );
                kernel_runs += 1;
            }
        }
    }
    eprintln!(
        "{PROGRAMS} random programs: {compared} libpcap/evaluator comparisons \
         ({nonzero} nonzero), {kernel_runs} BPF_PROG_TEST_RUN runs"
    );
    assert!(
        nonzero > compared / 20,
        "the random programs almost never accept"
    );
}
