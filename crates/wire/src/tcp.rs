//! TCP segments (RFC 9293) and the options pronghorn speaks: MSS, window scale and timestamps
//! (RFC 7323), SACK (RFC 2018). Sequence numbers are plain `u32`; their modular arithmetic
//! belongs to the TCP state machine.

use core::fmt;
use core::ops;

use crate::ip::{checksum, IpAddress, IpProtocol};
use crate::{be, Error, Result};

/// The control bits of a TCP header, a small hand-written bit set.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u8);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer field is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-Echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x80);

    const NAMES: [(TcpFlags, &'static str); 8] = [
        (Self::FIN, "FIN"),
        (Self::SYN, "SYN"),
        (Self::RST, "RST"),
        (Self::PSH, "PSH"),
        (Self::ACK, "ACK"),
        (Self::URG, "URG"),
        (Self::ECE, "ECE"),
        (Self::CWR, "CWR"),
    ];

    /// No flag set.
    pub const fn empty() -> Self {
        TcpFlags(0)
    }

    /// The flags of the byte as it is on the wire.
    pub const fn from_bits(bits: u8) -> Self {
        TcpFlags(bits)
    }

    /// The byte as it is on the wire.
    pub const fn bits(&self) -> u8 {
        self.0
    }

    /// No flag set.
    pub const fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// All flags of `other` are set.
    pub const fn contains(&self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Any flag of `other` is set.
    pub const fn intersects(&self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Sets the flags of `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the flags of `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }

    /// Sets or clears the flags of `other`.
    pub fn set(&mut self, other: TcpFlags, value: bool) {
        if value {
            self.insert(other)
        } else {
            self.remove(other)
        }
    }
}

impl ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

impl ops::BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & rhs.0)
    }
}

impl ops::Sub for TcpFlags {
    type Output = TcpFlags;
    /// The flags of `self` that are not in `rhs`.
    fn sub(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & !rhs.0)
    }
}

impl fmt::Debug for TcpFlags {
    /// `SYN|ACK`, or `(empty)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("(empty)");
        }
        let mut first = true;
        for (flag, name) in Self::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// Byte offsets of the TCP header.
pub mod field {
    use crate::field::Field;

    /// Source Port.
    pub const SOURCE_PORT: Field = 0..2;
    /// Destination Port.
    pub const DESTINATION_PORT: Field = 2..4;
    /// Sequence Number.
    pub const SEQUENCE_NUMBER: Field = 4..8;
    /// Acknowledgment Number.
    pub const ACKNOWLEDGMENT_NUMBER: Field = 8..12;
    /// Data Offset (high 4 bits, in 32-bit words) and reserved bits.
    pub const DATA_OFFSET: usize = 12;
    /// Control bits (CWR ECE URG ACK PSH RST SYN FIN).
    pub const FLAGS: usize = 13;
    /// Window.
    pub const WINDOW: Field = 14..16;
    /// Checksum.
    pub const CHECKSUM: Field = 16..18;
    /// Urgent Pointer.
    pub const URGENT_POINTER: Field = 18..20;
    /// Options start here and run to the data offset.
    pub const OPTIONS: usize = 20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::OPTIONS;

/// The most option bytes a header holds (data offset 15).
pub const MAX_OPTIONS_LEN: usize = 40;

/// Option kinds (IANA "TCP Option Kind Numbers").
pub mod option_kind {
    /// End of Option List.
    pub const END_OF_LIST: u8 = 0;
    /// No-Operation.
    pub const NO_OPERATION: u8 = 1;
    /// Maximum Segment Size.
    pub const MAX_SEGMENT_SIZE: u8 = 2;
    /// Window Scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK Permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMPS: u8 = 8;
}

/// A view of a TCP segment. The buffer is the whole segment (the IP payload): the checksum and
/// the payload run to its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps a buffer, checking the header length against it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the fixed header and the options (data offset), and that
    /// the data offset is at least 5.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if header_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source Port.
    pub fn src_port(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::SOURCE_PORT.start)
    }

    /// Destination Port.
    pub fn dst_port(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::DESTINATION_PORT.start)
    }

    /// Sequence Number.
    pub fn seq_number(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::SEQUENCE_NUMBER.start)
    }

    /// Acknowledgment Number (meaningful with ACK).
    pub fn ack_number(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::ACKNOWLEDGMENT_NUMBER.start)
    }

    /// Header length in bytes (Data Offset * 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }

    /// Control bits.
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.buffer.as_ref()[field::FLAGS])
    }

    /// FIN.
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// SYN.
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// RST.
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// PSH.
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// ACK.
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// URG.
    pub fn urg(&self) -> bool {
        self.flags().contains(TcpFlags::URG)
    }

    /// ECE.
    pub fn ece(&self) -> bool {
        self.flags().contains(TcpFlags::ECE)
    }

    /// CWR.
    pub fn cwr(&self) -> bool {
        self.flags().contains(TcpFlags::CWR)
    }

    /// Window (unscaled).
    pub fn window_len(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::WINDOW.start)
    }

    /// Checksum.
    pub fn checksum(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Urgent Pointer (meaningful with URG).
    pub fn urgent_at(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::URGENT_POINTER.start)
    }

    /// Whether the checksum over the pseudo-header and the whole buffer is right.
    pub fn verify_checksum(&self, src_addr: &IpAddress, dst_addr: &IpAddress) -> bool {
        segment_sum(self.buffer.as_ref(), src_addr, dst_addr) == 0xffff
    }
}

fn segment_sum(segment: &[u8], src_addr: &IpAddress, dst_addr: &IpAddress) -> u16 {
    checksum::transport(src_addr, dst_addr, IpProtocol::Tcp, segment)
}

