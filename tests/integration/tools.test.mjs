// tools.test.mjs - tool bundles over a real abxd: strict discovery at start,
// selection and export (OpenAI and MCP), calls in sandboxes and workspaces
// (validation before anything runs, deadlines, output caps, files the call
// wrote), /.tools read-only and outside the workspace, and the sample tools
// built by the real `abx tools build`, including the carrier's python/pip.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, chmodSync, cpSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, api, createSandbox, killSandbox, exec, sh, parseNdjson, isRoot, abxBin, repo, sleep } from './lib.mjs';

const skip = !isRoot && 'needs root';

// A bundle written by hand: launch is a shell script obeying the contract.
// cmds: {name: {description, schema, script}}; script runs with $1 = args.
function makeBundle(dir, name, { kind = 'cli', cmds = {}, omit = [] } = {}) {
  const b = join(dir, name);
  mkdirSync(join(b, 'schemas'), { recursive: true });
  const list = Object.entries(cmds).map(([n, c]) => ({ name: n, description: c.description ?? n }));
  let launch = '#!/bin/sh\ncase "$#:$1" in\n';
  launch += `0:) echo '${JSON.stringify(list)}' ;;\n`;
  for (const [n, c] of Object.entries(cmds)) {
    launch += `2:${n}) shift; ${c.script ?? 'printf "%s" "$1"'} ;;\n`;
  }
  launch += '*) echo "unknown command" >&2; exit 2 ;;\nesac\n';
  if (!omit.includes('launch')) {
    writeFileSync(join(b, 'launch'), launch);
    chmodSync(join(b, 'launch'), 0o755);
  }
  if (!omit.includes('commands.json')) writeFileSync(join(b, 'commands.json'), JSON.stringify(list));
  for (const [n, c] of Object.entries(cmds)) {
    if (omit.includes(`schemas/${n}.json`)) continue;
    const schema = c.schema ?? { type: 'object', properties: {}, additionalProperties: false };
    writeFileSync(join(b, 'schemas', `${n}.json`), JSON.stringify(schema));
  }
  if (omit.includes('schemas')) rmSync(join(b, 'schemas'), { recursive: true });
  if (!omit.includes('build-stamp.json'))
    writeFileSync(join(b, 'build-stamp.json'), JSON.stringify({ format: 1, name, kind, description: `${name} tools` }));
  return b;
}

const echoSchema = {
  type: 'object',
  description: 'echo the arguments',
  properties: {
    text: { type: 'string', description: 'what to echo' },
    times: { type: 'integer', minimum: 1, maximum: 3 },
    mode: { type: 'string', enum: ['plain', 'loud'] },
  },
  required: ['text'],
  additionalProperties: false,
};

function demoTools() {
  const dir = mkdtempSync(join(tmpdir(), 'abx-tools-'));
  chmodSync(dir, 0o755);
  makeBundle(dir, 'alpha', {
    cmds: {
      echo: { description: 'Echo the arguments', schema: echoSchema },
      touch: { description: 'Write a file', script: 'echo hi > made-by-tool.txt; echo done' },
      flood: { description: 'Too much output', script: 'head -c 3000000 /dev/zero | tr "\\0" x' },
      hang: { description: 'Never ends', script: 'sleep 60' },
      fail: { description: 'Fails', script: 'echo oops >&2; exit 3' },
      whoami: { description: 'Who runs tools', script: 'id -un; pwd; echo "$HOME"' },
    },
  });
  makeBundle(dir, 'beta', { cmds: { echo: { description: 'Another echo' }, other: {} } });
  return dir;
}

async function call(d, scope, id, name, body) {
  return api(d, 'POST', `/v1/${scope}/${id}/tools/${encodeURIComponent(name)}`, body);
}

