//! Links libpcap (only `pcap_open_dead`, `pcap_compile`, `pcap_geterr`,
//! `pcap_freecode` and `pcap_close` are used; the tests also use
//! `pcap_offline_filter` and `bpf_image`).
use std::path::Path;

fn main() {
    println!("cargo:rustc-link-lib=pcap");
    println!("cargo:rerun-if-changed=build.rs");
    // A friendlier hint than the linker's "cannot find -lpcap".
    let dirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/lib",
    ];
    if !dirs
        .iter()
        .any(|d| Path::new(d).join("libpcap.so").exists())
    {
        println!(
            "cargo:warning=libpcap.so not found: install libpcap-dev (apt-get install libpcap-dev)"
        );
    }
}
