// The listener's settings as its command line and environment give them: the cap on the wait between attempts to
// reach an unreachable control plane, and a bad value refused naming the flag.
import { describe, expect, it } from 'vitest';
import { parseListenerConfig } from '../../src/listener/config.ts';

const REQUIRED = [
  '--control-plane-url',
  'https://cp.example.com',
  '--tenant',
  'team-a',
  '--listener-id',
  '0b7c3a4e-5f6d-4e8f-9a0b-1c2d3e4f5a6b',
];
const ENV = { AGENTPLANE_LISTENER_API_KEY: 'apk_test' };

describe('agentplane listener --max-retry-delay', () => {
  it('defaults to 30 s and takes seconds, fractions included', () => {
    expect(parseListenerConfig(REQUIRED, ENV)!.maxRetryDelaySecs).toBe(30);
    expect(parseListenerConfig([...REQUIRED, '--max-retry-delay', '2'], ENV)!.maxRetryDelaySecs).toBe(2);
    expect(parseListenerConfig([...REQUIRED, '--max-retry-delay', '0.5'], ENV)!.maxRetryDelaySecs).toBe(0.5);
  });

  it.each(['0', '0.1', 'soon', '301'])('refuses %s, naming the flag', (value) => {
    expect(() => parseListenerConfig([...REQUIRED, '--max-retry-delay', value], ENV)).toThrow(
      /^invalid --max-retry-delay: /,
    );
  });
});