describe('tool discovery is strict', { skip }, () => {
  async function startFails(dir) {
    let d;
    try {
      d = await startAbxd({ env: { ABX_TOOLS_DIR: dir, ABX_POOL: '0' } });
    } catch (e) {
      return e.message;
    }
    await d.stop();
    assert.fail('abxd started with a bad tools directory');
  }

  test('without a tools directory there are no tools', async () => {
    const d = await startAbxd({ env: { ABX_POOL: '0' } });
    try {
      const r = await api(d, 'GET', '/v1/tools');
      assert.equal(r.status, 200);
      assert.deepEqual(r.json, { tools: [] });
      const c = await api(d, 'GET', '/v1/tools/echo');
      assert.equal(c.status, 404);
    } finally {
      await d.stop();
    }
  });

  test('a configured directory that does not exist stops abxd', async () => {
    const msg = await startFails('/nonexistent/abx-tools');
    assert.match(msg, /tools directory '\/nonexistent\/abx-tools'/);
  });

  for (const [what, omit, re] of [
    ['commands.json', ['commands.json'], /tool bundle 'half'.*commands\.json/],
    ['the schemas directory', ['schemas'], /tool bundle 'half'.*schemas/],
    ["a listed command's schema", ['schemas/go.json'], /tool bundle 'half'.*command 'go'.*schemas\/go\.json/],
    ['launch', ['launch'], /tool bundle 'half' has no launch/],
    ['the build stamp', ['build-stamp.json'], /tool bundle 'half'.*build-stamp\.json/],
  ]) {
    test(`a bundle missing ${what} stops abxd, naming it`, async () => {
      const dir = demoTools();
      makeBundle(dir, 'half', { cmds: { go: {} }, omit });
      const msg = await startFails(dir);
      assert.match(msg, re);
      rmSync(dir, { recursive: true, force: true });
    });
  }

  test('a schema we cannot enforce stops abxd, naming the keyword', async () => {
    const dir = demoTools();
    makeBundle(dir, 'odd', {
      cmds: { go: { schema: { type: 'object', properties: { x: { type: 'string', pattern: '^a' } } } } },
    });
    const msg = await startFails(dir);
    assert.match(msg, /tool bundle 'odd'.*pattern/);
    rmSync(dir, { recursive: true, force: true });
  });

  test('two carrier bundles stop abxd', async () => {
    const dir = demoTools();
    makeBundle(dir, 'py1', { kind: 'carrier' });
    makeBundle(dir, 'py2', { kind: 'carrier' });
    const msg = await startFails(dir);
    assert.match(msg, /two carrier bundles, 'py1' and 'py2'/);
    rmSync(dir, { recursive: true, force: true });
  });

  test("the builder's staging directories are not bundles", async () => {
    const dir = demoTools();
    mkdirSync(join(dir, '.alpha.tmp-abc123'));
    const d = await startAbxd({ env: { ABX_TOOLS_DIR: dir, ABX_POOL: '0' } });
    try {
      const r = await api(d, 'GET', '/v1/tool-packages');
      assert.deepEqual(r.json.packages.map((p) => p.name), ['alpha', 'beta']);
    } finally {
      await d.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('tool selection, export and calls', { skip }, () => {
  let d, dir, sb;
  before(async () => {
    dir = demoTools();
    d = await startAbxd({ env: { ABX_TOOLS_DIR: dir } });
    sb = (await createSandbox(d)).id;
  });
  after(async () => {
    await killSandbox(d, sb).catch(() => {}); // d.stop() kills the rest
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const names = (r) => r.json.tools.map((t) => t.function?.name ?? t.name).sort();

  test('selection: none = all (with a clash), empty = none, pkg, pkg:cmd, unknown skipped', async () => {
    let r = await api(d, 'GET', '/v1/tools');
    assert.equal(r.status, 409, r.text);
    assert.equal(r.json.error, 'tool_conflict');
    assert.match(r.json.message, /'echo' is exported by both 'alpha' and 'beta'/);
    r = await api(d, 'GET', '/v1/tools?allowed=');
    assert.deepEqual(r.json, { tools: [] });
    r = await api(d, 'GET', '/v1/tools?allowed=alpha');
    assert.deepEqual(names(r), ['echo', 'fail', 'flood', 'hang', 'touch', 'whoami']);
    r = await api(d, 'GET', '/v1/tools?allowed=alpha:echo,beta:other,nosuch,alpha:nosuch,,alpha:echo');
    assert.deepEqual(names(r), ['echo', 'other']);
    r = await api(d, 'GET', '/v1/tools?allowed=alpha:echo,beta');
    assert.equal(r.status, 409);
  });

  test('OpenAI and MCP formats carry the schema as declared', async () => {
    let r = await api(d, 'GET', '/v1/tools?allowed=alpha:echo');
    assert.deepEqual(r.json.tools, [
      { type: 'function', function: { name: 'echo', description: 'Echo the arguments', parameters: echoSchema } },
    ]);
    r = await api(d, 'GET', '/v1/tools?allowed=alpha:echo&format=mcp');
    assert.deepEqual(r.json.tools, [{ name: 'echo', description: 'Echo the arguments', inputSchema: echoSchema }]);
    r = await api(d, 'GET', '/v1/tools?format=yaml');
    assert.equal(r.status, 400);
  });

  test('one tool by name, pkg:cmd, ambiguous, unknown; the package list', async () => {
    let r = await api(d, 'GET', '/v1/tools/alpha:echo');
    assert.equal(r.status, 200);
    assert.equal(r.json.package, 'alpha');
    assert.deepEqual(r.json.schema, echoSchema);
    r = await api(d, 'GET', '/v1/tools/echo');
    assert.equal(r.status, 409);
    r = await api(d, 'GET', '/v1/tools/touch');
    assert.equal(r.json.package, 'alpha');
    r = await api(d, 'GET', '/v1/tools/nosuch');
    assert.equal(r.status, 404);
    r = await api(d, 'GET', '/v1/tool-packages');
    assert.deepEqual(r.json.packages.map((p) => [p.name, p.kind, p.commands.length]), [
      ['alpha', 'cli', 6],
      ['beta', 'cli', 2],
    ]);
    r = await api(d, 'POST', '/v1/tools');
    assert.equal(r.status, 405);
    r = await api(d, 'GET', '/v1/tools', undefined, { auth: false });
    assert.equal(r.status, 401);
  });

  test('a call runs launch with the validated arguments, as user, in the workspace', async () => {
    let r = await call(d, 'sandboxes', sb, 'alpha:echo', { arguments: { text: 'héllo "q"', times: 2 } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.exit_code, 0);
    assert.deepEqual(JSON.parse(r.json.stdout), { text: 'héllo "q"', times: 2 });
    assert.equal(r.json.tool, 'echo');
    assert.equal(r.json.package, 'alpha');
    assert.equal(r.json.truncated, false);
    assert.deepEqual(r.json.files, []);
    // OpenAI hands arguments over as a string.
    r = await call(d, 'sandboxes', sb, 'alpha:echo', { arguments: '{"text":"s"}' });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(JSON.parse(r.json.stdout), { text: 's' });
    r = await call(d, 'sandboxes', sb, 'whoami', {});
    assert.deepEqual(r.json.stdout.split('\n').slice(0, 3), ['user', '/home/user', '/home/user']);
  });

  test('arguments that do not match the schema are refused before anything runs', async () => {
    for (const [args, re] of [
      [{}, /'text' is required/],
      [{ text: 1 }, /'text'.*string/],
      [{ text: 'a', times: '2' }, /'times'.*integer/],
      [{ text: 'a', times: 9 }, /'times'/],
      [{ text: 'a', mode: 'quiet' }, /'mode'.*one of/],
      [{ text: 'a', colour: 'red' }, /'colour'/],
      ['{"text": ', /not JSON/],
      [[1, 2], /object/],
    ]) {
      const r = await call(d, 'sandboxes', sb, 'alpha:echo', { arguments: args });
      assert.equal(r.status, 400, `${JSON.stringify(args)}: ${r.text}`);
      assert.equal(r.json.error, 'invalid_arguments');
      assert.match(r.json.message, re);
    }
    let r = await call(d, 'sandboxes', sb, 'alpha:echo', { arguments: { text: 'a' }, extra: 1 });
    assert.equal(r.status, 400);
    r = await api(d, 'POST', `/v1/sandboxes/${sb}/tools/touch`, '{not json');
    assert.equal(r.status, 400);
    // Nothing ran: the only process table entries are from the calls above.
    const w = await api(d, 'GET', `/v1/sandboxes/${sb}/walk?path=/`);
    assert.ok(!w.json.entries.some((e) => e.path === '/made-by-tool.txt'));
    r = await call(d, 'sandboxes', sb, 'nosuch', {});
    assert.equal(r.status, 404);
    r = await call(d, 'sandboxes', 'nosuchsandbox', 'touch', {});
    assert.equal(r.status, 404);
    r = await call(d, 'sandboxes', sb, 'echo', { arguments: { text: 'a' } });
    assert.equal(r.status, 409);
  });

  test('files lists what the call created or changed', async () => {
    let r = await call(d, 'sandboxes', sb, 'touch', {});
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.files.map((f) => [f.path, f.size]), [['/made-by-tool.txt', 3]]);
    assert.ok(r.json.files[0].version);
    // The same content again: the version may change (mtime), but a file
    // untouched by the call is never listed.
    await sh(d, sb, 'echo other > /home/user/untouched.txt');
    r = await call(d, 'sandboxes', sb, 'alpha:echo', { arguments: { text: 'x' } });
    assert.deepEqual(r.json.files, []);
  });

  test('a failing tool is a result; a hanging one is cut by the deadline', async () => {
    let r = await call(d, 'sandboxes', sb, 'fail', {});
    assert.equal(r.status, 200);
    assert.equal(r.json.exit_code, 3);
    assert.equal(r.json.stderr, 'oops\n');
    const t0 = Date.now();
    r = await call(d, 'sandboxes', sb, 'hang', { timeout_s: 0.5 });
    assert.equal(r.status, 200);
    assert.equal(r.json.timed_out, true);
    assert.equal(r.json.exit_code, 124);
    assert.ok(Date.now() - t0 < 30000);
  });

  test('a tool that floods is capped with a marker', async () => {
    const r = await call(d, 'sandboxes', sb, 'flood', {});
    assert.equal(r.status, 200);
    assert.equal(r.json.truncated, true);
    assert.match(r.json.stdout, /\[abx: output truncated: \d+ more bytes not shown\]\n$/);
    assert.ok(r.json.stdout.length < 1100000);
    const s = await call(d, 'sandboxes', sb, 'flood', { stream: true });
    assert.equal(s.status, 200);
    assert.match(s.headers.get('content-type'), /ndjson/);
    const p = parseNdjson(s.text);
    assert.equal(p.result.truncated, true);
    assert.match(p.stdout.toString(), /output truncated/);
    assert.ok(p.stdout.length < 1100000);
  });

  test('a streamed call ends with the result and the files', async () => {
    const r = await call(d, 'sandboxes', sb, 'touch', { stream: true });
    assert.equal(r.status, 200);
    const p = parseNdjson(r.text);
    assert.equal(p.stdout.toString(), 'done\n');
    assert.equal(p.result.exit_code, 0);
    assert.ok(Array.isArray(p.result.files));
    assert.equal(p.result.stdout, undefined);
  });

  test('/.tools is read-only, outside the workspace and never walked', async () => {
    const r = await sh(d, sb, 'ls /.tools; touch /.tools/alpha/x 2>&1; echo rc=$?; test -e /.toolbin/pip; echo pip=$?');
    assert.match(r.out, /alpha\nbeta\n/);
    assert.match(r.out, /Read-only file system/);
    assert.match(r.out, /pip=1/); // no carrier, no pip shim
    const w = await api(d, 'GET', `/v1/sandboxes/${sb}/walk?path=/`);
    assert.ok(!w.json.entries.some((e) => e.path.includes('.tools')));
    const g = await api(d, 'GET', `/v1/sandboxes/${sb}/files/..%2F..%2F.tools%2Falpha%2Flaunch`);
    assert.notEqual(g.status, 200);
  });
});

describe('tools in workspaces', { skip }, () => {
  let d, dir;
  before(async () => {
    dir = demoTools();
    d = await startAbxd({ env: { ABX_TOOLS_DIR: dir } });
  });
  after(async () => {
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a call wakes a cold workspace and the file it wrote is durable', async () => {
    const ws = (await api(d, 'POST', '/v1/workspaces', {})).json.id;
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}`)).json.state, 'cold');
    let r = await call(d, 'workspaces', ws, 'touch', {});
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.files.map((f) => f.path), ['/made-by-tool.txt']);
    assert.equal((await api(d, 'GET', `/v1/workspaces/${ws}`)).json.state, 'warm');
    r = await api(d, 'POST', `/v1/workspaces/${ws}/close`, {});
    assert.ok(r.status < 300, r.text);
    r = await api(d, 'GET', `/v1/workspaces/${ws}/files/made-by-tool.txt`);
    assert.equal(r.status, 200);
    assert.equal(r.text, 'hi\n');
    r = await call(d, 'workspaces', ws, 'alpha:echo', { arguments: { text: 1 } });
    assert.equal(r.status, 400);
    r = await call(d, 'workspaces', 'nosuchws', 'touch', {});
    assert.equal(r.status, 404);
    await api(d, 'DELETE', `/v1/workspaces/${ws}`);
  });
});

describe('the sample tools, built by abx tools build', { skip }, () => {
  let d, out, sb, other;
  before(async () => {
    out = mkdtempSync(join(tmpdir(), 'abx-sample-tools-'));
    chmodSync(out, 0o755);
    const b = spawnSync(abxBin, ['tools', 'build', '--out', out, join(repo, 'sample-tools')], {
      encoding: 'utf8',
      timeout: 300000,
    });
    assert.equal(b.status, 0, `abx tools build failed:\n${b.stdout}\n${b.stderr}`);
    d = await startAbxd({ env: { ABX_TOOLS_DIR: out } });
    sb = (await createSandbox(d)).id;
    other = (await createSandbox(d)).id;
  });
  after(async () => {
    if (d) {
      await killSandbox(d, sb).catch(() => {}); // d.stop() kills the rest
      await killSandbox(d, other).catch(() => {}); // d.stop() kills the rest
      await d.stop();
    }
    rmSync(out, { recursive: true, force: true });
  });

  test('they are discovered and exported', async () => {
    const r = await api(d, 'GET', '/v1/tools?format=mcp');
    assert.equal(r.status, 200, r.text);
    const names = r.json.tools.map((t) => t.name);
    assert.ok(names.includes('summarize'), names.join());
    assert.ok(names.includes('plot'), names.join());
    const p = await api(d, 'GET', '/v1/tool-packages');
    const carrier = p.json.packages.find((x) => x.kind === 'carrier');
    assert.equal(carrier.name, 'python-stack');
    assert.deepEqual(carrier.commands, []);
  });

  test('csv-summary summarizes a CSV file in the workspace', async () => {
    await api(d, 'PUT', `/v1/sandboxes/${sb}/files/data.csv`, 'name,score\na,1\nb,3\n"c, d",5\n');
    const r = await call(d, 'sandboxes', sb, 'summarize', { arguments: { path: 'data.csv' } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.exit_code, 0, r.json.stderr);
    assert.match(r.json.stdout, /score/);
    assert.match(r.json.stdout, /3/); // the mean of 1, 3, 5
  });

  test('sci-plot writes a PNG that the answer lists', async () => {
    await api(d, 'PUT', `/v1/sandboxes/${sb}/files/series.csv`, 'x,y\n1,2\n2,4\n3,8\n');
    const r = await call(d, 'sandboxes', sb, 'plot', {
      arguments: { csv: 'series.csv', x: 'x', y: ['y'], output: 'chart.png' },
      timeout_s: 120,
    });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.exit_code, 0, r.json.stderr);
    assert.deepEqual(r.json.files.map((f) => f.path), ['/chart.png']);
    const png = await api(d, 'GET', `/v1/sandboxes/${sb}/files/chart.png`);
    assert.deepEqual([...png.buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  });

  test('python, python3, python3.N, pip and pip3 resolve to the carrier, also in login shells', async () => {
    const r = await sh(
      d,
      sb,
      'for n in python python3 pip pip3; do command -v $n; done; ' +
        'bash -lc "command -v python pip"; sh -lc "command -v python3; command -v pip3"; ' +
        'ls /.toolbin | grep -c "^python3\\.[0-9]"; python -c "import numpy, pandas, scipy, matplotlib; print(42)"',
    );
    assert.equal(r.code, 0, r.err);
    const lines = r.out.trim().split('\n');
    assert.deepEqual(lines.slice(0, 8), [
      '/.toolbin/python',
      '/.toolbin/python3',
      '/.toolbin/pip',
      '/.toolbin/pip3',
      '/.toolbin/python',
      '/.toolbin/pip',
      '/.toolbin/python3',
      '/.toolbin/pip3',
    ]);
    assert.deepEqual(lines.slice(8), ['1', '42']);
  });

  test('pip install lands in this sandbox only, with no PEP 668 refusal', async () => {
    // A wheel built here: no package index is reachable from a sandbox.
    const tmp = mkdtempSync(join(tmpdir(), 'abx-wheel-'));
    const whl = join(tmp, 'abxdemo-0.1-py3-none-any.whl');
    const py = spawnSync('python3', ['-c', `
import zipfile, sys
z = zipfile.ZipFile(sys.argv[1], 'w')
z.writestr('abxdemo/__init__.py', 'ANSWER = 42\\n')
z.writestr('abxdemo-0.1.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: abxdemo\\nVersion: 0.1\\n')
z.writestr('abxdemo-0.1.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: abx-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')
z.writestr('abxdemo-0.1.dist-info/RECORD', '')
z.close()
`, whl], { encoding: 'utf8' });
    assert.equal(py.status, 0, py.stderr);
    const { readFileSync } = await import('node:fs');
    const up = await api(d, 'PUT', `/v1/sandboxes/${sb}/files/abxdemo-0.1-py3-none-any.whl`, readFileSync(whl));
    assert.ok(up.status === 201 || up.status === 200, up.text);
    rmSync(tmp, { recursive: true, force: true });

    let r = await sh(d, sb, 'pip install --no-index ./abxdemo-0.1-py3-none-any.whl 2>&1; echo rc=$?', { timeout_s: 120 });
    assert.match(r.out, /rc=0/, r.out);
    assert.doesNotMatch(r.out, /externally-managed/i);
    r = await exec(d, sb, ['python', '-c', 'import abxdemo; print(abxdemo.ANSWER)']);
    assert.equal(r.out, '42\n', r.err);
    r = await sh(d, sb, 'bash -lc "python3 -c \'import abxdemo\'" && echo ok');
    assert.equal(r.out, 'ok\n', r.err);
    r = await exec(d, other, ['python', '-c', 'import abxdemo']);
    assert.notEqual(r.code, 0);
    assert.match(r.err, /No module named 'abxdemo'/);
  });

  test('with no carrier there is no pip shim at all', async () => {
    const partial = mkdtempSync(join(tmpdir(), 'abx-nocarrier-'));
    chmodSync(partial, 0o755);
    cpSync(join(out, 'csv-summary'), join(partial, 'csv-summary'), { recursive: true });
    const d2 = await startAbxd({ env: { ABX_TOOLS_DIR: partial, ABX_POOL: '0' } });
    try {
      const s = (await createSandbox(d2)).id;
      const r = await sh(d2, s, 'test -e /.toolbin && echo has-toolbin; command -v pip python3; echo "$PATH"; ls /.tools');
      // The host's own pip may be in /usr/bin; no shim of ours points anywhere.
      assert.doesNotMatch(r.out, /has-toolbin|\/\.toolbin/);
      assert.match(r.out, /csv-summary/);
      const l = await sh(d2, s, 'bash -lc "echo \\$PATH"');
      assert.doesNotMatch(l.out, /toolbin/);
      await killSandbox(d2, s);
    } finally {
      await d2.stop();
      rmSync(partial, { recursive: true, force: true });
    }
  });
});
