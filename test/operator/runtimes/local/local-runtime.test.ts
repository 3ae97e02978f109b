// The local runtime on its own: real git repo, real npm ci, real agent-server children, the real SDK through the
// deployment proxy. The controllers are not involved; the test plays their part.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalRuntime, PACKAGE_DIR } from '../../../../src/operator/runtimes/local/index.ts';
import { detectSandbox, sharedTrees } from '../../../../src/operator/runtimes/local/sandbox.ts';
import { deploymentProxy } from '../../../../src/operator/runtimes/local/proxy.ts';
import type {
  BuildSpec,
  LogType,
  RevisionLogSink,
  RevisionRef,
  ServerSpec,
} from '../../../../src/operator/runtimes/types.ts';
import { silentLogger } from '../../../../src/lib/logger.ts';
import { makeExampleRepo, type ExampleRepo } from '../../helpers/example-repo.ts';

class MemoryLogs implements RevisionLogSink {
  lines = new Map<string, string[]>();
  async append(ref: RevisionRef, type: LogType, lines: string[]) {
    const k = `${ref.revision}/${type}`;
    this.lines.set(k, [...(this.lines.get(k) ?? []), ...lines]);
  }
  text(revision: string, type: LogType): string {
    return (this.lines.get(`${revision}/${type}`) ?? []).join('\n');
  }
}

const dep = { namespace: 'default', deployment: 'hello', deploymentId: 'dep-hello' };

let tmp: string;
let repo: ExampleRepo;
let runtime: LocalRuntime;
let logs: MemoryLogs;
let app: FastifyInstance;

function buildSpec(revision: string, repoRef: string): BuildSpec {
  return { ...dep, revision, repoUrl: repo.path, repoRef, graphConfigPath: 'langgraph.json' };
}
function serverSpec(revision: string, env: Record<string, string> = {}): ServerSpec {
  return { ...dep, revision, graphConfigPath: 'langgraph.json', env, tenantId: 't1', access: 'public' };
}

/** Waits for the runtime's change notification about `revision`, then asks again (as a reconcile would). */
async function until<T extends { phase: string }>(
  revision: string,
  ask: () => Promise<T>,
  phases: string[],
): Promise<T> {
  for (;;) {
    const status = await ask();
    if (phases.includes(status.phase)) return status;
    await new Promise<void>((resolve) => {
      runtime.onChange((ref) => ref.revision === revision && resolve());
    });
  }
}

async function waitFor(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 50));
}

async function greet(client: Client, threadId?: string): Promise<{ text: string; threadId: string }> {
  const thread = threadId ? { thread_id: threadId } : await client.threads.create();
  const run = await client.runs.create(thread.thread_id, 'agent', {
    input: { messages: [{ role: 'human', content: 'Ada' }] },
  });
  await client.runs.join(thread.thread_id, run.run_id);
  const state = await client.threads.getState<{ messages: { content: unknown }[] }>(thread.thread_id);
  return { text: String(state.values.messages.at(-1)!.content), threadId: thread.thread_id };
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-local-runtime-'));
  repo = makeExampleRepo(tmp);
  logs = new MemoryLogs();
  // The sandbox when this machine has one: the whole path (clone, npm ci, install cache, agent server) runs in it.
  const { sandbox } = await detectSandbox('auto', { hidden: [join(tmp, 'data')], shared: sharedTrees(PACKAGE_DIR) });
  runtime = new LocalRuntime({
    // Graphs on each server's main thread, whatever this machine's cores (the build-and-serve test checks it).
    agentExecutorThreads: 0,
    dataDir: join(tmp, 'data'),
    logs,
    logger: silentLogger(),
    healthTimeoutMs: 60_000,
    stopGraceMs: 3000,
    sandbox,
    allowLocalRepos: [tmp],
  });
  app = Fastify();
  await deploymentProxy(app, { resolve: (id) => runtime.backend(id) });
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  runtime.setBaseUrl(address);
});

