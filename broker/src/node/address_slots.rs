//! Connections per source IP address, counted from accept until the
//! connection task ends: the pre-login limit that keeps one address from
//! taking every connection slot (and a task each) before TLS or SASL has
//! cost it anything. Knows addresses and counts, nothing of AMQP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// The live connections of every source address.
#[derive(Debug, Clone)]
pub(crate) struct AddressSlots {
    /// Most per address; 0 is no limit.
    limit: usize,
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection's slot; dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct AddressSlot {
    ip: IpAddr,
    counts: Option<Arc<Mutex<HashMap<IpAddr, usize>>>>,
}

impl AddressSlots {
    pub(crate) fn new(limit: usize) -> AddressSlots {
        AddressSlots {
            limit,
            counts: Arc::default(),
        }
    }

    /// A slot for a connection from `ip`, or `None` when the address has
    /// `limit` connections already.
    pub(crate) fn take(&self, ip: IpAddr) -> Option<AddressSlot> {
        if self.limit == 0 {
            return Some(AddressSlot { ip, counts: None });
        }
        // Never held across an await; a panic elsewhere cannot leave the
        // counts half-updated, so a poisoned lock is still right.
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(ip).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            ip,
            counts: Some(self.counts.clone()),
        })
    }

    /// Live connections from `ip` (for tests and logs).
    #[cfg(test)]
    pub(crate) fn count(&self, ip: IpAddr) -> usize {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let Some(counts) = self.counts.take() else {
            return;
        };
        let mut counts = counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                // The map holds only addresses with live connections.
                counts.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_address_and_freed_on_drop() {
        let slots = AddressSlots::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = slots.take(a).unwrap();
        let _second = slots.take(a).unwrap();
        assert!(slots.take(a).is_none(), "a third from one address");
        let _other = slots.take(b).expect("another address has its own slots");
        drop(first);
        assert_eq!(slots.count(a), 1);
        assert!(slots.take(a).is_some());
    }

    #[test]
    fn zero_is_no_limit() {
        let slots = AddressSlots::new(0);
        let a: IpAddr = "::1".parse().unwrap();
        let held: Vec<_> = (0..100).map(|_| slots.take(a).unwrap()).collect();
        assert_eq!(held.len(), 100);
        assert_eq!(slots.count(a), 0, "nothing is counted without a limit");
    }
}
