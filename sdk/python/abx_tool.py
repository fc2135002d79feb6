"""abx_tool - write an abx tool in Python (standard library only).

A tool is one program with one or more commands. Each command declares its
arguments once; the module turns the declaration into the JSON Schema abxd
shows to models and validates every call against that schema before the
command runs. It implements the launch contract of docs/tools.md:

    launch                 prints [{"name": ..., "description": ...}, ...]
    launch <cmd>           prints <cmd>'s JSON Schema
    launch <cmd> <json>    validates <json>, runs <cmd>, exits with its code

Unknown commands, invalid JSON, arguments that do not validate and extra
argv exit 2 with one line on stderr ("sci-plot: plot: 'y' is required"); a
broken declaration exits 70 in every stage.

    from abx_tool import Tool, Arg

    tool = Tool("hello", "Greetings")

    @tool.command("greet", "Greets someone", args=[
        Arg("name", "string", required=True, description="Who to greet"),
        Arg("times", "integer", default=1, minimum=1),
    ])
    def greet(args):
        for _ in range(args["times"]):
            print(json.dumps("hello, " + args["name"]))

    if __name__ == "__main__":
        raise SystemExit(tool.main())

The command function gets a dict with every declared argument: the call's
value, else the default, else None. It returns an exit code (None = 0).

This module is the Python twin of libabxtool (src/tools/tool.c and
schema.c): the same declaration prints byte-identical schemas (compact JSON
encoded the way jansson encodes it) and the same arguments fail with the
same messages. Keep the two in step; tests/python/test_abx_tool.py checks.
"""

import json
import math
import re
import sys

__all__ = ["Tool", "Arg", "DeclarationError", "check_schema", "validate", "dumps"]

EXIT_USAGE = 2
EXIT_DECL = 70

MAX_PROPERTIES = 128
MAX_ENUM = 256
MAX_NAME = 64
MAX_TEXT = 8192
QUOTE_MAX = 40
MSG_MAX = 255  # bytes of a message (struct err holds 256 with the NUL)
ARGS_MAX_DEPTH = 64
COMMANDS_MAX = 256
ENUM_LIST_MAX = 8

_TOOL_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_PROP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_TYPES = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "enum": "string",
    "string[]": "array",
}
_PTYPES = ("string", "integer", "number", "boolean", "array")
_PKINDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "array": "an array of strings",
}


class DeclarationError(Exception):
    """A mistake in a tool's declaration (the author's bug)."""


class _Invalid(Exception):
    """A schema or value that does not pass; the message says why."""


# -- encoding, exactly as jansson's JSON_COMPACT | JSON_PRESERVE_ORDER -------


def _real(x):
    s = "%.17g" % x
    if "." not in s and "e" not in s:
        s += ".0"
    mant, e, exp = s.partition("e")
    if e:
        sign = "-" if exp.startswith("-") else ""
        exp = exp.lstrip("+-").lstrip("0") or "0"
        s = mant + "e" + sign + exp
    return s


