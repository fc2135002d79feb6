// The real E2B SDK 2.51 drives abxd's processes: commands.run in the
// foreground and background, stdin, kill, list, connect after a client
// disconnect, timeouts, users, cwd and env, and the error classes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, sleep, until, envd } from './lib.mjs';

let d, Sandbox, E;
before(async () => {
  const s = await setup();
  d = s.d;
  E = s.sdk;
  Sandbox = s.sdk.Sandbox;
});
after(async () => d && (await d.stop()));

test('commands.run: output, exit code, user, cwd, env, envVars', async () => {
  const sbx = await Sandbox.create({ envs: { SBX_WIDE: 'wide' } });
  try {
    const r = await sbx.commands.run('echo out; echo err >&2; id -un; pwd; echo $SBX_WIDE $MINE', {
      envs: { MINE: 'mine' },
    });
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, 'out\nuser\n/home/user\nwide mine\n');
    assert.equal(r.stderr, 'err\n');

    const root = await sbx.commands.run('id -un; pwd; echo $HOME', { user: 'root' });
    assert.equal(root.stdout, 'root\n/root\n/root\n');

    const t = await sbx.commands.run('pwd', { cwd: '/tmp' });
    assert.equal(t.stdout, '/tmp\n');
    const rel = await sbx.commands.run('mkdir -p sub && cd sub && pwd');
    assert.equal(rel.stdout, '/home/user/sub\n');
    const tilde = await sbx.commands.run('pwd', { cwd: '~/sub' });
    assert.equal(tilde.stdout, '/home/user/sub\n');

    const chunks = [];
    await sbx.commands.run('for i in 1 2 3; do echo $i; done', { onStdout: (s) => chunks.push(s) });
    assert.equal(chunks.join(''), '1\n2\n3\n');

    await assert.rejects(sbx.commands.run('exit 3'), (e) => {
      assert.ok(e instanceof E.CommandExitError);
      assert.equal(e.exitCode, 3);
      assert.equal(e.error, 'exit status 3');
      return true;
    });
    await assert.rejects(sbx.commands.run('pwd', { cwd: '/no/such/dir' }), (e) => {
      assert.ok(e instanceof E.InvalidArgumentError, e.constructor.name);
      assert.match(e.message, /cwd '\/no\/such\/dir' does not exist/);
      return true;
    });
    await assert.rejects(sbx.commands.run('true', { user: 'mallory' }), E.AuthenticationError);
    // user has passwordless sudo to sandbox root, still under no_new_privs
    const su = await sbx.commands.run('sudo id -un; sudo grep NoNewPrivs /proc/self/status; which git curl tput python');
    assert.match(su.stdout, /^root\nNoNewPrivs:\t1\n.*git\n.*curl\n.*tput\n.*python\n$/s);
    // Large output arrives whole and in order.
    const big = await sbx.commands.run('head -c 3000000 /dev/zero | tr "\\0" a');
    assert.equal(big.stdout.length, 3000000);
  } finally {
    await sbx.kill();
  }
});

