#!/usr/bin/env node
// The one binary. TypeScript sources (ours and users' graphs) load through tsx, so no build step is needed.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
await main(process.argv.slice(2));
