// The operator's runtime flags take their schema from their path in the Kubernetes runtime's own schema: one
// declaration of each setting's type, checked at its flag.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseOperatorConfig } from '../../../src/operator/config.ts';
import { operatorCommand } from '../../../src/operator/flags.ts';
import { fieldAt, runtimeOptions } from '../../../src/operator/flags/runtime.ts';
import { kubernetesRuntimeConfigSchema } from '../../../src/operator/runtimes/kubernetes/config.ts';

describe('operator runtime flags: the schema of their path in the runtime schema', () => {
  const runtimeFlags = Object.entries(operatorCommand.options).flatMap(([name, o]) =>
    o.path?.startsWith('runtime.') ? [[name, o.path, o.schema] as const] : [],
  );

  it('covers every runtime flag', () => expect(runtimeFlags.length).toBeGreaterThan(40));

  it.each(runtimeFlags)('--%s is %s', (_name, path, schema) => {
    expect(schema).toBe(fieldAt(kubernetesRuntimeConfigSchema, path.slice('runtime.'.length)));
  });

  it('goes through defaults and optionals, and refuses a path the runtime has not', () => {
    const shape = kubernetesRuntimeConfigSchema.shape;
    expect(fieldAt(kubernetesRuntimeConfigSchema, 'registry')).toBe(shape.registry);
    expect(fieldAt(kubernetesRuntimeConfigSchema, 'postgres.mode')).toBeInstanceOf(z.ZodDefault);
    expect(() => fieldAt(kubernetesRuntimeConfigSchema, 'postgres.nope')).toThrow(
      'no setting postgres.nope in the schema (at nope)',
    );
    expect(() => runtimeOptions({ nope: { type: 'string', description: '', path: 'runtime.ingress.nope' } })).toThrow(
      'no setting ingress.nope in the schema (at nope)',
    );
  });

  it('a bad value is refused by that schema, naming the flag and its variable', () => {
    expect(() => parseOperatorConfig(['--postgres-mode', 'sometimes'], {})).toThrow(/^invalid --postgres-mode: /);
    expect(() => parseOperatorConfig([], { AGENTPLANE_BUILD_CPU_LIMIT: 'lots' })).toThrow(
      'invalid --build-cpu-limit (AGENTPLANE_BUILD_CPU_LIMIT): must be a Kubernetes quantity (e.g. 500m, 2Gi)',
    );
  });
});
