// tools-build.test.mjs - the real `abx tools build` on temporary copies of
// packages: bundle layout and contract, incremental rebuilds, atomic failure
// (no bundle, no staging directory, the previous bundle intact), and the
// carrier's launcher dispatching as python3 and pip. No abxd, no root.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  mkdtempSync, mkdirSync, writeFileSync, readFileSync, readdirSync, rmSync, chmodSync, cpSync,
  existsSync, statSync, symlinkSync,
} from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { abxBin, repo } from './lib.mjs';

let work;
let sdkEnv = {};

function build(args, env = {}) {
  const r = spawnSync(abxBin, ['tools', 'build', ...args], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME ?? '/root',
      ASAN_OPTIONS: process.env.ASAN_OPTIONS ?? 'detect_leaks=1',
      UBSAN_OPTIONS: process.env.UBSAN_OPTIONS ?? 'print_stacktrace=1:halt_on_error=1',
      ...sdkEnv,
      ...env,
    },
    encoding: 'utf8',
    timeout: 300000,
  });
  assert.doesNotMatch(r.stderr ?? '', /ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:/);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function run(argv, opts = {}) {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 60000, ...opts });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// A package whose program is a shell script obeying the contract.
function shellPackage(dir, name, { cmds = ['greet'], schema, list, build: buildCmd } = {}) {
  const p = join(dir, name);
  mkdirSync(join(p, 'bin'), { recursive: true });
  const sch = schema ?? {
    type: 'object',
    properties: { who: { type: 'string', description: 'whom' } },
    required: ['who'],
    additionalProperties: false,
  };
  const listing = list ?? JSON.stringify(cmds.map((c) => ({ name: c, description: `${c} someone` })));
  const known = cmds.join('|');
  const script = `#!/bin/sh
case "$#" in
0) printf '%s\\n' '${listing}' ;;
1) case "$1" in ${known}) printf '%s\\n' '${JSON.stringify(sch)}' ;; *) echo "unknown command '$1'" >&2; exit 2 ;; esac ;;
*) case "$1" in ${known}) echo "hello $2" ;; *) echo "unknown command" >&2; exit 2 ;; esac ;;
esac
`;
  writeFileSync(join(p, 'bin', name), script);
  chmodSync(join(p, 'bin', name), 0o755);
  const manifest = { name, kind: 'cli', description: `${name} tools`, files: ['bin'], run: { exec: `bin/${name}` } };
  if (buildCmd) manifest.build = buildCmd;
  writeFileSync(join(p, 'abx-tool.json'), JSON.stringify(manifest, null, 2));
  return p;
}

function stamp(out, name) {
  return JSON.parse(readFileSync(join(out, name, 'build-stamp.json'), 'utf8'));
}

function entries(dir) {
  return readdirSync(dir).sort();
}

