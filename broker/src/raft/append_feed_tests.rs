//! Tests of [`AppendFeeds`] against a fake group: it answers each request
//! with its `prev_log_id` (a success up to there) after a short pause,
//! except a request whose prev index is [`CONFLICT_AT`], which conflicts
//! (and ends openraft's stream, as the real one does).

use std::time::Duration;

use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::vote::RaftLeaderId;
use openraft::{LogId, Vote};

use super::*;

openraft::declare_raft_types!(
    pub T:
        D = u64,
        R = (),
        NodeId = u64,
        Node = openraft::BasicNode,
);

const CONFLICT_AT: u64 = 13;
const GROUP: GroupId = 42;
const LEADER: NodeId = 1;

fn log_id(index: u64) -> openraft::alias::LogIdOf<T> {
    LogId::new(CommittedLeaderId::new(2, LEADER), index)
}

/// A request that carries no entries and `prev_log_id` = `index`.
fn request(index: u64) -> Bytes {
    let request = AppendEntriesRequest::<T> {
        vote: Vote::new_committed(2, LEADER),
        prev_log_id: Some(log_id(index)),
        entries: Vec::new(),
        leader_commit: None,
    };
    Bytes::from(postcard::to_allocvec(&request).expect("encodes"))
}

/// The fake group: what openraft's `stream_append` would answer.
fn opener() -> FeedOpener<T> {
    Box::new(|input: FeedInput<T>| {
        Box::pin(async move {
            let answers = input
                .then(|request| async move {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let prev = request.prev_log_id;
                    match prev.as_ref().map(|l| l.index) {
                        Some(CONFLICT_AT) => {
                            Ok(Err(StreamAppendError::Conflict(log_id(CONFLICT_AT))))
                        }
                        _ => Ok(Ok(prev)),
                    }
                })
                .boxed();
            Ok(FeedTarget {
                answers,
                on_taken: Box::new(|| {}),
            })
        })
    })
}

fn header(stream: u64, seq: u64) -> StreamHeader {
    StreamHeader { stream, seq }
}

async fn answer(rx: oneshot::Receiver<StreamAnswer<T>>) -> StreamAnswer<T> {
    tokio::time::timeout(Duration::from_secs(10), rx)
        .await
        .expect("answered in time")
        .expect("answered")
}

#[tokio::test]
async fn requests_are_answered_in_order_with_several_outstanding() {
    let feeds = AppendFeeds::<T>::new(Duration::from_secs(30));
    let waits: Vec<_> = (0..10)
        .map(|i| {
            feeds
                .take(GROUP, LEADER, header(5, i), request(i + 1), opener)
                .expect("taken")
        })
        .collect();
    for (i, rx) in waits.into_iter().enumerate() {
        assert_eq!(answer(rx).await, Ok(Ok(Some(log_id(i as u64 + 1)))));
    }
    let stats = feeds.stats();
    assert_eq!((stats.appends, stats.tasks, stats.broken), (10, 1, 0));
    assert!(stats.max_outstanding >= 2, "{stats:?}");
}

#[tokio::test]
async fn a_gap_breaks_the_stream_until_a_new_one_starts() {
    let feeds = AppendFeeds::<T>::new(Duration::from_secs(30));
    let first = feeds
        .take(GROUP, LEADER, header(5, 0), request(1), opener)
        .expect("taken");
    let gap = feeds.take(GROUP, LEADER, header(5, 2), request(3), opener);
    assert!(gap.is_err(), "request 2 where 1 was due is refused");
    let after = feeds.take(GROUP, LEADER, header(5, 1), request(2), opener);
    assert!(after.is_err(), "a broken stream takes nothing more");
    let other = feeds.take(GROUP, 2, header(5, 1), request(2), opener);
    assert!(
        other.is_err(),
        "another leader's request is not of this stream"
    );
    // What was taken before the gap is still answered.
    assert_eq!(answer(first).await, Ok(Ok(Some(log_id(1)))));
    // A new stream (sequence 0) replaces the broken one.
    let fresh = feeds
        .take(GROUP, LEADER, header(6, 0), request(2), opener)
        .expect("a new stream is taken");
    assert_eq!(answer(fresh).await, Ok(Ok(Some(log_id(2)))));
    assert_eq!(feeds.stats().broken, 1);
}

#[tokio::test]
async fn a_conflict_ends_the_stream_and_refuses_what_was_queued_after_it() {
    let feeds = AppendFeeds::<T>::new(Duration::from_secs(30));
    let waits: Vec<_> = (0..4)
        .map(|i| {
            feeds
                .take(
                    GROUP,
                    LEADER,
                    header(9, i),
                    request(CONFLICT_AT - 1 + i),
                    opener,
                )
                .expect("taken")
        })
        .collect();
    let answers: Vec<_> = futures_util::future::join_all(waits.into_iter().map(answer)).await;
    assert_eq!(answers[0], Ok(Ok(Some(log_id(CONFLICT_AT - 1)))));
    assert_eq!(
        answers[1],
        Ok(Err(StreamAppendError::Conflict(log_id(CONFLICT_AT))))
    );
    assert!(answers[2..].iter().all(Result::is_err), "{answers:?}");
    let later = feeds.take(GROUP, LEADER, header(9, 4), request(20), opener);
    assert!(later.is_err(), "the ended stream takes nothing more");
}

#[tokio::test]
async fn an_idle_feed_ends_its_task_and_the_stream_goes_on_in_a_new_one() {
    let feeds = AppendFeeds::<T>::new(Duration::from_millis(50));
    let rx = feeds
        .take(GROUP, LEADER, header(3, 0), request(1), opener)
        .expect("taken");
    assert_eq!(answer(rx).await, Ok(Ok(Some(log_id(1)))));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while feeds.stats().running != 0 {
        assert!(tokio::time::Instant::now() < deadline, "the idle task ends");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(feeds.stats().feeds, 1, "the stream's entry stays");
    let rx = feeds
        .take(GROUP, LEADER, header(3, 1), request(2), opener)
        .expect("the next request of the stream is taken");
    assert_eq!(answer(rx).await, Ok(Ok(Some(log_id(2)))));
    assert_eq!(feeds.stats().tasks, 2);
    feeds.forget(GROUP);
    assert_eq!(feeds.stats().feeds, 0);
}

#[tokio::test]
async fn a_new_stream_replaces_the_old_one_which_finishes_what_it_took() {
    let feeds = AppendFeeds::<T>::new(Duration::from_secs(30));
    let old = feeds
        .take(GROUP, LEADER, header(1, 0), request(1), opener)
        .expect("taken");
    let new = feeds
        .take(GROUP, LEADER, header(2, 0), request(1), opener)
        .expect("taken");
    assert_eq!(answer(old).await, Ok(Ok(Some(log_id(1)))));
    assert_eq!(answer(new).await, Ok(Ok(Some(log_id(1)))));
    let stale = feeds.take(GROUP, LEADER, header(1, 1), request(2), opener);
    assert!(stale.is_err(), "the replaced stream takes nothing more");
}
