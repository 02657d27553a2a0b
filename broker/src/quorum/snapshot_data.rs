//! [`SnapshotData`]: the bytes streamed to a follower in chunks
//! (`raft::snapshot_stream`), as a file. On the sending side it is built lazily, on the first read or
//! seek, by a blocking task (openraft asks for "the current snapshot" at
//! start-up too, where nothing must be built); on the receiving side it is
//! the staging file the chunks are written into.
//!
//! It must not know what the bytes mean (`snapshot_transfer` does).

use std::future::Future;
use std::io::{self, SeekFrom};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};
use tokio::task::JoinHandle;

type Build = Box<dyn FnOnce() -> io::Result<std::fs::File> + Send>;

enum State {
    Unbuilt(Option<Build>),
    Building(JoinHandle<io::Result<std::fs::File>>),
    Ready(tokio::fs::File),
    Failed(io::ErrorKind, String),
}

/// A quorum queue snapshot's bytes, as a (possibly not yet built) file.
pub struct SnapshotData {
    state: State,
    /// A seek asked for before the file existed.
    pending_seek: Option<SeekFrom>,
}

impl std::fmt::Debug for SnapshotData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::Unbuilt(_) => "unbuilt",
            State::Building(_) => "building",
            State::Ready(_) => "ready",
            State::Failed(..) => "failed",
        };
        f.debug_struct("SnapshotData")
            .field("state", &state)
            .finish()
    }
}

/// The receiving side's staging file, filled chunk by chunk
/// (`raft::snapshot_stream`), then installed as [`SnapshotData`].
pub(crate) struct Staging(pub(crate) std::fs::File);

impl crate::raft::SnapshotSink for Staging {
    type Data = SnapshotData;

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        std::io::Write::write_all(&mut self.0, bytes)
    }

    fn finish(self) -> io::Result<SnapshotData> {
        Ok(SnapshotData::file(self.0))
    }
}

impl SnapshotData {
    /// Data that `build` writes into a file (positioned at its start) when
    /// it is first read.
    pub(crate) fn lazy(
        build: impl FnOnce() -> io::Result<std::fs::File> + Send + 'static,
    ) -> SnapshotData {
        SnapshotData {
            state: State::Unbuilt(Some(Box::new(build))),
            pending_seek: None,
        }
    }

    /// Data in an open file (the receiving side's staging file).
    pub(crate) fn file(file: std::fs::File) -> SnapshotData {
        SnapshotData {
            state: State::Ready(tokio::fs::File::from_std(file)),
            pending_seek: None,
        }
    }

    /// The file, built if it was not yet, positioned at its start.
    pub(crate) async fn into_file(mut self) -> io::Result<std::fs::File> {
        std::future::poll_fn(|cx| self.poll_built(cx)).await?;
        match self.state {
            State::Ready(file) => {
                let mut file = file.into_std().await;
                std::io::Seek::seek(&mut file, SeekFrom::Start(0))?;
                Ok(file)
            }
            _ => Err(io::Error::other("snapshot data not built")),
        }
    }

    /// Drive the state to `Ready` (or `Failed`).
    fn poll_built(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match &mut self.state {
                State::Ready(_) => return Poll::Ready(Ok(())),
                State::Failed(kind, message) => {
                    return Poll::Ready(Err(io::Error::new(*kind, message.clone())))
                }
                State::Unbuilt(build) => match build.take() {
                    Some(build) => {
                        self.state = State::Building(tokio::task::spawn_blocking(build));
                    }
                    None => {
                        self.state =
                            State::Failed(io::ErrorKind::Other, "snapshot build lost".into());
                    }
                },
                State::Building(handle) => {
                    let result = ready!(Pin::new(handle).poll(cx));
                    self.state = match result {
                        Ok(Ok(file)) => State::Ready(tokio::fs::File::from_std(file)),
                        Ok(Err(e)) => State::Failed(e.kind(), e.to_string()),
                        Err(e) => State::Failed(io::ErrorKind::Other, e.to_string()),
                    };
                }
            }
        }
    }

    fn poll_file(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Pin<&mut tokio::fs::File>>> {
        ready!(self.poll_built(cx))?;
        match &mut self.state {
            State::Ready(file) => Poll::Ready(Ok(Pin::new(file))),
            _ => Poll::Ready(Err(io::Error::other("snapshot data not built"))),
        }
    }
}

impl AsyncRead for SnapshotData {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let file = ready!(this.poll_file(cx))?;
        file.poll_read(cx, buf)
    }
}

impl AsyncWrite for SnapshotData {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let file = ready!(this.poll_file(cx))?;
        file.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let file = ready!(this.poll_file(cx))?;
        file.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let file = ready!(this.poll_file(cx))?;
        file.poll_shutdown(cx)
    }
}

impl AsyncSeek for SnapshotData {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        let this = self.get_mut();
        match &mut this.state {
            State::Ready(file) => Pin::new(file).start_seek(position),
            _ => {
                this.pending_seek = Some(position);
                Ok(())
            }
        }
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        let this = self.get_mut();
        let pending = this.pending_seek.take();
        let mut file = match this.poll_file(cx) {
            Poll::Ready(Ok(file)) => file,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {
                this.pending_seek = pending;
                return Poll::Pending;
            }
        };
        if let Some(position) = pending {
            file.as_mut().start_seek(position)?;
        }
        file.poll_complete(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

    #[tokio::test]
    async fn builds_on_first_seek_and_reads_like_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let build_path = path.clone();
        let mut data = SnapshotData::lazy(move || {
            std::fs::write(&build_path, b"0123456789")?;
            std::fs::File::open(&build_path)
        });
        assert!(format!("{data:?}").contains("unbuilt"));
        data.seek(SeekFrom::Start(4)).await.unwrap();
        let mut out = [0u8; 3];
        data.read_exact(&mut out).await.unwrap();
        assert_eq!(&out, b"456");
        let file = data.into_file().await.unwrap();
        assert_eq!(std::io::read_to_string(file).unwrap(), "0123456789");
    }

    #[tokio::test]
    async fn a_failed_build_is_an_error_for_every_read() {
        let mut data = SnapshotData::lazy(|| Err(io::Error::other("no space")));
        let mut out = [0u8; 1];
        assert!(data.read(&mut out).await.is_err());
        assert!(data.read(&mut out).await.is_err());
    }

    #[tokio::test]
    async fn the_receiving_side_writes_at_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("incoming"))
            .unwrap();
        let mut data = SnapshotData::file(file);
        data.seek(SeekFrom::Start(3)).await.unwrap();
        data.write_all(b"def").await.unwrap();
        data.seek(SeekFrom::Start(0)).await.unwrap();
        data.write_all(b"abc").await.unwrap();
        data.flush().await.unwrap();
        let file = data.into_file().await.unwrap();
        assert_eq!(std::io::read_to_string(file).unwrap(), "abcdef");
    }
}
