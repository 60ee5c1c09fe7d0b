"""Tests of bench/fork_cost.py's parsing, arithmetic and command lines.

  python3 -m unittest discover -s bench/tests
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import fork_cost  # noqa: E402


class ForkCost(unittest.TestCase):
    def test_the_loops_line_is_read_and_a_missing_one_is_an_error(self):
        self.assertEqual(fork_cost.parse_us("us_per_fork 512.5\n"), 512.5)
        with self.assertRaises(ValueError):
            fork_cost.parse_us("fork_cost: fork: Resource temporarily unavailable\n")

    def test_ratios_are_per_round_then_the_median(self):
        runs = [{"kernel": 100.0, "preloaded": 200.0, "pronghorn": 300.0, "family": 500.0},
                {"kernel": 200.0, "preloaded": 300.0, "pronghorn": 400.0, "family": 800.0},
                {"kernel": 150.0, "preloaded": 300.0, "pronghorn": 450.0, "family": 600.0}]
        s = fork_cost.summarize(runs)
        self.assertEqual(s["kernel"]["ratio"], 1.0)
        self.assertEqual(s["family"]["us_per_fork"], 600.0)
        # Per round 5.0, 4.0, 4.0: median 4.0 (the ratio of the medians would be 4.0 too; the
        # preloaded one tells them apart: per round 2.0, 1.5, 2.0 -> 2.0; medians 300/150 = 2.0).
        self.assertEqual((s["family"]["ratio"], s["family"]["ratio_min"], s["family"]["ratio_max"]), (4.0, 4.0, 5.0))
        self.assertEqual((s["preloaded"]["ratio"], s["preloaded"]["ratio_min"]), (2.0, 1.5))

    def test_each_setting_runs_the_loop_on_its_paths_address(self):
        kernel = fork_cost.command("kernel", "fk", "/t/fc", "/b", "10", False)
        self.assertEqual(kernel[-4:], ["/t/fc", "10.98.0.1", fork_cost.PORT, "10"])
        self.assertNotIn("LD_PRELOAD=/b/libpronghorn.so", kernel)
        preloaded = fork_cost.command("preloaded", "fk", "/t/fc", "/b", "10", True)
        self.assertIn("LD_PRELOAD=/b/libpronghorn.so", preloaded)
        self.assertEqual(preloaded[-5:], ["/t/fc", "10.98.0.1", fork_cost.PORT, "10", "touch"])
        family = fork_cost.command("family", "fk", "/t/fc", "/b", "10", False)
        self.assertIn("postgres", family[family.index("--profile") + 1:])
        self.assertIn("10.99.0.1", family)
        self.assertEqual(family[family.index("run") - 1], "/b/pronghorn")
        self.assertNotIn("--profile", fork_cost.command("pronghorn", "fk", "/t/fc", "/b", "10", False))


if __name__ == "__main__":
    unittest.main()
