// The shims in src/agent-server/shims/ (and the PostgreSQL checkpointer) lean on LangChain internals that a minor
// release may change. Each was checked against the versions recorded in shims/checked-versions.json; this test
// fails when package-lock.json resolves any copy of those packages to another version, naming the shims to recheck
// (shims/README.md says how), so an upgrade cannot land without somebody looking at them.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const SHIMS = path.join(ROOT, 'src/agent-server/shims');

type Checked = Record<string, { version: string; shims: string[] }>;
const checked = JSON.parse(readFileSync(path.join(SHIMS, 'checked-versions.json'), 'utf8')) as Checked;
const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { version?: string }>;
};

/** Every copy of a package the lockfile installs (top level and nested), as "where@version". */
function installed(name: string): { where: string; version: string }[] {
  return Object.entries(lock.packages)
    .filter(([where]) => where === `node_modules/${name}` || where.endsWith(`/node_modules/${name}`))
    .map(([where, p]) => ({ where, version: p.version ?? '?' }));
}

describe('LangChain internals the shims rely on', () => {
  it.each(Object.keys(checked))('%s: every installed copy is the version the shims were checked against', (name) => {
    const { version, shims } = checked[name]!;
    const copies = installed(name);
    expect(copies.length, `${name} is not in package-lock.json: remove it from checked-versions.json`).toBeGreaterThan(
      0,
    );
    for (const copy of copies) {
      expect(
        copy.version,
        `${copy.where} is ${copy.version}, but the shims were checked against ${version}: recheck ${shims.join(', ')} ` +
          `(src/agent-server/shims/README.md), then record ${copy.version} in checked-versions.json`,
      ).toBe(version);
    }
  });

  it('every shim is listed in the README and named by a package it relies on, and every name is a file', () => {
    const readme = readFileSync(path.join(SHIMS, 'README.md'), 'utf8');
    const named = new Set(Object.values(checked).flatMap((c) => c.shims));
    for (const file of readdirSync(SHIMS).filter((f) => f.endsWith('.ts'))) {
      expect(readme, `${file} is missing from shims/README.md`).toContain(`\`${file}\``);
      // thread-env.ts relies on Node alone; every other shim names a LangChain package it is checked against.
      if (file !== 'thread-env.ts') expect(named, `${file} is in no package's list`).toContain(file);
    }
    for (const file of named) expect(existsSync(path.join(SHIMS, file)), `${file} does not exist`).toBe(true);
  });
});
