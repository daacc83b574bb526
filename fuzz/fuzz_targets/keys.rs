//! `cargo +nightly fuzz run keys`: `wiretape_storage::fuzz::keys` on every
//! input, its allocations bounded (see `wiretape_fuzz::bounded`).
#![no_main]

#[global_allocator]
static A: wiretape_fuzz::Counting = wiretape_fuzz::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    wiretape_fuzz::bounded(data, wiretape_storage::fuzz::keys);
});
