"""Tests of bench/lab_split.py (a server core's samples per request, by class).

  python3 -m unittest discover -s bench/tests
"""

import os
import sys
import unittest
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import core_split  # noqa: E402
import lab_split  # noqa: E402

# perf script -F comm,pid,ip,sym,dso of samples as this kernel records them (frames shortened).
KICK_WITH_PEER_RECEIVE = """mariadbd 20841 
\tffffffff821f64a8 __pi_memcpy ([kernel.kallsyms])
\tffffffff81e3f3e4 tcp_v4_rcv ([kernel.kallsyms])
\tffffffff81e3f3e4 __netif_receive_skb_one_core ([kernel.kallsyms])
\tffffffff82198b4e xsk_sendmsg ([kernel.kallsyms])
\tffffffff81e314b0 __x64_sys_sendto ([kernel.kallsyms])
\tffffffff821ef691 do_syscall_64 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t          10aba4 __send (/usr/lib/x86_64-linux-gnu/libc.so.6)

"""
KICK = """mariadbd 20841 
\tffffffff821f64a8 __pi_memcpy ([kernel.kallsyms])
\tffffffff81e3f3e4 skb_store_bits ([kernel.kallsyms])
\tffffffff82198514 __xsk_generic_xmit ([kernel.kallsyms])
\tffffffff81e314b0 __x64_sys_sendto ([kernel.kallsyms])
\t          10aba4 __send (/usr/lib/x86_64-linux-gnu/libc.so.6)

"""
NAPI = """napi/sq-a0-3728 20683 
\tffffffff82025afc tcp_wfree ([kernel.kallsyms])
\tffffffff81dbf136 veth_poll ([kernel.kallsyms])

"""
# A reschedule IPI taken in user mode, as perf sees it most often: held while interrupts were
# masked, the sample falls where the return to user space unmasks them.
RESCHEDULE = """mariadbd 20841 
\tffffffff81e3f3e4 irqentry_exit_to_user_mode ([kernel.kallsyms])
\tffffffff81000c82 asm_sysvec_reschedule_ipi ([kernel.kallsyms])
\t          5cd89d JOIN::optimize_inner() (/usr/sbin/mariadbd)

"""
# RPS's function call interrupt, whose softirq runs the server's TCP receive, inside a futex call.
RPS_IN_FUTEX = """mariadbd 20841 
\tffffffff81e3f3e4 tcp_rcv_established ([kernel.kallsyms])
\tffffffff81e3f3e4 process_backlog ([kernel.kallsyms])
\tffffffff81e3f3e4 handle_softirqs ([kernel.kallsyms])
\tffffffff81000c82 asm_sysvec_call_function_single ([kernel.kallsyms])
\tffffffff81e314b0 __x64_sys_futex ([kernel.kallsyms])

"""
# RPS's interrupt as perf sees it most often: held until the softirq unmasks interrupts.
RPS_AT_SOFTIRQ = """mariadbd 20841 
\tffffffff81e3f3e4 handle_softirqs ([kernel.kallsyms])
\tffffffff81e3f3e4 irq_exit_rcu ([kernel.kallsyms])
\tffffffff81000c82 asm_sysvec_call_function_single ([kernel.kallsyms])
\t          5cd89d alloc_root (/usr/sbin/mariadbd)

"""
# The same reschedule IPI's switch to the woken task, on the way back to user space.
_HEADER, _FRAMES = RESCHEDULE.split("\n", 1)
RESCHEDULE_SWITCH = _HEADER + """
\tffffffff81e3f3e4 finish_task_switch.isra.0 ([kernel.kallsyms])
\tffffffff81e3f3e4 __schedule ([kernel.kallsyms])
\tffffffff81e3f3e4 schedule ([kernel.kallsyms])
""" + _FRAMES
# RPS's hand-off of a client's frame to its core, at the end of the softirq a kick ran: the IPI.
IPI_SEND = """mariadbd 20841 
\tffffffff81e3f3e4 native_write_msr ([kernel.kallsyms])
\tffffffff81e3f3e4 x2apic_send_IPI ([kernel.kallsyms])
\tffffffff81e3f3e4 generic_exec_single ([kernel.kallsyms])
\tffffffff81e3f3e4 smp_call_function_single_async ([kernel.kallsyms])
\tffffffff81e3f3e4 net_rps_send_ipi ([kernel.kallsyms])
\tffffffff81e3f3e4 net_rx_action ([kernel.kallsyms])
\tffffffff81e3f3e4 handle_softirqs ([kernel.kallsyms])
\tffffffff82198514 __xsk_generic_xmit ([kernel.kallsyms])
\tffffffff81e314b0 __x64_sys_sendto ([kernel.kallsyms])
\t          10aba4 __send (/usr/lib/x86_64-linux-gnu/libc.so.6)

"""
TIMER = """mariadbd 20841 
\tffffffff81e3f3e4 hrtimer_interrupt ([kernel.kallsyms])
\tffffffff81000c82 asm_sysvec_apic_timer_interrupt ([kernel.kallsyms])

"""
FUTEX_SWITCH = """mariadbd 20841 
\tffffffff81e3f3e4 finish_task_switch.isra.0 ([kernel.kallsyms])
\tffffffff81e3f3e4 __schedule ([kernel.kallsyms])
\tffffffff81e3f3e4 futex_wait_queue ([kernel.kallsyms])
\tffffffff81e314b0 __x64_sys_futex ([kernel.kallsyms])
\t          10aba4 syscall (/usr/lib/x86_64-linux-gnu/libc.so.6)

"""
POLL = """mariadbd 20841 
\tffffffff81e3f3e4 do_sys_poll ([kernel.kallsyms])
\tffffffff81e314b0 __x64_sys_poll ([kernel.kallsyms])

"""
RECV_SWITCH = """mariadbd 20841 
\tffffffff81e3f3e4 __schedule ([kernel.kallsyms])
\tffffffff81e314b0 __x64_sys_recvfrom ([kernel.kallsyms])

"""
OTHER_CALL = """mariadbd 20841 
\tffffffff81e3f3e4 do_madvise ([kernel.kallsyms])
\tffffffff81e314b0 __x64_sys_madvise ([kernel.kallsyms])

"""
# Where the dispatcher inlined the `__x64_sys_*` wrapper: the function it calls names the call.
WRITE_INLINED = """redis-server 900 
\tffffffff81e3f3e4 tcp_sendmsg ([kernel.kallsyms])
\tffffffff81e3f3e4 ksys_write ([kernel.kallsyms])
\tffffffff81e3f3e4 x64_sys_call ([kernel.kallsyms])
\tffffffff81e3f3e4 do_syscall_64 ([kernel.kallsyms])

"""
DISPATCH_ONLY = """redis-server 900 
\tffffffff81e3f3e4 x64_sys_call ([kernel.kallsyms])
\tffffffff81e3f3e4 do_syscall_64 ([kernel.kallsyms])

"""
# A preemption as a call returns: the handler's frame is gone, the dispatcher's is there.
PREEMPTED_ON_RETURN = """mariadbd 20841 
\tffffffff81e3f3e4 finish_task_switch.isra.0 ([kernel.kallsyms])
\tffffffff81e3f3e4 __schedule ([kernel.kallsyms])
\tffffffff81e3f3e4 exit_to_user_mode_loop ([kernel.kallsyms])
\tffffffff81e3f3e4 do_syscall_64 ([kernel.kallsyms])

"""
FAULT = """mariadbd 20841 
\tffffffff821eb0e7 clear_page_erms ([kernel.kallsyms])
\tffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
\t          5cd89d alloc_root (/usr/sbin/mariadbd)

"""
USER = """mariadbd 20841 
\t          5cd89d operator new(unsigned long) (/usr/sbin/mariadbd)

mariadbd 20841 
\t          5cd89d runtime::poll::poll (/t/libpronghorn.so)

mariadbd 20841 
\t          5cd89d __memcpy_avx_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)

"""
IDLE = """swapper     0 
\tffffffff821eb0e7 pv_native_safe_halt ([kernel.kallsyms])

"""


