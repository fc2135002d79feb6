"""sci-plot - a sample abx tool in Python: charts of CSV columns as PNG.

    plot {csv, x?, y[], kind, title?, output}
      -> {"output": "plot.png", "width": W, "height": H}

Reads the CSV with the standard library, draws with matplotlib (Debian's
python3-matplotlib, Agg backend, no display needed) and writes the PNG
relative to the working directory; absolute paths and ".." are refused so
a call cannot write outside it.
"""

import csv
import json
import math
import os
import sys
import tempfile

from abx_tool import Arg, Tool

MAX_ROWS = 1_000_000
MAX_FIELD = 1024 * 1024

tool = Tool("sci-plot", "Plots from CSV files")


def fail(msg):
    sys.stderr.write("sci-plot: plot: %s\n" % msg)
    return 1


def safe_output(path):
    """The output path if it stays under the working directory, else None."""
    if not path or os.path.isabs(path) or "\0" in path:
        return None
    parts = path.replace("\\", "/").split("/")
    if ".." in parts or not path.lower().endswith(".png"):
        return None
    return os.path.normpath(path)


def number(cell):
    try:
        v = float(cell)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def read_columns(path, names):
    csv.field_size_limit(MAX_FIELD)
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None:
            raise ValueError("%r is empty (no header line)" % path)
        index = {}
        for n in names:
            if n not in header:
                raise ValueError("no column %r in the header" % n)
            index[n] = header.index(n)
        data = {n: [] for n in names}
        for i, row in enumerate(rows):
            if i == MAX_ROWS:
                raise ValueError("more than %d rows" % MAX_ROWS)
            for n, j in index.items():
                data[n].append(row[j] if j < len(row) else "")
        return data


def private_mplconfig():
    home = os.environ.get("HOME")
    if not home or not os.access(home, os.W_OK):
        os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="sci-plot-mpl-")


@tool.command(
    "plot",
    "Draws a line, bar or scatter chart of columns of a CSV file into a PNG image",
    args=[
        Arg("csv", "string", required=True, description="CSV file with a header line, relative to the working directory or absolute"),
        Arg("x", "string", description="Column for the x axis (default: the row number)"),
        Arg("y", "string[]", required=True, description="Numeric columns to plot, one series each"),
        Arg("kind", "enum", choices=["line", "bar", "scatter"], default="line", description="Chart type"),
        Arg("title", "string", description="Chart title"),
        Arg("output", "string", default="plot.png", description="PNG file to write, relative to the working directory"),
    ],
)
def plot(args):
    out = safe_output(args["output"])
    if out is None:
        return fail("output must be a relative .png path without '..' (got %s)" % json.dumps(args["output"]))
    if not args["y"]:
        return fail("'y' must name at least one column")
    names = list(dict.fromkeys(([args["x"]] if args["x"] else []) + args["y"]))
    try:
        data = read_columns(args["csv"], names)
    except (OSError, ValueError, csv.Error) as e:
        return fail(str(e))

    private_mplconfig()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return fail("matplotlib is not installed (apt install python3-matplotlib)")

    nrows = len(data[names[0]]) if names else 0
    if args["x"]:
        xs = [number(c) for c in data[args["x"]]]
        categorical = any(v is None for v in xs)
        if categorical:
            xs = data[args["x"]]
    else:
        xs, categorical = list(range(nrows)), False
    if args["kind"] == "bar" and not categorical and len(xs) > 1:
        # bars as wide as the smallest step between x values, split by series
        step = min((abs(b - a) for a, b in zip(xs, xs[1:]) if a is not None and b is not None and a != b), default=1)
    else:
        step = 1

    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    try:
        width = 0.8 * step / len(args["y"])
        for k, name in enumerate(args["y"]):
            ys = [number(c) for c in data[name]]
            if all(v is None for v in ys) and nrows:
                return fail("column %r has no numeric values" % name)
            pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
            px = [p[0] for p in pts]
            py = [p[1] for p in pts]
            if args["kind"] == "line":
                ax.plot(px, py, label=name)
            elif args["kind"] == "scatter":
                ax.scatter(px, py, label=name, s=12)
            else:
                pos = list(range(len(px))) if categorical else px
                offset = (k - (len(args["y"]) - 1) / 2) * width
                ax.bar([p + offset for p in pos], py, width=width, label=name)
                if categorical:
                    ax.set_xticks(pos, px, rotation=45, ha="right")
        ax.set_xlabel(args["x"] or "row")
        if len(args["y"]) == 1:
            ax.set_ylabel(args["y"][0])
        else:
            ax.legend()
        if args["title"]:
            ax.set_title(args["title"])
        fig.tight_layout()
        parent = os.path.dirname(out)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fig.savefig(out, format="png")
        w, h = fig.canvas.get_width_height()
    except OSError as e:
        return fail("cannot write %r: %s" % (out, e.strerror))
    finally:
        plt.close(fig)
    print(json.dumps({"output": out, "width": w, "height": h}))
    return 0


if __name__ == "__main__":
    raise SystemExit(tool.main())
