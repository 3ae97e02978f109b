// Every spelling of an internal address that reaches the checks through a URL is internal: IPv6 literals that
// carry a loopback, private or link-local IPv4 address (mapped, compatible, NAT64, 6to4), written the ways an
// attacker would write them in a webhook or provider URL, judged after the URL parser has normalised them.
import { describe, expect, it } from 'vitest';
import { isPublicAddress } from '../../src/lib/addresses.ts';
import { webhookUrlProblem } from '../../src/agent-server/runs/webhook-policy.ts';

const hostOf = (url: string) => new URL(url).hostname.replace(/^\[|\]$/g, '');

const INTERNAL_IPV6_LITERALS = [
  '[::1]',
  '[0:0:0:0:0:0:0:1]',
  '[::]',
  '[::127.0.0.1]',
  '[::7f00:1]',
  '[::ffff:127.0.0.1]',
  '[::ffff:7f00:1]',
  '[0:0:0:0:0:ffff:127.0.0.1]',
  '[::ffff:10.0.0.1]',
  '[::10.0.0.1]',
  '[::192.168.1.1]',
  '[::169.254.169.254]',
  '[::ffff:169.254.169.254]',
  '[::ffff:0:127.0.0.1]',
  '[64:ff9b::127.0.0.1]',
  '[64:ff9b::a9fe:a9fe]',
  '[2002:7f00:1::]',
  '[fe80::1]',
  '[fd12:3456::1]',
  '[fec0::1]',
  '[ff02::1]',
];

describe('isPublicAddress', () => {
  it.each(INTERNAL_IPV6_LITERALS)('http://%s/ is internal', (literal) => {
    expect(isPublicAddress(hostOf(`http://${literal}/`))).toBe(false);
  });

  it.each(['[2606:4700:4700::1111]', '[::ffff:8.8.8.8]', '8.8.8.8'])('http://%s/ is public', (literal) => {
    expect(isPublicAddress(hostOf(`http://${literal}/`))).toBe(true);
  });

  it.each(INTERNAL_IPV6_LITERALS)('a run webhook at http://%s/hook is refused at create', (literal) => {
    expect(webhookUrlProblem(`http://${literal}/hook`, { allow: [] })).toMatch(/not public/);
  });
});
