//! The API's answer bodies: whole (JSON, a Parquet table) or streamed from
//! a query's blocking thread through a bounded channel; and the flag that
//! tells that thread its client is gone.

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// An error that ends a streamed answer abnormally.
pub(crate) type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// Sets its flag when dropped: held by whatever lives as long as the
/// client wants the answer (the body, the handler's future).
pub(crate) struct StopOnDrop(Arc<AtomicBool>);

impl StopOnDrop {
    pub(crate) fn new() -> Self {
        StopOnDrop(Arc::new(AtomicBool::new(false)))
    }

    pub(crate) fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// An answer's body.
pub(crate) enum ApiBody {
    /// All of it at once (taken on the first poll).
    Full(Option<Bytes>),
    /// Chunks (and trailers, or an error) as the query produces them.
    Stream {
        rx: mpsc::Receiver<Result<Frame<Bytes>, BodyError>>,
        _stop: StopOnDrop,
        done: bool,
    },
}

impl ApiBody {
    pub(crate) fn full(b: impl Into<Bytes>) -> Self {
        ApiBody::Full(Some(b.into()))
    }

    pub(crate) fn stream(
        rx: mpsc::Receiver<Result<Frame<Bytes>, BodyError>>,
        stop: StopOnDrop,
    ) -> Self {
        ApiBody::Stream {
            rx,
            _stop: stop,
            done: false,
        }
    }
}

impl Body for ApiBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            ApiBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ApiBody::Stream { rx, done, .. } => {
                if *done {
                    return Poll::Ready(None);
                }
                let r = rx.poll_recv(cx);
                if let Poll::Ready(Some(Err(_)) | None) = &r {
                    *done = true;
                }
                r
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ApiBody::Full(b) => b.is_none(),
            ApiBody::Stream { done, .. } => *done,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ApiBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ApiBody::Full(None) => SizeHint::with_exact(0),
            ApiBody::Stream { .. } => SizeHint::default(),
        }
    }
}

/// The writer a query's capture goes through: each write (a chunk of the
/// output's buffer) is sent to the body; when the body is gone (the client
/// left), the write fails and the stop flag is set.
pub(crate) struct ChannelWriter {
    tx: mpsc::Sender<Result<Frame<Bytes>, BodyError>>,
    stop: Arc<AtomicBool>,
}

impl ChannelWriter {
    pub(crate) fn new(
        tx: mpsc::Sender<Result<Frame<Bytes>, BodyError>>,
        stop: Arc<AtomicBool>,
    ) -> Self {
        ChannelWriter { tx, stop }
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self
            .tx
            .blocking_send(Ok(Frame::data(Bytes::copy_from_slice(buf))))
            .is_err()
        {
            self.stop.store(true, Ordering::Relaxed);
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the client went away",
            ));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
