//! openraft's bounded channels with each message boxed: a tokio channel
//! reserves its first block of 32 slots when it is made, and openraft
//! makes four per group (API, snapshot installs, notifications, state
//! machine commands) of messages of 160-288 bytes: ~31 KiB per group, a
//! third of an idle group's heap. Boxed, a slot is one pointer (256 bytes
//! a block); each message then costs one allocation, which a quiet A/B
//! of the commit path did not resolve from its spread (docs/benchmarks.md,
//! "third pass"). Used by every group through [`super::BoxedRuntime`].
//!
//! Must not know: what the messages are; it only carries them.

use std::future::Future;

use futures_util::FutureExt;
use openraft::rt::{
    Mpsc, MpscReceiver, MpscSender, MpscWeakSender, OptionalSend, SendError, TryRecvError,
};
use tokio::sync::mpsc;

/// The channel family: tokio's bounded mpsc of `Box<T>`.
pub struct BoxedMpsc;

/// A sending half (cloned per producer).
pub struct BoxedSender<T>(mpsc::Sender<Box<T>>);

/// The receiving half.
pub struct BoxedReceiver<T>(mpsc::Receiver<Box<T>>);

/// A sending half that does not keep the channel open.
pub struct BoxedWeakSender<T>(mpsc::WeakSender<Box<T>>);

impl<T> Clone for BoxedSender<T> {
    fn clone(&self) -> Self {
        BoxedSender(self.0.clone())
    }
}

impl<T> Clone for BoxedWeakSender<T> {
    fn clone(&self) -> Self {
        BoxedWeakSender(self.0.clone())
    }
}

impl Mpsc for BoxedMpsc {
    type Sender<T: OptionalSend> = BoxedSender<T>;
    type Receiver<T: OptionalSend> = BoxedReceiver<T>;
    type WeakSender<T: OptionalSend> = BoxedWeakSender<T>;

    fn channel<T: OptionalSend>(buffer: usize) -> (Self::Sender<T>, Self::Receiver<T>) {
        let (tx, rx) = mpsc::channel(buffer);
        (BoxedSender(tx), BoxedReceiver(rx))
    }
}

impl<T: OptionalSend> MpscSender<BoxedMpsc, T> for BoxedSender<T> {
    fn send(&self, msg: T) -> impl Future<Output = Result<(), SendError<T>>> + OptionalSend {
        self.0
            .send(Box::new(msg))
            .map(|sent| sent.map_err(|e| SendError(*e.0)))
    }

    fn downgrade(&self) -> BoxedWeakSender<T> {
        BoxedWeakSender(self.0.downgrade())
    }
}

impl<T: OptionalSend> MpscReceiver<T> for BoxedReceiver<T> {
    fn recv(&mut self) -> impl Future<Output = Option<T>> + OptionalSend {
        self.0.recv().map(|got| got.map(|boxed| *boxed))
    }

    fn try_recv(&mut self) -> Result<T, TryRecvError> {
        match self.0.try_recv() {
            Ok(boxed) => Ok(*boxed),
            Err(mpsc::error::TryRecvError::Empty) => Err(TryRecvError::Empty),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(TryRecvError::Disconnected),
        }
    }
}

impl<T: OptionalSend> MpscWeakSender<BoxedMpsc, T> for BoxedWeakSender<T> {
    fn upgrade(&self) -> Option<BoxedSender<T>> {
        self.0.upgrade().map(BoxedSender)
    }
}