impl<'a, T: AsRef<[u8]> + ?Sized> TcpPacket<&'a T> {
    /// The options (between the fixed header and the data offset); walk them with
    /// [`TcpOptions`].
    pub fn options(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::OPTIONS..usize::from(self.header_len())]
    }

    /// The payload: after the header, to the end of the buffer.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the Source Port.
    pub fn set_src_port(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::SOURCE_PORT.start, value);
    }

    /// Sets the Destination Port.
    pub fn set_dst_port(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::DESTINATION_PORT.start, value);
    }

    /// Sets the Sequence Number.
    pub fn set_seq_number(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::SEQUENCE_NUMBER.start, value);
    }

    /// Sets the Acknowledgment Number.
    pub fn set_ack_number(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::ACKNOWLEDGMENT_NUMBER.start, value);
    }

    /// Sets the header length in bytes (a multiple of 4, 20 to 60) and clears the reserved bits.
    pub fn set_header_len(&mut self, len: u8) {
        self.buffer.as_mut()[field::DATA_OFFSET] = (len / 4) << 4;
    }

    /// Sets the control bits.
    pub fn set_flags(&mut self, flags: TcpFlags) {
        self.buffer.as_mut()[field::FLAGS] = flags.0;
    }

    /// Sets the Window.
    pub fn set_window_len(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::WINDOW.start, value);
    }

    /// Sets the Checksum.
    pub fn set_checksum(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM.start, value);
    }

    /// Sets the Urgent Pointer.
    pub fn set_urgent_at(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::URGENT_POINTER.start, value);
    }

    /// Computes and writes the checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum(&mut self, src_addr: &IpAddress, dst_addr: &IpAddress) {
        self.set_checksum(0);
        let sum = segment_sum(self.buffer.as_ref(), src_addr, dst_addr);
        self.set_checksum(!sum);
    }

    /// The options, writable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.header_len());
        &mut self.buffer.as_mut()[field::OPTIONS..end]
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = usize::from(self.header_len());
        &mut self.buffer.as_mut()[start..]
    }
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// End of Option List: the rest of the options area is padding.
    EndOfList,
    /// No-Operation (alignment).
    NoOperation,
    /// Maximum Segment Size (SYN only).
    MaxSegmentSize(u16),
    /// Window Scale shift count (SYN only), as sent (may exceed 14).
    WindowScale(u8),
    /// SACK Permitted (SYN only).
    SackPermitted,
    /// SACK blocks (left edge, right edge), 1 to 4 of them, in the first slots.
    SackRange([Option<(u32, u32)>; 4]),
    /// Timestamps.
    Timestamps {
        /// TSval: the sender's clock.
        tsval: u32,
        /// TSecr: the echoed TSval.
        tsecr: u32,
    },
    /// A known kind (MSS, window scale, SACK permitted, SACK, timestamps) whose length is wrong
    /// for it: skipped, the segment processed without it, as Linux's `tcp_parse_options` does.
    WrongLength {
        /// Kind.
        kind: u8,
        /// The option's bytes after the kind and length octets.
        data: &'a [u8],
    },
    /// Any other kind: its bytes after the kind and length octets.
    Unknown {
        /// Kind.
        kind: u8,
        /// The option's bytes after the kind and length octets.
        data: &'a [u8],
    },
}

impl<'a> TcpOption<'a> {
    /// Reads the option at the start of `data`; returns it and the bytes after it.
    ///
    /// Empty input is `Err(Truncated)`; a missing length octet or a length below 2 or beyond
    /// `data` is `Err(Malformed)` (no option boundary can be trusted after it). A known kind
    /// with the wrong length for it (MSS 4, window scale 3, SACK permitted 2, SACK 2 + 8n with
    /// n from 1 to 4, timestamps 10) is [`TcpOption::WrongLength`]: its length octet still
    /// says where the next option starts.
    pub fn parse(data: &'a [u8]) -> Result<(TcpOption<'a>, &'a [u8])> {
        let (&kind, after_kind) = data.split_first().ok_or(Error::Truncated)?;
        match kind {
            option_kind::END_OF_LIST => return Ok((TcpOption::EndOfList, after_kind)),
            option_kind::NO_OPERATION => return Ok((TcpOption::NoOperation, after_kind)),
            _ => {}
        }
        let len = usize::from(*after_kind.first().ok_or(Error::Malformed)?);
        if len < 2 || len > data.len() {
            return Err(Error::Malformed);
        }
        let (option, rest) = data.split_at(len);
        let body = &option[2..];
        let parsed = match (kind, len) {
            (option_kind::MAX_SEGMENT_SIZE, 4) => TcpOption::MaxSegmentSize(be::u16_at(body, 0)),
            (option_kind::WINDOW_SCALE, 3) => TcpOption::WindowScale(body[0]),
            (option_kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (option_kind::SACK, 10 | 18 | 26 | 34) => {
                let mut blocks = [None; 4];
                for (slot, block) in blocks.iter_mut().zip(body.chunks_exact(8)) {
                    *slot = Some((be::u32_at(block, 0), be::u32_at(block, 4)));
                }
                TcpOption::SackRange(blocks)
            }
            (option_kind::TIMESTAMPS, 10) => {
                TcpOption::Timestamps { tsval: be::u32_at(body, 0), tsecr: be::u32_at(body, 4) }
            }
            (
                option_kind::MAX_SEGMENT_SIZE
                | option_kind::WINDOW_SCALE
                | option_kind::SACK_PERMITTED
                | option_kind::SACK
                | option_kind::TIMESTAMPS,
                _,
            ) => TcpOption::WrongLength { kind, data: body },
            _ => TcpOption::Unknown { kind, data: body },
        };
        Ok((parsed, rest))
    }

    /// Length of the option on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::SackRange(blocks) => 2 + 8 * blocks.iter().flatten().count(),
            TcpOption::Timestamps { .. } => 10,
            TcpOption::WrongLength { data, .. } | TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Writes the option at the start of `buffer` (at least [`buffer_len`] bytes) and returns
    /// the rest of the buffer. A `SackRange` writes its `Some` blocks in order.
    ///
    /// [`buffer_len`]: TcpOption::buffer_len
    pub fn emit<'b>(&self, buffer: &'b mut [u8]) -> &'b mut [u8] {
        let len = self.buffer_len();
        let (option, rest) = buffer.split_at_mut(len);
        match *self {
            TcpOption::EndOfList => option[0] = option_kind::END_OF_LIST,
            TcpOption::NoOperation => option[0] = option_kind::NO_OPERATION,
            TcpOption::MaxSegmentSize(mss) => {
                option[0] = option_kind::MAX_SEGMENT_SIZE;
                be::set_u16(option, 2, mss);
            }
            TcpOption::WindowScale(shift) => {
                option[0] = option_kind::WINDOW_SCALE;
                option[2] = shift;
            }
            TcpOption::SackPermitted => option[0] = option_kind::SACK_PERMITTED,
            TcpOption::SackRange(blocks) => {
                option[0] = option_kind::SACK;
                for (at, (left, right)) in blocks.iter().flatten().enumerate() {
                    be::set_u32(option, 2 + 8 * at, *left);
                    be::set_u32(option, 6 + 8 * at, *right);
                }
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                option[0] = option_kind::TIMESTAMPS;
                be::set_u32(option, 2, tsval);
                be::set_u32(option, 6, tsecr);
            }
            TcpOption::WrongLength { kind, data } | TcpOption::Unknown { kind, data } => {
                option[0] = kind;
                option[2..].copy_from_slice(data);
            }
        }
        if len > 1 {
            option[1] = len as u8;
        }
        rest
    }
}

