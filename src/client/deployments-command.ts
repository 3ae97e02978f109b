// `agentplane deployments list|get|delete`: the tenant's deployments over the REST API.
import { setTimeout as sleep } from 'node:timers/promises';
import { UsageError } from '../lib/cli-args.ts';
import {
  CliError,
  clientFrom,
  connectionOptions,
  parseSubcommand,
  pickString,
  positiveInt,
  runReporting,
  type ClientCommandSpec,
} from './args.ts';
import { ApiError, type ControlPlaneClient, type Deployment } from '../api/client.ts';
import { fields, printJson, shortSha, table, when } from './output.ts';
import { servedGraphs } from './graph-ids.ts';
import { findDeployment } from './resolve.ts';

export const deploymentsCommand: ClientCommandSpec = {
  name: 'deployments',
  summary: 'List, show or delete deployments (by name or id)',
  usage:
    'agentplane deployments list [--name-contains TEXT] [--limit 50] [--json]\n' +
    '       agentplane deployments get <name|id> [--json]\n' +
    '       agentplane deployments delete <name|id> [--wait] [--json]',
  options: {
    'name-contains': { type: 'string', description: 'list: only names containing this text (case-insensitive)' },
    limit: { type: 'string', description: 'list: at most this many (newest first)', default: '50' },
    wait: {
      type: 'boolean',
      description: 'delete: return once the deployment is gone (its processes stopped, its data removed)',
    },
    timeout: { type: 'string', description: 'delete --wait: seconds to wait', default: '300' },
    ...connectionOptions,
  },
};

const SUBCOMMANDS = ['list', 'get', 'delete'] as const;

export async function run(argv: string[]): Promise<void> {
  const parsed = parseSubcommand(deploymentsCommand, SUBCOMMANDS, argv);
  if (!parsed) return;
  const { sub, flags, positionals } = parsed;
  const want = sub === 'list' ? 0 : 1;
  if (positionals.length !== want) {
    throw new UsageError(want ? `${sub} needs one deployment name or id` : `unexpected argument "${positionals[0]}"`);
  }
  const json = flags.json === true;
  const limit = positiveInt('--limit', pickString(deploymentsCommand, flags, 'limit'), 50);
  const timeoutMs = positiveInt('--timeout', pickString(deploymentsCommand, flags, 'timeout'), 300) * 1000;
  const client = clientFrom(deploymentsCommand, flags);
  await runReporting(`deployments ${sub}`, async () => {
    if (sub === 'list')
      return list(client, { nameContains: pickString(deploymentsCommand, flags, 'name-contains'), limit, json });
    const dep = await findDeployment(client, positionals[0]!);
    if (sub === 'get') return get(client, dep, json);
    return remove(client, dep, { wait: flags.wait === true, timeoutMs, json });
  });
}

async function list(
  client: ControlPlaneClient,
  o: { nameContains?: string; limit: number; json: boolean },
): Promise<void> {
  const all: Deployment[] = [];
  for (let offset = 0; all.length < o.limit;) {
    const page = await client.listDeployments({
      name_contains: o.nameContains,
      limit: Math.min(100, o.limit - all.length),
      offset,
    });
    all.push(...page.resources);
    if (!page.resources.length || page.offset <= offset) break;
    offset = page.offset;
  }
  if (o.json) return printJson(all);
  if (!all.length) {
    process.stdout.write('no deployments\n');
    return;
  }
  const rows = all.map((d) => [d.name, d.id, statusLabel(d), d.source_revision_config.repo_ref ?? '', d.url ?? '']);
  process.stdout.write(table(['NAME', 'ID', 'STATUS', 'REF', 'URL'], rows));
}

/**
 * One phrase for what a person looks for first: "serving rev 3", "building rev 4 (serving rev 3)",
 * "failed: BUILD_FAILED, rev 4 (serving rev 3)", "deleting" (from the API's status_summary).
 */
function statusLabel(d: Deployment): string {
  const s = d.status_summary;
  const serving = s.serving_revision_number === null ? '' : `serving rev ${s.serving_revision_number}`;
  const rev = s.target_revision_number === null ? '' : `rev ${s.target_revision_number}`;
  const also = serving ? ` (${serving})` : '';
  switch (s.state) {
    case 'serving':
      // Asleep under the idle policy: it serves all the same (its first request starts it).
      return s.reason === 'Sleeping' ? `sleeping${serving ? ` (${serving})` : ''}` : serving || 'serving';
    case 'building':
      return `building${rev ? ` ${rev}` : ''}${also}`;
    case 'failed':
      return `failed: ${s.reason ?? 'unknown'}${rev ? `, ${rev}` : ''}${also}`;
    default:
      return s.state;
  }
}

