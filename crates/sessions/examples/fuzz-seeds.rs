//! Writes the seed corpus of the fuzz target `sessions`
//! (`wiretape_sessions::fuzz::seeds`) into the directory given:
//! `cargo run --release -p wiretape-sessions --example fuzz-seeds -- fuzz/corpus/sessions`
//! (`fuzz/seed.sh` does).
#![allow(unused_crate_dependencies)] // the library's own dependencies, seen from an example

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: fuzz-seeds DIR");
        std::process::exit(2);
    };
    std::fs::create_dir_all(&dir)?;
    let seeds = wiretape_sessions::fuzz::seeds();
    for (name, bytes) in &seeds {
        std::fs::write(dir.join(name), bytes)?;
    }
    println!("{} session seeds in {}", seeds.len(), dir.display());
    Ok(())
}
