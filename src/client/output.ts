// Plain-text output for people: aligned tables and "key: value" blocks. Scripts use --json instead.
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return `${all
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}

export function fields(pairs: [string, string | undefined | null][]): string {
  const shown = pairs.filter((p): p is [string, string] => p[1] !== undefined && p[1] !== null && p[1] !== '');
  const width = Math.max(...shown.map(([k]) => k.length)) + 2;
  return `${shown.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}`).join('\n')}\n`;
}

export const shortSha = (sha: string | null | undefined) => (sha ? sha.slice(0, 7) : '');

/** "2026-11-23 17:01:02" in UTC: sortable, one width, no locale surprises in CI logs. */
export const when = (iso: string | null | undefined) =>
  iso ? iso.replace('T', ' ').replace(/\.\d+/, '').replace(/Z$/, '') : '';

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
