// Pure parts of crons and webhooks: schedules, and which webhook targets may be reached.
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/lib/errors.ts';
import { checkTimezone, nextTick } from '../../../src/agent-server/services/cron-scheduler.ts';
import { isPublicAddress } from '../../../src/lib/addresses.ts';
import { hostRule, resolveHeaders, webhookUrlProblem } from '../../../src/agent-server/runs/webhook-policy.ts';

describe('cron schedules', () => {
  const at = new Date('2026-03-10T10:17:30Z');

  it.each([
    ['*/15 * * * *', null, '2026-03-10T10:30:00.000Z'],
    ['0 9 * * *', null, '2026-03-11T09:00:00.000Z'],
    ['0 9 * * *', 'Europe/Paris', '2026-03-11T08:00:00.000Z'],
    ['*/10 * * * * *', null, '2026-03-10T10:17:40.000Z'],
    ['@hourly', null, '2026-03-10T11:00:00.000Z'],
  ])('%s in %s after 10:17:30Z is %s', (schedule, tz, expected) => {
    expect(nextTick(schedule, tz, at)?.toISOString()).toBe(expected);
  });

  it('counts from the moment given, so ticks missed meanwhile collapse into the next one', () => {
    // Every minute, asked an hour after the last tick: one next tick, not sixty.
    expect(nextTick('* * * * *', null, new Date('2026-03-10T11:17:30Z'))?.toISOString()).toBe(
      '2026-03-10T11:18:00.000Z',
    );
  });

  it('has no next tick past end_time', () => {
    expect(nextTick('0 9 * * *', null, at, '2026-03-11T08:59:59Z')).toBeNull();
    expect(nextTick('0 9 * * *', null, at, '2026-03-11T09:00:00Z')?.toISOString()).toBe('2026-03-11T09:00:00.000Z');
  });

  it.each(['not a schedule', '61 * * * *', '* * *', '* * * * * * * *', ''])('refuses %j, quoting it', (schedule) => {
    expect(() => nextTick(schedule, null, at)).toThrow(ValidationError);
    expect(() => nextTick(schedule, null, at)).toThrow(`"${schedule}"`);
  });

  it('refuses an unknown time zone', () => {
    expect(() => checkTimezone('Mars/Olympus')).toThrow(/timezone: unknown time zone "Mars\/Olympus"/);
    expect(() => checkTimezone('America/New_York')).not.toThrow();
  });
});

describe('webhook targets', () => {
  it.each([
    ['8.8.8.8', true],
    ['2606:4700:4700::1111', true],
    ['127.0.0.1', false],
    ['127.1.2.3', false],
    ['10.0.0.5', false],
    ['172.16.3.4', false],
    ['192.168.1.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['255.255.255.255', false],
    ['224.0.0.1', false],
    ['::1', false],
    ['::', false],
    ['fe80::1', false],
    ['fd00::1', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:7f00:1', false],
    ['::ffff:8.8.8.8', true],
    ['not an address', false],
  ])('%s public: %s', (address, expected) => {
    expect(isPublicAddress(address)).toBe(expected);
  });

  it('reads decimal, octal and hex IPv4 hosts as the dotted address they are', () => {
    // The delivery checks URL.hostname, which the WHATWG parser normalises.
    expect(new URL('http://2130706433/').hostname).toBe('127.0.0.1');
    expect(new URL('http://0x7f.1/').hostname).toBe('127.0.0.1');
    expect(new URL('http://017700000001/').hostname).toBe('127.0.0.1');
    expect(isPublicAddress(new URL('http://0/').hostname)).toBe(false);
  });

  it.each([
    ['hooks.example.com', [], 'public'],
    ['hooks.example.com', ['*'], 'any'],
    ['hooks.example.com', ['hooks.example.com'], 'listed'],
    ['HOOKS.example.com.', ['hooks.example.com'], 'listed'],
    ['a.corp.example', ['*.corp.example'], 'listed'],
    ['corp.example', ['*.corp.example'], 'refused'],
    ['evilcorp.example', ['*.corp.example'], 'refused'],
    ['other.example.com', ['hooks.example.com'], 'refused'],
    ['[::1]', ['::1'], 'listed'],
  ])('host %s with --webhook-allow %j: %s', (host, allow, expected) => {
    expect(hostRule(host, allow)).toBe(expected);
  });

  it.each([
    ['https://hooks.example.com/x', {}, null],
    ['http://10.0.0.1/x', {}, /not public/],
    ['http://10.0.0.1/x', { allow: ['10.0.0.1'] }, null],
    ['http://hooks.example.com/x', { requireHttps: true }, /https/],
    ['https://hooks.example.com:8443/x', { allowedPorts: [443] }, /port 8443/],
    ['https://hooks.example.com/x', { allowedPorts: [443] }, null],
    ['https://other.example.com/x', { allowedDomains: ['*.corp.example'] }, /allowed_domains/],
    ['https://a.corp.example/x', { allowedDomains: ['*.corp.example'] }, null],
    ['https://hooks.example.com/' + 'x'.repeat(100), { maxUrlLength: 50 }, /longer than 50/],
    ['gopher://hooks.example.com/', {}, /http/],
    // Relative webhooks: the deployment's own custom routes, unless there are none or they are turned off; the
    // network policy does not apply to them.
    ['/hooks/done', { requireHttps: true, allowedPorts: [443] }, null],
    ['/hooks/done', { selfRoutesProblem: 'no http.app' }, /no http\.app/],
    ['/hooks/' + 'x'.repeat(100), { maxUrlLength: 50 }, /longer than 50/],
    ['//evil.example/x', {}, /absolute URL/],
  ])('%s under %j', (url, policy, expected) => {
    const problem = webhookUrlProblem(url, { allow: [], ...policy });
    if (expected === null) expect(problem).toBeNull();
    else expect(problem).toMatch(expected);
  });

  it('resolves header templates only from variables with the env prefix', () => {
    const env = { LG_WEBHOOK_TOKEN: 't0k', DATABASE_URL: 'postgres://secret' };
    expect(
      resolveHeaders({ Authorization: 'Bearer ${{ env.LG_WEBHOOK_TOKEN }}', X: 'plain' }, 'LG_WEBHOOK_', env),
    ).toEqual({ Authorization: 'Bearer t0k', X: 'plain' });
    expect(() => resolveHeaders({ X: '${{ env.DATABASE_URL }}' }, 'LG_WEBHOOK_', env)).toThrow(/env_prefix/);
    expect(() => resolveHeaders({ X: '${{ env.LG_WEBHOOK_MISSING }}' }, 'LG_WEBHOOK_', env)).toThrow(/not set/);
  });
});
