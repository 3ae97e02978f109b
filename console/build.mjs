// Builds the web console into dist/console (run by `npm ci` through "prepare", and by `npm run build:console`).
// An install without dev dependencies (a production image's `npm ci --omit=dev`) has no vite: it skips the build
// and says so, and the control plane then answers / with a hint instead of the console.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
try {
  require.resolve('vite');
  require.resolve('react');
} catch {
  console.warn('console: vite or react is not installed (production install?); dist/console not built');
  process.exit(0);
}
// The caller's NODE_ENV (vitest sets "test") would otherwise give React's development build.
process.env.NODE_ENV = 'production';
const { build } = await import('vite');
await build({ configFile: fileURLToPath(new URL('./vite.config.ts', import.meta.url)), mode: 'production' });
console.log('console: built into dist/console');
