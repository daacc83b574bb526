//! `--busy-poll` at the socket: the AF_XDP engine sets SO_PREFER_BUSY_POLL,
//! SO_BUSY_POLL and SO_BUSY_POLL_BUDGET on every socket it opens (read back
//! with getsockopt from the real sockets; the kernel reads the budget back
//! only where it has a getsockopt for it, 6.18 has none), none of them
//! without it, and a
//! kernel refusal (here: the thread without CAP_NET_ADMIN) is an error naming
//! the option, with nothing attached.
//!
//! Root only (opens AF_XDP sockets and attaches the XDP program to the `lo`
//! of a private network namespace the test thread moves into): skipped with
//! a note otherwise. The frames themselves are proven end to end in the
//! repository's `tests/busy_poll.rs` (veth pair, `wiretape record`).
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

use wiretape_capture::{sys, AfXdp, BusyPoll, CaptureConfig, CaptureError, Engine};
use wiretape_timestamp::TsMode;

/// Moves the calling thread into a new network namespace (gone when the
/// thread ends): the test's sockets and program never meet the host's.
fn private_netns() {
    // SAFETY: unshare takes no pointers; CLONE_NEWNET moves only this thread.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(
        rc,
        0,
        "unshare(CLONE_NEWNET): {}",
        std::io::Error::last_os_error()
    );
}

fn lo_config(busy_poll: Option<BusyPoll>) -> CaptureConfig {
    let mut c = CaptureConfig::new("lo");
    c.frames = 256;
    c.zero_copy = Some(false);
    c.busy_poll = busy_poll;
    c
}

fn skip() -> bool {
    if !sys::is_root() {
        eprintln!("note: not root: the busy-poll socket test is skipped");
        return true;
    }
    false
}

#[test]
fn busy_poll_options_are_set_on_every_socket_and_only_when_asked() {
    if skip() {
        return;
    }
    private_netns();
    let bp = BusyPoll {
        usecs: 50,
        budget: 300,
    };
    let engine = AfXdp::open(&lo_config(Some(bp)), TsMode::Xdp).expect("AF_XDP on lo");
    assert_eq!(engine.info().busy_poll, Some(bp), "reported in StartInfo");
    let q = engine.info().queues[0];
    let got = engine
        .socket(q)
        .expect("the queue's socket")
        .busy_poll_options()
        .unwrap();
    assert!(got.prefer, "SO_PREFER_BUSY_POLL: {got:?}");
    assert_eq!(got.usecs, 50, "SO_BUSY_POLL");
    // The kernel has no getsockopt for SO_BUSY_POLL_BUDGET (its setsockopt
    // succeeded, or open would have failed naming it); read it where it can be.
    if let Some(b) = got.budget {
        assert_eq!(b, 300, "SO_BUSY_POLL_BUDGET");
    }
    drop(engine);

    // Without --busy-poll the sockets keep the kernel's defaults (in a
    // fresh namespace: the kernel frees the first socket's queue lazily).
    private_netns();
    let engine = AfXdp::open(&lo_config(None), TsMode::Xdp).expect("AF_XDP on lo");
    assert_eq!(engine.info().busy_poll, None);
    let got = engine.socket(q).unwrap().busy_poll_options().unwrap();
    assert!(!got.prefer, "SO_PREFER_BUSY_POLL set without --busy-poll");
    assert_eq!(got.usecs, 0, "SO_BUSY_POLL set without --busy-poll");
}

#[test]
fn a_refused_option_is_named_and_nothing_is_attached() {
    if skip() {
        return;
    }
    private_netns();
    drop_net_admin();
    let err = match AfXdp::open(
        &lo_config(Some(BusyPoll {
            usecs: 50,
            budget: 64,
        })),
        TsMode::Xdp,
    ) {
        Ok(_) => panic!("busy poll set without CAP_NET_ADMIN"),
        Err(e) => e,
    };
    match &err {
        CaptureError::BusyPoll { option, queue, .. } => {
            assert_eq!(*option, "SO_PREFER_BUSY_POLL");
            assert_eq!(*queue, 0);
        }
        e => panic!("unexpected error: {e}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("SO_PREFER_BUSY_POLL") && text.contains("CAP_NET_ADMIN"),
        "{text}"
    );
    assert!(!text.contains('\n'), "one line: {text}");
    // Nothing attached: the interface takes a program again.
    let ifindex = sys::ifindex("lo").unwrap();
    wiretape_capture::bpf::refuse_attached(ifindex, "lo").expect("no XDP program left on lo");
}

/// Clears CAP_NET_ADMIN from this thread's effective set (capabilities are
/// per thread; the test thread ends with the test).
fn drop_net_admin() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_NET_ADMIN: u32 = 12;
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget writes two Data structs (version 3) into `d`.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &mut h as *mut Header, d.as_mut_ptr()) };
    assert_eq!(rc, 0, "capget: {}", std::io::Error::last_os_error());
    d[0].effective &= !(1 << CAP_NET_ADMIN);
    // SAFETY: capset reads the header and two Data structs.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut h as *mut Header, d.as_ptr()) };
    assert_eq!(rc, 0, "capset: {}", std::io::Error::last_os_error());
}
