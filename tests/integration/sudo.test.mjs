// sudo.test.mjs - /usr/bin/sudo in a sandbox (abx-sudo, served by init).
//
// "user" runs commands as sandbox root without a password; the command keeps
// no_new_privs and the seccomp filter, only this sandbox's init serves it,
// and only uid 0 and 1000 may ask. Needs root (ns isolation).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { startAbxd, createSandbox, sh, exec, isRoot } from './lib.mjs';

const skip = (!isRoot && 'needs root') || (!hasHostSudo() && 'the host has no /usr/bin/sudo to cover');

function hasHostSudo() {
  try {
    return statSync('/usr/bin/sudo').isFile();
  } catch {
    return false;
  }
}

// A raw client of init's sudo socket, for hostile input (python3 is on the image).
const rawClient = String.raw`
import os, socket, struct, sys
def pkt(t, body=b''):
    return struct.pack('<II', t, 8 + len(body)) + body
def s(x):
    x = x.encode()
    return struct.pack('<I', len(x)) + x + b'\0'
def ask(data, fds=None):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect('\0abx-sudo')
    if fds is None:
        c.send(data)
    else:
        socket.send_fds(c, [data], fds)
    r = c.recv(4096)
    c.close()
    if len(r) < 12:
        return 'eof'
    t, n, e = struct.unpack('<III', r[:12])
    return '%d %d %s' % (t, e, r[16:-1].decode())
run = struct.pack('<I', 1) + s('/') + struct.pack('<II', 1, 0) + s('true')
print(ask(b'garbage'))
print(ask(pkt(1, run)))                       # no descriptors
print(ask(pkt(1, run[:-3]), [0, 1, 2]))       # truncated
print(ask(pkt(1, struct.pack('<I', 2) + run[4:]), [0, 1, 2]))  # wrong version
print(ask(pkt(2, struct.pack('<I', 15))))     # a signal before any command
print(ask(pkt(1, struct.pack('<I', 1) + s('rel') + run[13:]), [0, 1, 2]))  # relative cwd
print(ask(pkt(1, struct.pack('<I', 1) + s('/') + struct.pack('<II', 9000, 0)), [0, 1, 2]))
`;

