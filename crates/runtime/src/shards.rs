//! The process's shards (`runtime.shards`, one unless configured): each drives its own queue of
//! the interface, a connection lives on the shard its queue feeds, and a listener is one
//! listener per shard under one fd. This module owns that list and the listener siblings: the
//! fd table names a listener by its shard-0 socket (the primary), and readiness, arrivals and
//! wakeups of the others are folded into it here. It knows nothing of fds or waiting. With the
//! family arena enabled, the list of shards is in it with what the shards hold (issue 24); the
//! sibling maps are this process's.

use std::collections::HashMap;

use nic::Nic;
use stack::shard::{Readiness, Shard, SocketId};

use crate::beside::BesideSet;

pub(crate) struct ShardSet<N: Nic> {
    list: Vec<Shard<N>>,
    /// Listener primary -> its listeners on the other shards.
    siblings: HashMap<SocketId, Box<[SocketId]>>,
    /// A sibling listener -> its primary.
    primary: HashMap<SocketId, SocketId>,
    /// The shard the next connect() goes to (round robin).
    next_connect: usize,
    /// The kernel sockets beside the listeners (a shared interface): their readiness is the
    /// listener's too.
    pub(crate) beside: BesideSet,
}

impl<N: Nic> Default for ShardSet<N> {
    fn default() -> Self {
        ShardSet {
            list: Vec::new(),
            siblings: HashMap::new(),
            primary: HashMap::new(),
            next_connect: 0,
            beside: BesideSet::default(),
        }
    }
}

impl<N: Nic> ShardSet<N> {
    /// Starts serving with `shards`. With the family arena enabled, their structs move into a
    /// list allocated in it, where their heap objects already are (`arena`): a fork shares both.
    pub(crate) fn start(&mut self, shards: Vec<Shard<N>>) {
        let mut list = {
            let _in = arena::family().map(arena::Arena::enter);
            Vec::with_capacity(shards.len())
        };
        list.extend(shards);
        self.list = list;
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

    /// Forgets them unclosed: another process (the keeper forked at the opener's exit) drives
    /// and closes them. Their list and structs are in the family arena, which that process
    /// shares, so nothing is freed here.
    pub(crate) fn hand_over(&mut self) {
        std::mem::forget(std::mem::take(&mut self.list));
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

    /// What `id` is ready for: for a listener, any of its siblings' readiness too, and its
    /// kernel socket's (`beside`).
    pub(crate) fn readiness(&self, id: SocketId) -> Readiness {
        let mut r = self.of_ref(id).readiness(id);
        for &o in self.siblings_of(id) {
            let s = self.of_ref(o).readiness(o);
            r.readable |= s.readable;
            r.error |= s.error;
        }
        if let Some((ready, _)) = self.beside.state(id) {
            r.readable |= ready;
        }
        r
    }

    /// Arrivals on `id` (edge-triggered epoll): a listener's count over its siblings and its
    /// kernel socket.
    pub(crate) fn arrivals(&self, id: SocketId) -> u32 {
        let kernel = self.beside.state(id).map_or(0, |(_, n)| n);
        self.group(id).fold(kernel, |n, s| n.wrapping_add(self.of_ref(s).arrivals(s)))
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};

    use super::*;
    use stack::shard::ShardConfig;
    use testkit::mem::{pair, MemConfig};

    #[test]
    fn the_shards_structs_are_in_the_family_arena_once_started() {
        arena::enable_family().expect("ScopedAlloc is the unit tests' global allocator");
        let (nic, _peer) = pair(MemConfig::default());
        let cfg = ShardConfig::new(nic.mac(), Some(([10, 0, 0, 1].into(), 24)), None, [1; 32]);
        let mut set = ShardSet::default();
        set.start(vec![Shard::new(nic, cfg)]);
        let arena = arena::family().expect("enabled above");
        assert!(arena.contains(set.all().as_ptr().cast()), "a fork would share the shard's heap but not its struct");
    }

    /// What stage 3 builds on: a child forked after a connection was accepted works on the
    /// parent's shard itself, not a copy. The child reads what the parent's shard received, and
    /// the parent then finds it read.
    #[test]
    fn a_forked_child_reads_from_the_parents_shard_and_the_parent_sees_it_read() {
        arena::enable_family().expect("ScopedAlloc is the unit tests' global allocator");
        let (a, b) = pair(MemConfig::default());
        let (server_ip, client_ip) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let (amac, bmac) = (a.mac(), b.mac());
        let mut set = ShardSet::default();
        set.start(vec![Shard::new(a, ShardConfig::new(amac, Some((server_ip, 24)), None, [1; 32]))]);
        let mut client = Shard::new(b, ShardConfig::new(bmac, Some((client_ip, 24)), None, [2; 32]));
        let now = 1_000_000_000;
        let server = &mut set.all_mut()[0];
        server.hear(client_ip.into(), bmac, now);
        client.hear(server_ip.into(), amac, now);
        let listener = server.tcp_listen(SocketAddr::from((server_ip, 80)), 8).unwrap();
        let c = client.tcp_connect(SocketAddr::from((server_ip, 80))).unwrap();
        let s = loop {
            client.poll(now);
            server.poll(now);
            if let Ok((s, _)) = server.tcp_accept(listener) {
                break s;
            }
        };
        client.tcp_send(c, b"request").unwrap();
        while server.tcp_recv_available(s) != Ok(7) {
            client.poll(now);
            server.poll(now);
        }
        // SAFETY: the child only reads the shard into a stack buffer (no allocation: another
        // test thread may hold the allocator's lock at the fork) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let mut buf = [0u8; 16];
            let read = server.tcp_recv(s, &mut buf) == Ok(7) && &buf[..7] == b"request";
            // SAFETY: _exit has no preconditions.
            unsafe { libc::_exit(if read { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: `status` is a writable int.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child did not read the request");
        assert_eq!(server.tcp_recv_available(s), Ok(0), "the child read a copy of the shard");
    }
}
