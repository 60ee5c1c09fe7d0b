#!/usr/bin/env python3
"""Draws the PNG of a `pronghorn bench` result: throughput (left) and latency percentiles (right),
kernel and pronghorn side by side per case, with the median per-round ratio over each pronghorn bar.

    python3 bench/chart.py bench/results/redis.json bench/results/redis.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

data = json.load(open(sys.argv[1]))
rows = data["summary"]
throughput = [r for r in rows if r["higher_is_better"]]
# Counts where lower is better (mariadb's retried deadlocks) stay in the table, out of the chart.
latency = [r for r in rows if not r["higher_is_better"] and r["unit"] in ("ms", "us")]
panels = [p for p in (throughput, latency) if p]
fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False)
colors = {"kernel": "tab:gray", "pronghorn": "tab:green"}

for ax, panel in zip(axes[0], panels):
    # The metric goes under the case where a panel has several (mariadb: tps and qps).
    several = panel is latency or len({r["metric"] for r in panel}) > 1
    labels = [f"{r['case']}\n{r['metric']}" if several else r["case"] for r in panel]
    xs = range(len(panel))
    width = 0.38
    for i, path in enumerate(("kernel", "pronghorn")):
        vals = [r[f"{path}_median"] for r in panel]
        bars = ax.bar([x + (i - 0.5) * width for x in xs], vals, width, label=path, color=colors[path])
        if path == "pronghorn":
            for bar, r in zip(bars, panel):
                if r["ratio_median"] is not None and r["ratio_median"] == r["ratio_median"]:  # not null/NaN
                    ax.annotate(f"{r['ratio_median']:.2f}x", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                                ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    units = sorted({r["unit"] for r in panel})
    ax.set_ylabel(", ".join(units))
    ax.set_title(("throughput (higher is better)" if panel is throughput else "latency (lower is better)"))
    ax.legend(fontsize=8)

# Results of before the lab models are of the veth model.
model = data.get("model", {}).get("model", "veth")
fig.suptitle(f"{data['workload']}: kernel vs pronghorn, lab model {model}, medians of {data['rounds']} rounds "
             f"({data['machine'].get('pmd', '')})", fontsize=10)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=90)
