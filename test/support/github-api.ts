// A small GitHub Enterprise Server stand-in for tests: one HTTP server with the REST endpoints Octokit calls for a
// GitHub App under /api/v3 (an installation, installation access tokens, the installation's repositories with Link
// pagination, token revocation) and the repositories themselves over git's smart HTTP (`git http-backend`) with
// Basic auth x-access-token:<installation token>, as github.com serves them. App JWTs are checked against the App's
// public key (RS256, iss = App id, iat/exp); tokens are scoped to the repositories they were minted for.
import { spawn } from 'node:child_process';
import { createPublicKey, generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { basename, dirname } from 'node:path';

/** `path`: a bare repository served at /<owner>/<name>.git (repositories without one are only listed). */
export type FakeRepo = { id: number; owner: string; name: string; default_branch: string; path?: string };
export type FakeInstallation = { id: number; account: string; repos: FakeRepo[]; createdAt: string };

export type FakeGitHub = {
  url: string;
  apiUrl: string;
  host: string;
  appId: string;
  privateKey: string;
  installations: Map<number, FakeInstallation>;
  /** Every installation token minted, in order. */
  tokens: string[];
  /** Requests seen: method, path, and who authenticated (app / token / none). */
  requests: { method: string; path: string; auth: string }[];
  /** The next answers to a token request: a status to fail with (401, 404, 429 rate limit). */
  failMint: number[];
  /** The App's OAuth client (user authorization during installation). */
  clientId: string;
  clientSecret: string;
  /**
   * A user signs in while installing: the code GitHub would put on the setup redirect, good once, for a user who
   * can reach `installationIds` (GET /user/installations with the token it is exchanged for).
   */
  userCode(installationIds: number[]): string;
  close(): Promise<void>;
};

function send(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body === undefined ? undefined : JSON.stringify(body));
}

function b64urlJson(part: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/** RS256 JWT of the App: signature by its key, iss its id, not expired, at most 10 minutes long. */
function appJwtValid(jwt: string, publicKey: KeyObject, appId: string): boolean {
  const [h, p, sig] = jwt.split('.');
  if (!h || !p || !sig) return false;
  const header = b64urlJson(h);
  const claims = b64urlJson(p);
  if (header?.alg !== 'RS256' || !claims) return false;
  if (!verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(sig, 'base64url'))) return false;
  const now = Math.floor(Date.now() / 1000);
  const iat = Number(claims.iat);
  const exp = Number(claims.exp);
  return String(claims.iss) === appId && iat <= now + 60 && exp > now && exp - iat <= 660;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** `git http-backend` as CGI for one repository folder. */
function serveGit(req: IncomingMessage, res: ServerResponse, projectRoot: string, pathInfo: string, query: string) {
  const cgi = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      REQUEST_METHOD: req.method,
      PATH_INFO: pathInfo,
      QUERY_STRING: query,
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_USER: 'x-access-token',
      REMOTE_ADDR: '127.0.0.1',
      ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
      ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
    },
  });
  req.pipe(cgi.stdin);
  let head = Buffer.alloc(0);
  let headerDone = false;
  cgi.stdout.on('data', (chunk: Buffer) => {
    if (headerDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    headerDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
      const i = line.indexOf(':');
      const name = line.slice(0, i).trim();
      const value = line.slice(i + 1).trim();
      if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
      else res.setHeader(name, value);
    }
    res.writeHead(status);
    res.write(head.subarray(end + 4));
  });
  cgi.on('close', () => res.end());
}

