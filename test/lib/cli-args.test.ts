import { describe, expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import {
  configSchema,
  defineCommand,
  flagAt,
  formatHelp,
  optionAt,
  optionPicker,
  optionValues,
  parseCommandArgs,
  parseOptions,
  UsageError,
  type CommandSpec,
  type OptionSpec,
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
  const nested = defineCommand({
    name: 'y',
    summary: '',
    usage: '',
    envOnly: { token: 'Y_TOKEN' },
    options: {
      namespace: {
        type: 'string',
        description: '',
        default: 'default',
        env: ['Y_NAMESPACE'],
        path: 'namespace',
        schema: z.string().regex(/^[a-z]+$/, 'must be a Kubernetes name'),
      },
      hosts: {
        type: 'string',
        description: '',
        env: ['Y_HOSTS'],
        path: 'runtime.ingress.hosts',
        schema: z.array(z.string().regex(/^[a-z.]+$/, 'must be a host')),
        read: list,
      },
      peers: {
        type: 'string',
        description: '',
        env: ['Y_PEERS'],
        path: 'runtime.peers',
        schema: z.array(z.object({ cidr: z.string() })).optional(),
        read: json,
      },
    },
  });
  // What no flag gives is added to the options' schema, visibly.
  const schema = configSchema(nested.options).extend({
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

describe("configSchema: the configuration's schema made of the options' own", () => {
  const options = {
    port: {
      type: 'string',
      description: '',
      default: '8000',
      env: ['Z_PORT'],
      path: 'port',
      schema: z.coerce.number().int().min(1, 'must be a port number').max(65535),
    },
    'max-cpu': {
      type: 'string',
      description: '',
      default: '2',
      path: 'limits.maxCpu',
      schema: z.coerce.number().positive(),
    },
    'max-memory': { type: 'string', description: '', path: 'limits.maxMemoryMb', schema: z.coerce.number().optional() },
    verbose: { type: 'boolean', description: '' },
  } as const satisfies Record<string, OptionSpec>;
  const command = (o: Record<string, OptionSpec>): CommandSpec => ({ name: 'z', summary: '', usage: '', options: o });
  const parse = (o: Record<string, OptionSpec>, argv: string[], env: NodeJS.ProcessEnv = {}) => {
    const spec = command(o);
    const pick = optionPicker(spec, parseCommandArgs(spec, argv), env);
    return parseOptions(spec, configSchema(o), optionValues(spec, pick), pick);
  };

  it('puts each schema at its path, nested paths in nested objects, with the type it makes', () => {
    expect(parse(options, ['--max-memory', '512'])).toEqual({ port: 8000, limits: { maxCpu: 2, maxMemoryMb: 512 } });
    expect(Object.keys(configSchema(options).shape)).toEqual(['port', 'limits']);
    // tsc checks the type made of the options (vitest's expectTypeOf): no schema written a second time for it.
    expectTypeOf<z.infer<ReturnType<typeof configSchema<typeof options>>>>().toEqualTypeOf<{
      port: number;
      limits: { maxCpu: number; maxMemoryMb?: number | undefined };
    }>();
  });

  it("validates with the option's own schema, a bad value named by its flag and variable", () => {
    expect(() => parse(options, ['--port', '0'])).toThrow('invalid --port: must be a port number');
    expect(() => parse(options, [], { Z_PORT: 'x' })).toThrow(/^invalid --port \(Z_PORT\): /);
    expect(() => parse(options, ['--max-cpu', '0'])).toThrow(/^invalid --max-cpu: /);
    // The same value passes once the option's schema allows it: nothing else decides.
    const lenient = { ...options, port: { ...options.port, schema: z.coerce.number().int().min(0) } };
    expect(parse(lenient, ['--port', '0'])).toMatchObject({ port: 0 });
  });

  it('refuses an option with a path but no schema, and two options filling one path', () => {
    const noSchema = { ...options, port: { ...options.port, schema: undefined } } as unknown as Record<
      string,
      OptionSpec
    >;
    expect(() => configSchema(noSchema)).toThrow('option --port fills port but has no zod schema');
    const twice = { ...options, cores: { ...options['max-cpu'] } };
    expect(() => configSchema(twice)).toThrow('option --cores: another option fills limits.maxCpu already');
    const under = { ...options, 'all-limits': { ...options.port, path: 'limits' } };
    expect(() => configSchema({ 'all-limits': under['all-limits'], 'max-cpu': options['max-cpu'] })).toThrow(
      'option --max-cpu: limits.maxCpu is under another option',
    );
  });
});

describe('every command: each flag that fills the configuration carries its schema', () => {
  it.each(COMMANDS.map((c) => [c.name, c] as const))('%s', (_name, command) => {
    const missing = Object.entries(command.options).filter(([, o]) => o.path && !(o.schema instanceof z.ZodType));
    expect(missing.map(([name]) => name)).toEqual([]);
    expect(() => configSchema(command.options)).not.toThrow();
  });
});

describe('every command: no two flags share a config path', () => {
  it.each(COMMANDS.map((c) => [c.name, c] as const))('%s', (_name, command) => {
    const paths = Object.values(command.options).flatMap((o) => (o.path ? [o.path] : []));
    expect(paths.filter((p, i) => paths.indexOf(p) !== i)).toEqual([]);
  });
});