def one(text, app="mariadbd"):
    samples = list(core_split.samples(text.splitlines(keepends=True)))
    assert len(samples) == 1, samples
    comm, frames = samples[0]
    return lab_split.classify(comm, frames, app)


class Classify(unittest.TestCase):
    def test_a_send_is_split_by_the_receive_work_run_inside_it(self):
        self.assertEqual(one(KICK_WITH_PEER_RECEIVE), "send calls: receive work inside")
        self.assertEqual(one(KICK), "send calls")

    def test_the_napi_thread_is_the_nic_stand_in_whatever_it_runs(self):
        self.assertEqual(one(NAPI), "NIC stand-in: the XDP veth's NAPI thread")

    def test_the_innermost_entry_decides_an_interrupt_inside_a_system_call(self):
        self.assertEqual(one(RESCHEDULE_SWITCH), "interrupts: reschedule")
        self.assertEqual(one(RPS_IN_FUTEX), "interrupts: network receive (RPS)")
        self.assertEqual(one(TIMER), "interrupts: other")

    def test_a_sample_held_until_an_interrupt_unmasks_is_the_interrupts_entry(self):
        masked = "interrupts: time masked at entry (delivery and handler)"
        self.assertEqual(one(RESCHEDULE), masked)
        self.assertEqual(one(RPS_AT_SOFTIRQ), masked)

    def test_sending_an_ipi_is_its_own_class_inside_any_call(self):
        self.assertEqual(one(IPI_SEND), "IPIs sent: the write to the interrupt controller")
        # Without the write, the same send is a send with receive work inside.
        self.assertEqual(one(KICK_WITH_PEER_RECEIVE), "send calls: receive work inside")

    def test_waits_are_split_into_switching_and_the_rest(self):
        self.assertEqual(one(FUTEX_SWITCH), "futex: switching")
        self.assertEqual(one(POLL), "poll, epoll, select: waits and wakes")

    def test_a_receive_call_is_one_class_switch_or_not_and_other_calls_are_other(self):
        self.assertEqual(one(RECV_SWITCH), "receive calls")
        self.assertEqual(one(OTHER_CALL), "other system calls")

    def test_a_call_whose_wrapper_was_inlined_is_named_by_what_the_dispatcher_called(self):
        self.assertEqual(one(WRITE_INLINED), "send calls")
        self.assertEqual(one(DISPATCH_ONLY), "other system calls")
        self.assertEqual(one(PREEMPTED_ON_RETURN), "returns to user space: preemption, rseq")

    def test_a_page_fault_from_user_code_is_a_page_fault(self):
        self.assertEqual(one(FAULT), "page faults")

    def test_user_leaves_go_by_their_object_even_with_spaces_in_the_symbol(self):
        samples = list(core_split.samples(USER.splitlines(keepends=True)))
        self.assertEqual([lab_split.classify(c, f, "mariadbd") for c, f in samples],
                         ["application code", "libpronghorn.so", "libc and other libraries"])
        self.assertEqual(lab_split.classify(*samples[0], "redis-server"), "libc and other libraries")

    def test_the_idle_task_is_not_busy(self):
        self.assertIsNone(one(IDLE))
        per, busy = lab_split.split((IDLE + POLL + FAULT).splitlines(keepends=True), "mariadbd")
        self.assertEqual(busy, 2)
        self.assertEqual(per["page faults"], 1)

    def test_every_class_a_sample_can_get_is_reported(self):
        texts = [KICK_WITH_PEER_RECEIVE, KICK, NAPI, RESCHEDULE, RESCHEDULE_SWITCH, IPI_SEND, RPS_IN_FUTEX,
                 RPS_AT_SOFTIRQ, TIMER, FUTEX_SWITCH, POLL, RECV_SWITCH,
                 OTHER_CALL, WRITE_INLINED, DISPATCH_ONLY, PREEMPTED_ON_RETURN, FAULT, USER]
        for t in texts:
            for c, f in core_split.samples(t.splitlines(keepends=True)):
                self.assertIn(lab_split.classify(c, f, "mariadbd"), lab_split.CLASSES)


