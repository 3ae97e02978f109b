// agentplane.yaml: the settings of `agentplane deploy` kept next to the code, so CI runs `agentplane deploy --wait`.
// Secret values never live in the file: it names environment variables whose values are sent. What widens access
// (public, secrets_from_env) is confirmed before it is sent (deploy-command.ts: confirmFileAsks).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { UsageError } from '../lib/cli-args.ts';

export const DEFAULT_DEPLOY_FILE = 'agentplane.yaml';

export const DeployFile = z
  .object({
    name: z.string().min(1).optional(),
    /** A git URL, or a local folder (relative to the file). */
    repo_url: z.string().min(1).optional(),
    ref: z.string().min(1).optional(),
    config_path: z.string().min(1).optional(),
    install_command: z.string().optional(),
    build_command: z.string().optional(),
    public: z.boolean().optional(),
    secrets_from_env: z.array(z.string().min(1)).optional(),
  })
  .strict();
export type DeployFile = z.infer<typeof DeployFile>;

/** Reads `file` (an explicit --file must exist; the default agentplane.yaml is optional). */
export function readDeployFile(
  file: string | undefined,
  cwd: string,
): { settings: DeployFile; dir: string; path: string } | undefined {
  const chosen = path.resolve(cwd, file ?? DEFAULT_DEPLOY_FILE);
  if (!file && !existsSync(chosen)) return undefined;
  let raw: unknown;
  try {
    raw = parse(readFileSync(chosen, 'utf8'));
  } catch (err) {
    throw new UsageError(`--file ${chosen}: ${(err as Error).message.split('\n')[0]}`);
  }
  const parsed = DeployFile.safeParse(raw ?? {});
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    const problem =
      i.code === 'unrecognized_keys'
        ? `unknown setting ${i.keys.map((k) => JSON.stringify(k)).join(', ')} (known: ${Object.keys(DeployFile.shape).join(', ')})`
        : `${i.path.join('.') || 'the file'}: ${i.message}`;
    throw new UsageError(`--file ${chosen}: ${problem}`);
  }
  return { settings: parsed.data, dir: path.dirname(chosen), path: chosen };
}
