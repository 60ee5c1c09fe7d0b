//! The link-layer control protocols of a shard, the ones that need no socket: ARP, IPv6
//! neighbor discovery, ICMP and ICMPv6 echo, and the counters of what became of every frame.
//! The shard reads a frame once (its ingress) and hands the views it made here; what comes back
//! is an `Answer`, written over the received buffer itself (no copy, no allocation: headers
//! rewritten in place, the frame trimmed, the same buffer out in the next tx burst), or the
//! reason for a drop. Neighbors seen on the way are reported to the shard's neighbor cache.
//!
//! It must not know about connections or parse what the shard already parsed: TCP, UDP and
//! ICMP errors are the shard's ([`crate::shard`]).

use wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, Icmpv4Message, Icmpv4Packet, Icmpv6Message,
    Icmpv6Packet, Icmpv6Repr, IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet,
    Ipv6Repr, NdiscNeighborFlags, NdiscRepr,
};

use crate::shard::neighbor::{Replace, Update};
use crate::shard::route::TTL;

/// What happened to frames, for `pronghorn stat` and tests. Every frame received ends in exactly
/// one of: answered, or one of the `drop_*` counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IfaceStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub arp_replies: u64,
    pub nd_adverts: u64,
    pub echo_replies: u64,
    /// Addressed to another host or a group we are not in.
    pub drop_not_for_us: u64,
    /// Too short, bad lengths or bad fields.
    pub drop_malformed: u64,
    /// A bad IPv4 header or ICMP checksum.
    pub drop_checksum: u64,
    /// IPv4 or IPv6 fragments: not reassembled (yet), dropped and counted.
    pub drop_fragment: u64,
    /// To our address from a source no peer may send from (Linux's martian sources): see
    /// `Drop::BadSource`.
    pub drop_bad_source: u64,
    /// Well formed, but nothing here handles it (TCP/UDP today, other ICMP types, other ethertypes).
    pub drop_unhandled: u64,
    /// Replies dropped because the NIC's tx queue was full.
    pub drop_tx_full: u64,
}

impl IfaceStats {
    pub(crate) fn count_drop(&mut self, d: Drop) {
        *match d {
            Drop::NotForUs => &mut self.drop_not_for_us,
            Drop::Malformed => &mut self.drop_malformed,
            Drop::Checksum => &mut self.drop_checksum,
            Drop::Fragment => &mut self.drop_fragment,
            Drop::BadSource => &mut self.drop_bad_source,
            Drop::Unhandled => &mut self.drop_unhandled,
        } += 1;
    }

    pub fn dropped(&self) -> u64 {
        self.drop_not_for_us
            + self.drop_malformed
            + self.drop_checksum
            + self.drop_fragment
            + self.drop_bad_source
            + self.drop_unhandled
            + self.drop_tx_full
    }
}

pub(crate) enum Drop {
    NotForUs,
    Malformed,
    Checksum,
    Fragment,
    /// IPv4 from a multicast, broadcast (limited, or our subnet's), `0.0.0.0/8`, loopback or
    /// our own address; IPv6 from a multicast, loopback or IPv4-mapped address, from one of ours,
    /// or (TCP and UDP) from `::`.
    BadSource,
    Unhandled,
}

impl From<wire::Error> for Drop {
    fn from(e: wire::Error) -> Drop {
        match e {
            wire::Error::Checksum => Drop::Checksum,
            wire::Error::Unsupported => Drop::Unhandled,
            wire::Error::Truncated | wire::Error::Malformed => Drop::Malformed,
        }
    }
}

/// A neighbor's link-layer address seen in ARP or neighbor discovery, and what the message
/// may change in the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Learned {
    pub ip: IpAddress,
    pub mac: EthernetAddress,
    pub update: Update,
}

const ETH: usize = wire::ethernet::HEADER_LEN;

/// The reply to a received frame, to be written over it: what it needs from the request was read
/// when the request was.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Answer {
    /// An ARP reply, to `to`.
    Arp { reply: ArpRepr, to: EthernetAddress },
    /// An echo reply: the request's ICMP message (at `icmp_at`, `icmp_len` bytes) moved up over
    /// the IP options, from our address `from` back to `to`.
    EchoV4 { icmp_at: usize, icmp_len: usize, from: Ipv4Address, to: Ipv4Address },
    /// The same over IPv6, moved up over any extension headers.
    EchoV6 { icmp_at: usize, icmp_len: usize, from: Ipv6Address, to: Ipv6Address },
    /// A neighbor advertisement for `target`, from `target` to `to` at `to_mac`.
    NeighborAdvert { target: Ipv6Address, flags: NdiscNeighborFlags, to: Ipv6Address, to_mac: EthernetAddress },
}

