// Hash routes (#/deployments/<id>): the server serves one page at / and /api-host/, and no console path can
// collide with an API path or with the deployment URLs of `agentplane dev` (/deployments/<id>/...).
import { useEffect, useState } from 'react';

export type Route =
  | { page: 'list' }
  | { page: 'new' }
  | { page: 'deployment'; id: string; revision?: string }
  | { page: 'playground'; id: string };

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'new') return { page: 'new' };
  if (parts[0] === 'deployments' && parts[1]) {
    if (parts[2] === 'playground') return { page: 'playground', id: parts[1] };
    if (parts[2] === 'revisions' && parts[3]) return { page: 'deployment', id: parts[1], revision: parts[3] };
    return { page: 'deployment', id: parts[1] };
  }
  return { page: 'list' };
}

export function href(route: Route): string {
  switch (route.page) {
    case 'list':
      return '#/';
    case 'new':
      return '#/new';
    case 'deployment':
      return `#/deployments/${encodeURIComponent(route.id)}${route.revision ? `/revisions/${encodeURIComponent(route.revision)}` : ''}`;
    case 'playground':
      return `#/deployments/${encodeURIComponent(route.id)}/playground`;
  }
}

export function navigate(route: Route): void {
  location.hash = href(route);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}
