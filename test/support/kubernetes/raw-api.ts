// Raw HTTP requests to the API-server double, for tests of the double itself: the status code, the JSON body and
// the Warning headers exactly as a client receives them.
import type { KubeApiServer } from '../kube-apiserver/server.ts';

type Json = Record<string, any>;
export type RawAnswer = { status: number; body: Json; warnings: string[] };

export function rawApi(api: KubeApiServer, token = api.token) {
  return async (method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<RawAnswer> => {
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    // Warning: 299 - "text" (several values are joined with ", " by fetch; each is a quoted string).
    const header = res.headers.get('warning') ?? '';
    const warnings = [...header.matchAll(/299 - "((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/\\(.)/g, '$1'));
    return { status: res.status, body: text ? (JSON.parse(text) as Json) : {}, warnings };
  };
}
