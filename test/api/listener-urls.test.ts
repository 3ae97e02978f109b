// What a listener may report as a deployment's URL, row by row: under the workspace-declared base_url (its path, or
// a subdomain of its host), or at the deployment's own custom_url host; nothing else, however it is spelled.
import { describe, expect, it } from 'vitest';
import { baseUrlProblem, reportedUrlProblem } from '../../src/api/listener-urls.ts';

describe('reportedUrlProblem', () => {
  const base = 'https://dp.example.com/agents';
  it.each([
    ['https://dp.example.com/agents', base, null, true],
    ['https://dp.example.com/agents/d1/', base, null, true],
    ['https://eu.dp.example.com/x', base, null, true],
    ['https://DP.Example.COM/agents/d1', base, null, true],
    ['https://dp.example.com/agentsX', base, null, false],
    ['https://dp.example.com/', base, null, false],
    ['https://dp.example.com/agents/../x', base, null, false],
    ['https://dp.example.com%2F.evil.example/agents', base, null, false],
    ['https://evildp.example.com/agents', base, null, false],
    ['https://dp.example.com.evil.example/agents', base, null, false],
    ['http://dp.example.com/agents', base, null, false],
    ['https://dp.example.com:444/agents', base, null, false],
    ['https://a:b@dp.example.com/agents', base, null, false],
    ['file:///etc/passwd', base, null, false],
    ['https://x.127.0.0.1:8000/', 'http://127.0.0.1:8000', null, false],
    ['http://127.0.0.1:8000/deployments/d', 'http://127.0.0.1:8000', null, true],
    ['https://agent.acme.io', null, 'agent.acme.io', true],
    ['http://agent.acme.io/', null, 'https://agent.acme.io', true],
    ['https://agent.acme.io:8443', null, 'agent.acme.io', false],
    ['https://other.acme.io', null, 'agent.acme.io', false],
    ['https://dp.example.com/agents', null, null, false],
  ])('%s (base %s, custom %s) -> allowed: %s', (url, baseUrl, customUrl, ok) => {
    expect(reportedUrlProblem(url, { baseUrl, customUrl }) === undefined).toBe(ok);
  });
});

describe('baseUrlProblem', () => {
  it.each([
    ['https://dp.example.com', true],
    ['http://127.0.0.1:8123/prefix', true],
    ['https://dp.example.com/?q', false],
    ['https://dp.example.com/#f', false],
    ['https://u@dp.example.com', false],
    ['ftp://dp.example.com', false],
    ['dp.example.com', false],
  ])('%s -> acceptable: %s', (value, ok) => {
    expect(baseUrlProblem(value) === undefined).toBe(ok);
  });
});
