//! What the kernel says about an interface's XDP (Linux 6.3 and later): the generic netlink
//! family `netdev`, command `NETDEV_CMD_DEV_GET`, attribute `xdp-features` (a bitmask of
//! `NETDEV_XDP_ACT_*`). The parsing is pure (the tests read answers captured from Linux 6.18);
//! [`ask`] does the two requests (the family's id from `nlctrl`, then the device) on the live
//! host. A kernel without the family answers the first with ENOENT: doctor then falls back to
//! its list of drivers.

/// `NETDEV_XDP_ACT_*` (include/uapi/linux/netdev.h, Linux 6.3+; Debian 12's headers are 6.1's)
/// with the names the kernel's netlink spec gives them.
const XDP_ACT: [(u64, &str); 7] = [
    (1 << 0, "basic"),
    (1 << 1, "redirect"),
    (1 << 2, "ndo-xmit"),
    (1 << 3, "xsk-zerocopy"),
    (1 << 4, "hw-offload"),
    (1 << 5, "rx-sg"),
    (1 << 6, "ndo-xmit-sg"),
];
const XDP_ACT_BASIC: u64 = 1 << 0;
const XDP_ACT_REDIRECT: u64 = 1 << 1;
const XDP_ACT_XSK_ZEROCOPY: u64 = 1 << 3;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
/// nlmsghdr, then genlmsghdr (cmd, version, reserved).
const NLMSG_HEADER: usize = 16;
const GENL_HEADER: usize = 4;

/// The `xdp-features` the kernel reported for a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpFeatures(pub u64);

impl XdpFeatures {
    /// The driver runs XDP programs itself and can redirect to an AF_XDP socket (what
    /// pronghorn's program does); without it the kernel runs them on skbs (generic XDP).
    pub fn native(self) -> bool {
        self.0 & (XDP_ACT_BASIC | XDP_ACT_REDIRECT) == XDP_ACT_BASIC | XDP_ACT_REDIRECT
    }

    /// AF_XDP sockets on the device can run zero-copy.
    pub fn zero_copy(self) -> bool {
        self.0 & XDP_ACT_XSK_ZEROCOPY != 0
    }

    /// The features by the kernel's names (`basic, redirect, rx-sg`), or `none`.
    pub fn names(self) -> String {
        let names: Vec<&str> = XDP_ACT.iter().filter(|(bit, _)| self.0 & bit != 0).map(|&(_, n)| n).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }
}

/// What asking the kernel gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelXdp {
    Reported(XdpFeatures),
    /// The kernel has no `netdev` generic netlink family (older than 6.3).
    NoFamily,
    /// The kernel could not be asked or answered otherwise: why.
    Unanswered(String),
}

/// What the kernel answered: an id, or the errno of an NLMSG_ERROR.
#[derive(Debug, PartialEq, Eq)]
enum Answer<T> {
    Value(T),
    Errno(i32),
    Unreadable,
}

/// The family id in `nlctrl`'s answer to CTRL_CMD_GETFAMILY.
fn family_id(answer: &[u8]) -> Answer<u16> {
    reply(answer, |mut attrs| {
        attrs.find(|&(ty, v)| ty == CTRL_ATTR_FAMILY_ID && v.len() == 2).map(|(_, v)| u16::from_ne_bytes([v[0], v[1]]))
    })
}

/// The `xdp-features` in `netdev`'s answer to NETDEV_CMD_DEV_GET.
fn xdp_features(answer: &[u8]) -> Answer<XdpFeatures> {
    reply(answer, |mut attrs| {
        attrs
            .find(|&(ty, v)| ty == NETDEV_A_DEV_XDP_FEATURES && v.len() == 8)
            .map(|(_, v)| XdpFeatures(u64::from_ne_bytes(v.try_into().unwrap())))
    })
}

/// The first message of `answer`: an NLMSG_ERROR's errno, or what `read` finds in the
/// attributes after its generic netlink header.
fn reply<T>(answer: &[u8], read: impl FnOnce(Attributes<'_>) -> Option<T>) -> Answer<T> {
    let Some(header) = answer.get(..NLMSG_HEADER) else { return Answer::Unreadable };
    let len = u32::from_ne_bytes(header[0..4].try_into().unwrap()) as usize;
    let ty = u16::from_ne_bytes(header[4..6].try_into().unwrap());
    let Some(body) = answer.get(NLMSG_HEADER..len.max(NLMSG_HEADER)) else { return Answer::Unreadable };
    if ty == libc::NLMSG_ERROR as u16 {
        return match body.get(..4) {
            Some(e) => Answer::Errno(-i32::from_ne_bytes(e.try_into().unwrap())),
            None => Answer::Unreadable,
        };
    }
    match read(Attributes(body.get(GENL_HEADER..).unwrap_or(&[]))) {
        Some(v) => Answer::Value(v),
        None => Answer::Unreadable,
    }
}

/// Netlink attributes as (type, value).
struct Attributes<'a>(&'a [u8]);

impl<'a> Iterator for Attributes<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let header = self.0.get(..4)?;
        let len = usize::from(u16::from_ne_bytes([header[0], header[1]]));
        let ty = u16::from_ne_bytes([header[2], header[3]]) & 0x3fff; // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
        let value = self.0.get(4..len)?;
        self.0 = self.0.get((len + 3) & !3..).unwrap_or(&[]);
        Some((ty, value))
    }
}

