// bin/agentplane.mjs runs the prebuilt bundle only while it is up to date with every source it was built from.
// Exercised with the real bin file in a scratch package whose "bundle" and "sources" say which one ran.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
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
    `export async function main(argv) {\n  const bundle = globalThis[Symbol.for('agentplane.bundle')] ?? '-';\n  console.log(['${from}', bundle, ...argv].join(' '));\n}\n`;
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
  it('runs the bundle while its sources are unchanged and tells the process where it is (late tsx, threads)', async () => {
    expect(await whoRuns()).toBe(`bundle ${path.join(pkg, 'dist/cli')} x y`);
  });

  it('runs the sources through tsx when asked to', async () => {
    expect(await whoRuns({ AGENTPLANE_FROM_SOURCES: '1' })).toBe('sources - x y');
  });

  it('runs the sources once any input of the bundle changed or went away, and without a manifest', async () => {
    const now = new Date();
    await utimes(path.join(pkg, 'src/lib/util.ts'), now, now);
    expect(await whoRuns()).toBe('sources - x y');
    const old = new Date(Date.now() - 60_000);
    await utimes(path.join(pkg, 'src/lib/util.ts'), old, old);
    expect(await whoRuns()).toBe(`bundle ${path.join(pkg, 'dist/cli')} x y`);
    await rm(path.join(pkg, 'src/lib/util.ts'));
    expect(await whoRuns()).toBe('sources - x y');
    await rm(path.join(pkg, 'dist/cli/manifest.json'));
    expect(await whoRuns()).toBe('sources - x y');
  });
});

describe('scripts/build-cli.mjs', () => {
  // Inside the package, so that the bundle's imports of packages resolve as they do from dist/cli.
  let out: string;
  beforeAll(async () => {
    out = await mkdtemp(path.join(ROOT, 'node_modules/.cache-ap-cli-'));
    await run(process.execPath, [path.join(ROOT, 'scripts/build-cli.mjs'), '--outdir', out]);
  });
  afterAll(async () => rm(out, { recursive: true, force: true }));

  /** Runs the bundle in `out` as bin/agentplane.mjs runs dist/cli: told where the bundle is. */
  const bundleArgs = (...argv: string[]) => [
    '--input-type=module',
    '-e',
    `globalThis[Symbol.for('agentplane.bundle')] = ${JSON.stringify(out)};
     const { main } = await import(${JSON.stringify(pathToFileURL(path.join(out, 'cli.js')).href)});
     await main(process.argv.slice(1));`,
    ...argv,
  ];

  it('builds a bundle whose commands run, with a manifest of its sources', async () => {
    const manifest = JSON.parse(await readFile(path.join(out, 'manifest.json'), 'utf8')) as { inputs: string[] };
    expect(manifest.inputs).toEqual(
      expect.arrayContaining(['src/cli.ts', 'src/agent-server/command.ts', 'src/agent-server/runs/executor-worker.ts']),
    );
    expect(manifest.inputs.some((f) => f.includes('node_modules'))).toBe(false);
    const { stdout } = await run(process.execPath, bundleArgs('api-key', '--help'));
    expect(stdout).toContain('Usage: agentplane api-key create');
  });

  it("an agent server run from it runs users' TypeScript graphs on executor threads started from it", async () => {
    const project = await mkdtemp(path.join(os.tmpdir(), 'ap-bundle-graph-'));
    let server: ChildProcess | undefined;
    try {
      await symlink(path.join(ROOT, 'node_modules'), path.join(project, 'node_modules'));
      await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'probe', type: 'module' }));
      await writeFile(
        path.join(project, 'langgraph.json'),
        JSON.stringify({ dependencies: ['.'], graphs: { probe: './graph.ts:graph' } }),
      );
      // An enum only loads through tsx. The thread says where it runs, and whether tsx was registered in it late (by
      // the bundle's entry; the sources' entry registers it before anything else and does not mark it).
      await writeFile(
        path.join(project, 'graph.ts'),
        `import { threadId } from 'node:worker_threads';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
enum Where { Main = 'main', Thread = 'thread' }
const State = Annotation.Root({ where: Annotation<string>, lateTsx: Annotation<boolean> });
export const graph = new StateGraph(State)
  .addNode('probe', () => ({
    where: threadId === 0 ? Where.Main : Where.Thread,
    lateTsx: (globalThis as Record<symbol, unknown>)[Symbol.for('agentplane.typescript-imports.registered')] === true,
  }))
  .addEdge(START, 'probe')
  .addEdge('probe', END)
  .compile();
`,
      );
      const args = ['agent-server', '--port', '0', '--config', path.join(project, 'langgraph.json')];
      args.push('--data-dir', path.join(project, 'data'), '--executor-threads', '1');
      server = spawn(process.execPath, bundleArgs(...args), {
        cwd: project,
        env: { ...process.env, LOG_LEVEL: 'debug' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let log = '';
      for (const stream of [server.stdout!, server.stderr!]) stream.on('data', (d: Buffer) => (log += d.toString()));
      const logged = (pattern: RegExp) =>
        new Promise<RegExpExecArray>((resolve, reject) => {
          const check = () => {
            const m = pattern.exec(log);
            if (m) return resolve(m);
            if (server!.exitCode !== null) return reject(new Error(`server exited:\n${log}`));
            setTimeout(check, 50);
          };
          check();
        });
      const url = (await logged(/"url":"(http:\/\/[^"]+)".*"msg":"agent server listening"/))[1]!;
      const runProbe = async () => {
        const res = await fetch(`${url}/runs/wait`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ assistant_id: 'probe', input: {} }),
        });
        expect(res.status).toBe(200);
        return (await res.json()) as { where: string; lateTsx: boolean };
      };
      // The first run starts the thread (and runs on the server's own thread while it loads).
      expect((await runProbe()).lateTsx).toBe(true);
      await logged(/"msg":"executor thread ready"/);
      expect(await runProbe()).toEqual({ where: 'thread', lateTsx: true });
      expect(log).not.toContain('executor thread could not start');
    } finally {
      if (server && server.exitCode === null) {
        const exited = new Promise((r) => server!.once('exit', r));
        server.kill('SIGTERM');
        await exited;
      }
      await rm(project, { recursive: true, force: true });
    }
  });
});