describe('sudo', { skip }, () => {
  let d, a, b;
  before(async () => {
    d = await startAbxd({ env: { ABX_POOL: '0' } });
    a = (await createSandbox(d, { pids: 512 })).id;
    b = (await createSandbox(d)).id;
  });
  after(async () => {
    if (d) await d.stop();
  });

  test('user becomes root', async () => {
    let r = await sh(d, a, 'id -u; sudo id -u; sudo id -g; sudo id -G; sudo whoami');
    assert.equal(r.code, 0, r.err);
    assert.equal(r.out, '1000\n0\n0\n0\nroot\n');
    r = await exec(d, a, ['sudo', '-n', '--', 'id', '-un']);
    assert.equal(r.out, 'root\n');
    r = await exec(d, a, ['sudo', '-u', 'root', 'id', '-u']);
    assert.equal(r.out, '0\n');
  });

  test('the command runs in the caller\'s directory; -i in /root with a login shell', async () => {
    let r = await sh(d, a, 'cd /tmp && sudo pwd');
    assert.equal(r.out, '/tmp\n', r.err);
    r = await exec(d, a, ['sudo', '-i', 'pwd']);
    assert.equal(r.out, '/root\n', r.err);
    r = await exec(d, a, ['sudo', '-i', 'whoami']);
    assert.equal(r.out, 'root\n', r.err);
    // arguments are escaped for root's shell, as sudo does ($ is left alone)
    r = await exec(d, a, ['sudo', '-i', 'printf', '%s|', 'a  b', "it's", '$HOME']);
    assert.equal(r.out, "a  b|it's|/root|", r.err);
    r = await sh(d, a, 'echo "id -u; echo \\$HOME" | sudo -s');
    assert.equal(r.out, '0\n/root\n', r.err);
    r = await exec(d, a, ['sudo', '-D', '/etc', 'pwd']);
    assert.equal(r.out, '/etc\n', r.err);
  });

  test('root owns what the command writes', async () => {
    let r = await sh(d, a, "sudo sh -c 'echo x > /root/f'; cat /root/f");
    assert.match(r.err, /Permission denied/);
    r = await sh(d, a, 'cat /root/f', { user: 'root' });
    assert.equal(r.out, 'x\n');
    r = await sh(d, a, 'stat -c %u:%g /root/f', { user: 'root' });
    assert.equal(r.out, '0:0\n');
  });

  test('exit codes, stdin, stdout and stderr pass through', async () => {
    let r = await exec(d, a, ['sudo', 'sh', '-c', 'exit 5']);
    assert.equal(r.code, 5);
    r = await sh(d, a, 'echo hi | sudo cat');
    assert.equal(r.out, 'hi\n');
    r = await exec(d, a, ['sudo', 'cat'], { stdin: Buffer.from('from stdin').toString('base64') });
    assert.equal(r.out, 'from stdin');
    r = await exec(d, a, ['sudo', 'sh', '-c', 'echo out; echo err >&2']);
    assert.equal(r.out, 'out\n');
    assert.equal(r.err, 'err\n');
    r = await sh(d, a, "sudo sh -c 'kill -TERM $$'; echo rc=$?");
    assert.equal(r.out, 'rc=143\n');
    r = await exec(d, a, ['sudo', 'no-such-command']);
    assert.equal(r.code, 1);
    assert.match(r.err, /sudo: no-such-command: command not found/);
  });

  test('argv and env up to 256 KiB', async () => {
    const r = await sh(
      d,
      a,
      `a=$(head -c 100000 /dev/zero | tr '\\0' a)
       sudo sh -c 'echo $#' - $a $a; sudo true $a $a $a; echo rc=$?`,
    );
    assert.equal(r.out, '2\nrc=1\n', r.err);
    assert.match(r.err, /sudo: true: argument list too long/);
  });

  test('other users and unknown options are refused', async () => {
    let r = await exec(d, a, ['sudo', '-u', 'nobody', 'true']);
    assert.equal(r.code, 1);
    assert.match(r.err, /only root is available in this sandbox/);
    r = await exec(d, a, ['sudo', '-X', 'true']);
    assert.equal(r.code, 1);
    assert.match(r.err, /invalid option/);
    assert.match(r.err, /usage: sudo/);
    r = await exec(d, a, ['sudo']);
    assert.equal(r.code, 1);
    r = await exec(d, a, ['sudo', '-l']);
    assert.equal(r.code, 0);
    assert.match(r.out, /\(root\) NOPASSWD: ALL/);
  });

  test('environment: reset by default, kept with -E, SUDO_* set', async () => {
    let r = await exec(d, a, ['sudo', 'env'], { env: { FOO: 'bar', TERM: 'xterm' } });
    const env = Object.fromEntries(r.out.trim().split('\n').map((l) => [l.split('=')[0], l.slice(l.indexOf('=') + 1)]));
    assert.equal(env.FOO, undefined);
    assert.equal(env.TERM, 'xterm');
    assert.equal(env.HOME, '/root');
    assert.equal(env.USER, 'root');
    assert.equal(env.LOGNAME, 'root');
    assert.equal(env.SUDO_USER, 'user');
    assert.equal(env.SUDO_UID, '1000');
    assert.equal(env.SUDO_GID, '1000');
    assert.match(env.SUDO_COMMAND, /^\/usr\/bin\/env$/);
    assert.match(env.PATH, /\/usr\/sbin/);
    r = await exec(d, a, ['sudo', '-E', 'sh', '-c', 'echo $FOO'], { env: { FOO: 'bar' } });
    assert.equal(r.out, 'bar\n');
    r = await exec(d, a, ['sudo', 'FOO=baz', 'sh', '-c', 'echo $FOO']);
    assert.equal(r.out, 'baz\n');
  });

  test('sudo keeps no_new_privs and seccomp and cannot escape', async () => {
    let r = await exec(d, a, ['sudo', 'grep', '-E', '^(NoNewPrivs|Seccomp):', '/proc/self/status']);
    assert.equal(r.out, 'NoNewPrivs:\t1\nSeccomp:\t2\n');
    r = await exec(d, a, ['sudo', 'mount', '-t', 'tmpfs', 'x', '/mnt']);
    assert.notEqual(r.code, 0);
    r = await sh(d, a, 'sudo cat /proc/1/environ; sudo cat /proc/1/comm');
    assert.doesNotMatch(r.out + r.err, /ABX_API_KEY|PATH=/);
    assert.match(r.out, /abx-init/);
    // our sudo is in place, read-only and not setuid; the host's is untouched
    r = await sh(d, a, 'stat -c %a /usr/bin/sudo; sudo sh -c ": > /usr/bin/sudo" 2>&1; echo rc=$?');
    assert.match(r.out, /^555\n.*Read-only file system\nrc=[1-9]/s);
    assert.ok(statSync('/usr/bin/sudo').mode & 0o4000, 'host sudo keeps its setuid bit');
  });

  test('only this sandbox\'s init serves it', async () => {
    let r = await sh(d, b, "sudo sh -c 'echo b > /root/who'");
    assert.equal(r.code, 0, r.err);
    r = await sh(d, a, 'cat /root/who', { user: 'root' });
    assert.notEqual(r.code, 0);
    // the abstract socket lives in each sandbox's network namespace, not the host's
    r = await sh(d, a, 'grep -c "@abx-sudo" /proc/net/unix');
    assert.equal(r.out, '1\n');
    assert.doesNotMatch(readFileSync('/proc/net/unix', 'utf8'), /@abx-sudo/);
  });

  test('uids other than root and user are refused', async () => {
    const r = await exec(d, a, ['setpriv', '--reuid=1001', '--regid=1001', '--clear-groups', 'sudo', 'true'], {
      user: 'root',
    });
    assert.equal(r.code, 1);
    assert.match(r.err, /uid 1001 is not allowed to use sudo/);
    const r2 = await exec(d, a, ['sudo', 'id', '-u'], { user: 'root' });
    assert.equal(r2.out, '0\n');
  });

  test('hostile messages get an error and leave init serving', async () => {
    const r = await exec(d, a, ['python3', '-c', rawClient]);
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(r.out.trim().split('\n'), [
      `102 ${71} unexpected message`, // EPROTO
      '102 71 expected stdin, stdout and stderr with the command',
      '102 71 malformed request',
      '102 71 malformed request',
      '102 71 unexpected message',
      '102 71 malformed request',
      '102 71 malformed request',
    ]);
    const ok = await exec(d, a, ['sudo', 'true']);
    assert.equal(ok.code, 0, ok.err);
  });

  test('signals reach the command; killing sudo kills the command', async () => {
    let r = await sh(
      d,
      a,
      `sudo sh -c 'trap "echo got TERM; exit 7" TERM; sleep 30 & wait' & p=$!
       sleep 0.5; kill -TERM $p; wait $p; echo rc=$?`,
    );
    assert.equal(r.out, 'got TERM\nrc=7\n', r.err);
    r = await sh(
      d,
      a,
      `sudo sh -c 'echo $$ > /tmp/cmd.pid; exec sleep 30' & p=$!
       sleep 0.5; kill -KILL $p; sleep 0.5
       test -e /proc/$(cat /tmp/cmd.pid) && echo alive || echo gone`,
    );
    assert.equal(r.out, 'gone\n', r.err);
  });

  test('at most 64 sudo commands at once', async () => {
    const r = await sh(
      d,
      a,
      `for i in $(seq 70); do sudo sleep 2 2>>/tmp/busy.err & done; wait
       grep -c "too many sudo commands" /tmp/busy.err; sudo true && echo ok`,
    );
    const [busy, ok] = r.out.trim().split('\n');
    assert.ok(Number(busy) >= 6, `refused ${busy} of 70`);
    assert.equal(ok, 'ok');
    assert.doesNotMatch(d.log, /broke protocol/);
  });
});
