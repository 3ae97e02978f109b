// Imports one export of a user's project module named the way langgraph.json names them ("./file.ts:name", the
// default export when no name is given), with errors that say which setting pointed where.
import { access } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { GraphConfigError } from './config.ts';

export async function importProjectExport(
  setting: string,
  spec: string,
  projectDir: string,
): Promise<{ value: unknown; exportName: string; file: string }> {
  const colon = spec.lastIndexOf(':');
  const name = colon > 0 ? spec.slice(0, colon) : spec;
  const exportName = colon > 0 ? spec.slice(colon + 1) || 'default' : 'default';
  const file = path.resolve(projectDir, name);
  try {
    await access(file);
  } catch {
    throw new GraphConfigError(`${setting} "${spec}": file ${file} does not exist`);
  }
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (err) {
    throw new GraphConfigError(`${setting} "${spec}": importing ${file} failed: ${(err as Error).message}`);
  }
  return { value: mod[exportName], exportName, file };
}
