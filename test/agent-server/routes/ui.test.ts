// Generative UI end to end: a real server process bundles langgraph.json "ui" at start; the real SDK streams a run
// whose graph pushes a UI message; POST /ui/{id} answers the snippet LoadExternalComponent puts into its shadow
// root, and the script it names is served and, evaluated as a browser would, renders the named component.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import vm from 'node:vm';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../../src/agent-server/http/api-keys.ts';
import { startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../fixtures/ui/langgraph.json', import.meta.url).pathname;
const BROKEN = new URL('../fixtures/ui-broken/langgraph.json', import.meta.url).pathname;
const PREFIXED = new URL('../fixtures/ui/langgraph.prefix.json', import.meta.url).pathname;

type Node = { type: unknown; props: Record<string, unknown> };

/** A page as bootstrapUiContext() leaves it, with a tiny JSX runtime standing in for React. */
function fakePage(shadowRootId: string) {
  const appended: unknown[] = [];
  const responses: Array<{ id: string; component: (p: unknown) => Node; target: unknown }> = [];
  const jsx = (type: unknown, props: Record<string, unknown>) => ({ type, props });
  const modules: Record<string, unknown> = {
    'react/jsx-runtime': { jsx, jsxs: jsx, Fragment: 'Fragment' },
    '@acme/design-system': { Badge: 'acme-badge' },
  };
  const page: Record<string | symbol, unknown> = {
    document: {
      getElementById: (id: string) =>
        id === shadowRootId ? { shadowRoot: { appendChild: (n: unknown) => appended.push(n) } } : null,
      createElement: (tag: string) => ({ tag }),
    },
    [Symbol.for('LGUI_REQUIRE')]: (name: string) => {
      if (!(name in modules)) throw new Error(`Unknown module: ${name}`);
      return modules[name];
    },
    [Symbol.for('LGUI_EXT_STORE')]: {
      respond: (id: string, component: (p: unknown) => Node, target: unknown) =>
        responses.push({ id, component, target }),
    },
  };
  page.window = page;
  page.globalThis = page;
  return { context: vm.createContext(page), appended, responses };
}

/** Text of a JSX tree built by the stand-in runtime. */
function textOf(node: unknown): string {
  if (node === null || node === undefined || typeof node === 'boolean') return '';
  if (typeof node === 'string' || typeof node === 'number') return String(node);
  if (Array.isArray(node)) return node.map(textOf).join('');
  const n = node as Node;
  if (typeof n.type === 'function') return textOf((n.type as (p: unknown) => unknown)(n.props));
  return textOf(n.props?.children);
}

describe('generative UI', () => {
  let dir: string;
  let server: ServerProc;
  let client: Client;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ap-as-ui-'));
    server = await startServerProcess(['--config', CONFIG, '--data-dir', join(dir, 'data'), '--executor-threads', '0']);
    client = new Client({ apiUrl: server.url });
  }, 90_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('streams the UI message a node pushes and keeps it in state', async () => {
    const thread = await client.threads.create();
    const uiEvents: Array<Record<string, unknown>> = [];
    for await (const chunk of client.runs.stream(thread.thread_id, 'agent', {
      input: { city: 'Paris' },
      streamMode: ['values', 'custom'],
    })) {
      if (chunk.event === 'custom') uiEvents.push(chunk.data as Record<string, unknown>);
    }
    expect(uiEvents).toEqual([
      expect.objectContaining({ type: 'ui', name: 'weather', props: { city: 'Paris', degrees: 21 } }),
    ]);
    const state = await client.threads.getState<{ ui: Array<{ name: string }> }>(thread.thread_id);
    expect(state.values.ui.map((u) => u.name)).toEqual(['weather']);
  });

  it('answers POST /ui/{id} with the snippet, serves the bundle, and the bundle renders the component', async () => {
    // By graph name (what useStream's assistantId usually is) and by the assistant's UUID alike.
    const [assistant] = await client.assistants.search({ graphId: 'agent' });
    for (const id of ['agent', assistant!.assistant_id]) {
      const res = await fetch(`${server.url}/ui/${id}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/html' },
        body: JSON.stringify({ name: 'weather' }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await res.text();
      const script = /<script src="([^"]+)" onload='([^']+)'><\/script>/.exec(html);
      const css = /<link rel="stylesheet" href="([^"]+)" \/>/.exec(html);
      expect(script, html).not.toBeNull();
      expect(css, html).not.toBeNull();
      expect(script![1]).toBe(`${server.url}/ui/agent/entrypoint.js`);
      expect(script![2]).toContain('{{shadowRootId}}');

      const jsRes = await fetch(script![1]!);
      expect(jsRes.status).toBe(200);
      expect(jsRes.headers.get('content-type')).toMatch(/javascript/);
      const js = await jsRes.text();
      const cssRes = await fetch(css![1]!);
      expect(cssRes.headers.get('content-type')).toMatch(/^text\/css/);
      expect(await cssRes.text()).toContain('.weather');

      // What the browser does: the client replaces the placeholder, the script loads, its onload renders.
      const page = fakePage('child-shadow-1');
      vm.runInContext(js, page.context);
      vm.runInContext(script![2]!.replace('{{shadowRootId}}', 'child-shadow-1'), page.context);
      expect(page.responses).toHaveLength(1);
      expect(page.responses[0]!.id).toBe('child-shadow-1');
      expect(page.appended).toEqual([page.responses[0]!.target]);
      const tree = page.responses[0]!.component({ city: 'Paris', degrees: 21 });
      expect(textOf(tree)).toBe('Paris21 °C');
    }
    // The SDK's own UI client fetches the same snippet.
    const html = await (client as unknown as { '~ui': { getComponent(a: string, n: string): Promise<string> } })[
      '~ui'
    ].getComponent('agent', 'weather');
    expect(html).toContain('__LGUI_agent.render("weather", "{{shadowRootId}}")');
  });

  it('answers 404 for a graph without UI or an unknown assistant, 422 for a bad body, and escapes names', async () => {
    const post = (id: string, body: unknown) =>
      fetch(`${server.url}/ui/${id}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await post('plain', { name: 'weather' })).status).toBe(404);
    expect((await post(crypto.randomUUID(), { name: 'weather' })).status).toBe(404);
    expect((await post('nope', { name: 'weather' })).status).toBe(404);
    const bad = await post('agent', { nom: 'weather' });
    expect(bad.status).toBe(422);
    expect(JSON.stringify(await bad.json())).toContain('name');
    const evil = await (await post('agent', { name: `x'><img src=x onerror=alert(1)>` })).text();
    expect(evil).not.toContain('<img');
    expect(evil).not.toMatch(/onload='[^']*'[^>]*'/);
    expect((await fetch(`${server.url}/ui/agent/..%2F..%2Finfo`)).status).toBe(404);
    expect((await fetch(`${server.url}/ui/agent/missing.js`)).status).toBe(404);
  });
});

