//! Compiles `bpf/steer.bpf.c` with clang (through libbpf-cargo) into an object
//! that `src/bpf.rs` embeds with `include_bytes!` and loads at run time.
use std::{env, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let src = manifest.join("../../bpf/steer.bpf.c");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("steer.bpf.o");
    // libbpf-sys vendors libbpf's headers (bpf_helpers.h); asm/types.h lives
    // in the multiarch include directory on Debian.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap();
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    // -mcpu=v3: the cutoff's atomic fetch-and-add returns the old count.
    libbpf_cargo::SkeletonBuilder::new()
        .source(&src)
        .obj(&out)
        .clang_args([multiarch.as_str(), "-O2", "-g", "-Wall", "-mcpu=v3"])
        .build()
        .expect("compiling bpf/steer.bpf.c failed: is clang installed (apt-get install clang libelf-dev zlib1g-dev)?");
    println!("cargo:rerun-if-changed={}", src.display());
}
