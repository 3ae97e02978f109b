// Builds the real Kubernetes control plane the kube test tier (`npm run test:kube`) runs against: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake nodes), from their own Go modules at the
// pinned versions below, into ~/.cache/agentplane/kube/<versions>/ (AGENTPLANE_KUBE_CACHE moves the root).
// Idempotent: a binary already built for these versions is kept. KUBEBUILDER_ASSETS (the envtest convention)
// names a folder of ready binaries instead; then nothing is built.
// Prints the folder on its last stdout line, and what it built with times and sizes on stderr.
//   node scripts/kube-binaries.mjs            build what is missing
//   node scripts/kube-binaries.mjs --check    print the folder if every binary is there, exit 1 otherwise
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// The newest patches the Go module proxy served when this was written (2026-12-01). kube-apiserver 1.34 supports
// etcd 3.6; kwok 0.8 is built from its own module, which requires its own k8s.io/* versions.
export const VERSIONS = { kubernetes: 'v1.34.4', etcd: 'v3.6.16', kwok: 'v0.8.0' };
export const BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok'];
// kwok's stages (what it does to a node or pod, and when): the "fast" set of its own module (nodes initialised and
// kept Ready, pods Running and Ready at once, deleted pods removed), copied next to the binary. kwok ships them only
// embedded in its manifests, and without stages it refuses to start.
export const KWOK_STAGES = 'kwok-stages.yaml';
const STAGE_FILES = [
  'kustomize/stage/node/fast/node-initialize.yaml',
  'kustomize/stage/node/heartbeat/node-heartbeat.yaml',
  'kustomize/stage/pod/fast/pod-ready.yaml',
  'kustomize/stage/pod/fast/pod-complete.yaml',
  'kustomize/stage/pod/fast/pod-delete.yaml',
];
const FILES = [...BINARIES, KWOK_STAGES];

export function cacheFolder() {
  const root = process.env.AGENTPLANE_KUBE_CACHE ?? path.join(os.homedir(), '.cache', 'agentplane', 'kube');
  const key = `k8s-${VERSIONS.kubernetes}_etcd-${VERSIONS.etcd}_kwok-${VERSIONS.kwok}`;
  return path.join(root, key);
}

/** The folder that holds every binary (KUBEBUILDER_ASSETS first), or undefined. */
export function readyFolder() {
  const assets = process.env.KUBEBUILDER_ASSETS;
  if (assets) return FILES.every((b) => existsSync(path.join(assets, b))) ? assets : undefined;
  const folder = cacheFolder();
  return FILES.every((b) => existsSync(path.join(folder, b))) ? folder : undefined;
}

export function hasGo() {
  return spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0;
}

function run(cmd, args, cwd, env = {}) {
  const r = spawnSync(cmd, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, ...env } });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited with ${r.status ?? r.signal}`);
}

function output(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status ?? r.signal}`);
  return r.stdout;
}

