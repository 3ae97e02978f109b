// Prints the functions with the most self time in a V8 .cpuprofile (from `npm run bench -- --profile`), and
// the same grouped by package, to point at a bottleneck without opening DevTools.
//   node --import tsx bench/profile-summary.ts /tmp/ap-bench-xyz/CPU.*.cpuprofile [--top 30] [--match RunTree]
// --match lists the functions whose name or file contains the text with their total (inclusive) time: what a
// call costs with everything it calls, e.g. the langsmith RunTree constructor.
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({
  options: { top: { type: 'string', default: '30' }, match: { type: 'string', multiple: true, default: [] } },
  allowPositionals: true,
});
const top = Number(values.top);

function packageOf(url: string): string {
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:') || url === '') return url || '(native/gc/idle)';
  const src = url.indexOf('/src/');
  return src >= 0
    ? url
        .slice(src + 1)
        .split('/')
        .slice(0, 3)
        .join('/')
    : url;
}

const keyOf = (n: ProfileNode): string => {
  const { functionName, url, lineNumber } = n.callFrame;
  return `${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '')}:${lineNumber + 1}`;
};

/** Inclusive time per function (a recursive function's inner calls are not counted twice). */
function inclusive(profile: Profile, self: Map<number, number>, byId: Map<number, ProfileNode>): Map<string, number> {
  const total = new Map<string, number>();
  const childIds = new Set(profile.nodes.flatMap((n) => n.children ?? []));
  const stack: Array<{ id: number; open: Set<string>; enter: boolean }> = profile.nodes
    .filter((n) => !childIds.has(n.id))
    .map((n) => ({ id: n.id, open: new Set<string>(), enter: true }));
  // Subtree sums first (post-order), then each node adds its sum to its function unless an ancestor has it.
  const sum = new Map<number, number>();
  const order: number[] = [];
  const todo = [...stack.map((s) => s.id)];
  while (todo.length) {
    const id = todo.pop()!;
    order.push(id);
    for (const c of byId.get(id)!.children ?? []) todo.push(c);
  }
  for (const id of order.reverse()) {
    let s = self.get(id) ?? 0;
    for (const c of byId.get(id)!.children ?? []) s += sum.get(c) ?? 0;
    sum.set(id, s);
  }
  const walk = [...stack];
  while (walk.length) {
    const { id, open } = walk.pop()!;
    const key = keyOf(byId.get(id)!);
    const fresh = !open.has(key);
    if (fresh) total.set(key, (total.get(key) ?? 0) + sum.get(id)!);
    const next = fresh ? new Set(open).add(key) : open;
    for (const c of byId.get(id)!.children ?? []) walk.push({ id: c, open: next, enter: true });
  }
  return total;
}

for (const file of positionals) {
  const profile = JSON.parse(await readFile(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (const [i, id] of profile.samples.entries()) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const fns = new Map<string, number>();
  const pkgs = new Map<string, number>();
  for (const [id, us] of self) {
    const { url } = byId.get(id)!.callFrame;
    const key = keyOf(byId.get(id)!);
    fns.set(key, (fns.get(key) ?? 0) + us);
    const pkg = packageOf(url);
    pkgs.set(pkg, (pkgs.get(pkg) ?? 0) + us);
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
  process.stdout.write(`\n${file}: ${(total / 1e6).toFixed(1)} s sampled\n\nby package:\n`);
  for (const [k, us] of [...pkgs].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(us)}  ${k}\n`);
  process.stdout.write('\nby function (self time):\n');
  for (const [k, us] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, top)) process.stdout.write(`${pct(us)}  ${k}\n`);
  if (values.match.length) {
    const incl = inclusive(profile, self, byId);
    const busy = total - [...fns].filter(([k]) => k.startsWith('(idle)')).reduce((a, [, us]) => a + us, 0);
    process.stdout.write(`\nmatching ${values.match.join(', ')} (total time incl. callees; % of busy time):\n`);
    const hits = [...incl].filter(([k]) => values.match.some((m) => k.includes(m)));
    for (const [k, us] of hits.sort((a, b) => b[1] - a[1]).slice(0, top))
      process.stdout.write(`${((100 * us) / busy).toFixed(1).padStart(5)}%  ${k}\n`);
  }
}