impl Answer {
    /// Writes the reply over `frame` (the request, whose Ethernet header is still in place, and
    /// the buffer's room after it: a reply may be longer than its request) from our `mac`;
    /// returns its length. `fill_ipv4_checksum`: the NIC does not compute the IPv4
    /// header checksum.
    pub(crate) fn write(&self, mac: EthernetAddress, frame: &mut [u8], fill_ipv4_checksum: bool) -> usize {
        let (len, dst_mac) = match *self {
            Answer::Arp { reply, to } => {
                let len = ETH + reply.buffer_len();
                reply.emit(&mut ArpPacket::new_unchecked(&mut frame[ETH..len]));
                (len, to)
            }
            Answer::EchoV4 { icmp_at, icmp_len, from, to } => {
                let start = ETH + wire::ipv4::HEADER_LEN;
                frame.copy_within(icmp_at..icmp_at + icmp_len, start);
                let ip = Ipv4Repr {
                    src_addr: from,
                    dst_addr: to,
                    next_header: IpProtocol::Icmp,
                    payload_len: icmp_len,
                    hop_limit: TTL,
                };
                ip.emit(&mut Ipv4Packet::new_unchecked(&mut frame[ETH..start]), fill_ipv4_checksum);
                let mut icmp = Icmpv4Packet::new_unchecked(&mut frame[start..start + icmp_len]);
                icmp.set_msg_type(Icmpv4Message::EchoReply);
                icmp.set_msg_code(0);
                icmp.fill_checksum();
                (start + icmp_len, EthernetFrame::new_unchecked(&*frame).src_addr())
            }
            Answer::EchoV6 { icmp_at, icmp_len, from, to } => {
                let start = ETH + wire::ipv6::HEADER_LEN;
                frame.copy_within(icmp_at..icmp_at + icmp_len, start);
                let ip = Ipv6Repr {
                    src_addr: from,
                    dst_addr: to,
                    next_header: IpProtocol::Icmpv6,
                    payload_len: icmp_len,
                    hop_limit: TTL,
                };
                ip.emit(&mut Ipv6Packet::new_unchecked(&mut frame[ETH..start]));
                let mut icmp = Icmpv6Packet::new_unchecked(&mut frame[start..start + icmp_len]);
                icmp.set_msg_type(Icmpv6Message::EchoReply);
                icmp.set_msg_code(0);
                icmp.fill_checksum(&from, &to);
                (start + icmp_len, EthernetFrame::new_unchecked(&*frame).src_addr())
            }
            Answer::NeighborAdvert { target, flags, to, to_mac } => {
                let na = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr: target, lladdr: Some(mac) });
                let start = ETH + wire::ipv6::HEADER_LEN;
                let len = na.buffer_len();
                let ip = Ipv6Repr {
                    src_addr: target,
                    dst_addr: to,
                    next_header: IpProtocol::Icmpv6,
                    payload_len: len,
                    hop_limit: 255,
                };
                ip.emit(&mut Ipv6Packet::new_unchecked(&mut frame[ETH..start]));
                na.emit(&mut Icmpv6Packet::new_unchecked(&mut frame[start..start + len]), &target, &to, true);
                (start + len, to_mac)
            }
        };
        let mut eth = EthernetFrame::new_unchecked(&mut *frame);
        eth.set_dst_addr(dst_mac);
        eth.set_src_addr(mac);
        len
    }

    /// Counts the reply as sent.
    pub(crate) fn count(&self, stats: &mut IfaceStats) {
        *match self {
            Answer::Arp { .. } => &mut stats.arp_replies,
            Answer::EchoV4 { .. } | Answer::EchoV6 { .. } => &mut stats.echo_replies,
            Answer::NeighborAdvert { .. } => &mut stats.nd_adverts,
        } += 1;
    }
}

/// An ARP packet (the Ethernet payload) heard on the link, in a frame to our MAC if `unicast`
/// (else broadcast): a request for our address `ip` is answered. Its sender is reported as
/// Linux's `arp_process` takes it with `arp_accept=0`: the sender of a request for our address
/// gets an entry, or its new address, stale (`neigh_event_ns`); any other ARP (a reply, a
/// gratuitous ARP, another host's request) only updates an entry that exists: a different
/// address replaces the cached one once the entry has been unchanged for the locktime, or at
/// once for a gratuitous ARP, and a reply to our MAC makes the entry reachable.
pub(crate) fn arp(
    mac: EthernetAddress,
    ip: Ipv4Address,
    payload: &[u8],
    unicast: bool,
    learned: &mut Option<Learned>,
) -> Result<Answer, Drop> {
    let req = ArpRepr::parse(&ArpPacket::new_checked(payload)?)?;
    let ArpRepr::EthernetIpv4 {
        operation,
        source_hardware_addr: sha,
        source_protocol_addr: sip,
        target_hardware_addr: tha,
        target_protocol_addr: tip,
    } = req;
    let request_for_us = operation == ArpOperation::Request && tip == ip;
    if sip.is_unicast() && sha.is_unicast() && sip != ip {
        let update = if request_for_us {
            Update::REQUEST
        } else {
            // Linux `arp_is_garp`: the sender announces itself (a reply also names itself as
            // the target).
            let gratuitous = sip == tip && (operation == ArpOperation::Request || tha == sha);
            Update {
                create: false,
                reachable: operation == ArpOperation::Reply && unicast,
                replace: if gratuitous { Replace::Always } else { Replace::AfterLocktime },
            }
        };
        *learned = Some(Learned { ip: IpAddress::V4(sip), mac: sha, update });
    }
    if tip != ip {
        return Err(Drop::NotForUs);
    }
    if operation != ArpOperation::Request {
        return Err(Drop::Unhandled);
    }
    let reply = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr: mac,
        source_protocol_addr: ip,
        target_hardware_addr: sha,
        target_protocol_addr: sip,
    };
    Ok(Answer::Arp { reply, to: sha })
}

