"""Tests of the parsers behind bench/request_cost.sh and bench/lab_cost.sh, on small fixtures.

  python3 -m unittest discover -s bench/tests
"""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import callgrind_layers  # noqa: E402
import lab_cost  # noqa: E402
import request_cost  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")


class CallgrindLayers(unittest.TestCase):
    def setUp(self):
        self.p = callgrind_layers.parse(os.path.join(FIXTURES, "callgrind.out"))

    def test_cost_lines_go_to_the_file_of_inlined_code_and_call_lines_are_not_exclusive(self):
        ex = {(os.path.basename(f), fn): c for (_, f, fn), c in self.p.exclusive.items()}
        self.assertEqual(ex[("mod.rs", "stack::shard::Shard<N>::poll")], 130)
        self.assertEqual(ex[("input.rs", "stack::shard::Shard<N>::poll")], 40)
        self.assertEqual(ex[("option.rs", "stack::shard::Shard<N>::poll")], 30)
        self.assertEqual(ex[("memmove-vec-unaligned-erms.S", "__memcpy_avx_unaligned_erms")], 60)
        self.assertEqual(ex[("wait.rs", "runtime::wait::sleep")], 15)
        self.assertEqual(ex[("???", "syscall")], 185)
        self.assertEqual(sum(self.p.exclusive.values()), self.p.summary)

    def test_layers_follow_files_then_symbols_then_named_functions(self):
        layers, _ = callgrind_layers.layers(self.p)
        self.assertEqual(dict(layers), {
            "stack: shard (demux, segments in and out, socket API)": 160,  # its own file + core's, by symbol
            "tcp: input (segments, ACKs, recovery)": 40,  # inlined from tcp's input.rs
            "copies (memcpy, memmove, memset)": 60,
            "runtime: wait and wakeup": 15,
            "libc: system-call wrappers": 185,
        })

    def test_inclusive_costs_and_call_counts(self):
        self.assertEqual(self.p.inclusive(r"^stack::shard::Shard<N>::poll$"), 200 + 60 + 200)
        self.assertEqual(self.p.inclusive(r"^runtime::wait::sleep$"), 15 + 185)
        # A call between two functions of the pattern is not counted twice.
        self.assertEqual(self.p.inclusive(r"^(stack::shard::Shard<N>::poll|runtime::wait::sleep)$"), 460)
        self.assertEqual(dict(self.p.calls_into(r"^syscall$")), {"runtime::wait::sleep": 2})
        self.assertEqual(dict(self.p.calls_into(r"^__memcpy")), {"stack::shard::Shard<N>::poll": 3})

    def test_report_divides_the_difference_of_two_runs(self):
        r = callgrind_layers.report(None, self.p, 10)
        self.assertEqual(r["instructions_per_request"], 46.0)
        self.assertEqual(r["layers"]["copies (memcpy, memmove, memset)"], 6.0)
        self.assertEqual(r["calls"]["futex system calls (syscall())"]["per_request"], 0.2)
        same = callgrind_layers.report(self.p, self.p, 10)
        self.assertEqual(same["instructions_per_request"], 0)
        self.assertTrue(all(v == 0 for v in same["layers"].values()))

    def test_a_cache_simulations_misses_go_to_each_functions_layer(self):
        self.assertEqual(dict(callgrind_layers.layer_events(self.p, ["D1mr", "D1mw"])), {})  # Ir only
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "cachesim.out")
            with open(path, "w") as f:
                # Events left off a line's end are zero; a call line's costs are the callee's.
                f.write("version: 1\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\n"
                        "fl=(1) /work/main/crates/tcp/src/connection/input.rs\n"
                        "fn=(1) tcp::connection::input::<impl tcp::connection::Connection>::process_ack\n"
                        "10 9 4 2 1 3 1\n+2 5 1 1 0 2\n"
                        "cfn=(2) runtime::wait::sleep\ncalls=1 0\n+1 100 50 50 9 9 9\n"
                        "fl=(2) /work/main/crates/runtime/src/wait/mod.rs\nfn=(2)\n3 100 50 50 0 9 9\n"
                        "totals: 114 55 53 3 12 13\n")
            p = callgrind_layers.parse(path)
            self.assertEqual(dict(callgrind_layers.layer_events(p, ["D1mr", "D1mw"])),
                             {"tcp: input (segments, ACKs, recovery)": 3 + 1 + 2, "runtime: wait and wakeup": 18})
            self.assertEqual(dict(callgrind_layers.layer_events(p, ["DLmr"])),
                             {"tcp: input (segments, ACKs, recovery)": 0, "runtime: wait and wakeup": 0})
            self.assertEqual(dict(callgrind_layers.function_events(p, ["D1mr", "D1mw"])),
                             {("tcp: input (segments, ACKs, recovery)",
                               "tcp::connection::input::<impl tcp::connection::Connection>::process_ack"): 6,
                              ("runtime: wait and wakeup", "runtime::wait::sleep"): 18})

    def test_totals_name_each_event_of_the_run(self):
        self.assertEqual(callgrind_layers.totals(os.path.join(FIXTURES, "callgrind.out")), {"Ir": 460})
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "cachesim.out")
            with open(path, "w") as f:
                f.write("version: 1\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nfn=(1) main\n"
                        "0 9 4 2 1 1 0 0 0 0\ntotals: 900 400 200 10 30 20 1 7 3\n")
            self.assertEqual(callgrind_layers.totals(path),
                             {"Ir": 900, "Dr": 400, "Dw": 200, "I1mr": 10, "D1mr": 30, "D1mw": 20, "ILmr": 1,
                              "DLmr": 7, "DLmw": 3})
            with open(path, "w") as f:
                f.write("version: 1\nfn=(1) main\n0 9\n")
            with self.assertRaises(ValueError):
                callgrind_layers.totals(path)

    def test_module_paths(self):
        self.assertEqual(callgrind_layers.module_of("tcp", "connection/input"), "tcp::connection::input")
        self.assertEqual(callgrind_layers.module_of("stack", "shard/mod"), "stack::shard")
        self.assertEqual(callgrind_layers.module_of("runtime", "lib"), "runtime")
        self.assertEqual(callgrind_layers.module_from_symbol("runtime::poll::<impl runtime::accel::Accel<N>>::poll"),
                         "runtime::poll")
        self.assertIsNone(callgrind_layers.module_from_symbol("_dl_runtime_resolve_xsave"))
        self.assertEqual(callgrind_layers.layer_of("libc.so.6", "???", "calloc"),
                         "allocation (malloc, free, Rust allocator)")
        self.assertEqual(callgrind_layers.layer_of("x", "/rustc/1/library/std/src/sys/sync/mutex/futex.rs",
                                                   "runtime::accel::Accel<N>::with"), "runtime: lock")


