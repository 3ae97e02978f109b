// Protocol benchmark (not a test): time to first token and tokens/s of one chat turn through the older run stream
// (runs.stream, messages-tuple) and through the thread protocol (SDK 1.15 ThreadStream over SSE and over a
// WebSocket), against one real agent-server process on Postgres, the fake chat model of test/fixtures/streams (one
// character per token, no sleep: what is measured is the server and the client, not a model). The three take turns
// per sample, so changing background load hits them alike.
//
//   node --import tsx bench/protocol.ts                 # writes bench/results/protocol.md
//   node --import tsx bench/protocol.ts --samples 5 --tokens 500 --no-write
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client as LegacyClient } from '@langchain/langgraph-sdk';
import { Client } from '@langchain/langgraph-sdk-v1';
import pg from 'pg';
import WebSocket from 'ws';
import { startServerProcess } from '../test/agent-server/helpers/process.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CONFIG = path.join(root, 'test/fixtures/streams/langgraph.json');
const ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const { values: args } = parseArgs({
  options: {
    samples: { type: 'string', default: '10' },
    tokens: { type: 'string', default: '2000' },
    'no-write': { type: 'boolean', default: false },
  },
});
const SAMPLES = Number(args.samples);
const TOKENS = Number(args.tokens);
const text = 'abcdefghij'.repeat(Math.ceil(TOKENS / 10)).slice(0, TOKENS);

type Way = 'run stream (messages-tuple)' | 'protocol, SSE' | 'protocol, WebSocket';
interface Sample {
  ttftMs: number;
  tokensPerSec: number;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function main(): Promise<void> {
  const dbName = `ap_bench_protocol_${process.pid}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const dbUrl = ADMIN_URL.replace(/\/[^/]*$/, `/${dbName}`);
  const server = await startServerProcess(['--config', CONFIG, '--database-url', dbUrl]);
  const input = { text, messages: [{ role: 'user', content: 'go' }] };
  const results: Record<Way, Sample[]> = {
    'run stream (messages-tuple)': [],
    'protocol, SSE': [],
    'protocol, WebSocket': [],
  };
  try {
    const legacy = new LegacyClient({ apiUrl: server.url });
    const oldWay = async (): Promise<Sample> => {
      const t = await legacy.threads.create();
      const t0 = performance.now();
      let first = 0;
      let n = 0;
      for await (const e of legacy.runs.stream(t.thread_id, 'chat', { input, streamMode: ['messages-tuple'] })) {
        if (e.event !== 'messages') continue;
        if (!n) first = performance.now();
        n++;
      }
      const end = performance.now();
      if (n !== TOKENS) throw new Error(`run stream: ${n} tokens, expected ${TOKENS}`);
      return { ttftMs: first - t0, tokensPerSec: (n - 1) / ((end - first) / 1000) };
    };
    const protocolWay = async (transport: 'sse' | 'websocket'): Promise<Sample> => {
      const client = new Client({ apiUrl: server.url });
      const thread = client.threads.stream({
        assistantId: 'chat',
        transport,
        ...(transport === 'websocket' ? { webSocketFactory: (u: string) => new WebSocket(u) as never } : {}),
      });
      try {
        const sub = await thread.subscribe({ channels: ['messages', 'lifecycle'] });
        const it = (sub as unknown as AsyncIterable<{ method: string; params: { namespace: string[]; data: any } }>)[
          Symbol.asyncIterator
        ]();
        const t0 = performance.now();
        await thread.run.start({ input });
        let first = 0;
        let n = 0;
        for (;;) {
          const { value: e } = await it.next();
          if (e.method === 'messages' && e.params.data.event === 'content-block-delta') {
            if (!n) first = performance.now();
            n++;
          }
          if (e.method === 'lifecycle' && !e.params.namespace.length && e.params.data.event === 'completed') break;
        }
        const end = performance.now();
        if (n !== TOKENS) throw new Error(`protocol ${transport}: ${n} tokens, expected ${TOKENS}`);
        return { ttftMs: first - t0, tokensPerSec: (n - 1) / ((end - first) / 1000) };
      } finally {
        await thread.close();
      }
    };
    // One warm-up round (graph import, connections), then the samples.
    await oldWay();
    await protocolWay('sse');
    await protocolWay('websocket');
    for (let i = 0; i < SAMPLES; i++) {
      results['run stream (messages-tuple)'].push(await oldWay());
      results['protocol, SSE'].push(await protocolWay('sse'));
      results['protocol, WebSocket'].push(await protocolWay('websocket'));
    }
  } finally {
    await server.stop();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }

  const rows = (Object.keys(results) as Way[]).map((way) => {
    const s = results[way];
    const ttft = s.map((x) => x.ttftMs);
    const tps = s.map((x) => x.tokensPerSec);
    return `| ${way} | ${pct(ttft, 50).toFixed(0)} | ${pct(ttft, 90).toFixed(0)} | ${pct(tps, 50).toFixed(0)} | ${pct(tps, 10).toFixed(0)} |`;
  });
  const md = [
    '# Thread protocol vs run stream',
    '',
    `One chat turn of ${TOKENS} tokens (fake model, no sleep), ${SAMPLES} samples each, one agent-server process on`,
    `Postgres, client and server on one machine (${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(1)} at the end).`,
    'Time to first token counts from the request that starts the run (protocol: from `run.start`, with the',
    'subscription already open); tokens/s from the first token to the last. `node --import tsx bench/protocol.ts`.',
    '',
    '| way | first token p50 (ms) | p90 (ms) | tokens/s p50 | tokens/s p10 |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
  process.stdout.write(md);
  if (!args['no-write']) await writeFile(path.join(root, 'bench/results/protocol.md'), md);
}

await main();