/// The options of a TCP header, in order. Ends after `EndOfList`; yields `Err` once and stops at
/// an option whose length octet is missing, below 2 or runs past the end. Every step consumes
/// at least one byte, so it always ends.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// The options in `data` (e.g. [`TcpPacket::options`]).
    pub const fn new(data: &'a [u8]) -> Self {
        TcpOptions { rest: data }
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match TcpOption::parse(self.rest) {
            Ok((option, rest)) => {
                self.rest = if option == TcpOption::EndOfList { &[] } else { rest };
                Some(Ok(option))
            }
            Err(err) => {
                self.rest = &[];
                Some(Err(err))
            }
        }
    }
}

/// The options of nearly every segment of an established connection with timestamps: NOP, NOP,
/// timestamps, in exactly 12 bytes (RFC 7323 appendix A's layout, which Linux and pronghorn
/// send).
const ALIGNED_TIMESTAMP: [u8; 4] = [option_kind::NO_OPERATION, option_kind::NO_OPERATION, option_kind::TIMESTAMPS, 10];

/// (TSval, TSecr) when `options` are exactly [`ALIGNED_TIMESTAMP`] and the two values: read
/// with one comparison instead of the option walk, as Linux's `tcp_parse_aligned_timestamp`
/// does. `None` for any other layout, which the walk reads.
fn aligned_timestamp(options: &[u8]) -> Option<(u32, u32)> {
    let options: &[u8; 12] = options.try_into().ok()?;
    (options[..4] == ALIGNED_TIMESTAMP).then(|| (be::u32_at(options, 4), be::u32_at(options, 8)))
}

/// The meaning of a TCP header; the payload stays in the packet ([`TcpPacket::payload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpRepr {
    /// Source Port.
    pub src_port: u16,
    /// Destination Port.
    pub dst_port: u16,
    /// Sequence Number.
    pub seq_number: u32,
    /// Acknowledgment Number, present iff ACK is set.
    pub ack_number: Option<u32>,
    /// Control bits. On emit, ACK follows `ack_number` whatever this says.
    pub flags: TcpFlags,
    /// Window, unscaled.
    pub window_len: u16,
    /// Window Scale option; a shift above 14 is read as 14 (RFC 7323 section 2.3).
    pub window_scale: Option<u8>,
    /// Maximum Segment Size option.
    pub max_seg_size: Option<u16>,
    /// SACK Permitted option.
    pub sack_permitted: bool,
    /// SACK blocks, `Some` ones first.
    pub sack_ranges: [Option<(u32, u32)>; 4],
    /// Timestamps option: (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// Length of the payload.
    pub payload_len: usize,
    /// Urgent Pointer, meaningful with URG: an offset from the Sequence Number. Carried as is
    /// both ways; what it points at (RFC 9293 says the last urgent byte, RFC 6093 and every
    /// common stack the byte after it) is the state machine's business.
    pub urgent_at: u16,
}

