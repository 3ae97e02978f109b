// Small string helpers for tenant-controlled text, written as loops where the obvious regular expression backtracks.

/** `text` without the run of `char` at its end. Stands in for `replace(/x+$/, '')`, which is quadratic on a long run
 *  of x that is not at the end (the pattern is retried at every offset of the run). */
export function trimTrailing(text: string, char: string): string {
  let end = text.length;
  while (end > 0 && text[end - 1] === char) end--;
  return end === text.length ? text : text.slice(0, end);
}