// Checks a bundle's layout and that launch answers what commands.json and
// schemas/ say.
function checkBundle(out, name) {
  const b = join(out, name);
  const st = stamp(out, name);
  assert.equal(st.format, 1);
  assert.equal(st.name, name);
  assert.match(st.source_hash, /^[0-9a-f]{64}$/);
  assert.match(st.builder_fingerprint, /^[0-9a-f]{64}$/);
  assert.ok(statSync(join(b, 'launch')).mode & 0o111, 'launch is executable');
  assert.equal(statSync(join(b, 'launch')).mode & 0o777, 0o755);
  const cmds = JSON.parse(readFileSync(join(b, 'commands.json'), 'utf8'));
  const listed = run([join(b, 'launch')]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.deepEqual(JSON.parse(listed.stdout), cmds);
  assert.deepEqual(entries(join(b, 'schemas')), cmds.map((c) => `${c.name}.json`).sort());
  for (const c of cmds) {
    const s = run([join(b, 'launch'), c.name]);
    assert.equal(s.code, 0, s.stderr);
    assert.deepEqual(JSON.parse(s.stdout), JSON.parse(readFileSync(join(b, 'schemas', `${c.name}.json`), 'utf8')));
  }
  const bad = run([join(b, 'launch'), 'no-such-command']);
  assert.equal(bad.code, 2);
  return { stamp: st, cmds };
}

function noStaging(out) {
  assert.deepEqual(entries(out).filter((e) => e.startsWith('.')), [], 'no staging directories left');
}

function pythonHas(modules) {
  return run(['/usr/bin/python3', '-I', '-c', modules.map((m) => `import ${m}`).join('; ')]).code === 0;
}

before(() => {
  work = mkdtempSync(join(tmpdir(), 'abx-tools-build-'));
  // The SDK's Python module may not be there in a tree without the SDK;
  // the fingerprint needs one, so use a stand-in then.
  if (!existsSync(join(repo, 'sdk', 'python', 'abx_tool.py'))) {
    mkdirSync(join(work, 'sdk'));
    writeFileSync(join(work, 'sdk', 'abx_tool.py'), '# stand-in\n');
    sdkEnv = { ABX_TOOLS_SDK_PYTHON: join(work, 'sdk') };
  }
});

after(() => {
  rmSync(work, { recursive: true, force: true });
});

describe('abx tools build', () => {
  test('builds packages, then only what changed', () => {
    const src = mkdtempSync(join(work, 'src-'));
    const out = join(mkdtempSync(join(work, 'out-')), 'tools');
    shellPackage(src, 'alpha', { cmds: ['greet', 'wave'] });
    shellPackage(src, 'beta', { build: 'mkdir -p "$ABX_TOOL_OUT/share" && echo built > "$ABX_TOOL_OUT/share/note"' });
    mkdirSync(join(src, 'not-a-package'));

    let r = build(['--out', out, src]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^alpha: built, 2 commands/m);
    assert.match(r.stdout, /^beta: built, 1 command /m);
    assert.match(r.stderr, /not-a-package' has no abx-tool\.json; skipped/);
    assert.deepEqual(entries(out), ['alpha', 'beta']);
    checkBundle(out, 'alpha');
    checkBundle(out, 'beta');
    assert.equal(readFileSync(join(out, 'beta', 'share', 'note'), 'utf8'), 'built\n');
    assert.equal(run([join(out, 'alpha', 'launch'), 'greet', '{"who":"x"}']).stdout, 'hello {"who":"x"}\n');

    // Nothing changed: nothing rebuilt, not a byte or an mtime.
    const before = Object.fromEntries(['alpha', 'beta'].map((n) => [n, {
      stamp: readFileSync(join(out, n, 'build-stamp.json'), 'utf8'),
      mtime: statSync(join(out, n, 'launch')).mtimeMs,
      ino: statSync(join(out, n)).ino,
    }]));
    r = build(['--out', out, src]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^alpha: up to date$/m);
    assert.match(r.stdout, /^beta: up to date$/m);
    for (const n of ['alpha', 'beta']) {
      assert.equal(readFileSync(join(out, n, 'build-stamp.json'), 'utf8'), before[n].stamp);
      assert.equal(statSync(join(out, n, 'launch')).mtimeMs, before[n].mtime);
      assert.equal(statSync(join(out, n)).ino, before[n].ino);
    }

    // A content change (same size) rebuilds that package only.
    const f = join(src, 'alpha', 'bin', 'alpha');
    writeFileSync(f, readFileSync(f, 'utf8').replace('hello', 'howdy'));
    r = build(['--out', out, src]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^alpha: built/m);
    assert.match(r.stdout, /^beta: up to date$/m);
    assert.notEqual(stamp(out, 'alpha').source_hash, JSON.parse(before.alpha.stamp).source_hash);
    assert.equal(readFileSync(join(out, 'beta', 'build-stamp.json'), 'utf8'), before.beta.stamp);
    assert.equal(run([join(out, 'alpha', 'launch'), 'greet', '{}']).stdout, 'howdy {}\n');

    // The exec bit of a file counts too.
    chmodSync(join(src, 'beta', 'abx-tool.json'), 0o755);
    r = build(['--out', out, join(src, 'beta')]);
    assert.match(r.stdout, /^beta: built/m);

    // --force rebuilds everything (as a changed builder fingerprint does;
    // the unit test covers the fingerprint).
    r = build(['--force', '--out', out, src]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^alpha: built/m);
    assert.match(r.stdout, /^beta: built/m);
    noStaging(out);
  });

  test('the sample tools build and answer the contract', () => {
    const samples = join(repo, 'sample-tools');
    const src = join(mkdtempSync(join(work, 'samples-')), 'sample-tools');
    cpSync(samples, src, { recursive: true });
    const out = join(mkdtempSync(join(work, 'out-')), 'tools');
    const names = readdirSync(src).filter((d) => existsSync(join(src, d, 'abx-tool.json'))).sort();
    assert.ok(names.includes('python-stack'));
    const carrierOk = pythonHas(['numpy', 'pandas', 'scipy', 'matplotlib']);

    const r = build(['--out', out, src]);
    if (!carrierOk) {
      assert.equal(r.code, 1);
      assert.match(r.stderr, /python-stack: Python module '\w+' does not import .*install the Debian package python3-\w+/);
      return;
    }
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(entries(out), names);
    for (const n of names) {
      const { stamp: st, cmds } = checkBundle(out, n);
      const manifest = JSON.parse(readFileSync(join(src, n, 'abx-tool.json'), 'utf8'));
      assert.equal(st.kind, manifest.kind);
      if (manifest.kind === 'carrier') assert.deepEqual(cmds, []);
      else assert.ok(cmds.length > 0);
      if (manifest.run?.python) assert.ok(existsSync(join(out, n, 'lib', 'abx_tool.py')));
    }
    const again = build(['--out', out, src]);
    assert.equal(again.code, 0, again.stderr);
    for (const n of names) assert.match(again.stdout, new RegExp(`^${n}: up to date$`, 'm'));
    noStaging(out);
  });

  test('a failed package leaves no bundle, no staging directory, and the old bundle intact', () => {
    const src = mkdtempSync(join(work, 'src-'));
    const out = join(mkdtempSync(join(work, 'out-')), 'tools');
    shellPackage(src, 'good');
    const keep = shellPackage(src, 'keep');
    let r = build(['--out', out, src]);
    assert.equal(r.code, 0, r.stderr);
    const kept = readFileSync(join(out, 'keep', 'build-stamp.json'), 'utf8');

    // keep breaks: its schema uses a keyword nobody can enforce.
    rmSync(keep, { recursive: true });
    shellPackage(src, 'keep', { schema: { type: 'object', properties: {}, oneOf: [] } });
    // three new packages fail in three other ways
    const failing = shellPackage(src, 'failing', { build: 'echo compiling; echo oops >&2; exit 3' });
    shellPackage(src, 'notjson', { list: 'this is not JSON' });
    shellPackage(src, 'dupes', { list: '[{"name":"a","description":"x"},{"name":"a","description":"y"}]', cmds: ['a'] });
    // a stale staging directory from a crashed run goes at start
    mkdirSync(join(out, '.good.tmp-abc123', 'bin'), { recursive: true });

    r = build(['--out', out, src]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /abx tools build: failing: the build exited with status 3\n/);
    assert.match(r.stderr, /\| compiling\n/);
    assert.match(r.stderr, /\| oops\n/);
    assert.match(r.stderr, /abx tools build: keep: the schema of 'greet' cannot be enforced: .*oneOf/);
    assert.match(r.stderr, /abx tools build: notjson: 'launch' did not print JSON/);
    assert.match(r.stderr, /abx tools build: dupes: 'launch' lists command 'a' twice/);
    assert.match(r.stderr, /4 of 5 packages failed/);
    assert.match(r.stdout, /^good: up to date$/m);
    assert.deepEqual(entries(out), ['good', 'keep']);
    noStaging(out);
    assert.equal(readFileSync(join(out, 'keep', 'build-stamp.json'), 'utf8'), kept);
    checkBundle(out, 'keep');

    // a bad manifest, a symlink in the package, a run target that is not there
    rmSync(failing, { recursive: true });
    mkdirSync(join(src, 'badman'));
    writeFileSync(join(src, 'badman', 'abx-tool.json'), '{"name":"badman","kind":"cli","description":"d","run":{"exec":"x"},"version":"1"}');
    symlinkSync('/etc/passwd', join(src, 'good', 'passwd'));
    const nobin = shellPackage(src, 'nobin');
    rmSync(join(nobin, 'bin'), { recursive: true });
    mkdirSync(join(nobin, 'bin'));
    r = build(['--out', out, join(src, 'badman'), join(src, 'good'), nobin]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /badman: abx-tool\.json: the manifest: unknown key 'version'/);
    assert.match(r.stderr, /good: 'passwd' is a symlink/);
    assert.match(r.stderr, /nobin: 'run': 'bin\/nobin' is not a regular file in the bundle/);
    assert.deepEqual(entries(out), ['good', 'keep']);
    noStaging(out);
  });

  test('the carrier launcher lists nothing and runs python3 and pip', (t) => {
    const src = mkdtempSync(join(work, 'src-'));
    const out = join(mkdtempSync(join(work, 'out-')), 'tools');
    // modules every python3 has, so this runs without make deps
    mkdirSync(join(src, 'py'));
    writeFileSync(join(src, 'py', 'abx-tool.json'), JSON.stringify({
      name: 'py', kind: 'carrier', description: 'python', python: { modules: ['json', 'os.path'] },
    }));
    mkdirSync(join(src, 'nomod'));
    writeFileSync(join(src, 'nomod', 'abx-tool.json'), JSON.stringify({
      name: 'nomod', kind: 'carrier', description: 'x', python: { modules: ['abx_no_such_module'] },
    }));
    const r = build(['--out', out, src]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /nomod: Python module 'abx_no_such_module' does not import with \/usr\/bin\/python3 \(install the Debian package python3-abx-no-such-module\)/);
    assert.deepEqual(entries(out), ['py']);
    assert.equal(stamp(out, 'py').kind, 'carrier');
    const launch = join(out, 'py', 'launch');
    assert.equal(run([launch]).stdout, '[]\n');
    const bad = run([launch, 'anything']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /carrier bundle has no commands/);
    assert.deepEqual(entries(join(out, 'py', 'schemas')), []);

    const bin = mkdtempSync(join(work, 'bin-'));
    for (const n of ['python', 'python3', 'python3.11', 'pip', 'pip3']) symlinkSync(launch, join(bin, n));
    const py = run([join(bin, 'python3'), '-c', 'print(1)']);
    assert.equal(py.code, 0, py.stderr);
    assert.equal(py.stdout, '1\n');
    assert.equal(run([join(bin, 'python3.11'), '-c', 'import sys; print(sys.executable)']).stdout, '/usr/bin/python3\n');
    const envp = run([join(bin, 'python'), '-c', 'import os; print(os.environ["PIP_BREAK_SYSTEM_PACKAGES"], os.environ["PIP_NO_INPUT"])']);
    assert.equal(envp.stdout, '1 1\n');
    // Without a usable HOME: a private directory, never /tmp itself.
    const home = run([join(bin, 'python3'), '-c', 'import os, stat; h = os.environ["HOME"]; print(h, oct(stat.S_IMODE(os.stat(h).st_mode)))'],
      { env: { PATH: process.env.PATH, HOME: '/nonexistent' } });
    const [h, mode] = home.stdout.trim().split(' ');
    assert.match(h, /\/abx-home\.\w+$/);
    assert.equal(mode, '0o700');
    rmSync(h, { recursive: true, force: true });
    if (run(['/usr/bin/python3', '-m', 'pip', '--version']).code !== 0) {
      t.diagnostic('pip is not installed for /usr/bin/python3 (make deps): pip not checked');
      return;
    }
    const pip = run([join(bin, 'pip'), '--version']);
    assert.equal(pip.code, 0, pip.stderr);
    assert.match(pip.stdout, /^pip \S+ from \/usr\/lib\/python3/);
    assert.match(run([join(bin, 'pip3'), '--version']).stdout, /^pip /);
  });
});
