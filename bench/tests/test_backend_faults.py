"""Tests of bench/backend_faults.py (page faults per PostgreSQL backend, both paths).

  python3 -m unittest discover -s bench/tests
"""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import backend_faults as bf  # noqa: E402

# perf script -F comm,pid,tid,event,ip,sym,dso,trace with call graphs: the two postmasters
# (100: kernel path, 200: pronghorn) fork a backend each; the kernel path's backend takes a copy
# on write in libc; pronghorn's takes one in libc, one in the library (a write to the heap), an
# instruction fetch in the library and a read of the arena under it; a fault of another process.
SCRIPT = """postgres 100/100 sched:sched_process_fork: comm=postgres pid=100 child_comm=postgres child_pid=101
\t          d45e0 __libc_fork (/usr/lib/x86_64-linux-gnu/libc.so.6)

postgres 200/200 sched:sched_process_fork: comm=postgres pid=200 child_comm=postgres child_pid=201
\t          d45e0 __libc_fork (/usr/lib/x86_64-linux-gnu/libc.so.6)

postgres 101/101 exceptions:page_fault_user: address=0x1008 ip=0x7f0000001000 error_code=0x7
\tffffffff821f5340 exc_page_fault ([kernel.kallsyms])
\tffffffff81000c82 asm_exc_page_fault ([kernel.kallsyms])
\t          9b0c2 _int_malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)

postgres 201/201 exceptions:page_fault_user: address=0x1010 ip=0x7f0000001000 error_code=0x7
\tffffffff821f5340 exc_page_fault ([kernel.kallsyms])
\t          9b0c2 _int_malloc (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t          5cd89d palloc (/usr/lib/postgresql/15/bin/postgres)

postgres 201/201 exceptions:page_fault_user: address=0x1020 ip=0x7f0000002000 error_code=0x7
\tffffffff821f5340 exc_page_fault ([kernel.kallsyms])
\t          12345 runtime::fdtable::FdTable::remove (/work/main/target/release/libpronghorn.so)
\t          12399 close (/work/main/target/release/libpronghorn.so)
\t          5cd89d ClosePostmasterPorts (/usr/lib/postgresql/15/bin/postgres)

postgres 201/201 exceptions:page_fault_user: address=0x7f0000002040 ip=0x7f0000002040 error_code=0x14
\tffffffff821f5340 exc_page_fault ([kernel.kallsyms])
\t          12345 runtime::fork_done (/work/main/target/release/libpronghorn.so)

postgres 201/201 exceptions:page_fault_user: address=0x5000 ip=0x7f0000003000 error_code=0x4
\tffffffff821f5340 exc_page_fault ([kernel.kallsyms])
\t          12345 runtime::family::Family::joined (/work/main/target/release/libpronghorn.so)

psql 300/300 exceptions:page_fault_user: address=0x1008 ip=0x1 error_code=0x6
\tffffffff821f5340 exc_page_fault ([kernel.kallsyms])
"""

MAPS = """00001000-00003000 rw-p 00000000 00:00 0                          [heap]
00005000-00006000 rw-s 00000000 00:01 9                          /dev/zero (deleted)
7f0000001000-7f0000004000 r-xp 00000000 fe:00 5                  /work/main/target/release/libpronghorn.so
"""


class Census(unittest.TestCase):
    def setUp(self):
        self.faults, self.forks = bf.parse(SCRIPT.splitlines())
        with tempfile.NamedTemporaryFile("w", suffix=".maps", delete=False) as f:
            f.write(MAPS)
        self.addCleanup(os.unlink, f.name)
        self.maps = bf.read_maps(f.name)

    def test_faults_and_forks_are_read_with_their_kinds(self):
        self.assertEqual(self.forks, [(100, 101), (200, 201)])
        self.assertEqual([f["kind"] for f in self.faults], ["cow", "cow", "cow", "exec", "read", "write-new"])
        self.assertEqual(self.faults[2]["frames"][1], ("runtime::fdtable::FdTable::remove",
                                                       "/work/main/target/release/libpronghorn.so"))

    def test_each_path_counts_its_postmasters_children_only(self):
        c = bf.census(self.faults, self.forks, {"kernel": 100, "pronghorn": 200}, self.maps)
        k, p = c["kernel"], c["pronghorn"]
        self.assertEqual((k["backends"], k["faults"], k["by_kind"]), (1, 1.0, {"cow": 1.0}))
        self.assertEqual((p["backends"], p["faults"], p["library"]), (1, 4.0, 3.0))
        self.assertEqual(p["by_object"], {"libpronghorn.so": 3.0, "libc.so.6": 1.0})
        self.assertEqual(p["library_by_kind"], {"cow": 1.0, "exec": 1.0, "read": 1.0})
        # The outermost library frame names the call; the address, the mapping (not for code).
        self.assertIn("close (cow)", p["library_by_function"])
        self.assertEqual(p["library_by_mapping"], {"[heap] rw-p (cow)": 1.0,
                                                   "shared anonymous (the family's arena or its tables) (read)": 1.0})

    def test_a_result_is_written_as_a_table(self):
        c = bf.census(self.faults, self.forks, {"kernel": 100, "pronghorn": 200}, self.maps)
        result = {"machine": {"command": "bench/backend_faults.sh", "cores": 2}, "connections": 1, "paths": c}
        with tempfile.NamedTemporaryFile("r", suffix=".md") as f:
            bf.write_md(f.name, result)
            text = open(f.name).read()
        self.assertIn("| page faults | 1.0 | 4.0 |", text)
        self.assertIn("| with libpronghorn.so in the call chain | - | 3.0 |", text)
        self.assertIn("| `close (cow)` | 1.0 |", text)


if __name__ == "__main__":
    unittest.main()