/// An ICMP message to us whose checksum was checked (at `icmp_at` in the frame), that is no
/// error for a socket: an echo request is answered.
pub(crate) fn icmpv4(ip: &Ipv4Repr, icmp: &Icmpv4Packet<&[u8]>, icmp_at: usize) -> Result<Answer, Drop> {
    if icmp.msg_type() != Icmpv4Message::EchoRequest {
        return Err(Drop::Unhandled);
    }
    Ok(Answer::EchoV4 { icmp_at, icmp_len: ip.payload_len, from: ip.dst_addr, to: ip.src_addr })
}

/// Our IPv6 addresses and how the packet was addressed: to one of them, or to a group we are in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ipv6Dst {
    pub ours: Ipv6Address,
    pub link_local: Ipv6Address,
    pub to_us: bool,
    pub to_group: bool,
}

/// An ICMPv6 message (`icmp_len` bytes at `icmp_at` in the frame, its checksum checked) that is
/// no error for a socket: echo requests to us and neighbor solicitations for us are answered,
/// advertisements reported. `sender` is the frame's link source.
pub(crate) fn icmpv6(
    ip: &Ipv6Repr,
    dst: Ipv6Dst,
    icmp: &Icmpv6Packet<&[u8]>,
    (icmp_at, icmp_len): (usize, usize),
    sender: EthernetAddress,
    learned: &mut Option<Learned>,
) -> Result<Answer, Drop> {
    match icmp.msg_type() {
        Icmpv6Message::EchoRequest if dst.to_us => {
            Ok(Answer::EchoV6 { icmp_at, icmp_len, from: ip.dst_addr, to: ip.src_addr })
        }
        Icmpv6Message::NeighborSolicit => {
            let ns = Icmpv6Repr::parse(icmp, &ip.src_addr, &ip.dst_addr, false)?;
            let Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: target, lladdr }) = ns else {
                return Err(Drop::Malformed);
            };
            // RFC 4861 7.1.1: only from the link itself.
            if ip.hop_limit != 255 {
                return Err(Drop::Malformed);
            }
            if target != dst.ours && target != dst.link_local {
                return Err(Drop::NotForUs);
            }
            // RFC 4861 7.2.3: the solicitor's address is created or updated, stale.
            if let (Some(mac), false) = (lladdr, ip.src_addr.is_unspecified()) {
                *learned = Some(Learned { ip: IpAddress::V6(ip.src_addr), mac, update: Update::REQUEST });
            }
            // RFC 4861 7.2.4: to the soliciting address, or to all nodes from the unspecified one.
            let solicited = !ip.src_addr.is_unspecified();
            let (to, to_mac) = if solicited {
                (ip.src_addr, sender)
            } else {
                (Ipv6Address::LINK_LOCAL_ALL_NODES, EthernetAddress([0x33, 0x33, 0, 0, 0, 1]))
            };
            let flags = NdiscNeighborFlags(if solicited {
                NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE
            } else {
                NdiscNeighborFlags::OVERRIDE
            });
            Ok(Answer::NeighborAdvert { target, flags, to, to_mac })
        }
        Icmpv6Message::NeighborAdvert if dst.to_us || dst.to_group => {
            let na = Icmpv6Repr::parse(icmp, &ip.src_addr, &ip.dst_addr, false)?;
            if ip.hop_limit != 255 {
                return Err(Drop::Malformed);
            }
            // RFC 4861 7.2.5: no entry is made; without Override a different address is not
            // taken (a reachable entry goes stale); Solicited proves reachability.
            if let Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr, lladdr: Some(mac) }) = na {
                let update = Update {
                    create: false,
                    reachable: flags.solicited(),
                    replace: if flags.override_() { Replace::Always } else { Replace::Weak },
                };
                *learned = Some(Learned { ip: IpAddress::V6(target_addr), mac, update });
            }
            Err(Drop::Unhandled)
        }
        _ => Err(Drop::Unhandled),
    }
}
