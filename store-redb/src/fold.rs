//! The fold thread: writes a full journal region's generation into the
//! tables in one durable transaction while the writer goes on journaling
//! in the other region (`journal.rs`), so a fold of a few thousand appends
//! does not hold back the appends that arrive meanwhile.
//!
//! One fold at a time: the writer waits for a fold before it starts the
//! next and before any redb commit of its own, so folds and commits reach
//! the tables in the order their writes were made (a truncate never lands
//! before the appends it cuts). Once a fold has committed, the thread
//! records it in the stats and runs its appends' `applied` callbacks (the
//! groups' tails let go of the entries); then it answers the writer. A
//! fold that fails is published on the store's failure watch at once, not
//! when the writer next waits for it: the writer may sit idle (publishers
//! held back by a full disk's alarm) while the process should fail-stop.
//!
//! Owns the thread and its channel; knows nothing of the journal's bytes.

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::apply::fold_generation;
use crate::compact::SharedDb;
use crate::error::Error;
use crate::stats::BatchStats;
use crate::store::{publish_failure, FailureWatch};
use crate::writer::{Applied, WriteOp};

struct FoldJob {
    generation: u64,
    ops: Vec<WriteOp>,
    applied: Vec<Applied>,
    done: SyncSender<Result<(), Arc<Error>>>,
}

/// The writer's handle on the fold thread.
pub(crate) struct Folder {
    jobs: Option<Sender<FoldJob>>,
    thread: Option<JoinHandle<()>>,
    /// The answer of the fold in flight, if one is.
    in_flight: Option<Receiver<Result<(), Arc<Error>>>>,
}

impl Folder {
    /// Starts the fold thread of a store.
    pub(crate) fn spawn(
        db: SharedDb,
        stats: Arc<BatchStats>,
        quick_repair: bool,
        failure: FailureWatch,
    ) -> Result<Folder, Error> {
        let (jobs, receiver) = channel::<FoldJob>();
        let thread = std::thread::Builder::new()
            .name("store-redb-fold".into())
            .spawn(move || {
                for job in receiver {
                    let started = Instant::now();
                    let result = {
                        let db = db.read().unwrap_or_else(PoisonError::into_inner);
                        fold_generation(&db, &job.ops, job.generation, quick_repair)
                    };
                    let result = result.map_err(|e| {
                        let e = Arc::new(e);
                        tracing::error!(error = %e, "store-redb journal fold failed; refusing further writes");
                        publish_failure(&failure, &e);
                        e
                    });
                    if let Ok(tally) = &result {
                        stats.record_fold();
                        for applied in job.applied {
                            applied();
                        }
                        tracing::debug!(
                            generation = job.generation,
                            appends = job.ops.len(),
                            rows = tally.records,
                            took_us = started.elapsed().as_micros() as u64,
                            "store-redb: folded a journal region"
                        );
                    }
                    // The writer may be gone (closing): nothing to tell.
                    let _ = job.done.send(result.map(|_| ()));
                }
            })
            .map_err(Error::WriterSpawn)?;
        Ok(Folder {
            jobs: Some(jobs),
            thread: Some(thread),
            in_flight: None,
        })
    }

    /// Hands generation `generation`'s appends to the thread. The caller
    /// has waited for the fold before it ([`Folder::wait`]).
    pub(crate) fn start(
        &mut self,
        generation: u64,
        ops: Vec<WriteOp>,
        applied: Vec<Applied>,
    ) -> Result<(), Error> {
        debug_assert!(self.in_flight.is_none(), "one fold at a time");
        let (done, answer) = sync_channel(1);
        let job = FoldJob {
            generation,
            ops,
            applied,
            done,
        };
        let jobs = self.jobs.as_ref().ok_or(Error::WriterStopped)?;
        jobs.send(job).map_err(|_| Error::WriterStopped)?;
        self.in_flight = Some(answer);
        Ok(())
    }

    /// Waits for the fold in flight, if any, and returns its result.
    pub(crate) fn wait(&mut self) -> Result<(), Arc<Error>> {
        match self.in_flight.take() {
            // A thread that died without answering dropped the sender.
            Some(answer) => answer.recv().map_err(|_| Arc::new(Error::WriterStopped))?,
            None => Ok(()),
        }
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("store-redb fold thread panicked");
            }
        }
    }
}
