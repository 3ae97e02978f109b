// A page on @langchain/react's useStream (v1, the v2 thread protocol) in real Chromium against a real agent server:
// the AI message grows token by token, the tool's result and the interrupt show, and answering it finishes the run;
// a second page on the same thread drops the interrupt once the first answers it (input.answered); a model's tool
// call grows piece by piece (tool-call-delta); a second message while a run streams interrupts that run (useStream's
// default multitask strategy) and the new one finishes.
// The page is built with Vite from test/fixtures/protocol/web and served from another origin (CORS, as an app
// would be).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import react from '@vitejs/plugin-react';
import { Client } from '@langchain/langgraph-sdk-v1';
import { chromium, type Browser, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needsTool } from '../../support/system-tools.ts';
import { EXECUTOR_THREAD, startServerProcess, type ServerProc } from '../helpers/process.ts';

const CONFIG = new URL('../../fixtures/protocol/langgraph.json', import.meta.url).pathname;
const PAGE = new URL('../../fixtures/protocol/web/', import.meta.url).pathname;
const CHROMIUM = process.env.AGENTPLANE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = needsTool('chromium', 'test/agent-server/protocol/protocol-react.test.ts');
const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };

describe('useStream (@langchain/react) in Chromium', { timeout: 120_000 }, () => {
  let dir: string;
  let agent: ServerProc;
  let site: Server;
  let siteUrl: string;
  let browser: Browser;

  beforeAll(async () => {
    if (!HAVE_CHROMIUM) return;
    dir = mkdtempSync(join(tmpdir(), 'ap-protocol-react-'));
    const out = join(dir, 'site');
    await build({
      root: PAGE,
      base: './',
      logLevel: 'warn',
      mode: 'production',
      configFile: false,
      plugins: [react()],
      // @langchain/react 1.1 pins SDK 1.11; the page runs it on SDK 1.15 (as an app that updates the SDK does,
      // with an npm override), whose stream controller knows input.answered.
      resolve: {
        alias: [{ find: /^@langchain\/langgraph-sdk(\/.*)?$/, replacement: '@langchain/langgraph-sdk-v1$1' }],
      },
      build: { outDir: out, emptyOutDir: true, chunkSizeWarningLimit: 10_000 },
    });
    site = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      const file = join(out, path === '/' ? 'index.html' : path);
      if (!file.startsWith(out) || !existsSync(file)) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
      res.end(readFileSync(file));
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    siteUrl = `http://127.0.0.1:${(site.address() as { port: number }).port}`;
    agent = await startServerProcess([...EXECUTOR_THREAD, '--config', CONFIG, '--data-dir', join(dir, 'data')]);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    if (site) await new Promise((r) => site.close(r));
    await agent?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('streams a turn token by token, shows the interrupt and finishes once it is answered', async () => {
    const page = await browser.newPage();
    const logs: string[] = [];
    page.on('console', (m) => logs.push(m.text()));
    await page.goto(`${siteUrl}/?api=${encodeURIComponent(agent.url)}`);
    await page.click('#send');
    const text = 'Hello from React, token by token';
    try {
      await page.waitForFunction("document.getElementById('interrupt').textContent !== ''", undefined, {
        timeout: 60_000,
      });
    } catch (err) {
      throw new Error(`no interrupt; page: ${await page.content()}\nconsole: ${logs.join('\n')}`, { cause: err });
    }
    // The interrupt and the message's last token come on different subscriptions: either may render first.
    await page.waitForFunction(`document.getElementById('ai').textContent === ${JSON.stringify(text)}`, undefined, {
      timeout: 30_000,
    });
    expect(JSON.parse((await page.textContent('#interrupt'))!)).toEqual({ question: 'Proceed?' });
    expect(await page.textContent('#weather')).toBe('sunny in Paris');
    // The message grew in steps as tokens came, not in one piece at the end.
    const lengths = (await page.evaluate('window.__lengths')) as number[];
    expect(lengths.filter((n) => n > 0 && n < text.length).length).toBeGreaterThan(3);

    await page.click('#yes');
    await page.waitForFunction("document.getElementById('answer').textContent === 'yes'", undefined, {
      timeout: 60_000,
    });
    expect(await page.textContent('#error')).toBe('');
    await page.close();
  });

  /** Waits until the element's text satisfies `test` (a JS expression over `t`), naming what the page showed. */
  async function until(page: Page, id: string, test: string, what: string): Promise<void> {
    try {
      await page.waitForFunction(`(t => ${test})(document.getElementById(${JSON.stringify(id)}).textContent)`, null, {
        timeout: 60_000,
      });
    } catch (err) {
      throw new Error(`${what}; page: ${await page.content()}`, { cause: err });
    }
  }

  it('a second page on the thread drops the interrupt once the first answers it (input.answered)', async () => {
    const first = await browser.newPage();
    const second = await browser.newPage();
    try {
      await first.goto(`${siteUrl}/?api=${encodeURIComponent(agent.url)}`);
      await first.click('#send');
      await until(first, 'interrupt', "t !== ''", 'no interrupt on the first page');
      const threadId = (await first.textContent('#thread'))!;
      expect(threadId).toMatch(/^[0-9a-f-]{36}$/);

      await second.goto(`${siteUrl}/?api=${encodeURIComponent(agent.url)}&thread=${threadId}`);
      await until(second, 'interrupt', "t !== ''", 'the second page does not show the waiting interrupt');
      expect(JSON.parse((await second.textContent('#interrupt'))!)).toEqual({ question: 'Proceed?' });

      await first.click('#yes');
      // The second page never answered: it learns from the thread that the interrupt is answered, and the result.
      await until(second, 'interrupt', "t === ''", 'the second page still shows the answered interrupt');
      await until(second, 'answer', "t === 'yes'", 'the second page does not show the answer');
      await until(first, 'answer', "t === 'yes'", 'the first page does not show the answer');
      expect(await second.textContent('#error')).toBe('');
    } finally {
      await first.close();
      await second.close();
    }
  });

  it("a model's tool call streams into the page piece by piece (tool-call-delta) and ends as the whole call", async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${siteUrl}/?api=${encodeURIComponent(agent.url)}&assistant=toolcaller`);
      await page.click('#call');
      await until(page, 'toolcalls', `t === 'weather {"city":"Paris"}'`, 'the whole tool call never showed');
      expect(await page.textContent('#error')).toBe('');
      // The arguments showed before they were whole, as their pieces came (200 ms apart): the page saw them grow.
      const seen = (await page.evaluate('window.__toolArgs')) as string[];
      expect(seen.at(-1)).toBe('{"city":"Paris"}');
      expect(seen.length).toBeGreaterThan(1);
    } finally {
      await page.close();
    }
  });

  it("a second message while a run streams interrupts it (useStream's default) and the second run finishes", async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${siteUrl}/?api=${encodeURIComponent(agent.url)}`);
      await page.click('#slow');
      // Some tokens of the slow answer are on the page: the run is streaming.
      await until(page, 'ai', 't.length > 3', 'the slow answer never started');
      const threadId = (await page.textContent('#thread'))!;
      await page.click('#again');
      await until(page, 'ai', "t === 'Second turn'", 'the second answer never arrived');
      await until(page, 'loading', "t === 'false'", 'the page still loads');
      expect(await page.textContent('#error')).toBe('');

      const client = new Client({ apiUrl: agent.url, callerOptions: { maxRetries: 0 } });
      const runs = await client.runs.list(threadId);
      // Newest first: the second run finished; the first was interrupted by it, not left to finish or queued.
      expect(runs.map((r) => r.status)).toEqual(['success', 'interrupted']);
      expect(runs[0]!.multitask_strategy).toBe('interrupt');
      const state = await client.threads.getState<{ messages: Array<{ type: string; content: unknown }> }>(threadId);
      const humans = state.values.messages.filter((m) => m.type === 'human').map((m) => m.content);
      expect(humans).toEqual(['first', 'second']);
      expect(JSON.stringify(state.values.messages.at(-1)!.content)).toContain('Second turn');
    } finally {
      await page.close();
    }
  });
});
