"""Tests of overhead.py's statistics and phase bookkeeping: the parts a claim in BENCHMARKS.md
rests on, runnable on any machine (no GPU, no root).

  python3 bench/gpu/overhead_test.py
"""
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead  # noqa: E402


def alternating_run(phases, noise, loss, rng):
    """One run in overhead.py's rotating order (untraced, traced, traced, untraced, ...) with
    log-normal phase noise of sd `noise` and a true throughput loss of `loss` (a fraction)."""
    modes = []
    r = 0
    while len(modes) < phases:
        order = ["untraced", "traced"]
        modes += order[r % 2:] + order[:r % 2]
        r += 1
    run = []
    for i, m in enumerate(modes[:phases]):
        rate = 90 * rng.lognormvariate(0, noise) * ((1 - loss) if m == "traced" else 1)
        run.append({"mode": m, "t0": i, "steps_per_s": rate, "train_cpu_ms_per_step": 5.0})
    return run


def loss_groups(run):
    """The traced phases' throughput losses (percent), in overhead.py's groups."""
    groups = overhead.neighbour_groups(run, "steps_per_s").get("traced", {})
    return [[100 * (1 - r) for r in g] for g in groups.values()]


def loss_interval(run):
    return overhead.mean_ci(loss_groups(run))


class IntervalTest(unittest.TestCase):
    def test_interval_holds_the_true_loss_about_95_percent_of_the_time(self):
        # Traced phases that share untraced neighbours share their noise; an interval that
        # treated them as independent held the truth ~90% of the time here.
        for phases, trials in ((38, 500), (110, 300)):
            rng = random.Random(phases)
            held = 0
            for _ in range(trials):
                _, lo, hi = loss_interval(alternating_run(phases, 0.04, 0.005, rng))
                held += lo <= 0.5 <= hi
            self.assertGreaterEqual(held / trials, 0.92, f"{phases} phases")
            self.assertLessEqual(held / trials, 0.98, f"{phases} phases")

    def test_a_real_loss_is_resolved_on_a_quiet_loop(self):
        rng = random.Random(7)
        mean, lo, hi = loss_interval(alternating_run(60, 0.002, 0.01, rng))
        self.assertAlmostEqual(mean, 1.0, delta=0.2)
        self.assertGreater(lo, 0.5)
        self.assertLess(hi, 1.5)

    def test_one_group_has_no_interval(self):
        mean, lo, hi = overhead.mean_ci([[1.0, 2.0]])
        self.assertEqual(mean, 1.5)
        self.assertIsNone(lo)
        self.assertIsNone(hi)

    def test_untraced_spread_judges_only_untraced_phases(self):
        run = [{"mode": "untraced", "steps_per_s": 90.0}, {"mode": "traced", "steps_per_s": 50.0},
               {"mode": "untraced", "steps_per_s": 99.0},
               {"mode": "untraced", "steps_per_s": 10.0, "accounting": True}]
        self.assertAlmostEqual(overhead.untraced_spread_pct(run), 10.0)
        self.assertIsNone(overhead.untraced_spread_pct(run[:2]))

    def test_summarize_leaves_out_a_noisy_run_and_names_it(self):
        rng = random.Random(3)
        with tempfile.TemporaryDirectory() as tmp:
            dirs = []
            for name, noise in (("quiet", 0.002), ("noisy", 0.08)):
                os.makedirs(os.path.join(tmp, name))
                with open(os.path.join(tmp, name, "phases.jsonl"), "w") as f:
                    for q in alternating_run(21, noise, 0.0, rng):
                        f.write(json.dumps(q) + "\n")
                dirs.append(os.path.join(tmp, name))
            out = subprocess.run([sys.executable, overhead.__file__, "--summarize", *dirs,
                                  "--max-untraced-spread", "2"],
                                 capture_output=True, text=True, check=True).stdout
            self.assertIn(f"left out {dirs[1]}: untraced phases", out)
            self.assertNotIn(f"left out {dirs[0]}", out)
            self.assertIn("\"runs\": 1,", out)  # the quiet one alone
            self.assertRegex(out, r"traced +throughput loss .* over 10 phases")
            failed = subprocess.run([sys.executable, overhead.__file__, "--summarize", dirs[1],
                                     "--max-untraced-spread", "2"], capture_output=True, text=True)
            self.assertNotEqual(failed.returncode, 0)
            self.assertIn("no run left", failed.stderr)

    def test_t_quantiles_match_the_table(self):
        for df, table in ((1, 12.706), (4, 2.776), (5, 2.571), (10, 2.228), (30, 2.042)):
            self.assertAlmostEqual(overhead.t975(df), table, delta=table * 0.01)


