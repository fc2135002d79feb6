// lib.mjs - start a real abxd on a free loopback port with a temporary state
// directory, and talk to it with real HTTP (fetch) and the real abx CLI.
//
// ABX_BIN_DIR selects the binaries (default: build/src of this checkout), so
// the same tests run against the gcc build and the sanitizer build.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import net from 'node:net';

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, '..', '..');
export const binDir = process.env.ABX_BIN_DIR ? resolve(process.env.ABX_BIN_DIR) : join(repo, 'build', 'src');
export const abxdBin = join(binDir, 'abxd');
export const abxBin = join(binDir, 'cli', 'abx');
export const isRoot = process.getuid && process.getuid() === 0;

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// Waits for something to happen instead of sleeping for a guess of how long
// it takes: calls pred (sync or async) every `every` ms until it returns a
// truthy value or `ms` have passed, and returns its last value. It never
// throws on the deadline: the assertion after it says what was expected.
// Where the time is itself what a test checks (a sandbox gone by its
// timeout, processes dead after a kill), ms is the bound the test allows;
// where the test only needs a precondition (a process started), the
// default leaves slow builds (ASan) room.
export async function until(pred, ms = 20000, every = 20) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v || Date.now() >= deadline) return v;
    await sleep(every);
  }
}

// Starts abxd. opts.env adds variables; opts.args adds flags; opts.wrap is a
// command that runs abxd (e.g. ['prlimit', '--nofile=256']).
export async function startAbxd(opts = {}) {
  const stateDir = opts.stateDir ?? mkdtempSync(join(tmpdir(), 'abx-it-'));
  const key = opts.key ?? 'k_' + randomBytes(16).toString('hex');
  const env = {
    PATH: process.env.PATH,
    ABX_API_KEY: key,
    ABX_POOL: '1',
    // The sandboxes' disk image (<state>/disk.img, allocated in full): small.
    ABX_DISK_POOL_MB: '512',
    ABX_LOG_LEVEL: 'info',
    ASAN_OPTIONS: process.env.ASAN_OPTIONS ?? 'detect_leaks=1',
    UBSAN_OPTIONS: process.env.UBSAN_OPTIONS ?? 'print_stacktrace=1:halt_on_error=1',
    // ABX_TEST_PRIVSEP=1 runs every abxd of a suite split (docs/security.md).
    ...(process.env.ABX_TEST_PRIVSEP ? { ABX_PRIVSEP: process.env.ABX_TEST_PRIVSEP } : {}),
    ...opts.env,
  };
  if (opts.noKey) delete env.ABX_API_KEY;
  const args = ['--listen', '127.0.0.1:0', '--state-dir', stateDir, ...(opts.args ?? [])];
  const wrap = opts.wrap ?? [];
  const proc = wrap.length
    ? spawn(wrap[0], [...wrap.slice(1), abxdBin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(abxdBin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => (log += d));
  proc.stderr.on('data', (d) => (log += d));
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r({ code, signal })));
  const deadline = Date.now() + 30000;
  let port = 0;
  while (!port) {
    const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) port = Number(m[1]);
    else if (proc.exitCode !== null || Date.now() > deadline) {
      // What it made goes, as stop() would do.
      if (proc.exitCode === null) proc.kill('SIGKILL');
      await exited;
      unmountDisk(stateDir);
      if (!opts.stateDir) rmSync(stateDir, { recursive: true, force: true });
      throw new Error(`abxd did not start:\n${log}`);
    }
    else await sleep(20);
  }
  const d = {
    url: `http://127.0.0.1:${port}`,
    port,
    key,
    stateDir,
    proc,
    get log() {
      return log;
    },
    exited,
    async stop({ keepState = false } = {}) {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), 20000);
        await exited;
        clearTimeout(t);
      }
      // An abxd that did not end cleanly leaves its disk mounted.
      if (!keepState) unmountDisk(stateDir);
      if (!keepState && !opts.stateDir) rmSync(stateDir, { recursive: true, force: true });
      const res = await exited;
      // Sanitizer reports end up in the log; a test run must not have any.
      if (/ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:/.test(log))
        throw new Error(`sanitizer report in abxd's log:\n${log}`);
      return res;
    },
  };
  return d;
}

// The pid of the process that serves d's requests: abxd itself, or when
// split (ABX_PRIVSEP=1) its network process, the child started with
// --role=net; 0 if that is not running.
export function servingPid(d) {
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== d.proc.pid) continue;
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0')[1] === '--role=net') return Number(e);
    } catch {
      // gone meanwhile
    }
  }
  return readFileSync(`/proc/${d.proc.pid}/cmdline`, 'utf8').includes('--role=net') ? 0 : d.proc.pid;
}

