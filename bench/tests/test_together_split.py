"""Tests of bench/together_split.py (a kept together run split by server and class).

  python3 -m unittest discover -s bench/tests
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import together_split  # noqa: E402

# perf script -F comm,tid,ip,sym,dso: a kernel-path backend's send, a pronghorn backend's page
# fault, pronghorn's stack thread, and a stranger's sample.
SCRIPT = """postgres   843 
\tffffffff821eb0e7 _raw_spin_unlock_irqrestore+0x1f ([kernel.kallsyms])
\tffffffff81620028 tcp_sendmsg ([kernel.kallsyms])
\t          5cd89d secure_write (/usr/lib/postgresql/15/bin/postgres)

postgres   900 
\tffffffff821eb0e7 clear_page_erms ([kernel.kallsyms])
\tffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
\t          5cd89d palloc0 (/usr/lib/postgresql/15/bin/postgres)

pronghorn-stack   901 
\t          12345 stack::shard::Shard<N>::poll (/work/main/target/release/libpronghorn.so)

kworker/1:1   77 
\tffffffff821eb0e7 clear_page_erms ([kernel.kallsyms])
"""


class ByServer(unittest.TestCase):
    def test_samples_go_to_their_server_by_thread_and_leaves_are_counted(self):
        got = together_split.by_server(SCRIPT.splitlines(), {"kernel": {843}, "pronghorn": {900, 901}})
        self.assertEqual(len([x for x in got["kernel"][0] if x and not x[0].isspace()]), 1)
        self.assertEqual(len([x for x in got["pronghorn"][0] if x and not x[0].isspace()]), 2)
        self.assertEqual(got["kernel"][1], {("_raw_spin_unlock_irqrestore", "[kernel.kallsyms]"): 1})
        self.assertEqual(got["pronghorn"][1], {("clear_page_erms", "[kernel.kallsyms]"): 1,
                                               ("stack::shard::Shard<N>::poll", "libpronghorn.so"): 1})

    def test_the_classes_of_a_servers_samples(self):
        got = together_split.by_server(SCRIPT.splitlines(), {"kernel": {843}, "pronghorn": {900, 901}})
        net = ("tcp_",)
        self.assertEqual(dict(together_split.core_split.split(got["kernel"][0], net)), {"kernel net": 1})
        self.assertEqual(dict(together_split.core_split.split(got["pronghorn"][0], net)),
                         {"page faults": 1, "pronghorn": 1})


if __name__ == "__main__":
    unittest.main()
