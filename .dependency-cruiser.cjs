// Import rules of src/, checked by `npm run checks` (scripts/checks.mjs): no import cycles, and the layering of the
// README's diagram: lib (and the resource types) at the bottom, the platform's shared state (src/state) and git (git
// URLs and clone credentials) on them, the API floor (src/api: the control plane's wire schemas and the one client of
// it) on those, and the apps (agent-server, control-plane, operator, local, listener, dev, client) above, as peers:
// an app imports no other app. Only the composition roots (COMPOSITION_ROOTS below) wire apps together.
// Imports that broke these rules when the check came in are listed in .dependency-cruiser-known-violations.json and
// tolerated; that list must only shrink (a new violation fails the check). After removing some, regenerate it:
//   npx depcruise-baseline src --config .dependency-cruiser.cjs --output-to .dependency-cruiser-known-violations.json
const APPS = '^src/(agent-server|control-plane|operator|local|listener|dev|client)/';

// The files that assemble several apps into one process, and so may import other apps. Every other file of an app
// imports only its own app and the floors below (api, state, git, resources, lib). src/cli.ts (the one binary) is a
// root too; it sits outside every app.
const COMPOSITION_ROOTS = [
  // `agentplane dev`: the control plane and the local data plane in one process, with the control plane's flags
  '^src/dev/config\\.ts$',
  '^src/dev/control-plane\\.ts$',
  '^src/dev/server\\.ts$',
  // `agentplane listener`: the local data plane or a cluster's store, synced with a remote control plane
  '^src/listener/command\\.ts$',
  // the local data plane dev and the listener share: the operator with its local runtime and the agents' key files
  '^src/local/data-plane\\.ts$',
  // `agentplane data-key rotate`: the store's flags as the control plane names them
  '^src/local/data-key-command\\.ts$',
];

// What one app publishes for another to import, each with the reason it is not on a floor below.
const PUBLISHED = [
  // The work a stopped agent server's store holds (queued runs, due crons), read by the operator's idle policy: it
  // reads the agent server's own tables, so it lives with them and changes with them.
  '^src/agent-server/storage/pending-work\\.ts$',
];

