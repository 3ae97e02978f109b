import { useState } from 'react';
import { TERMINAL, type Api, type Deployment, type Revision } from '../api.ts';
import { href, navigate } from '../router.ts';
import { Confirm, CopyButton, ErrorBanner, HealthBadge, StateBadge, Status, time, usePoll } from '../ui.tsx';
import { LogViewer } from './LogViewer.tsx';
import { Settings } from './Settings.tsx';

/**
 * Revisions traffic can go to: DEPLOYED ones. A failed, interrupted or skipped revision never takes traffic (the
 * operator keeps what serves), so offering it would promise what cannot happen.
 */
const REDEPLOYABLE = new Set(['DEPLOYED']);

/** What the timeline says under a revision: a DEPLOYED one that no longer serves must not read "Serving traffic". */
function revisionMessage(r: Revision, servingId: string | null, servingNumber: number | null): string | null {
  if (r.status !== 'DEPLOYED' || r.id === servingId) return r.status_message;
  return servingNumber === null ? 'Not serving.' : `Not serving: traffic goes to #${servingNumber}.`;
}

function sdkSnippet(url: string): string {
  return `import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: "${url}", apiKey: process.env.AGENTPLANE_API_KEY });
const thread = await client.threads.create();
for await (const chunk of client.runs.stream(thread.thread_id, "agent", {
  input: { messages: [{ role: "human", content: "Hello" }] },
  streamMode: "messages-tuple",
})) console.log(chunk.event, chunk.data);`;
}

function mcpSnippet(url: string): string {
  return `import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const mcp = new Client({ name: "my-app", version: "1.0.0" });
await mcp.connect(new StreamableHTTPClientTransport(new URL("${url}/mcp"), {
  requestInit: { headers: { "X-Api-Key": process.env.AGENTPLANE_API_KEY } },
}));
const { tools } = await mcp.listTools(); // one tool per assistant
const result = await mcp.callTool({ name: "agent", arguments: { messages: [{ role: "user", content: "Hello" }] } });
// result._meta.thread_id continues the thread: callTool({ ..., _meta: { thread_id, resume } })`;
}

function a2aSnippet(url: string): string {
  return `import { ClientFactory } from "@a2a-js/sdk/client";
import { Role } from "@a2a-js/sdk";

// "agent": a graph id (its default assistant) or an assistant id.
const agent = await new ClientFactory().createFromUrl("${url}/a2a/agent/.well-known/agent-card.json", "");
const task = await agent.sendMessage({
  tenant: "", configuration: undefined, metadata: undefined,
  message: {
    messageId: crypto.randomUUID(), contextId: "my-conversation", taskId: "", role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: "Hello" }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined, extensions: [], referenceTaskIds: [],
  },
});`;
}

