// templates.test.mjs - templates over a real abxd: strict loading (an
// invalid template stops abxd with file:line), discovery, env and resources
// from the template, capabilities enforced on every route, custom commands
// with typed, quoted, one-pass arguments (injection attempts run as literal
// text), and the code route.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, api, createSandbox, killSandbox, exec, parseNdjson, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root';

const TOOLBOX = `name: toolbox
aliases: [tb]
description: echo and friends
env:
  GREETING: hello from the template
  SHARED: template
resources:
  memory_mb: 300
  pids: 100
custom_commands:
  echo:
    description: Print a value and a number
    cmd: printf '%s|%s|%s\\n' {text} {count} {loud}
    args:
      - {name: text, required: true, description: what to print}
      - {name: count, type: int, default: 3}
      - {name: loud, type: bool, default: false}
  ratio:
    cmd: printf '%s\\n' {x}
    args:
      - {name: x, type: float, required: true}
  where:
    cmd: pwd; printf '%s\\n' "$MODE"
    cwd: /tmp
    env: {MODE: command-env}
`;

const LOCKED = `name: locked
description: only its declared commands
capabilities: []
custom_commands:
  hello:
    cmd: echo hello {who}
    args:
      - {name: who, default: world}
`;

const SERVED = `name: served
start_cmd: sleep 0.3; echo up > /tmp/state; exec sleep 600
ready_cmd: test -e /tmp/state
`;

const NEVER = `name: never
ready_cmd: echo not yet; false
`;

const CODEONLY = `name: coder
base: toolbox
capabilities: [code, files]
env:
  SHARED: child
`;

function templatesDir(extra = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'abx-templates-'));
  chmodSync(dir, 0o755);
  for (const [name, yaml] of Object.entries({ toolbox: TOOLBOX, locked: LOCKED, coder: CODEONLY, served: SERVED, never: NEVER, ...extra })) {
    if (yaml === null) continue;
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'sandbox-template.yaml'), yaml);
  }
  return dir;
}

async function run(d, id, name, args, body) {
  const r = await api(d, 'POST', `/v1/sandboxes/${id}/commands/${name}`, body ?? { args });
  if (r.status !== 200) return { status: r.status, json: r.json, text: r.text };
  const p = parseNdjson(r.text);
  return { status: 200, code: p.result?.exit_code, out: p.stdout.toString(), err: p.stderr.toString() };
}

