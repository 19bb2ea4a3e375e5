//! Group commit's queue, written once: concurrent writers queue their requests and *leaders* take them
//! in groups, so that one sync (a log's `fdatasync`, a server's commit) serves many requests.
//!
//! A writer [`push`](GroupQueue::push)es its request (usually with a channel for its answer); when
//! fewer than the queue's leaders are running, the push says so and the writer starts one (a thread,
//! a task). A leader loops on [`next_group`](GroupQueue::next_group), which hands it the requests it
//! picks, or releases it, under the same lock a push takes, when none wait: a request is never left
//! queued without a leader. How a group is written, and what goes in one, is the backend's: the sled
//! store writes every queued request in one commit-log record, the PostgreSQL store at most one
//! commit per run in one statement.
//!
//! A backend may also let a request go *alone* on its caller's task while no group is queued or being
//! written ([`alone`](GroupQueue::alone)): cheaper than a group for one request, and the guard it holds
//! keeps later requests queueing for a group while too many go alone.
//!
//! ```
//! use std::sync::Arc;
//! use graph_store::group::GroupQueue;
//!
//! let queue = Arc::new(GroupQueue::new(1));
//! assert!(queue.push(1), "no leader runs: this writer starts one");
//! assert!(!queue.push(2), "one leader at most");
//! // The leader takes every request queued so far, then finds none and is released.
//! assert_eq!(queue.next_group(|w| w.drain(..).collect()), Some(vec![1, 2]));
//! assert_eq!(queue.next_group(|w| w.drain(..).collect()), None);
//! assert!(queue.push(3), "released: the next writer starts a leader again");
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Requests waiting for a group, and the leaders and lone requests in flight. Share it (an `Arc`)
/// between a store's clones.
pub struct GroupQueue<R> {
    state: Mutex<State<R>>,
    max_leaders: usize,
}

struct State<R> {
    waiting: VecDeque<R>,
    /// Leaders running.
    leaders: usize,
    /// Requests going alone.
    alone: usize,
}

impl<R> std::fmt::Debug for GroupQueue<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("GroupQueue")
            .field("waiting", &s.waiting.len())
            .field("leaders", &s.leaders)
            .field("alone", &s.alone)
            .field("max_leaders", &self.max_leaders)
            .finish()
    }
}

impl<R> GroupQueue<R> {
    /// An empty queue whose groups at most `max_leaders` leaders write at once (at least one).
    pub fn new(max_leaders: usize) -> Self {
        GroupQueue {
            state: Mutex::new(State { waiting: VecDeque::new(), leaders: 0, alone: 0 }),
            max_leaders: max_leaders.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // Every change is a few plain assignments: a panic cannot leave one half-made.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `request`; true when the caller must start a leader (it is counted as running).
    pub fn push(&self, request: R) -> bool {
        let mut s = self.lock();
        s.waiting.push_back(request);
        let lead = s.leaders < self.max_leaders;
        s.leaders += usize::from(lead);
        lead
    }

    /// A leader's next group: what `pick` takes of the waiting requests (in the order they came; what
    /// it leaves waits for the next group). `None`, and the leader released, when `pick` takes nothing;
    /// a request pushed after that sees the leader gone and starts another.
    pub fn next_group(&self, pick: impl FnOnce(&mut VecDeque<R>) -> Vec<R>) -> Option<Vec<R>> {
        let mut s = self.lock();
        let group = pick(&mut s.waiting);
        if group.is_empty() {
            s.leaders -= 1;
            return None;
        }
        Some(group)
    }

    /// Releases the calling leader when no request waits (true), so that it can finish its last group
    /// knowing no other is left to it; false when requests wait, and it stays the leader.
    pub fn release_if_idle(&self) -> bool {
        let mut s = self.lock();
        let idle = s.waiting.is_empty();
        s.leaders -= usize::from(idle);
        idle
    }

    /// Gives a leader's place up, whatever waits (a leader counted for a start that could not
    /// happen).
    pub fn release(&self) {
        self.lock().leaders -= 1;
    }

    /// A leader that stops without being released (it panicked, its runtime is shutting down) gives its
    /// place up; true when requests wait and the caller must start a leader for them (counted).
    pub fn abandon(&self) -> bool {
        let mut s = self.lock();
        s.leaders -= 1;
        let again = !s.waiting.is_empty() && s.leaders < self.max_leaders;
        s.leaders += usize::from(again);
        again
    }

    /// Leaders running now.
    pub fn leaders(&self) -> usize {
        self.lock().leaders
    }
}

/// Whether the caller may commit on its own thread, blocking it inside `tokio::task::block_in_place`:
/// only on a multi-thread runtime, which hands the thread's other tasks to another worker meanwhile
/// (on a current-thread runtime `block_in_place` panics). Both embedded stores lead a group there when
/// they can.
pub fn may_lead_here() -> bool {
    use tokio::runtime::{Handle, RuntimeFlavor};
    Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

impl<R: Send + 'static> GroupQueue<R> {
    /// Lets a request go alone when no group is queued or being written and fewer than `max` go
    /// alone: the guard counts it until it is dropped. `None`: queue it for a group.
    pub fn alone(self: &Arc<Self>, max: usize) -> Option<Alone<R>> {
        let mut s = self.lock();
        if s.alone < max && s.leaders == 0 && s.waiting.is_empty() {
            s.alone += 1;
            return Some(Alone(self.clone()));
        }
        None
    }
}

/// A request going alone ([`GroupQueue::alone`]), counted until dropped.
pub struct Alone<R>(Arc<GroupQueue<R>>);

impl<R> std::fmt::Debug for Alone<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Alone")
    }
}

