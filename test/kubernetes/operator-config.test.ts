import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/lib/cli-args.ts';
import { operatorCommand, parseOperatorConfig } from '../../src/operator/config.ts';

describe('agentplane operator configuration', () => {
  it('reads the variables the Helm chart sets', () => {
    const c = parseOperatorConfig([], {
      AGENTPLANE_NAMESPACE: 'agents',
      POD_NAMESPACE: 'agentplane',
      POD_NAME: 'agentplane-operator-abc',
      AGENTPLANE_REGISTRY: 'registry.example.com/agents',
      AGENTPLANE_PUSH_SECRET: 'push',
      AGENTPLANE_BASE_IMAGE: 'registry.example.com/agentplane:1',
      AGENTPLANE_LEADER_ELECT: 'true',
      AGENTPLANE_LEASE_DURATION: '20',
      AGENTPLANE_BASE_DOMAIN: 'agents.example.com',
      AGENTPLANE_INGRESS_CLASS: '',
      AGENTPLANE_DEFAULT_CPU: '0.25',
      AGENTPLANE_POSTGRES_MODE: 'external',
    })!;
    expect(c).toMatchObject({ namespace: 'agents', leaseNamespace: 'agentplane', identity: 'agentplane-operator-abc', leaderElect: true, leaseDurationMs: 20_000 });
    expect(c.runtime).toMatchObject({
      registry: 'registry.example.com/agents',
      pushSecretName: 'push',
      baseImage: 'registry.example.com/agentplane:1',
      gitImage: 'registry.example.com/agentplane:1',
      ingress: { baseDomain: 'agents.example.com' },
      defaults: { cpu: 0.25, memoryMb: 512 },
      postgres: { mode: 'external', image: 'postgres:16-alpine', storageSize: '1Gi' },
    });
    expect(c.runtime.ingress.className).toBeUndefined(); // empty values from the chart mean "unset"
  });

  it('lets flags win over the environment', () => {
    const c = parseOperatorConfig(['--namespace', 'flagged', '--leader-elect', 'false'], { AGENTPLANE_NAMESPACE: 'env', AGENTPLANE_LEADER_ELECT: 'true' })!;
    expect([c.namespace, c.leaderElect]).toEqual(['flagged', false]);
  });

  it.each([
    [['--lease-duration', 'soon'], /--lease-duration/],
    [['--postgres-mode', 'internal'], /--postgres-mode/],
    [['--namespace', 'Not_A_Name'], /--namespace/],
    [['--leader-elect', 'yes'], /--leader-elect/],
    [['--no-such-flag'], /no-such-flag/],
  ])('refuses %j naming the flag', (argv, message) => {
    expect(() => parseOperatorConfig(argv, {})).toThrow(UsageError);
    expect(() => parseOperatorConfig(argv, {})).toThrow(message);
  });

  it('documents every flag in --help', () => {
    const help = execFileSync(process.execPath, [join(import.meta.dirname, '../../bin/agentplane.mjs'), 'operator', '--help'], { encoding: 'utf8' });
    for (const flag of Object.keys(operatorCommand.options)) expect(help).toContain(`--${flag}`);
    expect(help).toContain('AGENTPLANE_REGISTRY');
  });
});
