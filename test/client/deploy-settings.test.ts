// How `agentplane deploy` reads its settings: flags over agentplane.yaml, secrets from values or the environment,
// local folders made absolute, and one-line usage errors.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settingsFrom } from '../../src/client/deploy-command.ts';
import { UsageError } from '../../src/lib/cli-args.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ap-cli-settings-'));
  mkdirSync(join(dir, 'repo'));
  writeFileSync(
    join(dir, 'agentplane.yaml'),
    'name: from-file\nrepo_url: repo\nref: main\nconfig_path: agent/langgraph.json\npublic: true\nsecrets_from_env: [TOKEN]\n',
  );
  writeFileSync(join(dir, 'bad.yaml'), 'name: x\nrepo: typo\n');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('deploy settings', () => {
  it('reads agentplane.yaml when present; flags win; local folders become absolute; URLs stay', () => {
    const s = settingsFrom({ ref: 'v2', secret: ['A=1=2'] }, { TOKEN: 't' }, dir);
    expect(s).toEqual({
      name: 'from-file',
      repoUrl: join(dir, 'repo'),
      ref: 'v2',
      configPath: 'agent/langgraph.json',
      installCommand: undefined,
      buildCommand: undefined,
      public: true,
      secrets: [
        { name: 'TOKEN', value: 't' },
        { name: 'A', value: '1=2' },
      ],
      file: join(dir, 'agentplane.yaml'),
      // Taken from the file alone: asked for before anything is sent (test/client/deploy-file-trust.test.ts).
      fileAsks: [
        'make the deployment public: anyone may call it (public)',
        'send these variables of your environment to the agent as secrets: TOKEN (secrets_from_env)',
      ],
    });
    const flagsOnly = settingsFrom(
      { name: 'n', 'repo-url': 'https://example.com/a.git', 'secret-from-env': ['TOKEN'] },
      { TOKEN: 'e' },
      join(dir, 'repo'),
    );
    expect(flagsOnly).toMatchObject({
      name: 'n',
      repoUrl: 'https://example.com/a.git',
      ref: undefined,
      public: false,
      secrets: [{ name: 'TOKEN', value: 'e' }],
    });
    expect(settingsFrom({ name: 'n', 'repo-url': 'git@github.com:you/agent.git' }, {}, join(dir, 'repo')).repoUrl).toBe(
      'git@github.com:you/agent.git',
    );
  });

  it.each([
    [{}, 'repo', '--name is required'],
    [{ file: 'bad.yaml' }, '.', 'unknown setting "repo" (known: name, repo_url, ref, config_path'],
    [{ name: 'n', secret: ['NOVALUE'] }, 'repo', '--secret must be NAME=VALUE'],
    [
      { name: 'n', 'secret-from-env': ['MISSING'] },
      'repo',
      '--secret-from-env MISSING: the environment variable is not set',
    ],
    [{ file: 'none.yaml' }, '.', 'none.yaml'],
  ])('refuses %j (in %s)', (flags, where, message) => {
    const cwd = join(dir, where);
    expect(() => settingsFrom(flags, {}, cwd)).toThrow(UsageError);
    expect(() => settingsFrom(flags, {}, cwd)).toThrow(message);
  });
});
