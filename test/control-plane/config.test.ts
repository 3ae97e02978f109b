// The control plane's input bounds, custom domains and secret key: defaults, then environment, then flags; bad values
// are usage errors naming the flag.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { controlPlaneCommand, parseControlPlaneConfig } from '../../src/control-plane/config.ts';
import { formatHelp, UsageError } from '../../src/lib/cli-args.ts';

describe('agentplane control-plane input settings', () => {
  it('defaults: scale 10, 4 CPUs, 8192 MB, no custom domains, no public host, no secret key', () => {
    const c = parseControlPlaneConfig([], {})!;
    expect(c.policy).toEqual({ maxScale: 10, maxCpu: 4, maxMemoryMb: 8192, allowedCustomDomains: [] });
    expect(c.secretKey).toBeUndefined();
  });

  it('environment, then flags', () => {
    const key = randomBytes(32);
    const env = {
      AGENTPLANE_MAX_SCALE: '20',
      AGENTPLANE_MAX_CPU: '8.5',
      AGENTPLANE_MAX_MEMORY_MB: '16384',
      AGENTPLANE_ALLOWED_CUSTOM_DOMAINS: 'agents.example.com, *.Bots.Example.org.',
      AGENTPLANE_PUBLIC_HOST: 'https://API.example.com/',
      AGENTPLANE_SECRET_KEY: key.toString('base64'),
    };
    const c = parseControlPlaneConfig([], env)!;
    expect(c.policy).toEqual({
      maxScale: 20,
      maxCpu: 8.5,
      maxMemoryMb: 16384,
      allowedCustomDomains: ['agents.example.com', 'bots.example.org'],
      publicHost: 'api.example.com',
    });
    expect(c.secretKey!.equals(key)).toBe(true);
    const f = parseControlPlaneConfig(
      ['--max-scale', '3', '--allowed-custom-domains', '*', '--public-host', 'cp.example.com'],
      env,
    )!;
    expect(f.policy).toMatchObject({
      maxScale: 3,
      maxCpu: 8.5,
      allowedCustomDomains: ['*'],
      publicHost: 'cp.example.com',
    });
  });

  it('bad values name the flag', () => {
    expect(() => parseControlPlaneConfig(['--max-scale', 'lots'], {})).toThrow(/--max-scale/);
    expect(() => parseControlPlaneConfig(['--max-cpu', '-1'], {})).toThrow(/--max-cpu/);
    expect(() => parseControlPlaneConfig([], { AGENTPLANE_MAX_MEMORY_MB: '1.5' })).toThrow(/--max-memory-mb/);
    expect(() => parseControlPlaneConfig(['--allowed-custom-domains', 'ok.example.com,bad domain'], {})).toThrow(
      /--allowed-custom-domains/,
    );
    expect(() => parseControlPlaneConfig([], { AGENTPLANE_SECRET_KEY: 'c2hvcnQ=' })).toThrow(UsageError);
    expect(() => parseControlPlaneConfig([], { AGENTPLANE_SECRET_KEY: 'c2hvcnQ=' })).toThrow(
      /AGENTPLANE_SECRET_KEY.*32 bytes/,
    );
  });

  it('--help lists every setting with its variable', () => {
    const help = formatHelp(controlPlaneCommand);
    for (const v of [
      'AGENTPLANE_MAX_SCALE',
      'AGENTPLANE_MAX_CPU',
      'AGENTPLANE_MAX_MEMORY_MB',
      'AGENTPLANE_ALLOWED_CUSTOM_DOMAINS',
      'AGENTPLANE_PUBLIC_HOST',
      'AGENTPLANE_SECRET_KEY',
    ]) {
      expect(help).toContain(v);
    }
  });

  it('per-workspace quotas: defaults, environment, flags; 0 = no limit; a bad value names its flag', () => {
    expect(parseControlPlaneConfig([], {})!.quotas).toEqual({
      deployments: 25,
      revisionsPerHour: 60,
      listeners: 10,
      integrations: 25,
      authProviders: 10,
    });
    const cfg = parseControlPlaneConfig(['--quota-deployments', '3', '--quota-auth-providers', '0'], {
      AGENTPLANE_QUOTA_DEPLOYMENTS: '7',
      AGENTPLANE_QUOTA_REVISIONS_PER_HOUR: '5',
    })!;
    expect(cfg.quotas).toMatchObject({ deployments: 3, revisionsPerHour: 5, authProviders: 0 });
    for (const bad of ['-1', '2.5', 'lots']) {
      expect(() => parseControlPlaneConfig(['--quota-listeners', bad], {})).toThrow(UsageError);
      expect(() => parseControlPlaneConfig(['--quota-listeners', bad], {})).toThrow(/--quota-listeners/);
    }
    expect(() => parseControlPlaneConfig([], { AGENTPLANE_QUOTA_INTEGRATIONS: 'x' })).toThrow(/--quota-integrations/);
  });
});
