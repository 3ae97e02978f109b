// LangChain's own CLI (`langgraph-cli` from PyPI) in a virtualenv cached under ~/.cache/agentplane/, for tests that
// point it at agentplane (`langgraph deploy`) and for the side by side with the Python Agent Server (`langgraph dev`,
// the `inmem` extra: langgraph-api and its in-memory runtime, pinned so both sides stay what docs/agent-server.md
// compares). One install serves both: pip runs once per set of versions, later runs find the virtualenv and its
// marker. When it cannot be had:
// - PyPI unreachable (pip cannot connect): the tests skip with one line, with CI set too. Nothing in the repository
//   can fix that, and a CI without a route to PyPI should still run everything else.
// - no python3 or no venv module: fails with CI set, skips elsewhere, as missing system tools do (system-tools.ts).
// - pip failing while PyPI answers: fails (a pin that no longer resolves is this repository's to fix).
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The version the control plane was checked against (langgraph_cli/deploy.py, host_backend.py of this release). */
export const LANGGRAPH_CLI_SPEC = process.env.AGENTPLANE_LANGGRAPH_CLI_SPEC ?? 'langgraph-cli[inmem]==0.4.40';

/** The Python Agent Server `langgraph dev` runs, and the LangGraph it runs graphs with, as the side by side saw them. */
export const PYTHON_SERVER_SPECS = ['langgraph-api==0.16.7', 'langgraph-runtime-inmem==0.36.7', 'langgraph==1.2.24'];

const UNREACHABLE =
  /NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|Name or service not known|Network is unreachable|ConnectTimeout|ReadTimeoutError|Connection refused|No route to host/i;

export type LangGraphCli = { bin: string } | { skip: string };

/** The `langgraph` executable, installing it on first use; or the one-line reason to skip. */
export async function langgraphCli(): Promise<LangGraphCli> {
  const specs = [LANGGRAPH_CLI_SPEC, ...PYTHON_SERVER_SPECS];
  const dir = join(homedir(), '.cache', 'agentplane', 'langgraph-cli', LANGGRAPH_CLI_SPEC.replace(/[^\w.-]+/g, '_'));
  const bin = join(dir, 'bin', 'langgraph');
  const marker = join(dir, 'installed');
  const ready = () => existsSync(bin) && existsSync(marker) && readFileSync(marker, 'utf8') === specs.join(' ');
  if (ready()) return { bin };
  // Test files run in parallel: one installs, the others wait for it and find the virtualenv made.
  return withLock(`${dir}.lock`, async () => (ready() ? { bin } : install(dir, specs)));
}

/** Runs `fn` holding a lock directory (one left by a process that died is taken over after 20 minutes). */
async function withLock<T>(lock: string, fn: () => Promise<T>): Promise<T> {
  mkdirSync(dirname(lock), { recursive: true });
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 20 * 60_000) rmSync(lock, { recursive: true, force: true });
      else await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

async function install(dir: string, specs: string[]): Promise<LangGraphCli> {
  const bin = join(dir, 'bin', 'langgraph');
  const marker = join(dir, 'installed');
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
    await run(join(dir, 'bin', 'pip'), ['install', '--disable-pip-version-check', '--quiet', ...specs], {
      timeout: 600_000,
      env: { ...process.env, PIP_DEFAULT_TIMEOUT: '30', PIP_RETRIES: '1' },
    });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    const text = `${e.stderr ?? ''}\n${e.message}`;
    rmSync(dir, { recursive: true, force: true });
    if (UNREACHABLE.test(text)) return { skip: `langgraph-cli not installed: PyPI cannot be reached` };
    throw new Error(`pip install ${specs.join(' ')} failed: ${text.trim().split('\n').slice(-1)[0]}`, { cause: err });
  }
  writeFileSync(marker, specs.join(' '));
  return { bin };
}