// Whether path is a mount point (of this mount namespace).
export function isMounted(path) {
  const mi = readFileSync('/proc/self/mountinfo', 'utf8');
  return mi.split('\n').some((l) => l.split(' ')[4] === path);
}

// Unmounts the sandboxes' disk of a state directory if it is still mounted
// (abxd unmounts it when it exits cleanly); the loop device goes with it.
export function unmountDisk(stateDir) {
  const p = join(stateDir, 'sandboxes');
  for (let i = 0; i < 4 && existsSync(p) && isMounted(p); i++) spawnSync('umount', ['-l', p]);
}

// fetch with the key; returns {status, headers, text, json}.
export async function api(d, method, path, body, opts = {}) {
  const headers = { ...(opts.headers ?? {}) };
  if (opts.auth !== false) headers.authorization = `Bearer ${opts.key ?? d.key}`;
  let payload;
  if (body !== undefined) {
    if (typeof body === 'string' || body instanceof Uint8Array || Buffer.isBuffer(body)) payload = body;
    else {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
  }
  const res = await fetch(d.url + path, { method, headers, body: payload });
  const buf = Buffer.from(await res.arrayBuffer());
  const text = buf.toString('utf8');
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json, buf };
}

export async function createSandbox(d, body = {}) {
  const r = await api(d, 'POST', '/v1/sandboxes', body);
  if (r.status !== 201) throw new Error(`create failed: ${r.status} ${r.text}`);
  return r.json;
}

export async function killSandbox(d, id) {
  const r = await api(d, 'DELETE', `/v1/sandboxes/${id}`);
  if (r.status !== 204 && r.status !== 404) throw new Error(`delete failed: ${r.status} ${r.text}`);
}

// Parses an NDJSON exec/output body into {pid, stdout, stderr, result, lines}.
export function parseNdjson(text) {
  const out = { pid: undefined, stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), result: undefined, lines: [] };
  for (const line of text.split('\n')) {
    if (!line) continue;
    const o = JSON.parse(line);
    out.lines.push(o);
    if (o.pid !== undefined && o.exit_code === undefined && out.pid === undefined) out.pid = o.pid;
    if (o.stdout !== undefined) out.stdout = Buffer.concat([out.stdout, Buffer.from(o.stdout, 'base64')]);
    if (o.stderr !== undefined) out.stderr = Buffer.concat([out.stderr, Buffer.from(o.stderr, 'base64')]);
    if (o.exit_code !== undefined || o.error !== undefined) out.result = o;
  }
  return out;
}

// Runs argv in the sandbox (foreground) and returns parsed output plus
// exit_code; opts are merged into the exec body. Throws on a non-200.
export async function exec(d, id, argv, opts = {}) {
  const r = await api(d, 'POST', `/v1/sandboxes/${id}/exec`, { argv, ...opts });
  if (r.status !== 200) {
    const e = new Error(`exec failed: ${r.status} ${r.text}`);
    e.status = r.status;
    e.json = r.json;
    throw e;
  }
  const p = parseNdjson(r.text);
  return {
    ...p,
    code: p.result?.exit_code,
    out: p.stdout.toString('utf8'),
    err: p.stderr.toString('utf8'),
  };
}

export async function sh(d, id, script, opts = {}) {
  return exec(d, id, ['/bin/sh', '-c', script], opts);
}

// Sends raw bytes over TCP and returns the whole response text.
export function rawHttp(d, bytes, { timeoutMs = 5000 } = {}) {
  return new Promise((resolveP, reject) => {
    const s = net.connect(d.port, '127.0.0.1');
    let data = '';
    const t = setTimeout(() => {
      s.destroy();
      resolveP(data);
    }, timeoutMs);
    s.on('data', (c) => (data += c.toString('latin1')));
    s.on('end', () => {
      clearTimeout(t);
      resolveP(data);
    });
    s.on('error', (e) => {
      clearTimeout(t);
      if (data) resolveP(data);
      else reject(e);
    });
    s.write(bytes);
  });
}

// Runs the abx CLI with ABX_URL/ABX_API_KEY pointing at d.
export function abx(d, args, opts = {}) {
  const r = spawnSync(abxBin, args, {
    env: { PATH: process.env.PATH, ABX_URL: d.url, ABX_API_KEY: d.key, ...(opts.env ?? {}) },
    input: opts.input,
    encoding: opts.encoding ?? 'utf8',
    timeout: opts.timeoutMs ?? 60000,
    maxBuffer: 1 << 30,
  });
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

export function hostPids() {
  return spawnSync('ps', ['-e', '-o', 'pid=,uid=,args='], { encoding: 'utf8' }).stdout;
}

export function readText(p) {
  return existsSync(p) ? readFileSync(p, 'utf8') : null;
}
