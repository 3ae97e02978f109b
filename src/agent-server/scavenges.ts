// Young-generation collections ("scavenges") on the allocating thread alone.
//
// V8 splits each scavenge over its helper threads by default. In this server two JavaScript threads (HTTP and the
// executor) are already busy whenever there is load, so on the small CPU shares agent servers get the helpers only
// take cores from them, and the split itself costs work: the same load took 3.5 % less server CPU per run cycle on
// the embedded store and 8.5 % less on Postgres with one-thread scavenges, with cycles/s up by as much and p99 no
// worse (bench/ab-cycle.ts, 2 cores; bench/results/issue-30.md). Old-generation marking stays concurrent: V8 cannot
// change that once the heap exists, and it is rare here.
import v8 from 'node:v8';

/** Node options by which whoever started the process already chose how V8 collects. */
const CHOSEN_ON_COMMAND_LINE = /^--(no-)?(parallel[-_]scavenge|single[-_]threaded(?:[-_]gc)?)(=|$)/;

/**
 * Makes V8 scavenge on the allocating thread alone for the rest of the process (threads started later included),
 * unless `parallel` asks for V8's default or the node command line already names one of these settings. V8 reads
 * this setting at every scavenge, so it can change after start-up (unlike `--single-threaded-gc`). Returns whether
 * it changed anything.
 */
export function scavengeOnAllocatingThread(
  parallel: boolean,
  execArgv: readonly string[] = process.execArgv,
  setFlags: (flags: string) => void = (flags) => v8.setFlagsFromString(flags),
): boolean {
  if (parallel || execArgv.some((a) => CHOSEN_ON_COMMAND_LINE.test(a))) return false;
  setFlags('--no-parallel-scavenge');
  return true;
}
