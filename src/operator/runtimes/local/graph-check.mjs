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
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
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
  let problem;
  try {
    await esbuild.build({
      entryPoints: [file],
      absWorkingDir: root,
      bundle: true,
      write: false,
      platform: 'node',
      format: 'esm',
      logLevel: 'silent',
      plugins: [followOwnFiles],
    });
  } catch (err) {
    const first = err.errors?.[0];
    if (!first) {
      problem = `${shown(file)}: ${String(err.message ?? err).split('\n')[0]}`;
    } else if (first.location) {
      const at = first.location;
      problem = `${shown(at.file)}:${at.line}:${at.column + 1}: ${first.text}`;
    } else if (/^Could not resolve/.test(first.text)) {
      problem = `${shown(file)}: file not found`;
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
