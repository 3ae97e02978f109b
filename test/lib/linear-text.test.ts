// Every function that runs a pattern over tenant-controlled text (build output, log lines, repo URLs, refs, listener
// payloads) takes time linear in its input: fed megabyte-long adversarial lines (long runs of the characters its
// patterns would backtrack on, near-matches, many matches), each finishes within a generous factor of a plain
// character loop over the same input, measured in the same test in CPU time. Sizes grow from 64 KiB, so a quadratic
// function fails its assertion in seconds instead of freezing the run.
import { describe, expect, it } from 'vitest';
import { gitRefProblem, relativePathProblem, repoUrlProblem } from '../../src/api/input-rules.ts';
import { knownHostsProblem } from '../../src/git/credentials.ts';
import { githubRepoOf } from '../../src/git/github-app.ts';
import { reportedUrlProblem } from '../../src/api/listener-urls.ts';
import { redactUrl, redactUrlsIn } from '../../src/lib/redact.ts';
import { trimTrailing } from '../../src/lib/text.ts';
import { repositoryPath } from '../../src/git/url.ts';
import { failureLine } from '../../src/operator/runtimes/local/exec.ts';
import { redactText, redactUrl as localRedactUrl } from '../../src/git/redact.ts';

/** The yardstick: one pass over the input doing a little work per character. */
function charLoop(s: string): number {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return h;
}

/** CPU time of this process in ms: unlike the clock, it does not grow while other processes of a loaded machine run
 *  (the one flaky failure of this test, in a CI run with a load average of 20, was measured by the clock). */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** Best of a few runs (the first ones also pay for compilation); stops early once a run is under `enough` or far
 *  over it (a quadratic function need not be timed five times to fail). */
function best(fn: () => unknown, enough = 0, runs = 5): number {
  let min = Infinity;
  for (let i = 0; i < runs; i++) {
    const t = cpuMs();
    fn();
    min = Math.min(min, cpuMs() - t);
    if (min < enough || (enough > 0 && min > enough * 20)) break;
  }
  return min;
}

const FACTOR = 50;
/** Below this a measurement is timer noise; the bound never goes under it. */
const FLOOR_MS = 5;

/** Adversarial inputs of about n characters. */
const inputs: Record<string, (n: number) => string> = {
  'scheme characters, no "://"': (n) => 'a'.repeat(n),
  'scheme run then "://" at the end': (n) => `${'a'.repeat(n)}://`,
  'scheme runs each cut by ":/"': (n) => 'ab+c.d-e:/'.repeat(n / 10),
  'many "a://"': (n) => 'a://'.repeat(n / 4),
  'many "://"': (n) => '://'.repeat(n / 3),
  'authority without "@"': (n) => `https://${'x:'.repeat(n / 2)}`,
  'authority of "@"s': (n) => `https://${'@'.repeat(n)}`,
  'many credentials': (n) => `fatal: https://u:p@h/x ssh://git:pw@h/y ${'-'.repeat(60)}\n`.repeat(n / 100),
  'slashes not at the end': (n) => `${'/'.repeat(n)}x`,
  'spaces and "npm error"': (n) => `npm error ${' '.repeat(n)}x`,
  'digits then spaces': (n) => `npm error ${'1'.repeat(n / 2)}${' '.repeat(n / 2)}x`,
  'colons and at signs': (n) => 'a:b@'.repeat(n / 4),
  'a host key line that fails at its end': (n) => `@revoked h ssh-ed25519 ${'A'.repeat(n)}!`,
  'host key fields of spaces': (n) => `h ${'ssh- '.repeat(n / 5)}`,
};

const subjects: Record<string, (s: string) => unknown> = {
  'redactUrlsIn (control plane, listener)': redactUrlsIn,
  'redactUrl (control plane)': redactUrl,
  'redactText (local builds)': redactText,
  'redactUrl (local builds)': localRedactUrl,
  'failureLine (local build step output)': failureLine,
  repoUrlProblem,
  gitRefProblem,
  'knownHostsProblem (git integrations)': knownHostsProblem,
  'reportedUrlProblem (listener reports)': (s) => reportedUrlProblem(s, { baseUrl: 'https://dp.example.com/a' }),
  relativePathProblem,
  'githubRepoOf (repo_url path)': (s) => githubRepoOf('https://github.com', `https://github.com/${s}`),
  'repositoryPath (kubernetes git credentials)': repositoryPath,
  trimTrailing: (s) => trimTrailing(s, '/'),
};

describe('patterns over tenant text are linear', { timeout: 60_000 }, () => {
  it.each(Object.keys(subjects))('%s', (name) => {
    const fn = subjects[name]!;
    for (const size of [64 * 1024, 1024 * 1024]) {
      for (const [kind, make] of Object.entries(inputs)) {
        const input = make(size);
        // A pair measured again when a burst of load on a shared machine hit the function but not the yardstick.
        let bound = 0;
        let took = Infinity;
        for (let attempt = 0; attempt < 3 && !(took < bound); attempt++) {
          bound = Math.max(FLOOR_MS, best(() => charLoop(input)) * FACTOR);
          took = best(() => fn(input), bound);
        }
        expect(
          took,
          `${name} on ${size} chars of ${kind}: ${took.toFixed(1)} ms, bound ${bound.toFixed(1)} ms`,
        ).toBeLessThan(bound);
      }
    }
  });
});

describe('the linear redaction keeps its meaning', () => {
  it.each([
    ['https://user:tok@github.com/a/b.git', 'https://***@github.com/a/b.git'],
    ['see HTTPS://tok@h/x and ssh://git:pw@h/y', 'see HTTPS://***@h/x and ssh://git:***@h/y'],
    ['https://u:p@ss@host/x', 'https://***@host/x'],
    ['x+y://u:p@h', 'x+y://u:***@h'],
    ['9a://u:p@h', '9a://u:***@h'],
    ['123://u:p@h', '123://u:p@h'],
    ['://u:p@h', '://u:p@h'],
    ['https://host/path@x', 'https://host/path@x'],
    ['https://host?q=a@b', 'https://host?q=a@b'],
    ['https://@h', 'https://***@h'],
    ['a://b://u:p@h', 'a://b://u:***@h'],
  ])('redactUrlsIn(%s)', (text, shown) => expect(redactUrlsIn(text)).toBe(shown));

  it('local redaction hides user names too, up to the last "@"', () => {
    expect(redactText('fatal: ssh://git:pw@h/x and https://a@b@c/d')).toBe('fatal: ssh://***@h/x and https://***@c/d');
  });
});
