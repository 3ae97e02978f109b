// Runs one build step as the leader of its process group and ends the whole group when the process that started it
// goes away: stdin is a pipe from that process, and it closes when that process dies, even by SIGKILL. The kernel's
// parent-death signal alone is not enough: it reaches only the direct child, not what a shell or npm starts below it.
// The guard carries no parent-death signal of its own: one would kill it at the moment its stdin closes, before it
// could end the group (its child, the step, carries one instead, so the step dies with the guard).
import { spawn } from 'node:child_process';

const [command, ...args] = process.argv.slice(2);
const endGroup = () => {
  try {
    process.kill(0, 'SIGKILL');
  } catch {
    process.exit(137);
  }
};
process.stdin.on('end', endGroup);
process.stdin.on('error', endGroup);
process.stdin.resume();

const child = spawn(command, args, { stdio: ['ignore', 'inherit', 'inherit'] });
child.on('error', (err) => {
  process.stderr.write(`${command}: ${err.message}\n`);
  process.exit(127);
});
child.on('exit', (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
