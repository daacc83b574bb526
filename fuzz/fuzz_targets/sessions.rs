//! `cargo +nightly fuzz run sessions`: the session table's parsers
//! (`wiretape_sessions::fuzz::parsers`: DNS, TLS records and ClientHello,
//! JA4, HTTP/1.x, QUIC Initial, name escaping) and the tracker over the
//! input as frames (`wiretape_sessions::fuzz::tracker`), their
//! allocations bounded (see `wiretape_fuzz::bounded`).
#![no_main]

#[global_allocator]
static A: wiretape_fuzz::Counting = wiretape_fuzz::Counting;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    wiretape_fuzz::bounded(data, wiretape_sessions::fuzz::parsers);
    wiretape_fuzz::bounded(data, wiretape_sessions::fuzz::tracker);
});
