// The build's graph load check: `node graph-check.mjs <langgraph.json> <repository root> <report file>`, run as a
// build step (inside the sandbox when there is one). Each graph's module and the repository files it imports are
// parsed by esbuild; a syntax error, or a static import of a file or package that cannot be found, is written to the
// report file as one line,
//   graph "<id>": <file relative to the repository>:<line>:<column>: <message>
// which fails the build with that line (said once, by the build's failure) instead of a deploy that crashes on it.
// Nothing of the repository is executed (its code may need the deployment's secrets, which builds do not get).
// Exits 0 when the check ran (whatever it found), non-zero only when it could not run.
// Only files inside the repository are read: a symlink out of it (say to the clone step's mounted git credentials)
// is a problem line naming the repository's own path, never anything of the target, so no part of a file the
// repository does not hold can reach the build log or the revision's status.
import { existsSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { dirname, extname, isAbsolute, relative, resolve, sep } from 'node:path';
import * as esbuild from 'esbuild';

const [configPath, root, reportFile] = process.argv.slice(2);
if (!configPath || !root || !reportFile) {
  process.stderr.write('usage: graph-check.mjs <langgraph.json> <repository root> <report file>\n');
  process.exit(2);
}
const problems = [];
const report = () => writeFileSync(reportFile, problems.map((p) => `${p}\n`).join(''), { flag: 'wx' });

let realRoot;
try {
  realRoot = realpathSync(root);
} catch (err) {
  process.stderr.write(`repository root ${root}: ${err.message}\n`);
  process.exit(2);
}
/** False when `file` exists and its real path (symlinks followed) is outside the repository. */
const insideRepository = (file) => {
  let real;
  try {
    real = realpathSync(file);
  } catch {
    return true; // missing: esbuild names it
  }
  const rel = relative(realRoot, real);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
};
const OUTSIDE = "resolves outside the repository (a symlink?); only the repository's own files can be loaded";

const installed = existsSync(resolve(process.cwd(), 'node_modules'));
const PARSED = new Set(['.ts', '.mts', '.cts', '.tsx', '.js', '.mjs', '.cjs', '.jsx', '.json']);
const shown = (file) => {
  const rel = relative(root, isAbsolute(file) ? file : resolve(root, file));
  return rel && !rel.startsWith('..') ? rel : file;
};

/** Follows the repository's own files; packages, builtins and files esbuild does not parse are left to runtime. */
const followOwnFiles = {
  name: 'follow-own-files',
  setup(build) {
    build.onResolve({ filter: /.*/ }, async (args) => {
      if (args.pluginData === 'inner' || args.kind === 'entry-point') return undefined;
      if (isBuiltin(args.path)) return { path: args.path, external: true };
      // Packages are checked once something installed them (a custom install_command may not use node_modules).
      if (!installed && !/^[./]/.test(args.path)) return { path: args.path, external: true };
      const found = await build.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: 'inner',
      });
      if (found.errors.length) {
        // An optional require() or import() may be guarded at runtime; a static import always fails to load.
        if (args.kind !== 'import-statement') return { path: args.path, external: true };
        return { errors: [{ text: `cannot find module "${args.path}"` }] };
      }
      // Packages (a shared node_modules may live outside the checkout) and other kinds of files are not read.
      if (found.external || /[/\\]node_modules[/\\]/.test(found.path) || !PARSED.has(extname(found.path))) {
        return { path: found.path, external: true };
      }
      if (!insideRepository(found.path)) return { errors: [{ text: `"${args.path}" ${OUTSIDE}` }] };
      return { path: found.path };
    });
  },
};

let graphs;
if (!insideRepository(configPath)) {
  problems.push(`graph config ${shown(configPath)} ${OUTSIDE}`);
  report();
  process.exit(0);
}
try {
  graphs = JSON.parse(readFileSync(configPath, 'utf8')).graphs ?? {};
} catch (err) {
  problems.push(`graph config ${shown(configPath)}: ${err.message.split('\n')[0]}`);
  report();
  process.exit(0);
}

