//! The batcher's queue as plain state: FIFO entries, batch formation and the removal of
//! entries whose caller has gone. No channels or clocks inside, so unit tests drive it
//! directly; the actor (`super::actor`) owns one and decides *when* to take a batch.

use std::collections::VecDeque;
use std::time::Instant;

use super::rows::RowShape;

/// What the queue needs to know about an entry.
pub(crate) trait Queued {
    fn rows(&self) -> usize;
    /// Entries combine only when their shapes are equal.
    fn shape(&self) -> &RowShape;
    fn arrived(&self) -> Instant;
    /// The caller has gone (its future was dropped): the entry must never run.
    fn is_cancelled(&self) -> bool;
}

/// How batches are formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    /// Rows per batch. A single entry with more rows forms a batch of its own (the actor
    /// runs it in chunks).
    pub max_rows: usize,
    /// Whether entries may share a batch at all (false for models without a batch dimension).
    pub combine: bool,
}

#[derive(Debug)]
pub(crate) struct Queue<E> {
    entries: VecDeque<E>,
    rows: usize,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue {
            entries: VecDeque::new(),
            rows: 0,
        }
    }
}

impl<E: Queued> Queue<E> {
    pub(crate) fn push(&mut self, entry: E) {
        self.rows += entry.rows();
        self.entries.push_back(entry);
    }

    /// Rows waiting.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Requests waiting.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// When the oldest waiting entry arrived.
    pub(crate) fn oldest(&self) -> Option<Instant> {
        self.entries.front().map(Queued::arrived)
    }

    /// Removes every cancelled entry, returning them (their callers have gone).
    pub(crate) fn remove_cancelled(&mut self) -> Vec<E> {
        let mut cancelled = Vec::new();
        let mut kept = VecDeque::with_capacity(self.entries.len());
        for entry in self.entries.drain(..) {
            if entry.is_cancelled() {
                self.rows -= entry.rows();
                cancelled.push(entry);
            } else {
                kept.push_back(entry);
            }
        }
        self.entries = kept;
        cancelled
    }

