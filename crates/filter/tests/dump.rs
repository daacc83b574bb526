//! Our disassembly against libpcap's: `Program::dump` must print exactly
//! what `tcpdump -d` prints for the same expression, and `Insn::image`
//! exactly what libpcap's `bpf_image` gives for every opcode.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

mod common;

use common::{libpcap_image, EXPRESSIONS};
use std::process::Command;
use wiretape_filter::{compile, op::*, Insn, LINKTYPE_ETHERNET};

#[test]
fn dump_matches_tcpdump_d() {
    let mut checked = 0;
    for &expr in EXPRESSIONS {
        let prog = compile(expr, LINKTYPE_ETHERNET, 262_144).unwrap();
        let out = Command::new("tcpdump")
            .args(["-d", "-y", "EN10MB", "-s", "262144", "--", expr])
            .output()
            .expect("running tcpdump: install it (scripts/setup.sh, apt-get install tcpdump)");
        assert!(out.status.success(), "tcpdump -d '{expr}' failed: {out:?}");
        assert_eq!(
            prog.dump(),
            String::from_utf8_lossy(&out.stdout),
            "dump of '{expr}' differs from tcpdump -d"
        );
        checked += 1;
    }
    eprintln!("{checked} expressions: dump() == tcpdump -d");
}

#[test]
fn image_matches_bpf_image_for_every_opcode() {
    let ks = [0u32, 1, 14, 0x7fff_ffff, 0x8000_0000, 0xffff_fff0, u32::MAX];
    let mut codes: Vec<u16> = vec![
        LD | W | ABS,
        LD | H | ABS,
        LD | B | ABS,
        LD | W | IND,
        LD | H | IND,
        LD | B | IND,
        LD | W | LEN,
        LD | IMM,
        LD | MEM,
        LDX | IMM,
        LDX | MEM,
        LDX | W | LEN,
        LDX | B | MSH,
        ST,
        STX,
        ALU | NEG,
        JMP | JA,
        RET | K,
        RET | A,
        MISC | TAX,
        MISC | TXA,
        // not classic BPF: "unimp"
        RET | X,
        0x3f,
        0xffff,
    ];
    for aop in [ADD, SUB, MUL, DIV, MOD, AND, OR, XOR, LSH, RSH] {
        codes.push(ALU | aop | K);
        codes.push(ALU | aop | X);
    }
    for jop in [JEQ, JGT, JGE, JSET] {
        codes.push(JMP | jop | K);
        codes.push(JMP | jop | X);
    }
    let mut checked = 0;
    for &code in &codes {
        for &k in &ks {
            for pc in [0usize, 7, 1234] {
                let insn = Insn::jump(code, k, 3, 250);
                if code == LDX | W | LEN {
                    // libpcap 1.10's bpf_image has no case for it ("unimp
                    // 0x81"; its compiler never emits it): we say what it is.
                    assert_eq!(insn.image(pc), format!("({pc:03}) ldx      #pktlen"));
                    continue;
                }
                assert_eq!(insn.image(pc), libpcap_image(&insn, pc), "{insn:?} at {pc}");
                checked += 1;
            }
        }
    }
    eprintln!("{checked} instructions: image() == bpf_image()");
}
