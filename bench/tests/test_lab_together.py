"""Tests of bench/lab_together.py's parsing and arithmetic, on small fixtures.

  python3 -m unittest discover -s bench/tests
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import lab_together  # noqa: E402


class Intervals(unittest.TestCase):
    def test_mean_tps_over_the_seconds_asked_for_only(self):
        out = ("[ 4s ] thds: 16 tps: 100.00 qps: 100.00 (r/w/o: 100.00/0.00/0.00) lat (ms,95%): 1.55 err/s: 0.00\n"
               "[ 5s ] thds: 16 tps: 4000.50 qps: 4000.50 (r/w/o: 4000.50/0.00/0.00) lat (ms,95%): 1.55 err/s: 0.00\n"
               "[ 6s ] thds: 16 tps: 5000.50 qps: 5000.50 (r/w/o: 5000.50/0.00/0.00) lat (ms,95%): 1.55 err/s: 0.00\n"
               "[ 7s ] thds: 16 tps: 9.00 qps: 9.00\n")
        self.assertEqual(lab_together.parse_intervals(out, 5, 6), 4500.5)

    def test_no_second_in_the_window_is_an_error(self):
        with self.assertRaises(SystemExit):
            lab_together.parse_intervals("[ 1s ] thds: 16 tps: 5.00\n", 5, 12)


class Progress(unittest.TestCase):
    def test_mean_tps_of_the_reports_nearest_the_seconds_asked_for(self):
        out = ("starting vacuum...end.\n"
               "progress: 4.0 s, 100.0 tps, lat 154.355 ms stddev 66.168, 0 failed\n"
               "progress: 5.1 s, 51.0 tps, lat 154.355 ms stddev 66.168, 0 failed\n"
               "progress: 5.9 s, 60.0 tps, lat 154.355 ms stddev 66.168, 0 failed\n"
               "progress: 7.6 s, 9.0 tps, lat 1.0 ms stddev 1.0, 0 failed\n")
        self.assertEqual(lab_together.parse_progress(out, 5, 6), 55.5)

    def test_no_report_in_the_window_is_an_error(self):
        with self.assertRaises(SystemExit):
            lab_together.parse_progress("progress: 1.0 s, 5.0 tps, lat 1.0 ms stddev 1.0, 0 failed\n", 5, 12)


class Forks(unittest.TestCase):
    def test_fork_records_name_child_and_parent(self):
        script = ("comm=postgres pid=9045 child_comm=postgres child_pid=9071\n"
                  "comm=pronghorn-ctl pid=9046 child_comm=pronghorn-ctl child_pid=9080\n")
        self.assertEqual(lab_together.parse_forks(script), {9071: 9045, 9080: 9046})

    def test_descendants_at_any_depth_go_to_their_root_and_strangers_to_none(self):
        # 100 and 200 are the servers; 101 a thread of 100, 102 its child (gone: known by its
        # fork), 103 a child of that child; 300 a stranger whose parent is 1.
        parents = {101: 100, 102: 100, 103: 102, 201: 200, 300: 1, 100: 50, 200: 50}
        got = lab_together.descendants({"kernel": 100, "pronghorn": 200}, parents)
        self.assertEqual(got, {"kernel": {100, 101, 102, 103}, "pronghorn": {200, 201}})

    def test_a_cycle_in_recycled_pids_ends(self):
        got = lab_together.descendants({"kernel": 100}, {7: 8, 8: 7, 101: 100})
        self.assertEqual(got, {"kernel": {100, 101}})


class ByBinary(unittest.TestCase):
    def test_small_binaries_are_summed_as_others(self):
        got = lab_together.by_binary({"postgres": 600.0, "libc.so.6": 300.0, "libz.so.1": 1.0, "libm.so.6": 0.9},
                                     1000.0)
        self.assertEqual(got, [("postgres", 600.0), ("libc.so.6", 300.0), ("others", 1.9)])


class Split(unittest.TestCase):
    def test_threads_samples_go_to_their_server_by_binary(self):
        report = (" 7          |   5213:kworker/1:1-mm_|[kernel.kallsyms]   \n"
                  " 1082       |   9045:mariadbd       |[kernel.kallsyms]   \n"
                  " 1332       |   9045:mariadbd       |mariadbd            \n"
                  " 796        |   9062:mariadbd       |[kernel.kallsyms]   \n"
                  " 284        |   9062:mariadbd       |libpronghorn.so     \n"
                  " 10         |   9063:mariadbd       |mariadbd            \n"
                  "garbage\n")
        got = lab_together.split_by_server(report, {"kernel": {9045, 9046}, "pronghorn": {9062, 9063}})
        self.assertEqual(got, {"kernel": {"[kernel.kallsyms]": 1082, "mariadbd": 1332},
                               "pronghorn": {"[kernel.kallsyms]": 796, "libpronghorn.so": 284, "mariadbd": 10}})

    def test_the_nic_models_receive_goes_to_its_path_whatever_thread_it_ran_in(self):
        report = (" 100        |   9045:mariadbd       |[kernel.kallsyms]   |[other]\n"
                  " 30         |   9045:mariadbd       |[kernel.kallsyms]   |net_rx_action\n"
                  " 20         |   9062:mariadbd       |[kernel.kallsyms]   |net_rx_action\n"
                  " 5          |     22:ksoftirqd/1    |[kernel.kallsyms]   |net_rx_action\n"
                  " 40         |   3001:napi/pp-a0-819 |[kernel.kallsyms]   |[other]\n"
                  " 7          |   3002:napi/pp-b0-820 |[kernel.kallsyms]   |[other]\n"
                  " 284        |   9062:mariadbd       |libpronghorn.so     |[other]\n")
        got = lab_together.split_by_server(report, {"kernel": {9045}, "pronghorn": {9062}}, "napi/pp-a0-")
        self.assertEqual(got, {"kernel": {"[kernel.kallsyms]": 100, "receive": 55},
                               "pronghorn": {"receive": 40, "libpronghorn.so": 284}})

    def test_samples_become_us_per_transaction(self):
        # 4000 samples of 100 us = 0.4 s of CPU over 8 s at 1000 tps = 8000 transactions: 50 us each.
        self.assertEqual(lab_together.per_transaction({"mariadbd": 4000}, 1000.0), {"mariadbd": 50.0})


class Summary(unittest.TestCase):
    def test_medians_and_per_run_ratios(self):
        run = lambda k, p: {"kernel": {"tps": 100.0, "core_us": k, "own_us": 10.0},
                            "pronghorn": {"tps": 80.0, "core_us": p, "own_us": 11.0}}
        s = lab_together.summarize([run(100.0, 120.0), run(80.0, 100.0), run(90.0, 99.0)])
        self.assertEqual(s["core_us"]["kernel"], 90.0)
        self.assertEqual(s["core_us"]["pronghorn"], 100.0)
        self.assertEqual(s["core_us"]["ratio"], [1.2, 1.1, 1.25])
        self.assertEqual(s["tps"]["ratio"], [0.8, 0.8, 0.8])


if __name__ == "__main__":
    unittest.main()