# libpronghorn.so's leaves as perf script names them in a profile-guided build.
LIBRARY = """mariadbd 20841 
\t          2ee2a0 af_xdp_rx_zc.constprop.0 (/t/libpronghorn.so)

mariadbd 20841 
\t          2ee2a0 ph_pktmbuf_free (/t/libpronghorn.so)

mariadbd 20841 
\t          2ee2a0 recv (/t/libpronghorn.so)

mariadbd 20841 
\t          2ee2a0 tcp::connection::output::<impl tcp::connection::Connection>::poll_transmit (/t/libpronghorn.so)

mariadbd 20841 
\t          2ee2a0 runtime::poll::<impl runtime::accel::Accel<N>>::poll (/t/libpronghorn.so)

mariadbd 20841 
\t          2ee2a0 runtime::poll::<impl runtime::accel::Accel<N>>::poll (/t/libpronghorn.so)

mariadbd 20841 
\t          2ee2a0 <nic::lane::TxLane<B> as nic::lane::TxSender>::send_once (/t/libpronghorn.so)

mariadbd 20841 
\t          2ee2a0 0x00000000002ee2a0 (/t/libpronghorn.so)

"""


class Library(unittest.TestCase):
    def test_the_librarys_leaves_go_to_their_layer(self):
        self.assertEqual(lab_split.library_layer("af_xdp_rx_zc.constprop.0"), "DPDK: AF_XDP driver, mbufs, mempool")
        self.assertEqual(lab_split.library_layer("stack_dequeue"), "DPDK: AF_XDP driver, mbufs, mempool")
        self.assertEqual(lab_split.library_layer("recv"), "the shim's hooked entries (recv, send, poll, ...)")
        self.assertEqual(lab_split.library_layer("preload::io::recv_hook"),
                         "the shim's hooked entries (recv, send, poll, ...)")
        ack = "tcp::connection::input::<impl tcp::connection::Connection>::process_ack"
        self.assertEqual(lab_split.library_layer(ack), "tcp: input (segments, ACKs, recovery)")
        self.assertEqual(lab_split.library_layer("<nic::lane::TxLane<B> as nic::lane::TxSender>::send_once"),
                         "nic: the port's Rust side (bursts, tx lanes)")
        self.assertEqual(lab_split.library_layer("0x00000000002ee2a0"), "other (DPDK's other code, unnamed)")
        # A name that merely starts like a hooked call is not one.
        self.assertEqual(lab_split.library_layer("recvq_flush"), "other (DPDK's other code, unnamed)")

    def test_split_counts_the_librarys_samples_by_leaf_and_library_split_by_layer(self):
        leaves = Counter()
        per, busy = lab_split.split((LIBRARY + USER).splitlines(keepends=True), "mariadbd", leaves)
        self.assertEqual(per["libpronghorn.so"], 9)
        self.assertEqual(busy, 11)
        lib = "/t/libpronghorn.so"
        poll = "runtime::poll::<impl runtime::accel::Accel<N>>::poll"
        self.assertEqual(leaves[(lib, 0x2ee2a0, poll)], 2)
        self.assertEqual(sum(leaves.values()), 9)
        # Without debug information perf's symbols stand.
        layers, functions = lab_split.library_split(leaves, {})
        self.assertEqual(sum(layers.values()), 9)
        self.assertEqual(layers["DPDK: AF_XDP driver, mbufs, mempool"], 2)
        self.assertEqual(layers["runtime: socket, poll and epoll calls"], 3)
        self.assertEqual(functions[poll], 2)
        # With it, a sample goes to the innermost named function inlined at its address: one
        # of std's helpers is passed over, DPDK's inline functions count as DPDK.
        chains = {(lib, 0x2ee2a0): ["core::ptr::drop_in_place<u8>",
                                    "tcp::connection::input::<impl tcp::connection::Connection>::process_ack",
                                    poll]}
        layers, functions = lab_split.library_split(leaves, chains)
        self.assertEqual(sum(layers.values()), 9)
        # (USER's library sample is at another address: its symbol stands.)
        self.assertEqual(layers["tcp: input (segments, ACKs, recovery)"], 8)
        self.assertEqual(layers["runtime: socket, poll and epoll calls"], 1)
        self.assertEqual(lab_split.charged_function(["rte_mbuf_refcnt_read", "ph_pktmbuf_free"], "ph_pktmbuf_free"),
                         "rte_mbuf_refcnt_read")
        self.assertEqual(lab_split.charged_function(["core::ptr::drop_in_place<u8>"], "x"), "x")

    def test_addresses_go_from_file_offsets_to_addr2lines_answers(self):
        readelf = ("  LOAD           0x000000 0x0000000000000000 0x0000000000000000 0x0a25b8 0x0a25b8 R   0x1000\n"
                   "  LOAD           0x0a25b8 0x00000000000a35b8 0x00000000000a35b8 0x24ca48 0x24ca48 R E 0x1000\n")
        segments = lab_split.load_segments(readelf)
        self.assertEqual(segments, [(0, 0, 0xa25b8), (0xa25b8, 0xa35b8, 0x24ca48)])
        self.assertEqual(lab_split.to_vaddr(0xac76c, segments), 0xad76c)
        self.assertEqual(lab_split.to_vaddr(0x10, segments), 0x10)
        self.assertIsNone(lab_split.to_vaddr(0x900000, segments))
        out = ("0x00000000000ad76c\nrte_mbuf_refcnt_read\n/usr/include/dpdk/rte_mbuf.h:364\n"
               "ph_pktmbuf_free\n/work/main/crates/dpdk-sys/csrc/wrapper.c:29\n"
               "0x00000000000ad770\n??\n??:0\n")
        self.assertEqual(lab_split.parse_addr2line(out),
                         {0xad76c: ["rte_mbuf_refcnt_read", "ph_pktmbuf_free"], 0xad770: []})

    def test_the_summary_takes_each_layers_median_and_writes_the_largest_first(self):
        runs = [{"path": "pronghorn", "busy_us": 1.0, "us": {c: 0.0 for c in lab_split.CLASSES}, "ipis": {},
                 "library": {"layers": layers, "functions": {"f": layers.get("tcp: output", 0.0)}}}
                for layers in ({"tcp: output": 1.0, "wire: parsing, emitting, checksums": 0.3},
                               {"tcp: output": 3.0},
                               {"tcp: output": 2.0, "wire: parsing, emitting, checksums": 0.5})]
        kernel = [dict(r, path="kernel") for r in runs]
        s = lab_split.summarize(runs + kernel)
        self.assertEqual(s["pronghorn"]["library"]["layers"],
                         {"tcp: output": 2.0, "wire: parsing, emitting, checksums": 0.3})
        import io
        f = io.StringIO()
        lab_split.write_library_md(f, s["pronghorn"]["library"])
        rows = [l for l in f.getvalue().splitlines() if l.startswith("| ") and "us per request" not in l]
        self.assertTrue(rows[0].startswith("| tcp: output | 2.00"), rows)
        self.assertIn("| **all of libpronghorn.so (the medians' sum)** | **2.30** |", rows)


