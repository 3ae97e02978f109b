import { useMemo, useState } from 'react';
import { createApi, loadSession, saveSession, type Session } from './api.ts';
import { href, useRoute } from './router.ts';
import { SignIn } from './pages/SignIn.tsx';
import { DeploymentList } from './pages/DeploymentList.tsx';
import { CreateDeployment } from './pages/CreateDeployment.tsx';
import { DeploymentPage } from './pages/DeploymentPage.tsx';
import { Playground } from './pages/Playground.tsx';

export function App() {
  const [session, setSession] = useState<Session | null>(() => loadSession());
  const route = useRoute();
  const api = useMemo(() => (session ? createApi(session) : null), [session]);

  if (!session || !api) {
    return (
      <SignIn
        onSignedIn={(s) => {
          saveSession(s);
          setSession(s);
        }}
      />
    );
  }
  const signOut = () => {
    saveSession(null);
    setSession(null);
  };
  return (
    <>
      <header className="topbar">
        <a className="brand" href={href({ page: 'list' })}>
          agentplane
        </a>
        <nav>
          <a href={href({ page: 'list' })}>Deployments</a>
          <a href={href({ page: 'new' })}>New deployment</a>
        </nav>
        <span className="workspace" title="workspace">
          {session.tenant}
        </span>
        <button type="button" className="link" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main>
        {route.page === 'list' && <DeploymentList api={api} />}
        {route.page === 'new' && <CreateDeployment api={api} />}
        {route.page === 'deployment' && (
          <DeploymentPage key={route.id} api={api} id={route.id} revision={route.revision} />
        )}
        {route.page === 'playground' && <Playground key={route.id} api={api} id={route.id} />}
      </main>
    </>
  );
}
