// The reference tables in docs/ must be what `npm run gen:docs` writes from the command specs and the chart now.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOC_FILES, fillRegions, flagTable, readChart, regionIds, renderRegions } from '../../scripts/gen-docs.ts';
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