test('background commands: list, stdin, kill, a disconnect keeps the process, connect', async () => {
  const sbx = await Sandbox.create();
  try {
    const h = await sbx.commands.run('sleep 60', { background: true });
    const list = await sbx.commands.list();
    const mine = list.find((p) => p.pid === h.pid);
    assert.ok(mine, JSON.stringify(list));
    assert.equal(mine.cmd, '/bin/bash');
    assert.deepEqual(mine.args, ['-l', '-c', 'sleep 60']);
    // The pid is the one the sandbox sees.
    const k0 = await sbx.commands.run(`kill -0 ${h.pid} && echo alive`);
    assert.equal(k0.stdout, 'alive\n');
    assert.equal(await sbx.commands.kill(h.pid), true);
    await assert.rejects(h.wait(), (e) => e instanceof E.CommandExitError && e.exitCode === -1 && /signal: killed/.test(e.message));
    assert.equal(await sbx.commands.kill(h.pid), false);
    assert.equal(await sbx.commands.kill(999999), false);

    const cat = await sbx.commands.run('cat', { background: true, stdin: true });
    await sbx.commands.sendStdin(cat.pid, 'one ');
    await sbx.commands.sendStdin(cat.pid, '');
    await cat.sendStdin('two\n');
    await sbx.commands.closeStdin(cat.pid);
    const cr = await cat.wait();
    assert.equal(cr.stdout, 'one two\n');
    const sl = await sbx.commands.run('sleep 30', { background: true, stdin: true });
    await sbx.commands.closeStdin(sl.pid);
    await sbx.commands.closeStdin(sl.pid); // idempotent
    await assert.rejects(sbx.commands.sendStdin(sl.pid, 'late'), E.SandboxError);
    await sl.kill();
    await assert.rejects(sbx.commands.sendStdin(424242, 'x'), E.NotFoundError);

    // A client that goes away leaves the process running; connect sees new output.
    const slow = await sbx.commands.run('for i in $(seq 1 30); do echo tick$i; sleep 0.1; done', {
      background: true,
    });
    await slow.disconnect();
    // A sleep on purpose: abxd must see the client go before we check that
    // the process stayed (nothing says when it has).
    await sleep(300);
    assert.ok((await sbx.commands.list()).some((p) => p.pid === slow.pid));
    const got = [];
    const again = await sbx.commands.connect(slow.pid, { onStdout: (s) => got.push(s) });
    const res = await again.wait();
    assert.equal(res.exitCode, 0);
    assert.match(got.join(''), /tick30\n$/);
    assert.doesNotMatch(got.join(''), /^tick1\n/); // only new output
    await assert.rejects(sbx.commands.connect(777777), E.NotFoundError);
  } finally {
    await sbx.kill();
  }
});

test('timeoutMs is the process deadline; timeoutMs 0 means none', async () => {
  const sbx = await Sandbox.create();
  try {
    const t0 = Date.now();
    await assert.rejects(sbx.commands.run('sleep 30', { timeoutMs: 1000 }), E.TimeoutError);
    assert.ok(Date.now() - t0 < 10000);
    // Gone within 300 ms of the TimeoutError.
    await until(async () => !(await sbx.commands.list()).some((p) => p.args.includes('sleep 30')), 300);
    const left = await sbx.commands.list();
    assert.ok(!left.some((p) => p.args.includes('sleep 30')), JSON.stringify(left));
    const r = await sbx.commands.run('sleep 1; echo ok', { timeoutMs: 0 });
    assert.equal(r.stdout, 'ok\n');
  } finally {
    await sbx.kill();
  }
});

test('killing a sandbox cuts its streams: TimeoutError, then isRunning false', async () => {
  const sbx = await Sandbox.create();
  const h = await sbx.commands.run('sleep 60', { background: true });
  const waiting = h.wait().then(
    () => null,
    (e) => e,
  );
  // Time for wait()'s stream to be open before the kill cuts it (the SDK
  // does not say when it is).
  await sleep(200);
  assert.equal(await Sandbox.kill(sbx.sandboxId), true);
  const err = await waiting;
  assert.ok(err instanceof E.TimeoutError, String(err));
  assert.match(err.message, /killed or reached its end of life/);
  assert.equal(await sbx.isRunning(), false);
  await assert.rejects(sbx.commands.run('true'), (e) => e instanceof E.SandboxError);
});

test('envd auth: a token opens its own sandbox only', async () => {
  const a = await Sandbox.create();
  const b = await Sandbox.create();
  try {
    const body = JSON.stringify({});
    const list = (sbx, token) =>
      envd(d, sbx, 'POST', '/process.Process/List', {
        headers: { 'Content-Type': 'application/json', 'X-Access-Token': token },
        body,
      });
    assert.equal((await list(a, a.envdAccessToken)).status, 200);
    const r = await list(a, b.envdAccessToken);
    assert.equal(r.status, 401);
    assert.equal((await r.json()).code, 401);
    assert.equal((await list(a, '')).status, 401);
    // /health needs no token; an unknown sandbox is 502 JSON.
    const h = await fetch(d.url + '/health', { headers: { 'E2b-Sandbox-Id': a.sandboxId } });
    assert.equal(h.status, 204);
    const g = await fetch(d.url + '/health', { headers: { 'E2b-Sandbox-Id': 'nosuchsandbox' } });
    assert.equal(g.status, 502);
    assert.deepEqual(await g.json(), {
      code: 502,
      message: 'The sandbox was not found',
      sandboxId: 'nosuchsandbox',
    });
    // Hostile RPC bodies: a clear Connect error, the sandbox unharmed.
    for (const bad of ['{', '[]', '{"process":{"cmd":7}}', '\u0000\u0000']) {
      const s = await envd(d, a, 'POST', '/process.Process/SendSignal', {
        headers: { 'Content-Type': 'application/json' },
        body: bad,
      });
      assert.equal(s.status, 400, bad);
      assert.equal((await s.json()).code, 'invalid_argument');
    }
    const st = await envd(d, a, 'POST', '/process.Process/Start', {
      headers: { 'Content-Type': 'application/connect+json' },
      body: Buffer.from([0, 0, 0, 0, 99, 1]),
    });
    assert.equal(st.status, 200);
    const frame = Buffer.from(await st.arrayBuffer());
    assert.equal(frame[0], 2);
    assert.equal(JSON.parse(frame.subarray(5)).error.code, 'invalid_argument');
    const un = await envd(d, a, 'POST', '/process.Process/Nope', {
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
    });
    assert.equal((await un.json()).code, 'unimplemented');
    assert.equal((await a.commands.run('echo still')).stdout, 'still\n');
  } finally {
    await a.kill();
    await b.kill();
  }
});

