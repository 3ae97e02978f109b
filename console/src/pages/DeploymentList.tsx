import { useState } from 'react';
import type { Api, Deployment } from '../api.ts';
import { href } from '../router.ts';
import { ErrorBanner, StateBadge, time, usePoll } from '../ui.tsx';

/** The API's status_summary states, in the words of the filter. */
const STATES = [
  ['serving', 'serving'],
  ['building', 'building'],
  ['failed', 'failed'],
  ['deleting', 'deleting'],
] as const;

export function DeploymentList({ api }: { api: Api }) {
  const [name, setName] = useState('');
  const [status, setStatus] = useState('');
  const [rows, setRows] = useState<Deployment[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  usePoll(
    async () => {
      try {
        const page = await api.listDeployments({
          name_contains: name.trim() || undefined,
          state: status || undefined,
          limit: 100,
        });
        setRows(page.resources);
        setError(null);
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
            {STATES.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
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
                <th>Serving revision</th>
                <th className="col-updated">Updated</th>
                <th className="col-url">URL</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((d) => (
                <tr key={d.id} data-deployment={d.name}>
                  <td>
                    <a href={href({ page: 'deployment', id: d.id })}>{d.name}</a>
                    {d.url && <div className="url url-under">{d.url}</div>}
                  </td>
                  <td className="state">
                    <StateBadge summary={d.status_summary} />
                    {d.status_summary.state === 'failed' && d.status_summary.message && (
                      <div className="state-why">{d.status_summary.message}</div>
                    )}
                  </td>
                  <td>
                    {d.status_summary.serving_revision_number ? `#${d.status_summary.serving_revision_number}` : '—'}
                  </td>
                  <td className="col-updated">{time(d.updated_at)}</td>
                  <td className="url col-url">{d.url ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
