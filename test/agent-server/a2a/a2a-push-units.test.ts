// The pure parts of A2A push notifications: which configs a task has (the send's, overlaid by its thread's, a null
// deleting one), and what a config may hold (no header injection through the token or credentials).
import { describe, expect, it } from 'vitest';
import { configsOf, notificationHeaders, readConfig } from '../../../src/agent-server/a2a/push.ts';

const policy = { allow: [] };
const c = (id: string, url = `https://hooks.example.com/${id}`) => ({ id, url, dialect: '1.0' as const });

describe('configsOf', () => {
  it.each([
    ['the send config alone', { a2a_push: c('default') }, {}, ['default']],
    ['thread configs of this run only', {}, { 'a2a_push:r1:a': c('a'), 'a2a_push:r2:b': c('b') }, ['a']],
    ['a null deletes the send config', { a2a_push: c('default') }, { 'a2a_push:r1:default': null }, []],
    [
      'a thread entry replaces the send config',
      { a2a_push: c('default') },
      { 'a2a_push:r1:default': c('default', 'https://x.example.com/') },
      ['default'],
    ],
    [
      'malformed or mislabelled entries are skipped',
      {},
      { 'a2a_push:r1:a': { url: 1 }, 'a2a_push:r1:b': c('other') },
      [],
    ],
  ])('%s', (_name, runMeta, threadMeta, ids) => {
    expect(configsOf(runMeta as never, threadMeta as never, 'r1').map((x) => x.id)).toEqual(ids);
  });
  it('keeps the replacing url', () => {
    const got = configsOf(
      { a2a_push: c('default') },
      { 'a2a_push:r1:default': c('default', 'https://x.example.com/') },
      'r1',
    );
    expect(got[0]!.url).toBe('https://x.example.com/');
  });
});

describe('readConfig', () => {
  it.each([
    [{ url: 'https://h.example.com/', token: 'a\r\nX-Injected: 1' }, 'token: must be one line'],
    [
      { url: 'https://h.example.com/', authentication: { scheme: 'Bearer', credentials: 'x\nY: 1' } },
      'must be one line',
    ],
    [{ url: 'https://h.example.com/', authentication: { scheme: 'Bearer x\r\nY' } }, 'not an HTTP auth scheme'],
    [{ url: 'file:///etc/passwd' }, 'must be an http:// or https:// URL'],
    [{ url: 'http://169.254.169.254/' }, 'address 169.254.169.254 is not public'],
  ])('refuses %j', (raw, message) => {
    expect(() => readConfig('1.0', raw, policy, 'default', 'p')).toThrow(message);
  });
  it('sends the token and the Authorization the config names', () => {
    const cfg = readConfig(
      '0.3',
      { url: 'https://h.example.com/', token: 't', authentication: { schemes: ['Basic'], credentials: 'YTpi' } },
      policy,
      'default',
      'p',
    );
    expect(notificationHeaders(cfg)).toEqual({ 'x-a2a-notification-token': 't', authorization: 'Basic YTpi' });
  });
});
