// bin/agentplane.mjs runs the prebuilt bundle only while it is up to date with every source it was built from.
// Exercised with the real bin file in a scratch package whose "bundle" and "sources" say which one ran.
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
let pkg: string;

async function whoRuns(env: Record<string, string> = {}): Promise<string> {
  const { stdout } = await run(process.execPath, [path.join(pkg, 'bin/agentplane.mjs'), 'x', 'y'], {
    env: { ...process.env, AGENTPLANE_FROM_SOURCES: '', ...env },
  });
  return stdout.trim();
}

beforeAll(async () => {
  pkg = await mkdtemp(path.join(os.tmpdir(), 'ap-bin-'));
  await mkdir(path.join(pkg, 'bin'));
  await mkdir(path.join(pkg, 'src/lib'), { recursive: true });
  await mkdir(path.join(pkg, 'dist/cli'), { recursive: true });
  await copyFile(path.join(ROOT, 'bin/agentplane.mjs'), path.join(pkg, 'bin/agentplane.mjs'));
  await symlink(path.join(ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
  await writeFile(path.join(pkg, 'package.json'), JSON.stringify({ name: 'agentplane', type: 'module' }));
  const main = (from: string) =>
    `export async function main(argv) {\n  const late = globalThis[Symbol.for('agentplane.typescript-imports.late')] === true;\n  console.log(['${from}', late, ...argv].join(' '));\n}\n`;
  await writeFile(path.join(pkg, 'src/cli.ts'), main('sources'));
  await writeFile(path.join(pkg, 'src/lib/util.ts'), 'export const x: number = 1;\n');
  await writeFile(path.join(pkg, 'dist/cli/cli.js'), main('bundle'));
  // Sources older than the build.
  const old = new Date(Date.now() - 60_000);
  for (const f of ['src/cli.ts', 'src/lib/util.ts']) await utimes(path.join(pkg, f), old, old);
  await writeFile(
    path.join(pkg, 'dist/cli/manifest.json'),
    JSON.stringify({ builtFrom: Date.now() - 30_000, inputs: ['src/cli.ts', 'src/lib/util.ts'] }),
  );
});
afterAll(async () => rm(pkg, { recursive: true, force: true }));

describe('bin/agentplane.mjs', () => {
  it('runs the bundle while its sources are unchanged; users TypeScript loader is then registered late', async () => {
    expect(await whoRuns()).toBe('bundle true x y');
  });

  it('runs the sources through tsx when asked to', async () => {
    expect(await whoRuns({ AGENTPLANE_FROM_SOURCES: '1' })).toBe('sources false x y');
  });

  it('runs the sources once any input of the bundle changed or went away, and without a manifest', async () => {
    const now = new Date();
    await utimes(path.join(pkg, 'src/lib/util.ts'), now, now);
    expect(await whoRuns()).toBe('sources false x y');
    const old = new Date(Date.now() - 60_000);
    await utimes(path.join(pkg, 'src/lib/util.ts'), old, old);
    expect(await whoRuns()).toBe('bundle true x y');
    await rm(path.join(pkg, 'src/lib/util.ts'));
    expect(await whoRuns()).toBe('sources false x y');
    await rm(path.join(pkg, 'dist/cli/manifest.json'));
    expect(await whoRuns()).toBe('sources false x y');
  });
});

describe('scripts/build-cli.mjs', () => {
  it('builds a bundle whose commands run, with a manifest of its sources', async () => {
    // Inside the package, so that the bundle's imports of packages resolve as they do from dist/cli.
    const out = await mkdtemp(path.join(ROOT, 'node_modules/.cache-ap-cli-'));
    try {
      await run(process.execPath, [path.join(ROOT, 'scripts/build-cli.mjs'), '--outdir', out]);
      const manifest = JSON.parse(await readFile(path.join(out, 'manifest.json'), 'utf8')) as { inputs: string[] };
      expect(manifest.inputs).toEqual(expect.arrayContaining(['src/cli.ts', 'src/agent-server/command.ts']));
      expect(manifest.inputs.some((f) => f.includes('node_modules'))).toBe(false);
      const cli = pathToFileURL(path.join(out, 'cli.js')).href;
      const script = `const { main } = await import(${JSON.stringify(cli)}); await main(process.argv.slice(1));`;
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script, 'api-key', '--help']);
      expect(stdout).toContain('Usage: agentplane api-key create');
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
});
