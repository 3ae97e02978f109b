// The agent tree of a run (agent.getTree, and the tree the protocol route serves): its graph and the subgraphs it
// entered, from the run's stored events mapped to protocol lifecycle events.
import type { AgentService } from '../services/index.ts';
import type { RunRecord } from '../storage/types.ts';
import { ProtocolMapper } from './events.ts';
import { runFactsOf } from './session.ts';

export interface TreeNode {
  namespace: string[];
  status: string;
  graph_name: string;
  children?: TreeNode[];
}

/** A run's status as a tree node's, for a run whose events are gone (past retention). */
const RUN_STATUS_AS_NODE: Record<string, string> = {
  pending: 'started',
  running: 'running',
  success: 'completed',
  interrupted: 'interrupted',
  error: 'failed',
  timeout: 'failed',
};

/**
 * The run's graph and the subgraphs it entered, each with its latest lifecycle status, as the run's stored events
 * map to protocol lifecycle events (the same on every replica); a run whose events are gone (past retention) is one
 * node with its run status.
 */
export async function runTree(deps: { service: AgentService }, threadId: string, run: RunRecord): Promise<TreeNode> {
  const { runs, streams } = deps.service;
  const facts = async (id: string) => runFactsOf(await runs.get(threadId, id));
  const mapper = new ProtocolMapper({ started: facts, ended: facts });
  const nodes = new Map<string, TreeNode>();
  for (let after = -1; ;) {
    const page = await streams.read(run.run_id, after, 500, true);
    if (!page.length) break;
    after = page.at(-1)!.id;
    for (const e of page) {
      for (const ev of await mapper.map(e)) {
        if (ev.method !== 'lifecycle') continue;
        const data = ev.params.data as { event: string; graph_name?: string };
        const ns = ev.params.namespace;
        nodes.set(ns.join('\0'), { namespace: ns, status: data.event, graph_name: data.graph_name ?? 'graph' });
      }
    }
  }
  if (!nodes.has('')) {
    nodes.set('', { namespace: [], status: RUN_STATUS_AS_NODE[run.status]!, graph_name: runFactsOf(run)!.graphName });
  }
  // Each namespace under its longest prefix seen (the root at the latest).
  for (const [key, node] of nodes) {
    if (!key) continue;
    let parent: TreeNode | undefined;
    for (let n = node.namespace.length - 1; !parent; n--) parent = nodes.get(node.namespace.slice(0, n).join('\0'));
    (parent.children ??= []).push(node);
  }
  return nodes.get('')!;
}
