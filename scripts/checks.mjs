// The static checks `npm test` runs before the suite: ESLint, Prettier --check, the two TypeScript projects, knip
// (no dead exports or files; knip.json), dependency-cruiser (no import cycles, the layering of
// .dependency-cruiser.cjs, tolerating only the known violations listed beside it) and the test layout (test/ mirrors
// src/: test-layout.ts).
// They are independent and each uses one core, so they run side by side; each one's output is printed whole when it
// ends (not interleaved), and the exit code is non-zero when any of them failed.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
// The folder of an installed package; read from node_modules directly when its exports hide package.json (knip).
const packageDir = (pkg) => {
  try {
    return path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    return path.join(import.meta.dirname, '..', 'node_modules', pkg);
  }
};
const bin = (pkg, name) => {
  const manifest = JSON.parse(readFileSync(path.join(packageDir(pkg), 'package.json'), 'utf8'));
  const rel = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin[name];
  return path.join(packageDir(pkg), rel);
};

const CHECKS = [
  { name: 'eslint', args: [bin('eslint', 'eslint'), '.'] },
  {
    name: 'prettier --check',
    args: [bin('prettier', 'prettier'), '--check', '--log-level', 'warn', '**/*.{ts,tsx,mjs,js,css}'],
  },
  // TypeScript 7 (the native compiler, installed as typescript-native) checks types in a third of 5.9's CPU; 5.9 stays
  // the `typescript` package, whose JavaScript API typescript-eslint, knip and the agent server's type reader use.
  { name: 'tsc --noEmit', args: [bin('typescript-native', 'tsc'), '--noEmit'] },
  { name: 'tsc --noEmit -p console', args: [bin('typescript-native', 'tsc'), '--noEmit', '-p', 'console'] },
  { name: 'test layout', args: ['--import', 'tsx', path.join(import.meta.dirname, 'test-layout.ts')] },
  { name: 'knip', args: [bin('knip', 'knip'), '--include', 'exports,files', '--no-progress'] },
  {
    name: 'depcruise',
    args: [
      bin('dependency-cruiser', 'depcruise'),
      'src',
      '--config',
      '.dependency-cruiser.cjs',
      '--ignore-known',
      '--output-type',
      'err',
    ],
  },
];

const only = process.argv.slice(2);
const chosen = only.length ? CHECKS.filter((c) => only.some((o) => c.name.startsWith(o))) : CHECKS;

const results = await Promise.all(
  chosen.map(
    (c) =>
      new Promise((resolve) => {
        const started = Date.now();
        const child = spawn(process.execPath, c.args, { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.stderr.on('data', (d) => (out += d));
        child.on('error', (err) => resolve({ ...c, code: 1, out: `${out}${err.message}\n`, ms: Date.now() - started }));
        child.on('close', (code, signal) =>
          resolve({ ...c, code: code ?? (signal ? 1 : 0), out, ms: Date.now() - started }),
        );
      }),
  ),
);

let failed = 0;
for (const r of results) {
  const secs = (r.ms / 1000).toFixed(1);
  if (r.code === 0) {
    process.stdout.write(`ok    ${r.name} (${secs} s)\n`);
    if (r.out.trim()) process.stdout.write(r.out);
  } else {
    failed++;
    process.stdout.write(`FAIL  ${r.name} (${secs} s, exit ${r.code})\n${r.out}`);
  }
}
process.exitCode = failed ? 1 : 0;