// The agent server's floors, bottom up (docs/development.md, "The agent server's floors"). A file may import its own
// floor and the floors below it, never one above; folders on one floor are peers (no-circular keeps them apart).
// Every file of src/agent-server sits on one floor: a new top-level file or folder must be added here.
const AGENT_SERVER_FLOORS = [
  {
    name: 'shims',
    paths: ['shims/'],
    why: 'The replacements of LangChain internals lean on upstream packages alone, so each is rechecked by reading it',
  },
  {
    name: 'serde',
    paths: ['serde\\.ts$'],
    why: 'One JSON form of LangChain objects for every layer that stores or sends them; it builds on the shims only',
  },
  {
    name: 'storage',
    paths: ['storage/'],
    why:
      'The storage port and its adapters keep durable data only: they know no graph, no engine, no caller and no ' +
      'HTTP (they throw the typed errors of src/lib)',
  },
  {
    name: 'graphs',
    paths: ['graphs/', 'platform/', 'streams/'],
    why:
      'What runs are made of, on storage: the loaded graphs, the platform services graph code calls, and the ' +
      'stream-event log with its naming and stream modes; none of them knows the engine that runs them',
  },
  {
    name: 'engine',
    paths: ['runs/'],
    why:
      'The run engine (queue, executors, worker, checkpointer, state reads) runs graphs over storage and knows ' +
      'nothing of who asked: no auth, no wire schema, no service, no HTTP',
  },
  {
    name: 'terms',
    paths: ['auth/', 'schemas/'],
    why:
      "The terms of a request, above the engine: custom auth (the user's handler, its filters and events) and the " +
      'wire schemas the services take and the edge validates; neither knows a service or the HTTP edge',
  },
  {
    name: 'services',
    paths: ['services/'],
    why:
      'The services (one per aggregate, and the cron scheduler that fires runs through the run service) carry the ' +
      "API's operations over storage and the engine; whatever transport calls them, none of it is imported here",
  },
  {
    name: 'edge',
    paths: ['http/', 'routes/', 'protocol/', 'mcp/', 'a2a/'],
    why:
      'The HTTP edge: REST routes, the thread protocol, MCP, A2A and the HTTP plumbing with the auth hooks, all on ' +
      'the services; peers that may import each other, while the composition roots stay above them',
  },
  {
    name: 'roots',
    paths: [
      'app\\.ts$',
      'server\\.ts$',
      'command\\.ts$',
      'config\\.ts$',
      'flags\\.ts$',
      'sizing\\.ts$',
      'check\\.ts$',
      'watch\\.ts$',
    ],
    why:
      'The composition roots build the app, start the server (or watch it, or load its graphs once as a build ' +
      'check) and read the configuration (its flags, and the defaults sized to the machine): they may import any floor',
  },
];
const inAgentServer = (paths) => `^src/agent-server/(${paths.join('|')})`;
const agentServerFloorRules = AGENT_SERVER_FLOORS.map((floor, i) => ({
  name: `agent-server-${floor.name}-floor`,
  severity: 'error',
  comment: `${floor.why}. May import: ${AGENT_SERVER_FLOORS.slice(0, i + 1)
    .map((f) => f.name)
    .join(', ')}`,
  from: { path: inAgentServer(floor.paths) },
  to: {
    path: '^src/agent-server/',
    pathNot: inAgentServer(AGENT_SERVER_FLOORS.slice(0, i + 1).flatMap((f) => f.paths)),
  },
}));

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
      to: { path: [APPS, '^src/api/', '^src/resources/', '^src/git/', '^src/state/', '^src/cli\\.ts$'] },
    },
    {
      name: 'resources-below-apps',
      severity: 'error',
      comment: 'The resource types are shared by the control plane and the operator and import neither',
      from: { path: '^src/resources/' },
      to: { path: [APPS, '^src/api/', '^src/git/', '^src/state/', '^src/cli\\.ts$'] },
    },
    {
      name: 'git-below-apps',
      severity: 'error',
      comment: 'git URLs and clone credentials (src/git) serve every app and import only lib and the resource types',
      from: { path: '^src/git/' },
      to: { path: [APPS, '^src/api/', '^src/state/', '^src/cli\\.ts$'] },
    },
    {
      name: 'api-below-apps',
      severity: 'error',
      comment:
        "The API floor (the control plane's wire schemas and the one client of it) serves the control plane, the CLI " +
        'and the listener, and imports only the floors below it: lib, resources, git and state',
      from: { path: '^src/api/' },
      to: { path: [APPS, '^src/cli\\.ts$'] },
    },
    {
      name: 'apps-are-peers',
      severity: 'error',
      comment:
        'An app imports no other app: what two apps share sits on a floor below (api, state, git, resources, lib). ' +
        'Only the composition roots (COMPOSITION_ROOTS) wire apps together',
      from: { path: APPS, pathNot: COMPOSITION_ROOTS },
      to: { path: APPS, pathNot: ['^src/$1/', ...PUBLISHED] },
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
      to: { path: '^src/(api|control-plane|operator|local|listener|client|state)/' },
    },
    ...agentServerFloorRules,
    {
      name: 'agent-server-file-off-the-floors',
      severity: 'error',
      comment: 'Every file of the agent server sits on one of its floors (AGENT_SERVER_FLOORS above names them all)',
      from: {
        path: '^src/agent-server/',
        pathNot: inAgentServer(AGENT_SERVER_FLOORS.flatMap((f) => f.paths)),
      },
      to: { path: '^src/agent-server/' },
    },
    {
      name: 'agent-server-run-queue-in-the-engine',
      severity: 'error',
      comment:
        'The run queue (create, claim, lease, finish, sweep) is held by the run engine alone: the services create ' +
        'runs through RunEngine.createRun and read or cancel them through the RunStore. Only the engine floor, the ' +
        'storage adapters that implement the queue and the composition root that opens the store and hands it to ' +
        'the engine import its port',
      from: {
        path: '^src/',
        pathNot: '^src/agent-server/(runs/|storage/(embedded|postgres)/|server\\.ts$)',
      },
      to: { path: '^src/agent-server/storage/ports/run-queue\\.ts$' },
    },
    {
      name: 'agent-server-mcp-a2a-through-as-caller',
      severity: 'error',
      comment:
        "MCP and A2A reach the REST API's operations through http/as-caller.ts, which runs them as the route would " +
        "(the caller's headers, custom auth, input checks): importing a route module would skip that one path",
      from: { path: '^src/agent-server/(mcp|a2a)/' },
      to: { path: '^src/agent-server/routes/' },
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
