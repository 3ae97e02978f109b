#!/usr/bin/env node
// The one binary. Our code runs from the bundle in dist/cli (built by `npm ci`, scripts/build-cli.mjs) while it is
// up to date with every source file it was built from; otherwise (sources edited since, or no bundle) straight from
// the TypeScript sources through tsx. Users' TypeScript loads through tsx either way (src/lib/typescript-imports.ts).
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

function freshBundle() {
  if (process.env.AGENTPLANE_FROM_SOURCES === '1') return null;
  try {
    const { builtFrom, inputs } = JSON.parse(readFileSync(join(root, 'dist/cli/manifest.json'), 'utf8'));
    for (const file of inputs) if (statSync(join(root, file)).mtimeMs > builtFrom) return null;
    return join(root, 'dist/cli/cli.js');
  } catch {
    return null;
  }
}

const bundle = freshBundle();
let cli;
if (bundle) {
  // Read by src/lib/typescript-imports.ts: tsx registers late, worker threads start from this bundle's entries.
  globalThis[Symbol.for('agentplane.bundle')] = dirname(bundle);
  cli = await import(pathToFileURL(bundle).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import('../src/cli.ts');
}
await cli.main(process.argv.slice(2));