export function DeploymentPage({ api, id, revision }: { api: Api; id: string; revision?: string }) {
  const [dep, setDep] = useState<Deployment | null>(null);
  const [revs, setRevs] = useState<Revision[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [gone, setGone] = useState(false);
  // Until a tab is picked: the log of the step that failed (a failed start opens on its deploy log), else the build's.
  const [pickedLogType, setLogType] = useState<'build' | 'deploy' | null>(null);
  const [redeployOf, setRedeployOf] = useState<Revision | null>(null);
  const [deleting, setDeleting] = useState(false);
  const [typed, setTyped] = useState('');
  const [notice, setNotice] = useState<string | null>(null);

  const moving = revs.some((r) => !TERMINAL.has(r.status));
  async function load() {
    try {
      const [d, r] = await Promise.all([api.getDeployment(id), api.listRevisions(id)]);
      setDep(d);
      setRevs(r.resources);
      setError(null);
    } catch (err) {
      if ((err as { status?: number }).status === 404) setGone(true);
      setError((err as Error).message);
    }
  }
  usePoll(load, moving ? 1000 : 4000, !gone, [api, id]);

  if (gone) {
    return (
      <section>
        <h1>Deployment not found</h1>
        <p>
          It may have been deleted. <a href={href({ page: 'list' })}>Back to deployments</a>
        </p>
      </section>
    );
  }
  if (!dep) return error ? <ErrorBanner error={error} /> : <p className="muted">Loading…</p>;

  const selected = revs.find((r) => r.id === revision) ?? revs[0];
  const logType = pickedLogType ?? (selected?.status === 'DEPLOY_FAILED' ? 'deploy' : 'build');
  const canPlay = Boolean(dep.url && dep.active_revision_id);

  async function doRedeploy(r: Revision) {
    setRedeployOf(null);
    try {
      await api.redeploy(id, r.id);
      setNotice(`Traffic goes to revision #${r.revision_number}.`);
      await load();
    } catch (err) {
      setError((err as Error).message);
    }
  }

  async function doDelete() {
    try {
      await api.deleteDeployment(id);
      navigate({ page: 'list' });
    } catch (err) {
      setError((err as Error).message);
      setDeleting(false);
    }
  }

  return (
    <section>
      <div className="heading">
        <h1>
          {dep.name} <StateBadge summary={dep.status_summary} />
        </h1>
        <div className="actions">
          {canPlay ? (
            <a className="button" href={href({ page: 'playground', id })}>
              Open playground
            </a>
          ) : (
            <span className="muted">The playground opens once a revision is deployed.</span>
          )}
        </div>
      </div>
      {dep.status_summary.state !== 'serving' && dep.status_summary.message && (
        <p className={`state-line ${dep.status_summary.state}`} data-testid="state-message">
          {dep.status_summary.message}
        </p>
      )}
      <ErrorBanner error={error} />
      {notice && (
        <p className="notice" role="status">
          {notice}
        </p>
      )}
      <div className="card">
        <h2>URL</h2>
        {dep.url ? (
          <>
            <p className="url-line">
              <code data-testid="deployment-url">{dep.url}</code> <CopyButton text={dep.url} />
            </p>
            <p className="muted">
              Served on an origin of its own, never this console&apos;s: pages the agent serves cannot reach your
              session here. It answers keys of this workspace (not admin keys) and the playground&apos;s short-lived
              tokens.
            </p>
            <details>
              <summary>Call it with the SDK</summary>
              <pre className="snippet">{sdkSnippet(dep.url)}</pre>
              <CopyButton text={sdkSnippet(dep.url)} label="Copy snippet" />
            </details>
            <details>
              <summary>Use it as an MCP server</summary>
              <p className="url-line">
                <code data-testid="mcp-url">{`${dep.url}/mcp`}</code> <CopyButton text={`${dep.url}/mcp`} />
              </p>
              <p className="muted">
                Streamable HTTP; one tool per assistant. MCP hosts (Claude, Cursor) take this URL and an X-Api-Key
                header with a key of this workspace.
              </p>
              <pre className="snippet">{mcpSnippet(dep.url)}</pre>
              <CopyButton text={mcpSnippet(dep.url)} label="Copy snippet" />
            </details>
            <details>
              <summary>Call it over A2A</summary>
              <p className="url-line">
                <code data-testid="a2a-url">{`${dep.url}/a2a/agent`}</code> <CopyButton text={`${dep.url}/a2a/agent`} />
              </p>
              <p className="muted">
                One A2A agent per assistant (replace &quot;agent&quot; with a graph or assistant id), speaking the 0.3
                and 1.0 protocols; its card is at /a2a/agent/.well-known/agent-card.json.
              </p>
              <pre className="snippet">{a2aSnippet(dep.url)}</pre>
              <CopyButton text={a2aSnippet(dep.url)} label="Copy snippet" />
            </details>
          </>
        ) : (
          <p className="muted">No URL yet: it appears once a runtime serves the deployment.</p>
        )}
      </div>

      <div className="columns">
        <div className="card">
          <h2>Revisions</h2>
          <ol className="timeline">
            {revs.map((r) => {
              const summary = dep.status_summary;
              const active = r.id === summary.serving_revision_id;
              const message = revisionMessage(r, summary.serving_revision_id, summary.serving_revision_number);
              return (
                <li
                  key={r.id}
                  className={`${r.id === selected?.id ? 'selected' : ''}`}
                  data-revision={r.revision_number}
                >
                  <div className="rev-head">
                    <a href={href({ page: 'deployment', id, revision: r.id })}>#{r.revision_number}</a>{' '}
                    <Status value={r.status} />
                    {r.status === 'DEPLOYED' && r.health?.ready === false && <HealthBadge health={r.health} />}
                    {active && <span className="badge ok outline">serving</span>}
                  </div>
                  {message && <div className="rev-msg">{message}</div>}
                  <div className="rev-meta muted">
                    {r.source_revision_config.repo_ref && <span>ref {r.source_revision_config.repo_ref}</span>}
                    {r.repo_commit_sha && (
                      <span title={r.repo_commit_sha}>commit {r.repo_commit_sha.slice(0, 10)}</span>
                    )}
                    {r.image && (
                      <span title={r.image}>image {r.image.length > 40 ? `…${r.image.slice(-38)}` : r.image}</span>
                    )}
                    <span>created {time(r.created_at)}</span>
                    <span>updated {time(r.updated_at)}</span>
                  </div>
                  {REDEPLOYABLE.has(r.status) && !(active && r.id === summary.target_revision_id) && (
                    <button type="button" className="small secondary" onClick={() => setRedeployOf(r)}>
                      {r.revision_number < (revs[0]?.revision_number ?? 0)
                        ? `Roll back to #${r.revision_number}`
                        : `Redeploy #${r.revision_number}`}
                    </button>
                  )}
                </li>
              );
            })}
          </ol>
        </div>

        <div className="card grow">
          <h2>
            Logs {selected ? `of revision #${selected.revision_number}` : ''}{' '}
            {selected && <Status value={selected.status} />}
          </h2>
          {selected ? (
            <>
              <div className="tabs" role="tablist">
                {(['build', 'deploy'] as const).map((t) => (
                  <button
                    key={t}
                    type="button"
                    role="tab"
                    aria-selected={logType === t}
                    className={logType === t ? 'tab on' : 'tab'}
                    onClick={() => setLogType(t)}
                  >
                    {t}
                  </button>
                ))}
              </div>
              <LogViewer
                key={`${selected.id}-${logType}`}
                api={api}
                deploymentId={id}
                revisionId={selected.id}
                type={logType}
                live={!TERMINAL.has(selected.status)}
                fileName={`${dep.name}-r${selected.revision_number}-${logType}.log`}
              />
            </>
          ) : (
            <p className="muted">No revision yet.</p>
          )}
        </div>
      </div>

      <Settings
        api={api}
        dep={dep}
        nextRevision={(revs[0]?.revision_number ?? 0) + 1}
        onSaved={(msg) => {
          setNotice(msg);
          void load();
        }}
      />

      <div className="card danger-zone">
        <h2>Delete</h2>
        <p>Stops the agent and deletes its revisions, secrets, threads and logs.</p>
        <button
          type="button"
          className="danger"
          onClick={() => {
            setTyped('');
            setDeleting(true);
          }}
        >
          Delete deployment…
        </button>
      </div>

      {redeployOf && (
        <Confirm
          title={`Send traffic to revision #${redeployOf.revision_number}?`}
          confirmLabel={`Deploy #${redeployOf.revision_number}`}
          onConfirm={() => void doRedeploy(redeployOf)}
          onClose={() => setRedeployOf(null)}
        >
          <p>
            The deployment URL starts answering with revision #{redeployOf.revision_number} once it is up. Nothing is
            rebuilt.
          </p>
        </Confirm>
      )}
      {deleting && (
        <Confirm
          title={`Delete ${dep.name}?`}
          confirmLabel="Delete"
          danger
          canConfirm={typed === dep.name}
          onConfirm={() => void doDelete()}
          onClose={() => setDeleting(false)}
        >
          <label>
            Type <strong>{dep.name}</strong> to confirm
            <input
              name="confirm-name"
              value={typed}
              onChange={(e) => setTyped(e.target.value)}
              autoComplete="off"
              autoFocus
            />
          </label>
        </Confirm>
      )}
    </section>
  );
}