impl<R> Drop for Alone<R> {
    fn drop(&mut self) {
        self.0.lock().alone -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(w: &mut VecDeque<u32>) -> Vec<u32> {
        w.drain(..).collect()
    }

    #[test]
    fn at_most_max_leaders_run_and_a_request_never_waits_without_one() {
        let q = GroupQueue::new(2);
        assert!(q.push(1));
        assert!(q.push(2));
        assert!(!q.push(3));
        assert_eq!(q.leaders(), 2);
        // One leader takes one request a group (the backend's pick), the other everything left.
        assert_eq!(q.next_group(|w| w.pop_front().into_iter().collect()), Some(vec![1]));
        assert_eq!(q.next_group(all), Some(vec![2, 3]));
        assert_eq!(q.next_group(all), None);
        assert_eq!(q.leaders(), 1);
        // One leader runs: a push starts the second again, then none.
        assert!(q.push(4));
        assert!(!q.push(5));
        assert_eq!(q.next_group(all), Some(vec![4, 5]));
        // A leader that finds a request waiting stays; released when none waits.
        assert!(!q.push(6));
        assert!(!q.release_if_idle(), "a request waits: the leader stays");
        assert_eq!(q.next_group(all), Some(vec![6]));
        assert!(q.release_if_idle());
        assert!(q.release_if_idle());
        assert_eq!(q.leaders(), 0);
        assert!(q.push(7), "no leader: the writer starts one");
    }

    #[test]
    fn an_abandoned_leader_hands_waiting_requests_to_a_new_one() {
        let q = GroupQueue::new(1);
        assert!(q.push(1));
        assert!(!q.push(2));
        // The leader dies before taking anything: a new leader must start, counted.
        assert!(q.abandon());
        assert_eq!(q.leaders(), 1);
        assert_eq!(q.next_group(all), Some(vec![1, 2]));
        assert!(q.release_if_idle());
        // Abandoned with nothing waiting: no new leader.
        assert!(q.push(3));
        assert_eq!(q.next_group(all), Some(vec![3]));
        assert!(!q.abandon());
        assert_eq!(q.leaders(), 0);
    }

    #[test]
    fn requests_go_alone_only_while_nothing_is_grouped() {
        let q = Arc::new(GroupQueue::new(1));
        let a = q.alone(2).expect("idle: alone");
        let b = q.alone(2).expect("two may go alone");
        assert!(q.alone(2).is_none(), "a third queues");
        drop((a, b));
        assert!(q.push(1));
        assert!(q.alone(2).is_none(), "a group is being written: queue");
        assert_eq!(q.next_group(all), Some(vec![1]));
        assert_eq!(q.next_group(all), None);
        assert!(q.alone(2).is_some());
    }
}