describe('generative UI that fails to bundle', () => {
  it('is reported in /info and on POST /ui while the graphs keep serving', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-ui-broken-'));
    const server = await startServerProcess(['--config', BROKEN, '--data-dir', dir, '--executor-threads', '0']);
    try {
      const info = (await (await fetch(`${server.url}/info`)).json()) as { ui_errors?: Record<string, string> };
      expect(info.ui_errors?.agent).toMatch(/ui of graph "agent": bundling \.\/broken\.jsx failed: .*broken\.jsx:2:/);
      expect(server.output()).toMatch(/bundling \.\/broken\.jsx failed/);
      const res = await fetch(`${server.url}/ui/agent`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'weather' }),
      });
      expect(res.status).toBe(422);
      expect(((await res.json()) as { detail: string }).detail).toMatch(/broken\.jsx/);
      const client = new Client({ apiUrl: server.url });
      const thread = await client.threads.create();
      const out = await client.runs.wait(thread.thread_id, 'agent', { input: { city: 'Oslo' } });
      expect((out as { city: string }).city).toBe('Oslo');
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  it('refuses to start under --strict, naming the file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-ui-strict-'));
    try {
      const err = await startServerProcess(['--config', BROKEN, '--data-dir', dir, '--strict']).then(
        async (s) => {
          await s.stop();
          return null;
        },
        (e: unknown) => e as Error,
      );
      expect(err?.message).toMatch(/server exited with 1/);
      expect(err?.message).toMatch(/bundling \.\/broken\.jsx failed/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('generative UI behind --auth-keys-file', () => {
  it('needs the key for POST /ui, not for the bundle files that script and link tags load', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-ui-keys-'));
    const keysFile = join(dir, 'keys.json');
    writeFileSync(keysFile, JSON.stringify({ hashes: [hashApiKey('ui-key-0123456789')] }));
    const server = await startServerProcess([
      '--config',
      CONFIG,
      '--data-dir',
      join(dir, 'data'),
      '--executor-threads',
      '0',
      '--auth-keys-file',
      keysFile,
    ]);
    try {
      const post = (headers: Record<string, string>) =>
        fetch(`${server.url}/ui/agent`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ name: 'weather' }),
        });
      expect((await post({})).status).toBe(401);
      const ok = await post({ 'x-api-key': 'ui-key-0123456789' });
      expect(ok.status).toBe(200);
      const src = /<script src="([^"]+)"/.exec(await ok.text())![1]!;
      expect((await fetch(src)).status).toBe(200);
      expect((await fetch(`${server.url}/ui/agent/entrypoint.css`)).status).toBe(200);
      // Only bundle files are open: the rest of the API still needs the key.
      expect(
        (
          await fetch(`${server.url}/threads/search`, {
            method: 'POST',
            body: '{}',
            headers: { 'content-type': 'application/json' },
          })
        ).status,
      ).toBe(401);
      expect((await fetch(`${server.url}/assistants/agent/graph`)).status).toBe(401);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  it('answers bundle URLs behind mount_prefix and proxies: scheme-less for non-loopback hosts, as on the platform', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ap-as-ui-prefix-'));
    const server = await startServerProcess(['--config', PREFIXED, '--data-dir', dir, '--executor-threads', '0']);
    // The snippet's script URL for a POST with these headers (http.request: fetch may not set Host).
    const scriptSrc = (headers: Record<string, string>) =>
      new Promise<string>((resolve, reject) => {
        const body = JSON.stringify({ name: 'weather' });
        const req = httpRequest(
          `${server.url}/agents/app/ui/agent`,
          { method: 'POST', headers: { 'content-type': 'application/json', ...headers } },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () =>
              resolve(/<script src="([^"]+)"/.exec(text)?.[1] ?? `no script in ${res.statusCode}: ${text}`),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    try {
      const local = await scriptSrc({});
      expect(local).toBe(`${server.url}/agents/app/ui/agent/entrypoint.js`);
      expect((await fetch(local)).status).toBe(200);
      // Outside the prefix there is nothing.
      expect((await fetch(`${server.url}/ui/agent/entrypoint.js`)).status).toBe(404);
      expect(await scriptSrc({ host: 'agents.example.com' })).toBe(
        '//agents.example.com/agents/app/ui/agent/entrypoint.js',
      );
      expect(
        await scriptSrc({
          host: 'internal:8000',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'edge.example.com',
          'x-forwarded-prefix': '/edge/',
        }),
      ).toBe('https://edge.example.com/edge/agents/app/ui/agent/entrypoint.js');
      // Header values that could break out of the attribute are not used.
      expect(
        await scriptSrc({
          host: 'agents.example.com',
          'x-forwarded-prefix': '/x" onload="alert(1)',
          'x-forwarded-proto': 'javascript',
        }),
      ).toBe('//agents.example.com/agents/app/ui/agent/entrypoint.js');
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
