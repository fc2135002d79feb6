"""test_abx_tool.py - sdk/python/abx_tool.py: the launch contract, the
validation rules (bool is not an integer, 1.0 is not an integer, NaN and
1e400 are not JSON), declaration errors (exit 70), and parity with
libabxtool: the C tool tests/unit/tools/sample-decl.c and its Python twin
sample_decl.py must print byte-identical listings and schemas and fail the
same calls with the same messages.

Run by meson (suite unit) with PYTHONPATH=sdk/python and ABX_SAMPLE_DECL set
to the built C tool; without ABX_SAMPLE_DECL the parity tests are skipped.
"""

import io
import os
import subprocess
import sys
import unittest
from contextlib import redirect_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sdk", "python"))
sys.path.insert(0, HERE)

import abx_tool  # noqa: E402
from abx_tool import Arg, Tool  # noqa: E402

SAMPLE_C = os.environ.get("ABX_SAMPLE_DECL")
SAMPLE_PY = os.path.join(HERE, "sample_decl.py")


def run_py(*argv):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "sdk", "python"))
    return subprocess.run([sys.executable, SAMPLE_PY, *argv], capture_output=True, env=env)


def run_c(*argv):
    return subprocess.run([SAMPLE_C, *argv], capture_output=True)


CALLS = [
    '{"csv":"a.csv"}',
    '{"csv":"a.csv","limit":"x"}',
    '{"csv":"a.csv","limit":0}',
    '{"csv":"a.csv","limit":true}',
    '{"csv":"a.csv","limit":1.0}',
    '{"csv":"a.csv","limit":-9223372036854775808}',
    '{"csv":"a.csv","limit":9223372036854775807}',
    '{"csv":"a.csv","scale":2e16}',
    '{"csv":"a.csv","scale":-0.6}',
    '{"csv":"a.csv","scale":"1"}',
    '{"csv":"a.csv","kind":"avg\\u0001\\u202e\\"q"}',
    '{"csv":"a.csv","kind":"' + "k" * 100 + '"}',
    '{"csv":"a.csv","colum":1}',
    '{"csv":"a.csv","\\u001b[31m":1}',
    '{"csv":"a.csv","columns":["a",1]}',
    '{"csv":"a.csv","columns":"a"}',
    '{"csv":"a.csv","units":["x"]}',
    '{"csv":"a.csv","verbose":1}',
    '{"csv":null}',
    "{}",
    "[1]",
    "null",
    '"x"',
    "3",
]


@unittest.skipUnless(SAMPLE_C, "ABX_SAMPLE_DECL not set (run through meson)")
class Parity(unittest.TestCase):
    def same(self, *argv):
        """Same exit code and stderr; same stdout unless the (different)
        command implementations ran."""
        c, p = run_c(*argv), run_py(*argv)
        self.assertEqual(c.returncode, p.returncode, argv)
        if len(argv) < 2 or c.returncode == 2:
            self.assertEqual(c.stdout, p.stdout, argv)
        self.assertEqual(c.stderr, p.stderr, argv)
        return c

    def test_listing_and_schemas(self):
        self.assertEqual(self.same().returncode, 0)
        for cmd in ("echo", "nothing"):
            r = self.same(cmd)
            self.assertEqual(r.returncode, 0)
            self.assertIsNone(abx_tool.check_schema(__import__("json").loads(r.stdout)))
        # the awkward values really are in there
        out = run_c("echo").stdout
        for text in (b'"default":0.10000000000000001', b'"default":10000000000000000.0',
                     b'"default":-0.0', b"Say more\\u0001", "\u00e9t\u00e9".encode()):
            self.assertIn(text, out)

    def test_same_messages(self):
        for call in CALLS:
            self.same("echo", call)

    def test_same_exit_codes_for_bad_json(self):
        for call in ['{', '{"csv":"a","csv":"b"}', '{"csv":"\\u0000"}', '{"csv":"a","scale":1e400}',
                     '{"csv":"a","scale":NaN}', '{"csv":"a","limit":99999999999999999999}',
                     '{"csv":"\\ud800"}', "[" * 100000, ""]:
            c, p = run_c("echo", call), run_py("echo", call)
            self.assertEqual((c.returncode, p.returncode), (2, 2), call[:40])
            self.assertTrue(c.stderr.startswith(b"sample-decl: echo: invalid JSON arguments: "))
            self.assertTrue(p.stderr.startswith(b"sample-decl: echo: invalid JSON arguments: "), p.stderr)
            self.assertEqual(p.stderr.count(b"\n"), 1)

    def test_usage(self):
        self.assertEqual(self.same("nope").returncode, 2)
        self.assertEqual(self.same("nope\x1b[2J").returncode, 2)
        self.assertEqual(self.same("echo", "{}", "x").returncode, 2)


