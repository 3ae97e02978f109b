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
  it('names a mistyped flag and the flag meant, in one line', () => {
    const message = (argv: string[]) => {
      try {
        parseCommandArgs(spec, argv);
      } catch (err) {
        expect(err).toBeInstanceOf(UsageError);
        return (err as Error).message;
      }
      throw new Error('no usage error');
    };
    expect(message(['--prot', '9'])).toBe('unknown option --prot (did you mean --port?)');
    expect(message(['--verbos'])).toBe('unknown option --verbos (did you mean --verbose?)');
    expect(message(['--database-url', 'x'])).toBe('unknown option --database-url');
    expect(message(['--port'])).toBe('option --port needs a value (--port <value>)');
    expect(message(['--verbose=yes'])).toBe('option --verbose takes no value');
    expect(message(['9000'])).toBe('unexpected argument 9000: every value goes after its --flag');
    for (const argv of [['--prot'], ['--port'], ['9000'], ["--it's"]]) expect(message(argv)).not.toContain('\n');
  });
  it('documents every flag with its default and environment variable', () => {
    const help = formatHelp(spec);
    expect(help).toContain('--port <value>');
    expect(help).toContain('default: 8000');
    expect(help).toContain('env: PORT');
    expect(help).toContain('--help');
  });
});
