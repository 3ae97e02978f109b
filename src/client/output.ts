// Plain-text output for people: aligned tables and "key: value" blocks. Scripts use --json instead.

/**
 * Characters a terminal acts on instead of showing, as they appear in text a workspace controls (log lines, status
 * messages quoting an agent's output, names): C0 controls but tab (ESC starts the sequences that move the cursor,
 * rewrite the screen, set the window title or the clipboard, make links), DEL, C1 controls (0x9b is a one-byte
 * CSI), line and paragraph separators, and the bidirectional overrides that make a line read other than it is.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNPRINTABLE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `text` with every character a terminal would act on shown as an escape (`\x1b`, `\u202e`): printed, it only shows. */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows.map((r) => r.map(printable))];
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
  const shown = pairs
    .filter((p): p is [string, string] => p[1] !== undefined && p[1] !== null && p[1] !== '')
    .map(([k, v]): [string, string] => [k, printable(v)]);
  const width = Math.max(...shown.map(([k]) => k.length)) + 2;
  return `${shown.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}`).join('\n')}\n`;
}

export const shortSha = (sha: string | null | undefined) => (sha ? sha.slice(0, 7) : '');

/** "2026-11-23 17:01:02" in UTC: sortable, one width, no locale surprises in CI logs. */
export const when = (iso: string | null | undefined) =>
  iso ? iso.replace('T', ' ').replace(/\.\d+/, '').replace(/Z$/, '') : '';

/** UNPRINTABLE but the C0 controls, which JSON.stringify escapes in strings (and uses as the layout's newlines). */
const UNPRINTABLE_IN_JSON = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** JSON for scripts, with the characters JSON.stringify leaves raw in strings escaped the JSON way (\u009b). */
export function jsonText(value: unknown, space?: number): string {
  return JSON.stringify(value, null, space).replace(
    UNPRINTABLE_IN_JSON,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

export function printJson(value: unknown): void {
  process.stdout.write(`${jsonText(value, 2)}\n`);
}
