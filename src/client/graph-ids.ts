// The graphs a deployment serves, with their assistant ids, as its agent server said when it loaded them (its
// "graph loaded" deploy log lines): the control plane's records do not list them, the serving revision's log does.
import type { ControlPlaneClient } from '../api/client.ts';

export type ServedGraph = { graphId: string; assistantId: string };

/** The graphs the revision's agent server loaded (the first start's lines); [] when its log does not say. */
export async function servedGraphs(
  client: ControlPlaneClient,
  deploymentId: string,
  revisionId: string,
): Promise<ServedGraph[]> {
  const page = await client.logs(deploymentId, revisionId, { type: 'deploy', limit: 200, order: 'asc' });
  const found = new Map<string, string>();
  for (const l of page.logs) {
    if (!l.message.includes('"graph loaded"')) continue;
    try {
      const line = JSON.parse(l.message) as { msg?: unknown; graph_id?: unknown; assistant_id?: unknown };
      if (line.msg === 'graph loaded' && typeof line.graph_id === 'string' && typeof line.assistant_id === 'string')
        found.set(line.graph_id, line.assistant_id);
    } catch {
      // not a JSON line
    }
  }
  return [...found].map(([graphId, assistantId]) => ({ graphId, assistantId }));
}
