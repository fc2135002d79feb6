// cli-tools.test.mjs - `abx tools ls|schema|call` (and libabx's tool
// functions under them) against a real abxd: first with bundles written by
// hand (shell launch scripts, two packages that both export `echo`), then
// with the sample tools built by the real `abx tools build --out DIR
// sample-tools`. Every test starts its own abxd with ABX_TOOLS_DIR pointing
// at the bundles, drives it with the real abx (ABX_BIN_DIR's), removes the
// workspaces and sandboxes it made and stops abxd, even when it fails. The
// raw wire (lib.mjs's api) is used only to get abxd's own answers to compare
// the CLI's with.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, abx as runAbx, api, isRoot, repo } from './lib.mjs';

const samples = join(repo, 'sample-tools');
const skipAll = !isRoot && 'needs root';
const skip =
  skipAll ||
  (!['csv-summary', 'sci-plot'].every((p) => existsSync(join(samples, p))) && 'no sample-tools/csv-summary and sci-plot in this tree');

const sanitizerEnv = {
  ASAN_OPTIONS: process.env.ASAN_OPTIONS ?? 'detect_leaks=1',
  UBSAN_OPTIONS: process.env.UBSAN_OPTIONS ?? 'print_stacktrace=1:halt_on_error=1',
};
const sanitizerReport = /ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:/;

function abx(d, args, opts = {}) {
  const r = runAbx(d, args, { ...opts, env: { ...sanitizerEnv, ...(opts.env ?? {}) } });
  assert.doesNotMatch(String(r.stderr), sanitizerReport, `abx ${args.join(' ')}`);
  return r;
}

function ok(r) {
  assert.equal(r.code, 0, `expected exit 0, got ${r.code}: ${r.stdout} ${r.stderr}`);
  return r;
}

function json(r) {
  return JSON.parse(ok(r).stdout);
}

// A one-line error on stderr and exit 1.
function fails(r, re) {
  assert.equal(r.code, 1, `expected exit 1, got ${r.code}: ${r.stdout} ${r.stderr}`);
  assert.match(r.stderr, re);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
}

const CSV = 'city,temp,rain\nOslo,4.5,12\nLima,19.0,0\nPune,31.2,3\nOslo,5.5,8\n';

// A bundle written by hand: launch is a shell script obeying the contract
// (as tools.test.mjs writes them). cmds: {name: {description, schema,
// script}}; script runs with $1 = the arguments' JSON.
function makeBundle(dir, name, cmds) {
  const b = join(dir, name);
  mkdirSync(join(b, 'schemas'), { recursive: true });
  const list = Object.entries(cmds).map(([n, c]) => ({ name: n, description: c.description ?? n }));
  let launch = '#!/bin/sh\ncase "$#:$1" in\n';
  launch += `0:) echo '${JSON.stringify(list)}' ;;\n`;
  for (const [n, c] of Object.entries(cmds)) launch += `2:${n}) shift; ${c.script ?? 'printf "%s" "$1"'} ;;\n`;
  launch += '*) echo "unknown command" >&2; exit 2 ;;\nesac\n';
  writeFileSync(join(b, 'launch'), launch);
  chmodSync(join(b, 'launch'), 0o755);
  writeFileSync(join(b, 'commands.json'), JSON.stringify(list));
  for (const [n, c] of Object.entries(cmds)) {
    const schema = c.schema ?? { type: 'object', properties: {}, additionalProperties: false };
    writeFileSync(join(b, 'schemas', `${n}.json`), JSON.stringify(schema));
  }
  writeFileSync(join(b, 'build-stamp.json'), JSON.stringify({ format: 1, name, kind: 'cli', description: `${name} tools` }));
}

const echoSchema = {
  type: 'object',
  properties: { text: { type: 'string', description: 'what to echo' }, times: { type: 'integer', minimum: 1 } },
  required: ['text'],
  additionalProperties: false,
};

