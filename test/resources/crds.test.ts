// crds/ must be exactly what the zod schemas generate, and structural enough for a real API server.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderCrd } from '../../crds/generate.ts';
import { buildCrds } from '../../src/resources/crd.ts';

const dir = resolve(import.meta.dirname, '../../crds');

function walk(node: unknown, path: string, visit: (n: Record<string, unknown>, path: string) => void): void {
  if (Array.isArray(node)) {
    for (const [i, n] of node.entries()) walk(n, `${path}[${i}]`, visit);
  } else if (node && typeof node === 'object') {
    visit(node as Record<string, unknown>, path);
    for (const [k, v] of Object.entries(node)) walk(v, `${path}.${k}`, visit);
  }
}

describe('crds/', () => {
  it('matches the zod schemas (run `npm run gen:crds` after changing src/resources)', () => {
    for (const { file, crd } of buildCrds()) {
      expect(readFileSync(resolve(dir, file), 'utf8'), `crds/${file} is stale`).toBe(renderCrd(crd));
    }
  });

  it('has structural schemas: a type everywhere, no $ref / anyOf null / additionalProperties:false / const', () => {
    for (const { file } of buildCrds()) {
      const crd = parse(readFileSync(resolve(dir, file), 'utf8'));
      const v = crd.spec.versions[0];
      expect(v.subresources).toEqual({ status: {} });
      expect(crd.spec.names.shortNames.length).toBeGreaterThan(0);
      expect(v.additionalPrinterColumns.map((c: { name: string }) => c.name)).toEqual(
        expect.arrayContaining([file === 'agentdeployments.yaml' ? 'Ready' : 'Status', 'Revision', 'Age']),
      );
      walk(v.schema.openAPIV3Schema, '', (n, path) => {
        const isSchema = 'type' in n || 'properties' in n || 'items' in n || 'enum' in n;
        if (!isSchema || path.endsWith('.properties')) return;
        expect(n.type, `${file}${path} needs a type`).toBeTypeOf('string');
        for (const banned of ['$ref', 'anyOf', 'oneOf', 'const', '$schema', 'propertyNames']) {
          expect(n, `${file}${path}`).not.toHaveProperty(banned);
        }
        expect(n.additionalProperties, `${file}${path}`).not.toBe(false);
      });
    }
  });

  it('AgentRevision spec is immutable; printer columns point at real fields', () => {
    const rev = parse(readFileSync(resolve(dir, 'agentrevisions.yaml'), 'utf8'));
    const schema = rev.spec.versions[0].schema.openAPIV3Schema;
    expect(schema.properties.spec['x-kubernetes-validations']).toEqual([
      { rule: 'self == oldSelf', message: 'spec is immutable' },
    ]);
    for (const c of rev.spec.versions[0].additionalPrinterColumns as { jsonPath: string }[]) {
      const [, top, field] = c.jsonPath.split('.');
      if (top === 'metadata') continue;
      expect(schema.properties[top!].properties, c.jsonPath).toHaveProperty(field!);
    }
  });
});