describe('template loading is strict', { skip }, () => {
  async function startFails(dir) {
    let d;
    try {
      d = await startAbxd({ env: { ABX_TEMPLATES_DIR: dir, ABX_POOL: '0' } });
    } catch (e) {
      return e.message;
    }
    await d.stop();
    assert.fail('abxd started with a bad template');
  }

  for (const [what, yaml, re] of [
    ['an unknown key', 'name: bad\nflavour: mint\n', /bad\/sandbox-template\.yaml:2: .*flavour/],
    ['an unknown capability', 'name: bad\ncapabilities: [shell, root]\n', /sandbox-template\.yaml:2: .*root/],
    ['a placeholder naming no argument', 'name: bad\ncustom_commands:\n  go:\n    cmd: echo {nope}\n', /nope/],
    ['a placeholder inside double quotes', 'name: bad\ncustom_commands:\n  go:\n    cmd: echo "{x}"\n    args: [{name: x}]\n', /sandbox-template\.yaml:\d+: .*go/],
    ['a YAML alias bomb', 'name: bad\ndescription: &a "x"\naliases: [*a]\n', /sandbox-template\.yaml:\d+: .*(alias|anchor)/i],
    ['build steps (no built layer for them)', 'name: bad\nsteps:\n  - run: true\n', /sandbox-template\.yaml:3: .*build steps/],
    ['an unknown base', 'name: bad\nbase: nowhere\n', /base 'nowhere'/],
  ]) {
    test(`${what} stops abxd, naming file and line`, async () => {
      const dir = templatesDir({ bad: yaml });
      const msg = await startFails(dir);
      assert.match(msg, re);
      rmSync(dir, { recursive: true, force: true });
    });
  }

  test('a name taken twice stops abxd', async () => {
    const dir = templatesDir({ other: 'name: other\naliases: [tb]\n' });
    assert.match(await startFails(dir), /the name 'tb' is taken by template 'toolbox'/);
    rmSync(dir, { recursive: true, force: true });
  });

  test('a directory without a template file stops abxd', async () => {
    const dir = templatesDir();
    mkdirSync(join(dir, 'empty'));
    assert.match(await startFails(dir), /empty\/sandbox-template\.yaml: cannot open/);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('templates, capabilities and custom commands', { skip }, () => {
  let d, dir, tb, locked, coder, base;
  before(async () => {
    dir = templatesDir();
    d = await startAbxd({ env: { ABX_TEMPLATES_DIR: dir, ABX_READY_TIMEOUT_S: '2' } });
    tb = (await createSandbox(d, { template: 'tb' })).id;
    locked = (await createSandbox(d, { template: 'locked' })).id;
    coder = (await createSandbox(d, { template: 'coder' })).id;
    base = (await createSandbox(d)).id;
  });
  after(async () => {
    for (const id of [tb, locked, coder, base]) if (id) await killSandbox(d, id).catch(() => {}); // d.stop() kills the rest
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('discovery lists base and the templates, with commands and schemas', async () => {
    let r = await api(d, 'GET', '/v1/templates');
    assert.equal(r.status, 200);
    assert.deepEqual(r.json.templates.map((t) => t.name).sort(), ['base', 'coder', 'locked', 'never', 'served', 'toolbox']);
    const baseT = r.json.templates.find((t) => t.name === 'base');
    assert.deepEqual(baseT.capabilities, ['shell', 'files', 'code', 'terminal', 'ports']);
    r = await api(d, 'GET', '/v1/templates/tb');
    assert.equal(r.json.name, 'toolbox');
    assert.deepEqual(r.json.capabilities, ['shell', 'files', 'code']);
    assert.deepEqual(r.json.resources, { cpu: null, memory_mb: 300, pids: 100 });
    const echo = r.json.commands.find((c) => c.name === 'echo');
    assert.deepEqual(echo.schema, {
      type: 'object',
      description: 'Print a value and a number',
      properties: {
        text: { type: 'string', description: 'what to print' },
        count: { type: 'integer', default: 3 },
        loud: { type: 'boolean', default: false },
      },
      required: ['text'],
      additionalProperties: false,
    });
    r = await api(d, 'GET', '/v1/templates/nosuch');
    assert.equal(r.status, 404);
    r = await api(d, 'GET', '/v1/templates', undefined, { auth: false });
    assert.equal(r.status, 401);
    r = await api(d, 'GET', `/v1/sandboxes/${locked}/commands`);
    assert.deepEqual(r.json.capabilities, []);
    assert.deepEqual(r.json.commands.map((c) => c.name), ['hello']);
    r = await api(d, 'GET', `/v1/sandboxes/${tb}`);
    assert.equal(r.json.template, 'toolbox');
    assert.equal(r.json.memory_mb, 300);
    assert.equal(r.json.pids, 100);
  });

  test('the template env reaches every exec; a child template inherits and overrides', async () => {
    let r = await exec(d, tb, ['/bin/sh', '-c', 'printf "%s/%s" "$GREETING" "$SHARED"']);
    assert.equal(r.out, 'hello from the template/template');
    // coder has no shell: check through a command-less route, the code route.
    const c = await api(d, 'POST', `/v1/sandboxes/${coder}/code`, { language: 'bash', code: 'printf "%s/%s" "$GREETING" "$SHARED"' });
    assert.equal(c.status, 200, c.text);
    assert.equal(parseNdjson(c.text).stdout.toString(), 'hello from the template/child');
  });

  test('capabilities are enforced on every route', async () => {
    const cases = [
      ['POST', `/v1/sandboxes/${locked}/exec`, { argv: ['true'] }, 'shell'],
      ['GET', `/v1/sandboxes/${locked}/processes`, undefined, 'shell'],
      ['GET', `/v1/sandboxes/${locked}/files/x`, undefined, 'files'],
      ['PUT', `/v1/sandboxes/${locked}/files/x`, 'data', 'files'],
      ['GET', `/v1/sandboxes/${locked}/walk?path=/`, undefined, 'files'],
      ['POST', `/v1/sandboxes/${locked}/mkdir`, { path: '/d' }, 'files'],
      ['POST', `/v1/sandboxes/${locked}/code`, { language: 'bash', code: 'true' }, 'code'],
      ['POST', `/v1/sandboxes/${coder}/exec`, { argv: ['true'] }, 'shell'],
    ];
    for (const [m, p, body, cap] of cases) {
      const r = await api(d, m, p, body);
      assert.equal(r.status, 403, `${m} ${p}: ${r.text}`);
      assert.equal(r.json.error, 'capability_missing');
      assert.equal(r.json.capability, cap);
    }
    // What the template declares still runs.
    const h = await run(d, locked, 'hello', {});
    assert.equal(h.out, 'hello world\n');
    // And what it has works.
    const f = await api(d, 'PUT', `/v1/sandboxes/${coder}/files/ok.txt`, 'fine');
    assert.ok(f.status === 201 || f.status === 200, f.text);
  });

  test('a command runs with typed, coerced, canonical values', async () => {
    let r = await run(d, tb, 'echo', { text: 'hi' });
    assert.equal(r.out, 'hi|3|false\n');
    r = await run(d, tb, 'echo', { text: 'hi', count: '007x' });
    assert.equal(r.status, 400);
    assert.match(r.json.message, /count/);
    r = await run(d, tb, 'echo', { text: 'hi', count: 42, loud: 'YES' });
    assert.equal(r.out, 'hi|42|true\n');
    r = await run(d, tb, 'echo', { text: 'hi', count: '-5', loud: 'off' });
    assert.equal(r.out, 'hi|-5|false\n');
    r = await run(d, tb, 'echo', { text: 'hi', loud: 'maybe' });
    assert.equal(r.status, 400);
    r = await run(d, tb, 'echo', { text: 'hi', count: 1.5 });
    assert.equal(r.status, 400);
    r = await run(d, tb, 'ratio', { x: 0.1 });
    assert.equal(r.out, '0.1\n');
    r = await run(d, tb, 'ratio', { x: '1e3' });
    assert.equal(r.out, '1000\n');
    r = await run(d, tb, 'where', {});
    assert.equal(r.out, '/tmp\ncommand-env\n');
  });

  test('unknown command, undeclared or missing arguments are refused', async () => {
    let r = await run(d, tb, 'nosuch', {});
    assert.equal(r.status, 404);
    assert.match(r.json.message, /echo, ratio, where/);
    r = await run(d, tb, 'echo', { text: 'a', colour: 'red' });
    assert.equal(r.status, 400);
    assert.match(r.json.message, /colour/);
    r = await run(d, tb, 'echo', {});
    assert.equal(r.status, 400);
    assert.match(r.json.message, /text/);
    r = await run(d, tb, 'echo', { text: ['a'] });
    assert.equal(r.status, 400);
    r = await run(d, tb, 'echo', undefined, { args: 'text=a' });
    assert.equal(r.status, 400);
    r = await run(d, tb, 'echo', undefined, { argz: {} });
    assert.equal(r.status, 400);
    r = await api(d, 'GET', `/v1/sandboxes/${tb}/commands/echo`);
    assert.equal(r.status, 405);
  });

  test('injection attempts through values run as literal text', async () => {
    for (const v of ["'; touch /tmp/pwned #", '$(touch /tmp/pwned)', '`touch /tmp/pwned`', 'a\nb', '{count}', '\\', `'"'`, '*', '$HOME', '--x', '']) {
      const r = await run(d, tb, 'echo', { text: v, count: 1 });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.out, `${v}|1|false\n`, JSON.stringify(v));
    }
    const chk = await exec(d, tb, ['/bin/sh', '-c', 'test -e /tmp/pwned && echo PWNED || echo clean']);
    assert.equal(chk.out, 'clean\n');
  });

  test('code runs a snippet from a file of its own, concurrently', async () => {
    const calls = [];
    for (let i = 0; i < 6; i++) {
      const language = ['python', 'bash'][i % 2];
      const code = language === 'python' ? `import sys\nprint("py", ${i})` : `echo sh ${i}; echo "$0" | grep -q /tmp/abx-code- && echo own-file`;
      calls.push(api(d, 'POST', `/v1/sandboxes/${base}/code`, { language, code }));
    }
    const res = await Promise.all(calls);
    res.forEach((r, i) => {
      assert.equal(r.status, 200, r.text);
      const out = parseNdjson(r.text).stdout.toString();
      if (i % 2 === 0) assert.equal(out, `py ${i}\n`);
      else assert.equal(out, `sh ${i}\nown-file\n`);
    });
    let r = await api(d, 'POST', `/v1/sandboxes/${base}/code`, { language: 'cobol', code: 'x' });
    assert.equal(r.status, 400);
    r = await api(d, 'POST', `/v1/sandboxes/${base}/code`, { language: 'python', code: 'raise SystemExit(4)' });
    assert.equal(parseNdjson(r.text).result.exit_code, 4);
    const left = await exec(d, base, ['/bin/sh', '-c', 'ls /tmp | grep -c abx-code- || true']);
    assert.equal(left.out, '0\n');
  });

  test("a template's commands are tools too: listed with their schemas and callable", async () => {
    let r = await api(d, 'GET', `/v1/tools?sandbox=${tb}`);
    assert.equal(r.status, 200, r.text);
    const echo = r.json.tools.find((t) => t.function.name === 'echo');
    assert.equal(echo.type, 'function');
    assert.deepEqual(echo.function.parameters.required, ['text']);
    r = await api(d, 'GET', '/v1/tools?template=locked&format=mcp');
    assert.deepEqual(r.json.tools.map((t) => t.name), ['hello']);
    assert.equal(r.json.tools[0].inputSchema.type, 'object');
    r = await api(d, 'GET', '/v1/tools?template=nosuch');
    assert.equal(r.status, 404);
    r = await api(d, 'GET', `/v1/tools?template=locked&sandbox=${tb}`);
    assert.equal(r.status, 400);
    // Called through the tools route: the same rules, the tools answer.
    r = await api(d, 'POST', `/v1/sandboxes/${tb}/tools/echo`, { arguments: '{"text": "$(id)", "count": 2}' });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.stdout, '$(id)|2|false\n');
    assert.equal(r.json.template, 'toolbox');
    assert.equal(r.json.exit_code, 0);
    r = await api(d, 'POST', `/v1/sandboxes/${tb}/tools/echo`, { arguments: { text: 'a', count: 'many' } });
    assert.equal(r.status, 400);
    assert.equal(r.json.error, 'invalid_arguments');
    // No shell needed for the template's own commands.
    r = await api(d, 'POST', `/v1/sandboxes/${locked}/tools/hello`, { arguments: { who: 'agent' } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.stdout, 'hello agent\n');
    r = await api(d, 'POST', `/v1/sandboxes/${locked}/tools/other`, { arguments: {} });
    assert.equal(r.status, 403);
  });

  test('start_cmd runs in the background and ready_cmd gates the answer', async () => {
    const t0 = Date.now();
    const r = await api(d, 'POST', '/v1/sandboxes', { template: 'served' });
    assert.equal(r.status, 201, r.text);
    assert.ok(Date.now() - t0 >= 250, 'answered before ready_cmd succeeded');
    const x = await exec(d, r.json.id, ['/bin/sh', '-c', 'cat /tmp/state; pgrep -c sleep']);
    assert.equal(x.out, 'up\n1\n');
    await killSandbox(d, r.json.id);
    const n = await api(d, 'POST', '/v1/sandboxes', { template: 'never' });
    assert.equal(n.status, 504, n.text);
    assert.equal(n.json.error, 'not_ready');
    assert.match(n.json.output, /not yet/);
    const list = await api(d, 'GET', '/v1/sandboxes');
    assert.ok(!list.json.sandboxes.some((s) => s.template === 'never' && s.state === 'running'));
  });

  test('a sandbox of an unknown template is refused', async () => {
    const r = await api(d, 'POST', '/v1/sandboxes', { template: 'nosuch' });
    assert.equal(r.status, 404);
  });
});

describe('scoped keys see exactly what they may run', { skip }, () => {
  let d, dir;
  const narrow = 'k_narrow_' + 'x'.repeat(24);
  const wide = 'k_wide_' + 'y'.repeat(24);
  before(async () => {
    dir = templatesDir();
    const keys = join(dir + '.keys.json');
    writeFileSync(keys, JSON.stringify({
      keys: [
        { key: narrow, templates: ['tb'], commands: ['toolbox:echo'] },
        { key: wide, templates: ['toolbox', 'locked'] },
      ],
    }));
    d = await startAbxd({ env: { ABX_TEMPLATES_DIR: dir, ABX_KEYS_FILE: keys } });
  });
  after(async () => {
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(dir + '.keys.json', { force: true });
  });

  test('discovery is limited to the key', async () => {
    let r = await api(d, 'GET', '/v1/templates', undefined, { key: narrow });
    assert.deepEqual(r.json.templates.map((t) => [t.name, t.commands]), [['toolbox', ['echo']]]);
    r = await api(d, 'GET', '/v1/templates/toolbox', undefined, { key: narrow });
    assert.deepEqual(r.json.commands.map((c) => c.name), ['echo']);
    r = await api(d, 'GET', '/v1/templates/locked', undefined, { key: narrow });
    assert.equal(r.status, 404);
    r = await api(d, 'GET', '/v1/templates', undefined, { key: wide });
    assert.deepEqual(r.json.templates.map((t) => t.name).sort(), ['locked', 'toolbox']);
    assert.deepEqual(r.json.templates.find((t) => t.name === 'toolbox').commands, ['echo', 'ratio', 'where']);
  });

  test('execution is limited to the key, and to its own sandboxes', async () => {
    let r = await api(d, 'POST', '/v1/sandboxes', { template: 'locked' }, { key: narrow });
    assert.equal(r.status, 404);
    r = await api(d, 'POST', '/v1/sandboxes', {}, { key: narrow }); // base is not its template
    assert.equal(r.status, 404);
    r = await api(d, 'POST', '/v1/sandboxes', { template: 'toolbox' }, { key: narrow });
    assert.equal(r.status, 201, r.text);
    const id = r.json.id;
    r = await api(d, 'GET', `/v1/sandboxes/${id}/commands`, undefined, { key: narrow });
    assert.deepEqual(r.json.commands.map((c) => c.name), ['echo']);
    r = await api(d, 'POST', `/v1/sandboxes/${id}/commands/echo`, { args: { text: 'ok' } }, { key: narrow });
    assert.equal(r.status, 200);
    assert.equal(parseNdjson(r.text).stdout.toString(), 'ok|3|false\n');
    r = await api(d, 'POST', `/v1/sandboxes/${id}/commands/ratio`, { args: { x: 1 } }, { key: narrow });
    assert.equal(r.status, 404);
    assert.match(r.json.message, /\(it has: echo\)$/);
    for (const [m, p, body] of [
      ['POST', `/v1/sandboxes/${id}/exec`, { argv: ['id'] }],
      ['GET', `/v1/sandboxes/${id}/files/x`],
      ['POST', `/v1/sandboxes/${id}/code`, { language: 'bash', code: 'id' }],
      ['GET', '/v1/sandboxes'],
      ['GET', '/v1/tools'],
      ['POST', '/v1/workspaces', {}],
      ['GET', '/metrics'],
      ['POST', '/drain'],
    ]) {
      r = await api(d, m, p, body, { key: narrow });
      assert.equal(r.status, 403, `${m} ${p}: ${r.text}`);
    }
    // Another key's sandbox does not exist for it.
    r = await api(d, 'GET', `/v1/sandboxes/${id}`, undefined, { key: wide });
    assert.equal(r.status, 404);
    r = await api(d, 'POST', `/v1/sandboxes/${id}/commands/echo`, { args: { text: 'x' } }, { key: wide });
    assert.equal(r.status, 404);
    // The full key sees everything.
    r = await api(d, 'GET', `/v1/sandboxes/${id}`);
    assert.equal(r.status, 200);
    r = await api(d, 'DELETE', `/v1/sandboxes/${id}`, undefined, { key: narrow });
    assert.equal(r.status, 204);
  });

  test('a bad keys file stops abxd', async () => {
    const keys = dir + '.bad.json';
    writeFileSync(keys, JSON.stringify({ keys: [{ key: 'short', templates: [] }] }));
    await assert.rejects(startAbxd({ env: { ABX_TEMPLATES_DIR: dir, ABX_KEYS_FILE: keys, ABX_POOL: '0' } }), /keys\[0\]\.key/);
    writeFileSync(keys, JSON.stringify({ keys: [{ key: narrow, templates: ['nosuch'] }] }));
    await assert.rejects(startAbxd({ env: { ABX_TEMPLATES_DIR: dir, ABX_KEYS_FILE: keys, ABX_POOL: '0' } }), /template 'nosuch'/);
    rmSync(keys, { force: true });
  });
});