function handTools() {
  const dir = mkdtempSync(join(tmpdir(), 'abx-cli-hand-tools-'));
  chmodSync(dir, 0o755);
  makeBundle(dir, 'alpha', {
    echo: { description: 'Echo the arguments\nSecond line', schema: echoSchema },
    touch: { description: 'Write a file', script: 'printf hi > made-by-tool.txt; echo done' },
    fail: { description: 'Fails', script: 'echo out; echo oops >&2; exit 3' },
    hang: { description: 'Never ends', script: 'sleep 60' },
  });
  makeBundle(dir, 'beta', { echo: { description: 'Another echo' }, other: { description: 'Other' } });
  return dir;
}

describe('abx tools with hand-written bundles', { skip: skipAll }, () => {
  let dir;
  before(() => {
    dir = handTools();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('ls: a conflict is abxd\'s message; a selection lists with packages', async () => {
    await withAbxd(async (d) => {
      fails(abx(d, ['tools', 'ls']), /echo/);
      fails(abx(d, ['tools', 'ls', '--json']), /echo/);
      const r = ok(abx(d, ['tools', 'ls', '--allowed', 'alpha,beta:other']));
      assert.match(r.stdout, /^NAME\s+PACKAGE\s+DESCRIPTION\n/);
      assert.match(r.stdout, /^echo\s+alpha\s+Echo the arguments$/m);
      assert.match(r.stdout, /^fail\s+alpha\s+Fails$/m);
      assert.match(r.stdout, /^other\s+beta\s+Other$/m);
      assert.doesNotMatch(r.stdout, /Another echo/);
      const beta = ok(abx(d, ['tools', 'ls', '--allowed', ' beta ']));
      assert.match(beta.stdout, /^echo\s+beta\s+Another echo$/m);
      const mcp = json(abx(d, ['tools', 'ls', '--allowed', 'alpha:echo', '--format', 'mcp']));
      const raw = await api(d, 'GET', '/v1/tools?allowed=alpha%3Aecho&format=mcp');
      assert.deepEqual(mcp, raw.json);
      assert.deepEqual(mcp.tools.map((t) => t.name), ['echo']);
      assert.deepEqual(mcp.tools[0].inputSchema.required, ['text']);
      assert.deepEqual(json(abx(d, ['tools', 'ls', '--allowed', '', '--json'])).tools, []);
    }, dir);
  });

  test('schema: pretty; a bare conflicting name fails, PKG:CMD does not', async () => {
    await withAbxd(async (d) => {
      const r = ok(abx(d, ['tools', 'schema', 'alpha:echo']));
      assert.match(r.stdout, /^\{\n {2}"/);
      assert.deepEqual(JSON.parse(r.stdout), echoSchema);
      assert.equal(json(abx(d, ['tools', 'schema', '--json', 'beta:echo'])).package, 'beta');
      fails(abx(d, ['tools', 'schema', 'echo']), /echo/);
      fails(abx(d, ['tools', 'schema', 'alpha:nope']), /nope|not found/i);
    }, dir);
  });

  test('call: output, exit code, files, bad arguments, stdin, --json, --stream, --sandbox', async () => {
    await withAbxd(async (d, ctx) => {
      const ws = ctx.ws();
      const e = ok(abx(d, ['tools', 'call', ws, 'alpha:echo', '{"text": "hi", "times": 2}']));
      assert.deepEqual(JSON.parse(e.stdout), { text: 'hi', times: 2 });
      const s = ok(abx(d, ['tools', 'call', ws, 'alpha:echo', '-'], { input: '{"text":"in"}\n' }));
      assert.deepEqual(JSON.parse(s.stdout), { text: 'in' });

      const f = abx(d, ['tools', 'call', ws, 'fail']);
      assert.equal(f.code, 3, f.stderr);
      assert.equal(f.stdout, 'out\n');
      assert.equal(f.stderr, 'oops\n');
      const fs = abx(d, ['tools', 'call', '--stream', ws, 'fail']);
      assert.equal(fs.code, 3);
      assert.equal(fs.stdout, 'out\n');
      assert.equal(fs.stderr, 'oops\n');
      const fj = abx(d, ['tools', 'call', '--json', ws, 'fail']);
      assert.equal(fj.code, 3);
      const res = JSON.parse(fj.stdout);
      assert.equal(res.exit_code, 3);
      assert.equal(res.stderr, 'oops\n');
      assert.equal(res.package, 'alpha');

      const t = ok(abx(d, ['tools', 'call', ws, 'touch']));
      assert.equal(t.stdout, 'done\n');
      assert.match(t.stderr, /^abx: wrote \/made-by-tool\.txt \(2 bytes\)$/m);
      assert.equal(ok(abx(d, ['ws', 'cat', ws, '/made-by-tool.txt'])).stdout, 'hi');

      const bad = { text: 5 };
      const raw = await api(d, 'POST', `/v1/workspaces/${ws}/tools/alpha%3Aecho`, { arguments: bad });
      assert.equal(raw.status, 400, raw.text);
      const b = abx(d, ['tools', 'call', ws, 'alpha:echo', JSON.stringify(bad)]);
      fails(b, /text/);
      assert.ok(b.stderr.includes(raw.json.message), `${b.stderr} vs ${raw.json.message}`);
      fails(abx(d, ['tools', 'call', ws, 'echo', '{"text":"x"}']), /echo/); // two packages
      fails(abx(d, ['tools', 'call', ws, 'alpha:echo', '{"text":']), /not valid JSON/);
      fails(abx(d, ['tools', 'call', ws, 'nope']), /nope|not found/i);

      const h = abx(d, ['tools', 'call', ws, 'hang', '--timeout', '1']);
      assert.equal(h.code, 124, h.stderr);
      assert.match(h.stderr, /deadline/);

      const id = ctx.sandbox();
      const sb = ok(abx(d, ['tools', 'call', '--sandbox', id, 'alpha:echo', '{"text":"sb"}']));
      assert.deepEqual(JSON.parse(sb.stdout), { text: 'sb' });
      const sbs = ok(abx(d, ['tools', 'call', '--sandbox', '--stream', id, 'beta:other']));
      assert.equal(sbs.stdout, '{}');
      fails(abx(d, ['tools', 'call', '--sandbox', 'nosuchsandbox', 'fail']), /nosuchsandbox|not found/i);
    }, dir);
  });
});

let toolsDir;

// Runs fn(d, ctx) with a fresh abxd serving the sample tools; ctx.ws() makes
// a workspace holding data.csv, ctx.sandbox() a sandbox holding it.
async function withAbxd(fn, dir = toolsDir) {
  const d = await startAbxd({ env: { ABX_POOL: '0', ABX_TOOLS_DIR: dir } });
  const tmp = mkdtempSync(join(tmpdir(), 'abx-cli-tools-'));
  const csv = join(tmp, 'data.csv');
  writeFileSync(csv, CSV);
  const workspaces = [];
  const sandboxes = [];
  const ctx = {
    ws() {
      const id = ok(abx(d, ['ws', 'create'])).stdout.trim();
      workspaces.push(id);
      ok(abx(d, ['ws', 'cp', csv, `${id}:/data.csv`]));
      return id;
    },
    sandbox() {
      const id = ok(abx(d, ['create', '--timeout', '10m'])).stdout.trim();
      sandboxes.push(id);
      ok(abx(d, ['cp', csv, `${id}:/data.csv`]));
      return id;
    },
  };
  try {
    await fn(d, ctx);
  } finally {
    try {
      for (const id of workspaces) await api(d, 'DELETE', `/v1/workspaces/${id}`);
      for (const id of sandboxes) await api(d, 'DELETE', `/v1/sandboxes/${id}`);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
      await d.stop();
    }
  }
}

describe('abx tools with the sample tools', { skip }, () => {
  before(() => {
    if (skip) return;
    toolsDir = mkdtempSync(join(tmpdir(), 'abx-tools-'));
    chmodSync(toolsDir, 0o755); // sandboxes run as other users
    // No ABX_URL: building needs no abxd.
    const r = runAbx({ url: '', key: '' }, ['tools', 'build', '--out', toolsDir, samples], {
      timeoutMs: 15 * 60 * 1000,
    });
    assert.equal(r.code, 0, `abx tools build failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  });

  after(() => {
    if (toolsDir) rmSync(toolsDir, { recursive: true, force: true });
  });

  test('tools ls: a table of the sample tools, --json and --format as abxd sends them', async () => {
    await withAbxd(async (d) => {
      const r = ok(abx(d, ['tools', 'ls']));
      const lines = r.stdout.trim().split('\n');
      assert.match(lines[0], /^NAME\s+PACKAGE\s+DESCRIPTION$/);
      assert.match(r.stdout, /^summarize\s+csv-summary\s+\S/m);
      assert.match(r.stdout, /^plot\s+sci-plot\s+\S/m);

      const openai = json(abx(d, ['tools', 'ls', '--json']));
      const raw = await api(d, 'GET', '/v1/tools');
      assert.deepEqual(openai, raw.json);
      const names = openai.tools.map((t) => t.function.name).sort();
      assert.ok(names.includes('summarize') && names.includes('plot'), names.join(','));
      for (const t of openai.tools) {
        assert.equal(t.type, 'function');
        assert.equal(t.function.parameters.type, 'object');
      }

      const mcp = json(abx(d, ['tools', 'ls', '--format', 'mcp', '--json']));
      assert.ok(mcp.tools.length >= 2);
      for (const t of mcp.tools) {
        assert.equal(typeof t.name, 'string');
        assert.equal(t.inputSchema.type, 'object');
      }
      // --format alone prints JSON too.
      assert.deepEqual(json(abx(d, ['tools', 'ls', '--format', 'mcp'])), mcp);

      // A selection: one package, one command, none; unknown names skipped.
      const one = json(abx(d, ['tools', 'ls', '--json', '--allowed', 'csv-summary,nope']));
      assert.deepEqual(one.tools.map((t) => t.function.name), ['columns', 'summarize']);
      const cmd = json(abx(d, ['tools', 'ls', '--json', '--allowed', 'sci-plot:plot']));
      assert.deepEqual(cmd.tools.map((t) => t.function.name), ['plot']);
      assert.deepEqual(json(abx(d, ['tools', 'ls', '--json', '--allowed', ''])).tools, []);
      const table = ok(abx(d, ['tools', 'ls', '--allowed', 'sci-plot'])).stdout;
      assert.match(table, /^plot\s+sci-plot/m);
      assert.doesNotMatch(table, /summarize/);

      assert.equal(abx(d, ['tools', 'ls', '--format', 'xml']).code, 2);
    });
  });

  test('tools schema: the JSON Schema, pretty; --json the whole tool; unknown names fail', async () => {
    await withAbxd(async (d) => {
      const r = ok(abx(d, ['tools', 'schema', 'summarize']));
      assert.match(r.stdout, /^\{\n {2}"/);
      const schema = JSON.parse(r.stdout);
      const raw = await api(d, 'GET', '/v1/tools/summarize');
      assert.equal(raw.status, 200, raw.text);
      assert.deepEqual(schema, raw.json.schema);
      assert.equal(schema.type, 'object');

      const whole = json(abx(d, ['tools', 'schema', 'csv-summary:summarize', '--json']));
      assert.equal(whole.package, 'csv-summary');
      assert.equal(whole.command, 'summarize');
      assert.deepEqual(whole.schema, schema);

      fails(abx(d, ['tools', 'schema', 'no-such-tool']), /no-such-tool/);
    });
  });

  test('tools call in a workspace: output, exit code, bad arguments, stdin, --json, --stream', async () => {
    await withAbxd(async (d, ctx) => {
      const ws = ctx.ws();
      const r = ok(abx(d, ['tools', 'call', ws, 'summarize', '{"path":"data.csv"}']));
      assert.ok(r.stdout.length > 0, 'summarize printed nothing');
      assert.match(r.stdout, /temp|rain|city/);

      // The same from stdin, and as the whole result object.
      const s = ok(abx(d, ['tools', 'call', ws, 'summarize', '-'], { input: '{"path": "data.csv"}' }));
      assert.equal(s.stdout, r.stdout);
      const res = json(abx(d, ['tools', 'call', '--json', ws, 'summarize', '{"path":"data.csv"}']));
      assert.equal(res.exit_code, 0);
      assert.equal(res.tool, 'summarize');
      assert.equal(res.package, 'csv-summary');
      assert.equal(res.stdout, r.stdout);
      assert.equal(res.timed_out, false);
      assert.ok(Array.isArray(res.files));

      // Streamed: the same output, as it arrives.
      const st = ok(abx(d, ['tools', 'call', '--stream', ws, 'summarize', '{"path":"data.csv"}']));
      assert.equal(st.stdout, r.stdout);

      // Arguments the schema refuses: abxd's message, exit 1, nothing printed.
      const bad = { path: 5 };
      const raw = await api(d, 'POST', `/v1/workspaces/${ws}/tools/summarize`, { arguments: bad });
      assert.equal(raw.status, 400, raw.text);
      assert.equal(raw.json.error, 'invalid_arguments');
      const b = abx(d, ['tools', 'call', ws, 'summarize', JSON.stringify(bad)]);
      fails(b, /invalid|must|path/);
      assert.ok(b.stderr.includes(raw.json.message), b.stderr);
      assert.equal(b.stdout, '');

      // Not JSON: caught before any request.
      fails(abx(d, ['tools', 'call', ws, 'summarize', '{"path":']), /not valid JSON/);
      fails(abx(d, ['tools', 'call', ws, 'no-such-tool', '{}']), /no-such-tool|not found/i);
      fails(abx(d, ['tools', 'call', 'no-such-ws', 'summarize', '{}']), /no-such-ws|not found/i);
    });
  });

  test('tools call plot: the PNG it wrote is reported and is in the workspace', async () => {
    await withAbxd(async (d, ctx) => {
      const ws = ctx.ws();
      const schema = json(abx(d, ['tools', 'schema', 'plot']));
      assert.deepEqual(schema.required, ['csv', 'y']);
      const args = JSON.stringify({ csv: 'data.csv', x: 'city', y: ['temp', 'rain'], kind: 'bar', output: 'plot.png' });
      const r = abx(d, ['tools', 'call', ws, 'plot', args]);
      assert.equal(r.code, 0, `plot ${args}: ${r.stdout} ${r.stderr}`);
      const m = r.stderr.match(/^abx: wrote (\/\S+\.png) \((\d+) bytes\)$/m);
      assert.ok(m, `no PNG reported: ${r.stderr}`);
      assert.ok(Number(m[2]) > 0);
      const files = json(abx(d, ['ws', 'files', ws, '--json']));
      const entry = files.entries.find((e) => e.path === m[1]);
      assert.ok(entry, `${m[1]} is not in the workspace`);
      assert.equal(entry.size, Number(m[2]));
      const png = abx(d, ['ws', 'cat', ws, m[1]], { encoding: 'buffer' });
      assert.equal(png.code, 0);
      assert.deepEqual([...png.stdout.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    });
  });

  test('tools call --sandbox: the same call against a sandbox', async () => {
    await withAbxd(async (d, ctx) => {
      const ws = ctx.ws();
      const id = ctx.sandbox();
      const inWs = ok(abx(d, ['tools', 'call', ws, 'summarize', '{"path":"data.csv"}']));
      const r = ok(abx(d, ['tools', 'call', '--sandbox', id, 'summarize', '{"path":"data.csv"}']));
      assert.equal(r.stdout, inWs.stdout);
      const res = json(abx(d, ['tools', 'call', '--sandbox', '--json', id, 'summarize', '{"path":"data.csv"}']));
      assert.equal(res.exit_code, 0);
      const st = ok(abx(d, ['tools', 'call', '--sandbox', '--stream', id, 'summarize', '{"path":"data.csv"}']));
      assert.equal(st.stdout, inWs.stdout);
      fails(abx(d, ['tools', 'call', '--sandbox', id, 'summarize', '{"path":5}']), /./);
      fails(abx(d, ['tools', 'call', '--sandbox', 'nosuchsandbox', 'summarize', '{}']), /nosuchsandbox|not found/i);
    });
  });
});
