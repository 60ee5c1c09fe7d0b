//! The process's shards (`runtime.shards`, one unless configured): each drives its own queue of
//! the interface, a connection lives on the shard its queue feeds, and a listener is one
//! listener per shard under one fd. This module owns that list and the listener siblings: the
//! fd table names a listener by its shard-0 socket (the primary), and readiness, arrivals and
//! wakeups of the others are folded into it here. It knows nothing of fds or waiting.

use std::collections::HashMap;

use nic::Nic;
use stack::shard::{Readiness, Shard, SocketId};

pub(crate) struct ShardSet<N: Nic> {
    list: Vec<Shard<N>>,
    /// Listener primary -> its listeners on the other shards.
    siblings: HashMap<SocketId, Box<[SocketId]>>,
    /// A sibling listener -> its primary.
    primary: HashMap<SocketId, SocketId>,
    /// The shard the next connect() goes to (round robin).
    next_connect: usize,
}

impl<N: Nic> Default for ShardSet<N> {
    fn default() -> Self {
        ShardSet { list: Vec::new(), siblings: HashMap::new(), primary: HashMap::new(), next_connect: 0 }
    }
}

impl<N: Nic> ShardSet<N> {
    pub(crate) fn start(&mut self, shards: Vec<Shard<N>>) {
        self.list = shards;
    }

    /// Whether the NIC is open (the shards serving).
    pub(crate) fn is_open(&self) -> bool {
        !self.list.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn all(&self) -> &[Shard<N>] {
        &self.list
    }

    pub(crate) fn all_mut(&mut self) -> &mut [Shard<N>] {
        &mut self.list
    }

    /// Closes them all (the NIC's queues with them).
    pub(crate) fn stop(&mut self) {
        self.list.clear();
        self.siblings.clear();
        self.primary.clear();
    }

    /// The shard that holds `id`.
    pub(crate) fn of(&mut self, id: SocketId) -> &mut Shard<N> {
        &mut self.list[id.shard()]
    }

    pub(crate) fn of_ref(&self, id: SocketId) -> &Shard<N> {
        &self.list[id.shard()]
    }

    /// The shard a new outgoing connection goes to. Its replies may reach any queue: a shard
    /// that receives one hands it over (`stack::shard::exchange`).
    pub(crate) fn for_connect(&mut self) -> &mut Shard<N> {
        let k = self.next_connect % self.list.len();
        self.next_connect = self.next_connect.wrapping_add(1);
        &mut self.list[k]
    }

    /// Records the listeners the other shards opened for primary `id`.
    pub(crate) fn add_siblings(&mut self, id: SocketId, others: Vec<SocketId>) {
        if others.is_empty() {
            return;
        }
        for &o in &others {
            self.primary.insert(o, id);
        }
        self.siblings.insert(id, others.into_boxed_slice());
    }

    /// Forgets and returns the sibling listeners of primary `id` (it is closing).
    pub(crate) fn take_siblings(&mut self, id: SocketId) -> Box<[SocketId]> {
        let others = self.siblings.remove(&id).unwrap_or_default();
        for o in others.iter() {
            self.primary.remove(o);
        }
        others
    }

    /// `id` and its sibling listeners.
    pub(crate) fn group(&self, id: SocketId) -> impl Iterator<Item = SocketId> + '_ {
        std::iter::once(id).chain(self.siblings_of(id).iter().copied())
    }

    /// The sibling listeners of primary `id` (none for anything else). Most processes have
    /// none at all (one shard): then no hashing (SipHash of the key cost ~80 instructions of
    /// every readiness look, 150 in all).
    fn siblings_of(&self, id: SocketId) -> &[SocketId] {
        if self.siblings.is_empty() {
            return &[];
        }
        self.siblings.get(&id).map_or(&[], |o| o)
    }

    /// The socket the runtime knows `id` by: its primary for a sibling listener, else itself.
    pub(crate) fn known_as(&self, id: SocketId) -> SocketId {
        if self.primary.is_empty() {
            return id;
        }
        self.primary.get(&id).copied().unwrap_or(id)
    }

    /// What `id` is ready for: for a listener, any of its siblings' readiness too.
    pub(crate) fn readiness(&self, id: SocketId) -> Readiness {
        let mut r = self.of_ref(id).readiness(id);
        for &o in self.siblings_of(id) {
            let s = self.of_ref(o).readiness(o);
            r.readable |= s.readable;
            r.error |= s.error;
        }
        r
    }

    /// Arrivals on `id` (edge-triggered epoll): a listener's count over its siblings.
    pub(crate) fn arrivals(&self, id: SocketId) -> u32 {
        self.group(id).fold(0u32, |n, s| n.wrapping_add(self.of_ref(s).arrivals(s)))
    }
}