/** "ready", "ready (Sleeping)", or "not ready (<reason>)", or "-" before the operator looked. */
const healthLabel = (h: Deployment['health'] | undefined) =>
  !h || h.ready === null
    ? '-'
    : h.ready
      ? h.reason === 'Sleeping'
        ? 'ready (Sleeping)'
        : 'ready'
      : `not ready${h.reason ? ` (${h.reason})` : ''}`;

async function get(client: ControlPlaneClient, d: Deployment, json: boolean): Promise<void> {
  if (json) return printJson(d);
  const [latest, active] = await Promise.all([
    d.latest_revision_id ? client.getRevision(d.id, d.latest_revision_id) : undefined,
    d.active_revision_id ? client.getRevision(d.id, d.active_revision_id) : undefined,
  ]);
  const src = d.source_revision_config;
  const graphs = active ? await servedGraphs(client, d.id, active.id).catch(() => []) : [];
  process.stdout.write(
    fields([
      ['name', d.name],
      ['id', d.id],
      ['status', statusLabel(d)],
      ...(d.status_summary.message ? ([['why', d.status_summary.message]] as [string, string][]) : []),
      // Nothing serves: the URL answers nothing yet, so it is not offered as the way to call the agent.
      ['url', d.url ? (active ? d.url : `${d.url} (answers once a revision serves)`) : '(not served yet)'],
      [
        'access',
        d.source_config.access_mode === 'public'
          ? 'public (no key needed)'
          : `API key of tenant ${d.tenant_id} (X-Api-Key header)`,
      ],
      [
        'latest revision',
        latest
          ? `${latest.revision_number} ${latest.status}${latest.status_message ? `: ${latest.status_message}` : ''}`
          : '-',
      ],
      ['serving revision', active ? `${active.revision_number} (${shortSha(active.repo_commit_sha)})` : 'none'],
      [
        'health',
        `${healthLabel(d.health)}${d.health?.ready === false && d.health.message ? `: ${d.health.message}` : ''}` +
          (d.health?.since ? ` (since ${when(d.health.since)})` : ''),
      ],
      ['repository', d.source_config.repo_url],
      ['ref', `${src.repo_ref ?? ''}${src.repo_commit_sha ? ` @ ${shortSha(src.repo_commit_sha)}` : ''}`],
      ['langgraph.json', src.graph_config_path],
      ['graphs', graphs.map((g) => `${g.graphId} (assistant ${g.assistantId})`).join(', ')],
      ['install command', d.source_config.install_command],
      ['build command', d.source_config.build_command],
      ['secrets', d.secrets.map((s) => s.name).join(', ')],
      ['created', when(d.created_at)],
      ['updated', when(d.updated_at)],
    ]),
  );
  if (d.url && active) process.stdout.write(howToCall(d, graphs[0]?.graphId));
}

function howToCall(d: Deployment, graphId = '<graph id>'): string {
  const open = d.source_config.access_mode === 'public';
  const header = open ? '' : ` -H "X-Api-Key: $AGENTPLANE_API_KEY"`;
  return [
    '',
    'Call it (LangGraph SDK or HTTP):',
    `  new Client({ apiUrl: '${d.url}'${open ? '' : ', apiKey: process.env.AGENTPLANE_API_KEY'} })   // @langchain/langgraph-sdk`,
    `  curl -s -X POST ${d.url}/runs/wait${header} -H 'content-type: application/json' \\`,
    `    -d '{"assistant_id":"${graphId}","input":{"messages":[{"role":"human","content":"Hi"}]}}'`,
    '',
  ].join('\n');
}

async function remove(
  client: ControlPlaneClient,
  d: Deployment,
  o: { wait: boolean; timeoutMs: number; json: boolean },
): Promise<void> {
  await client.deleteDeployment(d.id);
  if (o.wait) {
    const until = Date.now() + o.timeoutMs;
    for (;;) {
      try {
        await client.getDeployment(d.id);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) break;
        throw err;
      }
      if (Date.now() > until)
        throw new CliError(`deployment ${d.name} is still being deleted after ${o.timeoutMs / 1000}s`);
      await sleep(500);
    }
  }
  if (o.json) printJson({ deleted: d.id, name: d.name });
  else
    process.stdout.write(
      `deleted deployment ${d.name} (${d.id})${o.wait ? '' : '; its processes and data go in the background'}\n`,
    );
}
