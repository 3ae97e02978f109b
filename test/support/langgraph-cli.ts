// LangChain's own CLI (`langgraph-cli` from PyPI, the `langgraph deploy` command) in a virtualenv cached under
// ~/.cache/agentplane/, for tests that point it at agentplane. pip runs once per version: later runs find the
// virtualenv and its marker. When it cannot be had:
// - PyPI unreachable (pip cannot connect): the tests skip with one line, with CI set too. Nothing in the repository
//   can fix that, and a CI without a route to PyPI should still run everything else.
// - anything else (no python3, no venv module, pip failing while PyPI answers): fails with CI set, skips elsewhere,
//   as missing system tools do (system-tools.ts).
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The version the control plane was checked against (langgraph_cli/deploy.py, host_backend.py of this release). */
export const LANGGRAPH_CLI_SPEC = process.env.AGENTPLANE_LANGGRAPH_CLI_SPEC ?? 'langgraph-cli==0.4.40';

const UNREACHABLE =
  /NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|Name or service not known|Network is unreachable|ConnectTimeout|ReadTimeoutError|Connection refused|No route to host/i;

export type LangGraphCli = { bin: string } | { skip: string };

/** The `langgraph` executable, installing it on first use; or the one-line reason to skip. */
export async function langgraphCli(): Promise<LangGraphCli> {
  const dir = join(homedir(), '.cache', 'agentplane', 'langgraph-cli', LANGGRAPH_CLI_SPEC.replace(/[^\w.-]+/g, '_'));
  const bin = join(dir, 'bin', 'langgraph');
  const marker = join(dir, 'installed');
  if (existsSync(bin) && existsSync(marker) && readFileSync(marker, 'utf8') === LANGGRAPH_CLI_SPEC) return { bin };
  const problem = (message: string): LangGraphCli => {
    if (process.env.CI) throw new Error(`langgraph-cli: ${message}`);
    return { skip: `langgraph-cli not available: ${message}` };
  };
  rmSync(dir, { recursive: true, force: true });
  try {
    await run('python3', ['-m', 'venv', dir], { timeout: 120_000 });
  } catch (err) {
    return problem(`python3 -m venv failed (apt-get install python3-venv): ${(err as Error).message.split('\n')[0]}`);
  }
  try {
    await run(join(dir, 'bin', 'pip'), ['install', '--disable-pip-version-check', '--quiet', LANGGRAPH_CLI_SPEC], {
      timeout: 600_000,
      env: { ...process.env, PIP_DEFAULT_TIMEOUT: '30', PIP_RETRIES: '1' },
    });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    const text = `${e.stderr ?? ''}\n${e.message}`;
    rmSync(dir, { recursive: true, force: true });
    if (UNREACHABLE.test(text)) return { skip: `langgraph-cli not installed: PyPI cannot be reached` };
    return problem(`pip install ${LANGGRAPH_CLI_SPEC} failed: ${text.trim().split('\n').slice(-1)[0]}`);
  }
  writeFileSync(marker, LANGGRAPH_CLI_SPEC);
  return { bin };
}
