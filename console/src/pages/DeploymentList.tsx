import { useState } from 'react';
import type { Api, Deployment } from '../api.ts';
import { href } from '../router.ts';
import { ErrorBanner, HealthBadge, Status, time, usePoll } from '../ui.tsx';

const STATUSES = ['READY', 'AWAITING_DATABASE', 'UNUSED', 'AWAITING_DELETE', 'UNKNOWN'];

export function DeploymentList({ api }: { api: Api }) {
  const [name, setName] = useState('');
  const [status, setStatus] = useState('');
  const [rows, setRows] = useState<Deployment[] | null>(null);
  const [activeNumbers, setActiveNumbers] = useState<Record<string, number>>({});
  const [error, setError] = useState<string | null>(null);

  usePoll(
    async () => {
      try {
        const page = await api.listDeployments({
          name_contains: name.trim() || undefined,
          status: status || undefined,
          limit: 100,
        });
        setRows(page.resources);
        setError(null);
        // Revision numbers read better than ids; one small call per deployment that has an active revision.
        const pairs = await Promise.all(
          page.resources
            .filter((d) => d.active_revision_id)
            .map(
              async (d) =>
                [
                  d.id,
                  (await api.getRevision(d.id, d.active_revision_id!).catch(() => null))?.revision_number,
                ] as const,
            ),
        );
        setActiveNumbers(Object.fromEntries(pairs.filter((p): p is readonly [string, number] => p[1] !== undefined)));
      } catch (err) {
        setError((err as Error).message);
      }
    },
    3000,
    true,
    [api, name, status],
  );

  return (
    <section>
      <div className="heading">
        <h1>Deployments</h1>
        <a className="button" href={href({ page: 'new' })}>
          New deployment
        </a>
      </div>
      <div className="filters" role="search">
        <label>
          Name contains
          <input value={name} onChange={(e) => setName(e.target.value)} placeholder="filter by name" />
        </label>
        <label>
          Status
          <select value={status} onChange={(e) => setStatus(e.target.value)}>
            <option value="">any</option>
            {STATUSES.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
      </div>
      <ErrorBanner error={error} />
      {rows === null ? (
        <p className="muted">Loading…</p>
      ) : rows.length === 0 ? (
        <p className="muted">
          No deployments{name || status ? ' match' : ' yet'}. <a href={href({ page: 'new' })}>Create one</a>.
        </p>
      ) : (
        <div className="table-wrap">
          <table>
            <thead>
              <tr>
                <th>Name</th>
                <th>Status</th>
                <th>Active revision</th>
                <th>Updated</th>
                <th>URL</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((d) => (
                <tr key={d.id} data-deployment={d.name}>
                  <td>
                    <a href={href({ page: 'deployment', id: d.id })}>{d.name}</a>
                  </td>
                  <td>
                    <Status value={d.status} /> <HealthBadge health={d.health} />
                  </td>
                  <td>{activeNumbers[d.id] ? `#${activeNumbers[d.id]}` : '—'}</td>
                  <td>{time(d.updated_at)}</td>
                  <td className="url">{d.url ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