class PerfTraceSummary(unittest.TestCase):
    def test_sums_every_thread_but_the_one_left_out(self):
        with open(os.path.join(FIXTURES, "perf-trace-summary.txt")) as f:
            text = f.read()
        self.assertEqual(request_cost.parse_trace_summary(text, leave_out="client"),
                         {"futex": 10, "poll": 4, "sched_getaffinity": 1})


class ServerCoreSamples(unittest.TestCase):
    def test_the_servers_threads_by_binary_other_tasks_by_name_idle_left_out(self):
        report = """
            10  kworker/1:0H-kb  [kernel.kallsyms]
             1  kworker/1:4-vir  [kernel.kallsyms]
           473  mariadbd         [kernel.kallsyms]
            89  mariadbd         libpronghorn.so
             7  eal-intr-thread  [kernel.kallsyms]
             5  pronghorn-stack  libpronghorn.so
            44  napi/qb-a0-82    [kernel.kallsyms]
          9000  swapper          [kernel.kallsyms]
"""
        self.assertEqual(lab_cost.parse_core_samples(report), {
            "[kernel.kallsyms]": 480, "libpronghorn.so": 94,
            "other tasks (kworker)": 11, "other tasks (napi)": 44})


class RuntimeCounters(unittest.TestCase):
    def test_growth_per_request_of_the_named_counters_only(self):
        before = {"lock_holds": 100.0, "lock_hold_us": 50.0, "sleeps": 7.0, "accepted": 3.0}
        after = {"lock_holds": 800.0, "lock_hold_us": 390.0, "sleeps": 107.0, "accepted": 9.0, "lock_waits": 4.0}
        got = lab_cost.per_request(before, after, 100)
        self.assertEqual(got["lock_holds"], 7.0)
        self.assertEqual(got["lock_hold_us"], 3.4)
        self.assertEqual(got["sleeps"], 1.0)
        self.assertEqual(got["lock_waits"], 0.04)
        self.assertEqual(got["wakeups"], 0.0)
        self.assertNotIn("accepted", got)


if __name__ == "__main__":
    unittest.main()


class Normalized(unittest.TestCase):
    def test_each_path_in_units_of_its_own_runs_application_time(self):
        # The pronghorn run went at half the machine's speed: its application code took twice as long.
        kernel = {"mariadbd": 10.0, "[kernel.kallsyms]": 12.0, "libc.so.6": 2.0}
        pronghorn = {"mariadbd": 20.0, "[kernel.kallsyms]": 16.0, "libpronghorn.so": 6.0, "libc.so.6": 2.0}
        got = lab_cost.normalized(kernel, pronghorn, "mariadbd")
        self.assertEqual(got["kernel_core_per_app"], 2.4)
        self.assertEqual(got["pronghorn_core_per_app"], 2.2)
        self.assertEqual(got["pronghorn_over_kernel"], 0.917)
        self.assertEqual(got["pronghorn_us_at_kernel_speed"],
                         {"mariadbd": 10.0, "[kernel.kallsyms]": 8.0, "libpronghorn.so": 3.0, "libc.so.6": 1.0})

    def test_no_application_samples_gives_no_comparison(self):
        self.assertIsNone(lab_cost.normalized({"[kernel.kallsyms]": 5.0}, {"mariadbd": 3.0}, "mariadbd"))
