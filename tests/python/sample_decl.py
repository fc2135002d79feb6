"""sample_decl.py - the Python twin of tests/unit/tools/sample-decl.c: the
same declaration, so both must print byte-identical listings and schemas
and fail the same calls with the same messages."""

import json
import sys

from abx_tool import Arg, Tool

tool = Tool("sample-decl", "Declares every type")


@tool.command(
    "echo",
    "Prints its arguments \u2713",
    args=[
        Arg("csv", "string", description='CSV file, relative to the "cwd"', required=True),
        Arg("columns", "string[]", description="Columns\tto plot \u2014 in order"),
        Arg("kind", "enum", default="line", choices=["line", "bar", "scatter"]),
        Arg("limit", "integer", description="Rows", default=10, minimum=1, maximum=1000),
        Arg("scale", "number", description="Scale", default=0.1, minimum=-0.5, maximum=1e16),
        Arg("big", "number", default=1e16),
        Arg("zero", "number", default=-0.0),
        Arg("verbose", "boolean", description="Say more\x01", default=False),
        Arg("title", "string", description="Title (\\ and / and \x7f)"),
        Arg("units", "string[]", default=["cm"], choices=["cm", "in", "\u00e9t\u00e9"]),
    ],
)
def echo(args):
    print(json.dumps(args))
    return 3 if args["title"] and args["title"].startswith("!") else 0


@tool.command("nothing", "Takes no arguments")
def nothing(args):
    print("{}")


if __name__ == "__main__":
    sys.exit(tool.main())