/// A generic netlink request: `cmd` to family `family` with one attribute.
fn request(family: u16, cmd: u8, attr: u16, value: &[u8]) -> Vec<u8> {
    let attr_len = 4 + value.len();
    let len = NLMSG_HEADER + GENL_HEADER + ((attr_len + 3) & !3);
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&family.to_ne_bytes());
    m.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    m.extend_from_slice(&[0; 8]); // sequence and port id: the kernel's answer is the next message
    m.extend_from_slice(&[cmd, 1, 0, 0]);
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&attr.to_ne_bytes());
    m.extend_from_slice(value);
    m.resize(len, 0);
    m
}

/// Asks the running kernel for the XDP features of interface `ifindex` (in this namespace).
pub fn ask(ifindex: u32) -> KernelXdp {
    // SAFETY: a plain socket call; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_GENERIC) };
    if fd < 0 {
        return KernelXdp::Unanswered(format!("no generic netlink socket: {}", std::io::Error::last_os_error()));
    }
    let exchange = |m: Vec<u8>| -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; 8192];
        // SAFETY: `m` and `buf` are valid for their lengths; `fd` is open.
        let n = unsafe {
            if libc::send(fd, m.as_ptr().cast(), m.len(), 0) != m.len() as isize {
                return Err(format!("netlink send: {}", std::io::Error::last_os_error()));
            }
            libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0)
        };
        if n < 0 {
            return Err(format!("netlink recv: {}", std::io::Error::last_os_error()));
        }
        buf.truncate(n as usize);
        Ok(buf)
    };
    let answer = exchange(request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME, b"netdev\0"))
        .map(|a| family_id(&a))
        .and_then(|family| match family {
            Answer::Value(id) => {
                exchange(request(id, NETDEV_CMD_DEV_GET, NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes()))
                    .map(|a| Some(xdp_features(&a)))
            }
            Answer::Errno(libc::ENOENT) => Ok(None),
            Answer::Errno(e) => Err(format!("nlctrl: {}", std::io::Error::from_raw_os_error(e))),
            Answer::Unreadable => Err("nlctrl's answer does not parse".to_owned()),
        });
    // SAFETY: `fd` is this function's.
    unsafe { libc::close(fd) };
    of(answer)
}

/// The outcome of the two requests: None for the first's ENOENT (no `netdev` family).
fn of(answer: Result<Option<Answer<XdpFeatures>>, String>) -> KernelXdp {
    match answer {
        Ok(None) => KernelXdp::NoFamily,
        Ok(Some(Answer::Value(f))) => KernelXdp::Reported(f),
        Ok(Some(Answer::Errno(e))) => {
            KernelXdp::Unanswered(format!("netdev dev-get: {}", std::io::Error::from_raw_os_error(e)))
        }
        Ok(Some(Answer::Unreadable)) => KernelXdp::Unanswered("netdev's answer has no xdp-features".to_owned()),
        Err(e) => KernelXdp::Unanswered(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers of Linux 6.18 captured with a raw NETLINK_GENERIC socket: `nlctrl`'s to
    /// CTRL_CMD_GETFAMILY for `netdev` and for a family it has not, and `netdev`'s to
    /// NETDEV_CMD_DEV_GET for the lab's veth (pronghorn lab up) and for `lo`.
    const FAMILY_NETDEV: &[u8] = include_bytes!("testdata/ctrl_getfamily_netdev.bin");
    const FAMILY_MISSING: &[u8] = include_bytes!("testdata/ctrl_getfamily_missing.bin");
    const DEV_GET_VETH: &[u8] = include_bytes!("testdata/netdev_dev_get_veth.bin");
    const DEV_GET_LO: &[u8] = include_bytes!("testdata/netdev_dev_get_lo.bin");

    #[test]
    fn the_family_id_is_read_from_nlctrl_and_its_absence_is_enoent() {
        assert_eq!(family_id(FAMILY_NETDEV), Answer::Value(0x14));
        assert_eq!(family_id(FAMILY_MISSING), Answer::Errno(libc::ENOENT));
        assert_eq!(of(Ok(None)), KernelXdp::NoFamily);
        assert_eq!(family_id(&FAMILY_NETDEV[..10]), Answer::Unreadable);
    }

    #[test]
    fn a_veths_xdp_features_are_native_without_zero_copy_and_lo_has_none() {
        let Answer::Value(veth) = xdp_features(DEV_GET_VETH) else { panic!("{:?}", xdp_features(DEV_GET_VETH)) };
        assert_eq!(veth, XdpFeatures(0x23));
        assert_eq!(veth.names(), "basic, redirect, rx-sg");
        assert!(veth.native() && !veth.zero_copy());
        let Answer::Value(lo) = xdp_features(DEV_GET_LO) else { panic!("{:?}", xdp_features(DEV_GET_LO)) };
        assert_eq!((lo.names().as_str(), lo.native()), ("none", false));
        assert!(XdpFeatures(0x0b).zero_copy(), "basic, redirect, xsk-zerocopy: an ice NIC's");
    }

    #[test]
    fn a_truncated_answer_is_unreadable_not_a_panic() {
        for cut in 0..DEV_GET_VETH.len() {
            let a = xdp_features(&DEV_GET_VETH[..cut]);
            assert!(matches!(a, Answer::Unreadable), "cut at {cut}: {a:?}");
        }
    }

    #[test]
    fn the_request_is_what_the_kernel_takes() {
        // What the capture script sent for ifindex 3304, but with sequence 0.
        let r = request(0x14, NETDEV_CMD_DEV_GET, NETDEV_A_DEV_IFINDEX, &3304u32.to_ne_bytes());
        assert_eq!(r.len(), 28);
        assert_eq!(&r[4..6], &0x14u16.to_ne_bytes());
        assert_eq!(&r[16..], &[1, 1, 0, 0, 8, 0, 1, 0, 0xe8, 0x0c, 0, 0]);
    }
}
