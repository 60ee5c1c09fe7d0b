"""Tests of bench/core_split.py (a server core's samples split by class).

  python3 -m unittest discover -s bench/tests
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import core_split  # noqa: E402

# perf script -F comm,pid,ip,sym,dso of six samples: a backend's send, its page fault, a fork,
# a user function named like a kernel one, a sample of pronghorn's stack thread, the idle task.
SCRIPT = """postgres   843 
\tffffffff821eb0e7 _raw_spin_unlock_irqrestore ([kernel.kallsyms])
\tffffffff81620028 tcp_sendmsg ([kernel.kallsyms])
\t          5cd89d secure_write (/usr/lib/postgresql/15/bin/postgres)

postgres   843 
\tffffffff821eb0e7 clear_page_erms ([kernel.kallsyms])
\tffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
\t          5cd89d palloc0 (/usr/lib/postgresql/15/bin/postgres)

postgres   800 
\tffffffff821eb0e7 copy_page_range ([kernel.kallsyms])
\tffffffff81000c82 copy_process ([kernel.kallsyms])

postgres   843 
\t          58b621 ip_checksum_of_the_app (/usr/lib/postgresql/15/bin/postgres)

pronghorn-stack   801 
\tffffffff821eb0e7 tcp_v4_rcv ([kernel.kallsyms])

swapper     0 
\tffffffff821eb0e7 pv_native_safe_halt ([kernel.kallsyms])
"""


class CoreSplit(unittest.TestCase):
    def test_the_network_prefixes_are_read_from_the_benchs_source(self):
        net = core_split.net_prefixes()
        self.assertIn("tcp_", net)
        self.assertIn("do_epoll_wait", net)

    def test_each_busy_sample_goes_to_the_first_class_that_matches(self):
        counts = core_split.split(SCRIPT.splitlines(True), core_split.net_prefixes())
        self.assertEqual(
            dict(counts), {"kernel net": 1, "page faults": 1, "fork": 1, "rest": 1, "pronghorn": 1}
        )


if __name__ == "__main__":
    unittest.main()
