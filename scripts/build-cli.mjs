// Bundles agentplane's own code (src/cli.ts and what it imports; packages stay external) into dist/cli, so that
// bin/agentplane.mjs starts without tsx's module hooks. Lazy command imports stay lazy (code splitting). The
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
  packages: 'external',
  chunkNames: 'chunks/[name]-[hash]',
  sourcemap: 'linked',
  metafile: true,
  logLevel: 'warning',
});
// An input saved after the build started counts as newer than the bundle.
const inputs = Object.keys(result.metafile.inputs).filter((f) => !f.includes('node_modules/'));
writeFileSync(path.join(outdir, 'manifest.json'), `${JSON.stringify({ builtFrom: startedAt, inputs }, null, 2)}\n`);
