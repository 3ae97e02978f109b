// "Did you mean": the known names a mistyped one was probably meant as (flags, commands, git refs, exports, files).
// Hand-written: a dozen lines, and the libraries that do it weigh more than they give.

/** The known name nearest to `name` (a typo: edit distance up to a third of its length, at least 1), if any. */
export function closest(name: string, known: string[]): string | undefined {
  return nearMatches(name, known, 1)[0];
}

/** Up to `max` known names within typo distance of `name` (or starting with it), nearest first. */
export function nearMatches(name: string, known: string[], max = 3): string[] {
  const limit = Math.max(1, Math.floor(name.length / 3));
  return [...new Set(known)]
    .map((k) => ({ k, d: k.startsWith(name) && name.length >= 3 ? 1 : editDistance(name, k) }))
    .filter(({ k, d }) => d <= limit && k !== name)
    .sort((a, b) => a.d - b.d || a.k.localeCompare(b.k))
    .slice(0, max)
    .map(({ k }) => k);
}

/** Edit distance counting a swap of two neighbouring letters as one edit (optimal string alignment). */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 3) return Infinity;
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        cur[j] = Math.min(cur[j]!, before[j - 2]! + 1);
    }
    [before, prev] = [prev, cur];
  }
  return prev[b.length]!;
}
