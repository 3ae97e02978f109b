// Import rules of src/, checked by `npm run checks` (scripts/checks.mjs): no import cycles, and the layering of the
// README's diagram: lib (and the resource types) at the bottom, the platform's shared state (src/state) and git (git
// URLs and clone credentials) on them, the apps (agent-server, control-plane, operator, listener, dev, client) above;
// the control plane and the operator talk through resources, never import each other. local/ (the data plane dev and
// the listener share) stands on the operator and the state, below dev and listener.
// Imports that broke these rules when the check came in are listed in .dependency-cruiser-known-violations.json and
// tolerated; that list must only shrink (a new violation fails the check). After removing some, regenerate it:
//   npx depcruise-baseline src --config .dependency-cruiser.cjs --output-to .dependency-cruiser-known-violations.json
const APPS = '^src/(agent-server|control-plane|operator|local|listener|dev|client)/';

/* global module */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'Import cycles', from: {}, to: { circular: true } },
    {
      name: 'lib-is-the-bottom',
      severity: 'error',
      comment: 'src/lib is shared by every app and imports none of them',
      from: { path: '^src/lib/' },
      to: { path: [APPS, '^src/resources/', '^src/git/', '^src/state/', '^src/cli\\.ts$'] },
    },
    {
      name: 'resources-below-apps',
      severity: 'error',
      comment: 'The resource types are shared by the control plane and the operator and import neither',
      from: { path: '^src/resources/' },
      to: { path: [APPS, '^src/git/', '^src/state/', '^src/cli\\.ts$'] },
    },
    {
      name: 'git-below-apps',
      severity: 'error',
      comment: 'git URLs and clone credentials (src/git) serve every app and import only lib and the resource types',
      from: { path: '^src/git/' },
      to: { path: [APPS, '^src/state/', '^src/cli\\.ts$'] },
    },
    {
      name: 'state-below-apps',
      severity: 'error',
      comment: 'The platform state (store ports and backends) stands on lib and resources only; the apps stand on it',
      from: { path: '^src/state/' },
      to: { path: '^src/', pathNot: '^src/(lib|resources|state)/' },
    },
    {
      name: 'control-plane-not-operator',
      severity: 'error',
      from: { path: '^src/control-plane/' },
      to: { path: '^src/operator/' },
    },
    {
      name: 'operator-not-control-plane',
      severity: 'error',
      from: { path: '^src/operator/' },
      to: { path: '^src/control-plane/' },
    },
    {
      name: 'local-above-control-plane-and-operator',
      severity: 'error',
      comment: 'The local data plane assembles the operator; only dev and the listener build on it',
      from: { path: '^src/(control-plane|operator)/' },
      to: { path: '^src/local/' },
    },
    {
      name: 'agent-server-not-platform',
      severity: 'error',
      comment: 'The agent server runs alone (agentplane serve) and knows nothing of the platform that deploys it',
      from: { path: '^src/agent-server/' },
      to: { path: '^src/(control-plane|operator|local|listener|client|state)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)node_modules/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.mjs', '.js', '.json'] },
  },
};
