//! The addresses the kernel has on an interface (getifaddrs), for `address = "auto"` on an
//! interface shared with the kernel.

use std::ffi::CStr;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An address with its prefix length.
pub type Cidr<A> = (A, u8);

/// An interface's first IPv4 and first global IPv6 address.
pub type GlobalAddresses = (Option<Cidr<Ipv4Addr>>, Option<Cidr<Ipv6Addr>>);

/// The first IPv4 address and the first IPv6 address that is not link-local that the kernel
/// has on interface `iface` in this network namespace, with their prefix lengths.
pub fn global_addresses(iface: &str) -> io::Result<GlobalAddresses> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (mut v4, mut v6) = (None, None);
    let mut at = list;
    while !at.is_null() {
        // SAFETY: a node of the list getifaddrs made; its pointers are null or valid, and an
        // address of family AF_INET (AF_INET6) and its mask are sockaddr_in (sockaddr_in6).
        unsafe {
            let ifa = &*at;
            at = ifa.ifa_next;
            if CStr::from_ptr(ifa.ifa_name).to_bytes() != iface.as_bytes()
                || ifa.ifa_addr.is_null()
                || ifa.ifa_netmask.is_null()
            {
                continue;
            }
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET if v4.is_none() => {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                    let m = &*ifa.ifa_netmask.cast::<libc::sockaddr_in>();
                    let prefix = u32::from_be(m.sin_addr.s_addr).count_ones() as u8;
                    v4 = Some((Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)), prefix));
                }
                libc::AF_INET6 if v6.is_none() => {
                    let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                    let m = &*ifa.ifa_netmask.cast::<libc::sockaddr_in6>();
                    let addr = Ipv6Addr::from(a.sin6_addr.s6_addr);
                    if !is_link_local(addr) {
                        v6 = Some((addr, u128::from_be_bytes(m.sin6_addr.s6_addr).count_ones() as u8));
                    }
                }
                _ => {}
            }
        }
    }
    // SAFETY: the list getifaddrs made, no longer used.
    unsafe { libc::freeifaddrs(list) };
    Ok((v4, v6))
}

fn is_link_local(a: Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_its_addresses_and_a_missing_interface_none() {
        let (v4, _) = global_addresses("lo").unwrap();
        assert_eq!(v4, Some((Ipv4Addr::LOCALHOST, 8)));
        assert_eq!(global_addresses("no-such-if0").unwrap(), (None, None));
        assert!(is_link_local("fe80::1".parse().unwrap()) && !is_link_local("fd99::1".parse().unwrap()));
    }
}
