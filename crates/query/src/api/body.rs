//! The API's answer bodies: whole (JSON, a Parquet table) or streamed from
//! a query's blocking thread through a bounded channel; and the flag that
//! tells that thread its client is gone.

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use wiretape_storage::{Block, BlockSink, StorageError};

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

/// The sink a query's capture goes through: each filled block becomes a
/// chunk of the body as it is (no copy: the body's bytes are the block,
/// which comes back to the sink's pool when the connection has sent it);
/// when the body is gone (the client left), the submit fails and the stop
/// flag is set.
pub(crate) struct ChannelSink {
    tx: mpsc::Sender<Result<Frame<Bytes>, BodyError>>,
    stop: Arc<AtomicBool>,
    pool: Arc<Mutex<Vec<Block>>>,
    size: usize,
    bytes: u64,
    name: PathBuf,
}

/// A block lent to the body; back to the pool when the body drops it.
struct Lent {
    block: Option<Block>,
    pool: Arc<Mutex<Vec<Block>>>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        self.block.as_ref().map_or(&[], |b| b.data())
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let (Some(mut b), Ok(mut pool)) = (self.block.take(), self.pool.lock()) {
            b.clear();
            pool.push(b);
        }
    }
}

impl ChannelSink {
    pub(crate) fn new(
        tx: mpsc::Sender<Result<Frame<Bytes>, BodyError>>,
        stop: Arc<AtomicBool>,
        size: usize,
    ) -> Self {
        ChannelSink {
            tx,
            stop,
            pool: Arc::new(Mutex::new(Vec::new())),
            size,
            bytes: 0,
            name: PathBuf::from("the client"),
        }
    }

    fn fresh(&mut self) -> Block {
        let b = self.pool.lock().ok().and_then(|mut p| p.pop());
        b.unwrap_or_else(|| Block::new(self.size))
    }
}

impl BlockSink for ChannelSink {
    fn submit(&mut self, block: Block) -> Result<Block, StorageError> {
        if block.is_empty() {
            return Ok(block);
        }
        let n = block.len() as u64;
        let lent = Lent {
            block: Some(block),
            pool: self.pool.clone(),
        };
        if self
            .tx
            .blocking_send(Ok(Frame::data(Bytes::from_owner(lent))))
            .is_err()
        {
            self.stop.store(true, Ordering::Relaxed);
            return Err(StorageError::Write {
                path: self.name.clone(),
                source: std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"),
            });
        }
        self.bytes += n;
        Ok(self.fresh())
    }

    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        self.submit(block)
    }

    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        self.submit(block).map(|_| ())
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn path(&self) -> &Path {
        &self.name
    }

    fn block_size(&self) -> usize {
        self.size
    }

    fn first_block(&mut self) -> Block {
        self.fresh()
    }
}
