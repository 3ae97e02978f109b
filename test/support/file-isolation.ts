// Test files share their worker process (vitest `isolate: false`: modules are loaded once per worker, not once per
// file). What a file changes in the process as a whole is put back when it ends, so files cannot see each other's
// leftovers: the environment (loadGraphs copies a langgraph.json's `env` into it, as the agent server does) and
// the exit code an in-process CLI call may set.
import { afterAll, beforeAll } from 'vitest';

let env: NodeJS.ProcessEnv;

beforeAll(() => {
  env = { ...process.env };
});

afterAll(() => {
  for (const k of Object.keys(process.env)) if (!(k in env)) delete process.env[k];
  Object.assign(process.env, env);
  process.exitCode = undefined;
});
