// A page on @langchain/react's useStream (v1, the v2 thread protocol) in real Chromium against a real agent server:
// the AI message grows token by token, the tool's result and the interrupt show, and answering it finishes the run.
// The page is built with Vite from test/fixtures/protocol/web and served from another origin (CORS, as an app
// would be).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { extname, join } from 'node:path';
import react from '@vitejs/plugin-react';
import { chromium, type Browser } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { needsTool } from '../support/system-tools.ts';
import { startServerProcess, type ServerProc } from './helpers/process.ts';

const CONFIG = new URL('../fixtures/protocol/langgraph.json', import.meta.url).pathname;
const PAGE = new URL('../fixtures/protocol/web/', import.meta.url).pathname;
const CHROMIUM = process.env.AGENTPLANE_CHROMIUM ?? '/usr/bin/chromium';
const HAVE_CHROMIUM = needsTool('chromium', 'test/agent-server/protocol-react.test.ts');
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
    agent = await startServerProcess(['--config', CONFIG, '--data-dir', join(dir, 'data')]);
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
});
