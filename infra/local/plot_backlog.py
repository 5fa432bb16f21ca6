"""The chaos run's picture: the pending backlog and the oldest pending
event's age over a run, with its phases and sink outages marked.

usage: plot_backlog.py DIR OUT_DIR
Reads DIR/backlog-<run>.csv (seconds,pending,oldest_age_seconds) and
DIR/phases-<run>.csv (name,start,end: seconds from the run's start), as the
chaos harness writes them, and renders OUT_DIR/backlog-<run>.png for each run.
Run by `make chaos` (infra/local/chaos.sh) with the project's .venv-plot.
"""
import csv
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def plot(run, backlog, phases, out):
    seconds = [float(r["seconds"]) for r in backlog]
    pending = [int(r["pending"]) for r in backlog]
    age = [float(r["oldest_age_seconds"]) for r in backlog]
    fig, left = plt.subplots(figsize=(11, 4.8), dpi=110)
    right = left.twinx()
    left.plot(seconds, pending, color="tab:blue", label="pending outbox items")
    right.plot(seconds, age, color="tab:red", label="oldest pending age (s)")
    left.set_xlabel("seconds since the run started")
    left.set_ylabel("pending outbox items", color="tab:blue")
    right.set_ylabel("oldest pending event's age (s)", color="tab:red")
    top = max(pending + [1])
    for phase in phases:
        start, end = float(phase["start"]), float(phase["end"])
        if phase["name"].startswith("sink outage"):
            left.axvspan(start, end, color="tab:orange", alpha=0.25)
            left.text(start, top * 0.95, phase["name"], fontsize=7, color="tab:orange")
        else:
            left.axvline(start, color="grey", linestyle=":", linewidth=1)
            left.text(start, top * 1.02, phase["name"], fontsize=7, color="grey")
    left.set_ylim(0, top * 1.1)
    left.set_title(f"chaos run {run}: backlog and oldest pending age", pad=18)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main():
    source, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    target.mkdir(parents=True, exist_ok=True)
    runs = sorted(source.glob("backlog-*.csv"))
    if not runs:
        sys.exit(f"plot_backlog: no backlog-*.csv in {source}")
    for path in runs:
        run = path.stem.removeprefix("backlog-")
        phases_path = source / f"phases-{run}.csv"
        phases = read(phases_path) if phases_path.exists() else []
        out = target / f"backlog-{run}.png"
        plot(run, read(path), phases, out)
        print(f"plot_backlog: {out}")


if __name__ == "__main__":
    main()
