// cli-templates.test.mjs - `abx template ls|show`, `abx commands`, `abx run`
// and `abx code` (and libabx's template functions under them) against a
// real abxd started with ABX_TEMPLATES_DIR, plus `abx commands DIR`, which
// reads a template directory offline. The raw wire (lib.mjs's api) is used
// only to compare the CLI's JSON with abxd's own. Every sandbox made here
// is removed and abxd stopped, even when a test fails.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAbxd, abx as runAbx, api, createSandbox, killSandbox, exec, isRoot } from './lib.mjs';

const skip = !isRoot && 'needs root';

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

const TOOLBOX = `name: toolbox
aliases: [tb]
description: echo and friends
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
  fail:
    description: exit with a code
    cmd: echo out; echo err >&2; exit {code}
    args:
      - {name: code, type: int, default: 3}
  slow:
    cmd: sleep 5
    timeout: 0.5
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

function writeTemplates(root, templates) {
  chmodSync(root, 0o755);
  for (const [name, yaml] of Object.entries(templates)) {
    mkdirSync(join(root, name));
    writeFileSync(join(root, name, 'sandbox-template.yaml'), yaml);
  }
}

describe('abx commands DIR (offline)', () => {
  let root;
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'abx-cli-tpl-'));
    writeTemplates(root, {
      toolbox: TOOLBOX,
      bad: 'name: bad\ncustom_commands:\n  go:\n    cmd: echo {nope}\n',
      badcap: 'name: badcap\ncapabilities: [shell, root]\n',
    });
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  // No abxd: ABX_URL points nowhere, so nothing could be asked of one.
  const nowhere = { url: 'http://127.0.0.1:1', key: 'k' };

  test('a valid template lists its commands with typed arguments', () => {
    const r = ok(abx(nowhere, ['commands', join(root, 'toolbox')]));
    assert.match(r.stdout, /^template: +toolbox$/m);
    assert.match(r.stdout, /^capabilities: +shell, files, code$/m);
    assert.match(r.stdout, /^ {2}echo: Print a value and a number$/m);
    assert.match(r.stdout, /^ {4}text:str \(required\) +what to print$/m);
    assert.match(r.stdout, /^ {4}count:int \(default=3\)$/m);
    assert.match(r.stdout, /^ {4}loud:bool \(default=false\)$/m);
    assert.match(r.stdout, /^ {4}x:float \(required\)$/m);
  });

  test('--json has the shape abxd answers with', () => {
    const j = JSON.parse(ok(abx(nowhere, ['commands', '--json', join(root, 'toolbox') + '/'])).stdout);
    assert.equal(j.template, 'toolbox');
    assert.deepEqual(j.capabilities, ['shell', 'files', 'code']);
    const echo = j.commands.find((c) => c.name === 'echo');
    assert.deepEqual(echo.args[1], { name: 'count', type: 'int', required: false, default: '3', description: null });
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
  });

  test('an invalid template is exit 1 with file:line and the reason', () => {
    let r = abx(nowhere, ['commands', join(root, 'bad')]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, new RegExp(`${join(root, 'bad')}/sandbox-template\\.yaml:4: .*nope`));
    r = abx(nowhere, ['commands', join(root, 'badcap')]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /badcap\/sandbox-template\.yaml:2: capabilities\[1\]: unknown capability 'root'/);
    mkdirSync(join(root, 'empty'));
    r = abx(nowhere, ['commands', join(root, 'empty')]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /empty\/sandbox-template\.yaml: cannot open/);
  });

  test('usage errors are exit 2', () => {
    assert.equal(abx(nowhere, ['commands']).code, 2);
    assert.equal(abx(nowhere, ['commands', 'a', 'b']).code, 2);
    assert.equal(abx(nowhere, ['run', 'sb']).code, 2);
    assert.equal(abx(nowhere, ['run', '--text', 'x', 'sb', 'echo']).code, 2);
    assert.equal(abx(nowhere, ['code', 'sb']).code, 2);
    assert.equal(abx(nowhere, ['code', 'sb', '--language', 'cobol']).code, 2);
    assert.equal(ok(abx(nowhere, ['run', '--help'])).stdout.includes('--json-args'), true);
  });
});

describe('abx template, commands, run and code against abxd', { skip }, () => {
  let d, root, tb, locked, base;
  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'abx-cli-tpl-'));
    writeTemplates(root, { toolbox: TOOLBOX, locked: LOCKED });
    d = await startAbxd({ env: { ABX_TEMPLATES_DIR: root } });
    tb = (await createSandbox(d, { template: 'tb' })).id;
    locked = (await createSandbox(d, { template: 'locked' })).id;
    base = (await createSandbox(d)).id;
  });
  after(async () => {
    if (d) {
      for (const id of [tb, locked, base]) if (id) await killSandbox(d, id).catch(() => {}); // d.stop() kills the rest
      await d.stop();
    }
    rmSync(root, { recursive: true, force: true });
  });

  test('template ls and show, human and --json', async () => {
    let r = ok(abx(d, ['template', 'ls']));
    assert.match(r.stdout, /^NAME +ALIASES +CAPABILITIES +COMMANDS +DESCRIPTION$/m);
    assert.match(r.stdout, /^toolbox +tb +shell,files,code +echo,ratio,fail,slow +echo and friends$/m);
    assert.match(r.stdout, /^locked +- +- +hello +only its declared commands$/m);
    assert.match(r.stdout, /^base /m);
    const mine = JSON.parse(ok(abx(d, ['template', 'ls', '--json'])).stdout);
    assert.deepEqual(mine, (await api(d, 'GET', '/v1/templates')).json);

    r = ok(abx(d, ['template', 'show', 'tb']));
    assert.match(r.stdout, /^name: +toolbox$/m);
    assert.match(r.stdout, /^aliases: +tb$/m);
    assert.match(r.stdout, /^description: +echo and friends$/m);
    assert.match(r.stdout, /^base: +host$/m);
    assert.match(r.stdout, /^capabilities: +shell, files, code$/m);
    assert.match(r.stdout, /^resources: +cpu default, memory 300 MiB, pids 100$/m);
    assert.match(r.stdout, /^ {4}text:str \(required\) +what to print$/m);
    assert.match(r.stdout, /^ {4}count:int \(default=3\)$/m);
    assert.match(r.stdout, /^ {2}fail: exit with a code$/m);
    const show = JSON.parse(ok(abx(d, ['template', 'show', 'toolbox', '--json'])).stdout);
    assert.deepEqual(show, (await api(d, 'GET', '/v1/templates/toolbox')).json);

    r = abx(d, ['template', 'show', 'nosuch']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no template 'nosuch'/);
    r = abx(d, ['template', 'show', 'a/../b']);
    assert.equal(r.code, 1);
  });

  test('commands SANDBOX asks abxd', async () => {
    let r = ok(abx(d, ['commands', locked]));
    assert.match(r.stdout, /^template: +locked$/m);
    assert.match(r.stdout, /^capabilities: +none$/m);
    assert.match(r.stdout, /^ {4}who:str \(default=world\)$/m);
    const j = JSON.parse(ok(abx(d, ['commands', tb, '--json'])).stdout);
    assert.deepEqual(j, (await api(d, 'GET', `/v1/sandboxes/${tb}/commands`)).json);
    r = abx(d, ['commands', 'nosuchsandbox']);
    assert.equal(r.code, 1);
  });

  test('run with --arg, typed options and --flag/--no-flag', () => {
    let r = ok(abx(d, ['run', tb, 'echo', '--text', 'hi']));
    assert.equal(r.stdout, 'hi|3|false\n');
    r = ok(abx(d, ['run', tb, 'echo', '--arg', 'text=a=b', '--count', '42', '--loud']));
    assert.equal(r.stdout, 'a=b|42|true\n');
    r = ok(abx(d, ['run', tb, 'echo', '--text=x', '--count=-5', '--no-loud']));
    assert.equal(r.stdout, 'x|-5|false\n');
    r = ok(abx(d, ['run', tb, 'echo', '--text', 'y', '--loud=YES']));
    assert.equal(r.stdout, 'y|3|true\n');
    r = ok(abx(d, ['run', tb, 'ratio', '--x', '0.1']));
    assert.equal(r.stdout, '0.1\n');
    r = ok(abx(d, ['run', tb, 'ratio', '--x', '2.5E3']));
    assert.equal(r.stdout, '2500\n');
    r = ok(abx(d, ['run', tb, 'echo', '--json-args', '{"text": "j", "count": 7}']));
    assert.equal(r.stdout, 'j|7|false\n');
    // --json: the NDJSON of the stream, ending with the result.
    r = ok(abx(d, ['run', '--json', tb, 'echo', '--text', 'z']));
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(Buffer.from(lines[0].stdout, 'base64').toString(), 'z|3|false\n');
    assert.equal(lines.at(-1).exit_code, 0);
    // A template's own commands run without the shell capability.
    assert.equal(ok(abx(d, ['run', locked, 'hello', '--who', 'agent'])).stdout, 'hello agent\n');
  });

  test('values are coerced by abxd: a bad one is its message, exit 1', () => {
    let r = abx(d, ['run', tb, 'echo', '--text', 'a', '--count', 'ten']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /count/);
    assert.equal(r.stdout, '');
    r = abx(d, ['run', tb, 'echo', '--text', 'a', '--count', '1.5']);
    assert.equal(r.code, 1);
    r = abx(d, ['run', tb, 'echo']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /missing required argument 'text'/);
    r = abx(d, ['run', tb, 'echo', '--arg', 'colour=red', '--text', 'a']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /colour/);
  });

  test('unknown command or option is exit 2 with what there is', () => {
    let r = abx(d, ['run', tb, 'nosuch']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /has no command 'nosuch'/);
    assert.match(r.stderr, /echo, ratio, fail, slow/);
    r = abx(d, ['run', tb, 'echo', '--colour', 'red']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no option '--colour'.*--text str, --count int, --\[no-\]loud/);
    r = abx(d, ['run', tb, 'echo', '--text', 'a', '--text', 'b']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /given twice/);
    r = abx(d, ['run', tb, 'echo', '--text']);
    assert.equal(r.code, 2);
    r = abx(d, ['run', tb, 'echo', '--json-args', '{}', '--text', 'a']);
    assert.equal(r.code, 2);
  });

  test('injection attempts are printed literally', async () => {
    for (const v of ["'; touch /tmp/pwned-cli #", '$(touch /tmp/pwned-cli)', '`touch /tmp/pwned-cli`', 'a\nb', '{count}', '--x', '']) {
      const r = ok(abx(d, ['run', tb, 'echo', '--text', v, '--count', '1']));
      assert.equal(r.stdout, `${v}|1|false\n`, JSON.stringify(v));
    }
    const chk = await exec(d, tb, ['/bin/sh', '-c', 'test -e /tmp/pwned-cli && echo PWNED || echo clean']);
    assert.equal(chk.out, 'clean\n');
  });

  test("run exits with the command's code; 124 at its deadline", () => {
    let r = abx(d, ['run', tb, 'fail']);
    assert.equal(r.code, 3);
    assert.equal(r.stdout, 'out\n');
    assert.match(r.stderr, /^err$/m);
    assert.equal(abx(d, ['run', tb, 'fail', '--code', '0']).code, 0);
    assert.equal(abx(d, ['run', tb, 'fail', '--code', '300']).code, 300 % 256);
    r = abx(d, ['run', tb, 'slow']);
    assert.equal(r.code, 124, r.stderr);
  });

  test('exec in a sandbox without the shell capability: 403 with its message', () => {
    const r = abx(d, ['exec', locked, 'true']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /does not have the 'shell' capability/);
    const c = abx(d, ['code', locked, '--language', 'bash'], { input: 'echo hi' });
    assert.equal(c.code, 1);
    assert.match(c.stderr, /does not have the 'code' capability/);
  });

  test('code runs python and bash, from stdin or a file, with their exit codes', () => {
    let r = ok(abx(d, ['code', base, '--language', 'python'], { input: 'import sys\nprint("py", 6 * 7)\n' }));
    assert.equal(r.stdout, 'py 42\n');
    r = abx(d, ['code', base, '-l', 'python', '-'], { input: 'raise SystemExit(4)' });
    assert.equal(r.code, 4);
    const f = join(root, 'snippet.sh');
    writeFileSync(f, 'echo "sh $((6 * 7))"; echo oops >&2; exit 5\n');
    r = abx(d, ['code', base, '--language', 'bash', f]);
    assert.equal(r.code, 5);
    assert.equal(r.stdout, 'sh 42\n');
    assert.match(r.stderr, /oops/);
    r = abx(d, ['code', base, '--language', 'bash', join(root, 'missing.sh')]);
    assert.equal(r.code, 1);
    r = abx(d, ['code', base, '--language', 'bash'], { input: 'x'.repeat(1024 * 1024 + 1) });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /larger than 1048576 bytes/);
    r = ok(abx(d, ['code', base, '--language', 'bash', '--json'], { input: 'echo j' }));
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.at(-1).exit_code, 0);
  });
});
