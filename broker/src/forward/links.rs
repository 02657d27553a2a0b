//! [`OriginLinks`]: the origin side's table of its forwarded links (which
//! routed queue owns each link id), and of the links it closed lately.
//!
//! A serving node audits an origin's links once a second
//! (`Request::Alive`) and drops those the origin says it no longer has. A
//! link the origin has just closed is not its own any more, but what it
//! sent on it before its `Close` (the last settlements of a client that
//! accepted and then detached or closed its connection) may still be on
//! the way: the audit's answer travels another fabric stream than those
//! sends and can overtake them. Dropping the link on that answer loses the
//! settlements, and the accepted messages come back. So a closed link
//! still counts as alive for [`CLOSE_GRACE`]: its own `Close`, which
//! follows its last sends in order, drops it at the server, and the audit
//! only has to catch a `Close` that was lost.
//!
//! It must not know what a link carries or where it goes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// How long a link this node closed is still reported alive to audits:
/// well past the time a send spends in a live fabric stream (a stream that
/// broke lost the sends anyway).
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Open links by id, with what owns each (`Q`), and the links closed
/// within [`CLOSE_GRACE`].
pub(super) struct OriginLinks<Q> {
    live: HashMap<u64, Q>,
    /// Closed links in the order they closed, with when.
    closed: VecDeque<(Instant, u64)>,
    closed_ids: HashSet<u64>,
}

impl<Q> Default for OriginLinks<Q> {
    fn default() -> Self {
        OriginLinks {
            live: HashMap::new(),
            closed: VecDeque::new(),
            closed_ids: HashSet::new(),
        }
    }
}

impl<Q> OriginLinks<Q> {
    pub(super) fn insert(&mut self, link: u64, owner: Q) {
        self.live.insert(link, owner);
    }

    /// The owner of an open link.
    pub(super) fn get(&self, link: u64) -> Option<&Q> {
        self.live.get(&link)
    }

    /// The owners of every open link.
    pub(super) fn owners(&self) -> impl Iterator<Item = &Q> {
        self.live.values()
    }

    /// `link` is closed as of `now` (its `Close` is sent right after).
    pub(super) fn close(&mut self, link: u64, now: Instant) {
        self.prune(now);
        if self.live.remove(&link).is_some() && self.closed_ids.insert(link) {
            self.closed.push_back((now, link));
        }
    }

    /// `link`, closed, is dead to audits from now on (its `Close` could not
    /// be sent).
    pub(super) fn dead(&mut self, link: u64) {
        self.closed_ids.remove(&link);
    }

    /// Which of `links` are dead as of `now`: neither open nor closed
    /// within the grace.
    pub(super) fn dead_among(&mut self, links: Vec<u64>, now: Instant) -> Vec<u64> {
        self.prune(now);
        links
            .into_iter()
            .filter(|l| !self.live.contains_key(l) && !self.closed_ids.contains(l))
            .collect()
    }

    /// Forget the links closed more than the grace before `now`.
    fn prune(&mut self, now: Instant) {
        while let Some(&(at, link)) = self.closed.front() {
            if now.saturating_duration_since(at) <= CLOSE_GRACE {
                break;
            }
            self.closed.pop_front();
            self.closed_ids.remove(&link);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_closed_a_moment_ago_is_still_alive_to_an_audit() {
        let mut links = OriginLinks::default();
        let start = Instant::now();
        links.insert(1, "q");
        links.insert(2, "q");
        links.close(1, start);
        assert!(links.get(1).is_none(), "closed: its shipments are ignored");
        assert_eq!(links.get(2), Some(&"q"));
        // Its last settlements may still be in flight: not dead yet.
        assert_eq!(links.dead_among(vec![1, 2, 3], start), vec![3]);
        let later = start + CLOSE_GRACE - Duration::from_millis(1);
        assert_eq!(links.dead_among(vec![1, 2, 3], later), vec![3]);
        // Past the grace a lost `Close` is caught by the audit.
        let past = start + CLOSE_GRACE + Duration::from_millis(1);
        assert_eq!(links.dead_among(vec![1, 2, 3], past), vec![1, 3]);
        assert!(links.closed.is_empty() && links.closed_ids.is_empty());
    }

    #[test]
    fn a_link_whose_close_could_not_be_sent_is_dead_at_once() {
        let mut links = OriginLinks::default();
        let start = Instant::now();
        links.insert(1, ());
        links.insert(2, ());
        links.close(1, start);
        links.close(2, start);
        links.dead(2);
        assert_eq!(links.dead_among(vec![1, 2], start), vec![2]);
    }

    #[test]
    fn closed_links_are_forgotten_in_order_and_closing_twice_counts_once() {
        let mut links = OriginLinks::default();
        let start = Instant::now();
        for link in 0..100u64 {
            links.insert(link, ());
        }
        for link in 0..100u64 {
            // All within the grace of the first: nothing forgotten yet.
            links.close(link, start + Duration::from_millis(link * 40));
            links.close(link, start + Duration::from_millis(link * 40));
        }
        assert_eq!(links.closed.len(), 100);
        // Just past the grace of link 50: links 0..=50 are forgotten.
        let now = start + Duration::from_millis(50 * 40) + CLOSE_GRACE + Duration::from_millis(1);
        let dead = links.dead_among((0..100).collect(), now);
        assert_eq!(dead, (0..=50).collect::<Vec<u64>>());
        assert_eq!(links.closed.len(), 49);
        assert_eq!(links.owners().count(), 0);
    }
}
