// Bundles agentplane's own code (src/cli.ts and what it imports, with the few packages named below) into dist/cli,
// so that bin/agentplane.mjs starts without tsx's module hooks. Lazy command imports stay lazy (code splitting). The
// manifest lists every input file: bin/agentplane.mjs uses the bundle only while none of them changed since.
// Run by `npm ci` (prepare) and `npm run build:cli`.
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// --outdir DIR: somewhere else (the bundle's test); bin/agentplane.mjs only ever looks in dist/cli.
const at = process.argv.indexOf('--outdir');
const outdir = at > 0 ? path.resolve(process.argv[at + 1]) : path.join(root, 'dist/cli');
const startedAt = Date.now();
// The CommonJS packages every process loads at start (the HTTP server, metrics, OpenAPI, WebSocket) go into the
// bundle with what they require: loaded as a few large modules instead of ~400 small files, each resolved, read and
// wrapped on its own, a start costs less (bench/cold-start.ts). Everything else stays a package import: LangChain's
// packages and zod (users' graphs must share their instances with ours), pino and its transports (worker threads load
// them by file), native addons, packages that serve files of their own (swagger-ui) and what is loaded only on
// demand. A dependency update reaches the bundle by the rebuild `npm ci` / `npm install` run (prepare).
const INLINE = new Set([
  'fastify',
  '@fastify/swagger',
  '@fastify/websocket',
  'prom-client',
  'ws',
  'ipaddr.js',
  'semver',
  'dotenv',
]);
const SHARED = new Set([
  'zod',
  'fastify-type-provider-zod',
  'langsmith',
  'pino',
  'pino-pretty',
  'thread-stream',
  'sonic-boom',
  'pino-abstract-transport',
  'real-require',
  'better-sqlite3',
  '@fastify/swagger-ui',
  'bufferutil',
  'utf-8-validate',
]);
const packageName = (spec) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');
const inlinePackages = {
  name: 'inline-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      const name = packageName(args.path);
      if (args.path.startsWith('node:') || SHARED.has(name) || name.startsWith('@langchain/'))
        return { external: true };
      // Inside an inlined package everything it requires comes along; from our code only the packages named above.
      if (args.importer.includes(`${path.sep}node_modules${path.sep}`) || INLINE.has(name)) return undefined;
      return { external: true };
    });
  },
};
// Chunk names carry hashes: old ones would pile up.
rmSync(outdir, { recursive: true, force: true });
const result = await build({
  absWorkingDir: root,
  // The worker threads' entries too: a server running from the bundle starts its threads from it (their code then
  // loads without tsx's hooks and shares chunks with the CLI's).
  entryPoints: {
    cli: 'src/cli.ts',
    'executor-worker': 'src/agent-server/runs/executor-worker.ts',
    'typescript-types-worker': 'src/agent-server/graphs/typescript-types-worker.ts',
  },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  plugins: [inlinePackages],
  // The inlined CommonJS code requires Node's modules and the packages left outside: an ES module has no require.
  banner: {
    js: "import { createRequire as __agentplaneRequire } from 'node:module'; const require = __agentplaneRequire(import.meta.url);",
  },
  chunkNames: 'chunks/[name]-[hash]',
  sourcemap: 'linked',
  metafile: true,
  logLevel: 'warning',
});
// An input saved after the build started counts as newer than the bundle.
const inputs = Object.keys(result.metafile.inputs).filter((f) => !f.includes('node_modules/'));
writeFileSync(path.join(outdir, 'manifest.json'), `${JSON.stringify({ builtFrom: startedAt, inputs }, null, 2)}\n`);
