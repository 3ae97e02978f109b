// resource.Quantity as the real API server reads and writes it: the decoder refuses text that is not a quantity
// (400 BadRequest, before validation), and every quantity is stored in its canonical form — the largest binary
// suffix that keeps it whole for binary quantities of 1024 or more (`1024Mi` → `1Gi`), otherwise the decimal suffix
// whose exponent is a multiple of three and keeps the mantissa whole (`0.5` → `500m`, `2000` → `2k`), with values
// below a nano rounded up to `1n`.

const QUANTITY = /^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$/;
export const QUANTITY_MESSAGE = `quantities must match the regular expression '${QUANTITY.source}'`;

const BINARY: Record<string, number> = { Ki: 1, Mi: 2, Gi: 3, Ti: 4, Pi: 5, Ei: 6 };
const DECIMAL: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const DECIMAL_SUFFIX = Object.fromEntries(Object.entries(DECIMAL).map(([s, e]) => [e, s])) as Record<number, string>;

export class QuantityError extends Error {}

type Parsed = { mantissa: bigint; exponent: number; format: 'BinarySI' | 'DecimalSI' | 'DecimalExponent' };

/** The exact value of a quantity as mantissa × 10^exponent, and the format its suffix asks for. */
export function parseQuantity(text: string | number): Parsed {
  const s = String(text).trim();
  const m = QUANTITY.exec(s);
  if (!m) throw new QuantityError(QUANTITY_MESSAGE);
  const [, num, suffix] = m as unknown as [string, string, string];
  const digits = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(num);
  if (!digits || (digits[2] === '' && !digits[3])) throw new QuantityError(QUANTITY_MESSAGE);
  const sign = digits[1] === '-' ? -1n : 1n;
  const frac = digits[3] ?? '';
  let mantissa = sign * BigInt(`${digits[2] || '0'}${frac}` || '0');
  let exponent = -frac.length;
  let format: Parsed['format'];
  if (suffix in BINARY) {
    mantissa *= 1024n ** BigInt(BINARY[suffix]!);
    format = 'BinarySI';
  } else if (suffix in DECIMAL) {
    exponent += DECIMAL[suffix]!;
    format = 'DecimalSI';
  } else if (/^[eE][-+]?\d+$/.test(suffix)) {
    exponent += Number(suffix.slice(1));
    format = 'DecimalExponent';
  } else throw new QuantityError(QUANTITY_MESSAGE);
  return { mantissa, exponent, format };
}

/** The canonical text the real server stores and returns for `text`. */
export function canonicalQuantity(text: string | number): string {
  const q = parseQuantity(text);
  let { mantissa, exponent } = q;
  if (mantissa === 0n) return '0';
  while (mantissa % 10n === 0n) {
    mantissa /= 10n;
    exponent += 1;
  }
  let format = q.format;
  if (format === 'BinarySI') {
    const whole = exponent >= 0 ? mantissa * 10n ** BigInt(exponent) : undefined;
    if (whole === undefined || (whole > -1024n && whole < 1024n)) format = 'DecimalSI';
    else {
      let n = whole;
      let k = 0;
      while (k < 6 && n % 1024n === 0n) {
        n /= 1024n;
        k += 1;
      }
      return `${n}${['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][k]}`;
    }
  }
  // Below a nano the value is rounded up (away from zero for negatives, as the server's Ceil does for them too).
  if (exponent < -9) {
    const div = 10n ** BigInt(-9 - exponent);
    const rounded = mantissa / div + (mantissa % div === 0n ? 0n : mantissa > 0n ? 1n : 0n);
    mantissa = rounded;
    exponent = -9;
  }
  // The exponent goes down to a multiple of three, the mantissa grows to match.
  const down = ((exponent % 3) + 3) % 3;
  mantissa *= 10n ** BigInt(down);
  exponent -= down;
  if (format === 'DecimalExponent') return exponent === 0 ? `${mantissa}` : `${mantissa}e${exponent}`;
  if (exponent > 18) {
    mantissa *= 10n ** BigInt(exponent - 18);
    exponent = 18;
  }
  return `${mantissa}${DECIMAL_SUFFIX[exponent]}`;
}

/** Compares two quantities by value: negative, zero or positive. */
export function compareQuantities(a: string | number, b: string | number): number {
  const x = parseQuantity(a);
  const y = parseQuantity(b);
  const e = Math.min(x.exponent, y.exponent);
  const d = x.mantissa * 10n ** BigInt(x.exponent - e) - y.mantissa * 10n ** BigInt(y.exponent - e);
  return d === 0n ? 0 : d < 0n ? -1 : 1;
}
