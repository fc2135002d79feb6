"""test_csv_summary.py - the sample tool sample-tools/csv-summary on good
and hostile CSV files: quoted fields, CRLF, empty files, ragged rows, huge
records, NUL bytes, invalid UTF-8, FIFOs and directories. It must never
crash: every run ends with exit 0 and JSON, or exit 1 and one message.

Run by meson with ABX_CSV_SUMMARY set to a test build of the tool.
"""

import json
import os
import subprocess
import tempfile
import unittest

TOOL = os.environ.get("ABX_CSV_SUMMARY")
TOOL = os.path.abspath(TOOL) if TOOL else None


@unittest.skipUnless(TOOL, "ABX_CSV_SUMMARY not set (run through meson)")
class CsvSummary(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def run_tool(self, content, cmd="summarize", **args):
        path = os.path.join(self.dir.name, "t.csv")
        if content is not None:
            with open(path, "wb") as f:
                f.write(content)
        args.setdefault("path", "t.csv")
        r = subprocess.run([TOOL, cmd, json.dumps(args)], capture_output=True, cwd=self.dir.name, timeout=60)
        self.assertIn(r.returncode, (0, 1, 2), r)
        if r.returncode == 0:
            self.assertEqual(r.stderr, b"")
            return json.loads(r.stdout)
        self.assertEqual(r.stdout, b"")
        self.assertEqual(r.stderr.count(b"\n"), 1, r.stderr)
        return r.stderr.decode("utf-8", "replace")

    def test_summary(self):
        out = self.run_tool(b'a,b,c\r\n1,x,"q""uo\nted"\r\n2,y,\r\n3.5,x,z,extra\r\n,,\r\n')
        self.assertEqual(out["rows"], 4)
        self.assertEqual(out["ragged_rows"], 1)
        a, b, c = out["columns"]
        self.assertEqual((a["type"], a["count"], a["missing"], a["min"], a["max"]), ("numeric", 3, 1, 1, 3.5))
        self.assertAlmostEqual(a["mean"], 13 / 6, places=6)
        self.assertEqual(b["top"][0], {"value": "x", "count": 2})
        self.assertIn({"value": 'q"uo\nted', "count": 1}, c["top"])
        one = self.run_tool(b"a,b\n1,2\n", column="b")
        self.assertEqual([c["name"] for c in one["columns"]], ["b"])
        self.assertEqual(self.run_tool(b"a;b\n1;2\n", cmd="columns", delimiter=";"), {"columns": ["a", "b"]})

    def test_errors(self):
        self.assertIn("is empty", self.run_tool(b""))
        self.assertIn("line 2: unterminated quoted field", self.run_tool(b'a\n"x\n'))
        self.assertIn("line 2: unexpected character after a closing quote", self.run_tool(b'a\n"x"y\n'))
        self.assertIn("NUL byte", self.run_tool(b"a\n\0\n"))
        self.assertIn("no column 'zz'", self.run_tool(b"a\n1\n", column="zz"))
        self.assertIn("cannot open", self.run_tool(None, path="missing.csv"))
        self.assertIn("not a regular file", self.run_tool(None, path="."))
        os.mkfifo(os.path.join(self.dir.name, "fifo"))
        self.assertIn("not a regular file", self.run_tool(None, path="fifo"))
        self.assertIn("'top' must be at most 100", self.run_tool(b"a\n", top=101))

    def test_hostile(self):
        self.assertIn("longer than", self.run_tool(b"a\n" + b"x" * (2 << 20) + b"\n"))
        self.assertIn("more than", self.run_tool(b",".join([b"c"] * 5000) + b"\n"))
        out = self.run_tool(b"a\n\xff\xfe\n\xc3\xa9\n")  # invalid UTF-8 becomes U+FFFD
        self.assertEqual(len(out["columns"][0]["top"]), 2)
        many = b"a\n" + b"".join(b"v%d\n" % i for i in range(30000))
        out = self.run_tool(many)
        self.assertEqual(out["columns"][0]["distinct_exact"], False)
        self.assertEqual(out["columns"][0]["count"], 30000)
        out = self.run_tool(b"a\n" + b"1e400\nnan\n0x10\n")
        self.assertEqual(out["columns"][0]["type"], "text")
        out = self.run_tool(b'"a\nb",c\n1,2')  # no final newline, newline in header
        self.assertEqual(out["columns"][0]["name"], "a\nb")


if __name__ == "__main__":
    unittest.main()
