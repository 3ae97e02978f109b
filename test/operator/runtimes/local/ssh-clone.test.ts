// A build clones over SSH with a git integration's private key: a real OpenSSH server (Debian's openssh-server,
// started here on a free 127.0.0.1 port with its own host key and authorized_keys) serves a bare copy of
// examples/agent. The local runtime (sandboxed when this machine can) clones with the key through GIT_SSH_COMMAND and
// StrictHostKeyChecking=yes: the right known_hosts builds; a host key that does not match fails the build with a
// one-line reason; the key is in no log line, status, or file left behind.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { LocalRuntime, PACKAGE_DIR } from '../../../../src/operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees } from '../../../../src/operator/runtimes/local/sandbox.ts';
import type { GitCredential } from '../../../../src/git/credentials.ts';
import type { BuildSpec, LogType, RevisionLogSink, RevisionRef } from '../../../../src/operator/runtimes/types.ts';
import { needsTool } from '../../../support/system-tools.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';

const SSHD = '/usr/sbin/sshd';
const HAVE_SSHD = needsTool('sshd', 'test/operator/runtimes/local/ssh-clone.test.ts');

class MemoryLogs implements RevisionLogSink {
  lines: string[] = [];
  async append(_ref: RevisionRef, _type: LogType, lines: string[]) {
    this.lines.push(...lines);
  }
}

let tmp: string;
let repo: ExampleRepo;
let sshd: ChildProcess;
let sshdOutput = '';
let port: number;
let clientKey: string;
let knownHosts: string;
let wrongKnownHosts: string;
let logs: MemoryLogs;
let runtime: LocalRuntime;
let credential: GitCredential;

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return p;
}

async function until(spec: BuildSpec) {
  for (;;) {
    const s = await runtime.build(spec);
    if (s.phase !== 'Running') return s;
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  if (!HAVE_SSHD) return;
  tmp = mkdtempSync(join(tmpdir(), 'ap-ssh-clone-'));
  repo = makeExampleRepo(tmp);
  const bare = join(tmp, 'served', 'agent.git');
  execFileSync('git', ['clone', '--quiet', '--bare', repo.path, bare]);
  const keygen = (file: string) => execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', file]);
  keygen(join(tmp, 'host_key'));
  keygen(join(tmp, 'other_host_key'));
  keygen(join(tmp, 'client_key'));
  writeFileSync(join(tmp, 'authorized_keys'), readFileSync(join(tmp, 'client_key.pub')), { mode: 0o600 });
  port = await freePort();
  writeFileSync(
    join(tmp, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(tmp, 'host_key')}`,
      `AuthorizedKeysFile ${join(tmp, 'authorized_keys')}`,
      `PidFile ${join(tmp, 'sshd.pid')}`,
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PubkeyAuthentication yes',
      'PermitRootLogin prohibit-password',
      'StrictModes no',
      'UsePAM no',
      `AllowUsers ${userInfo().username}`,
      '',
    ].join('\n'),
  );
  // As root, privilege separation needs its empty folder (made by the package's service, which is not running
  // here); an sshd run by another user has no privilege separation, needs no such folder and could not make it.
  if (process.getuid?.() === 0 && !existsSync('/run/sshd')) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  sshd = spawn(SSHD, ['-D', '-e', '-f', join(tmp, 'sshd_config')], { stdio: ['ignore', 'pipe', 'pipe'] });
  sshd.stderr!.on('data', (d: Buffer) => (sshdOutput += d.toString()));
  // Ready when it accepts a connection and says SSH.
  for (let i = 0; ; i++) {
    const banner = await new Promise<string>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('data', (d: Buffer) => {
        resolve(d.toString());
        s.destroy();
      });
      s.once('error', () => resolve(''));
    });
    if (banner.startsWith('SSH-')) break;
    if (i > 100) throw new Error(`sshd did not start: ${sshdOutput}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const hostPub = readFileSync(join(tmp, 'host_key.pub'), 'utf8').split(' ').slice(0, 2).join(' ');
  const otherPub = readFileSync(join(tmp, 'other_host_key.pub'), 'utf8').split(' ').slice(0, 2).join(' ');
  knownHosts = `[127.0.0.1]:${port} ${hostPub}\n`;
  wrongKnownHosts = `[127.0.0.1]:${port} ${otherPub}\n`;
  clientKey = readFileSync(join(tmp, 'client_key'), 'utf8');
  credential = { host: `127.0.0.1:${port}`, sshKey: clientKey, knownHosts };

  logs = new MemoryLogs();
  const { sandbox } = await detectSandbox('auto', { hidden: [join(tmp, 'data')], shared: sharedTrees(PACKAGE_DIR) });
  runtime = new LocalRuntime({
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs,
    logger: silentLogger(),
    sandbox,
    gitCredential: async (tenant, id) => (tenant === 't1' && id === 'int-ssh' ? credential : undefined),
  });
}, 60_000);

afterAll(async () => {
  await runtime?.shutdown();
  if (sshd?.pid) sshd.kill('SIGTERM');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('git integration with an SSH key (real sshd)', () => {
  const spec = (revision: string): BuildSpec => ({
    namespace: 'default',
    deployment: 'ssh',
    deploymentId: 'dep-ssh',
    revision,
    repoUrl: `ssh://${userInfo().username}@127.0.0.1:${port}${join(tmp, 'served', 'agent.git')}`,
    repoRef: 'main',
    graphConfigPath: 'langgraph.json',
    tenantId: 't1',
    integrationId: 'int-ssh',
  });

  it('clones with the key when the host key is known, and refuses a host key that is not', async () => {
    const ok = await until(spec('ssh-r1'));
    expect(ok, logs.lines.join('\n')).toEqual({ phase: 'Succeeded', commitSha: repo.sha('main') });

    credential = { ...credential, knownHosts: wrongKnownHosts };
    const refused = await until(spec('ssh-r2'));
    expect(refused.phase).toBe('Failed');
    const message = refused.phase === 'Failed' ? refused.message : '';
    expect(message).toMatch(/exited with code 128/);
    expect(message).not.toContain('\n');
    expect(logs.lines.join('\n')).toMatch(/Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/);

    // Without a credential the server turns the clone away.
    credential = { host: 'elsewhere.example.com', sshKey: clientKey, knownHosts };
    expect((await until(spec('ssh-r3'))).phase).toBe('Failed');

    const keyBody = clientKey.split('\n')[1]!;
    expect(logs.lines.join('\n')).not.toContain(keyBody);
    expect(message).not.toContain(keyBody);
    const files = readdirSync(join(tmp, 'data'), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name))
      .filter((f) => statSync(f).size < 64 * 1024 * 1024);
    expect(files.filter((f) => readFileSync(f).includes(Buffer.from(keyBody)))).toEqual([]);
    expect(files.filter((f) => /\.git-ssh-key|\.git-known-hosts/.test(f))).toEqual([]);
  }, 300_000);
});