impl TcpRepr {
    /// Reads a segment sent from `src_addr` to `dst_addr`: checks the lengths, non-zero ports
    /// and the checksum (if `verify_checksum`). Options are read whatever the flags (the state
    /// machine ignores those that do not belong, like MSS outside a SYN); for a repeated option
    /// the last wins; the urgent pointer is read whatever URG says.
    ///
    /// Options never make a segment fail to parse, as in Linux's `tcp_parse_options`: unknown
    /// options and known ones with the wrong length are skipped, and an option whose length
    /// octet is missing, below 2 or runs past the option area ends the walk, keeping the
    /// options read before it.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &TcpPacket<&T>,
        src_addr: &IpAddress,
        dst_addr: &IpAddress,
        verify_checksum: bool,
    ) -> Result<TcpRepr> {
        packet.check_len()?;
        if packet.src_port() == 0 || packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if verify_checksum && !packet.verify_checksum(src_addr, dst_addr) {
            return Err(Error::Checksum);
        }
        let mut repr = TcpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: if packet.ack() { Some(packet.ack_number()) } else { None },
            flags: packet.flags(),
            window_len: packet.window_len(),
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 4],
            timestamp: None,
            payload_len: packet.payload().len(),
            urgent_at: packet.urgent_at(),
        };
        let options = packet.options();
        match aligned_timestamp(options) {
            Some(timestamp) => repr.timestamp = Some(timestamp),
            None => repr.read_options(options),
        }
        Ok(repr)
    }

    /// Takes the options of `options` the way [`TcpRepr::parse`] describes.
    fn read_options(&mut self, options: &[u8]) {
        for option in TcpOptions::new(options).map_while(Result::ok) {
            match option {
                TcpOption::MaxSegmentSize(mss) => self.max_seg_size = Some(mss),
                TcpOption::WindowScale(shift) => self.window_scale = Some(shift.min(14)),
                TcpOption::SackPermitted => self.sack_permitted = true,
                TcpOption::SackRange(blocks) => self.sack_ranges = blocks,
                TcpOption::Timestamps { tsval, tsecr } => self.timestamp = Some((tsval, tsecr)),
                TcpOption::EndOfList
                | TcpOption::NoOperation
                | TcpOption::WrongLength { .. }
                | TcpOption::Unknown { .. } => {}
            }
        }
    }

    /// Length of the options without SACK blocks.
    fn base_options_len(&self) -> usize {
        // MSS; SACK permitted and timestamps, or NOP NOP timestamps (12), or NOP NOP SACK
        // permitted (4); NOP window scale. Added without a branch: every segment sizes its
        // header several times.
        let timestamps = usize::from(self.timestamp.is_some());
        4 * usize::from(self.max_seg_size.is_some())
            + 12 * timestamps
            + 4 * usize::from(self.sack_permitted) * (1 - timestamps)
            + 4 * usize::from(self.window_scale.is_some())
    }

    /// How many SACK blocks fit after the other options: up to 4 alone, 3 with timestamps.
    fn sack_blocks(&self) -> usize {
        let wanted = self.sack_ranges.iter().flatten().count();
        let room = MAX_OPTIONS_LEN - self.base_options_len();
        if wanted == 0 || room < 4 + 8 {
            0
        } else {
            wanted.min((room - 4) / 8)
        }
    }

    /// Length of the header this emits: 20 bytes and the options, every one aligned with NOPs
    /// the way Linux lays them out, so the total is a multiple of 4.
    pub fn header_len(&self) -> usize {
        let sack = match self.sack_blocks() {
            0 => 0,
            n => 4 + 8 * n, // NOP NOP SACK
        };
        HEADER_LEN + self.base_options_len() + sack
    }

    /// Length of the segment this describes.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Sequence space the segment occupies: payload, SYN and FIN.
    pub fn segment_len(&self) -> usize {
        self.payload_len
            + usize::from(self.flags.contains(TcpFlags::SYN))
            + usize::from(self.flags.contains(TcpFlags::FIN))
    }

    /// Writes the header and copies `payload` (which must be `payload_len` bytes) after it; see
    /// [`emit_header`].
    ///
    /// [`emit_header`]: TcpRepr::emit_header
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        src_addr: &IpAddress,
        dst_addr: &IpAddress,
        payload: &[u8],
        fill_checksum: bool,
    ) {
        debug_assert_eq!(payload.len(), self.payload_len);
        let start = self.header_len();
        packet.buffer.as_mut()[start..start + payload.len()].copy_from_slice(payload);
        self.emit_header(packet, src_addr, dst_addr, fill_checksum);
    }

    /// Writes the header of a segment whose `payload_len` bytes are already in place after
    /// [`header_len`] bytes. The buffer must hold at least [`buffer_len`] bytes; the checksum
    /// covers exactly that many.
    ///
    /// Options go in Linux's order: MSS, SACK permitted and timestamps, window scale, SACK
    /// blocks (those that do not fit the 40 bytes of option space are left out). With
    /// `fill_checksum` the checksum is computed; without it (transmit offload) the field gets
    /// the pseudo-header sum, which is what NICs finishing the checksum expect (DPDK's
    /// `RTE_MBUF_F_TX_TCP_CKSUM`, Linux's `CHECKSUM_PARTIAL`).
    ///
    /// [`header_len`]: TcpRepr::header_len
    /// [`buffer_len`]: TcpRepr::buffer_len
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        src_addr: &IpAddress,
        dst_addr: &IpAddress,
        fill_checksum: bool,
    ) {
        let header_len = self.header_len();
        let mut flags = self.flags;
        flags.set(TcpFlags::ACK, self.ack_number.is_some());
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number.unwrap_or(0));
        packet.set_header_len(header_len as u8);
        packet.set_flags(flags);
        packet.set_window_len(self.window_len);
        packet.set_checksum(0);
        packet.set_urgent_at(self.urgent_at);

        let nop = TcpOption::NoOperation;
        let mut options = &mut packet.buffer.as_mut()[field::OPTIONS..header_len];
        if let Some(mss) = self.max_seg_size {
            options = TcpOption::MaxSegmentSize(mss).emit(options);
        }
        match (self.sack_permitted, self.timestamp) {
            (true, Some((tsval, tsecr))) => {
                options = TcpOption::SackPermitted.emit(options);
                options = TcpOption::Timestamps { tsval, tsecr }.emit(options);
            }
            (false, Some((tsval, tsecr))) => {
                let (aligned, rest) = options.split_at_mut(ALIGNED_TIMESTAMP.len() + 8);
                aligned[..4].copy_from_slice(&ALIGNED_TIMESTAMP);
                be::set_u32(aligned, 4, tsval);
                be::set_u32(aligned, 8, tsecr);
                options = rest;
            }
            (true, None) => {
                options = nop.emit(nop.emit(options));
                options = TcpOption::SackPermitted.emit(options);
            }
            (false, None) => {}
        }
        if let Some(shift) = self.window_scale {
            options = TcpOption::WindowScale(shift).emit(nop.emit(options));
        }
        let blocks = self.sack_blocks();
        if blocks > 0 {
            let mut ranges = [None; 4];
            for (slot, range) in ranges.iter_mut().zip(self.sack_ranges.iter().flatten()).take(blocks) {
                *slot = Some(*range);
            }
            options = TcpOption::SackRange(ranges).emit(nop.emit(nop.emit(options)));
        }
        debug_assert!(options.is_empty());

        let segment_len = header_len + self.payload_len;
        if fill_checksum {
            let segment = &packet.buffer.as_ref()[..segment_len];
            packet.set_checksum(!segment_sum(segment, src_addr, dst_addr));
        } else {
            let length = segment_len as u32;
            packet.set_checksum(checksum::pseudo_header(src_addr, dst_addr, IpProtocol::Tcp, length));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::Ipv4Address;
    use crate::ipv6::Ipv6Address;
    use crate::tests::TCP_SYN;

    const IP: usize = crate::ethernet::HEADER_LEN + crate::ipv4::HEADER_LEN;

    fn v4_addrs() -> (IpAddress, IpAddress) {
        (IpAddress::V4(Ipv4Address::new(192, 168, 1, 10)), IpAddress::V4(Ipv4Address::new(192, 168, 1, 1)))
    }

    fn syn_repr() -> TcpRepr {
        TcpRepr {
            src_port: 54321,
            dst_port: 80,
            seq_number: 0x5a3c_8f21,
            ack_number: None,
            flags: TcpFlags::SYN,
            window_len: 64240,
            window_scale: Some(7),
            max_seg_size: Some(1460),
            sack_permitted: true,
            sack_ranges: [None; 4],
            timestamp: Some((0x2a3b_4c5d, 0)),
            payload_len: 0,
            urgent_at: 0,
        }
    }

    #[test]
    fn parse_captured_syn() {
        let (src, dst) = v4_addrs();
        let packet = TcpPacket::new_checked(&TCP_SYN[IP..]).unwrap();
        assert_eq!(packet.src_port(), 54321);
        assert_eq!(packet.dst_port(), 80);
        assert_eq!(packet.seq_number(), 0x5a3c_8f21);
        assert_eq!(packet.ack_number(), 0);
        assert_eq!(packet.header_len(), 40);
        assert_eq!(packet.flags(), TcpFlags::SYN);
        assert!(packet.syn() && !packet.ack() && !packet.fin() && !packet.rst());
        assert_eq!(packet.window_len(), 64240);
        assert_eq!(packet.checksum(), 0x953b);
        assert_eq!(packet.urgent_at(), 0);
        assert!(packet.verify_checksum(&src, &dst));
        assert_eq!(packet.payload(), &[] as &[u8]);
        let options: std::vec::Vec<_> = TcpOptions::new(packet.options()).collect();
        assert_eq!(
            options,
            [
                Ok(TcpOption::MaxSegmentSize(1460)),
                Ok(TcpOption::SackPermitted),
                Ok(TcpOption::Timestamps { tsval: 0x2a3b_4c5d, tsecr: 0 }),
                Ok(TcpOption::NoOperation),
                Ok(TcpOption::WindowScale(7)),
            ]
        );
        let repr = TcpRepr::parse(&packet, &src, &dst, true).unwrap();
        assert_eq!(repr, syn_repr());
        assert_eq!(repr.segment_len(), 1);
    }

    #[test]
    fn emit_reproduces_linux_syn() {
        let (src, dst) = v4_addrs();
        let repr = syn_repr();
        assert_eq!(repr.header_len(), 40);
        let mut bytes = [0u8; 40];
        repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..]), &src, &dst, &[], true);
        assert_eq!(bytes, TCP_SYN[IP..]);
    }

    #[test]
    fn bad_checksum_rejected() {
        let (src, dst) = v4_addrs();
        let mut bytes = TCP_SYN[IP..].to_vec();
        bytes[15] ^= 0x10; // window
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(TcpRepr::parse(&packet, &src, &dst, true), Err(Error::Checksum));
        assert_eq!(TcpRepr::parse(&packet, &src, &dst, false).unwrap().window_len, 64240 ^ 0x10);
        // Right bytes, wrong addresses.
        let packet = TcpPacket::new_checked(&TCP_SYN[IP..]).unwrap();
        let other = IpAddress::V4(Ipv4Address::new(192, 168, 1, 2));
        assert_eq!(TcpRepr::parse(&packet, &src, &other, true), Err(Error::Checksum));
    }

    #[test]
    fn truncated_and_bad_offsets() {
        let (src, dst) = v4_addrs();
        let good = &TCP_SYN[IP..];
        for len in 0..good.len() {
            let packet = TcpPacket::new_unchecked(&good[..len]);
            assert_eq!(TcpRepr::parse(&packet, &src, &dst, false), Err(Error::Truncated), "{len}");
        }
        let mut bytes = good.to_vec();
        bytes[12] = 0x40; // data offset 4
        assert_eq!(TcpPacket::new_checked(&bytes[..]), Err(Error::Malformed));
        bytes[12] = 0xf0; // data offset 15: 60 bytes, more than there are
        assert_eq!(TcpPacket::new_checked(&bytes[..]), Err(Error::Truncated));
        let mut bytes = good.to_vec();
        bytes[2..4].copy_from_slice(&[0, 0]); // destination port 0
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(TcpRepr::parse(&packet, &src, &dst, false), Err(Error::Malformed));
    }

    #[test]
    fn round_trips() {
        let v6 = (
            IpAddress::V6(Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            IpAddress::V6(Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
        );
        let sack = [Some((1000, 2000)), Some((3000, 4000)), Some((5000, 6000)), Some((7000, 8000))];
        let base = TcpRepr {
            src_port: 80,
            dst_port: 40000,
            seq_number: 0xffff_fff0,
            ack_number: Some(12345),
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window_len: 501,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 4],
            timestamp: None,
            payload_len: 5,
            urgent_at: 0,
        };
        let reprs = [
            (base, 20),
            (TcpRepr { timestamp: Some((1, 2)), ..base }, 32),
            (TcpRepr { sack_ranges: sack, ..base }, 56),
            (TcpRepr { sack_ranges: [sack[0], None, None, None], ..base }, 32),
            (TcpRepr { sack_permitted: true, ..base }, 24),
            (TcpRepr { window_scale: Some(0), flags: TcpFlags::SYN | TcpFlags::ACK, ..base }, 24),
            (
                TcpRepr {
                    flags: TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE,
                    max_seg_size: Some(1440),
                    window_scale: Some(14),
                    sack_permitted: true,
                    timestamp: Some((0xdead_beef, 0x0bad_cafe)),
                    ..base
                },
                40,
            ),
            (TcpRepr { flags: TcpFlags::FIN | TcpFlags::ACK | TcpFlags::CWR, ..base }, 20),
            (TcpRepr { flags: TcpFlags::RST, ack_number: None, ..base }, 20),
            (TcpRepr { flags: TcpFlags::ACK | TcpFlags::URG, urgent_at: 0xfffe, ..base }, 20),
        ];
        for (src, dst) in [v4_addrs(), v6] {
            for (repr, header_len) in reprs {
                assert_eq!(repr.header_len(), header_len, "{repr:?}");
                let mut bytes = std::vec![0xa5u8; repr.buffer_len()];
                repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..]), &src, &dst, b"hello", true);
                let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
                assert_eq!(usize::from(packet.header_len()), header_len);
                assert_eq!(packet.payload(), b"hello");
                assert_eq!(TcpRepr::parse(&packet, &src, &dst, true).unwrap(), repr);
            }
        }
    }

    #[test]
    fn sack_blocks_that_do_not_fit_are_left_out() {
        let (src, dst) = v4_addrs();
        let sack = [Some((1, 2)), Some((3, 4)), Some((5, 6)), Some((7, 8))];
        let repr = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq_number: 3,
            ack_number: Some(4),
            flags: TcpFlags::ACK,
            window_len: 5,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: sack,
            timestamp: Some((9, 10)),
            payload_len: 0,
            urgent_at: 0,
        };
        // 12 bytes of timestamps leave room for 3 blocks: 12 + 4 + 24 = 40.
        assert_eq!(repr.header_len(), 60);
        let mut bytes = [0u8; 60];
        repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..]), &src, &dst, &[], true);
        assert_eq!(bytes[20..24], [1, 1, 8, 10]);
        assert_eq!(bytes[32..36], [1, 1, 5, 26]);
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        let parsed = TcpRepr::parse(&packet, &src, &dst, true).unwrap();
        assert_eq!(parsed.sack_ranges, [sack[0], sack[1], sack[2], None]);
        assert_eq!(parsed.timestamp, Some((9, 10)));
        // With MSS and window scale too (a SYN would not carry SACK blocks): 2 fit.
        let crowded = TcpRepr { max_seg_size: Some(1), window_scale: Some(1), sack_permitted: true, ..repr };
        assert_eq!(crowded.sack_blocks(), 2);
        assert_eq!(crowded.header_len(), 60);
    }

    #[test]
    fn window_scale_is_clamped() {
        let (src, dst) = v4_addrs();
        let repr = TcpRepr { window_scale: Some(15), ..syn_repr() };
        let mut bytes = [0u8; 40];
        repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..]), &src, &dst, &[], true);
        assert_eq!(bytes[39], 15);
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(TcpRepr::parse(&packet, &src, &dst, true).unwrap().window_scale, Some(14));
    }

    #[test]
    fn offloaded_emit_writes_pseudo_header_sum() {
        let (src, dst) = v4_addrs();
        let repr = syn_repr();
        let mut bytes = [0u8; 40];
        repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..]), &src, &dst, &[], false);
        // c0a8 + 010a + c0a8 + 0101 + 0006 + 0028 = 0x18389 -> 0x838a
        assert_eq!(bytes[16..18], [0x83, 0x8a]);
        // What the NIC does with it gives the checksum Linux sent.
        assert_eq!(!checksum::data(&bytes), 0x953b);
    }

    /// A segment from 1 to 2 with `options` (padded with EOL to a multiple of 4) and one byte
    /// of data, checksum filled.
    fn segment_with_options(options: &[u8]) -> std::vec::Vec<u8> {
        let (src, dst) = v4_addrs();
        let header_len = HEADER_LEN + options.len().div_ceil(4) * 4;
        let mut bytes = std::vec![0u8; header_len + 1];
        let mut packet = TcpPacket::new_unchecked(&mut bytes[..]);
        packet.set_src_port(1);
        packet.set_dst_port(2);
        packet.set_header_len(header_len as u8);
        packet.set_flags(TcpFlags::SYN);
        packet.options_mut()[..options.len()].copy_from_slice(options);
        packet.fill_checksum(&src, &dst);
        bytes
    }

    #[test]
    fn option_walk_stops_where_no_length_can_be_trusted() {
        // Linux's tcp_parse_options returns at these, keeping what it read before.
        let bad: &[&[u8]] = &[
            &[2],                   // kind without length
            &[2, 0, 0, 0],          // length 0
            &[3, 1, 0, 0],          // length 1
            &[1, 2, 4, 5],          // MSS cut short
            &[8, 10, 0, 0, 0, 0],   // timestamps cut short
            &[1, 1, 200, 40, 0, 0], // unknown kind longer than the options
        ];
        let (src, dst) = v4_addrs();
        for options in bad {
            let parsed: std::vec::Vec<_> = TcpOptions::new(options).collect();
            assert_eq!(parsed.last(), Some(&Err(Error::Malformed)), "{options:?}");

            // In a segment, the segment is still read, without options.
            let bytes = segment_with_options(options);
            let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
            let repr = TcpRepr::parse(&packet, &src, &dst, true).unwrap();
            assert_eq!((repr.max_seg_size, repr.timestamp, repr.payload_len), (None, None, 1), "{options:?}");
        }
        // Options before the bad one count: a good MSS, then a cut window scale.
        let bytes = segment_with_options(&[1, 1, 2, 4, 5, 180, 3, 1, 1]);
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        let repr = TcpRepr::parse(&packet, &src, &dst, true).unwrap();
        assert_eq!((repr.max_seg_size, repr.window_scale), (Some(1460), None));
        assert_eq!(TcpOption::parse(&[]), Err(Error::Truncated));
    }

    #[test]
    fn known_option_of_wrong_length_is_skipped() {
        // Linux ignores a known option whose length is wrong for its kind and goes on by its
        // length octet.
        let wrong: &[(&[u8], u8)] = &[
            (&[2, 3, 5], 2),                             // MSS of length 3
            (&[2, 5, 5, 180, 0], 2),                     // MSS of length 5
            (&[3, 4, 7, 0], 3),                          // window scale of length 4
            (&[4, 3, 0], 4),                             // SACK permitted of length 3
            (&[8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 8), // timestamps of length 12
            (&[5, 2], 5),                                // SACK with no block
            (&[5, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0], 5),    // SACK of length 11
        ];
        let (src, dst) = v4_addrs();
        // Each, followed by a good MSS and window scale.
        for (option, kind) in wrong {
            let mut options = option.to_vec();
            options.extend_from_slice(&[2, 4, 2, 0, 3, 3, 9]);
            let parsed: std::vec::Vec<_> = TcpOptions::new(&options).collect();
            assert_eq!(
                parsed,
                [
                    Ok(TcpOption::WrongLength { kind: *kind, data: &option[2..] }),
                    Ok(TcpOption::MaxSegmentSize(512)),
                    Ok(TcpOption::WindowScale(9)),
                ],
                "{option:?}"
            );
            let bytes = segment_with_options(&options);
            let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
            let repr = TcpRepr::parse(&packet, &src, &dst, true).unwrap();
            assert_eq!((repr.max_seg_size, repr.window_scale, repr.payload_len), (Some(512), Some(9), 1));
            assert_eq!((repr.sack_permitted, repr.sack_ranges, repr.timestamp), (false, [None; 4], None));
        }
        // A wrong one after a good one of the same kind leaves the good one.
        let bytes = segment_with_options(&[8, 10, 0, 0, 0, 7, 0, 0, 0, 0, 8, 9, 0, 0, 0, 0, 0, 0, 0]);
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(TcpRepr::parse(&packet, &src, &dst, true).unwrap().timestamp, Some((7, 0)));
        // SACK of 5 blocks (42 bytes) is more than an option area holds.
        let mut five = [0u8; 42];
        five[..2].copy_from_slice(&[5, 42]);
        assert_eq!(TcpOption::parse(&five), Ok((TcpOption::WrongLength { kind: 5, data: &five[2..] }, &[][..])));
    }

    #[test]
    fn lenient_option_cases() {
        // Anything after End of Option List is padding, garbage included.
        let parsed: std::vec::Vec<_> = TcpOptions::new(&[1, 0, 2, 0xff]).collect();
        assert_eq!(parsed, [Ok(TcpOption::NoOperation), Ok(TcpOption::EndOfList)]);
        // Unknown kinds are carried and skipped.
        let parsed: std::vec::Vec<_> = TcpOptions::new(&[30, 4, 0xab, 0xcd, 1]).collect();
        assert_eq!(parsed, [Ok(TcpOption::Unknown { kind: 30, data: &[0xab, 0xcd] }), Ok(TcpOption::NoOperation)]);
        let (option, rest) = TcpOption::parse(&[5, 18, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 9]).unwrap();
        assert_eq!(option, TcpOption::SackRange([Some((1, 2)), Some((3, 4)), None, None]));
        assert_eq!(rest, &[9]);
    }

    #[test]
    fn option_emit_round_trip() {
        let options = [
            TcpOption::EndOfList,
            TcpOption::NoOperation,
            TcpOption::MaxSegmentSize(536),
            TcpOption::WindowScale(3),
            TcpOption::SackPermitted,
            TcpOption::SackRange([Some((1, 2)), Some((3, 4)), Some((5, 6)), Some((7, 8))]),
            TcpOption::Timestamps { tsval: 1, tsecr: 2 },
            TcpOption::WrongLength { kind: 2, data: &[1, 2, 3] },
            TcpOption::Unknown { kind: 254, data: &[1, 2, 3] },
        ];
        for option in options {
            let mut buf = [0u8; 40];
            let left = option.emit(&mut buf).len();
            assert_eq!(40 - left, option.buffer_len());
            let (parsed, _) = TcpOption::parse(&buf[..option.buffer_len()]).unwrap();
            assert_eq!(parsed, option);
        }
    }

    #[test]
    fn garbage_options_never_panic_nor_loop() {
        // Every 1-, 2- and 3-byte option area, then pseudo-random 40-byte ones.
        let mut areas: std::vec::Vec<std::vec::Vec<u8>> = std::vec::Vec::new();
        for a in 0..=255u8 {
            areas.push(std::vec![a]);
            for b in 0..=255u8 {
                areas.push(std::vec![a, b]);
                areas.push(std::vec![a, b, 10]);
            }
        }
        let mut rng = testkit::Rng::new(0x1234_5678_9abc_def1);
        for _ in 0..20_000 {
            // Mostly small kinds and lengths, so that real options show up.
            let area: std::vec::Vec<u8> = (0..40).map(|_| (rng.next_u64() % 12) as u8).collect();
            areas.push(area);
        }
        for area in &areas {
            assert!(TcpOptions::new(area).count() <= area.len());
        }
    }

    #[test]
    fn aligned_timestamp_fast_path_agrees_with_the_option_walk() {
        // Random option areas, most of them 12 bytes and many starting like the aligned
        // layout (or one byte off it), plus a few other lengths: `parse` (which takes the fast
        // path when it can) must read exactly what the general walk reads.
        let (src, dst) = v4_addrs();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut fast = 0;
        for round in 0..50_000 {
            let len = if round % 8 == 0 { (next() % 11) as usize * 4 } else { 12 };
            let mut area: std::vec::Vec<u8> = (0..len).map(|_| (next() % 12) as u8).collect();
            if len >= 12 && round % 2 == 0 {
                area[..4].copy_from_slice(&ALIGNED_TIMESTAMP);
                let spoil = (next() % 8) as usize;
                if spoil < 4 {
                    area[spoil] = (next() % 12) as u8;
                }
                for b in &mut area[4..12] {
                    *b = next() as u8;
                }
            }
            let mut bytes = std::vec![0u8; HEADER_LEN + len];
            bytes[0..4].copy_from_slice(&[0x12, 0x34, 0x00, 0x50]);
            bytes[field::DATA_OFFSET] = (((HEADER_LEN + len) / 4) as u8) << 4;
            bytes[HEADER_LEN..].copy_from_slice(&area);
            let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
            let parsed = TcpRepr::parse(&packet, &src, &dst, false).unwrap();
            let mut walked = TcpRepr {
                timestamp: None,
                max_seg_size: None,
                window_scale: None,
                sack_permitted: false,
                sack_ranges: [None; 4],
                ..parsed
            };
            walked.read_options(&area);
            assert_eq!(parsed, walked, "options {area:02x?}");
            fast += usize::from(aligned_timestamp(&area).is_some());
        }
        assert!(fast > 10_000, "the fast path was taken {fast} times");
    }

    #[test]
    fn aligned_timestamp_emit_is_the_general_layout() {
        // NOP NOP timestamps, as the option-by-option emit wrote it.
        let (src, dst) = v4_addrs();
        let repr = TcpRepr {
            flags: TcpFlags::ACK,
            ack_number: Some(7),
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            timestamp: Some((0x0102_0304, 0xa0b0_c0d0)),
            ..syn_repr()
        };
        let mut bytes = [0u8; 32];
        repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..]), &src, &dst, &[], true);
        assert_eq!(bytes[HEADER_LEN..], [1, 1, 8, 10, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0]);
        let packet = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(TcpRepr::parse(&packet, &src, &dst, true).unwrap(), repr);
    }

    #[test]
    fn header_len_of_every_option_set() {
        // Every combination of the options and SACK blocks: the length is Linux's layout (the
        // table the branch-free sum replaced), emit fills exactly that much (its debug
        // assertion) and parse reads the options back.
        let (src, dst) = v4_addrs();
        for bits in 0..16u8 {
            for blocks in 0..=4usize {
                let mut sack_ranges = [None; 4];
                for (i, r) in sack_ranges.iter_mut().enumerate().take(blocks) {
                    *r = Some((i as u32 * 10, i as u32 * 10 + 5));
                }
                let repr = TcpRepr {
                    flags: TcpFlags::ACK,
                    ack_number: Some(1),
                    max_seg_size: (bits & 1 != 0).then_some(1460),
                    window_scale: (bits & 2 != 0).then_some(7),
                    sack_permitted: bits & 4 != 0,
                    timestamp: (bits & 8 != 0).then_some((1, 2)),
                    sack_ranges,
                    ..syn_repr()
                };
                let base = 4 * usize::from(bits & 1 != 0)
                    + match (bits & 4 != 0, bits & 8 != 0) {
                        (_, true) => 12,
                        (true, false) => 4,
                        (false, false) => 0,
                    }
                    + 4 * usize::from(bits & 2 != 0);
                let fit = if blocks == 0 { 0 } else { blocks.min((MAX_OPTIONS_LEN - base).saturating_sub(4) / 8) };
                let sack = if fit == 0 { 0 } else { 4 + 8 * fit };
                assert_eq!(repr.header_len(), HEADER_LEN + base + sack, "options {bits:04b}, {blocks} blocks");
                let mut bytes = [0u8; 60];
                repr.emit(&mut TcpPacket::new_unchecked(&mut bytes[..repr.header_len()]), &src, &dst, &[], true);
                let packet = TcpPacket::new_checked(&bytes[..repr.header_len()]).unwrap();
                let parsed = TcpRepr::parse(&packet, &src, &dst, true).unwrap();
                let mut expected = repr;
                expected.sack_ranges = [None; 4];
                expected.sack_ranges[..fit].copy_from_slice(&repr.sack_ranges[..fit]);
                assert_eq!(parsed, expected, "options {bits:04b}, {blocks} blocks");
            }
        }
    }

    #[test]
    fn flags_api() {
        let mut flags = TcpFlags::SYN | TcpFlags::ACK;
        assert!(flags.contains(TcpFlags::SYN) && flags.contains(TcpFlags::SYN | TcpFlags::ACK));
        assert!(!flags.contains(TcpFlags::SYN | TcpFlags::FIN));
        assert!(flags.intersects(TcpFlags::SYN | TcpFlags::FIN));
        assert_eq!(std::format!("{flags:?}"), "SYN|ACK");
        flags.remove(TcpFlags::SYN);
        flags |= TcpFlags::FIN;
        assert_eq!(flags.bits(), 0x11);
        flags.set(TcpFlags::ACK, false);
        assert_eq!(flags, TcpFlags::FIN);
        assert_eq!((TcpFlags::FIN | TcpFlags::PSH) - TcpFlags::PSH, TcpFlags::FIN);
        assert_eq!((TcpFlags::FIN | TcpFlags::PSH) & TcpFlags::PSH, TcpFlags::PSH);
        assert_eq!(std::format!("{:?}", TcpFlags::empty()), "(empty)");
        assert_eq!(std::format!("{:?}", TcpFlags::from_bits(0xff)), "FIN|SYN|RST|PSH|ACK|URG|ECE|CWR");
    }
}
