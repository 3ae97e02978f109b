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
});
