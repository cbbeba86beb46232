"""Why overhead.py does not pool runs by inverse-variance weights: a simulation.

Three runs of 21 phases each in overhead.py's rotating order (overhead_test.alternating_run),
a true throughput loss of 0.5%, log-normal phase noise per run. For each noise mix it prints how
often a 95% interval held the true loss, for the run-weighted interval (weights 1/SE² from each
run's own groups; Satterthwaite degrees of freedom, or the smallest run's) and for the group
t-interval overhead.py uses (all groups pooled).

  python3 bench/gpu/pooling_sim.py [--trials 2000]
"""
import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import overhead  # noqa: E402
import overhead_test  # noqa: E402

TRUE_LOSS = 0.5  # percent


def weighted_interval(runs, df_rule):
    means, ses, dfs = [], [], []
    for groups in runs:
        g = [statistics.fmean(x) for x in groups]
        means.append(statistics.fmean(g))
        ses.append(statistics.stdev(g) / len(g) ** 0.5)
        dfs.append(len(g) - 1)
    w = [1 / se ** 2 for se in ses]
    total = sum(w)
    mean = sum(wi * m for wi, m in zip(w, means)) / total
    if df_rule == "satterthwaite":
        df = total ** 2 / sum(wi ** 2 / d for wi, d in zip(w, dfs))
    else:
        df = min(dfs)
    half = overhead.t975(max(1, int(df))) * (1 / total) ** 0.5
    return mean - half, mean + half


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=2000)
    args = p.parse_args()
    print("noise sd per run       | weighted, Satterthwaite | weighted, min df | pooled groups")
    for noises in ((0.03, 0.003, 0.003), (0.01, 0.01, 0.01), (0.03, 0.01, 0.003), (0.003,) * 3):
        rng = random.Random(1)
        held = {"satterthwaite": 0, "min": 0, "pooled": 0}
        for _ in range(args.trials):
            runs = [overhead_test.loss_groups(
                overhead_test.alternating_run(21, n, TRUE_LOSS / 100, rng)) for n in noises]
            for rule in ("satterthwaite", "min"):
                lo, hi = weighted_interval(runs, rule)
                held[rule] += lo <= TRUE_LOSS <= hi
            _, lo, hi = overhead.mean_ci([g for groups in runs for g in groups])
            held["pooled"] += lo <= TRUE_LOSS <= hi
        n = args.trials
        print(f"{str(noises):22s} | {held['satterthwaite'] / n:23.3f} | {held['min'] / n:16.3f} | "
              f"{held['pooled'] / n:.3f}")


if __name__ == "__main__":
    main()