class Parse(unittest.TestCase):
    def test_host_speed_and_counters(self):
        self.assertEqual(lab_split.parse_host_speed("ns_per_step 5.021\n"), 5.021)
        self.assertRaises(ValueError, lab_split.parse_host_speed, "")
        self.assertEqual(lab_split.parse_status_value("Com_select\t123456\n", "Com_select"), 123456)
        info = "# Stats\ntotal_connections_received:3\ntotal_commands_processed:98765\n"
        self.assertEqual(lab_split.parse_status_value(info, "total_commands_processed"), 98765)
        self.assertRaises(ValueError, lab_split.parse_status_value, "Com_select_x\t1\n", "Com_select")

    def test_ipis_per_request_come_from_proc_interrupts(self):
        before = ("           CPU0       CPU1       \n  0:         36          0   IO-APIC    2-edge      timer\n"
                  "NMI:          0          0   Non-maskable interrupts\n"
                  "RES:       1000       2000   Rescheduling interrupts\n"
                  "CAL:        500        700   Function call interrupts\n")
        after = before.replace("1000       2000", "1500       2100").replace("500        700", "900       5700")
        b, a = lab_split.parse_ipis(before), lab_split.parse_ipis(after)
        self.assertEqual(b, {"RES": [1000, 2000], "CAL": [500, 700]})
        self.assertEqual(lab_split.ipis_per_request(b, a, 1000),
                         {"core 0: function calls": 0.4, "core 1: function calls": 5.0,
                          "core 0: reschedules": 0.5, "core 1: reschedules": 0.1})
        self.assertRaises(ValueError, lab_split.parse_ipis, "           CPU0\nNMI:  0  Non-maskable\n")

    def test_summary_takes_each_paths_median(self):
        def run(path, busy, app):
            us = {c: 0.0 for c in lab_split.CLASSES}
            us["application code"] = app
            return {"path": path, "busy_us": busy, "us": us, "ipis": {"core 1: function calls": busy / 10}}
        runs = [run("kernel", 30, 10), run("pronghorn", 40, 16), run("pronghorn", 44, 18), run("kernel", 28, 11),
                run("kernel", 31, 12), run("pronghorn", 41, 15)]
        s = lab_split.summarize(runs)
        self.assertEqual(s["kernel"]["busy_us"], 30)
        self.assertEqual(s["pronghorn"]["us"]["application code"], 16)
        self.assertEqual(s["pronghorn"]["ipis"]["core 1: function calls"], 4.1)
        self.assertEqual(s["pronghorn"]["frames"], {})  # runs from before frames were counted

    def test_frames_per_request_come_from_the_server_veths_counters(self):
        def link(tx, rx):
            return ('[{"ifindex":3048,"ifname":"sp-a0","mtu":1500,"stats64":{"rx":{"bytes":4412,"packets":%d,'
                    '"errors":0,"dropped":0},"tx":{"bytes":21111,"packets":%d,"errors":0,"dropped":0}}}]' % (rx, tx))
        before, after = lab_split.parse_link_packets(link(5000, 3000)), lab_split.parse_link_packets(link(14000, 5500))
        self.assertEqual(before, (5000, 3000))
        frames = lab_split.frames_per_request(before, after, 1000)
        self.assertEqual(frames, {"sent": 9.0, "received": 2.5})
        us = {c: 0.0 for c in lab_split.CLASSES}
        runs = [{"path": path, "busy_us": 1.0, "us": us, "ipis": {}, "frames": dict(frames, sent=sent)}
                for path, sent in (("kernel", 1.5), ("pronghorn", 8.0), ("pronghorn", 9.0), ("pronghorn", 12.0))]
        s = lab_split.summarize(runs)
        self.assertEqual(s["pronghorn"]["frames"], {"sent": 9.0, "received": 2.5})
        import io
        f = io.StringIO()
        lab_split.write_md(f, "mariadb", {"summary": s, "runs": []})
        self.assertIn("| sent | 1.50 | 9.00 |", f.getvalue())
        self.assertIn("| received | 2.50 | 2.50 |", f.getvalue())


if __name__ == "__main__":
    unittest.main()