class PhaseTest(unittest.TestCase):
    def test_neighbours_are_the_nearest_untraced_phases_of_the_same_run(self):
        run = [{"mode": m, "t0": i, "steps_per_s": s} for i, (m, s) in enumerate(
            [("untraced", 100), ("traced", 99), ("traced", 98), ("untraced", 102)])]
        self.assertEqual(overhead.neighbours(run, 1), (run[0], run[3]))
        self.assertEqual(overhead.neighbours(run, 2), (run[0], run[3]))
        self.assertAlmostEqual(overhead.neighbour_ratio(run, 1, "steps_per_s"), 99 / 101)
        # A phase without the key (an older run's file) has no ratio rather than a wrong one.
        self.assertIsNone(overhead.neighbour_ratio(run, 1, "gpu_sm_mhz"))

    def test_step_rate_counts_no_fraction_of_a_step_at_the_edges(self):
        # Two steps a second, ends at 0.9 s, 1.4 s, ...: the window [0, 10) holds 19 of them.
        ends = [int((0.9 + 0.5 * k) * 1e9) for k in range(40)]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("# pid 1 batch 1\n" + "".join(f"{t}\n" for t in ends))
        try:
            n, first, last = overhead.steps_between(f.name, 0, int(10e9))
            self.assertEqual(n, 19)
            self.assertAlmostEqual(overhead.step_rate(n, first, last, 0, int(10e9)), 2.0)
        finally:
            os.unlink(f.name)

    def test_waiting_for_the_attach_fails_for_an_agent_that_exits_first(self):
        with agent_log("gpuwhy trace: error: needs root\n") as path:
            started = time.monotonic()
            with self.assertRaises(SystemExit) as ended:
                overhead.wait_ready(FakeAgent(exit_code=1), path, timeout=30)
            self.assertLess(time.monotonic() - started, 5)  # at the exit, not the timeout
            self.assertIn("exited before it attached", str(ended.exception))

    def test_waiting_for_the_attach_returns_at_the_start_line(self):
        with agent_log("gpuwhy trace: tracing into x.db — Ctrl-C to stop\n") as path:
            overhead.wait_ready(FakeAgent(exit_code=None), path, timeout=5)


class CudaProbesTest(unittest.TestCase):
    def test_a_phase_counts_only_with_its_cuda_probes_attached(self):
        with agent_log("gpuwhy trace: tracing into x.db — Ctrl-C to stop\n"
                       "gpuwhy trace: no CUDA library found\n") as path:
            self.assertFalse(overhead.has_cuda_probes(path))
        with agent_log("gpuwhy trace: tracing into x.db — Ctrl-C to stop\n"
                       "gpuwhy trace: cuda: attached 55 probes to libcudart.so.13 (runtime)\n"
                       ) as path:
            self.assertTrue(overhead.has_cuda_probes(path))


class FakeAgent:
    """What wait_ready asks of the agent's process: whether it has exited."""

    def __init__(self, exit_code):
        self.returncode = exit_code

    def poll(self):
        return self.returncode


@contextlib.contextmanager
def agent_log(text):
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write(text)
    try:
        yield f.name
    finally:
        os.unlink(f.name)

if __name__ == "__main__":
    unittest.main()
