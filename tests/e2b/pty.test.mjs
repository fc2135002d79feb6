// PTYs through the real E2B SDK 2.51: an interactive login shell on a
// terminal of the sandbox's own devpts, input, resize, kill, connect.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setup, sleep } from './lib.mjs';

let d, Sandbox, E, tdir;
before(async () => {
  // A template without the terminal capability (base has every one).
  tdir = mkdtempSync(join(tmpdir(), 'abx-e2b-tmpl-'));
  chmodSync(tdir, 0o755); // abxd's network process reads it when split (ABX_PRIVSEP=1)
  mkdirSync(join(tdir, 'noterm'));
  writeFileSync(join(tdir, 'noterm', 'sandbox-template.yaml'), 'name: noterm\ncapabilities: [shell, files]\n');
  const s = await setup({ args: ['--templates-dir', tdir] });
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
});
after(async () => {
  if (d) await d.stop();
  rmSync(tdir, { recursive: true, force: true });
});

async function until(get, re, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (re.test(get())) return;
    await sleep(50);
  }
  assert.fail(`never saw ${re} in:\n${get()}`);
}

test('pty: a terminal, typed input, resize, kill', async () => {
  const sbx = await Sandbox.create();
  try {
    let out = '';
    const dec = new TextDecoder();
    const t = await sbx.pty.create({ cols: 100, rows: 30, onData: (b) => (out += dec.decode(b)), timeoutMs: 0 });
    assert.ok(t.pid > 0);
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('tty; stty size; echo "[$TERM]"\n'));
    await until(() => out, /\/dev\/pts\/\d+/);
    await until(() => out, /30 100/);
    await until(() => out, /\[xterm-256color\]/);
    await sbx.pty.resize(t.pid, { cols: 120, rows: 40 });
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('stty size\n'));
    await until(() => out, /40 120/);
    // A pty is not a pipe: stdin input is refused, and a pipe process has no pty.
    await assert.rejects(sbx.commands.sendStdin(t.pid, 'x'), E.SandboxError);
    const plain = await sbx.commands.run('sleep 30', { background: true });
    await assert.rejects(sbx.pty.resize(plain.pid, { cols: 10, rows: 10 }), E.SandboxError);
    await plain.kill();
    // connect sees new output only
    let more = '';
    const again = await sbx.pty.connect(t.pid, { onData: (b) => (more += dec.decode(b)) });
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('echo again-$((1+1))\n'));
    await until(() => more, /again-2/);
    assert.equal(await sbx.pty.kill(t.pid), true);
    await assert.rejects(t.wait(), (e) => e instanceof E.CommandExitError);
    await assert.rejects(again.wait(), (e) => e instanceof E.CommandExitError);
    assert.equal(await sbx.pty.kill(t.pid), false);
  } finally {
    await sbx.kill();
  }
});

test('pty: exit ends the session with its code; ^C interrupts the foreground job', async () => {
  const sbx = await Sandbox.create();
  try {
    let out = '';
    const dec = new TextDecoder();
    const t = await sbx.pty.create({ cols: 80, rows: 24, onData: (b) => (out += dec.decode(b)) });
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('sleep 100; echo after-sleep\n'));
    // Until `sleep 100` runs in the foreground, for ^C to interrupt.
    for (const end = Date.now() + 20000; Date.now() < end; await sleep(50))
      if (/^sleep 100$/m.test((await sbx.commands.run('ps -e -o args=')).stdout)) break;
    await sbx.pty.sendInput(t.pid, new Uint8Array([3])); // ^C
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('echo alive\n'));
    await until(() => out, /alive/);
    assert.doesNotMatch(out, /\nafter-sleep/); // the echo never ran (only the typed line shows it)
    await sbx.pty.sendInput(t.pid, new TextEncoder().encode('exit 7\n'));
    const res = await t.wait().catch((e) => e);
    assert.equal(res.exitCode, 7);
  } finally {
    await sbx.kill();
  }
});

test('pty needs the terminal capability of the template', async () => {
  const sbx = await Sandbox.create('noterm');
  try {
    await assert.rejects(sbx.pty.create({ cols: 80, rows: 24, onData: () => {} }), E.SandboxError);
    assert.equal((await sbx.commands.run('echo shell-ok')).stdout, 'shell-ok\n');
  } finally {
    await sbx.kill();
  }
});