export async function startFakeGitHub(opts: { appId?: string } = {}): Promise<FakeGitHub> {
  const appId = opts.appId ?? '424242';
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const pub = createPublicKey(publicKey.export({ type: 'spki', format: 'pem' }));
  const installations = new Map<number, FakeInstallation>();
  const minted = new Map<string, { installation: number; repos: string[] | undefined; revoked: boolean }>();
  const state: FakeGitHub = {
    url: '',
    apiUrl: '',
    host: '',
    appId,
    privateKey: pem,
    installations,
    tokens: [],
    requests: [],
    failMint: [],
    clientId: 'Iv1.fakeclientid',
    clientSecret: `fake-client-secret-${randomBytes(8).toString('hex')}`,
    userCode: (ids) => {
      const code = `code-${randomBytes(10).toString('hex')}`;
      userCodes.set(code, ids);
      return code;
    },
    close: async () => undefined,
  };
  const userCodes = new Map<string, number[]>();
  const userTokens = new Map<string, number[]>();

  const bearerOrToken = (a: string) => /^(?:token|bearer) (.+)$/i.exec(a)?.[1];
  const tokenOf = (req: IncomingMessage) => {
    const a = req.headers.authorization ?? '';
    const m = /^(?:token|bearer) (.+)$/i.exec(a);
    const t = m?.[1] && minted.get(m[1]);
    return t && !t.revoked ? { token: m![1]!, ...t } : undefined;
  };

  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const path = url.pathname;
      const auth = req.headers.authorization ?? '';
      const bearer = /^bearer (.+)$/i.exec(auth)?.[1];
      const isApp = !!bearer && bearer.split('.').length === 3 && appJwtValid(bearer, pub, appId);
      const tok = tokenOf(req);
      state.requests.push({ method: req.method!, path, auth: isApp ? 'app' : tok ? 'token' : auth ? 'bad' : 'none' });

      // The OAuth web flow's code exchange (on the web host, as github.com has it): a code is good once.
      if (path === '/login/oauth/access_token' && req.method === 'POST') {
        const raw = await readBody(req);
        const body = (
          /json/.test(req.headers['content-type'] ?? '')
            ? JSON.parse(raw || '{}')
            : Object.fromEntries(new URLSearchParams(raw))
        ) as Record<string, string>;
        const ids = userCodes.get(body.code ?? '');
        if (body.client_id !== state.clientId || body.client_secret !== state.clientSecret || !ids)
          return send(res, 200, { error: 'bad_verification_code', error_description: 'The code is incorrect.' });
        userCodes.delete(body.code!);
        const token = `ghu_${randomBytes(18).toString('base64url')}`;
        userTokens.set(token, ids);
        return send(res, 200, { access_token: token, token_type: 'bearer', scope: '' });
      }

      if (path.startsWith('/api/v3/')) {
        const api = path.slice('/api/v3'.length);
        if (api === '/user/installations' && req.method === 'GET') {
          const ids = bearerOrToken(auth) && userTokens.get(bearerOrToken(auth)!);
          if (!ids) return send(res, 401, { message: 'Bad credentials' });
          const list = ids.map((id) => installations.get(id)).filter((i) => i !== undefined);
          return send(res, 200, {
            total_count: list.length,
            installations: list.map((i) => ({ id: i.id, account: { login: i.account }, app_id: Number(appId) })),
          });
        }
        let m = /^\/app\/installations\/(\d+)$/.exec(api);
        if (m && req.method === 'GET') {
          if (!isApp) return send(res, 401, { message: 'A JSON web token could not be decoded' });
          const inst = installations.get(Number(m[1]));
          if (!inst) return send(res, 404, { message: 'Not Found' });
          return send(res, 200, {
            id: inst.id,
            account: { login: inst.account, id: inst.id * 10, type: 'Organization' },
            created_at: inst.createdAt,
            app_id: Number(appId),
          });
        }
        m = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(api);
        if (m && req.method === 'POST') {
          const body = JSON.parse((await readBody(req)) || '{}') as { repositories?: string[] };
          const fail = state.failMint.shift();
          if (fail === 429)
            return send(
              res,
              403,
              { message: 'API rate limit exceeded' },
              {
                'x-ratelimit-remaining': '0',
                'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 600),
              },
            );
          if (fail) return send(res, fail, { message: fail === 401 ? 'Bad credentials' : 'Not Found' });
          if (!isApp) return send(res, 401, { message: 'A JSON web token could not be decoded' });
          const inst = installations.get(Number(m[1]));
          if (!inst) return send(res, 404, { message: 'Not Found' });
          if (body.repositories?.some((r) => !inst.repos.some((x) => x.name === r)))
            return send(res, 422, {
              message:
                'There is at least one repository that does not exist or is not accessible to the parent installation.',
            });
          const token = `ghs_${randomBytes(18).toString('base64url')}`;
          minted.set(token, { installation: inst.id, repos: body.repositories, revoked: false });
          state.tokens.push(token);
          return send(res, 201, {
            token,
            expires_at: new Date(Date.now() + 3600_000).toISOString(),
            permissions: { contents: 'read' },
            repository_selection: body.repositories ? 'selected' : 'all',
          });
        }
        if (api === '/installation/repositories' && req.method === 'GET') {
          if (!tok) return send(res, 401, { message: 'Bad credentials' });
          const inst = installations.get(tok.installation)!;
          const perPage = Math.min(Number(url.searchParams.get('per_page') ?? 30), 100);
          const page = Number(url.searchParams.get('page') ?? 1);
          const visible = inst.repos.filter((r) => !tok.repos || tok.repos.includes(r.name));
          const slice = visible.slice((page - 1) * perPage, page * perPage);
          const pages = Math.ceil(visible.length / perPage);
          const link: Record<string, string> =
            page < pages
              ? {
                  link: `<${state.apiUrl}/installation/repositories?per_page=${perPage}&page=${page + 1}>; rel="next", <${state.apiUrl}/installation/repositories?per_page=${perPage}&page=${pages}>; rel="last"`,
                }
              : {};
          return send(
            res,
            200,
            {
              total_count: visible.length,
              repositories: slice.map((r) => ({
                id: r.id,
                name: r.name,
                full_name: `${r.owner}/${r.name}`,
                owner: { login: r.owner },
                private: true,
                html_url: `${state.url}/${r.owner}/${r.name}`,
                clone_url: `${state.url}/${r.owner}/${r.name}.git`,
                default_branch: r.default_branch,
              })),
            },
            link,
          );
        }
        if (api === '/installation/token' && req.method === 'DELETE') {
          if (!tok) return send(res, 401, { message: 'Bad credentials' });
          minted.get(tok.token)!.revoked = true;
          res.writeHead(204).end();
          return;
        }
        return send(res, 404, { message: 'Not Found' });
      }

      // git smart HTTP: /<owner>/<repo>[.git]/info/refs, /git-upload-pack, ...
      const g = /^\/([^/]+)\/([^/]+?)(?:\.git)?(\/(?:info\/refs|git-upload-pack|HEAD|objects\/.+))$/.exec(path);
      if (g) {
        const basic = /^basic (.+)$/i.exec(auth)?.[1];
        const [user, ...rest] = basic ? Buffer.from(basic, 'base64').toString().split(':') : [];
        const t = rest.join(':');
        const grant = user === 'x-access-token' ? minted.get(t) : undefined;
        const inst = grant && !grant.revoked ? installations.get(grant.installation) : undefined;
        const repo = inst?.repos.find((r) => r.owner === g[1] && r.name === g[2]);
        if (!repo || !repo.path || (grant!.repos && !grant!.repos.includes(repo.name))) {
          res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="GitHub"' }).end();
          return;
        }
        return serveGit(req, res, dirname(repo.path), `/${basename(repo.path)}${g[3]}`, url.search.slice(1));
      }
      send(res, 404, { message: 'Not Found' });
    })().catch((err: Error) => {
      if (!res.headersSent) send(res, 500, { message: err.message });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  state.host = `127.0.0.1:${port}`;
  state.url = `http://${state.host}`;
  state.apiUrl = `${state.url}/api/v3`;
  state.close = () => new Promise((r) => server.close(() => r()));
  return state;
}
