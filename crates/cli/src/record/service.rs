//! systemd's side of a recording (`Type=notify`, `WatchdogSec=`), through
//! the `sd-notify` crate: READY=1 once the XDP program is attached and the
//! first file of every queue is open; WATCHDOG=1 and a STATUS= line with
//! the numbers so far from each progress tick of the recording's control
//! loop (once a second: a loop that stalls stops feeding the watchdog, and
//! systemd restarts the service); STOPPING=1 when it stops. Without
//! `NOTIFY_SOCKET` (not started by systemd) every call does nothing.

use sd_notify::NotifyState;

/// Attached, files open: the service is up (`status` for `systemctl status`).
pub(crate) fn ready(status: &str) {
    let _ = sd_notify::notify(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// Still alive (feeds the watchdog), with the numbers so far.
pub(crate) fn alive(status: &str) {
    let _ = sd_notify::notify(&[NotifyState::Watchdog, NotifyState::Status(status)]);
}

/// A status line, without feeding the watchdog.
pub(crate) fn status(status: &str) {
    let _ = sd_notify::notify(&[NotifyState::Status(status)]);
}

/// Stopping cleanly (files are being finished).
pub(crate) fn stopping(why: &str) {
    let _ = sd_notify::notify(&[
        NotifyState::Stopping,
        NotifyState::Status(&format!("stopping: {why}")),
    ]);
}
