// docs/real-model.md, run as written: its install commands, its src/agent.ts and its langgraph.json, with the real
// @langchain/openai from the registry, deployed to a real `agentplane dev` with the key as a secret from the CLI's
// environment. The provider is an OpenAI-compatible server this test starts (OPENAI_BASE_URL, another secret, points
// the real client at it): it answers, and says which key it was called with. The key reaches the provider and
// nothing else: no API answer, no log line.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devCli, startDev, stopDev, workspaceKey, type DevProcess } from '../dev/helpers.ts';

const PAGE = readFileSync(resolve(import.meta.dirname, '../../docs/real-model.md'), 'utf8');
const KEY = `sk-test-${Date.now()}-do-not-log`;
const ANSWER = 'Hello from the OpenAI-compatible stub';

/** The page's code blocks of one language, in order. */
const blocks = (lang: string) =>
  [...PAGE.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);

let tmp: string;
let repo: string;
let dev: DevProcess;
let provider: Server;
let providerUrl: string;
const calls: { authorization?: string; model?: string }[] = [];

/** Chat completions as OpenAI answers them: one JSON object, or server-sent chunks when asked to stream. */
function stubProvider(req: IncomingMessage, body: string, res: import('node:http').ServerResponse) {
  if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) return res.writeHead(404).end();
  const ask = JSON.parse(body) as { model?: string; stream?: boolean };
  calls.push({ authorization: req.headers.authorization, model: ask.model });
  const base = { id: 'chatcmpl-stub', created: 1_764_000_000, model: ask.model ?? 'stub' };
  if (!ask.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(
      JSON.stringify({
        ...base,
        object: 'chat.completion',
        choices: [{ index: 0, message: { role: 'assistant', content: ANSWER }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 3, completion_tokens: 7, total_tokens: 10 },
      }),
    );
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const chunk = (delta: object, finish: string | null) =>
    `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  res.end(`${chunk({ role: 'assistant', content: ANSWER }, null)}${chunk({}, 'stop')}data: [DONE]\n\n`);
}

const cli = (args: string[], env: Record<string, string>) => devCli(dev, args, { env, cwd: tmp });

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'ap-real-model-'));
  repo = join(tmp, 'my-agent');
  mkdirSync(join(repo, 'src'), { recursive: true });
  writeFileSync(join(repo, 'package.json'), JSON.stringify({ name: 'my-agent', version: '1.0.0', private: true }));
  // Section 1's commands, as the page gives them (comments dropped): the packages from the registry, "type": "module".
  const [install] = blocks('sh');
  for (const line of install!.split('\n')) {
    const command = line.replace(/\s+#.*$/, '').trim();
    const quiet = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false' };
    if (command) execFileSync('sh', ['-c', command], { cwd: repo, stdio: 'pipe', env: quiet });
  }
  writeFileSync(join(repo, 'src', 'agent.ts'), blocks('ts')[0]!);
  writeFileSync(join(repo, 'langgraph.json'), blocks('json')[0]!);
  writeFileSync(join(repo, '.gitignore'), 'node_modules\n');
  const git = (...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd: repo, stdio: 'pipe' });
  git('init', '-q', '-b', 'main');
  git('add', '-A');
  git('commit', '-q', '-m', 'the graph of docs/real-model.md');

  provider = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => stubProvider(req, body, res));
  });
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  providerUrl = `http://127.0.0.1:${(provider.address() as { port: number }).port}/v1`;
  dev = await startDev(join(tmp, 'data'));
}, 600_000);

afterAll(async () => {
  if (dev) await stopDev(dev, 'SIGKILL');
  await new Promise((r) => provider?.close(r));
  rmSync(tmp, { recursive: true, force: true });
});

describe('docs/real-model.md', () => {
  it('deploys the page’s graph with the key as a secret; the real client calls the provider with it', async () => {
    // The workspace key the SDK calls with, made before the deploy: the agent reads its workspace's keys as the
    // platform publishes them (within a poll interval), so a key made after the deploy may not be known yet.
    const agentKey = await workspaceKey(dev.url);
    // Section 2: the key (and where the provider is) from the environment, never on the command line.
    const deployed = await cli(
      [
        'deploy',
        '--name',
        'my-agent',
        '--repo-url',
        repo,
        '--ref',
        'main',
        '--secret-from-env',
        'OPENAI_API_KEY',
        '--secret-from-env',
        'OPENAI_BASE_URL',
        '--wait',
      ],
      { OPENAI_API_KEY: KEY, OPENAI_BASE_URL: providerUrl },
    );
    expect(deployed.code, deployed.stderr).toBe(0);
    const url = /DEPLOYED: (http:\/\/\S+)/.exec(deployed.stdout)![1]!;

    const client = new Client({ apiUrl: url, apiKey: agentKey, callerOptions: { maxRetries: 0 } });
    const thread = await client.threads.create();
    const values = (await client.runs.wait(thread.thread_id, 'agent', {
      input: { messages: [{ role: 'human', content: 'Hi' }] },
    })) as { messages: { content: unknown }[] };
    expect(String(values.messages.at(-1)!.content)).toBe(ANSWER);
    expect(calls.at(-1)).toEqual({ authorization: `Bearer ${KEY}`, model: 'gpt-4o-mini' });

    // Section 3: the names are listed, the value is in no answer and no log.
    const got = await cli(['deployments', 'get', 'my-agent', '--json'], {});
    expect(got.stdout).toContain('OPENAI_API_KEY');
    const logs = await Promise.all(
      ['build', 'deploy'].map((type) => cli(['revisions', 'logs', 'my-agent', '1', '--type', type, '--raw'], {})),
    );
    for (const text of [deployed.stdout, deployed.stderr, got.stdout, ...logs.map((l) => l.stdout)]) {
      expect(text).not.toContain(KEY);
    }
  }, 600_000);
});