afterAll(async () => {
  await runtime?.shutdown();
  await app?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('LocalRuntime', () => {
  it('refuses external_docker and internal_docker (images) with a reason', () => {
    for (const source of ['external_docker', 'internal_docker']) {
      const answer = runtime.supports(source);
      expect(answer.ok).toBe(false);
      expect(!answer.ok && answer.message).toMatch(/container runtime/);
    }
  });

  it('builds, serves, switches revisions on one URL with shared threads, and explains failures', async () => {
    // revision 1 from a tag
    expect((await runtime.build(buildSpec('hello-r1', 'v1'))).phase).toBe('Running');
    const built = await until('hello-r1', () => runtime.build(buildSpec('hello-r1', 'v1')), ['Succeeded', 'Failed']);
    expect(built).toEqual({ phase: 'Succeeded', commitSha: repo.sha('v1') });
    expect(logs.text('hello-r1', 'build')).toContain('npm ci');
    expect(await runtime.hasBuild({ ...dep, revision: 'hello-r1' })).toBe(true);

    const url = await runtime.url(dep);
    expect((await fetch(`${url}/ok`)).status).toBe(404); // nothing routed yet
    expect(await until('hello-r1', () => runtime.deploy(serverSpec('hello-r1')), ['Ready', 'Failed'])).toEqual({
      phase: 'Ready',
    });
    await runtime.route(dep, 'hello-r1');
    expect(runtime.routedRevision(dep)).toBe('hello-r1');
    const client = new Client({ apiUrl: url });
    const first = await greet(client);
    expect(first.text).toContain('Hello, Ada!');
    // The runtime's executor setting reached the server (its start line says where it runs graphs).
    expect(logs.text('hello-r1', 'deploy')).toContain('"executor_threads":0');

    // revision 2 from a branch, secrets as environment win over langgraph.json env
    await until('hello-r2', () => runtime.build(buildSpec('hello-r2', 'v2')), ['Succeeded']);
    // Same package.json and lock file as r1: node_modules come from the install cache, npm ci does not run.
    expect(logs.text('hello-r2', 'build')).toContain('npm ci skipped: node_modules linked from the install cache');
    await until('hello-r2', () => runtime.deploy(serverSpec('hello-r2')), ['Ready']);
    const [oldPid] = runtime.pids();
    await runtime.route(dep, 'hello-r2');
    expect((await greet(client)).text).toContain('Howdy, Ada!');
    // the thread made on revision 1 is readable and continuable on revision 2
    expect((await greet(client, first.threadId)).text).toContain('Howdy, Ada!');
    await waitFor(() => !runtime.pids().includes(oldPid!));
    expect(() => process.kill(oldPid!, 0)).toThrow(); // the replaced server stopped after traffic moved

    // failures: unknown ref, failing install, server that never becomes healthy
    const unknown = await until('hello-r3', () => runtime.build(buildSpec('hello-r3', 'no-such-ref')), [
      'Failed',
      'Succeeded',
    ]);
    expect(unknown).toMatchObject({ phase: 'Failed', message: expect.stringContaining('no-such-ref') });
    const install = await until('hello-r4', () => runtime.build(buildSpec('hello-r4', 'broken-install')), [
      'Failed',
      'Succeeded',
    ]);
    expect(install).toMatchObject({ phase: 'Failed', message: expect.stringContaining('npm ci') });
    expect(logs.text('hello-r4', 'build')).toMatch(/in sync|package-lock/);
    await until('hello-r5', () => runtime.build(buildSpec('hello-r5', 'broken-server')), ['Succeeded']);
    const broken = await until('hello-r5', () => runtime.deploy(serverSpec('hello-r5')), ['Failed', 'Ready']);
    expect(broken).toMatchObject({ phase: 'Failed', message: expect.stringMatching(/exited|healthy/) });
    expect(logs.text('hello-r5', 'deploy')).toContain('missing');
    await expect(runtime.route(dep, 'hello-r5')).rejects.toThrow(/not ready/);
    expect((await greet(client)).text).toContain('Howdy, Ada!'); // still served by revision 2

    // redeploy of revision 1 from disk, without building
    await until('hello-r1', () => runtime.deploy(serverSpec('hello-r1', { AGENT_GREETING: 'Hi' })), ['Ready']);
    await runtime.route(dep, 'hello-r1');
    expect((await greet(client)).text).toContain('Hi, Ada!');

    // cleanup: processes gone, files gone, URL 404
    const pids = runtime.pids();
    expect(pids.length).toBeGreaterThan(0);
    await runtime.cleanup(dep);
    expect(runtime.pids()).toEqual([]);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
    expect(existsSync(join(tmp, 'data', 'deployments', dep.deploymentId))).toBe(false);
    expect((await fetch(`${url}/ok`)).status).toBe(404);
  }, 240_000);

  it('says in the build log that dockerfile_lines are not applied (no image here)', async () => {
    const other = join(tmp, 'with-dockerfile-lines');
    const git = (...args: string[]) => execFileSync('git', args, { cwd: other, stdio: 'pipe' });
    mkdirSync(other);
    git('init', '-q', '-b', 'main');
    writeFileSync(
      join(other, 'langgraph.json'),
      JSON.stringify({ graphs: { agent: './agent.ts:graph' }, dockerfile_lines: ['RUN apt-get install -y jq'] }),
    );
    writeFileSync(join(other, 'agent.ts'), 'export const graph = {};\n'); // the build checks that it parses
    git('add', '.');
    git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
    const spec = {
      ...buildSpec('lines-r1', 'main'),
      deployment: 'lines',
      deploymentId: 'dep-lines',
      repoUrl: other,
      installCommand: 'true',
    };
    expect(await until('lines-r1', () => runtime.build(spec), ['Succeeded', 'Failed'])).toMatchObject({
      phase: 'Succeeded',
    });
    expect(logs.text('lines-r1', 'build')).toContain('dockerfile_lines: 1 line(s) not applied');
  });

  it('opens the build log with the commit it builds; warns of uncommitted edits and of a detached HEAD', async () => {
    const other = join(tmp, 'working-folder');
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: other })
        .toString()
        .trim();
    mkdirSync(other);
    git('init', '-q', '-b', 'main');
    writeFileSync(join(other, 'langgraph.json'), JSON.stringify({ graphs: { agent: './agent.ts:graph' } }));
    writeFileSync(join(other, 'agent.ts'), 'export const graph = {};\n');
    git('add', '.');
    git('commit', '-q', '-m', 'first');
    const first = git('rev-parse', 'HEAD');
    writeFileSync(join(other, 'agent.ts'), 'export const graph = { v: 2 };\n');
    git('commit', '-q', '-am', 'second "quoted"');
    const second = git('rev-parse', 'HEAD');
    let n = 0;
    const buildLog = async () => {
      const revision = `wf-r${++n}`;
      const spec = {
        ...buildSpec(revision, 'main'),
        deployment: 'wf',
        deploymentId: 'dep-wf',
        repoUrl: other,
        installCommand: 'true',
      };
      expect(await until(revision, () => runtime.build(spec), ['Succeeded', 'Failed'])).toMatchObject({
        phase: 'Succeeded',
        commitSha: second,
      });
      return logs.text(revision, 'build').split('\n');
    };

    // Clean, on the branch built: one line says it all, the clone follows.
    const clean = await buildLog();
    expect(clean.slice(0, 2)).toEqual([
      `building ${second.slice(0, 12)} "second \\"quoted\\"" (main of ${other})`,
      `$ git clone ${other}`,
    ]);

    // Edited and a new file, not committed: built without them, and the log says so before anything else.
    writeFileSync(join(other, 'agent.ts'), 'export const graph = { v: 3 };\n');
    writeFileSync(join(other, 'tools.ts'), 'export {};\n');
    const dirty = await buildLog();
    expect(dirty[0]).toMatch(/^building [0-9a-f]{12} "second/);
    expect(dirty[1]).toBe(
      `warning: ${other} has uncommitted changes (agent.ts, tools.ts); only commits are built: commit them and redeploy`,
    );
    git('checkout', '-q', '--', 'agent.ts');
    rmSync(join(other, 'tools.ts'));

    // An older commit checked out (detached): the build is of main all the same, and says which.
    git('checkout', '-q', '--detach', first);
    const detached = await buildLog();
    expect(detached[1]).toBe(
      `warning: ${other} has a detached HEAD at ${first.slice(0, 12)}: the build is of main (${second.slice(0, 12)}), ` +
        `not of ${first.slice(0, 12)}`,
    );
    expect(detached[2]).toBe(`$ git clone ${other}`);
    // What the header was made from is not in the log.
    for (const log of [clean, dirty, detached]) expect(log.filter((l) => /^\$ git (status|log)\b/.test(l))).toEqual([]);
  });

  it('refuses a langgraph.json naming a Python graph at build time, in one line, before installing', async () => {
    const other = join(tmp, 'python-graph');
    const git = (...args: string[]) => execFileSync('git', args, { cwd: other, stdio: 'pipe' });
    mkdirSync(other);
    git('init', '-q', '-b', 'main');
    writeFileSync(
      join(other, 'langgraph.json'),
      JSON.stringify({ python_version: '3.12', graphs: { agent: './my_agent/agent.py:graph' } }),
    );
    writeFileSync(join(other, 'package.json'), JSON.stringify({ name: 'py', version: '1.0.0' }));
    git('add', '.');
    git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
    const spec = {
      ...buildSpec('py-r1', 'main'),
      deployment: 'py',
      deploymentId: 'dep-py',
      repoUrl: other,
      // Would succeed: the refusal must come from reading langgraph.json, not from a failing install.
      installCommand: 'echo installed',
    };
    const status = await until('py-r1', () => runtime.build(spec), ['Succeeded', 'Failed']);
    expect(status).toEqual({
      phase: 'Failed',
      message: expect.stringMatching(
        /^[^\n]*langgraph\.json graph "agent" \("\.\/my_agent\/agent\.py"\) is a Python graph: this platform serves LangGraph\.js graphs \(JavaScript or TypeScript\) only[^\n]*$/,
      ),
    });
    expect(logs.text('py-r1', 'build')).not.toContain('installed');
  });
});
