// The binary's own answers before any command runs: --version, and a mistyped command or flag named in one line.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const run = (args: string[]) =>
  promisify(execFile)(process.execPath, [path.join(ROOT, 'bin/agentplane.mjs'), ...args], { cwd: ROOT }).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );

describe('agentplane', () => {
  it('prints its version with --version, -V and version', async () => {
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V', 'version']) {
      const r = await run([flag]);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`agentplane ${version} (node ${process.versions.node})\n`);
    }
  });

  it('names the command meant when one is mistyped, and exits 2', async () => {
    const r = await run(['deploi', '--name', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe('agentplane: unknown command "deploi" (did you mean "deploy"?)');
  });

  it('names the flag meant when one is mistyped, in one line, and exits 2', async () => {
    const r = await run(['deployments', 'list', '--jsn']);
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toMatch(/unknown option --jsn \(did you mean --json\?\)$/);
    expect(r.stdout).toBe('');
  });

  it('says in one line that the port is taken and which flag changes it', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const { port } = busy.address() as { port: number };
    const dataDir = mkdtempSync(path.join(tmpdir(), 'agentplane-entry-'));
    try {
      const r = await run(['dev', '--port', String(port), '--data-dir', dataDir, '--sandbox', 'none']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        `agentplane dev: 127.0.0.1:${port} is already in use (another agentplane?): stop that process, or pass --port <port> (0 picks a free one) with its own --data-dir: two platforms on one data folder are refused\n`,
      );
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    } finally {
      busy.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('start banner: names the bootstrap key as set when it is, and says how to set one when it is not', async () => {
    const banner = async (env: Record<string, string>) => {
      const dataDir = mkdtempSync(path.join(tmpdir(), 'agentplane-banner-'));
      const child = spawn(
        process.execPath,
        [path.join(ROOT, 'bin/agentplane.mjs'), 'dev', '--port', '0', '--data-dir', dataDir, '--sandbox', 'none'],
        {
          cwd: ROOT,
          env: { ...process.env, AGENTPLANE_BOOTSTRAP_API_KEY: '', ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      try {
        let out = '';
        await new Promise<void>((resolve, reject) => {
          child.stdout!.on('data', (c: Buffer) => {
            out += c.toString();
            if (/X-Tenant-Id: <workspace id>.*\n/.test(out)) resolve();
          });
          child.once('exit', (code) => reject(new Error(`dev exited (${code}): ${out}`)));
        });
        return out;
      } finally {
        child.kill('SIGKILL');
        rmSync(dataDir, { recursive: true, force: true });
      }
    };
    const withKey = await banner({ AGENTPLANE_BOOTSTRAP_API_KEY: 'banner-bootstrap-key-0123456789' });
    expect(withKey).toContain('The bootstrap key (AGENTPLANE_BOOTSTRAP_API_KEY, as set) signs in');
    expect(withKey).not.toContain('or start with AGENTPLANE_BOOTSTRAP_API_KEY');
    expect(withKey).not.toContain('banner-bootstrap-key-0123456789');
    const without = await banner({});
    expect(without).toContain('or start with AGENTPLANE_BOOTSTRAP_API_KEY=<key of 16+ characters>');
    expect(without).toContain('npx agentplane api-key create --tenant <workspace id>');
  });

  it('installs onto a PATH from the checkout as docs/cli.md says, and runs from any folder', async () => {
    const prefix = mkdtempSync(path.join(tmpdir(), 'agentplane-global-'));
    try {
      const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
      await promisify(execFile)(
        npm,
        ['install', '-g', '--prefix', prefix, '--ignore-scripts', '--no-audit', '--no-fund', '--offline', '.'],
        { cwd: ROOT },
      );
      const elsewhere = mkdtempSync(path.join(tmpdir(), 'agentplane-elsewhere-'));
      try {
        const { stdout } = await promisify(execFile)(path.join(prefix, 'bin', 'agentplane'), ['--version'], {
          cwd: elsewhere,
        });
        expect(stdout).toMatch(/^agentplane \d+\.\d+\.\d+ \(node /);
      } finally {
        rmSync(elsewhere, { recursive: true, force: true });
      }
    } finally {
      rmSync(prefix, { recursive: true, force: true });
    }
  });
});
