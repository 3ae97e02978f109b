// CPU one agent server start costs, from spawn until GET /ok answers (what a sleeping deployment's wake pays), for
// one or more checkouts side by side: each start is a fresh `agentplane agent-server` process on the example agent
// with a fresh embedded store, its user + system CPU read from /proc once it answers, then it is stopped. Starts of
// the checkouts alternate, so a change in the machine's load touches both alike.
//   node --import tsx bench/cold-start.ts [--starts 8] DIR [DIR...]
// Each DIR needs its node_modules and an up-to-date bundle (`npm run build:cli`), as users run it.
import { freshStore, startAgentServer, threadCpuSeconds } from './agent-server-process.ts';

const args = process.argv.slice(2);
const at = args.indexOf('--starts');
const starts = at >= 0 ? Number(args.splice(at, 2)[1]) : 8;
const dirs = args.length ? args : [process.cwd()];
const cpu: Record<string, number[]> = Object.fromEntries(dirs.map((d) => [d, []]));

for (let i = 0; i < starts; i++) {
  for (const [n, dir] of dirs.entries()) {
    const store = await freshStore('embedded', `cold_${n}_${i}`);
    const { proc } = await startAgentServer(dir, 20_000 + n * 100 + (i % 50), store.args);
    const [main, rest] = await threadCpuSeconds(proc.pid!);
    cpu[dir]!.push(main + rest);
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
    await store.cleanup();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
for (const dir of dirs) {
  const xs = cpu[dir]!;
  console.log(
    `${dir}: median ${median(xs).toFixed(2)} s CPU per start (min ${Math.min(...xs).toFixed(2)}, max ${Math.max(...xs).toFixed(2)}, n=${xs.length})`,
  );
}