    /// The next batch: the longest run of entries from the front that share the front
    /// entry's shape and fit in `max_rows` together. FIFO is strict: the run stops at the
    /// first entry that cannot join, so no entry ever overtakes an earlier one.
    ///
    /// A batch is *complete* when it cannot grow any more: it holds `max_rows` rows, its only
    /// entry is oversized or may not be combined, or the next entry cannot join. An incomplete
    /// batch is taken only when `take_partial` is set. Cancelled entries met on the way are
    /// removed and added to `cancelled`.
    pub(crate) fn next_batch(
        &mut self,
        policy: Policy,
        take_partial: bool,
        cancelled: &mut Vec<E>,
    ) -> Option<Vec<E>> {
        let max_rows = policy.max_rows.max(1);
        let mut taken = 0;
        let mut rows = 0;
        let mut complete = false;
        let mut i = 0;
        while let Some(entry) = self.entries.get(i) {
            if entry.is_cancelled() {
                if let Some(entry) = self.entries.remove(i) {
                    self.rows -= entry.rows();
                    cancelled.push(entry);
                }
                continue;
            }
            if taken == 0 {
                rows = entry.rows();
                taken = 1;
                if rows >= max_rows || !policy.combine {
                    complete = true;
                    break;
                }
            } else {
                // `i == taken` here: cancelled entries before `i` were removed.
                let head = &self.entries[0];
                if entry.shape() != head.shape() || rows + entry.rows() > max_rows {
                    complete = true;
                    break;
                }
                rows += entry.rows();
                taken += 1;
                if rows == max_rows {
                    complete = true;
                    break;
                }
            }
            i += 1;
        }
        if taken == 0 || !(complete || take_partial) {
            return None;
        }
        self.rows -= rows;
        Some(self.entries.drain(..taken).collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    #[derive(Debug)]
    struct Item {
        id: usize,
        rows: usize,
        shape: RowShape,
        arrived: Instant,
        gone: Arc<AtomicBool>,
    }

    impl Queued for Item {
        fn rows(&self) -> usize {
            self.rows
        }
        fn shape(&self) -> &RowShape {
            &self.shape
        }
        fn arrived(&self) -> Instant {
            self.arrived
        }
        fn is_cancelled(&self) -> bool {
            self.gone.load(Ordering::Relaxed)
        }
    }

    fn shape(width: usize) -> RowShape {
        RowShape(vec![vec![width]])
    }

    /// A queue of `(rows, width)` items with ids 0.., and their cancellation switches.
    fn queue(items: &[(usize, usize)]) -> (Queue<Item>, Vec<Arc<AtomicBool>>) {
        let mut q = Queue::default();
        let mut switches = Vec::new();
        for (id, &(rows, width)) in items.iter().enumerate() {
            let gone = Arc::new(AtomicBool::new(false));
            switches.push(gone.clone());
            q.push(Item {
                id,
                rows,
                shape: shape(width),
                arrived: Instant::now(),
                gone,
            });
        }
        (q, switches)
    }

    const ROWS4: Policy = Policy {
        max_rows: 4,
        combine: true,
    };

    fn ids(batch: Option<Vec<Item>>) -> Vec<usize> {
        batch.unwrap().iter().map(|i| i.id).collect()
    }

    #[test]
    fn takes_compatible_entries_in_order_up_to_max_rows() {
        let (mut q, _) = queue(&[(1, 8), (2, 8), (1, 8), (1, 8)]);
        assert_eq!((q.len(), q.rows()), (4, 5));
        let mut gone = Vec::new();
        assert_eq!(ids(q.next_batch(ROWS4, false, &mut gone)), vec![0, 1, 2]);
        assert_eq!((q.len(), q.rows()), (1, 1));
        // One row left and nothing behind it: the batch could still grow.
        assert!(q.next_batch(ROWS4, false, &mut gone).is_none());
        assert_eq!(ids(q.next_batch(ROWS4, true, &mut gone)), vec![3]);
        assert!(q.is_empty() && q.rows() == 0 && gone.is_empty());
    }

    #[test]
    fn stops_at_the_first_incompatible_entry_to_keep_fifo() {
        let (mut q, _) = queue(&[(1, 8), (1, 3), (1, 8), (1, 3)]);
        let mut gone = Vec::new();
        for expected in [0, 1, 2] {
            // Complete (the next entry cannot join) even though it holds one row.
            assert_eq!(ids(q.next_batch(ROWS4, false, &mut gone)), vec![expected]);
        }
        assert!(q.next_batch(ROWS4, false, &mut gone).is_none());
        assert_eq!(ids(q.next_batch(ROWS4, true, &mut gone)), vec![3]);
    }

    #[test]
    fn an_entry_that_does_not_fit_closes_the_batch() {
        let (mut q, _) = queue(&[(3, 8), (2, 8)]);
        let mut gone = Vec::new();
        assert_eq!(ids(q.next_batch(ROWS4, false, &mut gone)), vec![0]);
        assert_eq!(ids(q.next_batch(ROWS4, true, &mut gone)), vec![1]);
    }

    #[test]
    fn oversized_entries_run_alone() {
        let (mut q, _) = queue(&[(1, 8), (9, 8), (1, 8)]);
        let mut gone = Vec::new();
        assert_eq!(ids(q.next_batch(ROWS4, false, &mut gone)), vec![0]);
        assert_eq!(ids(q.next_batch(ROWS4, false, &mut gone)), vec![1]);
        assert_eq!(ids(q.next_batch(ROWS4, true, &mut gone)), vec![2]);
    }

    #[test]
    fn without_combining_every_entry_is_a_batch() {
        let (mut q, _) = queue(&[(2, 8), (2, 8)]);
        let whole = Policy {
            max_rows: 4,
            combine: false,
        };
        let mut gone = Vec::new();
        assert_eq!(ids(q.next_batch(whole, false, &mut gone)), vec![0]);
        assert_eq!(ids(q.next_batch(whole, false, &mut gone)), vec![1]);
    }

    #[test]
    fn cancelled_entries_never_run_and_free_their_rows() {
        let (mut q, switches) = queue(&[(1, 8), (2, 8), (1, 8), (1, 3), (1, 8)]);
        switches[0].store(true, Ordering::Relaxed);
        switches[2].store(true, Ordering::Relaxed);
        let mut gone = Vec::new();
        assert_eq!(ids(q.next_batch(ROWS4, false, &mut gone)), vec![1]);
        assert_eq!(gone.iter().map(|i| i.id).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!((q.len(), q.rows()), (2, 2));

        switches[4].store(true, Ordering::Relaxed);
        let removed = q.remove_cancelled();
        assert_eq!(removed.iter().map(|i| i.id).collect::<Vec<_>>(), vec![4]);
        assert_eq!((q.len(), q.rows()), (1, 1));
        switches[3].store(true, Ordering::Relaxed);
        assert!(q.next_batch(ROWS4, true, &mut gone).is_none());
        assert!(q.is_empty() && q.rows() == 0);
    }

    #[test]
    fn oldest_is_the_front_entry() {
        let (q, _) = queue(&[(1, 8), (1, 8)]);
        assert_eq!(q.oldest(), Some(q.entries[0].arrived));
        assert_eq!(Queue::<Item>::default().oldest(), None);
    }
}