_ESC = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s):
    out = ['"']
    for ch in s:
        if ch in _ESC:
            out.append(_ESC[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04X" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dumps(v):
    """Compact JSON text of v, byte for byte as jansson would print it."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError("non-finite number")
        return _real(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(dumps(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(_string(k) + ":" + dumps(x) for k, x in v.items()) + "}"
    raise TypeError("cannot encode %r" % type(v).__name__)


# -- messages ----------------------------------------------------------------


def _escaped(c):
    return (
        c < 0x20
        or 0x7F <= c <= 0x9F
        or c in (0x200E, 0x200F, 0xFEFF)
        or 0x2028 <= c <= 0x202E
        or 0x2066 <= c <= 0x2069
        or 0xD800 <= c <= 0xDFFF
    )


def _quote(s, q):
    out = [q] if q else []
    for i, ch in enumerate(s):
        if q and i == QUOTE_MAX:
            out.append("...")
            break
        if q and (ch == q or ch == "\\"):
            out.append("\\" + ch)
        elif _escaped(ord(ch)):
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    if q:
        out.append(q)
    return "".join(out)


def _name(s):
    return _quote(s, "'")


def _str(s):
    return _quote(s, '"')


def _num(v):
    return str(v) if isinstance(v, int) else _real(v)


def _fit(msg):
    b = msg.encode("utf-8", "surrogatepass")
    if len(b) <= MSG_MAX:
        return msg
    n = MSG_MAX
    while n > 0 and (b[n] & 0xC0) == 0x80:
        n -= 1
    return b[:n].decode("utf-8", "replace")


def _kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a decimal number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return _is_int(v) or isinstance(v, float)


# -- validation (tool_schema_validate) ---------------------------------------


def _subject(name, index):
    return _name(name) + ("[%d]" % index if index is not None else "")


def _length(name, index, what, bound, unit):
    verb = "have" if unit == "item" else "be"
    m = "%s must %s %s %d %s%s" % (_subject(name, index), verb, what, bound, unit, "" if bound == 1 else "s")
    if unit == "character":
        m += " long"
    raise _Invalid(m)


def _validate_string(prop, name, index, v):
    if not isinstance(v, str):
        raise _Invalid("%s must be a string, not %s" % (_subject(name, index), _kind(v)))
    if "\0" in v:
        raise _Invalid("%s must not contain NUL characters" % _subject(name, index))
    e = prop.get("enum")
    if e is not None:
        if v in e:
            return
        shown = ", ".join(_str(c) for c in e[:ENUM_LIST_MAX])
        if len(e) > ENUM_LIST_MAX:
            shown += ", ..."
        raise _Invalid("%s must be one of %s (got %s)" % (_subject(name, index), shown, _str(v)))
    b = prop.get("minLength")
    if b is not None and len(v) < b:
        _length(name, index, "at least", b, "character")
    b = prop.get("maxLength")
    if b is not None and len(v) > b:
        _length(name, index, "at most", b, "character")


def _validate_value(prop, name, v):
    t = prop.get("type")
    if t == "string":
        return _validate_string(prop, name, None, v)
    ok = {
        "integer": _is_int,
        "number": _is_num,
        "boolean": lambda x: isinstance(x, bool),
        "array": lambda x: isinstance(x, list),
    }[t](v)
    if not ok:
        raise _Invalid("%s must be %s, not %s" % (_name(name), _PKINDS[t], _kind(v)))
    if t in ("integer", "number"):
        lo, hi = prop.get("minimum"), prop.get("maximum")
        if lo is not None and v < lo:
            raise _Invalid("%s must be at least %s (got %s)" % (_name(name), _num(lo), _num(v)))
        if hi is not None and v > hi:
            raise _Invalid("%s must be at most %s (got %s)" % (_name(name), _num(hi), _num(v)))
    if t == "array":
        b = prop.get("minItems")
        if b is not None and len(v) < b:
            _length(name, None, "at least", b, "item")
        b = prop.get("maxItems")
        if b is not None and len(v) > b:
            _length(name, None, "at most", b, "item")
        for i, x in enumerate(v):
            _validate_string(prop["items"], name, i, x)


def validate(schema, args):
    """Checks args (decoded JSON) against a checked schema, like
    tool_schema_validate(). Returns None or the message of the first failure."""
    try:
        if not isinstance(args, dict):
            raise _Invalid("arguments must be a JSON object, not %s" % _kind(args))
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            for k in args:
                if k not in props:
                    raise _Invalid("unknown argument %s" % _name(k))
        required = schema.get("required", [])
        for k, prop in props.items():
            if k not in args:
                if k in required:
                    raise _Invalid("%s is required" % _name(k))
                continue
            _validate_value(prop, k, args[k])
    except _Invalid as e:
        return _fit(str(e))
    return None


# -- schema check (tool_schema_check) ----------------------------------------

_KEYWORDS = {
    # keyword: (type it applies to or None for all, allowed in array items)
    "type": (None, True),
    "description": (None, True),
    "title": (None, True),
    "default": (None, False),
    "enum": ("string", True),
    "minLength": ("string", True),
    "maxLength": ("string", True),
    "minimum": ("integer", False),
    "maximum": ("integer", False),
    "items": ("array", False),
    "minItems": ("array", False),
    "maxItems": ("array", False),
}


def _where(name, items):
    return "property %s%s: " % (_name(name), " items" if items else "")


def _check_text(v, name, items, key):
    w = _where(name, items) if name is not None else "schema: "
    if not isinstance(v, str):
        raise _Invalid('%s"%s" must be a string, not %s' % (w, key, _kind(v)))
    if len(v.encode("utf-8", "surrogatepass")) > MAX_TEXT:
        raise _Invalid('%s"%s" is longer than %d bytes' % (w, key, MAX_TEXT))
    if "\0" in v:
        raise _Invalid('%s"%s" contains a NUL character' % (w, key))


def _check_property(prop, name, items):
    w = _where(name, items)
    if not isinstance(prop, dict):
        raise _Invalid("%sthe schema must be an object, not %s" % (w, _kind(prop)))
    tv = prop.get("type")
    t = tv if isinstance(tv, str) and tv in _PTYPES else None
    if t is None or (items and t != "string"):
        if "type" not in prop:
            m = '"type" is required'
        elif items:
            m = '"type" must be "string"'
        else:
            m = '"type" must be one of "string", "integer", "number", "boolean", "array"'
        if isinstance(tv, str):
            m += " (got %s)" % _str(tv)
        elif "type" in prop:
            m += " (got %s)" % _kind(tv)
        raise _Invalid(w + m)
    for k, v in prop.items():
        kw = _KEYWORDS.get(k)
        if kw is None or (items and not kw[1]):
            raise _Invalid("%sunsupported keyword %s" % (w, _str(k)))
        only = kw[0]
        if not (only is None or only == t or (only == "integer" and t == "number")):
            raise _Invalid('%s"%s" does not apply to type "%s"' % (w, k, t))
        if k in ("description", "title"):
            _check_text(v, name, items, k)
        elif k == "enum":
            if not isinstance(v, list) or not 1 <= len(v) <= MAX_ENUM:
                raise _Invalid('%s"enum" must be an array of 1 to %d strings' % (w, MAX_ENUM))
            for i, c in enumerate(v):
                _check_text(c, name, items, "enum")
                if c in v[:i]:
                    raise _Invalid('%s"enum" lists %s twice' % (w, _str(c)))
        elif k in ("minLength", "maxLength", "minItems", "maxItems"):
            if not (_is_int(v) and 0 <= v <= _INT_MAX):
                raise _Invalid('%s"%s" must be a non-negative integer' % (w, k))
        elif k in ("minimum", "maximum"):
            if not _is_num(v):
                raise _Invalid('%s"%s" must be a number, not %s' % (w, k, _kind(v)))
        elif k == "items":
            _check_property(v, name, True)
    if t == "array" and "items" not in prop:
        raise _Invalid('%s"items" is required for type "array"' % w)
    for lo, hi in (("minimum", "maximum"), ("minLength", "maxLength"), ("minItems", "maxItems")):
        if lo in prop and hi in prop and prop[lo] > prop[hi]:
            raise _Invalid('%s"%s" is greater than "%s"' % (w, lo, hi))
    if "default" in prop:
        d = prop["default"]
        if (isinstance(d, str) and len(d.encode("utf-8", "surrogatepass")) > MAX_TEXT) or (
            isinstance(d, list) and len(d) > MAX_ENUM
        ):
            raise _Invalid('%s"default" is too large' % w)
        try:
            _validate_value(prop, name, d)
        except _Invalid as e:
            raise _Invalid('%sinvalid "default": %s' % (w, _fit(str(e)))) from None


def check_schema(schema):
    """Like tool_schema_check(): None when schema is in the subset we
    enforce, else the message naming the keyword and property."""
    try:
        if not isinstance(schema, dict):
            raise _Invalid("schema: must be a JSON object, not %s" % _kind(schema))
        for k, v in schema.items():
            if k == "type":
                if v != "object":
                    raise _Invalid('schema: "type" must be "object"')
            elif k in ("description", "title", "$schema"):
                _check_text(v, None, False, k)
            elif k == "additionalProperties":
                if v is not False:
                    raise _Invalid('schema: "additionalProperties" must be false')
            elif k not in ("properties", "required"):
                raise _Invalid("schema: unsupported keyword %s" % _str(k))
        if "type" not in schema:
            raise _Invalid('schema: "type" is required')
        props = schema.get("properties")
        if props is not None:
            if not isinstance(props, dict):
                raise _Invalid('schema: "properties" must be an object, not %s' % _kind(props))
            if len(props) > MAX_PROPERTIES:
                raise _Invalid("schema: more than %d properties" % MAX_PROPERTIES)
            for k, p in props.items():
                if not _PROP_NAME.fullmatch(k):
                    raise _Invalid(
                        "schema: invalid property name %s (expected [A-Za-z_][A-Za-z0-9_-]{0,63})"
                        % _name(k)
                    )
                _check_property(p, k, False)
        req = schema.get("required")
        if req is not None:
            if not isinstance(req, list):
                raise _Invalid('schema: "required" must be an array, not %s' % _kind(req))
            for i, r in enumerate(req):
                if not isinstance(r, str):
                    raise _Invalid('schema: "required" must list strings, not %s' % _kind(r))
                if "\0" in r or r not in (props or {}):
                    raise _Invalid(
                        'schema: "required" names %s, which is not a property' % _str(r)
                    )
                if r in req[:i]:
                    raise _Invalid('schema: "required" lists %s twice' % _str(r))
    except _Invalid as e:
        return _fit(str(e))
    return None


# -- parsing a call's arguments ----------------------------------------------


class _BadJSON(Exception):
    pass


def _pairs(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise _BadJSON("duplicate object key %s" % _str(k))
        seen[k] = v
    return seen


def _int(s):
    v = int(s)
    if not _INT_MIN <= v <= _INT_MAX:
        raise _BadJSON("too big integer %s" % s[:40])
    return v


def _float(s):
    v = float(s)
    if not math.isfinite(v):
        raise _BadJSON("real number overflow %s" % s[:40])
    return v


def _constant(s):
    raise _BadJSON("invalid token %s" % s)


def _strings_ok(v):
    """jansson refuses NUL characters and unpaired surrogates; so do we."""
    if isinstance(v, str):
        if "\0" in v:
            raise _BadJSON("\\u0000 is not allowed")
        for ch in v:
            if 0xD800 <= ord(ch) <= 0xDFFF:
                raise _BadJSON("invalid Unicode (unpaired surrogate or bad UTF-8)")
    elif isinstance(v, list):
        for x in v:
            _strings_ok(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            _strings_ok(k)
            _strings_ok(x)


def _parse_args(text):
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > ARGS_MAX_DEPTH:
                raise _Invalid(
                    "invalid JSON arguments: nested deeper than %d levels" % ARGS_MAX_DEPTH
                )
        elif ch in "]}":
            depth -= 1
    try:
        v = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_int=_int,
            parse_float=_float,
            parse_constant=_constant,
        )
        _strings_ok(v)
        return v
    except json.JSONDecodeError as e:
        msg = "%s (line %d, column %d)" % (e.msg, e.lineno, e.colno)
    except (_BadJSON, ValueError) as e:
        msg = str(e)
    raise _Invalid("invalid JSON arguments: " + _quote(msg, ""))


# -- declarations ------------------------------------------------------------

_MISSING = object()


class Arg:
    """One argument: name, type ("string", "integer", "number", "boolean",
    "enum", "string[]"), and optionally description, required, default,
    choices (enum, string[]) and inclusive minimum/maximum (integer,
    number)."""

    def __init__(
        self,
        name,
        type="string",
        *,
        description=None,
        required=False,
        default=_MISSING,
        choices=None,
        minimum=None,
        maximum=None,
    ):
        self.name = name
        self.type = type
        self.description = description
        self.required = required
        self.default = default
        self.choices = choices
        self.minimum = minimum
        self.maximum = maximum


class _Command:
    def __init__(self, name, description, args, fn):
        self.name = name
        self.description = description
        self.args = list(args or [])
        self.fn = fn
        self.schema = None


def _decl(cmd, arg, msg):
    where = ""
    if cmd is not None:
        where += "command %s: " % _name(str(cmd.name))
    if arg is not None:
        where += "argument %s: " % _name(str(arg.name))
    raise DeclarationError(_fit(where + msg))


def _text(cmd, arg, what, s):
    if not isinstance(s, str):
        _decl(cmd, arg, "%s must be a string" % what)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        _decl(cmd, arg, "%s is not valid UTF-8" % what)
    return s


def _property(cmd, a):
    if a.type not in _TYPES:
        _decl(cmd, a, "unknown type %s" % _str(str(a.type)))
    p = {"type": _TYPES[a.type]}
    choices = None
    if a.choices is not None:
        if a.type not in ("enum", "string[]"):
            _decl(cmd, a, "choices apply to enum and string array arguments only")
        if isinstance(a.choices, str):
            _decl(cmd, a, "choices must be a list of strings")
        choices = list(a.choices)
        if len(choices) > MAX_ENUM:
            _decl(cmd, a, "more than %d choices" % MAX_ENUM)
        for i, c in enumerate(choices):
            if not isinstance(c, str):
                _decl(cmd, a, "choice %d is not a string" % i)
            _text(cmd, a, "choice %d" % i, c)
    elif a.type == "enum":
        _decl(cmd, a, "an enum argument needs choices")
    if a.type == "enum":
        p["enum"] = choices
    if a.type == "string[]":
        p["items"] = {"type": "string"}
        if choices is not None:
            p["items"]["enum"] = choices
    if a.description is not None:
        p["description"] = _text(cmd, a, "the description", a.description)
    if a.default is not _MISSING:
        if a.required:
            _decl(cmd, a, "a required argument cannot have a default")
        d = a.default
        if isinstance(d, tuple):
            d = list(d)
        if isinstance(d, float) and not math.isfinite(d):
            _decl(cmd, a, "the default is not JSON: not a finite number")
        p["default"] = d
    for key in ("minimum", "maximum"):
        v = getattr(a, key)
        if v is None:
            continue
        if a.type not in ("integer", "number"):
            _decl(cmd, a, "%s applies to integer and number arguments only" % key)
        if not _is_num(v) or (isinstance(v, float) and not math.isfinite(v)):
            _decl(cmd, a, "%s is not a JSON number" % key)
        if _is_int(v) and not _INT_MIN <= v <= _INT_MAX:
            _decl(cmd, a, "%s is not a JSON number" % key)
        p[key] = v
    return p


def _schema(cmd):
    if cmd.description is None:
        _decl(cmd, None, "the description is missing")
    s = {"type": "object", "description": _text(cmd, None, "the description", cmd.description)}
    props, req = {}, []
    for i, a in enumerate(cmd.args):
        if not isinstance(a, Arg):
            _decl(cmd, None, "argument %d is not an Arg" % i)
        if not isinstance(a.name, str) or not _PROP_NAME.fullmatch(a.name):
            _decl(cmd, a, "invalid name (expected [A-Za-z_][A-Za-z0-9_-]{0,63})")
        if a.name in props:
            _decl(cmd, a, "declared twice")
        if i == MAX_PROPERTIES:
            _decl(cmd, None, "more than %d arguments" % MAX_PROPERTIES)
        props[a.name] = _property(cmd, a)
        if a.required:
            req.append(a.name)
    s["properties"] = props
    if req:
        s["required"] = req
    s["additionalProperties"] = False
    msg = check_schema(s)
    if msg is not None:
        _decl(cmd, None, msg)
    return s


class Tool:
    """A tool: a package name ([a-z0-9][a-z0-9_-]{0,63}) and its commands."""

    def __init__(self, name, description=None):
        self.name = name
        self.description = description
        self.commands = []

    def command(self, name, description, args=()):
        """Decorator declaring fn(args) as command name."""

        def register(fn):
            self.commands.append(_Command(name, description, args, fn))
            return fn

        return register

    def add_command(self, name, description, args, fn):
        self.commands.append(_Command(name, description, args, fn))

    def _label(self):
        ok = isinstance(self.name, str) and _TOOL_NAME.fullmatch(self.name)
        return self.name if ok else "abx-tool"

    def check(self):
        """Checks the declaration; raises DeclarationError."""
        if not isinstance(self.name, str) or not _TOOL_NAME.fullmatch(self.name):
            raise DeclarationError(
                "tool name %s is invalid (expected [a-z0-9][a-z0-9_-]{0,63})"
                % _name(str(self.name))
            )
        if not self.commands:
            raise DeclarationError("the tool has no commands")
        if len(self.commands) > COMMANDS_MAX:
            raise DeclarationError("more than %d commands" % COMMANDS_MAX)
        seen = set()
        for c in self.commands:
            if not isinstance(c.name, str) or not _TOOL_NAME.fullmatch(c.name):
                _decl(c, None, "invalid name (expected [a-z0-9][a-z0-9_-]{0,63})")
            if c.name in seen:
                _decl(c, None, "declared twice")
            seen.add(c.name)
            if not callable(c.fn):
                _decl(c, None, "no run function")
            c.schema = _schema(c)

    def schema(self, name):
        """The schema of command name (after check())."""
        for c in self.commands:
            if c.name == name:
                return c.schema
        raise KeyError(name)

    def main(self, argv=None):
        """The launch contract over argv (default sys.argv[1:]); returns the
        exit code."""
        argv = sys.argv[1:] if argv is None else list(argv)
        label = self._label()
        try:
            self.check()
        except DeclarationError as e:
            _err("%s: invalid declaration: %s" % (label, e))
            return EXIT_DECL
        if len(argv) > 2:
            _err("%s: too many arguments (usage: launch [<command> [<json>]])" % label)
            return EXIT_USAGE
        if not argv:
            listing = [{"name": c.name, "description": c.schema["description"]} for c in self.commands]
            return _out(label, dumps(listing))
        cmd = next((c for c in self.commands if c.name == argv[0]), None)
        if cmd is None:
            _err("%s: unknown command %s" % (label, _name(argv[0])))
            return EXIT_USAGE
        if len(argv) == 1:
            return _out(label, dumps(cmd.schema))
        try:
            call = _parse_args(argv[1])
        except _Invalid as e:
            _err("%s: %s: %s" % (label, cmd.name, _fit(str(e))))
            return EXIT_USAGE
        msg = validate(cmd.schema, call)
        if msg is not None:
            _err("%s: %s: %s" % (label, cmd.name, msg))
            return EXIT_USAGE
        values = {}
        for a in cmd.args:
            if a.name in call:
                values[a.name] = call[a.name]
            else:
                values[a.name] = cmd.schema["properties"][a.name].get("default")
        code = cmd.fn(values)
        try:
            sys.stdout.flush()
        except OSError as e:
            _err("%s: cannot write the output: %s" % (label, e.strerror))
            return code or 1
        if code is None:
            return 0
        if not _is_int(code) or not 0 <= code <= 255:
            return 1
        return code


def _err(line):
    try:
        sys.stdout.flush()
    except OSError:
        pass
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _out(label, text):
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("utf-8") + b"\n")
        sys.stdout.buffer.flush()
    except OSError as e:
        _err("%s: cannot write the output: %s" % (label, e.strerror))
        return 1
    return 0
