//! Scripted tests, named after the rule they check. `harness` has the helpers.

mod ack_policy;
mod buffers;
mod bulk;
mod harness;
mod keepalive;
mod rfc5681;
mod rfc5961;
mod rfc6298;
mod rfc7323;
mod rfc9293;
mod sack;
mod time_wait;
mod urgent;
mod zero_window;

#[test]
fn connection_is_small() {
    let size = core::mem::size_of::<crate::Connection>();
    std::println!(
        "size_of::<Connection>() = {size}, size_of::<TimeWait>() = {}",
        core::mem::size_of::<crate::TimeWait>()
    );
    assert!(size <= 400, "{size}");
    assert!(core::mem::size_of::<crate::TimeWait>() <= 48);
}
