import { useState, type FormEvent } from 'react';
import { ApiError, createApi, type Session } from '../api.ts';

/** Checks the key and workspace with one list call before keeping them for this browser session. */
export function SignIn({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [apiKey, setApiKey] = useState('');
  const [tenant, setTenant] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const session = { apiKey: apiKey.trim(), tenant: tenant.trim() };
    try {
      await createApi(session).listDeployments({ limit: 1 });
      onSignedIn(session);
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      setError(
        status === 401 || status === 403
          ? `Sign-in failed: the API key is not valid for workspace "${session.tenant}". ${(err as Error).message}`
          : `Sign-in failed: ${(err as Error).message}`,
      );
    } finally {
      setBusy(false);
    }
  }

  return (
    <main className="signin">
      <form onSubmit={submit} className="card" aria-labelledby="signin-title">
        <h1 id="signin-title">agentplane console</h1>
        <p className="muted">Sign in with an API key of your workspace. Both stay in this browser tab only.</p>
        <label>
          Workspace id
          <input
            name="tenant"
            value={tenant}
            onChange={(e) => setTenant(e.target.value)}
            required
            autoComplete="username"
            autoFocus
          />
        </label>
        <label>
          API key
          <input
            name="apiKey"
            type="password"
            value={apiKey}
            onChange={(e) => setApiKey(e.target.value)}
            required
            autoComplete="off"
          />
        </label>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
