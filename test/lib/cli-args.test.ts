import { describe, expect, it } from 'vitest';
import { formatHelp, parseCommandArgs, UsageError, type CommandSpec } from '../../src/lib/cli-args.ts';

const spec: CommandSpec = {
  name: 'x',
  summary: 'Test command',
  usage: 'agentplane x [options]',
  options: {
    port: { type: 'string', description: 'Port to listen on', default: '8000', env: ['PORT'] },
    verbose: { type: 'boolean', short: 'v', description: 'More output' },
  },
};

describe('parseCommandArgs', () => {
  it('parses known flags', () => {
    expect(parseCommandArgs(spec, ['--port', '9', '-v'])).toMatchObject({ port: '9', verbose: true });
  });
  it('rejects unknown flags with a usage error', () => {
    expect(() => parseCommandArgs(spec, ['--nope'])).toThrow(UsageError);
  });
  it('documents every flag with its default and environment variable', () => {
    const help = formatHelp(spec);
    expect(help).toContain('--port <value>');
    expect(help).toContain('default: 8000');
    expect(help).toContain('env: PORT');
    expect(help).toContain('--help');
  });
});
