//! systemd's side of a recording (`Type=notify`, `WatchdogSec=`), through
//! the `sd-notify` crate: a [`Notifier`] follows the recording's events
//! and sends READY=1 once the engine is up (the XDP program attached, the
//! first file of every queue open); WATCHDOG=1 and a STATUS= line with the
//! numbers so far at each progress tick of the recording's control loop
//! (about once a second: a loop that stalls stops feeding the watchdog, and
//! systemd restarts the service); STOPPING=1 when it stops. Without
//! `NOTIFY_SOCKET` (not started by systemd) it sends nothing.

use crate::Event;
use sd_notify::NotifyState;
use std::path::PathBuf;

/// Tells systemd how a recording goes (see the module docs).
#[derive(Debug)]
pub struct Notifier {
    dir: PathBuf,
    ready: bool,
}

impl Notifier {
    /// For a recording into `dir` (its STATUS= line names it).
    pub fn new(dir: impl Into<PathBuf>) -> Notifier {
        Notifier {
            dir: dir.into(),
            ready: false,
        }
    }

    /// Follows one event of the recording ([`crate::record()`]'s callback).
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::Started(info) => {
                let what = format!(
                    "recording {} queues {:?} -> {}",
                    info.ifname,
                    info.queues,
                    self.dir.display()
                );
                if std::mem::replace(&mut self.ready, true) {
                    // The interface came back: up again, not a new start.
                    notify(&[NotifyState::Status(&format!("{what} (again)"))]);
                } else {
                    notify(&[NotifyState::Ready, NotifyState::Status(&what)]);
                }
            }
            Event::Progress { snapshot, .. } => {
                let link = snapshot.link.as_ref().map(|w| format!("; {w}"));
                let status = format!(
                    "{} frames seen, {} written, {} dropped by the kernel{}",
                    snapshot.seen(),
                    snapshot.written(),
                    snapshot.kernel_drops(),
                    link.unwrap_or_default()
                );
                notify(&[NotifyState::Watchdog, NotifyState::Status(&status)]);
            }
            Event::Stopping(why) => notify(&[
                NotifyState::Stopping,
                NotifyState::Status(&format!("stopping: {why}")),
            ]),
            _ => {}
        }
    }
}

/// Sends `states`; a failure (no systemd listening any more) is not the
/// recording's concern.
fn notify(states: &[NotifyState]) {
    let _ = sd_notify::notify(states);
}
