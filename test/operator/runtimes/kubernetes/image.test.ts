// The Dockerfile's contract with the rest of the system, checked on its text (no Docker engine here).
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentDockerfile, APP_DIR } from '../../../../src/operator/runtimes/kubernetes/dockerfile.ts';

const root = join(import.meta.dirname, '../../../..');
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const finalStage = instructions.slice(instructions.map((l) => l.startsWith('FROM ')).lastIndexOf(true));

describe('Dockerfile', () => {
  it('is multi-stage on a Node LTS slim image', () => {
    const froms = instructions.filter((l) => l.startsWith('FROM '));
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const version = Number(/ARG NODE_VERSION=(\d+)/.exec(dockerfile)?.[1]);
    expect(version % 2).toBe(0); // even majors are the LTS lines
    expect(version).toBeGreaterThanOrEqual(22);
    expect(froms.at(-1)).toBe('FROM node:${NODE_VERSION}-slim');
  });

  it('runs as a non-root user with agentplane as the entrypoint', () => {
    const users = finalStage.filter((l) => l.startsWith('USER '));
    expect(users.at(-1)).toBe('USER node');
    expect(finalStage.find((l) => l.startsWith('ENTRYPOINT'))).toContain('"agentplane"');
  });

  it('has git for the clone init container and a node-owned app dir for agent builds', () => {
    expect(finalStage.join('\n')).toMatch(/apt-get install .*\bgit\b/);
    expect(finalStage.join('\n')).toContain(`chown node:node ${APP_DIR}`);
    const agent = agentDockerfile({ baseImage: 'agentplane:test', graphConfigPath: 'langgraph.json' });
    expect(agent).toContain(`WORKDIR ${APP_DIR}`);
    expect(agent).not.toContain('USER root');
  });

  // bin/agentplane.mjs runs dist/cli only while no input of it (dist/cli/manifest.json) is newer than the build: the
  // image must hold the bundle, and the sources beside it must be the copies the build read (same stage, same times),
  // or every agent server of the image runs from the sources through tsx, tens of MB heavier.
  it('ships our code bundled, with the sources the bundle was built from', () => {
    const stageOf = (name: string) => {
      const at = instructions.findIndex((l) => new RegExp(`^FROM \\S+ AS ${name}$`).test(l));
      expect(at, `a stage named ${name}`).toBeGreaterThanOrEqual(0);
      const end = instructions.findIndex((l, i) => i > at && l.startsWith('FROM '));
      return instructions.slice(at, end < 0 ? undefined : end);
    };
    const cli = stageOf('cli');
    expect(cli).toContain('COPY src ./src');
    expect(cli).toContain('RUN node scripts/build-cli.mjs');
    expect(finalStage).toContain('COPY --from=cli /app/dist/cli ./dist/cli');
    expect(finalStage).toContain('COPY --from=cli /app/src ./src');
    expect(finalStage.filter((l) => /^COPY (--from=\S+ )?\S*src\b/.test(l))).toHaveLength(1);
    // The final stage's check of the bundle passes on it as built, and fails once a source is newer.
    const check = /^RUN node -e "(.*)"$/.exec(finalStage.find((l) => l.includes('dist/cli/manifest.json')) ?? '')?.[1];
    expect(check).toBeDefined();
    const app = mkdtempSync(join(tmpdir(), 'ap-image-'));
    try {
      mkdirSync(join(app, 'dist/cli'), { recursive: true });
      mkdirSync(join(app, 'src'));
      writeFileSync(join(app, 'src/a.ts'), 'export {};\n');
      const manifest = { builtFrom: Date.now() + 60_000, inputs: ['src/a.ts'] };
      writeFileSync(join(app, 'dist/cli/manifest.json'), JSON.stringify(manifest));
      const run = () =>
        spawnSync(process.execPath, ['-e', check!.replace(/\\\s+/g, ' ')], { cwd: app, encoding: 'utf8' });
      expect(run().status).toBe(0);
      utimesSync(join(app, 'src/a.ts'), new Date(), new Date(Date.now() + 120_000));
      const stale = run();
      expect(stale.status).toBe(1);
      expect(stale.stderr).toContain('dist/cli is older than src/a.ts');
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
    // Everything the bundle is built from is in the build context, and dist/ (a developer's bundle) is not.
    const ignored = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n');
    for (const p of ['scripts', 'scripts/build-cli.mjs', 'tsconfig.json']) expect(ignored).not.toContain(p);
    expect(ignored).toContain('dist');
  });

  it('leaves tests, docs and local state out of the build context', () => {
    const ignored = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n');
    for (const p of ['.git', 'node_modules', 'test', '.agentplane']) expect(ignored).toContain(p);
    for (const p of ['src', 'bin', 'crds', 'package.json', 'package-lock.json']) expect(ignored).not.toContain(p);
  });
});
