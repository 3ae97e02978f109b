// How fast this machine's CPUs run right now, for reading a run's times: the CPU time one fixed piece of work takes
// (arithmetic, object allocation, JSON and regular expressions, as a server's code does), in one thread. The same
// machine can be twice as slow from one hour to the next, for causes outside it (its host is shared), and
// CPU time, not wall time, grows with it: an agent server start cost 0.9 CPU-s on this project's 2-core machine at
// one hour and 2.3 at another (bench/results/suite-time.md). `.ci/run` prints it before and after the tests, with the
// share of time the hypervisor took from the machine meanwhile (steal, from /proc/stat).
//   node scripts/machine-speed.mjs   # the CPU-seconds of the work, the least of three passes (lower is faster)
function work() {
  let acc = 0;
  for (let round = 0; round < 40; round++) {
    const rows = [];
    for (let i = 0; i < 20_000; i++) rows.push({ id: `run-${round}-${i}`, n: i, tags: ['a', 'b', String(i % 7)] });
    const back = JSON.parse(JSON.stringify(rows));
    for (const row of back) if (/-(\d+)7$/.test(row.id)) acc = (acc + row.n * 31) % 1_000_003;
    for (let i = 0; i < 1_000_000; i++) acc = (acc * 33 + i) % 1_000_003;
  }
  return acc;
}

// The least of three: the first pass also pays for compiling and for the CPU leaving a power-saving state.
let best = Infinity;
let acc = 0;
for (let pass = 0; pass < 3; pass++) {
  const started = process.cpuUsage();
  acc += work();
  const used = process.cpuUsage(started);
  best = Math.min(best, (used.user + used.system) / 1e6);
}
process.stdout.write(`${best.toFixed(2)}\n`);
if (acc < 0) process.exitCode = 1; // keeps the work from being optimised away