test('20 sandboxes used concurrently from one SDK process', async () => {
  const boxes = await Promise.all(Array.from({ length: 20 }, () => Sandbox.create()));
  try {
    const outs = await Promise.all(
      boxes.map((b, i) => b.commands.run(`echo ${i} $(hostname)`).then((r) => r.stdout)),
    );
    outs.forEach((o, i) => assert.match(o, new RegExp(`^${i} `)));
    const ids = new Set(boxes.map((b) => b.sandboxId));
    assert.equal(ids.size, 20);
  } finally {
    await Promise.all(boxes.map((b) => b.kill()));
  }
});

// StreamInput: the JS SDK never sends it, other clients may.
function envelope(obj, flags = 0) {
  const p = Buffer.from(JSON.stringify(obj));
  const h = Buffer.alloc(5);
  h[0] = flags;
  h.writeUInt32BE(p.length, 1);
  return Buffer.concat([h, p]);
}

function frames(buf) {
  const out = [];
  for (let i = 0; i + 5 <= buf.length; ) {
    const n = buf.readUInt32BE(i + 1);
    out.push({ flags: buf[i], msg: JSON.parse(buf.subarray(i + 5, i + 5 + n)) });
    i += 5 + n;
  }
  return out;
}

test('StreamInput feeds a process stdin from a client stream', async () => {
  const sbx = await Sandbox.create();
  try {
    const cat = await sbx.commands.run('cat', { background: true, stdin: true });
    const b64 = (s) => Buffer.from(s).toString('base64');
    const body = Buffer.concat([
      envelope({ start: { process: { pid: cat.pid } } }),
      envelope({ data: { input: { stdin: b64('from ') } } }),
      envelope({ keepalive: {} }),
      envelope({ data: { input: { stdin: b64('stream\n') } } }),
    ]);
    const r = await envd(d, sbx, 'POST', '/process.Process/StreamInput', {
      headers: { 'Content-Type': 'application/connect+json' },
      body,
    });
    assert.equal(r.status, 200);
    const f = frames(Buffer.from(await r.arrayBuffer()));
    assert.deepEqual(f, [
      { flags: 0, msg: {} },
      { flags: 2, msg: {} },
    ]);
    await sbx.commands.closeStdin(cat.pid);
    assert.equal((await cat.wait()).stdout, 'from stream\n');
    // Errors come in the end-stream frame.
    for (const [bad, code] of [
      [envelope({ data: { input: { stdin: 'eA==' } } }), 'invalid_argument'],
      [envelope({ start: { process: { pid: 999999 } } }), 'not_found'],
      [Buffer.from([0, 0, 0, 9, 9, 1]), 'invalid_argument'],
      [Buffer.from([1, 0, 0, 0, 2, 123, 125]), 'invalid_argument'],
    ]) {
      const e = await envd(d, sbx, 'POST', '/process.Process/StreamInput', {
        headers: { 'Content-Type': 'application/connect+json' },
        body: bad,
      });
      const fr = frames(Buffer.from(await e.arrayBuffer()));
      assert.equal(fr.at(-1).flags, 2);
      assert.equal(fr.at(-1).msg.error.code, code);
    }
  } finally {
    await sbx.kill();
  }
});