class Validation(unittest.TestCase):
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "f": {"type": "number", "maximum": 2},
            "b": {"type": "boolean"},
            "s": {"type": "string", "maxLength": 2},
            "l": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
        "required": ["n"],
        "additionalProperties": False,
    }

    def check(self, args, msg):
        self.assertEqual(abx_tool.validate(self.schema, args), msg)

    def test_rules(self):
        self.assertIsNone(abx_tool.check_schema(self.schema))
        self.check({"n": 1}, None)
        self.check({"n": True}, "'n' must be an integer, not a boolean")
        self.check({"n": 1.0}, "'n' must be an integer, not a decimal number")
        self.check({"n": 0}, "'n' must be at least 1 (got 0)")
        self.check({"n": 1, "f": True}, "'f' must be a number, not a boolean")
        self.check({"n": 1, "f": 3}, "'f' must be at most 2 (got 3)")
        self.check({"n": 1, "b": 0}, "'b' must be a boolean, not an integer")
        self.check({"n": 1, "s": "\u00e9\u00e9"}, None)
        self.check({"n": 1, "s": "abc"}, "'s' must be at most 2 characters long")
        self.check({"n": 1, "s": "a\0"}, "'s' must not contain NUL characters")
        self.check({"n": 1, "l": []}, "'l' must have at least 1 item")
        self.check({"n": 1, "l": [None]}, "'l'[0] must be a string, not null")
        self.check({"n": 1, "x": 1}, "unknown argument 'x'")
        self.check({}, "'n' is required")
        self.check([], "arguments must be a JSON object, not an array")
        long_key = "\u20ac" * 1000
        msg = abx_tool.validate(self.schema, {long_key: 1})
        self.assertLessEqual(len(msg.encode()), 255)

    def test_check_refuses(self):
        for schema, msg in [
            ({"type": "object", "$ref": "#"}, 'schema: unsupported keyword "$ref"'),
            ({"type": "object", "properties": {"a": {"type": "object"}}}, "property 'a'"),
            ({"type": "object", "properties": {"a": {"type": "string", "oneOf": []}}}, '"oneOf"'),
            ({"type": "object", "properties": {"a": {"type": "integer", "default": True}}}, "not a boolean"),
            ({"type": "object", "additionalProperties": True}, "must be false"),
        ]:
            self.assertIn(msg, abx_tool.check_schema(schema))

    def test_dumps_like_jansson(self):
        self.assertEqual(abx_tool.dumps([0.1, 1e16, 1e-5, 1e22, -0.0, 100.0, 5e-324]),
                         "[0.10000000000000001,10000000000000000.0,1.0000000000000001e-5,1e22,-0.0,100.0,4.9406564584124654e-324]")
        self.assertEqual(abx_tool.dumps({"a": "\x01\x1f\x7f\"\\/\u2028\n"}), '{"a":"\\u0001\\u001F\x7f\\"\\\\/\u2028\\n"}')


class Contract(unittest.TestCase):
    def main(self, tool, *argv):
        err = io.StringIO()
        with redirect_stderr(err):
            code = tool.main(list(argv))
        return code, err.getvalue()

    def test_declaration_errors_exit_70(self):
        def fn(args):
            return 0

        cases = [
            ([Arg("n", "integer", default=True)], "not a boolean"),
            ([Arg("n", "integer", default="1")], "not a string"),
            ([Arg("n", "integer", default=1.5)], "not a decimal number"),
            ([Arg("n", "enum")], "an enum argument needs choices"),
            ([Arg("n", "enum", choices=["a", "a"])], 'lists "a" twice'),
            ([Arg("n", "string", choices=["a"])], "choices apply to enum"),
            ([Arg("n", "string", required=True, default="x")], "cannot have a default"),
            ([Arg("n"), Arg("n")], "argument 'n': declared twice"),
            ([Arg("1n")], "invalid name"),
            ([Arg("n", "float")], 'unknown type "float"'),
            ([Arg("n", "integer", minimum=True)], "minimum is not a JSON number"),
            ([Arg("n", "number", minimum=2, maximum=1)], "is greater than"),
        ]
        for args, msg in cases:
            t = Tool("t", "T")
            t.command("c", "C", args=args)(fn)
            for argv in ([], ["c"], ["c", "{}"]):
                code, err = self.main(t, *argv)
                self.assertEqual(code, 70, (msg, argv))
                self.assertIn(msg, err)
        self.assertEqual(self.main(Tool("Bad"), )[0], 70)
        self.assertIn("abx-tool: invalid declaration", self.main(Tool("Bad"))[1])
        self.assertIn("the tool has no commands", self.main(Tool("t"))[1])

    def test_defaults_reach_the_command(self):
        seen = {}
        t = Tool("t")

        @t.command("c", "C", args=[Arg("a", "string", required=True), Arg("n", "integer", default=3),
                                   Arg("o", "string"), Arg("l", "string[]", default=("x",))])
        def c(args):
            seen.update(args)
            return 5

        code, err = self.main(t, "c", '{"a":"v"}')
        self.assertEqual((code, err), (5, ""))
        self.assertEqual(seen, {"a": "v", "n": 3, "o": None, "l": ["x"]})


if __name__ == "__main__":
    unittest.main()
