// Which @langchain/langgraph a graph's own project installs. The graph object comes from that copy, not ours,
// so we only accept versions whose compiled graphs and checkpoint format our checkpointers understand.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { GraphConfigError } from './config.ts';

/**
 * Major 1: the line our @langchain/langgraph-checkpoint(-postgres|-sqlite) 1.x packages are written for. Checked
 * with 1.0.0, 1.0.7 (test/fixtures/graphs/foreign) and 1.7.3 against our savers. 0.x graphs use the older
 * checkpoint format and config shape, and 2.x may change both, so they are refused rather than half-working.
 */
export const SUPPORTED_LANGGRAPH_RANGE = '>=1.0.0 <2.0.0';

export function isSupportedLanggraphVersion(version: string): boolean {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(version);
  return m !== null && Number(m[1]) === 1;
}

export interface LanggraphInstall {
  version: string;
  /** Directory of the package, e.g. /repo/node_modules/@langchain/langgraph. */
  dir: string;
  manifest: { version: string; exports?: unknown };
}

/** Resolves @langchain/langgraph the way the graph module's own imports will; null when it has none. */
export async function findLanggraph(graphFile: string): Promise<LanggraphInstall | null> {
  const require = createRequire(pathToFileURL(graphFile));
  let manifestPath: string;
  try {
    manifestPath = require.resolve('@langchain/langgraph/package.json');
  } catch {
    return null;
  }
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as LanggraphInstall['manifest'];
  return { version: String(manifest.version), dir: path.dirname(manifestPath), manifest };
}

export async function checkLanggraphVersion(graphId: string, graphFile: string): Promise<LanggraphInstall | null> {
  const install = await findLanggraph(graphFile);
  if (install && !isSupportedLanggraphVersion(install.version)) {
    throw new GraphConfigError(
      `graph "${graphId}": its project uses @langchain/langgraph ${install.version} (${install.dir}), ` +
        `which this server does not support; install a version in ${SUPPORTED_LANGGRAPH_RANGE} in the graph's project`,
    );
  }
  return install;
}

/** ESM entry file of a subpath export ("./zod/schema") of that install, for loading its helpers. */
export function esmSubpathFile(install: LanggraphInstall, subpath: string): string | null {
  const exportsMap = install.manifest.exports;
  if (!exportsMap || typeof exportsMap !== 'object') return null;
  let target: unknown = (exportsMap as Record<string, unknown>)[subpath];
  // Walk conditions preferring ESM, the flavour a tsx-loaded graph imports.
  for (let depth = 0; depth < 4 && target && typeof target === 'object'; depth++) {
    const t = target as Record<string, unknown>;
    target = t.import ?? t.node ?? t.default;
  }
  return typeof target === 'string' ? path.join(install.dir, target) : null;
}