// k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and replaces them
// with folders of its own repository; a module that requires k8s.io/kubernetes must pin each to its published
// v0.<minor>.<patch> twin. The list is read from the go.mod of the version itself, so it cannot go stale.
function stagingModules(work) {
  const info = JSON.parse(output('go', ['mod', 'download', '-json', `k8s.io/kubernetes@${VERSIONS.kubernetes}`], work));
  const gomod = readFileSync(info.GoMod, 'utf8');
  return [...gomod.matchAll(/^\s*(k8s\.io\/[\w.-]+) => \.\/staging\//gm)].map((m) => m[1]);
}

const LDFLAGS = '-s -w';
const ENV = { CGO_ENABLED: '0', GOFLAGS: '-mod=mod -buildvcs=false', GOTOOLCHAIN: 'local' };

function consumerModule(dir, name, requires, replaces = []) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const lines = [`module agentplane.local/${name}`, '', 'go 1.24', '', 'require ('];
  for (const [mod, v] of requires) lines.push(`\t${mod} ${v}`);
  lines.push(')');
  if (replaces.length > 0) {
    lines.push('', 'replace (');
    for (const [mod, v] of replaces) lines.push(`\t${mod} => ${mod} ${v}`);
    lines.push(')');
  }
  writeFileSync(path.join(dir, 'go.mod'), `${lines.join('\n')}\n`);
}

// Builds packages into a temporary folder first, then renames: a killed build never leaves a half-written binary
// that readyFolder() would take for a finished one.
function build(dir, out, version, packages, ldflags = LDFLAGS) {
  const tmp = path.join(dir, 'bin');
  mkdirSync(tmp, { recursive: true });
  // `go get` resolves the module graph (with the replaces) and writes go.sum; the build then needs no network. The
  // version on each package: without it go would take the newest release of the module.
  run('go', ['get', ...packages.map(([pkg]) => `${pkg}@${version}`)], dir, ENV);
  for (const [pkg, binary] of packages) {
    run('go', ['build', '-trimpath', `-ldflags=${ldflags}`, '-o', path.join(tmp, binary), pkg], dir, ENV);
    renameSync(path.join(tmp, binary), path.join(out, binary));
  }
}

function main() {
  const check = process.argv.includes('--check');
  const ready = readyFolder();
  if (ready || check) {
    if (!ready) {
      console.error(`kube binaries: missing in ${process.env.KUBEBUILDER_ASSETS ?? cacheFolder()}`);
      process.exit(1);
    }
    console.log(ready);
    return;
  }
  if (process.env.KUBEBUILDER_ASSETS) {
    throw new Error(`KUBEBUILDER_ASSETS=${process.env.KUBEBUILDER_ASSETS} lacks one of ${FILES.join(', ')}`);
  }
  if (!hasGo()) throw new Error('Go is not installed: https://go.dev/doc/install (needed to build the kube binaries)');
  const out = cacheFolder();
  const src = path.join(out, 'src');
  mkdirSync(out, { recursive: true });
  const missing = (names) => names.filter((b) => !existsSync(path.join(out, b)));
  const times = {};
  const startedAt = Date.now();

  const k8s = missing(['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']);
  if (k8s.length > 0) {
    const t = Date.now();
    const dir = path.join(src, 'kubernetes');
    mkdirSync(dir, { recursive: true });
    const staging = stagingModules(dir);
    const v0 = VERSIONS.kubernetes.replace(/^v1\./, 'v0.');
    consumerModule(
      dir,
      'kubernetes',
      [['k8s.io/kubernetes', VERSIONS.kubernetes]],
      staging.map((m) => [m, v0]),
    );
    // Without these the servers report v0.0.0-master, which helm and kubectl show as the cluster's version.
    const [major, minor] = VERSIONS.kubernetes.slice(1).split('.');
    const version = [
      `gitVersion=${VERSIONS.kubernetes}`,
      `gitMajor=${major}`,
      `gitMinor=${minor}`,
      'gitTreeState=clean',
    ].map((kv) => `-X k8s.io/component-base/version.${kv}`);
    build(
      dir,
      out,
      VERSIONS.kubernetes,
      k8s.map((b) => [`k8s.io/kubernetes/cmd/${b}`, b]),
      `${LDFLAGS} ${version.join(' ')}`,
    );
    times.kubernetes = Date.now() - t;
  }
  if (missing(['etcd']).length > 0) {
    const t = Date.now();
    const dir = path.join(src, 'etcd');
    consumerModule(dir, 'etcd', [['go.etcd.io/etcd/server/v3', VERSIONS.etcd]]);
    build(dir, out, VERSIONS.etcd, [['go.etcd.io/etcd/server/v3', 'etcd']]);
    times.etcd = Date.now() - t;
  }
  if (missing(['kwok']).length > 0) {
    const t = Date.now();
    const dir = path.join(src, 'kwok');
    consumerModule(dir, 'kwok', [['sigs.k8s.io/kwok', VERSIONS.kwok]]);
    build(dir, out, VERSIONS.kwok, [['sigs.k8s.io/kwok/cmd/kwok', 'kwok']]);
    times.kwok = Date.now() - t;
  }
  if (!existsSync(path.join(out, KWOK_STAGES))) {
    const dir = path.join(src, 'kwok');
    mkdirSync(dir, { recursive: true });
    const mod = JSON.parse(output('go', ['mod', 'download', '-json', `sigs.k8s.io/kwok@${VERSIONS.kwok}`], dir));
    const stages = STAGE_FILES.map((f) => readFileSync(path.join(mod.Dir, f), 'utf8').trim()).join('\n---\n');
    writeFileSync(path.join(out, KWOK_STAGES), `${stages}\n`);
  }
  rmSync(src, { recursive: true, force: true });
  for (const [what, ms] of Object.entries(times))
    console.error(`kube binaries: built ${what} in ${(ms / 1000).toFixed(0)} s`);
  for (const b of BINARIES) {
    console.error(`kube binaries: ${b} ${(statSync(path.join(out, b)).size / 2 ** 20).toFixed(1)} MiB`);
  }
  console.error(`kube binaries: ${((Date.now() - startedAt) / 1000).toFixed(0)} s in all, in ${out}`);
  console.log(out);
}

if (import.meta.url === `file://${process.argv[1]}`) main();