for (const [id, entry] of Object.entries(graphs)) {
  const spec = typeof entry === 'string' ? entry : entry?.path;
  if (typeof spec !== 'string') continue; // the agent server names what is wrong with such an entry
  const colon = spec.lastIndexOf(':');
  const file = resolve(dirname(configPath), colon > 0 ? spec.slice(0, colon) : spec);
  if (!PARSED.has(extname(file))) continue;
  if (!insideRepository(file)) {
    problems.push(`graph "${id}": ${shown(file)} ${OUTSIDE}`);
    continue;
  }
  // The agent server loads the file by this very name (esbuild would take agent.ts for agent.js; the server won't).
  if (!existsSync(file)) {
    problems.push(`graph "${id}": ${shown(file)}: file not found${didYouMean(nearFiles(file))}`);
    continue;
  }
  const exportName = colon > 0 ? spec.slice(colon + 1) : undefined;
  let problem;
  try {
    const result = await esbuild.build({
      entryPoints: [file],
      absWorkingDir: root,
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      logLevel: 'silent',
      plugins: [followOwnFiles],
    });
    if (exportName) problem = missingExport(result.metafile, file, exportName);
  } catch (err) {
    const first = err.errors?.[0];
    if (!first) {
      problem = `${shown(file)}: ${String(err.message ?? err).split('\n')[0]}`;
    } else if (first.location) {
      const at = first.location;
      problem = `${shown(at.file)}:${at.line}:${at.column + 1}: ${first.text}`;
    } else if (/^Could not resolve/.test(first.text)) {
      problem = `${shown(file)}: file not found${didYouMean(nearFiles(file))}`;
    } else {
      problem = `${shown(file)}: ${first.text}`;
    }
  }
  if (problem) problems.push(`graph "${id}": ${problem}`);
}
report();
process.stdout.write(
  problems.length ? `${problems.length} graph(s) would not load\n` : `${Object.keys(graphs).length} graph(s) parsed\n`,
);

/**
 * The graph's export is missing from its module: esbuild lists an ES module's exports without running it. Said only
 * when the list is complete (no CommonJS module, no `export *` from a package, which only a run would know).
 */
function missingExport(metafile, file, name) {
  const output = Object.values(metafile.outputs).find((o) => o.entryPoint);
  if (!output) return undefined;
  const own = Object.entries(metafile.inputs);
  const entry = own.find(([path]) => resolve(root, path) === file)?.[1];
  if (entry?.format !== 'esm' || own.some(([, input]) => input.format === 'cjs')) return undefined;
  const reexportsPackage = own.some(([path]) => {
    try {
      return /export\s*\*\s*(as\s+\w+\s*)?from\s*['"][^./]/.test(readFileSync(resolve(root, path), 'utf8'));
    } catch {
      return true;
    }
  });
  if (reexportsPackage || output.exports.includes(name)) return undefined;
  const exported = output.exports.filter((e) => e !== 'default');
  const listed = exported.length ? `; it exports ${exported.slice(0, 8).join(', ')}` : '; it exports nothing by name';
  const near = nearNames(name, output.exports);
  return `${shown(file)}: no export named "${name}"${near.length ? didYouMean(near) : listed}`;
}

/** Files beside a missing one whose names are near its name (a typo, another extension). */
function nearFiles(file) {
  let names;
  try {
    names = readdirSync(dirname(file));
  } catch {
    return [];
  }
  const base = file.slice(dirname(file).length + 1);
  const stem = base.replace(/\.[^.]+$/, '');
  const sameStem = names.filter((n) => n !== base && n.replace(/\.[^.]+$/, '') === stem);
  const near = sameStem.length ? sameStem : nearNames(base, names);
  return near.map((n) => shown(resolve(dirname(file), n)));
}

function didYouMean(names) {
  return names.length ? ` (did you mean ${names.map((n) => `"${n}"`).join(' or ')}?)` : '';
}

/**
 * Names within a typo of `name` (edit distance up to a third of its length, a swap of neighbours counting one), the
 * nearest first. The same measure as src/lib/near-names.ts, which this plain script, run by node alone, cannot import.
 */
function nearNames(name, known) {
  const limit = Math.max(1, Math.floor(name.length / 3));
  return [...new Set(known)]
    .map((k) => ({ k, d: distance(name, k) }))
    .filter(({ k, d }) => d <= limit && k !== name)
    .sort((a, b) => a.d - b.d || a.k.localeCompare(b.k))
    .slice(0, 3)
    .map(({ k }) => k);
}

function distance(a, b) {
  if (Math.abs(a.length - b.length) > 3) return Infinity;
  let before = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        cur[j] = Math.min(cur[j], before[j - 2] + 1);
    }
    [before, prev] = [prev, cur];
  }
  return prev[b.length];
}
