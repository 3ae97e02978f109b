// The reference tables in docs/ must be what `npm run gen:docs` writes from the command specs and the chart now.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DOC_FILES,
  FLAG_REGIONS,
  fillRegions,
  flagTable,
  readChart,
  regionIds,
  renderRegions,
} from '../../scripts/gen-docs.ts';
import { agentServerCommand } from '../../src/agent-server/flags.ts';
import { controlPlaneCommand } from '../../src/control-plane/config.ts';
import { devCommand } from '../../src/dev/config.ts';
import { listenerCommand } from '../../src/listener/config.ts';
import { operatorCommand } from '../../src/operator/flags.ts';
import { activatorCommand } from '../../src/operator/activator/command.ts';
import type { CommandSpec } from '../../src/lib/cli-args.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const { schemaText, valuesYaml } = readChart(ROOT);
const regions = renderRegions(schemaText, valuesYaml);

describe('generated reference tables in docs/', () => {
  for (const [file, ids] of Object.entries(DOC_FILES)) {
    it(`${file} is up to date (run \`npm run gen:docs\`)`, () => {
      const text = readFileSync(join(ROOT, file), 'utf8');
      expect(regionIds(text)).toEqual(ids);
      expect(text).toBe(fillRegions(text, regions));
    });
  }

  it('every option of every command and every chart value has a row', () => {
    const all = Object.entries(DOC_FILES)
      .map(([file]) => readFileSync(join(ROOT, file), 'utf8'))
      .join('\n');
    expect(all).toContain('| `--executor-threads` | `AGENTPLANE_EXECUTOR_THREADS` |');
    expect(all).toContain('| `--sandbox` | `AGENTPLANE_SANDBOX` | `auto` |');
    expect(all).toContain('| `agents.limits.maxScale` | integer ≥ 1 | `10` |');
    expect(all).toContain('| `networkPolicy.buildEgressExceptCidrs` | list of string | `["169.254.0.0/16"]` |');
  });

  it('documents every flag of every command, with its environment variables and default, in its region', () => {
    const regionText = (id: string) => {
      const file = Object.entries(DOC_FILES).find(([, ids]) => ids.includes(id))![0];
      const text = readFileSync(join(ROOT, file), 'utf8');
      return text.slice(text.indexOf(`<!-- generated:${id} -->`)).split('<!-- /generated -->')[0]!;
    };
    const missing: string[] = [];
    for (const [id, spec] of Object.entries(FLAG_REGIONS)) {
      const rows = regionText(id).split('\n');
      for (const [name, o] of Object.entries(spec.options)) {
        const row = rows.find((r) => r.startsWith(`| \`--${name}\``));
        const complete =
          row !== undefined &&
          (o.env ?? []).every((e) => row.includes(`\`${e}\``)) &&
          (o.default === undefined || row.includes(`\`${o.default.replace(/\|/g, '\\|')}\``));
        if (!complete) missing.push(`${spec.name} --${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('has a region for every command that parses a configuration from flags', () => {
    const documented = new Set(Object.values(FLAG_REGIONS));
    for (const spec of [agentServerCommand, controlPlaneCommand, devCommand, listenerCommand, operatorCommand, activatorCommand])
      expect(documented.has(spec), spec.name).toBe(true);
  });

  it('notices a stale region and a changed spec', () => {
    const stale = '<!-- generated:dev-flags -->\n| old |\n<!-- /generated -->\n';
    expect(fillRegions(stale, regions)).not.toBe(stale);
    const spec: CommandSpec = {
      name: 'x',
      summary: '',
      usage: '',
      options: { port: { type: 'string', short: 'p', description: 'TCP port | <n>', default: '1', env: ['PORT'] } },
    };
    expect(flagTable(spec)).toContain('| `--port`, `-p` | `PORT` | `1` | TCP port \\| &lt;n> |');
    expect(() => fillRegions('<!-- generated:nope -->\n<!-- /generated -->', regions)).toThrow(/unknown generated region "nope"/);
  });
});
