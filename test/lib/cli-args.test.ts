import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  flagAt,
  formatHelp,
  optionAt,
  optionPicker,
  optionValues,
  parseCommandArgs,
  parseOptions,
  UsageError,
  type CommandSpec,
} from '../../src/lib/cli-args.ts';
import { json, list } from '../../src/lib/option-readers.ts';
import { FLAG_REGIONS } from '../../scripts/gen-docs.ts';

const COMMANDS = Object.values(FLAG_REGIONS) as CommandSpec[];

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

describe('flags declared once: values, paths and the flag a problem names', () => {
  const nested: CommandSpec = {
    name: 'y',
    summary: '',
    usage: '',
    envOnly: { token: 'Y_TOKEN' },
    options: {
      namespace: { type: 'string', description: '', default: 'default', env: ['Y_NAMESPACE'], path: 'namespace' },
      hosts: { type: 'string', description: '', env: ['Y_HOSTS'], path: 'runtime.ingress.hosts', read: list },
      peers: { type: 'string', description: '', env: ['Y_PEERS'], path: 'runtime.peers', read: json },
    },
  };
  const schema = z.object({
    namespace: z.string().regex(/^[a-z]+$/, 'must be a Kubernetes name'),
    runtime: z.object({
      ingress: z.object({ hosts: z.array(z.string().regex(/^[a-z.]+$/, 'must be a host')) }),
      peers: z.array(z.object({ cidr: z.string() })).optional(),
    }),
    token: z.string().min(16, 'must be at least 16 characters').optional(),
  });
  const parse = (argv: string[], env: NodeJS.ProcessEnv, extra: object = {}) => {
    const pick = optionPicker(nested, parseCommandArgs(nested, argv), env);
    return parseOptions(nested, schema, { ...optionValues(nested, pick), ...extra }, pick);
  };

  it('puts each value at its path, through its reader', () => {
    expect(parse(['--hosts', 'a.example, b.example'], {})).toEqual({
      namespace: 'default',
      runtime: { ingress: { hosts: ['a.example', 'b.example'] } },
    });
  });

  it('names the flag whose path covers the problem, an array item included', () => {
    expect(() => parse(['--hosts', 'ok.example,BAD_HOST'], {})).toThrow('invalid --hosts: must be a host');
    expect(() => parse(['--peers', '[{"cidr":1}]'], {})).toThrow(/^invalid --peers: /);
  });

  it('names the environment variable when the value came from there, and only then', () => {
    expect(() => parse([], { Y_NAMESPACE: 'Not_A_Name' })).toThrow(
      'invalid --namespace (Y_NAMESPACE): must be a Kubernetes name',
    );
    expect(() => parse(['--namespace', 'Not_A_Name'], { Y_NAMESPACE: 'ok' })).toThrow(
      'invalid --namespace: must be a Kubernetes name',
    );
    expect(() => parse([], { Y_PEERS: '[{' })).toThrow(/^invalid --peers \(Y_PEERS\): not JSON/);
  });

  it('names an environment-only setting by its variable', () => {
    expect(() => parse([], {}, { token: 'short' })).toThrow('invalid Y_TOKEN: must be at least 16 characters');
  });

  it('finds the flag of a path and refuses a path no option has', () => {
    expect(optionAt(nested, 'runtime.peers')).toBe('peers');
    expect(() => optionAt(nested, 'runtime.nope')).toThrow(/no option of y has the path runtime.nope/);
    expect(flagAt(nested, ['elsewhere'])).toBeUndefined();
  });
});

describe('every command: no two flags share a config path', () => {
  it.each(COMMANDS.map((c) => [c.name, c] as const))('%s', (_name, command) => {
    const paths = Object.values(command.options).flatMap((o) => (o.path ? [o.path] : []));
    expect(paths.filter((p, i) => paths.indexOf(p) !== i)).toEqual([]);
  });
});
